'use strict'
// Condition: a condition variable used with an AsyncLock, in 8 bytes of a
// SharedArrayBuffer (Rust std's futex condvar, with an exact waiters bit).
//
// One int32 cell, SEQ (the second cell is reserved and stays 0):
//
//   SEQ           meaning
//   seq·2         sequence seq, nobody queued
//   seq·2 + W     sequence seq, waiters queued: notify must call the addon
//
// W is set exactly when waiters are queued on SEQ (docs/lock.md).
//
// wait: read SEQ, unlock, sleep while SEQ still holds the sequence we read,
// then relock. notifyOne / notifyAll: the sequence moves on by 2 (W does not
// change). With W clear, that is one compareExchange and all of it; with W
// set, one native call bumps the sequence and wakes one / every waiter,
// under the lock of SEQ's wait queue (crates/futex-core/src/condvar.rs),
// clearing W when the last one goes. Bumping in JavaScript and then calling
// the addon would be two steps, and a thread stopped between them
// (worker.terminate()) would leave the sleepers asleep past the notify. A
// sleeper is queued by the addon only if SEQ still holds what it read,
// setting W in the same compare-exchange: so either it sees the notify's
// bump and does not sleep, or the notify's compareExchange fails on W and it
// takes the native path. A notify with nobody waiting is one
// compareExchange, with or without the addon's presence counts.
//
// Like every condition variable, wait may return without a notify (another
// waiter's wake-up, a notify that raced with the unlock): check the predicate
// in a loop. wait always returns with the lock held again, also on timeout,
// abort, or when the relock finds the previous owner dead.
//
// Over a shared region's memory (with an AsyncLock of a region: every
// process of the machine) the queues are the region's, which know no
// protocol: W means "waiters may sleep" (set by a waiter before it sleeps,
// cleared by notifyAll), a notify moves the sequence on and then wakes, and
// a sleeper sleeps watching: the end of a thread or process wakes it
// (src/region.rs), and each sleep lasts a slice at most; woken, it looks at
// the sequence. A process killed between a notify's two steps, or a woken
// sleeper killed before it returned, therefore delays the others only
// until its death is known: they find the sequence moved and return (a
// spurious return for all but one of them, which the predicate loop
// absorbs). Nothing of a dead process is waited for: the relock of a dead
// holder's lock returns 'owner-died'.
//
// A notify's wake-up is not lost with a thread that stops before its wait
// is over (docs/lock.md, "A woken sleeper whose thread stops"): the blocking
// wait sleeps and relocks in one native call, which passes a wake-up it
// took on to the next sleeper if the thread stops anywhere inside; an async
// wait's wake-up stays on its thread's native record from its delivery
// until the relock is done (conditionRelocked), and the thread's teardown
// passes on what is recorded.
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const futex = require('./futex')
const { conditionAsync, conditionRelocked, cancelAsync, waitWatching, enqueueWatchingAsync, regionEnds, inRegion } = futex.internal
const { internal: lockInternal } = require('./lock')
const regionLock = require('./region-lock')
const acquiring = require('./acquire')
const { ACQUIRED, OWNER_DIED, LockOwnershipError, DeadlockError, SharedRegionError, abortError } = require('./errors')
const { sharedView, timeoutOf, asyncOptions, now } = require('./options')

const { viewOf, regionOf, heldByThisThread, acquireBlocking, acquireAsync, release, WORD, ME } = lockInternal

const SEQ = 0
const W = 1
const VIEW = Symbol('Condition view')
const GUESS = Symbol('Condition guess')
const REGION = Symbol('Condition over region memory')
const FOREVER = Object.freeze({ timeout: Infinity, signal: undefined })
// conditionWaitRelock's answer (src/condition.rs): relock · 2 + timed out.
const SLEPT_TIMED_OUT = 1
const RELOCK_STATUS = [ACQUIRED, OWNER_DIED]
const RELOCK_INTERRUPTED = 2
const RELOCK_DEADLOCK = 3

