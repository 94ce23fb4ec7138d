'use strict'
// Semaphore: a counting semaphore in 8 bytes of a SharedArrayBuffer.
//
// One int32 cell, WORD (the second cell is reserved and stays 0):
//
//   WORD        meaning
//   n           n permits available, nobody queued
//   Q + n       n permits available, acquirers queued: release must call the addon
//
// Q is the sign bit (WORD < 0), n at most 2^31 − 1. Q is set exactly when
// acquirers are queued on WORD (docs/lock.md).
//
// Uncontended, everything is pure JavaScript: acquire is one
// compareExchange (w → w − 1 when w holds a permit, Q or not), release
// another (n → n + k). Everything else is decided by the addon under the
// lock of WORD's wait queue (crates/futex-core/src/semaphore.rs):
//
//   park      take a permit if there is one, else set Q and queue
//             (blocking: in one native call; async: lib/acquire.js)
//   release   per permit, wake the oldest acquirer queued; if it has waited
//             1 ms, hand it the permit ('handoff': it holds it when it
//             wakes), else add the permit to WORD and let it compete ('ok');
//             Q stays set iff more wait; the rest goes to WORD
//   leave     an acquirer that times out, is aborted or whose thread stops
//             clears Q if it was last; one handed a permit it will not use
//             releases it again
//
// So tryAcquire and newcomers take a permit past a queued acquirer for at
// most 1 ms (AsyncLock's rule, for AsyncLock's reason: docs/lock.md).
//
// Permits have no owner: a thread that dies holding one does not give it
// back (unlike AsyncLock, which recovers a dead owner's lock).
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const held = require('./held')
const acquiring = require('./acquire')
const { semaphoreAsync } = require('./futex').internal
const { ACQUIRED, LockTimeoutError } = require('./errors')
const { show, sharedView, timeoutOf, asyncOptions } = require('./options')

const WORD = 0
const MAX = 0x7fffffff // the permits of a word: w & MAX; Q: w < 0
const VIEW = Symbol('Semaphore view')

// Code of the addon's semaphoreWait (src/semaphore.rs).
const TIMED_OUT = 1

function tryTake (ta) {
  for (;;) {
    const v = Atomics.load(ta, WORD)
    if ((v & MAX) === 0) return false
    if (Atomics.compareExchange(ta, WORD, v, v - 1) === v) return true
  }
}

// Before queueing, spin briefly while no permit is free and nobody is
// queued, as AsyncLock does (holders often give a permit back within a
// microsecond); acquirers queued end the spin: queue behind them.
function spinTake (ta) {
  for (let i = 0; i < 100; i++) {
    const v = Atomics.load(ta, WORD)
    if ((v & MAX) !== 0) {
      if (Atomics.compareExchange(ta, WORD, v, v - 1) === v) return true
    } else if (v < 0) {
      return false
    }
  }
  return false
}

function permitsOf (what, n) {
  if (typeof n !== 'number') throw new TypeError(`${what}: permits must be a number, got ${show(n)}`)
  if (!Number.isInteger(n) || n < 0 || n > MAX) {
    throw new RangeError(`${what}: permits must be an integer from 0 to ${MAX}, got ${n}`)
  }
  return n
}

function give (ta, n) {
  for (;;) {
    const v = Atomics.load(ta, WORD)
    if (v < 0) {
      const refused = binding.semaphoreRelease(ta, WORD, n)
      if (refused === 0) return
      throw new RangeError(`Semaphore.release: ${refused} of ${n} permits would exceed ${MAX}`)
    }
    if (v > MAX - n) throw new RangeError(`Semaphore.release: ${v} + ${n} permits would exceed ${MAX}`)
    if (Atomics.compareExchange(ta, WORD, v, v + n) === v) return
  }
}

const giveOne = (ta) => give(ta, 1)

// The protocol for lib/acquire.js. A wake-up to compete that will not be
// used is passed on by taking the permit and releasing it, which wakes the
// next acquirer.
const PROTOCOL = {
  index: WORD,
  now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && (tryTake(ta) || spinTake(ta)),
  park (ta, waited, remaining) {
    const q = semaphoreAsync(ta, WORD, waited, remaining)
    return q === 0 ? ACQUIRED : q
  },
  release: giveOne,
  passOn (ta) { if (tryTake(ta)) give(ta, 1) },
  info: () => undefined,
  ok: undefined,
  missing: 'no permit'
}

class Semaphore {
  /**
   * new Semaphore(permits): in a fresh buffer.
   * new Semaphore(buffer, byteOffset?, permits?): at byteOffset of a
   * SharedArrayBuffer; `permits`, if given, initialises it (only the creator
   * should pass it: a copy rebuilt in a worker attaches to the same count).
   */
  constructor (buffer, byteOffset, permits) {
    if (typeof buffer === 'number') {
      const n = permitsOf('Semaphore', buffer)
      this[VIEW] = sharedView('Semaphore', undefined, byteOffset, Semaphore.BYTES) // a byteOffset needs a buffer
      Atomics.store(this[VIEW], WORD, n)
      return
    }
    if (buffer === undefined) throw new TypeError('Semaphore: expected a number of permits or a SharedArrayBuffer')
    const n = permits === undefined ? undefined : permitsOf('Semaphore', permits)
    this[VIEW] = sharedView('Semaphore', buffer, byteOffset, Semaphore.BYTES)
    if (n !== undefined) Atomics.store(this[VIEW], WORD, n)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Permits available now (a snapshot). */
  get value () {
    return Atomics.load(this[VIEW], WORD) & MAX
  }

  /** Blocks until a permit is taken; throws LockTimeoutError after `timeout` ms. */
  acquire (timeout) {
    const t = timeoutOf('Semaphore.acquire', timeout)
    checkCanBlock('Semaphore.acquire')
    const ta = this[VIEW]
    if (tryTake(ta) || spinTake(ta)) return
    if (t === 0 || binding.semaphoreWait(ta, WORD, t) === TIMED_OUT) {
      throw new LockTimeoutError(`Semaphore.acquire: no permit within ${t} ms`)
    }
  }

  /** Takes a permit if one is available now. */
  tryAcquire () {
    return tryTake(this[VIEW])
  }

  /** Gives back `permits` (default 1): to the oldest acquirers queued first. */
  release (permits) {
    const n = permits === undefined ? 1 : permitsOf('Semaphore.release', permits)
    const ta = this[VIEW]
    if (ta === undefined) throw new TypeError('Semaphore.release: called on an object that is not a Semaphore')
    if (n > 0) give(ta, n)
  }

  /** Resolves with a function that gives the permit back (idempotent, disposable). */
  acquireAsync (options) {
    let opts
    try {
      opts = asyncOptions('Semaphore.acquireAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const ta = this[VIEW]
    if (PROTOCOL.now(ta, opts)) return Promise.resolve(held.releaser(giveOne, ta))
    return acquiring.acquire(PROTOCOL, ta, opts, 'Semaphore.acquireAsync').then(() => held.releaser(giveOne, ta))
  }

  /** Runs fn() holding a permit; resolves with its result, always releasing. */
  runExclusive (fn, options) {
    return acquiring.exclusive(PROTOCOL, this[VIEW], fn, options, 'Semaphore.runExclusive', false)
  }
}

Semaphore.BYTES = 8

module.exports = { Semaphore }
