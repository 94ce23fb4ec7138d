'use strict'
// Scenario 7: waitAsync latency on Node 14, which has no Atomics.waitAsync.
// Figure: median time from a worker's notify to the awaiting main-thread
// code running again (µs). Baseline: the known alternative, a pool of helper
// workers blocking in Atomics.wait and posting a message back
// (baselines/helper-pool.js). For reference, the same measurement on the
// running Node: shared-futex's waitAsync, native Atomics.waitAsync, helpers.

const fs = require('fs')
const path = require('path')
const { runChild } = require('../lib/child')
const { node14 } = require('../lib/old-node')
const { ROOT } = require('../lib/impl')

const CHILD = path.join(__dirname, '..', 'children', 'waitasync-latency.js')
const POLYFILL = path.join(ROOT, 'polyfill.js')

let old = null
function oldNodeReady () {
  if (!fs.existsSync(POLYFILL)) return 'polyfill.js does not exist yet'
  old = node14()
  return old.error || null
}

function latency (node) {
  return (impl, { warmMs, ms }) => runChild(node(), [CHILD, impl, String(warmMs), String(ms)])
}

const METRICS = [
  { name: 'latencyUs', label: 'notify → continuation, median', unit: 'us', better: 'lower' },
  { name: 'p90Us', label: 'notify → continuation, 90th percentile', unit: 'us', better: 'lower' }
]

module.exports = {
  id: '7',
  title: 'waitAsync latency',
  cases: [
    { id: '7-node14', label: 'Node 14 (no native waitAsync)', impls: ['polyfill', 'helpers'], metrics: METRICS, measure: latency(() => old.node), available: oldNodeReady },
    { id: '7-current', label: `this Node (${process.version}), reference`, impls: ['ours', 'native', 'helpers'], metrics: METRICS, measure: latency(() => process.execPath) }
  ],
  comparisons: [
    { case: '7-node14', metric: 'latencyUs', ours: 'polyfill', base: 'helpers', target: 50, label: 'latency, × lower' },
    { case: '7-current', metric: 'latencyUs', ours: 'ours', base: 'helpers', target: null, label: 'latency, × lower' },
    { case: '7-current', metric: 'latencyUs', ours: 'ours', base: 'native', target: null, label: 'latency, × lower' }
  ]
}
