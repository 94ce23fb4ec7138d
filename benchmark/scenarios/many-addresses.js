'use strict'
// Scenario 4: k pairs of workers ping-ponging at once, each pair on its own
// address (k = 1, 2, 4, 8). Figure: aggregate round trips per second.
// Baseline: native Atomics.wait / notify, which serialise every waiter of
// the process behind one mutex.

const path = require('path')
const { withWorkers, go } = require('../lib/threads')
const { STRIDE, roundTripMetrics } = require('../lib/pingpong')

const WORKER = path.join(__dirname, '..', 'workers', 'pingpong.js')

function pairs (k) {
  return async (impl, { warmMs, ms }) => {
    const cells = new Int32Array(new SharedArrayBuffer(4 * STRIDE * k))
    const specs = []
    for (let p = 0; p < k; p++) {
      const common = { impl, cells, at: p * STRIDE, ms }
      specs.push({ file: WORKER, data: { ...common, role: 'ping' } })
      specs.push({ file: WORKER, data: { ...common, role: 'pong' } })
    }
    const { results } = await withWorkers(specs, async (ctl) => go(ctl, warmMs))
    let rate = 0
    let count = 0
    for (const r of results) {
      if (!r) continue
      rate += r.count / (r.elapsedMs / 1000)
      count += r.count
    }
    // Every ping reads the process-wide CPU time over (nearly) the same window.
    const pings = results.filter(Boolean)
    const cpuMs = pings.reduce((a, r) => a + r.cpuMs, 0) / pings.length
    return { rate, cpuUs: (cpuMs * 1000) / count }
  }
}

const METRICS = roundTripMetrics('round trips/s (sum of pairs)')
const KS = [1, 2, 4, 8]

module.exports = {
  id: '4',
  title: 'Many addresses',
  cases: KS.map((k) => ({
    id: `4-k${k}`,
    label: `k = ${k} pair${k > 1 ? 's' : ''}`,
    impls: ['ours', 'native'],
    metrics: METRICS,
    measure: pairs(k),
    // --quick keeps the ends of the range (the target is at k = 8).
    available: (opts) => (opts.quick && k !== 1 && k !== 8 ? 'not in --quick' : null)
  })),
  comparisons: KS.flatMap((k) => [
    { case: `4-k${k}`, metric: 'rate', ours: 'ours', base: 'native', target: k === 8 ? 2 : null },
    ...(k === 8 ? [{ case: '4-k8', metric: 'cpuUs', ours: 'ours', base: 'native', target: null, label: 'CPU per round trip, × less' }] : [])
  ])
}
