'use strict'
// Atomics.waitAsync for Node versions without it, on the module's wait queue.
//
// Implementation details
//
// V8 and the addon keep separate wait queues: a native Atomics.notify cannot
// wake the addon's waiters, and the addon's notify does not see V8's. So
// installing only `waitAsync` would split one address's waiters over two
// queues, and FIFO order and notify counts would be lost between a worker's
// Atomics.wait and the main thread's Atomics.waitAsync. Installation
// therefore replaces all three functions of this thread's `Atomics`:
//
//   Atomics.wait       the module's wait          (the module's queue)
//   Atomics.waitAsync  the module's waitAsync     (the module's queue)
//   Atomics.notify     the module's notify, then, for what is left of
//                      `count`, the native notify (V8's queue)
//
// The second step of notify wakes waiters of threads that did not install
// the polyfill (they wait in V8's queue). The module's waiters go first, then
// V8's; the count is honest: at most `count` are woken over both queues, and
// the result is their sum. The two steps are not one atomic operation: a
// waiter that joins V8's queue between them may be woken before an older one
// that joined the module's queue after the first step.
//
// Each thread has its own `Atomics`, so each thread installs for itself.
// While installed, `worker_threads.Worker` is replaced by a subclass that
// adds `--require <preload>` to the new worker's execArgv, so workers created
// afterwards install the polyfill (with the same `force`) before their own
// code runs, and so do their workers in turn.

const path = require('path')
const workerThreads = require('worker_threads')
const futex = require('./futex')
const { Atomics, hasAtomics } = require('./host')

const { lookup, toIndex, toCount, notifyConverted } = futex.internal

// The preload scripts a worker is started with: one per `force` setting.
const PRELOAD = path.join(__dirname, 'polyfill-preload.js')
const PRELOAD_FORCE = path.join(__dirname, 'polyfill-preload-force.js')

// The installed functions. Method syntax: like the built-ins they are not
// constructors, and their `name` and `length` are those of the built-ins.
const polyfilled = {
  wait (typedArray, index, value, timeout) {
    return futex.wait(typedArray, index, value, timeout)
  },

  notify (typedArray, index, count) {
    // The spec's order: array checks, ToIndex, count; then non-shared → 0.
    const info = lookup(typedArray)
    const i = toIndex(typedArray, index)
    const c = toCount(count)
    if (info === null || c === 0) return 0
    const woken = notifyConverted(typedArray, info, i, c)
    if (woken >= c || state === null) return woken
    // What is left of the count goes to threads that wait natively.
    return woken + state.nativeNotify.call(Atomics, typedArray, i, c - woken)
  },

  waitAsync (typedArray, index, value, timeout) {
    return futex.waitAsync(typedArray, index, value, timeout)
  }
}

const NAMES = ['wait', 'notify', 'waitAsync']

// null while not installed; otherwise what install() replaced:
//   descriptors  the original property descriptors of Atomics (undefined for
//                an absent waitAsync)
//   nativeNotify the original Atomics.notify
//   force        whether workers are to install with { force: true }
//   workers      whether worker_threads.Worker is wrapped
let state = null

function defineMethod (name, fn) {
  Object.defineProperty(Atomics, name, {
    value: fn,
    writable: true,
    enumerable: false,
    configurable: true
  })
}

// Installs the polyfill on this thread's Atomics when Atomics.waitAsync is
// missing, or always with { force: true }. Returns whether the module's
// functions are installed afterwards. Calling it again only widens the
// settings: { force: true } is passed on to workers created from then on.
function install (options) {
  const force = !!(options && options.force)
  const workers = !(options && options.workers === false)
  // No Atomics in this runtime (lib/host.js): nothing to install on.
  if (!hasAtomics) return false
  if (state !== null) {
    if (force) state.force = true
    if (workers && !state.workers) wrapWorker()
    return true
  }
  if (!force && typeof Atomics.waitAsync === 'function') return false
  const descriptors = {}
  for (const name of NAMES) descriptors[name] = Object.getOwnPropertyDescriptor(Atomics, name)
  state = { descriptors, nativeNotify: Atomics.notify, force, workers: false }
  for (const name of NAMES) defineMethod(name, polyfilled[name])
  if (workers) wrapWorker()
  return true
}

