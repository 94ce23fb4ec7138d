'use strict'
// WaitGroup: Go's sync.WaitGroup (a countdown latch that can count up
// again), in 12 bytes of a SharedArrayBuffer.
//
//   cell      meaning
//   COUNT     the counter (0 … 2^31 − 1)
//   EPOCH     bumped every time COUNT reaches zero (from above); sleepers
//             wait on it
//   (cell 2)  reserved, stays 0
//
//   COUNT before   event             COUNT after   also
//   c              add(n), c + n > 0  c + n
//   c > 0          add(−c) / done()   0             EPOCH + 1; wake every waiter
//   c              c + n < 0          c             NegativeCounterError
//   c              c + n > 2^31 − 1   c             RangeError
//
// The rule a waiter follows: wait returns true if COUNT is zero when it
// starts, or if COUNT reaches zero at any moment while it waits, even when
// COUNT has gone up again by the time the waiter runs. It reads EPOCH first
// and then COUNT; any change of EPOCH after that read is a zero it was
// waiting for. (EPOCH wraps after 2^32 zeros: a waiter that sleeps through
// exactly that many would miss them.)
//
// A change that keeps COUNT above zero is one compareExchange. Reaching
// zero is one native call (crates/futex-core/src/wake.rs): the
// compareExchange of COUNT to 0, EPOCH + 1, and the wake-up of every waiter
// of EPOCH. Made in JavaScript, those would be three steps, and a thread
// stopped between them (worker.terminate()) would leave the counter at zero
// with the epoch never bumped or its sleepers never woken: they would sleep
// until the next zero. A call runs to its end, so a thread stopped anywhere
// in add / done has made all of the change or none.
//
// Ordering (all SeqCst): the waiter reads EPOCH, reads COUNT, then sleeps
// while EPOCH is what it read. The zero's call bumps EPOCH, then looks for
// waiters (the wait table's presence count, then its queue): a waiter that
// compared EPOCH before the bump is queued by then, one that compares after
// sees it changed (or read EPOCH after the bump: that zero was before it
// started). Wake-ups are broadcasts, so a waiter that leaves by timeout or
// abort after consuming one takes nothing from anyone.
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const { runBlocking, runAsync } = require('./driver')
const { NegativeCounterError, abortError } = require('./errors')
const { deadlineOf, timeLeft, show, sharedView, timeoutOf, asyncOptions } = require('./options')

const COUNT = 0
const EPOCH = 1
const MAX = 0x7fffffff
const VIEW = Symbol('WaitGroup view')
const NEVER_CANCELLED = Object.freeze({ cancelled: false })

const ZERO = 0
const TIMED_OUT = 1
const CANCELLED = 2

// Sleeps until EPOCH is no longer `epoch` (a zero happened), the deadline
// passes, or the signal fires. The caller already found COUNT non-zero.
function * sleep (ta, epoch, deadline, ctx) {
  for (;;) {
    if (Atomics.load(ta, EPOCH) !== epoch) return ZERO
    if (ctx.cancelled) return CANCELLED
    const timeout = timeLeft(deadline)
    if (timeout <= 0) return TIMED_OUT
    yield { index: EPOCH, value: epoch, timeout }
  }
}

function countOf (what, n) {
  if (typeof n !== 'number') throw new TypeError(`${what}: count must be a number, got ${show(n)}`)
  if (!Number.isInteger(n) || n < 0 || n > MAX) {
    throw new RangeError(`${what}: count must be an integer from 0 to ${MAX}, got ${n}`)
  }
  return n
}

function deltaOf (what, n) {
  if (typeof n !== 'number') throw new TypeError(`${what}: n must be a number, got ${show(n)}`)
  if (!Number.isInteger(n)) throw new RangeError(`${what}: n must be an integer, got ${n}`)
  return n
}

function add (ta, n, what) {
  if (n === 0) return
  for (;;) {
    const c = Atomics.load(ta, COUNT)
    const next = c + n
    if (next < 0) throw new NegativeCounterError(`${what}: the counter is ${c}; adding ${n} would take it below zero`)
    if (next > MAX) throw new RangeError(`${what}: the counter is ${c}; adding ${n} would exceed ${MAX}`)
    if (next === 0) {
      // To zero, the epoch on and its waiters woken: one native call.
      if (binding.countToZero(ta, COUNT, c) === c) return
    } else if (Atomics.compareExchange(ta, COUNT, c, next) === c) {
      return
    }
  }
}

class WaitGroup {
  /**
   * new WaitGroup(count = 0): in a fresh buffer.
   * new WaitGroup(buffer, byteOffset?, count?): at byteOffset of a
   * SharedArrayBuffer; only the creator passes `count`.
   */
  constructor (buffer, byteOffset, count) {
    let n
    if (buffer === undefined || typeof buffer === 'number') {
      n = buffer === undefined ? 0 : countOf('WaitGroup', buffer)
      if (byteOffset !== undefined) throw new TypeError('WaitGroup: a byteOffset needs a buffer')
      this[VIEW] = sharedView('WaitGroup', undefined, undefined, WaitGroup.BYTES)
    } else {
      n = count === undefined ? undefined : countOf('WaitGroup', count)
      this[VIEW] = sharedView('WaitGroup', buffer, byteOffset, WaitGroup.BYTES)
    }
    if (n !== undefined) Atomics.store(this[VIEW], COUNT, n)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** The counter now (a snapshot). */
  get count () { return Atomics.load(this[VIEW], COUNT) }

  /**
   * Adds `n` (an integer, may be negative). Reaching zero wakes every waiter.
   * Throws NegativeCounterError below zero, RangeError past 2^31 − 1; the
   * counter is then unchanged.
   */
  add (n) {
    add(this[VIEW], deltaOf('WaitGroup.add', n), 'WaitGroup.add')
  }

  /** add(-1). */
  done () {
    add(this[VIEW], -1, 'WaitGroup.done')
  }

  /** Blocks until the counter is (or becomes) zero: true; false after `timeout` ms. */
  wait (timeout) {
    const t = timeoutOf('WaitGroup.wait', timeout)
    checkCanBlock('WaitGroup.wait')
    const ta = this[VIEW]
    const epoch = Atomics.load(ta, EPOCH)
    if (Atomics.load(ta, COUNT) === 0) return true
    const deadline = deadlineOf(t)
    return runBlocking(ta, sleep(ta, epoch, deadline, NEVER_CANCELLED)) === ZERO
  }

  /** Like wait, without blocking: resolves true / false; rejects with AbortError. */
  waitAsync (options) {
    let opts
    try {
      opts = asyncOptions('WaitGroup.waitAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const signal = opts.signal
    if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
    const ta = this[VIEW]
    const epoch = Atomics.load(ta, EPOCH)
    if (Atomics.load(ta, COUNT) === 0) return Promise.resolve(true)
    const deadline = deadlineOf(opts.timeout)
    const ctx = { cancelled: false }
    return runAsync(ta, sleep(ta, epoch, deadline, ctx), ctx, signal).then((r) => {
      if (r === CANCELLED) throw abortError(signal)
      return r === ZERO
    })
  }
}

WaitGroup.BYTES = 12

module.exports = { WaitGroup }
