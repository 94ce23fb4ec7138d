'use strict'
// The shape of the shared-structs proposal's Atomics.Mutex and
// Atomics.Condition (tc39/proposal-structs, Stage 2), over AsyncLock and
// Condition, so that code written for the proposal runs on Node today.
//
//   proposal (spec draft)                          here
//   new Atomics.Mutex()                            new Mutex() / new Mutex(buffer, byteOffset)
//   Atomics.Mutex.lock(m, token?) → token          Mutex.lock: AsyncLock.lock
//   Atomics.Mutex.lockIfAvailable(m, t, token?)    Mutex.lockIfAvailable: tryLock (t = 0) or lock(t)
//     → token | null
//   new Atomics.Mutex.UnlockToken()                new UnlockToken() (= Mutex.UnlockToken)
//   token.locked / unlock() / [Symbol.dispose]()   the same; plus token.ownerDied
//   Atomics.Condition.wait(cv, token) → undefined  Condition.wait: Condition.wait(lock)
//   Atomics.Condition.waitFor(cv, token, t, pred?) Condition.waitFor: a loop over Condition.wait
//     → boolean
//   Atomics.Condition.notify(cv, count?) → number  Condition.notify: notifyAll, or notifyOne up to count times
//
// (the spec draft, tc39/proposal-structs spec/index.html; README.md there)
//
// and V8's forms (node --harmony-struct), which the proposal's text does not
// have or leaves open: Mutex.lock(m, callback), Mutex.tryLock(m, callback),
// Mutex.lockWithTimeout(m, callback, t) → { value, success },
// Mutex.lockAsync(m, callback, t?) → Promise<{ value, success }> (the
// proposal's "future work"), Condition.wait(cv, mutex, t?) → boolean,
// Condition.waitAsync(cv, mutex, t?) → Promise<undefined>, Mutex.isMutex,
// Condition.isCondition.
//
// A token is an ordinary object of the thread that locked: it records which
// Mutex it holds (TOKEN_MUTEX, null when empty) and whether that acquisition
// took the lock over from a thread that died holding it (TOKEN_DIED). A
// Mutex records what holds it on this thread (HOLDER: a token, or the info
// object a callback form passes to its callback), so that a Condition wait
// whose relock finds a dead owner can say so to the holder. A wait takes the
// holder with it: the mutex is not held while it sleeps (other tasks of the
// thread may lock it meanwhile), and the relock makes that holder the
// mutex's again and tells it, not whichever task held the mutex last.
const { AsyncLock, internal: lockInternal } = require('./lock')
const { Condition: LockCondition, internal: conditionInternal } = require('./condition')
const { deadlineOf, timeLeft, show, sharedView, DISPOSE } = require('./options')
const { OWNER_DIED, E_TIMEOUT, E_DEADLOCK, DeadlockError, LockTimeoutError } = require('./errors')
const { settled } = require('./held')
const { checkCanBlock } = require('./host')

const { heldHere } = lockInternal
const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k)

const LOCK = Symbol('Mutex lock')
const HOLDER = Symbol('Mutex holder')
const COND = Symbol('Condition')
const TOKEN_MUTEX = Symbol('UnlockToken mutex')
const TOKEN_DIED = Symbol('UnlockToken ownerDied')

// --- checks (the spec's RequireInternalSlot and friends: TypeError) -------------

const isMutex = (x) => typeof x === 'object' && x !== null && hasOwn(x, LOCK)
const isCondition = (x) => typeof x === 'object' && x !== null && hasOwn(x, COND)
const isToken = (x) => typeof x === 'object' && x !== null && hasOwn(x, TOKEN_MUTEX)

function mutexOf (what, x) {
  if (!isMutex(x)) throw new TypeError(`${what}: expected an Atomics.Mutex, got ${show(x)}`)
  return x
}

function conditionOf (what, x) {
  if (!isCondition(x)) throw new TypeError(`${what}: expected an Atomics.Condition, got ${show(x)}`)
  return x
}

function tokenOf (what, x) {
  if (!isToken(x)) throw new TypeError(`${what}: expected an Atomics.Mutex.UnlockToken, got ${show(x)}`)
  return x
}

// An empty token to lock with (undefined: one is made on success).
function emptyToken (what, x) {
  if (x === undefined) return undefined
  if (tokenOf(what, x)[TOKEN_MUTEX] !== null) throw new TypeError(`${what}: the UnlockToken already holds a mutex; unlock it first`)
  return x
}

function lockedToken (what, x) {
  if (tokenOf(what, x)[TOKEN_MUTEX] === null) throw new TypeError(`${what}: the UnlockToken is empty (not locked)`)
  return x
}

