'use strict'
// Once: one-time initialisation shared by every thread, in 12 bytes of a
// SharedArrayBuffer: an AsyncLock (8 bytes) and a state word.
//
//   cells 0–1   the AsyncLock (lib/lock.js): whoever holds it runs fn, or
//               is about to look at STATE
//   cell 2      STATE: NOT_DONE (0) or DONE (1)
//
//   lock                      STATE      meaning
//   free                      NOT_DONE   not initialised; nobody is running fn
//   held by a live thread     NOT_DONE   that thread runs fn (or is about to);
//                                        callers queue on the lock
//   held by a dead thread     NOT_DONE   fn's thread ended inside fn: the next
//                                        locker takes the lock over
//                                        (OWNER_DIED) and runs fn again
//   held                      DONE       fn finished; the holder is about to
//                                        unlock (or is a late caller that saw
//                                        DONE and is leaving)
//   free                      DONE       initialised: every call returns false
//                                        after one Atomics.load
//
// STATE goes from NOT_DONE to DONE once and never back. It is written only
// by the lock's holder, after fn completed and before it unlocks, so a
// thread that takes the lock afterwards (or loads DONE) sees everything fn
// wrote. fn throwing, rejecting or its thread dying leaves STATE NOT_DONE,
// and the next holder of the lock (the oldest waiter, or a later caller)
// runs fn again. A thread that loads DONE never touches the lock.
const { AsyncLock, internal: lockInternal } = require('./lock')
const { OWNER_DIED, E_TIMEOUT, LockTimeoutError, DeadlockError } = require('./errors')
const { sharedView, timeoutOf, isSignalLike, asyncOptions, callbackOf } = require('./options')
const { isThenable, settled } = require('./held')
const { Atomics, canBlock, cannotBlock } = require('./host')

const { opsOf } = lockInternal

const STATE = 2
const NOT_DONE = 0
const DONE = 1
const VIEW = Symbol('Once view')
const LOCK = Symbol('Once lock')

const INFO_FIRST = Object.freeze({ ownerDied: false })
const INFO_OWNER_DIED = Object.freeze({ ownerDied: true })
const RESOLVED_FALSE = Promise.resolve(false)

// The Onces whose fn is running synchronously on this thread, innermost
// last (views; copies of one Once are told apart by buffer and offset). A
// call into one of them from inside its own fn is a deadlock.
const running = []

function isRunning (ta) {
  for (let i = running.length - 1; i >= 0; i--) {
    const r = running[i]
    if (r.buffer === ta.buffer && r.byteOffset === ta.byteOffset) return true
  }
  return false
}

function insideFn (what) {
  return new DeadlockError(`${what}: called from inside this Once's own fn; it would wait for itself`)
}

// Checks what runAsync's options would be rejected for, allocating nothing
// (the done path must not allocate). asyncOptions repeats the checks later.
function checkOptions (what, options) {
  if (options === undefined || options === null) return
  if (typeof options !== 'object') asyncOptions(what, options) // throws
  timeoutOf(what, options.timeout)
  const signal = options.signal
  if (signal !== undefined && !isSignalLike(signal)) {
    asyncOptions(what, options) // throws the same TypeError as everywhere
  }
}

// Calls fn(info) holding the lock (lk: its operations, lib/lock.js opsOf),
// marked as running on this thread; releases the lock if fn throws.
function call (ta, lk, fn, info) {
  running.push(ta)
  try {
    return fn(info)
  } catch (e) {
    lk.unlock()
    throw e
  } finally {
    running.pop()
  }
}

// Whether fn's result is a thenable; if reading its `then` throws (a getter,
// a revoked Proxy), that is fn's failure: the lock is given back, the Once
// stays not done.
function thenable (lk, result) {
  try {
    return isThenable(result)
  } catch (e) {
    lk.unlock()
    throw e
  }
}

// fn completed: the Once is done, and the lock is given back.
function finish (ta, lk) {
  Atomics.store(ta, STATE, DONE)
  lk.unlock()
  return true
}

// Runs fn(info) holding the lock. Returns true when fn completed (STATE is
// DONE); releases the lock however fn ends.
function runHeldSync (ta, lk, fn, info) {
  if (thenable(lk, call(ta, lk, fn, info))) {
    lk.unlock()
    throw new TypeError('Once.run: fn returned a promise (or thenable); the Once stays not done. Use runAsync for an async fn')
  }
  return finish(ta, lk)
}

