'use strict'
// AsyncLock: a robust mutex in 8 bytes of a SharedArrayBuffer, shared by the
// main thread and every worker, with blocking and promise-based acquisition.
//
// One int32 cell, WORD (the second cell is reserved and stays 0):
//
//   WORD            meaning
//   0               unlocked, nobody queued
//   C               unlocked, waiters queued (one of them was just woken)
//   owner·2         locked by thread `owner`, nobody queued
//   owner·2 + C     locked by `owner`, waiters queued: unlock must call the addon
//
// `owner` is worker_threads.threadId + 1 (the main thread is 1), below 2^30.
// C is set exactly when waiters are queued on WORD (docs/lock.md).
//
// Uncontended, everything is pure JavaScript: lock is one compareExchange
// (0 → me·2), unlock another (me·2 → 0). Everything else is decided by the
// addon under the lock of WORD's wait queue (crates/futex-core/src/lock.rs):
//
//   park     take the lock if free or if its owner's thread ended, else set
//            C and queue (blocking: in one native call; async: one step per
//            wake-up, below)
//   unlock   wake the oldest waiter; if it has waited 1 ms, hand it the
//            lock ('handoff': WORD names it at once), else release and let
//            it compete ('ok'); C stays set iff more wait
//   leave    a waiter that times out or is aborted clears C if it was last
//   death    when a thread ends, each lock it holds that has waiters is
//            handed to the oldest one ('owner-died'); a later locker takes
//            over a dead owner's lock itself
//
// All accesses are Atomics operations, sequentially consistent: what a thread
// wrote under the lock is visible to the next owner.
const binding = require('./native')
const held = require('./held')
const { lockAsync, cancelAsync, threadId } = require('./futex').internal
const { now, show, sharedView, timeoutOf, asyncOptions, callbackOf } = require('./options')
const { ACQUIRED, OWNER_DIED, LockTimeoutError, LockOwnershipError, DeadlockError, abortError } = require('./errors')

const WORD = 0
const C = 1
const ME = threadId + 1 // this thread's owner id
const LOCKED_BY_ME = ME * 2
const MAX_OWNER = 0x3fffffff
const VIEW = Symbol('AsyncLock view')

// Codes of the addon's lockWait / lockTry (src/lock.rs).
const STATUS = [ACQUIRED, OWNER_DIED]
const TIMED_OUT = 2
const DEADLOCK = 3

const ownerOf = (word) => word >>> 1

function describeOwner (word) {
  const owner = ownerOf(word)
  if (owner === 0) return 'not locked'
  if (owner === ME) return 'held by this thread'
  return owner === 1 ? 'held by the main thread' : `held by the worker with threadId ${owner - 1}`
}

// --- acquiring -------------------------------------------------------------
// Before queueing, spin briefly while the lock is held and nobody is queued:
// critical sections are often shorter than a sleep and wake-up. About a
// microsecond (Rust std's futex mutex spins 100 times too). A free word is
// taken in JavaScript even with waiters queued (C: an unlock just woke one
// to compete); a held one with waiters queued ends the spin: queue behind them.
function spinAcquire (ta, spins = 100) {
  for (let i = 0; i < spins; i++) {
    const w = Atomics.load(ta, WORD)
    if (w === 0 || w === C) {
      if (Atomics.compareExchange(ta, WORD, w, LOCKED_BY_ME | w) === w) return true
    } else if ((w & C) !== 0) {
      return false
    }
  }
  return false
}

// lock(): the fast path, then one blocking native call.
function acquireBlocking (ta, timeout) {
  if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return ACQUIRED
  return lockContended(ta, timeout)
}

