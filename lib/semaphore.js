'use strict'
// Semaphore: a counting semaphore in 8 bytes of a SharedArrayBuffer, whose
// acquisitions take n permits at once (a weighted semaphore).
//
// Two int32 cells:
//
//   WORD        meaning
//   n           n permits free, nobody queued
//   Q + n       n permits free, acquirers queued: release must call the addon
//
//   RESERVE     permits set aside for the oldest queued acquirer; read and
//               written by the addon only, under the lock of WORD's queue
//
// Q is the sign bit (WORD < 0), n at most 2^31 − 1. Q is set exactly when
// acquirers are queued on WORD (docs/lock.md).
//
// Uncontended, everything is pure JavaScript, for any number of permits k:
// acquire is one compareExchange (w → w − k when w holds k free permits, Q
// or not), release another (n → n + k). Everything else is decided by the
// addon under the lock of WORD's wait queue (crates/futex-core/src/semaphore.rs):
//
//   park      take the k permits if they are free, else set Q and queue
//             (blocking: in one native call; async: lib/acquire.js)
//   release   add the permits to those not held, then serve the oldest
//             acquirers in order while the permits cover their whole
//             request: one that has waited 1 ms is handed its permits
//             ('handoff': it holds them when it wakes), a younger one is
//             woken to compete ('ok'); the first one not covered stops the
//             look, and if it has waited 1 ms every free permit is reserved
//             for it (RESERVE), so nobody else takes them
//   leave     an acquirer that times out, is aborted or whose thread stops
//             clears Q if it was last (the reserve goes back to WORD), and
//             those behind it are looked at again; one handed permits it
//             will not use releases them again
//
// So newcomers and tryAcquire take permits past a queued acquirer for at
// most 1 ms of its wait (AsyncLock's rule, for AsyncLock's reason:
// docs/lock.md), and a large request is never passed by smaller ones queued
// behind it.
//
// Permits have no owner: a thread that dies holding some does not give them
// back (unlike AsyncLock, which recovers a dead owner's lock). Over a shared
// region's memory (every process of the machine) lib/region-semaphore.js
// keeps the count instead, and there the permits of a thread that ends or a
// process that dies are given back.
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const held = require('./held')
const acquiring = require('./acquire')
const { semaphoreAsync, inRegion } = require('./futex').internal
const regionSemaphore = require('./region-semaphore')
const { ACQUIRED, LockTimeoutError, DeadlockError } = require('./errors')
const { show, sharedView, timeoutOf, asyncOptions } = require('./options')

const WORD = 0
const MAX = 0x7fffffff // the permits of a word: w & MAX; Q: w < 0
const MAX_ACQUIRE = 0x3fffffff // the most permits one acquisition asks for
const REGION = Symbol('Semaphore over region memory')
const VIEW = Symbol('Semaphore view')

// Code of the addon's semaphoreWait (src/semaphore.rs).
const TIMED_OUT = 1
const DEADLOCK = 2

// Takes k free permits if the word has them.
function tryTake (ta, k) {
  for (;;) {
    const v = Atomics.load(ta, WORD)
    if ((v & MAX) < k) return false
    if (Atomics.compareExchange(ta, WORD, v, v - k) === v) return true
  }
}

// Before queueing, spin briefly while the permits are not free and nobody
// is queued, as AsyncLock does (holders often give permits back within a
// microsecond); acquirers queued end the spin: queue behind them.
function spinTake (ta, k) {
  for (let i = 0; i < 100; i++) {
    const v = Atomics.load(ta, WORD)
    if ((v & MAX) >= k) {
      if (Atomics.compareExchange(ta, WORD, v, v - k) === v) return true
    } else if (v < 0) {
      return false
    }
  }
  return false
}

// A count of permits to create or release: 0 to 2^31 − 1.
function permitsOf (what, n) {
  if (typeof n !== 'number') throw new TypeError(`${what}: permits must be a number, got ${show(n)}`)
  if (!Number.isInteger(n) || n < 0 || n > MAX) {
    throw new RangeError(`${what}: permits must be an integer from 0 to ${MAX}, got ${n}`)
  }
  return n
}

// The permits of one acquisition: 1 (the default) to 2^30 − 1.
function acquisitionOf (what, n) {
  if (n === undefined) return 1
  if (typeof n !== 'number') throw new TypeError(`${what}: permits must be a number, got ${show(n)}`)
  if (!Number.isInteger(n) || n < 1 || n > MAX_ACQUIRE) {
    throw new RangeError(`${what}: permits must be an integer from 1 to ${MAX_ACQUIRE}, got ${n}`)
  }
  return n
}

