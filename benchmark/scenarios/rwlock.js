'use strict'
// Scenario 9: the reader-writer lock.
//
// (a) Read-mostly: the main thread (async: runRead / runWrite) and 3 workers
//     (blocking: read / write) run operations as fast as they can, 90 %
//     reads of a 64-cell shared table and 10 % writes of it (lib/rw.js).
//     Figure: operations per second, all threads together. The same threads
//     with reads only show what readers sharing the lock is worth by itself
//     (no target: a reader-writer lock is chosen for mixes like the first).
//     Implementations:
//     shared-futex's RwLock; shared-futex's AsyncLock (a mutex: reads
//     exclude each other too), the figure a reader-writer lock has to beat;
//     and a textbook reader-writer lock over native Atomics.wait / notify /
//     waitAsync (baselines/rwlock-textbook.js).
// (b) Uncontended: read lock + unlock pairs on one thread, against a bare
//     pair of Atomics.compareExchange (the floor of any lock word), measured
//     with tinybench as scenario 5 is.

const path = require('path')
const { oursMissing, lockBuffer, casPairs } = require('../lib/locks')
const { withWorkers, go, startTime } = require('../lib/threads')
const { nsPerOp } = require('../lib/batches')
const { ROOT } = require('../lib/impl')
const { TABLE, makeRwLock, mixAsync } = require('../lib/rw')

const WORKER = path.join(__dirname, '..', 'workers', 'rwlock-worker.js')
const WORKERS = 3
const BATCH = 1000

function rwMissing () {
  const missing = oursMissing()
  if (missing) return missing
  return typeof require(ROOT).RwLock === 'function' ? null : 'shared-futex does not export RwLock'
}

// Every `writeEvery`-th operation of each thread writes (0: none).
const mix = (writeEvery) => async (impl, { warmMs, ms }) => {
  const lockSab = lockBuffer()
  const table = new Int32Array(new SharedArrayBuffer(4 * TABLE))
  const lock = makeRwLock(impl, lockSab, 0)
  const specs = []
  for (let i = 0; i < WORKERS; i++) specs.push({ file: WORKER, data: { impl, lockSab, table, writeEvery, ms } })
  const { main, results } = await withWorkers(specs, async (ctl) => {
    go(ctl, warmMs)
    const from = startTime(ctl)
    return mixAsync(lock, table, from, from + ms, writeEvery)
  })
  const all = [main, ...results]
  const count = all.reduce((n, r) => n + r.count, 0)
  const writes = all.reduce((n, r) => n + r.writes, 0)
  if (table[0] !== writes) throw new Error(`lost writes: table ${table[0]}, writes ${writes}`)
  return { rate: count / (ms / 1000), mainShare: (100 * main.count) / Math.max(1, count) }
}

const MIX_METRICS = [
  { name: 'rate', label: 'operations/s (all threads)', unit: '/s', better: 'higher' },
  { name: 'mainShare', label: "main thread's share of operations", unit: '%', better: 'higher' }
]

const uncontended = {
  cas: () => casPairs(BATCH),
  ours () {
    const lock = makeRwLock('ours', lockBuffer(), 0)
    return () => {
      for (let i = 0; i < BATCH; i++) {
        lock.read()
        lock.readUnlock()
      }
    }
  }
}

const made = {}
async function readPair (impl, opts) {
  if (!made[impl]) made[impl] = uncontended[impl]()
  const ns = await nsPerOp(`rw-${impl}`, made[impl], BATCH, opts)
  return { nsPerPair: ns, rate: 1e9 / ns }
}

module.exports = {
  id: '9',
  title: 'RwLock',
  available: () => rwMissing(),
  cases: [
    {
      id: '9-read-mostly',
      label: `read-mostly (90 % reads), main (async) + ${WORKERS} workers (blocking)`,
      impls: ['ours', 'mutex', 'textbook'],
      metrics: MIX_METRICS,
      measure: mix(10)
    },
    {
      id: '9-reads-only',
      label: `reads only, main (async) + ${WORKERS} workers (blocking)`,
      impls: ['ours', 'mutex'],
      metrics: MIX_METRICS,
      measure: mix(0)
    },
    {
      id: '9-uncontended',
      label: 'read lock + unlock, one thread',
      impls: ['ours', 'cas'],
      metrics: [
        { name: 'nsPerPair', label: 'time per read lock+unlock', unit: 'ns', better: 'lower' },
        { name: 'rate', label: 'read lock+unlock pairs/s', unit: '/s', better: 'higher' }
      ],
      measure: readPair
    }
  ],
  comparisons: [
    { case: '9-read-mostly', metric: 'rate', ours: 'ours', base: 'mutex', target: 2, label: 'throughput, × our AsyncLock' },
    { case: '9-read-mostly', metric: 'rate', ours: 'ours', base: 'textbook', target: null, label: 'throughput, × the textbook RW lock' },
    { case: '9-reads-only', metric: 'rate', ours: 'ours', base: 'mutex', target: null, label: 'throughput, × our AsyncLock' },
    { case: '9-uncontended', metric: 'nsPerPair', ours: 'ours', base: 'cas', ratio: 'ours/base', op: '<=', target: 1.5, label: 'time, ours ÷ bare CAS pair' }
  ]
}
