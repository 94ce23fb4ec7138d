'use strict'
// A worker of scenario 6: takes the lock in a loop, with blocking lock() for
// the locks that have one (requestSync for 'ours-requestsync'), with
// executeLocked (async) for Web Locks and the wake ring.
// workerData: impl ('ours' | 'blog' | 'weblocks' | 'ours-weblocks' | 'wake-ring' | 'ours-requestsync'), lockSab, counter
// (Int32Array), ms, ctl. Posts { count, total, maxWaitMs, hist }.

const { workerData, parentPort } = require('worker_threads')
const { makeLock } = require('../lib/locks')
const { arrive, startTime } = require('../lib/threads')
const { contendSync, contendAsync } = require('../lib/contend')

const { impl, lockSab, counter, ms, ctl } = workerData
const lock = makeLock(impl, lockSab, 0)
arrive(ctl)
const from = startTime(ctl)
if (impl === 'weblocks') {
  // A pending Web Locks request does not keep a thread's event loop alive
  // (Node 24): without this timer the worker would exit while it waits.
  const alive = setInterval(() => {}, 1 << 30)
  contendAsync(lock, counter, from, from + ms).then((r) => {
    clearInterval(alive)
    parentPort.postMessage(r)
  })
} else if (impl === 'ours-weblocks' || impl === 'wake-ring') {
  // A pending request of shared-futex/web-locks keeps its thread alive (and
  // the ring's waitAsync is made to).
  contendAsync(lock, counter, from, from + ms).then((r) => parentPort.postMessage(r))
} else {
  parentPort.postMessage(contendSync(lock, counter, from, from + ms))
}