function callbackOf (what, fn) {
  if (typeof fn !== 'function') throw new TypeError(`${what}: the callback must be a function, got ${show(fn)}`)
  return fn
}

// The proposal's timeout: a Number (else TypeError); NaN and +∞ wait
// forever, anything ≤ 0 (and −∞) does not wait. V8 converts the same way.
function millisOf (what, timeout) {
  if (typeof timeout !== 'number') throw new TypeError(`${what}: timeout must be a number of milliseconds, got ${show(timeout)}`)
  if (timeout !== timeout || timeout === Infinity) return Infinity // eslint-disable-line no-self-compare
  return timeout > 0 ? timeout : 0
}

// The proposal throws a TypeError where this package throws DeadlockError;
// keep the stable code.
function deadlock (what) {
  const e = new TypeError(`${what}: this thread already holds the mutex; it is not recursive`)
  e.code = E_DEADLOCK
  return e
}

function ownedByThisThread (what, m) {
  if (!heldHere(m[LOCK], what)) throw new TypeError(`${what}: the mutex is not held by this thread`)
}

// --- holding ---------------------------------------------------------------------

function hold (m, token, status) {
  const t = token === undefined ? new UnlockToken() : token
  t[TOKEN_MUTEX] = m
  t[TOKEN_DIED] = status === OWNER_DIED
  m[HOLDER] = t
  return t
}

function release (m, holder) {
  if (m[HOLDER] === holder) m[HOLDER] = undefined
  m[LOCK].unlock()
}

// Around a Condition wait on m, which this thread holds: the holder leaves
// with the wait (leave returns it), and comes back with the relock
// (relocked), told if the relock took m over from a dead thread.
function leave (m) {
  const h = m[HOLDER]
  m[HOLDER] = undefined
  return h
}

function relocked (m, holder, status) {
  m[HOLDER] = holder
  if (status !== OWNER_DIED || holder === undefined) return
  if (isToken(holder)) holder[TOKEN_DIED] = true
  else holder.ownerDied = true
}

// The blocking Condition.wait of `holder`, which holds m: 'ok', 'timed-out'
// or OWNER_DIED (and then `holder` is told). `holder` is m's holder again
// afterwards, also if the wait throws.
function waitHolding (c, m, holder, timeout) {
  leave(m)
  let r
  try {
    r = c.wait(m[LOCK], timeout)
  } finally {
    relocked(m, holder, r)
  }
  return r
}

// lock(timeout) that answers ~deadlock~ with the proposal's TypeError and a
// timeout with null.
// The uncontended path is the lock's own compareExchange: the holder check
// comes only after it failed (lock() makes it before waiting).
function acquire (what, m, timeout) {
  const lock = m[LOCK]
  if (timeout === 0) {
    const r = lock.tryLock()
    if (r !== false) return r
    // Held by this thread's code (a token or a callback form: HOLDER), a
    // second lock is recursion. Held for this thread with no holder yet, it
    // was handed to one of this thread's queued lockAsync calls, whose
    // callback has not run: not available, like any mutex held elsewhere.
    if (m[HOLDER] !== undefined && heldHere(lock, what)) throw deadlock(what)
    return null
  }
  try {
    return lock.lock(timeout)
  } catch (e) {
    if (e instanceof LockTimeoutError) return null
    if (e instanceof DeadlockError) throw deadlock(what)
    throw e
  }
}

// Runs callback({ ownerDied }) holding m (V8's callback forms).
function runLocked (m, status, callback) {
  const info = { ownerDied: status === OWNER_DIED }
  m[HOLDER] = info
  try {
    return callback(info)
  } finally {
    release(m, info)
  }
}

const NOT_ACQUIRED = () => ({ value: undefined, success: false })

// --- UnlockToken -------------------------------------------------------------------

class UnlockToken {
  /** An empty token, to pass to Mutex.lock / lockIfAvailable (and reuse). */
  constructor () {
    this[TOKEN_MUTEX] = null
    this[TOKEN_DIED] = false
  }

  /** Whether the token holds a mutex. */
  get locked () {
    return tokenOf('Atomics.Mutex.UnlockToken.prototype.locked', this)[TOKEN_MUTEX] !== null
  }

  /**
   * Not in the proposal: whether the acquisition this token made last took
   * the mutex over from a thread that ended while holding it (OWNER_DIED),
   * also when a Condition wait's relock did.
   */
  get ownerDied () {
    return tokenOf('Atomics.Mutex.UnlockToken.prototype.ownerDied', this)[TOKEN_DIED]
  }

  /** Unlocks the mutex the token holds and empties it: true; false if it was empty. */
  unlock () {
    const m = tokenOf('Atomics.Mutex.UnlockToken.prototype.unlock', this)[TOKEN_MUTEX]
    if (m === null) return false
    this[TOKEN_MUTEX] = null
    release(m, this)
    return true
  }
}

