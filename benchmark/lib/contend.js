'use strict'
// The contended-lock loops of scenario 6. Every acquisition increments a
// plain (non-atomic) shared counter inside the critical section, so a broken
// lock shows up as a lost increment. Each loop runs until `to`, counts the
// acquisitions that started at or after `from` (both absolute, see
// threads.now()), and measures every wait from asking for the lock to
// holding it with this thread's performance.now() (sub-microsecond).
//
// Returns { count, total, maxWaitMs, hist }: counted acquisitions, all
// acquisitions (for the counter check), the longest wait among the counted
// ones, and the histogram of their waits in ns (lib/histogram.js).

const { performance } = require('perf_hooks')
const { histogram, record } = require('./histogram')

// `lock` has lock() / unlock(), or runs a callback holding it with
// executeSync(fn) (Web Locks' requestSync).
function contendSync (lock, counter, from, to) {
  if (typeof lock.executeSync === 'function') return contendCallback(lock, counter, from, to)
  const origin = performance.timeOrigin
  const start = from - origin
  const end = to - origin
  const hist = histogram()
  let count = 0
  let total = 0
  let maxWait = 0
  for (;;) {
    const t0 = performance.now()
    if (t0 >= end) break
    lock.lock()
    const t1 = performance.now()
    counter[0]++
    lock.unlock()
    total++
    if (t0 >= start) {
      count++
      const wait = t1 - t0
      record(hist, wait * 1e6)
      if (wait > maxWait) maxWait = wait
    }
  }
  return { count, total, maxWaitMs: maxWait, hist }
}

function contendCallback (lock, counter, from, to) {
  const origin = performance.timeOrigin
  const start = from - origin
  const end = to - origin
  const hist = histogram()
  let count = 0
  let total = 0
  let maxWait = 0
  let t1 = 0
  const critical = () => {
    t1 = performance.now()
    counter[0]++
  }
  for (;;) {
    const t0 = performance.now()
    if (t0 >= end) break
    lock.executeSync(critical)
    total++
    if (t0 >= start) {
      count++
      const wait = t1 - t0
      record(hist, wait * 1e6)
      if (wait > maxWait) maxWait = wait
    }
  }
  return { count, total, maxWaitMs: maxWait, hist }
}

// `lock` needs only executeLocked(fn) → promise: shared-futex's and the
// blog's AsyncLock, or Web Locks (lib/locks.js); leave(), if it has one, is
// called when this thread stops (lib/wake-ring.js).
async function contendAsync (lock, counter, from, to) {
  const origin = performance.timeOrigin
  const start = from - origin
  const end = to - origin
  const hist = histogram()
  let count = 0
  let total = 0
  let maxWait = 0
  let t1 = 0
  const critical = () => {
    t1 = performance.now()
    counter[0]++
  }
  for (;;) {
    const t0 = performance.now()
    if (t0 >= end) break
    await lock.executeLocked(critical)
    total++
    if (t0 >= start) {
      count++
      const wait = t1 - t0
      record(hist, wait * 1e6)
      if (wait > maxWait) maxWait = wait
    }
  }
  if (typeof lock.leave === 'function') lock.leave()
  return { count, total, maxWaitMs: maxWait, hist }
}

module.exports = { contendSync, contendAsync }
