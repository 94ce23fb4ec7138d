'use strict'
// Scenario 13: the cross-process wake round trip, against the in-process one.
// Target: a cross-process round trip within 1.5× the time of the in-process
// one. Two parties hand a turn back and forth (lib/pingpong.js: each
// blocks until it is its turn, then hands the turn over with a store and a
// notify); one round trip = the turn goes there and back. Implementations:
//   in-process           scenario 1's main ↔ worker: the main thread and a
//                        worker over a SharedArrayBuffer, shared-futex's
//                        wait / notify (the baseline of the target)
//   in-process native    the same over V8's Atomics.wait / notify (reference)
//   in-process async     scenario 2's: the main thread `await`s waitAsync,
//                        the worker blocks in wait (the baseline of the
//                        async cross-process case)
//   cross-process        this process's main thread and a child process
//                        (`node benchmark/children/region-pong.js`), each
//                        blocking in shared-futex's wait on an Int32Array
//                        over one SharedRegion (64 bytes, a fresh name per
//                        measurement)
//   cross-process async  the same with this process's side `await`ing
//                        waitAsync (the child still blocks in wait)
//   unix socket          what one would use without shared memory: the
//                        main thread writes 1 byte to a Unix domain socket
//                        (`net`), the child echoes it back, and the next
//                        byte goes when the echo arrives (both sides on
//                        their event loops)
// Every case is measured on the machine as it is and again with one busy
// process per core spinning from before the warm-up to the end
// (lib/spinners.js, as scenario 12 does): shared-futex's in-process wait
// spins (yields) before it parks, and a spin looks good on idle CPUs only.
// Figures: round trips per second; the mean round trip time (1 / rate);
// CPU time per round trip, of this process and, for the cross-process
// cases, of the child too (its /proc/<pid>/stat: 10 ms ticks, about 1 % of
// a 1 s window).
//
// Every wait of this process's side is bounded (10 s, then the measurement
// fails); the child checks every second that its parent is alive and exits
// by itself past its time limit, and is SIGKILLed if it has not exited 5 s
// after that. The region's name is unlinked as soon as the child has
// opened it (both keep their mappings), and again at the end, whatever
// happened: nothing is left in /dev/shm (nor, once the child has
// connected, the socket's name in the temporary directory).

const fs = require('fs')
const os = require('os')
const net = require('net')
const path = require('path')
const { spawn } = require('child_process')
const { futex, ROOT } = require('../lib/impl')
const { now } = require('../lib/threads')
const { ping, pingAsync, roundTripFigures } = require('../lib/pingpong')
const { addChildrenCpu, ownCpuMs } = require('../lib/child')
const { startSpinners, stopSpinners, cpuMsOf } = require('../lib/spinners')
const { mainToWorker } = require('./sync-pingpong')
const { asyncPingPong } = require('./async-pingpong')

const CHILD = path.join(__dirname, '..', 'children', 'region-pong.js')
const BYTES = 64
// Bound of every wait of this process's side.
const TIMEOUT = 10000
let serial = 0

// Starts the child; `ready` resolves once it prints "ready", `exited` once
// it has exited (with { code, signal }), `finish()` once it has exited
// cleanly (then its CPU time is added to the benchmark's own,
// lib/child.js), `kill()` ends it whatever it is doing.
function startChild (args, limitMs) {
  const child = spawn(process.execPath, [CHILD, ...args, String(limitMs)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  let exit = null
  child.stdout.setEncoding('utf8')
  child.stderr.setEncoding('utf8')
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    exit = { code, signal }
    resolve(exit)
  }))
  const killer = setTimeout(() => child.kill('SIGKILL'), limitMs + 5000)
  const why = () => `the child ${exit.signal ? `was killed (${exit.signal})` : `exited with code ${exit.code}`}: ${err.trim() || out.trim()}`
  const ready = new Promise((resolve, reject) => {
    child.once('error', reject)
    exited.then(() => reject(new Error(why())))
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes('ready\n')) resolve()
    })
    child.stderr.on('data', (d) => { err += d })
  })
  ready.catch(() => {})
  return {
    pid: child.pid,
    ready,
    exited,
    async finish (ms = 10000) {
      const timer = setTimeout(() => child.kill('SIGKILL'), ms)
      await exited
      clearTimeout(timer)
      if (exit.code !== 0) throw new Error(why())
      const lines = out.trim().split('\n')
      const r = JSON.parse(lines[lines.length - 1])
      if (typeof r.ownCpuMs === 'number') addChildrenCpu(r.ownCpuMs)
    },
    async kill () {
      clearTimeout(killer)
      if (exit === null) {
        child.kill('SIGKILL')
        await exited
      }
    }
  }
}

// This process's CPU time and the child's, in ms.
function bothCpu (pid) {
  return () => ownCpuMs() + cpuMsOf(pid)
}

async function crossProcess (asyncSide, { warmMs, ms }) {
  const { SharedRegion: Region } = require(ROOT)
  const name = `bench13-${process.pid}-${++serial}`
  const limit = warmMs + ms + 30000
  let region = null
  let child = null
  try {
    region = Region.open(name, { bytes: BYTES })
    const cells = new Int32Array(region.buffer)
    child = startChild(['region', name, String(BYTES)], limit)
    await child.ready
    Region.unlink(name)
    const f = futex('ours')
    const from = now() + warmMs
    const cpu = bothCpu(child.pid)
    const r = asyncSide
      ? await pingAsync(f, cells, 0, from, from + ms, TIMEOUT, cpu)
      : ping(f, cells, 0, from, from + ms, TIMEOUT, cpu)
    await child.finish()
    return figures(r)
  } finally {
    if (child) await child.kill()
    if (region) region.close()
    try { Region.unlink(name) } catch {}
  }
}

