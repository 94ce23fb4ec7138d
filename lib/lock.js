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
//            wake-up, lib/acquire.js)
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
const { Atomics, checkCanBlock } = require('./host')
const held = require('./held')
const acquiring = require('./acquire')
const { lockAsync, threadId } = require('./futex').internal
const { show, sharedView, timeoutOf, asyncOptions } = require('./options')
const { ACQUIRED, OWNER_DIED, LockTimeoutError, LockOwnershipError, DeadlockError, SharedRegionError } = require('./errors')
const regionLock = require('./region-lock')

const WORD = 0
const C = 1
const ME = threadId + 1 // this thread's owner id
const LOCKED_BY_ME = ME * 2
const MAX_OWNER = 0x3fffffff
const VIEW = Symbol('AsyncLock view')
// Over a shared region's memory: this thread's owner id there, and the
// protocol of lib/region-lock.js for it; 0 and null otherwise.
const REGION_ME = Symbol('AsyncLock region owner')
const REGION_PROTOCOL = Symbol('AsyncLock region protocol')

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
    throw new DeadlockError('AsyncLock.lock: an async acquisition of this thread is queued for the lock (or was just given it); blocking would never end')
  }
  return STATUS[r]
}

// What runExclusive's callback receives.
const INFO_OK = Object.freeze({ ownerDied: false })
const INFO_OWNER_DIED = Object.freeze({ ownerDied: true })

// The protocol for lib/acquire.js: the async fast path (the lock was free,
// or came free within the spin, and the signal has not fired) and one
// native step per wake-up. A wake-up to compete that will not be used is
// passed on by taking the free lock and releasing it, which wakes the next
// waiter.
const PROTOCOL = {
  index: WORD,
  now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) &&
    (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0 || spinAcquire(ta)),
  park (ta, waited, remaining) {
    const q = lockAsync(ta, WORD, ME, waited, remaining)
    return q === 0 ? ACQUIRED : q === -1 ? OWNER_DIED : q
  },
  release,
  passOn (ta) { if (spinAcquire(ta, 1)) release(ta) },
  info: (status) => status === OWNER_DIED ? INFO_OWNER_DIED : INFO_OK,
  ok: INFO_OK,
  missing: 'not acquired'
}

// Resolves with ACQUIRED or OWNER_DIED (see lib/acquire.js).
const acquireAsync = (ta, opts, what) => acquiring.acquireAsync(PROTOCOL, ta, opts, what)

// --- releasing ---------------------------------------------------------------
function release (ta) {
  if (Atomics.compareExchange(ta, WORD, LOCKED_BY_ME, 0) !== LOCKED_BY_ME) releaseContended(ta)
}

function releaseContended (ta) {
  if (!binding.lockRelease(ta, WORD, ME)) {
    throw new LockOwnershipError(`AsyncLock.unlock: the lock is ${describeOwner(Atomics.load(ta, WORD))}`)
  }
}

