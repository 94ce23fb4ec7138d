'use strict'
// Argument checks shared by AsyncLock, Condition and Semaphore. Everything is
// validated before any shared memory is touched, so bad input never leaves a
// lock held or a waiter queued.
const { types } = require('util')
const { performance } = require('perf_hooks')
const { hasAtomics } = require('./host')
const { AtomicsUnavailableError } = require('./errors')
// Loaded when first needed (lib/futex.js loads the addon): a synchronous
// call's caller checks its options with this module before it starts the
// worker, and loads the rest while the worker starts.
let isRegion = null
const isRegionBuffer = (buffer) => {
  if (isRegion === null) isRegion = require('./futex').internal.isRegionBuffer
  return isRegion(buffer)
}

const now = () => performance.now()

function show (value) {
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'symbol' || typeof value === 'bigint') return `a ${typeof value}`
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value !== 'object' || value === null) return String(value)
  return Object.prototype.toString.call(value)
}

// An Int32Array of `bytes / 4` elements at `byteOffset` of `buffer`, or over
// a fresh SharedArrayBuffer when `buffer` is undefined. Every primitive is
// made here: in a runtime without Atomics (lib/host.js), none can be. A
// shared region's buffer (lib/region.js) is shared memory too: each
// primitive finds out from its view whether it is (futex.internal.inRegion).
function sharedView (what, buffer, byteOffset, bytes) {
  if (!hasAtomics) {
    throw new AtomicsUnavailableError(`${what}: this runtime has no Atomics (node --no-harmony-atomics?), which every primitive needs; wait, notify and waitAsync work without it`)
  }
  if (buffer === undefined) {
    if (byteOffset !== undefined && byteOffset !== 0) {
      throw new TypeError(`${what}: a byteOffset needs a buffer`)
    }
    return new Int32Array(new SharedArrayBuffer(bytes))
  }
  if (!types.isSharedArrayBuffer(buffer) && !isRegionBuffer(buffer)) {
    throw new TypeError(`${what}: the buffer must be a SharedArrayBuffer, got ${show(buffer)}`)
  }
  const offset = byteOffset === undefined ? 0 : byteOffset
  if (typeof offset !== 'number') {
    throw new TypeError(`${what}: byteOffset must be a number, got ${show(offset)}`)
  }
  if (!Number.isInteger(offset) || offset < 0) {
    throw new RangeError(`${what}: byteOffset must be a non-negative integer, got ${offset}`)
  }
  if (offset % 4 !== 0) {
    throw new RangeError(`${what}: byteOffset must be a multiple of 4, got ${offset}`)
  }
  if (offset + bytes > buffer.byteLength) {
    throw new RangeError(`${what}: ${bytes} bytes at byteOffset ${offset} do not fit in a buffer of ${buffer.byteLength} bytes`)
  }
  return new Int32Array(buffer, offset, bytes / 4)
}

// A timeout in ms: undefined is forever; otherwise a number ≥ 0 (Infinity allowed).
function timeoutOf (what, timeout) {
  if (timeout === undefined) return Infinity
  if (typeof timeout !== 'number') {
    throw new TypeError(`${what}: timeout must be a number of milliseconds, got ${show(timeout)}`)
  }
  if (!(timeout >= 0)) {
    throw new RangeError(`${what}: timeout must be ≥ 0 (or Infinity), got ${timeout}`)
  }
  return timeout
}

// When a wait of `timeout` ms that starts now ends (Infinity: never), and
// how much of it is left.
function deadlineOf (timeout) {
  return timeout === Infinity ? Infinity : now() + timeout
}
function timeLeft (deadline) {
  return deadline === Infinity ? Infinity : deadline - now()
}

const NO_OPTIONS = Object.freeze({ timeout: Infinity, signal: undefined })

// Whether `signal` has the shape of an AbortSignal: what the waits use of it.
function isSignalLike (signal) {
  return signal !== null && typeof signal === 'object' && typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function' && typeof signal.removeEventListener === 'function'
}

// The signal as the waits read it: the caller's object, whose getters and
// methods are read at every use (it may be any AbortSignal-like object), but
// whose throws cannot escape. A wait reads `aborted` inside promise callbacks
// and between native steps, where a throw would leave the promise pending and
// a lock or permit taken; here it counts as an abort instead, with the thrown
// value as its reason, so the wait rejects and gives back what it holds.
function guardSignal (signal) {
  let failed = false
  let failure
  const fail = (e) => {
    if (!failed) {
      failed = true
      failure = e
    }
  }
  return {
    get aborted () {
      if (failed) return true
      try {
        return signal.aborted === true
      } catch (e) {
        fail(e)
        return true
      }
    },
    get reason () {
      if (failed) return failure
      try {
        return signal.reason
      } catch (e) {
        fail(e)
        return e
      }
    },
    addEventListener (type, listener) {
      try {
        signal.addEventListener(type, listener)
      } catch (e) {
        fail(e)
      }
    },
    removeEventListener (type, listener) {
      try {
        signal.removeEventListener(type, listener)
      } catch {
        // Nothing to give back: the listener finds its wait already settled.
      }
    }
  }
}

// { timeout, signal } of the async methods.
function asyncOptions (what, options) {
  if (options === undefined || options === null) return NO_OPTIONS
  if (typeof options !== 'object') {
    throw new TypeError(`${what}: options must be an object, got ${show(options)}`)
  }
  const timeout = timeoutOf(what, options.timeout)
  const signal = options.signal
  if (signal === undefined) return { timeout, signal }
  if (!isSignalLike(signal)) {
    throw new TypeError(`${what}: signal must be an AbortSignal, got ${show(signal)}`)
  }
  return { timeout, signal: guardSignal(signal) }
}

function callbackOf (what, fn) {
  if (typeof fn !== 'function') {
    throw new TypeError(`${what}: the callback must be a function, got ${show(fn)}`)
  }
  return fn
}

// Symbol.dispose where the runtime has it (Node 18.18+/20.4+), else the
// registered symbol older polyfills use.
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')

module.exports = { now, deadlineOf, timeLeft, show, sharedView, timeoutOf, isSignalLike, asyncOptions, callbackOf, DISPOSE }
