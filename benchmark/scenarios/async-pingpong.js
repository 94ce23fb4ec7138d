'use strict'
// Scenario 2: asynchronous ping-pong: the main thread `await`s waitAsync,
// a worker answers with a blocking wait. Figure: round trips per second.
// Baseline: native Atomics.waitAsync (worker side: native Atomics.wait).

const path = require('path')
const { futex } = require('../lib/impl')
const { withWorkers, go, startTime } = require('../lib/threads')
const { pingAsync, roundTripMetrics, roundTripFigures } = require('../lib/pingpong')

const WORKER = path.join(__dirname, '..', 'workers', 'pingpong.js')

// `timeout` bounds each of the main thread's waits (scenario 13 passes the
// one its cross-process case needs, so that both pay for it).
async function asyncPingPong (impl, { warmMs, ms }, timeout = Infinity) {
  const c = new Int32Array(new SharedArrayBuffer(64))
  const f = futex(impl)
  const { main: r } = await withWorkers(
    [{ file: WORKER, data: { impl, role: 'pong', cells: c, at: 0, ms } }],
    async (ctl) => {
      go(ctl, warmMs)
      const from = startTime(ctl)
      return pingAsync(f, c, 0, from, from + ms, timeout)
    }
  )
  return roundTripFigures(r.count, r.elapsedMs, r.cpuMs)
}

const METRICS = roundTripMetrics('round trips/s')

module.exports = {
  id: '2',
  title: 'Async ping-pong',
  cases: [
    { id: '2-async', label: 'main (await waitAsync) ↔ worker (wait)', impls: ['ours', 'native'], metrics: METRICS, measure: asyncPingPong }
  ],
  comparisons: [
    { case: '2-async', metric: 'rate', ours: 'ours', base: 'native', target: 1.5 },
    { case: '2-async', metric: 'cpuUs', ours: 'ours', base: 'native', target: null, label: 'CPU per round trip, × less' }
  ],
  asyncPingPong // scenario 13's in-process async baseline
}
