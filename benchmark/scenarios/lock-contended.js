'use strict'
// Scenario 6: the main thread (async, executeLocked) and N workers (blocking
// lock()) increment a shared counter under one lock. Figures: acquisitions
// per second (all threads), the longest single wait, and the main thread's
// share of the acquisitions (a starving waiter shows up there first).
// Baseline: the blog post's AsyncLock over native Atomics.

const path = require('path')
const { oursMissing, makeLock, lockBuffer } = require('../lib/locks')
const { withWorkers, go, startTime } = require('../lib/threads')
const { contendAsync } = require('../lib/contend')

const WORKER = path.join(__dirname, '..', 'workers', 'lock-worker.js')

function contended (n) {
  return async (impl, { warmMs, ms }) => {
    const lockSab = lockBuffer()
    const counter = new Int32Array(new SharedArrayBuffer(64))
    const lock = makeLock(impl, lockSab, 0)
    const specs = []
    for (let i = 0; i < n; i++) specs.push({ file: WORKER, data: { impl, lockSab, counter, ms } })
    const { main, results } = await withWorkers(specs, async (ctl) => {
      go(ctl, warmMs)
      const from = startTime(ctl)
      return contendAsync(lock, counter, from, from + ms)
    })
    const all = [main, ...results]
    let count = 0
    let total = 0
    let maxWaitMs = 0
    for (const r of all) {
      count += r.count
      total += r.total
      maxWaitMs = Math.max(maxWaitMs, r.maxWaitMs)
    }
    if (counter[0] !== total) throw new Error(`lost increments: counter ${counter[0]}, acquisitions ${total}`)
    return { rate: count / (ms / 1000), maxWaitMs, mainShare: (100 * main.count) / Math.max(1, count) }
  }
}

const METRICS = [
  { name: 'rate', label: 'acquisitions/s (all threads)', unit: '/s', better: 'higher' },
  { name: 'maxWaitMs', label: 'longest single wait', unit: 'ms', better: 'lower' },
  { name: 'mainShare', label: "main thread's share of acquisitions", unit: '%', better: 'higher' }
]
const NS = [1, 3]

module.exports = {
  id: '6',
  title: 'Lock, contended',
  available: () => oursMissing(),
  cases: NS.map((n) => ({
    id: `6-n${n}`,
    label: `main (async) + ${n} worker${n > 1 ? 's' : ''} (sync)`,
    impls: ['ours', 'blog'],
    metrics: METRICS,
    measure: contended(n)
  })),
  comparisons: NS.flatMap((n) => [
    { case: `6-n${n}`, metric: 'rate', ours: 'ours', base: 'blog', target: 1.5 },
    { case: `6-n${n}`, metric: 'maxWaitMs', ours: 'ours', base: 'blog', target: 10, label: 'longest wait, × shorter' }
  ])
}
