'use strict'
// ManualResetEvent and AutoResetEvent, each in a few bytes of a
// SharedArrayBuffer.
//
// ManualResetEvent (8 bytes):
//
//   cell      meaning
//   STATE     bit 0 W: a waiter may be asleep (set by waiters, cleared by the
//             set that wakes them); bits 1–31 a counter whose parity is the
//             event: odd = set (bit 1, SET)
//   (cell 1)  reserved, stays 0
//
//   STATE (counter c, W)   event     STATE after     also
//   even c, W clear        set()     c + 1           (nobody asleep)
//   even c, W              set()     c + 1, W clear  wake every waiter: one native call
//   odd c                  set()     unchanged       (already set)
//   odd c                  reset()   c + 1
//   even c                 reset()   unchanged
//
// A waiter that finds STATE not set sets W (compareExchange) and sleeps
// while STATE holds that value; it is released once the counter moves on.
// Any change of the counter from an even value is a set, so a waiter asleep
// across set() is released even if reset() follows at once (the counter
// wraps after 2^31 changes: a waiter asleep across exactly that many would
// miss them). set() with W clear is one compareExchange, which fails if a
// waiter set W meanwhile; with W set it is one native call that sets the
// event, clears W and wakes every waiter (crates/futex-core/src/event.rs):
// a thread stopped in the middle of set() has either set nothing or set and
// woken everyone. A W left behind by a waiter that timed out, was aborted
// or whose thread ended costs the next set() one native call.
//
// AutoResetEvent (4 bytes): one word, STATE:
//
//   STATE     meaning
//   0         not set, nobody queued
//   SET (1)   set: one signal, nobody queued
//   Q         not set, waiters queued (the sign bit)
//
// Q is set exactly when waiters are queued on STATE: it changes only in the
// addon, under the lock of STATE's wait queue. A signal and a queued waiter
// never coexist. set() with Q clear is one compareExchange 0 → SET (a set
// event stays as it is); wait on a set event takes it, SET → 0. Everything
// else is decided by the addon under the queue's lock:
//
//   park      take the signal if there is one, else set Q and queue
//   set       with Q: hand the signal to the oldest queued waiter (it wakes
//             holding it), clearing Q if it was the last; nobody queued any
//             more: the word gets it
//   leave     a waiter that times out, is aborted or whose thread stops
//             clears Q if it was the last; it was handed nothing
//   lost      a waiter handed the signal whose thread stops sets the event
//             again, for the next waiter
//
// So N sets with N waiters queued release exactly N, a set with nobody
// waiting leaves one signal however often it is repeated, a waiter that
// leaves or dies leaves no count behind, and a thread stopped anywhere in
// set() or wait() has either done all of it or none.
//
// Over a shared region's memory (every process of the machine: lib/region.js)
// the queues are the region's, which know no protocol, so both events keep
// their state in the word alone:
//
//   ManualResetEvent  the same word; the set that finds W is one
//                     compareExchangeNotify (the change and a wake-up of
//                     every sleeper, in the region's queues)
//   AutoResetEvent    Q means "waiters may sleep" and is never cleared; a set
//                     stores SET (if not set already) and wakes one sleeper,
//                     which takes SET when it runs, competing with newcomers:
//                     two sets before anyone took the first leave one signal
//                     (.NET's AutoResetEvent says the same of itself)
//
// Sleepers over region memory sleep watching (lib/driver.js): a sleeper
// woken for a signal and killed before it took it leaves SET in the word,
// and its death wakes the next sleeper, which takes it.
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const acquiring = require('./acquire')
const futex = require('./futex')
const { eventAsync, waitWatching, enqueueWatchingAsync, regionEnds, inRegion } = futex.internal
const { runBlocking, runAsync } = require('./driver')
const { ACQUIRED, E_TIMEOUT, abortError } = require('./errors')
const { deadlineOf, timeLeft, show, sharedView, timeoutOf, asyncOptions } = require('./options')

const STATE = 0
const W = 1 // ManualResetEvent: a waiter may be asleep
const SET = 2 // ManualResetEvent: the counter is odd
const A_SET = 1 // AutoResetEvent: the signal
const A_Q = 1 << 31 // AutoResetEvent: waiters queued
const VIEW = Symbol('event view')
const REGION = Symbol('event over region memory')
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
  let v = Atomics.load(ta, STATE)
  if ((v & SET) !== 0) return RELEASED
  const counter = v >>> 1
  for (;;) {
    if ((v >>> 1) !== counter) return RELEASED // a set, perhaps reset again since
    if (ctx.cancelled) return CANCELLED
    const timeout = timeLeft(deadline)
    if (timeout <= 0) return TIMED_OUT
    if ((v & W) === 0) {
      const seen = Atomics.compareExchange(ta, STATE, v, v | W)
      if (seen !== v) {
        v = seen
        continue
      }
      v |= W
    }
    yield { index: STATE, value: v, timeout }
    v = Atomics.load(ta, STATE)
  }
}

