'use strict'
// Scenario 10: barrier round trips. Every party arrives at one barrier,
// generation after generation, as fast as it can (lib/generations.js);
// figure: generations per second (and µs per generation).
//
// - 10-main: the main thread (async, `await barrier.waitAsync()`) and 3
//   workers (blocking `barrier.wait()`), 4 parties. Baseline: a barrier
//   built on postMessage (baselines/postmessage-barrier.js: the main thread
//   is the hub, workers post 'arrive' and await 'go').
// - 10-workers: 4 workers, all blocking. Baselines: the postMessage barrier
//   with one of the workers as the hub (a worker cannot block on a port, so
//   its parties are async), and the textbook barrier over native
//   Atomics.wait / notify (baselines/atomics-barrier.js), which the main
//   thread cannot use without blocking.

const path = require('path')
const { withWorkers, go, startTime } = require('../lib/threads')
const { ROOT } = require('../lib/impl')
const { generationsAsync, stopCell } = require('../lib/generations')
const { HubBarrier, channels } = require('../baselines/postmessage-barrier')

const WORKER = path.join(__dirname, '..', 'workers', 'barrier-worker.js')
const PARTIES = 4

function figures (r) {
  return { rate: r.count / (r.elapsedMs / 1000), usPerGen: (1000 * r.elapsedMs) / r.count }
}

async function withMain (impl, { warmMs, ms }) {
  const sab = new SharedArrayBuffer(64)
  const stop = stopCell()
  const specs = []
  let hub = null
  let waitAsync
  if (impl === 'postmessage') {
    const ch = channels(PARTIES - 1)
    hub = new HubBarrier(ch.hub)
    waitAsync = () => hub.waitAsync()
    for (const port of ch.spokes) specs.push({ file: WORKER, data: { impl, port, stop, ms }, transfer: [port] })
  } else {
    const barrier = new (require(ROOT).Barrier)(sab, 0, PARTIES)
    waitAsync = () => barrier.waitAsync()
    for (let i = 1; i < PARTIES; i++) specs.push({ file: WORKER, data: { impl, parties: PARTIES, sab, byteOffset: 0, stop, ms } })
  }
  try {
    const { main } = await withWorkers(specs, async (ctl) => {
      go(ctl, warmMs)
      const from = startTime(ctl)
      return generationsAsync(waitAsync, stop, from, from + ms)
    })
    return figures(main)
  } finally {
    if (hub !== null) hub.close()
  }
}

async function workersOnly (impl, { warmMs, ms }) {
  const sab = new SharedArrayBuffer(64)
  const stop = stopCell()
  if (impl === 'ours') new (require(ROOT).Barrier)(sab, 0, PARTIES) // eslint-disable-line no-new
  const specs = []
  if (impl === 'postmessage') {
    const ch = channels(PARTIES - 1)
    specs.push({ file: WORKER, data: { impl, ports: ch.hub, stop, ms }, transfer: ch.hub })
    for (const port of ch.spokes) specs.push({ file: WORKER, data: { impl, port, stop, ms }, transfer: [port] })
  } else {
    for (let i = 0; i < PARTIES; i++) specs.push({ file: WORKER, data: { impl, parties: PARTIES, sab, byteOffset: 0, stop, ms } })
  }
  const { results } = await withWorkers(specs, async (ctl) => { go(ctl, warmMs) })
  return figures(results[0])
}

const METRICS = [
  { name: 'rate', label: 'generations/s', unit: '/s', better: 'higher' },
  { name: 'usPerGen', label: 'µs per generation', unit: 'us', better: 'lower' }
]

module.exports = {
  id: '10',
  title: 'Barrier round trips, 4 parties',
  cases: [
    { id: '10-main', label: 'main (await waitAsync) + 3 workers (wait); postMessage: all async', impls: ['ours', 'postmessage'], metrics: METRICS, measure: withMain },
    { id: '10-workers', label: '4 workers (wait); postMessage: all async, one is the hub', impls: ['ours', 'postmessage', 'native'], metrics: METRICS, measure: workersOnly }
  ],
  comparisons: [
    { case: '10-main', metric: 'rate', ours: 'ours', base: 'postmessage', target: 10 },
    { case: '10-workers', metric: 'rate', ours: 'ours', base: 'postmessage', target: 10 },
    { case: '10-workers', metric: 'rate', ours: 'ours', base: 'native', target: null }
  ]
}
