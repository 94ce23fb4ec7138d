'use strict'
// ManualResetEvent and AutoResetEvent, each in a few bytes of a
// SharedArrayBuffer.
//
// ManualResetEvent (8 bytes):
//
//   cell      meaning
//   STATE     a counter whose parity is the event: odd = set, even = not set
//   WAITERS   waiters asleep or about to sleep: set skips the native notify at 0
//
//   STATE     event     STATE after   also
//   even s    set()     s + 1         wake every waiter
//   odd s     set()     s             (already set)
//   odd s     reset()   s + 1
//   even s    reset()   s
//
// A waiter that finds STATE even sleeps while it still holds that value. Any
// change from an even value is a set, so a waiter asleep across set() is
// released even if reset() follows at once (STATE wraps after 2^32 changes:
// a waiter asleep across exactly that many would miss them). Ordering: the
// waiter reads STATE, adds itself to WAITERS, sleeps while STATE is what it
// read; set changes STATE, then reads WAITERS. If set reads 0, the waiter
// counted itself later and its sleep finds STATE changed.
//
// AutoResetEvent (4 bytes): one word, changed only by compareExchange:
//
//   bits 16–30  W  waiters registered (asleep or about to sleep), ≤ 32767
//   bits 0–15   S  signals: grants for registered waiters, plus at most one
//                  that leaves the event set; always S ≤ W + 1
//
//   word      event                     word after             also
//   W, S      set(), S < W + 1          W, S + 1               if S < W: wake one
//   W, S      set(), S = W + 1          unchanged              (already set)
//   W, S > 0  wait                      W, S − 1               returns true at once
//   W, 0      wait                      W + 1, 0               sleeps
//   W, S > 0  a registered waiter wakes W − 1, S − 1           true
//   W, S      a registered waiter       W − 1, min(S, W)       false / AbortError;
//             times out or aborts                              passes on a wake-up it took
//
// isSet is S > W: a signal beyond those owed to registered waiters.
// Exactness: set adds a signal only while S < W + 1, and every release takes
// one, so N sets with N waiters registered release exactly N (W − S drops by
// one per set, and a release keeps it), and a set with nobody waiting leaves
// one signal however often it is repeated. A waiter that leaves without a
// signal lowers the cap with it, so signals that were granted to it stay
// only as far as the others (plus one "set") can use them. A waiter woken by
// set's notify that leaves anyway (its signal fired too late to take the
// waiter back out of the queue) wakes the next one in its place.
//
// Threads that die while waiting: the event's sleepers leave the native
// queue, but the thread's registration stays counted (WAITERS, or W), as it
// cannot be taken back for it. For ManualResetEvent that only costs a native
// notify that finds nobody; for AutoResetEvent, each dead waiter raises the
// cap S ≤ W + 1 by one for good: a set() it was owed stays as a signal the
// next waiter takes, so repeated sets with nobody alive waiting can leave one
// signal more per dead waiter than "set once".
const futex = require('./futex')
const { Atomics, checkCanBlock } = require('./host')
const { runBlocking, runAsync } = require('./driver')
const { abortError } = require('./errors')
const { deadlineOf, timeLeft, show, sharedView, timeoutOf, asyncOptions } = require('./options')

const { notify } = futex

const STATE = 0
const WAITERS = 1
const MAX_WAITERS = 0x7fff
const VIEW = Symbol('event view')
const NEVER_CANCELLED = Object.freeze({ cancelled: false })

const RELEASED = 0
const TIMED_OUT = 1
const CANCELLED = 2

function flagOf (what, set) {
  if (set === undefined) return false
  if (typeof set !== 'boolean') throw new TypeError(`${what}: initiallySet must be a boolean, got ${show(set)}`)
  return set
}

// Builds the view of a new event: `new X(initiallySet?)` or
// `new X(buffer, byteOffset?, initiallySet?)`.
function viewOf (what, bytes, buffer, byteOffset, initiallySet) {
  if (buffer === undefined || typeof buffer === 'boolean') {
    if (byteOffset !== undefined) throw new TypeError(`${what}: a byteOffset needs a buffer`)
    return { view: sharedView(what, undefined, undefined, bytes), set: flagOf(what, buffer) }
  }
  const set = initiallySet === undefined ? undefined : flagOf(what, initiallySet)
  return { view: sharedView(what, buffer, byteOffset, bytes), set }
}

