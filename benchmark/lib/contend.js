'use strict'
// The contended-lock loops of the benchmarks: scenario 6 (the threads of one
// process) and bench:processes (children/lock-contender.js). Every
// acquisition runs a critical section over a plain (non-atomic) shared
// counter, so a broken lock shows up as a lost increment. Each loop runs
// until `to`, counts the acquisitions that started at or after `from` (both
// absolute, see threads.now()), and measures every wait from asking for the
// lock to holding it with this thread's performance.now() (sub-microsecond).
//
// Returns { count, total, maxWaitMs, hist }: counted acquisitions, all
// acquisitions (for the counter check), the longest wait among the counted
// ones, and the histogram of their waits in ns (lib/histogram.js).

const { performance } = require('perf_hooks')
const { histogram, record } = require('./histogram')

// The waits of one loop: add(t0, t1) for an acquisition asked for at t0 and
// held from t1 (performance.now()), counted from `start`.
function tally (start) {
  const hist = histogram()
  let count = 0
  let total = 0
  let maxWait = 0
  return {
    add (t0, t1) {
      total++
      if (t0 >= start) {
        count++
        const wait = t1 - t0
        record(hist, wait * 1e6)
        if (wait > maxWait) maxWait = wait
      }
    },
    result: () => ({ count, total, maxWaitMs: maxWait, hist })
  }
}

// Runs acquire() until `to`: one acquisition, which asks for the lock, runs
// the critical section holding it and lets it go; heldAt() is then the
// performance.now() at which it held it. `limit` ({ at, message },
// optional): past performance.now() `at`, the loop throws an Error with
// `message`.
function loopSync (acquire, heldAt, from, to, limit) {
  const origin = performance.timeOrigin
  const waits = tally(from - origin)
  const end = to - origin
  const last = limit ? limit.at : Infinity
  for (;;) {
    const t0 = performance.now()
    if (t0 >= end) break
    if (t0 > last) throw new Error(limit.message)
    acquire()
    waits.add(t0, heldAt())
  }
  return waits.result()
}

// The same with an acquire() that returns a promise, settled once the lock
// is let go.
async function loopAsync (acquire, heldAt, from, to) {
  const origin = performance.timeOrigin
  const waits = tally(from - origin)
  const end = to - origin
  for (;;) {
    const t0 = performance.now()
    if (t0 >= end) break
    await acquire()
    waits.add(t0, heldAt())
  }
  return waits.result()
}

// `lock` has lock() / unlock(), or runs a callback holding it with
// executeSync(fn) (Web Locks' requestSync).
function contendSync (lock, counter, from, to) {
  let t1 = 0
  const heldAt = () => t1
  if (typeof lock.executeSync === 'function') {
    const critical = () => {
      t1 = performance.now()
      counter[0]++
    }
    return loopSync(() => lock.executeSync(critical), heldAt, from, to)
  }
  return loopSync(() => {
    lock.lock()
    t1 = performance.now()
    counter[0]++
    lock.unlock()
  }, heldAt, from, to)
}

// `lock` needs only executeLocked(fn) → promise: shared-futex's and the
// blog's AsyncLock, or Web Locks (lib/locks.js); leave(), if it has one, is
// called when this thread stops (lib/wake-ring.js).
async function contendAsync (lock, counter, from, to) {
  let t1 = 0
  const critical = () => {
    t1 = performance.now()
    counter[0]++
  }
  const r = await loopAsync(() => lock.executeLocked(critical), () => t1, from, to)
  if (typeof lock.leave === 'function') lock.leave()
  return r
}

module.exports = { contendSync, contendAsync, loopSync, loopAsync }
