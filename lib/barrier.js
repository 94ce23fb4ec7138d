'use strict'
// Barrier: a reusable (cyclic) barrier for `parties` threads or async calls,
// in 16 bytes of a SharedArrayBuffer (byteOffset a multiple of 8).
//
//   bytes   cell     meaning
//   0–7     WORD     one 64-bit word, changed only by compareExchange:
//                      bits  0–29  ARRIVED  parties waiting in the current
//                                           generation (of a broken one: those
//                                           that have not left yet)
//                      bit   30    BROKEN   the current generation is broken
//                      bits 32–47  FATES    bit (g mod 16): generation g ended
//                                           broken (1) or complete (0)
//                      bits 48–63  GEN      the current generation (mod 2^16)
//   8–11    PARTIES  set once by the creator (1 … 2^30)
//   12–15   (reserved, stays 0)
//
//   WORD before           event                      WORD after                          caller gets
//   g, n, open            wait, n + 1 < parties       g, n + 1, open                      sleeps
//   g, n, open            wait, n + 1 = parties       g + 1, 0, open, FATES[g+1] = 0      true; the n sleepers false
//   g, n, open            a sleeper times out/aborts  g, n − 1, BROKEN                    LockTimeoutError / AbortError
//   g, n, BROKEN          a sleeper wakes             g, n − 1, BROKEN                    BarrierBrokenError
//   g, n, BROKEN          wait                        unchanged                           BarrierBrokenError
//   g, n, any (n > 0 or   reset()                     g + 1, 0, open, FATES[g] = 1,       the n sleepers BarrierBrokenError
//     BROKEN)                                           FATES[g+1] = 0
//   g, 0, open            reset()                     unchanged
//
// Every decision about a generation is one compareExchange of WORD, so a
// generation has exactly one outcome. When the last party arrives while
// another one's timeout expires (or its signal fires), both try to change
// the same word `g, parties − 1, open`: if the arrival wins, the generation is
// complete and the one that timed out returns false like every other sleeper
// (its timeout came too late); if the timeout wins, the generation is broken
// and the last arrival, finding BROKEN, throws BarrierBrokenError like every
// sleeper. Nobody of a broken generation is told it completed.
//
// A sleeper that wakes learns the fate of its generation g from the word: GEN
// still g → open (sleep again) or BROKEN; GEN one to 15 past g → FATES bit
// (g mod 16), which stays until GEN reaches g + 16. The only way to be 16
// generations late is for the barrier to be used by more callers than it has
// parties (or reset 16 times) while a woken sleeper has not run yet; such a
// sleeper cannot know what happened and throws BarrierBrokenError.
//
// Sleepers wait on WORD itself (futex on a BigInt64Array element) and only
// notifyAll is used: completion, break and reset each change WORD and wake
// every sleeper if ARRIVED said there were any, in one native call (the
// compareExchange and the wake-up, crates/futex-core/src/wake.rs). Made as
// a compareExchange and then a notify, a thread stopped in between
// (worker.terminate()) would leave a generation complete or broken with its
// sleepers asleep, and a later reset() would find nobody arrived and wake
// nobody either; a call runs to its end, so a party stopped anywhere has
// changed WORD and woken the sleepers, or done neither. With nobody asleep
// (ARRIVED 0) the change is one compareExchange. A sleeper counts itself
// in ARRIVED (its arrival) before it sleeps on the value it read, so either
// the waker sees it or its sleep finds WORD changed. A party that leaves by
// timeout or abort takes itself out of ARRIVED in the same compareExchange
// that breaks the generation; a wake-up it consumed while leaving was a
// broadcast, so nobody needed it.
//
// A party whose thread dies while it waits has arrived: its generation
// completes when the others arrive (it counts as one of them). The next
// generation misses it: the others wait until their own timeout breaks it or
// someone calls reset().
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const { runBlocking, runAsync } = require('./driver')
const { LockTimeoutError, BarrierBrokenError, abortError } = require('./errors')
const { deadlineOf, timeLeft, show, sharedView, timeoutOf, asyncOptions } = require('./options')

const WORD = 0
const PARTIES = 2 // in the Int32Array view
const ARRIVED_MASK = 0x3fffffff
const BROKEN = 0x40000000
const MAX_PARTIES = 0x40000000
const VIEW = Symbol('Barrier view')
const BIG = Symbol('Barrier word')
const NEVER_CANCELLED = Object.freeze({ cancelled: false })

// Outcomes of a party's wait.
const OPEN = 0
const COMPLETE = 1
const IS_BROKEN = 2
const TIMED_OUT = 3
const CANCELLED = 4

