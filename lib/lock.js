'use strict'
// AsyncLock: a mutex in 8 bytes of a SharedArrayBuffer, shared by the main
// thread and every worker, with blocking and promise-based acquisition.
//
// Implementation details (the full design, with the reasoning, is in
// docs/lock.md):
//
// Two int32 cells. WORD is the lock itself (Drepper's three states, plus the
// owner's identity so that ownership errors and dead owners can be detected):
//
//   WORD                    meaning
//   0                       unlocked
//   owner·2                 locked by thread `owner`, nobody waiting
//   owner·2 + 1 (C)         locked by `owner`; waiters may be queued on WORD or
//                           registered in SLOT, so unlock must look at them
//
// `owner` is worker_threads.threadId + 1 (the main thread is 1), below 2^30.
// The uncontended path is one compareExchange to lock (0 → me·2) and one to
// unlock (me·2 → 0); native code only runs when C is set.
//
// SLOT implements bounded unfairness. A waiter that has waited ≥ 1 ms
// registers there as the heir, and the next unlock hands it the lock by
// writing the heir's identity into WORD: the lock never becomes free, so no
// newcomer can take it.
//
//   SLOT                    meaning
//   0                       no heir
//   h                       thread h's heir is waiting on SLOT for a handoff
//   h | CLAIMING            an unlocker is handing the lock to h (writing WORD)
//   h | GRANTED             WORD says h; h's heir clears SLOT when it runs
//   RESERVED (CLAIMING, h 0) an unlock woke a waiter of WORD: only a woken
//                           waiter may register (it is the oldest)
//
// Each thread knows which of its acquisitions registered (at most one per
// thread: the registration is a compareExchange from 0).
//
// Owner death: a waiter that holds the lock's poll role never sleeps longer
// than SLICE ms at a time; after a slice it asks the addon whether WORD's
// owner thread is still alive. If not, it takes WORD over with one
// compareExchange and reports OWNER_DIED. One async waiter per lock holds the
// role (src/poll.rs), the others sleep until woken; when the holder's
// acquisition ends or its thread dies, the role is handed to another waiter.
// Blocking waiters always look after each slice.
//
// All accesses are Atomics operations, which are sequentially consistent:
// what a thread wrote under the lock is visible to the next owner.
const futex = require('./futex')
const { runBlocking, runAsync } = require('./driver')
const errors = require('./errors')
const { now, show, sharedView, timeoutOf, asyncOptions, callbackOf, DISPOSE } = require('./options')

const { notify } = futex
const { isThreadAlive, pollRelease, threadId } = futex.internal
const { ACQUIRED, OWNER_DIED, LockTimeoutError, LockOwnershipError, DeadlockError, abortError } = errors

const WORD = 0
const SLOT = 1
const C = 1
const ID_MASK = 0x3fffffff
const CLAIMING = 0x40000000
const GRANTED = 0x80000000 | 0
const RESERVED = CLAIMING // with no thread id: for the waiter an unlock just woke

// This thread's identity in WORD and SLOT.
const ME = threadId + 1
const LOCKED_BY_ME = ME * 2

// Longest single sleep of a waiter: the bound on noticing a dead owner.
const SLICE = 50
// A waiter that has waited this long asks for a direct handoff (Go's
// sync.Mutex uses 1 ms, parking_lot 0.5 ms).
const HANDOFF_AFTER = 1

// Outcomes of the contended procedure besides ACQUIRED and OWNER_DIED.
const TIMED_OUT = 1
const CANCELLED = 2
const DEADLOCK = 3

// Acquisitions of this thread that reached the contended procedure are
// numbered: the number names the holder of a lock's poll role.
let acquisitions = 0
// For tests: called with the acquisition's number before each look at the owner.
let probeHook = null

const VIEW = Symbol('AsyncLock view')
const NEVER_CANCELLED = Object.freeze({ cancelled: false })

const ownerOf = (word) => word >>> 1
const isRegistered = (slot) => slot !== 0 && slot === (slot & ID_MASK)