function lockContended (ta, timeout) {
  if (ownerOf(Atomics.load(ta, WORD)) === ME) {
    throw new DeadlockError('AsyncLock.lock: this thread already holds the lock; blocking would never end')
  }
  if (spinAcquire(ta)) return ACQUIRED
  const r = binding.lockWait(ta, WORD, ME, timeout)
  if (r === TIMED_OUT) throw new LockTimeoutError(`AsyncLock.lock: not acquired within ${timeout} ms`)
  if (r === DEADLOCK) {
    throw new DeadlockError('AsyncLock.lock: the lock was given to another acquisition of this thread; blocking would never end')
  }
  return STATUS[r]
}

// The async fast path: true if the lock was free (and the signal has not fired).
function acquireNow (ta, opts) {
  if (opts.signal !== undefined && opts.signal.aborted) return false
  return Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0
}

// Resolves with ACQUIRED or OWNER_DIED; rejects with LockTimeoutError or
// AbortError, in which case nothing is held and nothing is queued. A dead
// owner's lock taken over is always reported: an abort that comes too late
// to stop the takeover does not hide it (the caller holds the lock and is
// told, once).
function acquireAsync (ta, opts, what) {
  const signal = opts.signal
  if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
  if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0 || spinAcquire(ta)) return Promise.resolve(ACQUIRED)
  const timeout = opts.timeout
  const start = now()
  const aborted = () => signal !== undefined && signal.aborted
  return new Promise((resolve, reject) => {
    let queued = null // the token of our queued waiter
    const onAbort = () => {
      if (queued !== null && cancelAsync(ta, WORD, queued)) queued = null // it settles 'cancelled'
    }
    const finish = (settle, value) => {
      if (signal !== undefined) signal.removeEventListener('abort', onAbort)
      settle(value)
    }
    const got = (status) => {
      if (status === OWNER_DIED || !aborted()) return finish(resolve, status)
      release(ta) // handed to us while we were being aborted: pass it on
      finish(reject, abortError(signal))
    }
    // One step per outcome of our queued waiter: 'handoff' / 'owner-died'
    // (we hold the lock), 'ok' (it was released, or the safety slice next to
    // a holder from another copy of the addon ran out: look again),
    // 'timed-out', 'cancelled'. A wake-up to compete that we will not use is
    // passed on by taking the free lock and releasing it, which wakes the
    // next waiter.
    const step = (outcome) => {
      queued = null
      if (outcome === 'handoff' || outcome === 'owner-died') return got(outcome === 'handoff' ? ACQUIRED : OWNER_DIED)
      const remaining = start + timeout - now()
      if (outcome === 'cancelled' || outcome === 'timed-out' || remaining <= 0 || aborted()) {
        if (outcome === 'ok' && spinAcquire(ta, 1)) release(ta)
        return finish(reject, aborted() ? abortError(signal) : new LockTimeoutError(`${what}: not acquired within ${timeout} ms`))
      }
      const q = lockAsync(ta, WORD, ME, now() - start, remaining)
      if (q === 0 || q === -1) return got(q === 0 ? ACQUIRED : OWNER_DIED)
      queued = q.token
      q.promise.then(step)
    }
    if (signal !== undefined) signal.addEventListener('abort', onAbort)
    step('ok')
  })
}

// --- releasing ---------------------------------------------------------------
function release (ta) {
  if (Atomics.compareExchange(ta, WORD, LOCKED_BY_ME, 0) !== LOCKED_BY_ME) releaseContended(ta)
}

function releaseContended (ta) {
  if (!binding.lockRelease(ta, WORD, ME)) {
    throw new LockOwnershipError(`AsyncLock.unlock: the lock is ${describeOwner(Atomics.load(ta, WORD))}`)
  }
}

// A release function (lib/held.js), with `ownerDied`.
function releaser (ta, status) {
  const releaseLock = held.releaser(release, ta)
  releaseLock.ownerDied = status === OWNER_DIED
  return releaseLock
}