// One byte there and back over a Unix domain socket, the next as soon as
// the echo arrives; counted as ping() counts (warm-up until `from`).
function socketPingPong (socket, from, to, cpu) {
  return new Promise((resolve, reject) => {
    const one = Buffer.from([1])
    let count = 0
    let t0 = 0
    let cpu0 = 0
    let pending = false
    const timer = setTimeout(() => reject(new Error(`no answer within ${TIMEOUT} ms`)), to - now() + TIMEOUT)
    socket.on('error', reject)
    socket.on('close', () => reject(new Error('the connection closed')))
    socket.on('data', (d) => {
      if (d.length !== 1 || !pending) {
        reject(new Error(`unexpected ${d.length} bytes`))
        return
      }
      pending = false
      const t = now()
      if (t0 === 0) {
        if (t >= from) {
          t0 = t
          cpu0 = cpu()
        }
      } else {
        count++
        if (t >= to) {
          const used = cpu() - cpu0
          clearTimeout(timer)
          resolve({ count, elapsedMs: t - t0, cpuMs: used })
          return
        }
      }
      pending = true
      socket.write(one)
    })
    pending = true
    socket.write(one)
  })
}

async function unixSocket ({ warmMs, ms }) {
  const file = path.join(os.tmpdir(), `shared-futex-bench13-${process.pid}-${++serial}.sock`)
  const limit = warmMs + ms + 30000
  const server = net.createServer()
  let child = null
  let socket = null
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(file, resolve)
    })
    const connected = new Promise((resolve) => server.once('connection', resolve))
    child = startChild(['socket', file], limit)
    let timer
    socket = await Promise.race([
      connected,
      child.ready, // rejects when the child exits (it prints no "ready")
      new Promise((resolve, reject) => { timer = setTimeout(() => reject(new Error('the child did not connect')), TIMEOUT) })
    ])
    clearTimeout(timer)
    fs.unlinkSync(file) // connected: the name is no longer needed
    const from = now() + warmMs
    const r = await socketPingPong(socket, from, from + ms, bothCpu(child.pid))
    socket.removeAllListeners('close')
    socket.end()
    await child.finish()
    return figures(r)
  } finally {
    if (socket) socket.destroy()
    if (child) await child.kill()
    await new Promise((resolve) => server.close(resolve))
    try { fs.unlinkSync(file) } catch {}
  }
}

function figures (r) {
  const f = roundTripFigures(r.count, r.elapsedMs, r.cpuMs)
  return { rate: f.rate, rttUs: 1e6 / f.rate, cpuUs: f.cpuUs }
}

const IMPLS = {
  'in-process': async (opts) => withRtt(await mainToWorker('ours', opts)),
  'in-process native': async (opts) => withRtt(await mainToWorker('native', opts)),
  'in-process async': async (opts) => withRtt(await asyncPingPong('ours', opts, TIMEOUT)),
  'cross-process': (opts) => crossProcess(false, opts),
  'cross-process async': (opts) => crossProcess(true, opts),
  'unix socket': unixSocket
}

function withRtt (f) {
  return { ...f, rttUs: 1e6 / f.rate }
}

// Runs `measure` with one spinning process per core when `busy`.
async function loaded (busy, measure, opts) {
  const spinners = busy ? await startSpinners(opts.warmMs + opts.ms + 30000) : null
  try {
    return await measure(opts)
  } finally {
    if (spinners) await stopSpinners(spinners)
  }
}

// Whether this platform and Node can share a region between processes.
function available () {
  const name = `bench13-probe-${process.pid}`
  try {
    const Region = require(ROOT).SharedRegion
    Region.open(name, { bytes: BYTES }).close()
    Region.unlink(name)
    return null
  } catch (e) {
    return `no SharedRegion here: ${e.message}`
  }
}

const METRICS = [
  { name: 'rate', label: 'round trips/s', unit: '/s', better: 'higher' },
  { name: 'rttUs', label: 'round trip time (mean)', unit: 'us', better: 'lower' },
  { name: 'cpuUs', label: 'CPU time per round trip (both parties)', unit: 'us', better: 'lower' }
]

const cases = []
const comparisons = []
for (const busy of [false, true]) {
  const id = busy ? '13-busy' : '13-idle'
  cases.push({
    id,
    label: busy ? `with ${os.cpus().length} busy processes (one per core)` : 'idle machine',
    impls: Object.keys(IMPLS),
    metrics: METRICS,
    measure: (impl, opts) => loaded(busy, IMPLS[impl], opts)
  })
  comparisons.push(
    { case: id, metric: 'rttUs', ours: 'cross-process', base: 'in-process', ratio: 'ours/base', op: '<=', target: 1.5 },
    { case: id, metric: 'rttUs', ours: 'cross-process async', base: 'in-process async', ratio: 'ours/base', op: '<=', target: 1.5 },
    // Native parks at every wait, as the cross-process wait does: the same
    // kind of round trip (two sleeps, two wake-ups), one process.
    { case: id, metric: 'rttUs', ours: 'cross-process', base: 'in-process native', ratio: 'ours/base', op: '<=', target: null },
    { case: id, metric: 'cpuUs', ours: 'cross-process', base: 'in-process', ratio: 'ours/base', op: '<=', target: null },
    { case: id, metric: 'rate', ours: 'cross-process', base: 'unix socket', target: null },
    { case: id, metric: 'rate', ours: 'cross-process async', base: 'unix socket', target: null },
    { case: id, metric: 'rate', ours: 'in-process', base: 'in-process native', target: null }
  )
}

module.exports = { id: '13', title: 'Cross-process ping-pong (SharedRegion)', available, cases, comparisons, IMPLS }