function describeOwner (word) {
  if (word === 0) return 'not locked'
  const owner = ownerOf(word)
  if (owner === ME) return 'held by this thread'
  return owner === 1 ? 'held by the main thread' : `held by the worker with threadId ${owner - 1}`
}

// --- acquiring -------------------------------------------------------------

// The contended acquisition, for both drivers (see driver.js). `blocking`:
// the caller's thread sleeps, so a lock held by this very thread (another
// acquisition of it) can never be released while we wait.
function * contended (ta, deadline, ctx, blocking) {
  acquisitions = (acquisitions + 1) & ID_MASK
  const id = acquisitions
  try {
    return yield * contendedLoop(ta, deadline, ctx, blocking, id)
  } finally {
    // Whichever way it ended, the lock's watch on its owner goes on elsewhere.
    if (!blocking) pollRelease(ta, WORD, id)
  }
}

function * contendedLoop (ta, deadline, ctx, blocking, id) {
  const start = now()
  let heir = false // we registered in SLOT
  let finishing = false // SLOT was claimed for us: refusing is no longer possible
  let checkOwner = false // look at the owner's liveness (after a sleep ran out)
  let woken = false // the last wait consumed a notify of WORD

  // Leaves without the lock. False if we cannot: the lock is being handed to us.
  const leave = () => {
    if (heir && Atomics.compareExchange(ta, SLOT, ME, 0) !== ME) {
      const s = Atomics.load(ta, SLOT)
      if (s === (ME | CLAIMING) || s === (ME | GRANTED)) {
        finishing = true
        return false
      }
    }
    heir = false
    // A wake-up we took but will not use goes to the next waiter, and with
    // it the reservation of SLOT, unless nobody is left to take it.
    if (woken && notify(ta, WORD, 1) === 0) Atomics.compareExchange(ta, SLOT, RESERVED, 0)
    return true
  }

  for (;;) {
    if (ctx.cancelled && !finishing && leave()) return CANCELLED

    // 1. As the heir, see whether the lock has been handed to us.
    let waitIndex = WORD
    let waitValue = 0
    if (heir) {
      const s = Atomics.load(ta, SLOT)
      if (s === (ME | CLAIMING) || s === (ME | GRANTED)) {
        finishing = true
        if (ownerOf(Atomics.load(ta, WORD)) === ME) {
          // The unlocker wrote us into WORD; clearing SLOT is ours.
          if (Atomics.compareExchange(ta, SLOT, s, 0) === s) return ACQUIRED
          continue // CLAIMING just became GRANTED
        }
        if (s === (ME | GRANTED)) {
          // Granted, then taken away (only an unlock() on this thread that
          // did not own the lock can do that): the grant is void.
          Atomics.compareExchange(ta, SLOT, s, 0)
          heir = finishing = false
          continue
        }
        // The unlocker is between its two writes.
        waitIndex = SLOT
        waitValue = s
      } else if (s === ME) {
        waitIndex = SLOT
        waitValue = ME
      } else {
        // Evicted: the lock was released the ordinary way while we
        // registered, or its owner died during a handoff.
        heir = finishing = false
      }
    }

    // 2. Take the lock if it is free. C is set pessimistically: others may wait.
    const w = Atomics.load(ta, WORD)
    if (w === 0) {
      if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME | C) === 0) {
        if (heir) Atomics.compareExchange(ta, SLOT, ME, 0)
        else if (woken) Atomics.compareExchange(ta, SLOT, RESERVED, 0)
        return ACQUIRED
      }
      continue
    }

    // 3. Take it over if its owner's thread is gone.
    const owner = ownerOf(w)
    if (checkOwner) {
      if (owner !== ME && probeHook !== null) probeHook(id)
      if (owner !== ME && !isThreadAlive(owner - 1)) {
        if (Atomics.compareExchange(ta, WORD, w, LOCKED_BY_ME | C) === w) {
          afterRecovery(ta, heir)
          return OWNER_DIED
        }
        continue
      }
      checkOwner = false
      evictDeadHeir(ta)
    }
    if (blocking && owner === ME) {
      if (leave()) return DEADLOCK
      continue
    }

    // 4. Make sure the owner's unlock will look for waiters.
    if ((w & C) === 0 && Atomics.compareExchange(ta, WORD, w, w | C) !== w) continue

    // 5. After waiting long enough, register as the heir, then look at WORD
    //    again: an unlock that ran before the registration released the lock
    //    the ordinary way, and one that runs after it will hand it to us.
    //    An unlock that wakes a waiter reserves SLOT for it: only a waiter
    //    woken by a notify may take a reservation, so the head of the queue
    //    is not beaten to SLOT by waiters that are quicker to wake (timers,
    //    threads already running). Too young to register, it gives it up.
    if (!heir) {
      const s = Atomics.load(ta, SLOT)
      const old = now() - start >= HANDOFF_AFTER
      if (s === 0 || (s === RESERVED && woken)) {
        if (old && Atomics.compareExchange(ta, SLOT, s, ME) === s) {
          heir = true
          continue
        }
        if (s === RESERVED) Atomics.compareExchange(ta, SLOT, RESERVED, 0)
      }
    }

    // 6. Sleep for at most a slice, or until the deadline. A waiter that is
    //    not the heir yet first sleeps only until it has waited HANDOFF_AFTER:
    //    a waiter that only woke when notified could sit at the back of the
    //    queue for long, since a waiter that loses the race after its wake-up
    //    queues again behind the others. An async waiter that does not hold
    //    the poll role does without the slice (`idle`).
    let timeout = SLICE
    let idle = Infinity
    if (!heir) {
      const untilHeir = start + HANDOFF_AFTER - now()
      if (untilHeir > 0) {
        idle = untilHeir
        if (untilHeir < timeout) timeout = untilHeir
      }
    }
    if (deadline !== Infinity && !finishing) {
      const remaining = deadline - now()
      if (remaining <= 0) {
        if (leave()) return TIMED_OUT
        continue
      }
      if (remaining < timeout) timeout = remaining
      if (remaining < idle) idle = remaining
    }
    let result
    if (heir) {
      result = yield { index: waitIndex, value: waitValue, timeout, idle, role: id, roleAt: WORD, altAt: SLOT }
      woken = false
    } else {
      result = yield { index: WORD, value: w | C, timeout, idle, role: id, roleAt: WORD, altAt: SLOT }
      woken = result === 'ok'
    }
    if (result === 'timed-out') checkOwner = true
  }
}

