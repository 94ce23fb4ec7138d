'use strict'
// Condition: a condition variable used with an AsyncLock, in 8 bytes of a
// SharedArrayBuffer (Rust std's futex condvar, plus a waiter count).
//
//   cell      meaning
//   SEQ       bumped by every notifyOne / notifyAll
//   WAITERS   threads between "about to unlock" and "woke up": notify skips
//             the native call when it is 0
//
// wait: read SEQ, count ourselves in WAITERS, unlock, sleep while SEQ still
// holds what we read, then relock. A notify between our read and our sleep
// changes SEQ, so the sleep returns at once ('not-equal'): no notification is
// lost. The order (SEQ read, WAITERS +1; notifier: SEQ +1, WAITERS read) is
// what makes skipping the native call safe: if the notifier reads WAITERS = 0,
// its SEQ bump came before our count, hence before our sleep's check.
//
// Like every condition variable, wait may return without a notify (another
// waiter's wake-up, a notify that raced with the unlock): check the predicate
// in a loop. wait always returns with the lock held again, also on timeout,
// abort, or when the relock finds the previous owner dead.
const futex = require('./futex')
const { runAsync } = require('./driver')
const { internal: lockInternal } = require('./lock')
const { OWNER_DIED, LockOwnershipError, abortError } = require('./errors')
const { sharedView, timeoutOf, asyncOptions } = require('./options')

const { wait, notify } = futex
const { viewOf, heldByThisThread, acquireBlocking, acquireAsync, release } = lockInternal

const SEQ = 0
const WAITERS = 1
const VIEW = Symbol('Condition view')
const FOREVER = Object.freeze({ timeout: Infinity, signal: undefined })

function checkHeld (lta, what) {
  if (!heldByThisThread(lta)) throw new LockOwnershipError(`${what}: the lock must be held by this thread`)
}

// One async sleep on SEQ. A wake-up taken while being aborted goes to the
// next waiter: a notifyOne must not vanish with a cancelled waiter.
function * sleepOnce (ta, seq, timeout, ctx) {
  if (timeout === 0) return Atomics.load(ta, SEQ) === seq ? 'timed-out' : 'ok'
  const r = yield { index: SEQ, value: seq, timeout }
  if (r === 'ok' && ctx.cancelled) notify(ta, SEQ, 1)
  return r === 'not-equal' ? 'ok' : r
}

class Condition {
  /**
   * @param {SharedArrayBuffer} [buffer] a fresh one if omitted
   * @param {number} [byteOffset=0] a multiple of 4; takes Condition.BYTES bytes
   */
  constructor (buffer, byteOffset) {
    this[VIEW] = sharedView('Condition', buffer, byteOffset, Condition.BYTES)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /**
   * Blocking. Unlocks `lock`, sleeps until notified or `timeout` ms pass,
   * relocks. Returns 'ok', 'timed-out', or OWNER_DIED ('owner-died') when the
   * relock took the lock over from a dead thread.
   */
  wait (lock, timeout) {
    const lta = viewOf(lock, 'Condition.wait')
    const t = timeoutOf('Condition.wait', timeout)
    checkHeld(lta, 'Condition.wait')
    const ta = this[VIEW]
    const seq = Atomics.load(ta, SEQ)
    Atomics.add(ta, WAITERS, 1)
    let r
    try {
      release(lta)
      r = wait(ta, SEQ, seq, t)
    } finally {
      Atomics.sub(ta, WAITERS, 1)
    }
    const status = acquireBlocking(lta, Infinity)
    if (status === OWNER_DIED) return OWNER_DIED
    return r === 'timed-out' ? 'timed-out' : 'ok'
  }

  /**
   * Like wait, without blocking: resolves with 'ok', 'timed-out' or
   * 'owner-died' once the lock is held again. With a signal that fires, it
   * rejects with AbortError, also only after relocking, unless the relock
   * took the lock over from a dead owner: then it resolves 'owner-died'
   * (the death is reported exactly once, and this caller holds the lock).
   */
  waitAsync (lock, options) {
    let lta, opts
    try {
      lta = viewOf(lock, 'Condition.waitAsync')
      opts = asyncOptions('Condition.waitAsync', options)
      checkHeld(lta, 'Condition.waitAsync')
    } catch (e) {
      return Promise.reject(e)
    }
    const signal = opts.signal
    if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
    const ta = this[VIEW]
    const seq = Atomics.load(ta, SEQ)
    Atomics.add(ta, WAITERS, 1)
    try {
      release(lta)
    } catch (e) {
      Atomics.sub(ta, WAITERS, 1)
      return Promise.reject(e)
    }
    const ctx = { cancelled: false }
    return runAsync(ta, sleepOnce(ta, seq, opts.timeout, ctx), ctx, signal).then((r) => {
      Atomics.sub(ta, WAITERS, 1)
      return acquireAsync(lta, FOREVER, 'Condition.waitAsync').then((status) => {
        // A dead owner's lock taken over is reported here, once, even if the
        // signal fired: the caller holds the lock and must repair the data.
        if (status === OWNER_DIED) return OWNER_DIED
        if (ctx.cancelled) throw abortError(signal)
        return r === 'timed-out' ? 'timed-out' : 'ok'
      })
    })
  }

  /** Wakes one waiter; returns how many woke (0 or 1). */
  notifyOne () {
    const ta = this[VIEW]
    Atomics.add(ta, SEQ, 1)
    return Atomics.load(ta, WAITERS) > 0 ? notify(ta, SEQ, 1) : 0
  }

  /** Wakes every waiter; returns how many woke. */
  notifyAll () {
    const ta = this[VIEW]
    Atomics.add(ta, SEQ, 1)
    return Atomics.load(ta, WAITERS) > 0 ? notify(ta, SEQ, Infinity) : 0
  }
}

Condition.BYTES = 8

module.exports = { Condition }