function manualSet (ta, region) {
  for (;;) {
    const v = Atomics.load(ta, STATE)
    if ((v & SET) !== 0) return
    if ((v & W) !== 0 && region) {
      if (binding.compareExchangeNotify(ta, STATE, v, ((v + 2) | 0) & ~W, Infinity) === v) return
      continue
    }
    if ((v & W) !== 0) {
      binding.manualEventSet(ta, STATE)
      return
    }
    if (Atomics.compareExchange(ta, STATE, v, (v + 2) | 0) === v) return
  }
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
    this[REGION] = inRegion(view)
    if (set === true) manualSet(view, this[REGION])
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether the event is set (a snapshot). */
  get isSet () { return (Atomics.load(this[VIEW], STATE) & SET) !== 0 }

  /** Sets the event, releasing every waiter; waits return at once until reset(). */
  set () { manualSet(this[VIEW], this[REGION]) }

  /** Clears the event. */
  reset () {
    const ta = this[VIEW]
    for (;;) {
      const v = Atomics.load(ta, STATE)
      if ((v & SET) === 0) return
      if (Atomics.compareExchange(ta, STATE, v, (v + 2) | 0) === v) return
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

function autoSet (ta) {
  for (;;) {
    const v = Atomics.load(ta, STATE)
    if (v === 0) {
      if (Atomics.compareExchange(ta, STATE, 0, A_SET) === 0) return
      continue
    }
    if ((v & A_Q) !== 0) binding.autoEventSet(ta, STATE)
    return // set already, or handed over
  }
}

const takeSignal = (ta) => Atomics.compareExchange(ta, STATE, A_SET, 0) === A_SET

// --- AutoResetEvent over region memory (see the top of the file) ---

function regionSet (ta) {
  for (;;) {
    const v = Atomics.load(ta, STATE)
    if ((v & A_SET) !== 0) return
    if ((v & A_Q) === 0) {
      if (Atomics.compareExchange(ta, STATE, v, v | A_SET) === v) return
    } else if (binding.compareExchangeNotify(ta, STATE, v, v | A_SET, 1) === v) {
      return
    }
  }
}

function regionTake (ta) {
  for (;;) {
    const v = Atomics.load(ta, STATE)
    if ((v & A_SET) === 0) return false
    if (Atomics.compareExchange(ta, STATE, v, v & ~A_SET) === v) return true
  }
}

// The word to sleep on: STATE with Q set; -1 if a signal is there to take.
function regionMark (ta) {
  for (;;) {
    const v = Atomics.load(ta, STATE)
    if ((v & A_SET) !== 0) return -1
    if ((v & A_Q) !== 0 || Atomics.compareExchange(ta, STATE, v, v | A_Q) === v) return v | A_Q
  }
}

function regionWait (ta, timeout) {
  const deadline = deadlineOf(timeout)
  for (;;) {
    const ends = regionEnds(ta)
    if (regionTake(ta)) return true
    const remaining = timeLeft(deadline)
    if (remaining <= 0) return false
    const v = regionMark(ta)
    if (v !== -1) waitWatching(ta, STATE, v, ends, remaining)
  }
}

// Its protocol for lib/acquire.js: every wake-up ('ok', or a slice that ran
// out) is a look again; a wake-up that will not be used is handed on while
// the signal is there.
const AUTO_REGION = {
  index: STATE,
  now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && regionTake(ta),
  park (ta, waited, remaining) {
    for (;;) {
      const ends = regionEnds(ta)
      if (regionTake(ta)) return ACQUIRED
      const v = regionMark(ta)
      if (v === -1) continue
      const q = enqueueWatchingAsync(ta, STATE, v, ends, remaining, true)
      if (q === 'not-equal') continue
      return { token: q.token, promise: q.promise.then((o) => o === 'timed-out' ? 'ok' : o) }
    }
  },
  release: regionSet,
  passOn (ta) {
    if ((Atomics.load(ta, STATE) & A_SET) !== 0) futex.notify(ta, STATE, 1)
  },
  info: () => undefined,
  ok: undefined,
  missing: 'not set'
}

// The protocol for lib/acquire.js: the signal is what is acquired. One
// handed over while the wait was being aborted is set again (for the next
// waiter); a plain notify of the word ('ok') took nothing.
const AUTO = {
  index: STATE,
  now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && takeSignal(ta),
  park (ta, waited, remaining) {
    const q = eventAsync(ta, STATE, remaining)
    return q === 0 ? ACQUIRED : q
  },
  release: autoSet,
  passOn () {},
  info: () => undefined,
  ok: undefined,
  missing: 'not set'
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
    this[REGION] = inRegion(view)
    if (set === true) (this[REGION] ? regionSet : autoSet)(view)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether the event is set: holds a signal that no waiter took yet (a snapshot). */
  get isSet () { return (Atomics.load(this[VIEW], STATE) & A_SET) !== 0 }

  /**
   * Releases exactly one waiter; with nobody waiting, the event stays set
   * until one wait consumes it. Setting a set event does nothing.
   */
  set () { (this[REGION] ? regionSet : autoSet)(this[VIEW]) }

  /** Clears the event if it is set. */
  reset () { (this[REGION] ? regionTake : takeSignal)(this[VIEW]) }

  /**
   * Blocks until this waiter is released by a set (consuming it): true;
   * false after `timeout` ms.
   */
  wait (timeout) {
    const t = timeoutOf('AutoResetEvent.wait', timeout)
    checkCanBlock('AutoResetEvent.wait')
    const ta = this[VIEW]
    if (this[REGION]) return regionWait(ta, t)
    if (takeSignal(ta)) return true
    if (t === 0) return false
    return binding.autoEventWait(ta, STATE, t) === 0
  }

  /** Like wait, without blocking: resolves true / false; rejects with AbortError. */
  waitAsync (options) {
    let opts
    try {
      opts = asyncOptions('AutoResetEvent.waitAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    return acquiring.acquireAsync(this[REGION] ? AUTO_REGION : AUTO, this[VIEW], opts, 'AutoResetEvent.waitAsync').then(() => true, (e) => {
      if (e.code === E_TIMEOUT) return false
      throw e
    })
  }
}

AutoResetEvent.BYTES = 4

module.exports = { ManualResetEvent, AutoResetEvent }