function waitAsyncWith (ta, options, what, procedure) {
  let opts
  try {
    opts = asyncOptions(what, options)
  } catch (e) {
    return Promise.reject(e)
  }
  const signal = opts.signal
  if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
  const ctx = { cancelled: false }
  return runAsync(ta, procedure(ta, deadlineOf(opts.timeout), ctx), ctx, signal).then((r) => {
    if (r === CANCELLED) throw abortError(signal)
    return r === RELEASED
  })
}

// --- ManualResetEvent -------------------------------------------------------

function * manualWait (ta, deadline, ctx) {
  const s = Atomics.load(ta, STATE)
  if ((s & 1) === 1) return RELEASED
  Atomics.add(ta, WAITERS, 1)
  try {
    for (;;) {
      if (Atomics.load(ta, STATE) !== s) return RELEASED
      if (ctx.cancelled) return CANCELLED
      const timeout = timeLeft(deadline)
      if (timeout <= 0) return TIMED_OUT
      yield { index: STATE, value: s, timeout }
    }
  } finally {
    Atomics.sub(ta, WAITERS, 1)
  }
}

function manualSet (ta) {
  for (;;) {
    const s = Atomics.load(ta, STATE)
    if ((s & 1) === 1) return
    if (Atomics.compareExchange(ta, STATE, s, (s + 1) | 0) === s) break
  }
  if (Atomics.load(ta, WAITERS) > 0) notify(ta, STATE, Infinity)
}

