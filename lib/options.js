'use strict'
// Argument checks shared by AsyncLock, Condition and Semaphore. Everything is
// validated before any shared memory is touched, so bad input never leaves a
// lock held or a waiter queued.
const { types } = require('util')
const { performance } = require('perf_hooks')

const now = () => performance.now()

function show (value) {
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'symbol' || typeof value === 'bigint') return `a ${typeof value}`
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value !== 'object' || value === null) return String(value)
  return Object.prototype.toString.call(value)
}

// An Int32Array of `bytes / 4` elements at `byteOffset` of `buffer`, or over
// a fresh SharedArrayBuffer when `buffer` is undefined.
function sharedView (what, buffer, byteOffset, bytes) {
  if (buffer === undefined) {
    if (byteOffset !== undefined && byteOffset !== 0) {
      throw new TypeError(`${what}: a byteOffset needs a buffer`)
    }
    return new Int32Array(new SharedArrayBuffer(bytes))
  }
  if (!types.isSharedArrayBuffer(buffer)) {
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

// { timeout, signal } of the async methods.
function asyncOptions (what, options) {
  if (options === undefined || options === null) return NO_OPTIONS
  if (typeof options !== 'object') {
    throw new TypeError(`${what}: options must be an object, got ${show(options)}`)
  }
  const timeout = timeoutOf(what, options.timeout)
  const signal = options.signal
  if (signal !== undefined && (signal === null || typeof signal !== 'object' ||
      typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function')) {
    throw new TypeError(`${what}: signal must be an AbortSignal, got ${show(signal)}`)
  }
  return { timeout, signal }
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

module.exports = { now, deadlineOf, timeLeft, show, sharedView, timeoutOf, asyncOptions, callbackOf, DISPOSE }