Object.defineProperty(UnlockToken.prototype, DISPOSE, {
  value: function dispose () {
    const m = tokenOf('Atomics.Mutex.UnlockToken.prototype[Symbol.dispose]', this)[TOKEN_MUTEX]
    if (m !== null) {
      this[TOKEN_MUTEX] = null
      release(m, this)
    }
  },
  writable: true,
  configurable: true
})

// --- Mutex -------------------------------------------------------------------------

class Mutex {
  /**
   * new Mutex(): in a fresh SharedArrayBuffer. new Mutex(buffer, byteOffset):
   * at byteOffset of a SharedArrayBuffer (the same mutex as every other
   * Mutex built there, in any thread). The bytes must start zeroed.
   */
  constructor (buffer, byteOffset) {
    const ta = sharedView('Atomics.Mutex', buffer, byteOffset, Mutex.BYTES)
    this[LOCK] = new AsyncLock(ta.buffer, ta.byteOffset)
    this[HOLDER] = undefined
  }

  get buffer () { return mutexOf('Atomics.Mutex.prototype.buffer', this)[LOCK].buffer }
  get byteOffset () { return mutexOf('Atomics.Mutex.prototype.byteOffset', this)[LOCK].byteOffset }

  /**
   * Blocks until `mutex` is locked; returns `unlockToken` (which must be
   * empty) or a new UnlockToken holding it. V8's form: with a callback
   * instead of a token, runs it under the lock and returns its result.
   */
  static lock (mutex, unlockToken) {
    const what = 'Atomics.Mutex.lock'
    const m = mutexOf(what, mutex)
    if (typeof unlockToken === 'function') {
      checkCanBlock(what)
      return runLocked(m, acquire(what, m, Infinity), unlockToken)
    }
    const token = emptyToken(what, unlockToken)
    checkCanBlock(what)
    return hold(m, token, acquire(what, m, Infinity))
  }

  /**
   * Like lock, waiting at most `timeout` ms (0: not at all, Infinity or NaN:
   * forever); null if the mutex was not acquired in time.
   */
  static lockIfAvailable (mutex, timeout, unlockToken) {
    const what = 'Atomics.Mutex.lockIfAvailable'
    const m = mutexOf(what, mutex)
    const token = emptyToken(what, unlockToken)
    const t = millisOf(what, timeout)
    if (t !== 0) checkCanBlock(what) // 0: a try, which never waits
    const status = acquire(what, m, t)
    return status === null ? null : hold(m, token, status)
  }

  /** V8's form: runs callback under the lock if it is free now: { value, success }. */
  static tryLock (mutex, callback) {
    const what = 'Atomics.Mutex.tryLock'
    const m = mutexOf(what, mutex)
    callbackOf(what, callback)
    const status = m[LOCK].tryLock()
    if (status === false) return NOT_ACQUIRED()
    return { value: runLocked(m, status, callback), success: true }
  }

  /** V8's form: like lock(mutex, callback), waiting at most `timeout` ms: { value, success }. */
  static lockWithTimeout (mutex, callback, timeout) {
    const what = 'Atomics.Mutex.lockWithTimeout'
    const m = mutexOf(what, mutex)
    callbackOf(what, callback)
    const t = millisOf(what, timeout)
    checkCanBlock(what) // as V8's, whatever the timeout
    const status = acquire(what, m, t)
    if (status === null) return NOT_ACQUIRED()
    return { value: runLocked(m, status, callback), success: true }
  }

  /**
   * V8's form of the proposal's future lockAsync: resolves { value, success }
   * once callback (run under the lock, possibly async) has settled and the
   * mutex is unlocked again; { value: undefined, success: false } if
   * `timeout` ms passed first. Rejects with callback's error. Argument
   * errors throw, as V8's do.
   */
  static lockAsync (mutex, callback, timeout) {
    const what = 'Atomics.Mutex.lockAsync'
    const m = mutexOf(what, mutex)
    callbackOf(what, callback)
    const t = timeout === undefined ? Infinity : millisOf(what, timeout)
    return m[LOCK].lockAsync({ timeout: t }).then((releaseLock) => {
      const info = { ownerDied: releaseLock.ownerDied }
      m[HOLDER] = info
      const done = () => {
        if (m[HOLDER] === info) m[HOLDER] = undefined
        releaseLock()
      }
      let result
      try {
        result = callback(info)
      } catch (e) {
        done()
        throw e
      }
      return settled(result).then(
        (value) => { done(); return { value, success: true } },
        (e) => { done(); throw e })
    }, (e) => {
      if (e.code === E_TIMEOUT) return NOT_ACQUIRED()
      throw e
    })
  }