// The same for runAsync: a thenable result is awaited; DONE is stored only
// when it fulfils.
function runHeldAsync (ta, lk, fn, info) {
  const result = call(ta, lk, fn, info)
  if (!thenable(lk, result)) return finish(ta, lk)
  return settled(result).then(() => finish(ta, lk), (e) => {
    lk.unlock()
    throw e
  })
}

class Once {
  /**
   * @param {SharedArrayBuffer} [buffer] a fresh one if omitted; the bytes
   *   must be zero the first time (not done)
   * @param {number} [byteOffset=0] a multiple of 4; takes Once.BYTES bytes
   */
  constructor (buffer, byteOffset) {
    const ta = sharedView('Once', buffer, byteOffset, Once.BYTES)
    this[VIEW] = ta
    this[LOCK] = opsOf(new AsyncLock(ta.buffer, ta.byteOffset), 'Once')
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether fn has run to completion (a snapshot; once true, always true). */
  get isDone () { return Atomics.load(this[VIEW], STATE) === DONE }

  /**
   * Blocking. Runs fn({ ownerDied }) unless done; other threads wait for it.
   * Returns true if this call ran fn to completion, false if it was already
   * done (also when another thread finished it while this one waited).
   */
  run (fn, timeout) {
    if (typeof fn !== 'function') callbackOf('Once.run', fn)
    const t = timeout === undefined ? Infinity : timeoutOf('Once.run', timeout)
    const ta = this[VIEW]
    if (Atomics.load(ta, STATE) === DONE) return false
    return runBlocking(ta, this[LOCK], fn, t)
  }

  /**
   * Like run, without blocking: resolves true / false as run returns. fn may
   * return a promise: the Once is done when it fulfils. `timeout` and
   * `signal` bound the wait for another thread's fn (LockTimeoutError,
   * AbortError), not this caller's own fn.
   */
  runAsync (fn, options) {
    try {
      if (typeof fn !== 'function') callbackOf('Once.runAsync', fn)
      if (options !== undefined) checkOptions('Once.runAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const ta = this[VIEW]
    if (Atomics.load(ta, STATE) === DONE) return RESOLVED_FALSE
    return runAsyncSlow(ta, this[LOCK], fn, options)
  }
}

function runBlocking (ta, lk, fn, timeout) {
  if (isRunning(ta)) throw insideFn('Once.run')
  if (lk.held()) {
    throw new DeadlockError('Once.run: this thread is already running this Once\'s fn (a runAsync of this thread is in progress); blocking would never end')
  }
  // Where this thread may not block, it takes the lock only if that needs
  // no wait (a wait of 0 ms), and otherwise throws.
  let status
  try {
    status = lk.lock(canBlock ? timeout : 0)
  } catch (e) {
    if (e instanceof LockTimeoutError) {
      if (!canBlock) throw cannotBlock('Once.run')
      throw new LockTimeoutError(`Once.run: another thread's fn did not finish within ${timeout} ms`)
    }
    if (e instanceof DeadlockError) throw new DeadlockError('Once.run: a runAsync of this thread is waiting for this Once; blocking would never end')
    throw e
  }
  if (Atomics.load(ta, STATE) === DONE) {
    lk.unlock()
    return false
  }
  return runHeldSync(ta, lk, fn, status === OWNER_DIED ? INFO_OWNER_DIED : INFO_FIRST)
}

function runAsyncSlow (ta, lk, fn, options) {
  if (isRunning(ta)) return Promise.reject(insideFn('Once.runAsync'))
  let opts
  try {
    opts = asyncOptions('Once.runAsync', options)
  } catch (e) {
    return Promise.reject(e)
  }
  return lk.lockAsync(opts, 'Once.runAsync').then((status) => {
    if (Atomics.load(ta, STATE) === DONE) {
      lk.unlock()
      return false
    }
    return runHeldAsync(ta, lk, fn, status === OWNER_DIED ? INFO_OWNER_DIED : INFO_FIRST)
  }, (e) => {
    if (e.code === E_TIMEOUT) throw new LockTimeoutError(`Once.runAsync: another thread's fn did not finish within ${opts.timeout} ms`)
    throw e
  })
}

Once.BYTES = 12

module.exports = { Once }
