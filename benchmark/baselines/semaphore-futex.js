'use strict'
// The previous Semaphore of this package, kept as the baseline of the
// Semaphore case of scenario 6: a permit count and a waiter count in two
// cells, acquirers sleeping with plain futex waits (lib/driver.js) and
// release adding to the count, then waking as many sleepers if the waiter
// count says there are any. No handoff: a woken acquirer competes with
// newcomers for the permit (a stream of them may starve it).
const path = require('path')
const ROOT = path.join(__dirname, '..', '..')
const { notify } = require(ROOT)
const { runBlocking, runAsync } = require(path.join(ROOT, 'lib', 'driver'))

const COUNT = 0
const WAITERS = 1
const NEVER_CANCELLED = Object.freeze({ cancelled: false })

function tryTake (ta) {
  for (;;) {
    const v = Atomics.load(ta, COUNT)
    if (v <= 0) return false
    if (Atomics.compareExchange(ta, COUNT, v, v - 1) === v) return true
  }
}

function * take (ta) {
  for (;;) {
    if (tryTake(ta)) return
    Atomics.add(ta, WAITERS, 1)
    yield { index: COUNT, value: 0, timeout: Infinity }
    Atomics.sub(ta, WAITERS, 1)
  }
}

function give (ta) {
  Atomics.add(ta, COUNT, 1)
  if (Atomics.load(ta, WAITERS) > 0) notify(ta, COUNT, 1)
}

class FutexSemaphore {
  constructor (sab, byteOffset) {
    this.ta = new Int32Array(sab, byteOffset, 2)
  }

  acquire () {
    if (!tryTake(this.ta)) runBlocking(this.ta, take(this.ta))
  }

  release () {
    give(this.ta)
  }

  runExclusive (fn) {
    const ta = this.ta
    const run = () => {
      try {
        return fn()
      } finally {
        give(ta)
      }
    }
    if (tryTake(ta)) return Promise.resolve().then(run)
    return runAsync(ta, take(ta), NEVER_CANCELLED, undefined).then(run)
  }
}

module.exports = { FutexSemaphore }