// A release function of a region lock (lib/held.js), with `ownerDied`.
function regionReleaser (p, ta, status) {
  const releaseLock = held.releaser(p.release, ta)
  releaseLock.ownerDied = status === OWNER_DIED
  return releaseLock
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
    const view = sharedView('AsyncLock', buffer, byteOffset, AsyncLock.BYTES)
    this[VIEW] = view
    this[REGION_ME] = buffer === undefined ? 0 : regionLock.ownerIn(view)
    this[REGION_PROTOCOL] = this[REGION_ME] === 0 ? null : regionLock.protocolFor(this[REGION_ME])
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether some thread holds the lock (a snapshot). */
  get isLocked () {
    if (this[REGION_ME] !== 0) return regionLock.isLocked(this[VIEW])
    return ownerOf(Atomics.load(this[VIEW], WORD)) !== 0
  }

  /** Blocks until acquired. Returns ACQUIRED or OWNER_DIED. */
  lock (timeout) {
    const t = timeoutOf('AsyncLock.lock', timeout)
    checkCanBlock('AsyncLock.lock')
    const ta = this[VIEW]
    if (this[REGION_ME] !== 0) return regionLock.lock(ta, this[REGION_ME], t, 'AsyncLock.lock')
    if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return ACQUIRED
    return lockContended(ta, t)
  }

  /** Acquires without waiting: ACQUIRED, OWNER_DIED, or false if held. */
  tryLock () {
    const ta = this[VIEW]
    if (this[REGION_ME] !== 0) return regionLock.tryLock(ta, this[REGION_ME])
    if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return ACQUIRED
    const r = binding.lockTry(ta, WORD, ME)
    return r < STATUS.length ? STATUS[r] : false
  }

  unlock () {
    const ta = this[VIEW]
    if (this[REGION_ME] !== 0) return regionLock.unlock(ta, this[REGION_ME], 'AsyncLock.unlock')
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
    const p = this[REGION_PROTOCOL] || PROTOCOL
    const release = p === PROTOCOL ? releaser : (ta, status) => regionReleaser(p, ta, status)
    if (p.now(ta, opts)) return Promise.resolve(release(ta, ACQUIRED))
    return acquiring.acquire(p, ta, opts, 'AsyncLock.lockAsync').then((status) => release(ta, status))
  }

  /**
   * Runs fn(info) under the lock; resolves with its result, always
   * releasing. The lock is asked for one microtask after the call.
   */
  runExclusive (fn, options) {
    return acquiring.exclusive(this[REGION_PROTOCOL] || PROTOCOL, this[VIEW], fn, options, 'AsyncLock.runExclusive', true)
  }

  /** The V8 blog's executeLocked: the same as runExclusive (documented alias). */
  executeLocked (fn, options) {
    return acquiring.exclusive(this[REGION_PROTOCOL] || PROTOCOL, this[VIEW], fn, options, 'AsyncLock.executeLocked', true)
  }
}

AsyncLock.BYTES = 8
AsyncLock.ACQUIRED = ACQUIRED
AsyncLock.OWNER_DIED = OWNER_DIED

// For Condition: the lock's view, and whether this thread holds it.
function viewOf (lock, what) {
  if (!(lock instanceof AsyncLock)) throw new TypeError(`${what}: expected an AsyncLock, got ${show(lock)}`)
  if (lock[REGION_ME] !== 0) {
    throw new SharedRegionError('ERR_REGION_UNSUPPORTED', `${what}: the AsyncLock is in a shared region's memory and this object is not: put both in the region, or neither`)
  }
  return lock[VIEW]
}
function heldByThisThread (ta) {
  return ownerOf(Atomics.load(ta, WORD)) === ME
}
// For the primitives built on a lock (Once): what they do with it, in this
// process's memory or a region's. lock(t) and lockAsync resolve or return
// ACQUIRED / OWNER_DIED and throw LockTimeoutError / DeadlockError.
function opsOf (lock, what) {
  if (!(lock instanceof AsyncLock)) throw new TypeError(`${what}: expected an AsyncLock, got ${show(lock)}`)
  const ta = lock[VIEW]
  const me = lock[REGION_ME]
  if (me === 0) {
    return {
      held: () => heldByThisThread(ta),
      lock: (timeout) => acquireBlocking(ta, timeout),
      lockAsync: (opts, what) => acquireAsync(ta, opts, what),
      unlock: () => release(ta)
    }
  }
  const p = lock[REGION_PROTOCOL]
  return {
    held: () => regionLock.heldBy(ta, me),
    lock: (timeout) => regionLock.lock(ta, me, timeout, 'AsyncLock.lock'),
    lockAsync: (opts, what) => acquiring.acquireAsync(p, ta, opts, what),
    unlock: () => regionLock.unlock(ta, me, 'AsyncLock.unlock')
  }
}

// Whether this thread holds `lock` (in this process's memory or a region's).
function heldHere (lock, what) {
  return opsOf(lock, what).held()
}

// For Condition over a region: a region lock's view, this thread's owner id
// there and its protocol; null for a lock of this process.
function regionOf (lock, what) {
  if (!(lock instanceof AsyncLock)) throw new TypeError(`${what}: expected an AsyncLock, got ${show(lock)}`)
  return lock[REGION_ME] === 0 ? null : { ta: lock[VIEW], me: lock[REGION_ME], p: lock[REGION_PROTOCOL] }
}

module.exports = {
  AsyncLock,
  // Internal, for Condition.
  internal: { viewOf, regionOf, opsOf, heldHere, heldByThisThread, acquireBlocking, acquireAsync, release, WORD, ME, PROTOCOL }
}