const lowOf = (w) => Number(BigInt.asUintN(32, w))
const highOf = (w) => Number(BigInt.asUintN(32, w >> 32n))
const word = (high, low) => BigInt.asIntN(64, (BigInt(high >>> 0) << 32n) | BigInt(low >>> 0))
const genOf = (high) => high >>> 16
// High half of generation g + 1 after g ended (broken or not).
function nextHigh (high, brokenFate) {
  const g = genOf(high)
  const next = (g + 1) & 0xffff
  let fates = high & 0xffff
  if (brokenFate) fates |= 1 << (g & 15)
  fates &= ~(1 << (next & 15))
  return ((next << 16) | fates) >>> 0
}

// What WORD `w` says of generation g, for a party of g.
function fateOf (w, g) {
  const high = highOf(w)
  const d = (genOf(high) - g) & 0xffff
  if (d === 0) return (lowOf(w) & BROKEN) !== 0 ? IS_BROKEN : OPEN
  if (d < 16) return (high & (1 << (g & 15))) !== 0 ? IS_BROKEN : COMPLETE
  return IS_BROKEN // too late to know (see the top of the file)
}

// WORD w → next, and if that took and anyone sleeps, every sleeper woken:
// one step (see the top of the file). True if it took.
function change (big, w, next, sleepers) {
  if (sleepers === 0) return Atomics.compareExchange(big, WORD, w, next) === w
  return binding.compareExchangeNotify(big, WORD, w, next, Infinity) === w
}

// Arrival. Returns -1 for the last party (the generation is complete), else
// the generation joined. Throws BarrierBrokenError on a broken generation.
function arrive (big, parties, what) {
  for (;;) {
    const w = Atomics.load(big, WORD)
    const low = lowOf(w)
    if ((low & BROKEN) !== 0) throw new BarrierBrokenError(`${what}: the barrier is broken (reset() repairs it)`)
    const n = low & ARRIVED_MASK
    const high = highOf(w)
    if (n + 1 >= parties) {
      if (change(big, w, word(nextHigh(high, false), 0), n)) return -1
    } else if (Atomics.compareExchange(big, WORD, w, word(high, low + 1)) === w) {
      return genOf(high)
    }
  }
}

// A party of g leaves it: if g is still open, breaks it (taking itself out of
// ARRIVED) and returns `reason`; if g completed meanwhile, COMPLETE; if it is
// broken, takes itself out of ARRIVED (while g is current) and IS_BROKEN.
function leave (big, g, reason) {
  for (;;) {
    const w = Atomics.load(big, WORD)
    const fate = fateOf(w, g)
    if (fate === COMPLETE) return COMPLETE
    if (fate === IS_BROKEN && genOf(highOf(w)) !== g) return IS_BROKEN
    const low = lowOf(w)
    const n = (low & ARRIVED_MASK) - 1
    // Breaking wakes the others; leaving a broken generation wakes nobody.
    if (change(big, w, word(highOf(w), BROKEN | n), fate === IS_BROKEN ? 0 : n)) {
      return fate === IS_BROKEN ? IS_BROKEN : reason
    }
  }
}

// The waiting procedure of a party of generation g (see lib/driver.js).
function * sleep (big, g, deadline, ctx) {
  for (;;) {
    const w = Atomics.load(big, WORD)
    const fate = fateOf(w, g)
    if (fate === COMPLETE) return COMPLETE
    if (fate === IS_BROKEN) return leave(big, g, IS_BROKEN)
    if (ctx.cancelled) return leave(big, g, CANCELLED)
    const timeout = timeLeft(deadline)
    if (timeout <= 0) return leave(big, g, TIMED_OUT)
    yield { index: WORD, value: w, timeout }
  }
}

function partiesOf (what, n) {
  if (typeof n !== 'number') throw new TypeError(`${what}: parties must be a number, got ${show(n)}`)
  if (!Number.isInteger(n) || n < 1 || n > MAX_PARTIES) {
    throw new RangeError(`${what}: parties must be an integer from 1 to ${MAX_PARTIES}, got ${n}`)
  }
  return n
}

function brokenError (what) {
  return new BarrierBrokenError(`${what}: the barrier was broken while this party waited`)
}

