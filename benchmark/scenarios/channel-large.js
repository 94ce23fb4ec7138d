'use strict'
// Scenario 12: Channel with large messages, as a log transport, and
// createSyncFn on a loaded machine, each against what users pick instead.
//   64 KiB      a worker sends 64 KiB Uint8Arrays as fast as it can; the
//               main thread (`for await`) or another worker (blocking
//               `recv` / 'message' events) receives them. Channel ('bytes'
//               codec) with a 1 MiB and with a 4 MiB ring, against
//               MessagePort.postMessage by structured clone and with the
//               ArrayBuffer transferred (a fresh one per message, which the
//               sender gives up). Figure: messages per second. postMessage
//               keeps at most 1024 messages in flight
//               (benchmark/lib/channel-flow.js).
//   log         the main thread writes 1M pino-like JSON lines (about 170 B)
//               to a worker that writes them to a file with fs.writeSync,
//               measured until the file is complete (the worker has
//               exited), each in a fresh process
//               (benchmark/children/log-transport.js): a 'string' Channel
//               (4 MiB ring; send per line, recvMany(1024) and one write
//               per batch, flushSync() and close() at the end) against
//               thread-stream from npm (pino's transports; 4 MiB buffer),
//               async (pino's default) and sync. Figures: time until the
//               file is complete, the main thread's time in its write loop,
//               peak RSS of the process, CPU time of the process.
//   sync call   createSyncFn of an async add against synckit's, as in
//               scenario 11, on a quiet machine and with one busy process
//               per core spinning meanwhile (benchmark/lib/spinners.js).
//               Figures: calls per second, CPU time of the whole process
//               (caller and worker threads) per call.

const os = require('os')
const path = require('path')
const { MessageChannel } = require('worker_threads')
const { Channel } = require('../..')
const { withWorkers, go, startTime, now } = require('../lib/threads')
const { consumeAsync, consumePort } = require('../lib/channel-flow')
const { runChild } = require('../lib/child')
const { syncCall, optional } = require('../lib/sync-calls')

const WORKER = path.join(__dirname, '..', 'workers', 'channel-worker.js')
const LOG = path.join(__dirname, '..', 'children', 'log-transport.js')
const SIZE = 65536
const LINES = 1000000
const MiB = 1 << 20


// The implementations of the 64 KiB cases, by name.
const LARGE = {
  'channel 1 MiB': { ring: MiB },
  'channel 4 MiB': { ring: 4 * MiB },
  postMessage: { transfer: false },
  'postMessage transfer': { transfer: true }
}

async function throughput (where, name, { warmMs, ms }) {
  const impl = LARGE[name]
  const flow = new Int32Array(new SharedArrayBuffer(8))
  const ch = impl.ring ? new Channel({ bytes: impl.ring, codec: 'bytes' }) : null
  const { port1, port2 } = ch ? {} : new MessageChannel()
  const base = { impl: ch ? 'channel' : 'postMessage', transfer: impl.transfer === true, size: SIZE, flow, ms, handle: ch ? ch.handle : undefined }
  const specs = [{ file: WORKER, data: { ...base, role: 'produce', port: port1 }, transfer: port1 ? [port1] : [] }]
  if (where === 'worker') specs.push({ file: WORKER, data: { ...base, role: 'consume', port: port2 }, transfer: port2 ? [port2] : [] })
  const { main, results } = await withWorkers(specs, async (ctl) => {
    go(ctl, warmMs)
    if (where !== 'main') return null
    const from = startTime(ctl)
    return ch ? consumeAsync(base, ch, from) : consumePort(base, port2, from)
  })
  const r = where === 'main' ? main : results[1]
  return { rate: r.count / (r.elapsedMs / 1000) }
}

const LOG_IMPLS = { channel: 'channel', 'thread-stream': 'thread-stream', 'thread-stream sync': 'thread-stream-sync' }

async function logTransport (name) {
  const r = await runChild(process.execPath, [LOG, LOG_IMPLS[name], String(LINES)], { timeoutMs: 120000 })
  return { totalMs: r.totalMs, mainMs: r.mainMs, peakRss: r.peakRss, cpuMs: r.cpuMs }
}

const RATE = [{ name: 'rate', label: 'messages/s', unit: '/s', better: 'higher' }]
const cases = []
const comparisons = []
for (const where of ['main', 'worker']) {
  const id = `12-to-${where}-64k`
  cases.push({
    id,
    label: `worker → ${where === 'main' ? 'main (async)' : 'worker (blocking)'}, 64 KiB messages`,
    impls: Object.keys(LARGE),
    metrics: RATE,
    measure: (impl, opts) => throughput(where, impl, opts)
  })
  for (const ours of ['channel 1 MiB', 'channel 4 MiB']) {
    for (const base of ['postMessage', 'postMessage transfer']) {
      comparisons.push({ case: id, metric: 'rate', ours, base, target: base === 'postMessage' ? 1 : null })
    }
  }
}

cases.push({
  id: '12-log',
  label: `log transport, ${LINES / 1e6}M JSON lines main → worker → file`,
  impls: Object.keys(LOG_IMPLS),
  metrics: [
    { name: 'totalMs', label: 'time until the file is complete', unit: 'ms', better: 'lower' },
    { name: 'mainMs', label: 'main thread\'s write loop', unit: 'ms', better: 'lower' },
    { name: 'peakRss', label: 'peak RSS', unit: 'B', better: 'lower' },
    { name: 'cpuMs', label: 'CPU time (all threads)', unit: 'ms', better: 'lower' }
  ],
  implMissing: (impl) => impl !== 'channel' && !optional('thread-stream') ? 'thread-stream is not installed (npm install)' : null,
  measure: logTransport
})
for (const base of ['thread-stream', 'thread-stream sync']) {
  comparisons.push({ case: '12-log', metric: 'totalMs', ours: 'channel', base, target: base === 'thread-stream' ? 1 : null })
  comparisons.push({ case: '12-log', metric: 'mainMs', ours: 'channel', base })
  comparisons.push({ case: '12-log', metric: 'peakRss', ours: 'channel', base })
  comparisons.push({ case: '12-log', metric: 'cpuMs', ours: 'channel', base })
}

for (const loaded of [false, true]) {
  const id = loaded ? '12-sync-loaded' : '12-sync-quiet'
  cases.push({
    id,
    label: `synchronous call of an async add, ${loaded ? `with ${os.cpus().length} busy processes (one per core)` : 'quiet machine'}`,
    impls: ['createSyncFn', 'synckit'],
    metrics: [
      { name: 'rate', label: 'calls/s', unit: '/s', better: 'higher' },
      { name: 'cpuPerCall', label: 'CPU time per call (caller + worker)', unit: 'us', better: 'lower' }
    ],
    implMissing: (impl) => impl === 'synckit' && !optional('synckit') ? 'synckit is not installed (npm install)' : null,
    measure: (impl, opts) => syncCall(impl, loaded, opts)
  })
  comparisons.push({ case: id, metric: 'rate', ours: 'createSyncFn', base: 'synckit', target: loaded ? null : 3 })
  comparisons.push({ case: id, metric: 'cpuPerCall', ours: 'createSyncFn', base: 'synckit' })
}

module.exports = { id: '12', title: 'Channel: large messages, log transport; createSyncFn under load', cases, comparisons }
