'use strict'
// Semaphore: a counting semaphore in 8 bytes of a SharedArrayBuffer.
//
// One int32 cell, WORD (the second cell is reserved and stays 0):
//
//   WORD      meaning
//   n ≥ 0     n permits available, nobody queued
//   -1        no permit available, acquirers queued: release calls the addon
//
// -1 (QUEUED) is set exactly when acquirers are queued on WORD (docs/lock.md).
//
// Uncontended, everything is pure JavaScript: acquire is one
// compareExchange (n → n − 1), release another (n → n + k). Everything else
// is decided by the addon under the lock of WORD's wait queue
// (crates/futex-core/src/semaphore.rs):
//
//   park      take a permit if there is one, else set QUEUED and queue
//             (blocking: in one native call; async: lib/acquire.js)
//   release   hand one permit to each of the oldest acquirers queued
//             ('handoff': they hold it when they wake), the rest to WORD;
//             QUEUED stays iff more wait
//   leave     an acquirer that times out, is aborted or whose thread stops
//             clears QUEUED if it was last; one handed a permit it will not
//             use releases it again
//
// Strictly first come, first served: while anyone is queued WORD holds no
// permit, so tryAcquire and newcomers cannot take one past a queued acquirer.
//
// Permits have no owner: a thread that dies holding one does not give it
// back (unlike AsyncLock, which recovers a dead owner's lock).
const binding = require('./native')
const held = require('./held')
const acquiring = require('./acquire')
const { semaphoreAsync } = require('./futex').internal
const { ACQUIRED, LockTimeoutError } = require('./errors')
const { show, sharedView, timeoutOf, asyncOptions } = require('./options')

const WORD = 0
const QUEUED = -1
const MAX = 0x7fffffff
const VIEW = Symbol('Semaphore view')

// Code of the addon's semaphoreWait (src/semaphore.rs).
const TIMED_OUT = 1

function tryTake (ta) {
  for (;;) {
    const v = Atomics.load(ta, WORD)
    if (v <= 0) return false
    if (Atomics.compareExchange(ta, WORD, v, v - 1) === v) return true
  }
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
    if (v === QUEUED) {
      const refused = binding.semaphoreRelease(ta, WORD, n)
      if (refused === 0) return
      throw new RangeError(`Semaphore.release: ${refused} of ${n} permits would exceed ${MAX}`)
    }
    if (v > MAX - n) throw new RangeError(`Semaphore.release: ${v} + ${n} permits would exceed ${MAX}`)
    if (Atomics.compareExchange(ta, WORD, v, v + n) === v) return
  }
}

const giveOne = (ta) => give(ta, 1)

// The protocol for lib/acquire.js. A permit is only ever handed over, so
// there is no wake-up to compete to pass on.
const PROTOCOL = {
  index: WORD,
  now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && tryTake(ta),
  park (ta, waited, remaining) {
    const q = semaphoreAsync(ta, WORD, remaining)
    return q === 0 ? ACQUIRED : q
  },
  release: giveOne,
  passOn () {},
  info: () => undefined,
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
      this[VIEW] = sharedView('Semaphore', undefined, undefined, Semaphore.BYTES)
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
    const v = Atomics.load(this[VIEW], WORD)
    return v === QUEUED ? 0 : v
  }

  /** Blocks until a permit is taken; throws LockTimeoutError after `timeout` ms. */
  acquire (timeout) {
    const t = timeoutOf('Semaphore.acquire', timeout)
    const ta = this[VIEW]
    if (tryTake(ta)) return
    if (t === 0 || binding.semaphoreWait(ta, WORD, t) === TIMED_OUT) {
      throw new LockTimeoutError(`Semaphore.acquire: no permit within ${t} ms`)
    }
  }

  /** Takes a permit if one is available now (never past a queued acquirer). */
  tryAcquire () {
    return tryTake(this[VIEW])
  }

  /** Gives back `permits` (default 1): to the oldest acquirers queued first. */
  release (permits) {
    const n = permits === undefined ? 1 : permitsOf('Semaphore.release', permits)
    if (n > 0) give(this[VIEW], n)
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