class ManualResetEvent {
  /**
   * new ManualResetEvent(initiallySet = false): in a fresh buffer.
   * new ManualResetEvent(buffer, byteOffset?, initiallySet?): at byteOffset
   * of a SharedArrayBuffer; only the creator passes initiallySet.
   */
  constructor (buffer, byteOffset, initiallySet) {
    const { view, set } = viewOf('ManualResetEvent', ManualResetEvent.BYTES, buffer, byteOffset, initiallySet)
    this[VIEW] = view
    if (set === true) manualSet(view)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether the event is set (a snapshot). */
  get isSet () { return (Atomics.load(this[VIEW], STATE) & 1) === 1 }

  /** Sets the event, releasing every waiter; waits return at once until reset(). */
  set () { manualSet(this[VIEW]) }

  /** Clears the event. */
  reset () {
    const ta = this[VIEW]
    for (;;) {
      const s = Atomics.load(ta, STATE)
      if ((s & 1) === 0) return
      if (Atomics.compareExchange(ta, STATE, s, (s + 1) | 0) === s) return
    }
  }

  /** Blocks until the event is set: true; false after `timeout` ms. */
  wait (timeout) {
    const t = timeoutOf('ManualResetEvent.wait', timeout)
    checkCanBlock('ManualResetEvent.wait')
    const ta = this[VIEW]
    return runBlocking(ta, manualWait(ta, deadlineOf(t), NEVER_CANCELLED)) === RELEASED
  }

  /** Like wait, without blocking: resolves true / false; rejects with AbortError. */
  waitAsync (options) {
    return waitAsyncWith(this[VIEW], options, 'ManualResetEvent.waitAsync', manualWait)
  }
}

ManualResetEvent.BYTES = 8

// --- AutoResetEvent ---------------------------------------------------------

const waitersOf = (v) => v >>> 16
const signalsOf = (v) => v & 0xffff

// Takes a signal without registering, if there is one.
function tryTake (ta) {
  for (;;) {
    const v = Atomics.load(ta, STATE)
    if (signalsOf(v) === 0) return false
    if (Atomics.compareExchange(ta, STATE, v, v - 1) === v) return true
  }
}

// A registered waiter leaves without a signal; `woken`: it consumed a
// wake-up, which goes to the next waiter if there is a signal for it.
function leave (ta, woken) {
  for (;;) {
    const v = Atomics.load(ta, STATE)
    const w = waitersOf(v)
    const s = Math.min(signalsOf(v), w)
    if (Atomics.compareExchange(ta, STATE, v, ((w - 1) << 16) | s) !== v) continue
    if (woken && s > 0 && w > 1) notify(ta, STATE, 1)
    return
  }
}

function * autoWait (ta, deadline, ctx, what) {
  // Take a signal, or register.
  for (;;) {
    const v = Atomics.load(ta, STATE)
    if (signalsOf(v) > 0) {
      if (Atomics.compareExchange(ta, STATE, v, v - 1) === v) return RELEASED
      continue
    }
    if (ctx.cancelled) return CANCELLED
    if (timeLeft(deadline) <= 0) return TIMED_OUT
    if (waitersOf(v) >= MAX_WAITERS) throw new RangeError(`${what}: ${MAX_WAITERS} waiters are waiting already`)
    if (Atomics.compareExchange(ta, STATE, v, v + 0x10000) === v) break
  }
  let woken = false
  for (;;) {
    // An aborted waiter takes no signal, even one its wake-up was for.
    if (ctx.cancelled) {
      leave(ta, woken)
      return CANCELLED
    }
    const v = Atomics.load(ta, STATE)
    if (signalsOf(v) > 0) {
      // Unregister and take a signal in one step.
      if (Atomics.compareExchange(ta, STATE, v, v - 0x10001) === v) return RELEASED
      continue
    }
    const timeout = timeLeft(deadline)
    if (timeout <= 0) {
      leave(ta, woken)
      return TIMED_OUT
    }
    woken = (yield { index: STATE, value: v, timeout }) === 'ok'
  }
}

class AutoResetEvent {
  /**
   * new AutoResetEvent(initiallySet = false): in a fresh buffer.
   * new AutoResetEvent(buffer, byteOffset?, initiallySet?): at byteOffset of
   * a SharedArrayBuffer; only the creator passes initiallySet.
   */
  constructor (buffer, byteOffset, initiallySet) {
    const { view, set } = viewOf('AutoResetEvent', AutoResetEvent.BYTES, buffer, byteOffset, initiallySet)
    this[VIEW] = view
    if (set === true) this.set()
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether the event is set, i.e. holds a signal no registered waiter is owed (a snapshot). */
  get isSet () {
    const v = Atomics.load(this[VIEW], STATE)
    return signalsOf(v) > waitersOf(v)
  }

  /**
   * Releases exactly one waiter; with nobody waiting, the event stays set
   * until one wait consumes it. Setting a set event does nothing.
   */
  set () {
    const ta = this[VIEW]
    for (;;) {
      const v = Atomics.load(ta, STATE)
      const w = waitersOf(v)
      const s = signalsOf(v)
      if (s >= w + 1) return
      if (Atomics.compareExchange(ta, STATE, v, v + 1) !== v) continue
      if (s < w) notify(ta, STATE, 1)
      return
    }
  }

  /** Clears the event if it is set (signals owed to registered waiters stay theirs). */
  reset () {
    const ta = this[VIEW]
    for (;;) {
      const v = Atomics.load(ta, STATE)
      if (signalsOf(v) <= waitersOf(v)) return
      if (Atomics.compareExchange(ta, STATE, v, v - 1) === v) return
    }
  }

  /**
   * Blocks until this waiter is released by a set (consuming it): true;
   * false after `timeout` ms.
   * @throws {RangeError} 32767 waiters are waiting already
   */
  wait (timeout) {
    const t = timeoutOf('AutoResetEvent.wait', timeout)
    checkCanBlock('AutoResetEvent.wait')
    const ta = this[VIEW]
    if (tryTake(ta)) return true
    return runBlocking(ta, autoWait(ta, deadlineOf(t), NEVER_CANCELLED, 'AutoResetEvent.wait')) === RELEASED
  }

  /** Like wait, without blocking: resolves true / false; rejects with AbortError (or RangeError, as wait throws). */
  waitAsync (options) {
    return waitAsyncWith(this[VIEW], options, 'AutoResetEvent.waitAsync',
      (ta, deadline, ctx) => autoWait(ta, deadline, ctx, 'AutoResetEvent.waitAsync'))
  }
}

AutoResetEvent.BYTES = 4

module.exports = { ManualResetEvent, AutoResetEvent }