function checkHeld (lta, what) {
  if (!heldByThisThread(lta)) throw new LockOwnershipError(`${what}: the lock must be held by this thread`)
}

// Whether SEQ still holds the sequence `seen` was read with.
const unchanged = (ta, seen) => ((Atomics.load(ta, SEQ) ^ seen) & ~W) === 0

// A notify of up to `count` waiters of `cond`, as one step (see the top of
// the file). The compareExchange expects the value this object saw last
// (its guess): right, it is the whole notify, at the cost of the one
// Atomics.add it replaces; wrong, it returns the value to try next.
function signal (cond, count) {
  const ta = cond[VIEW]
  let v = cond[GUESS]
  for (;;) {
    if ((v & W) !== 0) {
      cond[GUESS] = (v + 2) & ~W
      return binding.conditionSignal(ta, SEQ, count)
    }
    const next = (v + 2) | 0
    const seen = Atomics.compareExchange(ta, SEQ, v, next)
    if (seen === v) {
      cond[GUESS] = next
      return 0
    }
    v = seen
  }
}

// One async sleep on SEQ: 'ok' (a notify woke it: the wake-up is on this
// thread's native record until the relock reports it done), 'moved' (the
// sequence had moved on: no wake-up taken), 'timed-out' or 'aborted' (the
// signal fired before the sleep ended). A wake-up taken while being aborted
// goes to the next sleeper: a notifyOne must not vanish with an aborted
// waiter.
function sleep (ta, seen, timeout, signal) {
  if (timeout === 0) return Promise.resolve(unchanged(ta, seen) ? 'timed-out' : 'moved')
  const q = conditionAsync(ta, SEQ, seen, timeout)
  if (q === 0) return Promise.resolve('moved')
  if (signal === undefined) return q.promise
  const onAbort = () => cancelAsync(ta, SEQ, q.token) // if still queued, it settles 'cancelled'
  signal.addEventListener('abort', onAbort)
  // Aborted meanwhile, or (a guarded signal, lib/options.js) its
  // addEventListener threw: leave the queue now.
  if (signal.aborted) onAbort()
  return q.promise.then((r) => {
    signal.removeEventListener('abort', onAbort)
    if (!signal.aborted) return r
    if (r === 'ok') conditionRelocked(ta, SEQ, true) // off the record, and on to the next sleeper
    return 'aborted'
  })
}

// The relock after an async sleep that ended with `r` ('failed': the sleep
// threw `error`): resolves with what waitAsync resolves with, once the lock
// is held again. A notify's wake-up ('ok') leaves this thread's record then,
// or goes on to the next sleeper if the relock fails (the caller gets the
// error instead).
function relock (ta, lta, r, signal, error) {
  let relocking
  try {
    relocking = acquireAsync(lta, FOREVER, 'Condition.waitAsync')
  } catch (e) {
    relocking = Promise.reject(e)
  }
  return relocking.then((status) => {
    if (r === 'ok') conditionRelocked(ta, SEQ, false)
    // A dead owner's lock taken over is reported here, once, even if the
    // signal fired or the sleep failed: the caller holds the lock and must
    // repair the data.
    if (status === OWNER_DIED) return OWNER_DIED
    if (r === 'failed') throw error
    if (r === 'aborted') throw abortError(signal)
    return r === 'timed-out' ? r : 'ok'
  }, (e) => {
    if (r === 'ok') conditionRelocked(ta, SEQ, true)
    throw e
  })
}

// --- over a region's memory (see the top of the file) ----------------------

// The region lock `lock` held by this thread, for a condition over region
// memory; a clear error for a lock that cannot go with it.
function regionLockOf (cond, lock, what) {
  const r = regionOf(lock, what)
  if (r === null) {
    throw new SharedRegionError('ERR_REGION_UNSUPPORTED', `${what}: a Condition in a shared region needs an AsyncLock in a shared region (it is used by several processes)`)
  }
  if (!regionLock.heldBy(r.ta, r.me)) throw new LockOwnershipError(`${what}: the lock must be held by this thread`)
  return r
}