// After taking WORD from a dead owner: a handoff it had begun is void. Clear
// it and wake its heir, which then waits the ordinary way; drop our own
// registration.
function afterRecovery (ta, heir) {
  const s = Atomics.load(ta, SLOT)
  if (s === 0) return
  if (!isRegistered(s) || (heir && s === ME)) {
    if (Atomics.compareExchange(ta, SLOT, s, 0) === s && s !== ME) notify(ta, SLOT, Infinity)
  } else {
    evictDeadHeir(ta)
  }
}

// A registered heir whose thread is gone would receive handoffs nobody takes.
function evictDeadHeir (ta) {
  const s = Atomics.load(ta, SLOT)
  if (isRegistered(s) && s !== ME && !isThreadAlive(s - 1)) Atomics.compareExchange(ta, SLOT, s, 0)
}

// Before sleeping, spin briefly while the lock is held but nobody sleeps on
// it (C clear): critical sections are often shorter than a futex sleep and
// wake-up, and a lock taken here leaves the owner's unlock on its fast path.
// Stop as soon as C is set: others already sleep, so queue up behind them.
// About a microsecond (Rust std's futex mutex spins 100 times too).
const SPIN = 100

function spinAcquire (ta) {
  for (let i = 0; i < SPIN; i++) {
    const w = Atomics.load(ta, WORD)
    if (w === 0) {
      if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return true
    } else if ((w & C) !== 0) {
      return false
    }
  }
  return false
}