// Restores what install() replaced: Atomics' own properties (a property that
// something else has replaced since is left alone) and worker_threads.Worker.
// Waiters queued through the polyfill stay in the module's queue: only the
// module's notify (require('shared-futex').notify) can wake them afterwards.
// Returns whether the polyfill was installed.
function uninstall () {
  if (state === null) return false
  const previous = state
  state = null
  for (const name of NAMES) {
    if (Atomics[name] !== polyfilled[name]) continue
    const descriptor = previous.descriptors[name]
    if (descriptor === undefined) delete Atomics[name]
    else Object.defineProperty(Atomics, name, descriptor)
  }
  if (previous.workers) unwrapWorker()
  return true
}

function isInstalled () {
  return state !== null
}

// --- workers ---------------------------------------------------------------

// The Worker class found at the first wrap, and its subclass that replaced it.
let OriginalWorker = null
let WrappedWorker = null
let warned = false

function preloadOf (force) {
  return force ? PRELOAD_FORCE : PRELOAD
}

// The options with a `--require` of the preload added to the execArgv the
// worker would get: its own, or else this thread's (which it would inherit).
// Always an explicit execArgv: on Node 12 and 14 a nested worker that merely
// inherits a worker's `--require` does not run it.
function withPreload (options, force) {
  const preload = preloadOf(force)
  const opts = options === undefined || options === null ? {} : options
  if (typeof opts !== 'object') return options // let Worker report it
  let execArgv = opts.execArgv === undefined ? process.execArgv : opts.execArgv
  if (!Array.isArray(execArgv)) return options // let Worker report it
  if (execArgv.indexOf(preload) < 0) execArgv = execArgv.concat(['--require', preload])
  else if (opts.execArgv !== undefined) return options
  return Object.assign({}, opts, { execArgv: execArgv.slice() })
}

// Flags named by ERR_WORKER_INVALID_EXEC_ARGV ("...flags: --a, --b=1").
function rejectedFlags (error) {
  const colon = error.message.indexOf(': ')
  if (colon < 0) return []
  return error.message.slice(colon + 2).split(', ')
}

function warnOnce (error) {
  if (warned) return
  warned = true
  process.emitWarning(
    'a Worker was started without the Atomics.waitAsync polyfill, because its ' +
    `execArgv could not take the preload (${error.message}). Require ` +
    "'shared-futex/polyfill' at the top of the worker's script instead.",
    { code: 'SHARED_FUTEX_POLYFILL_WORKER', type: 'Warning' })
}

function wrapWorker () {
  if (OriginalWorker === null) {
    const Original = workerThreads.Worker
    OriginalWorker = Original
    // A subclass: `instanceof` the original still holds, and the statics are
    // inherited. The preload is only added while the polyfill is installed.
    WrappedWorker = class Worker extends Original {
      constructor (filename, options) {
        const patched = state === null ? options : withPreload(options, state.force)
        if (patched === options) {
          super(filename, options)
          return
        }
        let error
        try {
          super(filename, patched)
          return
        } catch (e) {
          error = e
        }
        // A worker's execArgv rejects per-process and V8 flags (they are
        // process-wide and apply to every thread anyway). Inherited flags the
        // worker rejects are left out; the user's own execArgv is kept as is.
        const own = options && options.execArgv !== undefined
        if (error.code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || own) throw error
        const rejected = rejectedFlags(error)
        const kept = patched.execArgv.filter((flag) => rejected.indexOf(flag) < 0)
        let retried = false
        if (kept.length < patched.execArgv.length) {
          try {
            super(filename, Object.assign({}, patched, { execArgv: kept }))
            retried = true
          } catch (e) {
            if (e.code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw e
          }
        }
        if (!retried) {
          warnOnce(error)
          super(filename, options)
        }
      }
    }
    workerThreads.Worker = WrappedWorker
  }
  if (state !== null) state.workers = true
  syncEsm()
}

// Puts the original Worker back, unless something replaced ours since.
function unwrapWorker () {
  if (OriginalWorker === null) return
  if (workerThreads.Worker === WrappedWorker) workerThreads.Worker = OriginalWorker
  OriginalWorker = null
  WrappedWorker = null
  syncEsm()
}

// ES module imports of 'worker_threads' see the CommonJS exports as they were
// at startup until told otherwise.
function syncEsm () {
  const Module = require('module')
  if (typeof Module.syncBuiltinESMExports === 'function') Module.syncBuiltinESMExports()
}

module.exports = {
  install,
  uninstall,
  isInstalled,
  // Internal: the preload script a worker needs, for tests and tools.
  internal: { preloadOf, polyfilled }
}