  /** V8's: whether x is a Mutex of this module. */
  static isMutex (x) { return isMutex(x) }
}

Mutex.BYTES = AsyncLock.BYTES
Mutex.UnlockToken = UnlockToken

// --- Condition ---------------------------------------------------------------------

class Condition {
  /** new Condition() / new Condition(buffer, byteOffset), like Mutex. */
  constructor (buffer, byteOffset) {
    const ta = sharedView('Atomics.Condition', buffer, byteOffset, Condition.BYTES)
    this[COND] = new LockCondition(ta.buffer, ta.byteOffset)
  }

  get buffer () { return conditionOf('Atomics.Condition.prototype.buffer', this)[COND].buffer }
  get byteOffset () { return conditionOf('Atomics.Condition.prototype.byteOffset', this)[COND].byteOffset }

  /**
   * The proposal's wait(cv, unlockToken): unlocks the token's mutex, blocks
   * until notified, relocks; returns undefined. V8's wait(cv, mutex,
   * timeout?): the same on a mutex this thread holds, returning false if
   * `timeout` ms passed first, else true.
   */
  static wait (cv, mutexOrToken, timeout) {
    const what = 'Atomics.Condition.wait'
    const c = conditionOf(what, cv)[COND]
    if (isMutex(mutexOrToken)) {
      const t = timeout === undefined ? Infinity : millisOf(what, timeout)
      ownedByThisThread(what, mutexOrToken)
      checkCanBlock(what)
      return waitHolding(c, mutexOrToken, mutexOrToken[HOLDER], t) !== 'timed-out'
    }
    const token = lockedToken(what, mutexOrToken)
    checkCanBlock(what)
    waitHolding(c, token[TOKEN_MUTEX], token, Infinity)
    return undefined
  }

  /**
   * Waits until notified or `timeout` ms pass: true / false. With a
   * predicate, waits until it returns truthy (called holding the mutex, first
   * before any wait) and returns its last value as a boolean.
   */
  static waitFor (cv, unlockToken, timeout, predicate) {
    const what = 'Atomics.Condition.waitFor'
    const c = conditionOf(what, cv)[COND]
    const token = lockedToken(what, unlockToken)
    const t = millisOf(what, timeout)
    if (predicate !== undefined) callbackOf(what, predicate)
    checkCanBlock(what)
    const m = token[TOKEN_MUTEX]
    const deadline = deadlineOf(t)
    let satisfied = false
    for (;;) {
      if (predicate !== undefined) satisfied = Boolean(predicate())
      if (satisfied) return true
      const remaining = timeLeft(deadline)
      if (remaining <= 0) return false
      satisfied = waitHolding(c, m, token, remaining) !== 'timed-out'
    }
  }

  /** Wakes up to `count` waiters (default all); returns how many woke. */
  static notify (cv, count) {
    const what = 'Atomics.Condition.notify'
    const c = conditionOf(what, cv)[COND]
    if (count !== undefined && (typeof count !== 'number' || !(Number.isInteger(count) || count === Infinity))) {
      throw new TypeError(`${what}: count must be an integral number or Infinity, got ${show(count)}`)
    }
    const n = count === undefined ? Infinity : count
    // One notify of up to n, not n notifyOne calls: a thread stopped between
    // two of them would have woken some of the n and not the others.
    return n > 0 ? conditionInternal.notify(c, n) : 0
  }

  /**
   * V8's form of the proposal's future waitAsync(cv, mutex, timeout?): with
   * the mutex held by this thread (inside a lockAsync callback, or through a
   * token), unlocks it, waits without blocking, relocks; resolves undefined
   * (as V8's does, notified or timed out) once the mutex is held again.
   * Argument errors throw, as V8's do.
   */
  static waitAsync (cv, mutexOrToken, timeout) {
    const what = 'Atomics.Condition.waitAsync'
    const c = conditionOf(what, cv)[COND]
    const m = isToken(mutexOrToken) ? lockedToken(what, mutexOrToken)[TOKEN_MUTEX] : mutexOf(what, mutexOrToken)
    const t = timeout === undefined ? Infinity : millisOf(what, timeout)
    ownedByThisThread(what, m)
    // The task that waits: the token it passed, or the mutex's holder now.
    const holder = isToken(mutexOrToken) ? mutexOrToken : m[HOLDER]
    leave(m)
    return c.waitAsync(m[LOCK], { timeout: t }).then((r) => {
      relocked(m, holder, r)
    }, (e) => {
      relocked(m, holder, undefined)
      throw e
    })
  }

  /** V8's: whether x is a Condition of this module. */
  static isCondition (x) { return isCondition(x) }
}

Condition.BYTES = LockCondition.BYTES

module.exports = { Mutex, Condition, UnlockToken }