// acquire's options object { permits, timeout } (its other argument is a
// timeout in ms, as before weights).
function checkOptions (options) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Semaphore.acquire: expected a timeout in ms or options { permits, timeout }, got ${show(options)}`)
  }
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

// The protocol for lib/acquire.js, for acquisitions of n permits. A wake-up
// to compete that will not be used is passed on by asking the addon to look
// at the queue again (a release of 0 permits), which serves whoever the
// free permits cover.
function protocolOf (n) {
  return {
    index: WORD,
    now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && (tryTake(ta, n) || spinTake(ta, n)),
    park (ta, waited, remaining) {
      const q = semaphoreAsync(ta, WORD, n, waited, remaining)
      return q === 0 ? ACQUIRED : q
    },
    release: (ta) => give(ta, n),
    passOn (ta) { binding.semaphoreRelease(ta, WORD, 0) },
    info: () => undefined,
    ok: undefined,
    missing: n === 1 ? 'no permit' : `no ${n} permits`
  }
}

const ONE = protocolOf(1)
const protocol = (n) => n === 1 ? ONE : protocolOf(n)

// { permits, timeout, signal } of the async methods: the protocol and the options.
function asyncRequest (what, options, region) {
  const opts = asyncOptions(what, options)
  const n = options === undefined || options === null ? 1 : acquisitionOf(what, options.permits)
  return { p: region ? regionSemaphore.protocol(n) : protocol(n), opts }
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
    this[REGION] = inRegion(this[VIEW])
    if (n !== undefined) Atomics.store(this[VIEW], WORD, n)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Permits free now (a snapshot; permits reserved for a queued acquirer are not free). */
  get value () {
    return Atomics.load(this[VIEW], WORD) & MAX
  }

  /**
   * Blocks until the permits are taken: acquire(timeout?) takes one,
   * acquire({ permits, timeout }) takes `permits` at once. Throws
   * LockTimeoutError after `timeout` ms.
   */
  acquire (options) {
    let n = 1
    let timeout
    if (options === undefined || typeof options === 'number') {
      timeout = timeoutOf('Semaphore.acquire', options)
    } else {
      checkOptions(options)
      timeout = timeoutOf('Semaphore.acquire', options.timeout)
      n = acquisitionOf('Semaphore.acquire', options.permits)
    }
    checkCanBlock('Semaphore.acquire')
    const ta = this[VIEW]
    if (this[REGION]) return regionSemaphore.acquire(ta, n, timeout, 'Semaphore.acquire')
    if (tryTake(ta, n) || spinTake(ta, n)) return
    const r = timeout === 0 ? TIMED_OUT : binding.semaphoreWait(ta, WORD, n, timeout)
    if (r === TIMED_OUT) throw new LockTimeoutError(`Semaphore.acquire: ${protocol(n).missing} within ${timeout} ms`)
    if (r === DEADLOCK) {
      throw new DeadlockError('Semaphore.acquire: an async acquisition of this thread is queued ahead; blocking would never end')
    }
  }

  /** Takes `permits` (default 1) at once if they are free now. */
  tryAcquire (permits) {
    const n = acquisitionOf('Semaphore.tryAcquire', permits)
    return this[REGION] ? regionSemaphore.take(this[VIEW], n) : tryTake(this[VIEW], n)
  }

  /** Gives back `permits` (default 1): to the oldest acquirers queued first. */
  release (permits) {
    const n = permits === undefined ? 1 : permitsOf('Semaphore.release', permits)
    const ta = this[VIEW]
    if (ta === undefined) throw new TypeError('Semaphore.release: called on an object that is not a Semaphore')
    if (n > 0 && this[REGION]) regionSemaphore.give(ta, n, 'Semaphore.release')
    else if (n > 0) give(ta, n)
  }

  /**
   * acquireAsync({ permits, timeout, signal }): resolves with a function that
   * gives the permits back (idempotent, disposable).
   */
  acquireAsync (options) {
    let request
    try {
      request = asyncRequest('Semaphore.acquireAsync', options, this[REGION])
    } catch (e) {
      return Promise.reject(e)
    }
    const { p, opts } = request
    const ta = this[VIEW]
    if (p.now(ta, opts)) return Promise.resolve(held.releaser(p.release, ta))
    return acquiring.acquire(p, ta, opts, 'Semaphore.acquireAsync').then(() => held.releaser(p.release, ta))
  }

  /** Runs fn() holding `options.permits` (default 1); resolves with its result, always releasing. */
  runExclusive (fn, options) {
    const region = this[REGION]
    let p = region ? regionSemaphore.protocol(1) : ONE
    // The callback and the options' shape are checked by exclusive(), first.
    if (typeof fn === 'function' && options !== null && typeof options === 'object') {
      try {
        const n = acquisitionOf('Semaphore.runExclusive', options.permits)
        p = region ? regionSemaphore.protocol(n) : protocol(n)
      } catch (e) {
        return Promise.reject(e)
      }
    }
    return acquiring.exclusive(p, this[VIEW], fn, options, 'Semaphore.runExclusive', false)
  }
}

Semaphore.BYTES = 8

module.exports = { Semaphore }