// SEQ with W set: the value a sleeper sleeps on.
function regionMark (ta) {
  for (;;) {
    const v = Atomics.load(ta, SEQ)
    if ((v & W) !== 0 || Atomics.compareExchange(ta, SEQ, v, v | W) === v) return v | W
  }
}

// One sleep's outcome: 'ok' (the sequence moved on: notified, perhaps
// for another sleeper), 'again' (a slice ran out, W was cleared, or a
// thread or process ended: sleep on), 'timed-out'.
function regionLook (ta, seen, deadline) {
  if (!unchanged(ta, seen)) return 'ok'
  return deadline - now() <= 0 ? 'timed-out' : 'again'
}

function regionWait (ta, lock, timeout) {
  const seen = regionMark(ta)
  regionLock.unlock(lock.ta, lock.me, 'Condition.wait')
  const deadline = now() + timeout
  let outcome = timeout === 0 ? (unchanged(ta, seen) ? 'timed-out' : 'ok') : 'again'
  while (outcome === 'again') {
    const remaining = deadline - now()
    const ends = regionEnds(ta)
    const v = regionMark(ta)
    if (!unchanged(ta, seen)) break
    waitWatching(ta, SEQ, v, ends, remaining)
    outcome = regionLook(ta, seen, deadline)
  }
  if (outcome === 'again') outcome = 'ok'
  const status = regionLock.lock(lock.ta, lock.me, Infinity, 'Condition.wait')
  return status === OWNER_DIED ? OWNER_DIED : outcome
}

// The async sleep: resolves 'ok', 'timed-out' or 'aborted'.
function regionSleep (ta, seen, timeout, signal) {
  const deadline = now() + timeout
  return new Promise((resolve) => {
    let token = null
    const onAbort = () => {
      if (token !== null && cancelAsync(ta, SEQ, token)) token = null // it settles 'cancelled'
    }
    const finish = (outcome) => {
      if (signal !== undefined) signal.removeEventListener('abort', onAbort)
      resolve(outcome)
    }
    const step = (r) => {
      token = null
      if (signal !== undefined && signal.aborted) return finish('aborted')
      const outcome = r === undefined ? (unchanged(ta, seen) ? 'again' : 'ok') : regionLook(ta, seen, deadline)
      if (outcome !== 'again') return finish(outcome)
      for (;;) {
        const remaining = deadline - now()
        if (remaining <= 0) return finish('timed-out')
        const ends = regionEnds(ta)
        const v = regionMark(ta)
        if (!unchanged(ta, seen)) return finish('ok')
        const q = enqueueWatchingAsync(ta, SEQ, v, ends, remaining, true)
        if (q === 'not-equal') continue
        token = q.token
        q.promise.then(step)
        return
      }
    }
    if (signal !== undefined) signal.addEventListener('abort', onAbort)
    if (timeout === 0) finish(unchanged(ta, seen) ? 'timed-out' : 'ok')
    else step(undefined)
  })
}

function regionWaitAsync (ta, lock, opts) {
  const signal = opts.signal
  const seen = regionMark(ta)
  try {
    regionLock.unlock(lock.ta, lock.me, 'Condition.waitAsync')
  } catch (e) {
    return Promise.reject(e)
  }
  return regionSleep(ta, seen, opts.timeout, signal).then((r) =>
    acquiring.acquire(lock.p, lock.ta, FOREVER, 'Condition.waitAsync').then((status) => {
      if (status === OWNER_DIED) return OWNER_DIED
      if (r === 'aborted') throw abortError(signal)
      return r
    }))
}

// notifyOne / notifyAll: the sequence on (notifyAll clears W: its sleepers
// all leave), then the wake-up; how many woke.
function regionNotify (ta, count) {
  for (;;) {
    const v = Atomics.load(ta, SEQ)
    const next = count === Infinity ? ((v + 2) | 0) & ~W : (v + 2) | 0
    if (Atomics.compareExchange(ta, SEQ, v, next) !== v) continue
    return (v & W) === 0 ? 0 : futex.notify(ta, SEQ, count)
  }
}

