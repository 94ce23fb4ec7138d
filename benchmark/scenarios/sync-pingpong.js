'use strict'
// Scenario 1: synchronous ping-pong, worker ↔ worker and main ↔ worker.
// Figure: round trips per second. Baseline: native Atomics.wait / notify.

const path = require('path')
const { futex } = require('../lib/impl')
const { withWorkers, go, startTime } = require('../lib/threads')
const { ping, roundTripMetrics, roundTripFigures } = require('../lib/pingpong')

const WORKER = path.join(__dirname, '..', 'workers', 'pingpong.js')

function cells () {
  return new Int32Array(new SharedArrayBuffer(64))
}

async function workerToWorker (impl, { warmMs, ms }) {
  const c = cells()
  const common = { impl, cells: c, at: 0, ms }
  const { results } = await withWorkers(
    [{ file: WORKER, data: { ...common, role: 'ping' } }, { file: WORKER, data: { ...common, role: 'pong' } }],
    async (ctl) => go(ctl, warmMs)
  )
  const r = results[0]
  return roundTripFigures(r.count, r.elapsedMs, r.cpuMs)
}

async function mainToWorker (impl, { warmMs, ms }) {
  const c = cells()
  const f = futex(impl)
  const { main: r } = await withWorkers(
    [{ file: WORKER, data: { impl, role: 'pong', cells: c, at: 0, ms } }],
    // The main thread blocks in `wait` (allowed on Node's main thread, as native).
    async (ctl) => {
      go(ctl, warmMs)
      const from = startTime(ctl)
      return ping(f, c, 0, from, from + ms, 10000)
    }
  )
  return roundTripFigures(r.count, r.elapsedMs, r.cpuMs)
}

const METRICS = roundTripMetrics('round trips/s')

module.exports = {
  id: '1',
  title: 'Sync ping-pong',
  cases: [
    { id: '1-worker-worker', label: 'worker ↔ worker', impls: ['ours', 'native'], metrics: METRICS, measure: workerToWorker },
    { id: '1-main-worker', label: 'main ↔ worker', impls: ['ours', 'native'], metrics: METRICS, measure: mainToWorker }
  ],
  comparisons: [
    { case: '1-worker-worker', metric: 'rate', ours: 'ours', base: 'native', target: 1.5 },
    { case: '1-worker-worker', metric: 'cpuUs', ours: 'ours', base: 'native', target: null, label: 'CPU per round trip, × less' },
    { case: '1-main-worker', metric: 'rate', ours: 'ours', base: 'native', target: 1.5 },
    { case: '1-main-worker', metric: 'cpuUs', ours: 'ours', base: 'native', target: null, label: 'CPU per round trip, × less' }
  ],
  mainToWorker // scenario 13's in-process baseline
}
