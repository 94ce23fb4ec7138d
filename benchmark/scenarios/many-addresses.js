'use strict'
// Scenario 4: k pairs of workers ping-ponging at once, each pair on its own
// address (k = 1, 2, 4, 8). Figure: aggregate round trips per second.
// Baseline: native Atomics.wait / notify, which serialise every waiter of
// the process behind one mutex.

const path = require('path')
const { withWorkers, go } = require('../lib/threads')
const { STRIDE } = require('../lib/pingpong')

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
    for (const r of results) if (r) rate += r.count / (r.elapsedMs / 1000)
    return { rate }
  }
}

const RATE = { name: 'rate', label: 'round trips/s (sum of pairs)', unit: '/s', better: 'higher' }
const KS = [1, 2, 4, 8]

module.exports = {
  id: '4',
  title: 'Many addresses',
  cases: KS.map((k) => ({
    id: `4-k${k}`,
    label: `k = ${k} pair${k > 1 ? 's' : ''}`,
    impls: ['ours', 'native'],
    metrics: [RATE],
    measure: pairs(k),
    // --quick keeps the ends of the range (the target is at k = 8).
    available: (opts) => (opts.quick && k !== 1 && k !== 8 ? 'not in --quick' : null)
  })),
  comparisons: KS.map((k) => ({
    case: `4-k${k}`, metric: 'rate', ours: 'ours', base: 'native', target: k === 8 ? 2 : null
  }))
}
