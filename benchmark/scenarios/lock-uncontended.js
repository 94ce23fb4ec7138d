'use strict'
// Scenario 5: lock + unlock pairs on one thread, nobody else around.
// Figure: nanoseconds per pair (and pairs/s). Baselines: a bare pair of
// Atomics.compareExchange (the floor: what any lock word costs), and the
// blog post's AsyncLock over native Atomics (which notifies on every unlock).
// Asynchronously, awaited one after the other: shared-futex's
// `runExclusive(fn)` ('ours-async') against Web Locks'
// `locks.request(name, fn)` (where the running Node has them: 24.5+), which
// has no synchronous form; and the same request over shared-futex/web-locks
// ('ours-weblocks'). Synchronously, shared-futex/web-locks' blocking
// `locks.requestSync(name, fn)` ('ours-requestsync', not in the standard)
// against the AsyncLock pair.
//
// Measured with tinybench: a task is a batch of BATCH pairs; the round's
// figure is the median batch time / BATCH. Each implementation has its own
// function literal so none of them sees another's type feedback.

const { oursMissing, webLocksMissing, makeLock, lockBuffer, casPairs } = require('../lib/locks')
const { nsPerOp } = require('../lib/batches')
const { ROOT } = require('../lib/impl')

const BATCH = 1000

async function bench (name, fn, opts) {
  const ns = await nsPerOp(name, fn, BATCH, opts)
  return { nsPerPair: ns, rate: 1e9 / ns }
}

const tasks = {
  cas: () => casPairs(BATCH),
  blog () {
    const lock = makeLock('blog', lockBuffer(), 0)
    return () => {
      for (let i = 0; i < BATCH; i++) {
        lock.lock()
        lock.unlock()
      }
    }
  },
  ours () {
    const lock = makeLock('ours', lockBuffer(), 0)
    return () => {
      for (let i = 0; i < BATCH; i++) {
        lock.lock()
        lock.unlock()
      }
    }
  },
  'ours-async' () {
    const lock = makeLock('ours', lockBuffer(), 0)
    const critical = () => {}
    return async () => {
      for (let i = 0; i < BATCH; i++) await lock.runExclusive(critical)
    }
  },
  'ours-requestsync' () {
    const { locks } = require(`${ROOT}/web-locks`)
    const name = `shared-futex-bench-sync-${new Int32Array(lockBuffer())[8]}`
    const critical = () => {}
    return () => {
      for (let i = 0; i < BATCH; i++) locks.requestSync(name, critical)
    }
  },
  weblocks () {
    const lock = makeLock('weblocks', lockBuffer(), 0)
    const critical = () => {}
    return async () => {
      for (let i = 0; i < BATCH; i++) await lock.executeLocked(critical)
    }
  },
  'ours-weblocks' () {
    const lock = makeLock('ours-weblocks', lockBuffer(), 0)
    const critical = () => {}
    return async () => {
      for (let i = 0; i < BATCH; i++) await lock.executeLocked(critical)
    }
  }
}

// One task function per implementation for the whole run: rounds re-measure
// the same (already optimised) code.
const made = {}
function measure (impl, opts) {
  if (!made[impl]) made[impl] = tasks[impl]()
  return bench(impl, made[impl], opts)
}

const METRICS = [
  { name: 'nsPerPair', label: 'time per lock+unlock', unit: 'ns', better: 'lower' },
  { name: 'rate', label: 'lock+unlock pairs/s', unit: '/s', better: 'higher' }
]

module.exports = {
  id: '5',
  title: 'Lock, uncontended',
  available: () => oursMissing(),
  cases: [
    { id: '5-uncontended', label: 'lock+unlock, one thread', impls: ['ours', 'cas', 'blog', 'ours-requestsync'], metrics: METRICS, measure },
    {
      id: '5-async',
      label: 'async lock+unlock, one thread',
      impls: ['ours-async', 'weblocks', 'ours-weblocks'],
      implMissing: (impl) => (impl === 'weblocks' ? webLocksMissing() : null),
      metrics: METRICS,
      measure
    }
  ],
  comparisons: [
    { case: '5-uncontended', metric: 'nsPerPair', ours: 'ours', base: 'cas', ratio: 'ours/base', op: '<=', target: 1.5, label: 'time, ours ÷ bare CAS pair' },
    { case: '5-uncontended', metric: 'nsPerPair', ours: 'ours', base: 'blog', target: null, label: 'speed, × the blog lock' },
    { case: '5-uncontended', metric: 'nsPerPair', ours: 'ours-requestsync', base: 'ours', ratio: 'ours/base', op: '<=', target: 2, label: "time, Web Locks' requestSync ÷ AsyncLock's pair" },
    { case: '5-async', metric: 'nsPerPair', ours: 'ours-async', base: 'weblocks', target: null, label: 'speed, × Web Locks' },
    { case: '5-async', metric: 'nsPerPair', ours: 'ours-weblocks', base: 'weblocks', target: 10, label: 'speed, × Node\'s Web Locks' }
  ]
}