// lock(): the fast path, then the blocking procedure.
function acquireBlocking (ta, timeout) {
  if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return ACQUIRED
  return lockBlocking(ta, timeout)
}

function lockBlocking (ta, timeout) {
  const word = Atomics.load(ta, WORD)
  if (ownerOf(word) === ME) {
    throw new DeadlockError('AsyncLock.lock: this thread already holds the lock; blocking would never end')
  }
  if (spinAcquire(ta)) return ACQUIRED
  const deadline = timeout === Infinity ? Infinity : now() + timeout
  const r = runBlocking(ta, contended(ta, deadline, NEVER_CANCELLED, true))
  if (r === TIMED_OUT) throw new LockTimeoutError(`AsyncLock.lock: not acquired within ${timeout} ms`)
  if (r === DEADLOCK) {
    throw new DeadlockError('AsyncLock.lock: the lock was given to another acquisition of this thread; blocking would never end')
  }
  return r
}

// The async fast path: ACQUIRED if the lock was free (and the signal has not
// fired), else null.
function acquireNow (ta, opts) {
  if (opts.signal !== undefined && opts.signal.aborted) return null
  return Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0 ? ACQUIRED : null
}

// Resolves with ACQUIRED or OWNER_DIED; rejects with LockTimeoutError or
// AbortError, in which case nothing is held and nothing is queued.
function acquireAsync (ta, opts, what) {
  const signal = opts.signal
  if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
  if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0 || spinAcquire(ta)) return Promise.resolve(ACQUIRED)
  const timeout = opts.timeout
  const deadline = timeout === Infinity ? Infinity : now() + timeout
  const ctx = { cancelled: false }
  return runAsync(ta, contended(ta, deadline, ctx, false), ctx, signal).then((r) => {
    if (r === TIMED_OUT) throw new LockTimeoutError(`${what}: not acquired within ${timeout} ms`)
    if (r === CANCELLED) throw abortError(signal)
    if (ctx.cancelled) {
      // Handed to us while we were being aborted: pass it on.
      release(ta)
      throw abortError(signal)
    }
    return r
  })
}

// --- releasing ---------------------------------------------------------------

function release (ta) {
  if (Atomics.compareExchange(ta, WORD, LOCKED_BY_ME, 0) !== LOCKED_BY_ME) releaseContended(ta)
}

function releaseContended (ta) {
  for (;;) {
    const w = Atomics.load(ta, WORD)
    if (ownerOf(w) !== ME) throw new LockOwnershipError(`AsyncLock.unlock: the lock is ${describeOwner(w)}`)
    if (w === LOCKED_BY_ME) {
      if (Atomics.compareExchange(ta, WORD, w, 0) === w) return
      continue
    }
    // C is set: someone may be waiting. While we own WORD, nobody else
    // changes it (waiters only ever add C, which is there).
    const s = Atomics.load(ta, SLOT)
    if (isRegistered(s)) {
      if (s === ME || isThreadAlive(s - 1)) {
        // Hand off: claim SLOT (so the heir cannot withdraw), make the heir
        // the owner, mark the grant, wake the heir.
        if (Atomics.compareExchange(ta, SLOT, s, s | CLAIMING) !== s) continue
        Atomics.store(ta, WORD, s * 2 + C)
        Atomics.compareExchange(ta, SLOT, s | CLAIMING, s | GRANTED)
        notify(ta, SLOT, Infinity)
        return
      }
      Atomics.compareExchange(ta, SLOT, s, 0) // a dead heir
      continue
    }
    Atomics.store(ta, WORD, 0)
    // One waiter is enough: it sets C again when it takes the lock or goes
    // back to sleep, so the next unlock wakes the next waiter. SLOT is
    // reserved for it first (see contended, step 5), and freed if nobody woke.
    const reserved = (s === 0 || s === RESERVED) && Atomics.compareExchange(ta, SLOT, s, RESERVED) === s
    if (notify(ta, WORD, 1) === 0 && reserved) Atomics.compareExchange(ta, SLOT, RESERVED, 0)
    // A heir that registered after we looked at SLOT may be asleep on it,
    // having seen the lock still held: evict it, so it looks again.
    const s2 = Atomics.load(ta, SLOT)
    if (isRegistered(s2) && Atomics.compareExchange(ta, SLOT, s2, 0) === s2) notify(ta, SLOT, Infinity)
    return
  }
}

