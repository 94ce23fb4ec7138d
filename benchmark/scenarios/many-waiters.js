'use strict'
// Scenario 3: 10k and 100k pending waitAsync on one address, then one
// notify-all from the same thread. Figures: time to create them, time until
// every promise has settled, heap and RSS per pending waiter. Baseline:
// native Atomics.waitAsync. Each measurement runs in a fresh process so
// memory figures start from the same state (see children/many-waiters.js
// for which figures come from the first batch and which from steady state).

const path = require('path')
const { runChild } = require('../lib/child')

const CHILD = path.join(__dirname, '..', 'children', 'many-waiters.js')

function waiters (n) {
  return (impl) => runChild(process.execPath, ['--expose-gc', CHILD, impl, String(n)])
}

const METRICS = [
  { name: 'createMs', label: 'create (steady state)', unit: 'ms', better: 'lower' },
  { name: 'createColdMs', label: 'create (first large batch)', unit: 'ms', better: 'lower' },
  { name: 'settleMs', label: 'notify-all until all settled', unit: 'ms', better: 'lower' },
  { name: 'heapPerWaiter', label: 'JS heap per waiter', unit: 'B', better: 'lower' },
  { name: 'rssPerWaiter', label: 'RSS per waiter', unit: 'B', better: 'lower' }
]
const SIZES = [10000, 100000]

const cases = SIZES.map((n) => ({
  id: `3-n${n / 1000}k`,
  label: `${n / 1000}k waiters`,
  impls: ['ours', 'native'],
  metrics: METRICS,
  measure: waiters(n)
}))

const comparisons = []
for (const c of cases) {
  comparisons.push(
    { case: c.id, metric: 'createMs', ours: 'ours', base: 'native', target: 2, label: 'create, × as fast' },
    { case: c.id, metric: 'settleMs', ours: 'ours', base: 'native', target: 1, label: 'all settled, × as fast' },
    { case: c.id, metric: 'heapPerWaiter', ours: 'ours', base: 'native', ratio: 'ours/base', op: '<=', target: null, label: 'heap/waiter, ours ÷ native' },
    { case: c.id, metric: 'rssPerWaiter', ours: 'ours', base: 'native', ratio: 'ours/base', op: '<=', target: 1, label: 'RSS/waiter, ours ÷ native' }
  )
}

module.exports = { id: '3', title: 'Many waiters', cases, comparisons }