// --- the class ---------------------------------------------------------------
class AsyncLock {
  /**
   * @param {SharedArrayBuffer} [buffer] where the lock lives; a fresh one if omitted
   * @param {number} [byteOffset=0] a multiple of 4; the lock takes AsyncLock.BYTES bytes
   */
  constructor (buffer, byteOffset) {
    if (ME > MAX_OWNER) throw new RangeError(`AsyncLock: threadId ${threadId} is too large (at most ${MAX_OWNER - 1})`)
    this[VIEW] = sharedView('AsyncLock', buffer, byteOffset, AsyncLock.BYTES)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether some thread holds the lock (a snapshot). */
  get isLocked () { return ownerOf(Atomics.load(this[VIEW], WORD)) !== 0 }

  /** Blocks until acquired. Returns ACQUIRED or OWNER_DIED. */
  lock (timeout) {
    const t = timeoutOf('AsyncLock.lock', timeout)
    const ta = this[VIEW]
    if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return ACQUIRED
    return lockContended(ta, t)
  }

  /** Acquires without waiting: ACQUIRED, OWNER_DIED, or false if held. */
  tryLock () {
    const ta = this[VIEW]
    if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return ACQUIRED
    const r = binding.lockTry(ta, WORD, ME)
    return r < STATUS.length ? STATUS[r] : false
  }

  unlock () {
    const ta = this[VIEW]
    if (Atomics.compareExchange(ta, WORD, LOCKED_BY_ME, 0) !== LOCKED_BY_ME) releaseContended(ta)
  }

  /** Resolves with a release function (idempotent, Symbol.dispose-able). */
  lockAsync (options) {
    let opts
    try {
      opts = asyncOptions('AsyncLock.lockAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const ta = this[VIEW]
    if (acquireNow(ta, opts)) return Promise.resolve(releaser(ta, ACQUIRED))
    return acquireAsync(ta, opts, 'AsyncLock.lockAsync').then((status) => releaser(ta, status))
  }

  /** Runs fn(info) under the lock; resolves with its result, always releasing. */
  runExclusive (fn, options) {
    return exclusive(this[VIEW], fn, options, 'AsyncLock.runExclusive')
  }

  /** The V8 blog's executeLocked: the same as runExclusive (documented alias). */
  executeLocked (fn, options) {
    return exclusive(this[VIEW], fn, options, 'AsyncLock.executeLocked')
  }
}

const RESOLVED = Promise.resolve()
const INFO_OK = Object.freeze({ ownerDied: false })
const INFO_OWNER_DIED = Object.freeze({ ownerDied: true })

// runExclusive: the lock is asked for one microtask after the call (fn
// never runs synchronously inside it), and fn runs in the same turn the lock
// is taken, so a synchronous fn holds the lock only while it runs. The lock
// is released however fn ends.
function exclusive (ta, fn, options, what) {
  let opts
  try {
    callbackOf(what, fn)
    opts = asyncOptions(what, options)
  } catch (e) {
    return Promise.reject(e)
  }
  return RESOLVED.then(() => {
    if (acquireNow(ta, opts)) return held.runHeld(fn, INFO_OK, release, ta)
    return acquireAsync(ta, opts, what).then((status) =>
      held.runHeld(fn, status === OWNER_DIED ? INFO_OWNER_DIED : INFO_OK, release, ta))
  })
}

AsyncLock.BYTES = 8
AsyncLock.ACQUIRED = ACQUIRED
AsyncLock.OWNER_DIED = OWNER_DIED

// For Condition: the lock's view, and whether this thread holds it.
function viewOf (lock, what) {
  if (!(lock instanceof AsyncLock)) throw new TypeError(`${what}: expected an AsyncLock, got ${show(lock)}`)
  return lock[VIEW]
}
function heldByThisThread (ta) {
  return ownerOf(Atomics.load(ta, WORD)) === ME
}

module.exports = {
  AsyncLock,
  // Internal, for Condition.
  internal: { viewOf, heldByThisThread, acquireBlocking, acquireAsync, release }
}