// A release function: idempotent, disposable, with `ownerDied`.
function releaser (ta, status) {
  let released = false
  const releaseLock = () => {
    if (released) return
    released = true
    release(ta)
  }
  releaseLock.ownerDied = status === OWNER_DIED
  releaseLock[DISPOSE] = releaseLock
  return releaseLock
}

// --- the class ---------------------------------------------------------------

class AsyncLock {
  /**
   * @param {SharedArrayBuffer} [buffer] where the lock lives; a fresh one if omitted
   * @param {number} [byteOffset=0] a multiple of 4; the lock takes AsyncLock.BYTES bytes
   */
  constructor (buffer, byteOffset) {
    if (ME > ID_MASK) throw new RangeError(`AsyncLock: threadId ${threadId} is too large (at most ${ID_MASK - 1})`)
    this[VIEW] = sharedView('AsyncLock', buffer, byteOffset, AsyncLock.BYTES)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether some thread holds the lock (a snapshot). */
  get isLocked () { return Atomics.load(this[VIEW], WORD) !== 0 }

  /** Blocks until acquired. Returns ACQUIRED or OWNER_DIED. */
  lock (timeout) {
    const t = timeoutOf('AsyncLock.lock', timeout)
    const ta = this[VIEW]
    if (Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME) === 0) return ACQUIRED
    return lockBlocking(ta, t)
  }

  /** Acquires without waiting: ACQUIRED, OWNER_DIED, or false if held. */
  tryLock () {
    const ta = this[VIEW]
    const w = Atomics.compareExchange(ta, WORD, 0, LOCKED_BY_ME)
    if (w === 0) return ACQUIRED
    const owner = ownerOf(w)
    if (owner !== ME && !isThreadAlive(owner - 1) && Atomics.compareExchange(ta, WORD, w, LOCKED_BY_ME | C) === w) {
      afterRecovery(ta, false)
      return OWNER_DIED
    }
    return false
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
    if (acquireNow(ta, opts) !== null) return Promise.resolve(releaser(ta, ACQUIRED))
    return acquireAsync(ta, opts, 'AsyncLock.lockAsync').then((status) => releaser(ta, status))
  }

  /** Runs fn(info) under the lock; resolves with its result, always releasing. */
  runExclusive (fn, options) {
    return exclusive(this[VIEW], fn, options, 'AsyncLock.runExclusive')
  }

  /** The blog's executeLocked, returning a promise of fn's result. */
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
    if (acquireNow(ta, opts) !== null) return runHeld(ta, fn, ACQUIRED)
    return acquireAsync(ta, opts, what).then((status) => runHeld(ta, fn, status))
  })
}

function runHeld (ta, fn, status) {
  let result
  try {
    result = fn(status === OWNER_DIED ? INFO_OWNER_DIED : INFO_OK)
  } catch (e) {
    release(ta)
    throw e
  }
  if (result === null || (typeof result !== 'object' && typeof result !== 'function') || typeof result.then !== 'function') {
    release(ta)
    return result
  }
  return Promise.resolve(result).then(
    (value) => { release(ta); return value },
    (e) => { release(ta); throw e }
  )
}

AsyncLock.BYTES = 8
AsyncLock.ACQUIRED = ACQUIRED
AsyncLock.OWNER_DIED = OWNER_DIED

// For Condition: whether this thread holds `lock`, and its view.
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
  internal: {
    viewOf,
    heldByThisThread,
    acquireBlocking,
    acquireAsync,
    release,
    // For tests: fn(acquisition number) runs before each look at the
    // liveness of another thread that owns the lock; null to stop.
    setProbeHook (fn) { probeHook = fn }
  }
}