class Barrier {
  /**
   * new Barrier(parties): in a fresh buffer.
   * new Barrier(buffer, byteOffset?, parties?): at byteOffset (a multiple of
   * 8) of a SharedArrayBuffer; only the creator passes `parties`, copies
   * rebuilt in other threads read it from the buffer.
   */
  constructor (buffer, byteOffset, parties) {
    let view, n
    if (typeof buffer === 'number') {
      n = partiesOf('Barrier', buffer)
      if (byteOffset !== undefined) throw new TypeError('Barrier: a byteOffset needs a buffer')
      view = sharedView('Barrier', undefined, undefined, Barrier.BYTES)
    } else {
      if (buffer === undefined) throw new TypeError('Barrier: expected a number of parties or a SharedArrayBuffer')
      n = parties === undefined ? undefined : partiesOf('Barrier', parties)
      view = sharedView('Barrier', buffer, byteOffset, Barrier.BYTES)
      if (view.byteOffset % 8 !== 0) throw new RangeError(`Barrier: byteOffset must be a multiple of 8, got ${view.byteOffset}`)
      if (n === undefined) {
        const stored = Atomics.load(view, PARTIES)
        if (stored === 0) {
          throw new RangeError(`Barrier: no barrier at byteOffset ${view.byteOffset} (parties is 0): pass parties where it is created`)
        }
        if (stored < 1 || stored > MAX_PARTIES) {
          throw new RangeError(`Barrier: no barrier at byteOffset ${view.byteOffset} (parties is ${stored}, not from 1 to ${MAX_PARTIES}): is the byteOffset right?`)
        }
      }
    }
    if (n !== undefined) Atomics.store(view, PARTIES, n)
    this[VIEW] = view
    this[BIG] = new BigInt64Array(view.buffer, view.byteOffset, 1)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** How many parties each generation needs. */
  get parties () { return Atomics.load(this[VIEW], PARTIES) }

  /** Parties waiting in the current generation now (a snapshot). */
  get waiting () { return lowOf(Atomics.load(this[BIG], WORD)) & ARRIVED_MASK }

  /** Whether the barrier is broken (until reset()). */
  get isBroken () { return (lowOf(Atomics.load(this[BIG], WORD)) & BROKEN) !== 0 }

  /**
   * Blocks until `parties` parties have arrived. Returns true for the last
   * one to arrive, false for the others. Throws LockTimeoutError (and breaks
   * the barrier) after `timeout` ms, BarrierBrokenError if it is or gets broken.
   */
  wait (timeout) {
    const t = timeoutOf('Barrier.wait', timeout)
    checkCanBlock('Barrier.wait')
    const big = this[BIG]
    const deadline = deadlineOf(t)
    const g = arrive(big, this.parties, 'Barrier.wait')
    if (g < 0) return true
    const r = runBlocking(big, sleep(big, g, deadline, NEVER_CANCELLED))
    if (r === COMPLETE) return false
    if (r === TIMED_OUT) throw new LockTimeoutError(`Barrier.wait: not every party arrived within ${t} ms (the barrier is now broken)`)
    throw brokenError('Barrier.wait')
  }

  /** Like wait, without blocking: resolves true / false; rejects as wait throws, or with AbortError. */
  waitAsync (options) {
    let opts, g
    const big = this[BIG]
    try {
      opts = asyncOptions('Barrier.waitAsync', options)
      if (opts.signal !== undefined && opts.signal.aborted) throw abortError(opts.signal)
      const t = opts.timeout
      opts = { timeout: t, signal: opts.signal, deadline: deadlineOf(t) }
      g = arrive(big, this.parties, 'Barrier.waitAsync')
    } catch (e) {
      return Promise.reject(e)
    }
    if (g < 0) return Promise.resolve(true)
    const signal = opts.signal
    const ctx = { cancelled: false }
    return runAsync(big, sleep(big, g, opts.deadline, ctx), ctx, signal).then((r) => {
      if (r === COMPLETE) return false
      if (r === TIMED_OUT) throw new LockTimeoutError(`Barrier.waitAsync: not every party arrived within ${opts.timeout} ms (the barrier is now broken)`)
      if (r === CANCELLED) throw abortError(signal)
      throw brokenError('Barrier.waitAsync')
    })
  }

  /**
   * Repairs a broken barrier, and breaks the generation in progress if any
   * party is waiting (they get BarrierBrokenError); then a new generation
   * starts with nobody arrived.
   */
  reset () {
    const big = this[BIG]
    for (;;) {
      const w = Atomics.load(big, WORD)
      const low = lowOf(w)
      const n = low & ARRIVED_MASK
      if (n === 0 && (low & BROKEN) === 0) return
      if (change(big, w, word(nextHigh(highOf(w), true), 0), n)) return
    }
  }
}

Barrier.BYTES = 16

module.exports = { Barrier }
