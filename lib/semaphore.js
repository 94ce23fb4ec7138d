'use strict'
// Semaphore: a counting semaphore in 8 bytes of a SharedArrayBuffer.
//
//   cell      meaning
//   COUNT     permits available (0 … 2^31 − 1)
//   WAITERS   acquirers asleep or about to sleep on COUNT: release skips the
//             native notify when it is 0
//
// acquire: take a permit with one compareExchange (COUNT − 1) if there is
// one; otherwise count ourselves in WAITERS and sleep while COUNT is still 0.
// release(n): add n (a compareExchange loop that refuses to overflow), then
// wake n sleepers if WAITERS says there are any. A sleeper counts itself
// before its sleep checks COUNT, and release adds before it reads WAITERS, so
// either release sees the sleeper or the sleeper sees the permit.
//
// Permits have no owner: a thread that dies holding one does not give it
// back (unlike AsyncLock, which recovers a dead owner's lock).
const futex = require('./futex')
const { runBlocking, runAsync } = require('./driver')
const { LockTimeoutError, abortError } = require('./errors')
const held = require('./held')
const { now, show, sharedView, timeoutOf, asyncOptions, callbackOf } = require('./options')

const { notify } = futex

const COUNT = 0
const WAITERS = 1
const MAX = 0x7fffffff
const VIEW = Symbol('Semaphore view')
const NEVER_CANCELLED = Object.freeze({ cancelled: false })

const ACQUIRED = 0
const TIMED_OUT = 1
const CANCELLED = 2

function tryTake (ta) {
  for (;;) {
    const v = Atomics.load(ta, COUNT)
    if (v <= 0) return false
    if (Atomics.compareExchange(ta, COUNT, v, v - 1) === v) return true
  }
}

// A wake-up taken by an acquirer that leaves without a permit goes to the
// next sleeper, if there is a permit for it.
function passOn (ta, woken) {
  if (woken && Atomics.load(ta, COUNT) > 0 && Atomics.load(ta, WAITERS) > 0) notify(ta, COUNT, 1)
}

function * take (ta, deadline, ctx) {
  let woken = false
  for (;;) {
    if (ctx.cancelled) {
      passOn(ta, woken)
      return CANCELLED
    }
    if (tryTake(ta)) return ACQUIRED
    let timeout = Infinity
    if (deadline !== Infinity) {
      timeout = deadline - now()
      if (timeout <= 0) {
        passOn(ta, woken)
        return TIMED_OUT
      }
    }
    Atomics.add(ta, WAITERS, 1)
    const r = yield { index: COUNT, value: 0, timeout }
    Atomics.sub(ta, WAITERS, 1)
    woken = r === 'ok'
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
    const v = Atomics.load(ta, COUNT)
    if (v > MAX - n) throw new RangeError(`Semaphore.release: ${v} + ${n} permits would exceed ${MAX}`)
    if (Atomics.compareExchange(ta, COUNT, v, v + n) === v) break
  }
  if (Atomics.load(ta, WAITERS) > 0) notify(ta, COUNT, n)
}

function acquireAsync (ta, opts, what) {
  const signal = opts.signal
  if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
  if (tryTake(ta)) return Promise.resolve()
  const timeout = opts.timeout
  const deadline = timeout === Infinity ? Infinity : now() + timeout
  const ctx = { cancelled: false }
  return runAsync(ta, take(ta, deadline, ctx), ctx, signal).then((r) => {
    if (r === TIMED_OUT) throw new LockTimeoutError(`${what}: no permit within ${timeout} ms`)
    if (r === CANCELLED) throw abortError(signal)
  })
}

const giveOne = (ta) => give(ta, 1)

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
      Atomics.store(this[VIEW], COUNT, n)
      return
    }
    if (buffer === undefined) throw new TypeError('Semaphore: expected a number of permits or a SharedArrayBuffer')
    const n = permits === undefined ? undefined : permitsOf('Semaphore', permits)
    this[VIEW] = sharedView('Semaphore', buffer, byteOffset, Semaphore.BYTES)
    if (n !== undefined) Atomics.store(this[VIEW], COUNT, n)
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Permits available now (a snapshot). */
  get value () { return Atomics.load(this[VIEW], COUNT) }

  /** Blocks until a permit is taken; throws LockTimeoutError after `timeout` ms. */
  acquire (timeout) {
    const t = timeoutOf('Semaphore.acquire', timeout)
    const ta = this[VIEW]
    if (tryTake(ta)) return
    const deadline = t === Infinity ? Infinity : now() + t
    if (runBlocking(ta, take(ta, deadline, NEVER_CANCELLED)) === TIMED_OUT) {
      throw new LockTimeoutError(`Semaphore.acquire: no permit within ${t} ms`)
    }
  }

  /** Takes a permit if one is available now. */
  tryAcquire () {
    return tryTake(this[VIEW])
  }

  /** Gives back `permits` (default 1) and wakes as many waiters. */
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
    return acquireAsync(ta, opts, 'Semaphore.acquireAsync').then(() => held.releaser(giveOne, ta))
  }

  /** Runs fn() holding a permit; resolves with its result, always releasing. */
  runExclusive (fn, options) {
    let opts
    try {
      callbackOf('Semaphore.runExclusive', fn)
      opts = asyncOptions('Semaphore.runExclusive', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const ta = this[VIEW]
    return acquireAsync(ta, opts, 'Semaphore.runExclusive').then(() => held.runHeld(fn, undefined, giveOne, ta))
  }
}

Semaphore.BYTES = 8

module.exports = { Semaphore }
