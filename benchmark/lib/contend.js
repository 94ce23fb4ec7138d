'use strict'
// The contended-lock loops of scenario 6. Every acquisition increments a
// plain (non-atomic) shared counter inside the critical section, so a broken
// lock shows up as a lost increment. Each loop runs until `to`, counts the
// acquisitions that started at or after `from`, and measures every wait from
// asking for the lock to holding it.
//
// Returns { count, total, maxWaitMs }: counted acquisitions, all acquisitions
// (for the counter check), and the longest wait among the counted ones.

const { now } = require('./threads')

function contendSync (lock, counter, from, to) {
  let count = 0
  let total = 0
  let maxWait = 0
  for (;;) {
    const t0 = now()
    if (t0 >= to) break
    lock.lock()
    const t1 = now()
    counter[0]++
    lock.unlock()
    total++
    if (t0 >= from) {
      count++
      if (t1 - t0 > maxWait) maxWait = t1 - t0
    }
  }
  return { count, total, maxWaitMs: maxWait }
}

async function contendAsync (lock, counter, from, to) {
  let count = 0
  let total = 0
  let maxWait = 0
  let t1 = 0
  const critical = () => {
    t1 = now()
    counter[0]++
  }
  for (;;) {
    const t0 = now()
    if (t0 >= to) break
    await lock.executeLocked(critical)
    total++
    if (t0 >= from) {
      count++
      if (t1 - t0 > maxWait) maxWait = t1 - t0
    }
  }
  return { count, total, maxWaitMs: maxWait }
}

module.exports = { contendSync, contendAsync }
