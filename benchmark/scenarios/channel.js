'use strict'
// Scenario 11: Channel against MessagePort.postMessage, side by side.
//   throughput  a worker sends messages of 16 B, 1 KiB and 64 KiB as fast as
//               it can; the main thread (async: for await / 'message'
//               events) or another worker (blocking recv / 'message'
//               events) receives them. Figure: messages per second.
//               postMessage has no back-pressure: its producer keeps at
//               most 1024 messages in flight (benchmark/lib/channel-flow.js).
//               Also worker → main with the main thread taking batches
//               (recvManyAsync) instead of one message per turn.
//   numbers     worker → worker, the numbers 0, 1, 2, … on a 'v8' Channel
//               (the default codec) against postMessage of the same.
//   round trip  the main thread sends 16 B and awaits the worker's echo.
//               Figure: round trips per second.
//   one producer  worker → worker, 16 B and 1 KiB, against ringbuf.js (from
//               npm): single producer, single consumer, bytes only, no
//               waiting (both of its sides poll). Figure: messages per second.
//   sync call   createSyncFn of an async add, small arguments, against
//               synckit's createSyncFn (from npm) with the same function.
//               Figure: calls per second, measured in the main thread.
// All carry Uint8Arrays (the 'bytes' codec; postMessage copies them by
// structured clone, no transfer).

const path = require('path')
const { MessageChannel } = require('worker_threads')
const { Channel } = require('../..')
const { withWorkers, go, startTime, now } = require('../lib/threads')
const { consumeAsync, consumeAsyncBatches, consumePort } = require('../lib/channel-flow')

const WORKER = path.join(__dirname, '..', 'workers', 'channel-worker.js')
// The baselines from npm (devDependencies); a case whose baseline is not
// installed says so instead of failing.
const { syncCall: callsOf, optional } = require('../lib/sync-calls')
const RING = 1 << 20

// Calls add(i, 1) for warmMs, then counts the calls of the next ms.
const syncCall = (impl, opts) => callsOf(impl, false, opts)

function endpoints (impl, size) {
  if (impl === 'channel') return { ch: new Channel({ bytes: RING, codec: size === 'number' ? 'v8' : 'bytes' }) }
  if (impl === 'ringbuf.js') {
    const { RingBuffer } = optional('ringbuf.js')
    return { rb: RingBuffer.getStorageForCapacity(RING, Uint8Array) }
  }
  const { port1, port2 } = new MessageChannel()
  return { port1, port2 }
}

async function throughput (size, where, impl, { warmMs, ms }) {
  const flow = new Int32Array(new SharedArrayBuffer(8))
  const { ch, port1, port2, rb } = endpoints(impl, size)
  const base = { impl, size, flow, ms, handle: ch ? ch.handle : undefined, rb }
  const specs = [{ file: WORKER, data: { ...base, role: 'produce', port: port1 }, transfer: port1 ? [port1] : [] }]
  const inMain = where === 'main' || where === 'main-batches'
  if (!inMain) specs.push({ file: WORKER, data: { ...base, role: 'consume', port: port2 }, transfer: port2 ? [port2] : [] })
  const { main, results } = await withWorkers(specs, async (ctl) => {
    go(ctl, warmMs)
    if (!inMain) return null
    const from = startTime(ctl)
    if (!ch) return consumePort(base, port2, from)
    return where === 'main' ? consumeAsync(base, ch, from) : consumeAsyncBatches(base, ch, from)
  })
  const r = inMain ? main : results[1]
  return { rate: r.count / (r.elapsedMs / 1000) }
}

async function roundTrip (impl, { warmMs, ms }) {
  const m = new Uint8Array(16).fill(7)
  const { ch, port1, port2 } = endpoints(impl)
  const back = ch ? new Channel({ bytes: RING, codec: 'bytes' }) : null
  const data = { impl, role: 'echo', handle: ch ? ch.handle : undefined, back: back ? back.handle : undefined, port: port2 }
  const { main } = await withWorkers([{ file: WORKER, data, transfer: port2 ? [port2] : [] }], async (ctl) => {
    go(ctl, warmMs)
    const from = startTime(ctl)
    const to = from + ms
    let n = 0
    let n0 = -1
    let t0 = 0
    let t = 0
    const once = () => new Promise((resolve) => port1.once('message', resolve))
    for (;;) {
      if (ch) {
        await ch.sendAsync(m)
        await back.recvAsync()
      } else {
        port1.postMessage(m)
        await once()
      }
      n++
      if (n % 16 !== 0) continue
      t = now()
      if (n0 < 0 && t >= from) { n0 = n; t0 = t }
      if (n0 >= 0 && t >= to) break
    }
    if (ch) ch.close()
    else port1.postMessage(null)
    return { count: n - n0, elapsedMs: t - t0 }
  })
  return { rate: main.count / (main.elapsedMs / 1000) }
}