class Condition {
  /**
   * @param {SharedArrayBuffer} [buffer] a fresh one if omitted
   * @param {number} [byteOffset=0] a multiple of 4; takes Condition.BYTES bytes
   */
  constructor (buffer, byteOffset) {
    this[VIEW] = sharedView('Condition', buffer, byteOffset, Condition.BYTES)
    this[GUESS] = 0
    this[REGION] = buffer !== undefined && inRegion(this[VIEW])
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /**
   * Blocking. Unlocks `lock`, sleeps until notified or `timeout` ms pass,
   * relocks. Returns 'ok', 'timed-out', or OWNER_DIED ('owner-died') when the
   * relock took the lock over from a dead thread.
   */
  wait (lock, timeout) {
    if (this[REGION]) {
      const region = regionLockOf(this, lock, 'Condition.wait')
      const t = timeoutOf('Condition.wait', timeout)
      checkCanBlock('Condition.wait')
      return regionWait(this[VIEW], region, t)
    }
    const lta = viewOf(lock, 'Condition.wait')
    const t = timeoutOf('Condition.wait', timeout)
    checkHeld(lta, 'Condition.wait')
    checkCanBlock('Condition.wait')
    const ta = this[VIEW]
    const seen = Atomics.load(ta, SEQ)
    release(lta)
    if (t === 0) {
      // No sleep, so no wake-up to lose: the lock's own relock.
      const timedOut = unchanged(ta, seen)
      if (acquireBlocking(lta, Infinity) === OWNER_DIED) return OWNER_DIED
      return timedOut ? 'timed-out' : 'ok'
    }
    const r = binding.conditionWaitRelock(ta, SEQ, seen, t, lta, WORD, ME)
    const relocked = r >>> 1
    if (relocked === RELOCK_DEADLOCK) {
      throw new DeadlockError('Condition.wait: an async acquisition of this thread is queued for the lock (or was just given it); relocking would never end')
    }
    // Interrupted: the thread is stopping and returns to no JavaScript,
    // unless its liveness probe was wrong. Then the wake-up, if any, went
    // on to the next sleeper (a spurious return here), and nothing is held.
    const status = relocked === RELOCK_INTERRUPTED ? acquireBlocking(lta, Infinity) : RELOCK_STATUS[relocked]
    if (status === OWNER_DIED) return OWNER_DIED
    return (r & SLEPT_TIMED_OUT) !== 0 ? 'timed-out' : 'ok'
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
    if (this[REGION]) {
      let region
      try {
        region = regionLockOf(this, lock, 'Condition.waitAsync')
        opts = asyncOptions('Condition.waitAsync', options)
      } catch (e) {
        return Promise.reject(e)
      }
      if (opts.signal !== undefined && opts.signal.aborted) return Promise.reject(abortError(opts.signal))
      return regionWaitAsync(this[VIEW], region, opts)
    }
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
    const seen = Atomics.load(ta, SEQ)
    try {
      release(lta)
    } catch (e) {
      return Promise.reject(e)
    }
    // A sleep that throws (a native call failing) is relocked too, then
    // rejects with what it threw.
    let slept
    try {
      slept = sleep(ta, seen, opts.timeout, signal)
    } catch (e) {
      slept = Promise.reject(e)
    }
    return slept.then((r) => relock(ta, lta, r, signal), (e) => relock(ta, lta, 'failed', signal, e))
  }

  /** Wakes one waiter; returns how many woke (0 or 1). */
  notifyOne () {
    return this[REGION] ? regionNotify(this[VIEW], 1) : signal(this, 1)
  }

  /** Wakes every waiter; returns how many woke. */
  notifyAll () {
    return this[REGION] ? regionNotify(this[VIEW], Infinity) : signal(this, Infinity)
  }
}

Condition.BYTES = 8

module.exports = {
  Condition,
  // Internal, for the Atomics.Condition shape: a notify of up to `count`
  // waiters in one step.
  internal: { notify: (cond, count) => cond[REGION] ? regionNotify(cond[VIEW], count) : signal(cond, count) }
}
