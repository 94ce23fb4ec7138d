'use strict'
// Installs this package's Web Locks (lib/web-locks.js) where the running
// Node has none: `navigator.locks` (Node 24.5+ has its own), with a
// `navigator` object of its own where Node has none (before Node 21),
// `worker_threads.locks`, and the `LockManager` and `Lock` globals. Globals
// are per thread: each worker installs for itself. See docs/web-locks.md.
const workerThreads = require('worker_threads')
const { locks, LockManager, Lock } = require('./web-locks')
const { show } = require('./options')

function forceOf (options) {
  if (options === undefined || options === null) return false
  if (typeof options !== 'object') {
    throw new TypeError(`web-locks polyfill install: options must be an object, got ${show(options)}`)
  }
  const force = options.force
  if (force === undefined) return false
  if (typeof force !== 'boolean') {
    throw new TypeError(`web-locks polyfill install: force must be a boolean, got ${show(force)}`)
  }
  return force
}

const define = (target, key, value) =>
  Object.defineProperty(target, key, { value, writable: true, configurable: true, enumerable: false })

// Whether `target[key]` is missing; a getter that throws counts as missing.
function missing (target, key) {
  try {
    const value = target[key]
    return value === undefined || value === null
  } catch {
    return true
  }
}

/**
 * Installs where missing, or everywhere with `{ force: true }` (replacing
 * Node's own Web Locks in this thread). Returns whether `navigator.locks`
 * is this package's manager afterwards.
 */
function install (options) {
  const force = forceOf(options)
  if (missing(globalThis, 'navigator')) define(globalThis, 'navigator', {})
  const nav = globalThis.navigator
  if (force || missing(nav, 'locks')) {
    Object.defineProperty(nav, 'locks', { value: locks, writable: false, configurable: true, enumerable: true })
  }
  if (force || missing(workerThreads, 'locks')) define(workerThreads, 'locks', locks)
  if (force || missing(globalThis, 'LockManager')) define(globalThis, 'LockManager', LockManager)
  if (force || missing(globalThis, 'Lock')) define(globalThis, 'Lock', Lock)
  return isInstalled()
}

/** Whether `navigator.locks` is this package's manager in this thread. */
function isInstalled () {
  try {
    return globalThis.navigator !== undefined && globalThis.navigator !== null && globalThis.navigator.locks === locks
  } catch {
    return false
  }
}

module.exports = { install, isInstalled, locks }