const RATE = [{ name: 'rate', label: 'messages/s', unit: '/s', better: 'higher' }]
const SIZES = [[16, '16'], [1024, '1k'], [65536, '64k']]
const cases = []
const comparisons = []
for (const where of ['main', 'worker']) {
  for (const [size, tag] of SIZES) {
    const id = `11-to-${where}-${tag}`
    cases.push({
      id,
      label: `worker → ${where === 'main' ? 'main (async)' : 'worker (blocking)'}, ${tag} B messages`,
      impls: ['channel', 'postMessage'],
      metrics: RATE,
      measure: (impl, opts) => throughput(size, where, impl, opts)
    })
    comparisons.push({ case: id, metric: 'rate', ours: 'channel', base: 'postMessage', target: size === 16 ? 5 : null })
  }
}
// worker → main again, the main thread taking what is there in batches
// (recvManyAsync, up to 256 at once); postMessage as above.
cases.push({
  id: '11-to-main-batches-16',
  label: 'worker → main (async, recvManyAsync batches), 16 B messages',
  impls: ['channel', 'postMessage'],
  metrics: RATE,
  measure: (impl, opts) => throughput(16, 'main-batches', impl, opts)
})
comparisons.push({ case: '11-to-main-batches-16', metric: 'rate', ours: 'channel', base: 'postMessage', target: 5 })

// The default codec with small values (sent as items, without
// v8.serialize): at least postMessage's rate.
cases.push({
  id: '11-to-worker-number',
  label: 'worker → worker (blocking), numbers (\'v8\' codec)',
  impls: ['channel', 'postMessage'],
  metrics: RATE,
  measure: (impl, opts) => throughput('number', 'worker', impl, opts)
})
comparisons.push({ case: '11-to-worker-number', metric: 'rate', ours: 'channel', base: 'postMessage', target: 1 })
for (const [size, tag] of [[16, '16'], [1024, '1k']]) {
  const id = `11-spsc-${tag}`
  cases.push({
    id,
    label: `one producer → one consumer, workers, ${tag} B messages`,
    impls: ['channel', 'ringbuf.js'],
    metrics: RATE,
    implMissing: (impl) => impl === 'ringbuf.js' && !optional('ringbuf.js') ? 'ringbuf.js is not installed (npm install)' : null,
    measure: (impl, opts) => throughput(size, 'worker', impl, opts)
  })
  // Within 1.5×: ringbuf.js ÷ Channel at most 1.5.
  comparisons.push({ case: id, metric: 'rate', ours: 'channel', base: 'ringbuf.js', ratio: 'base/ours', op: '<=', target: 1.5 })
}
cases.push({
  id: '11-rtt',
  label: 'round trip main (async) ↔ worker (blocking echo), 16 B',
  impls: ['channel', 'postMessage'],
  metrics: [{ name: 'rate', label: 'round trips/s', unit: '/s', better: 'higher' }],
  measure: roundTrip
})
comparisons.push({ case: '11-rtt', metric: 'rate', ours: 'channel', base: 'postMessage', target: 3 })
cases.push({
  id: '11-sync',
  label: 'synchronous call of an async add, main → worker',
  impls: ['createSyncFn', 'synckit'],
  metrics: [{ name: 'rate', label: 'calls/s', unit: '/s', better: 'higher' }],
  implMissing: (impl) => impl === 'synckit' && !optional('synckit') ? 'synckit is not installed (npm install)' : null,
  measure: syncCall
})
comparisons.push({ case: '11-sync', metric: 'rate', ours: 'createSyncFn', base: 'synckit', target: 3 })

module.exports = { id: '11', title: 'Channel vs MessagePort', cases, comparisons }
