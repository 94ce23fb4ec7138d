'use strict'
// One measurement of scenario 12's log transport, in a fresh process (so
// that its peak RSS is this transport's alone):
//   node benchmark/children/log-transport.js <impl> <lines>
//     impl   'channel'             a Channel ('string' codec, 4 MiB ring):
//                                  the main thread send()s each line, a
//                                  worker recvMany()s and writes each batch
//            'thread-stream'       thread-stream (pino's transports), async
//                                  (sync: false, pino's default), 4 MiB buffer
//            'thread-stream-sync'  the same with sync: true
// The main thread writes `lines` pino-like JSON lines (about 170 bytes
// each) as fast as it can, then ends the transport (Channel: flushSync(),
// then close(); thread-stream: end()); the worker writes them to a file
// under os.tmpdir() with fs.writeSync. Measured from the first line to the
// worker's exit (the file complete and closed); the file's size is checked,
// then it is removed. Prints one JSON line:
//   { totalMs, mainMs, peakRss, rssBefore, cpuMs, bytes, ownCpuMs }
//   mainMs   the main thread's write loop alone (what logging costs the
//            application's thread)
//   peakRss  the process's peak resident set (VmHWM, see peakRss below), bytes
//   rssBefore  its resident set before the transport was made (Node itself
//            and the addon: about 40 MB)
//   cpuMs    CPU time of the whole process (every thread) over totalMs
const fs = require('fs')
const os = require('os')
const path = require('path')
const { once } = require('events')
const { Worker } = require('worker_threads')
const { performance } = require('perf_hooks')
const { Channel } = require('../..')
const { ownCpuMs } = require('../lib/child')

const RING = 4 << 20 // thread-stream's default buffer size too
const BATCH = 1024 // lines a recvMany takes at most
const WRITER = path.join(__dirname, '..', 'workers', 'log-writer.js')
const DESTINATION = path.join(__dirname, '..', 'workers', 'log-destination.js')

const [impl, linesArg] = process.argv.slice(2)
const lines = Number(linesArg)
const file = path.join(os.tmpdir(), `shared-futex-bench-log-${process.pid}.log`)

// A line as pino writes one: JSON, made by string concatenation.
const PID = process.pid
const HOST = 'bench-host'
const T0 = Date.now()
function line (i) {
  return '{"level":30,"time":' + (T0 + i) + ',"pid":' + PID + ',"hostname":"' + HOST +
    '","reqId":' + i + ',"req":{"method":"GET","url":"/api/items/' + (i % 1000) +
    '"},"responseTime":' + (i % 97) + ',"msg":"request completed"}\n'
}

async function viaChannel () {
  const ch = new Channel({ bytes: RING, codec: 'string' })
  const w = new Worker(WRITER, { workerData: { handle: ch.handle, file, batch: BATCH } })
  const exited = once(w, 'exit')
  await once(w, 'message') // the worker is a receiver, its file open
  const t0 = performance.now()
  for (let i = 0; i < lines; i++) ch.send(line(i))
  const mainMs = performance.now() - t0
  ch.flushSync()
  ch.close()
  await exited
  return { t0, mainMs }
}

async function viaThreadStream (sync) {
  const ThreadStream = require('thread-stream')
  const stream = new ThreadStream({ filename: DESTINATION, workerData: { file }, sync, bufferSize: RING })
  const exited = once(stream.worker, 'exit')
  await once(stream, 'ready')
  const t0 = performance.now()
  for (let i = 0; i < lines; i++) stream.write(line(i))
  const mainMs = performance.now() - t0
  stream.end()
  await exited
  return { t0, mainMs }
}

// The peak resident set of this process, in bytes: VmHWM (Linux). Not
// resourceUsage().maxRSS there: a process started by another inherits in
// it the RSS its parent had when it forked (the benchmark's own, hundreds
// of MB). maxRSS where /proc is missing.
function peakRss () {
  try {
    const m = /^VmHWM:\s*(\d+) kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))
    if (m) return Number(m[1]) * 1024
  } catch {}
  return process.resourceUsage().maxRSS * 1024
}

async function main () {
  const cpu0 = process.cpuUsage()
  const rssBefore = process.memoryUsage.rss()
  try {
    let r
    if (impl === 'channel') r = await viaChannel()
    else if (impl === 'thread-stream') r = await viaThreadStream(false)
    else if (impl === 'thread-stream-sync') r = await viaThreadStream(true)
    else throw new Error(`unknown implementation ${impl}`)
    const totalMs = performance.now() - r.t0
    const cpu = process.cpuUsage(cpu0)
    const peak = peakRss()
    // The file is checked after the peak is read: making every line again
    // to count its bytes grows the heap.
    let expected = 0
    for (let i = 0; i < lines; i++) expected += Buffer.byteLength(line(i))
    const bytes = fs.statSync(file).size
    if (bytes !== expected) throw new Error(`${impl}: the file has ${bytes} bytes, expected ${expected}`)
    console.log(JSON.stringify({
      totalMs,
      mainMs: r.mainMs,
      peakRss: peak,
      rssBefore,
      cpuMs: (cpu.user + cpu.system) / 1000,
      bytes,
      ownCpuMs: ownCpuMs()
    }))
  } finally {
    fs.rmSync(file, { force: true })
  }
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
