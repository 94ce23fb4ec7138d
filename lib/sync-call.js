'use strict'
// createSyncFn / serveSync: a synchronous call into a worker, over two
// Channels (docs/channel.md, "Synchronous calls").
//
//   requests  caller → worker: [id, args]
//   answers   worker → caller: [id, true, value] | [id, false, error record]
//             or, when the worker fails: [0, reason, error record]
//
// Ids grow with each call; the caller takes answers until it finds its own
// id and drops older ones (late answers of calls that timed out), so an
// answer can never be taken for another call's. While it waits, the caller
// looks every SLICE ms whether the worker's thread is still alive (the
// addon's registry of ended threads): a worker that is terminated, exits or
// crashes wakes the caller with a SyncWorkerError, and one that fails while
// loading the module, or throws outside a call, reports why first.
const path = require('path')
const v8 = require('v8')
const { Worker } = require('worker_threads')
const { fileURLToPath } = require('url')
const { Channel, internal: { adaptBlockingSpin } } = require('./channel')
const { checkCanBlock } = require('./host')
const { isThreadAlive } = require('./futex').internal
const { SyncCallTimeoutError, SyncWorkerError, ChannelTimeoutError } = require('./errors')
const { show, timeoutOf, deadlineOf, timeLeft } = require('./options')

const SERVE = Symbol.for('shared-futex.serveSync')
const BOOT = path.join(__dirname, 'sync-worker.js')
const PRELOAD = path.join(__dirname, 'sync-preload.js')
const SLICE = 100 // ms between looks at the worker's thread
const DEFAULT_BYTES = 1 << 20
const MAX_WORKERS = 64
const REASONS = {
  start: 'failed to start',
  uncaught: 'threw outside a call',
  exit: 'exited'
}

// --- errors across threads -----------------------------------------------------
// A thrown value as plain data v8.serialize accepts: for an Error its name,
// message, stack, cause (recursively) and own enumerable properties that
// serialize (`code`, `errno`, …); for anything else, the value itself (or
// its String() if it does not serialize).

const BUILTIN = {
  Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError
}
if (typeof AggregateError === 'function') BUILTIN.AggregateError = AggregateError // eslint-disable-line no-undef

function serializes (value) {
  try {
    v8.serialize(value)
    return true
  } catch {
    return false
  }
}

function toRecord (e, depth) {
  const d = depth || 0
  if (!(e instanceof Error) || d > 16) {
    return { error: false, value: serializes(e) ? e : String(e) }
  }
  const ctor = e.constructor
  const record = {
    error: true,
    className: typeof ctor === 'function' && typeof ctor.name === 'string' ? ctor.name : 'Error',
    name: String(e.name),
    message: String(e.message),
    stack: String(e.stack),
    props: {}
  }
  if (Object.prototype.hasOwnProperty.call(e, 'cause')) {
    record.hasCause = true
    record.cause = toRecord(e.cause, d + 1)
  }
  for (const key of Object.keys(e)) {
    if (key === 'cause' || key === 'name' || key === 'message' || key === 'stack') continue
    const value = e[key]
    if (serializes(value)) record.props[key] = value
  }
  return record
}

// A class of the given name, for an error whose class this thread does not
// have: a subclass of Error under the same name (one per name).
const standIns = new Map()
function standIn (name) {
  let C = standIns.get(name)
  if (C === undefined) {
    C = ({ [name]: class extends Error {} })[name]
    standIns.set(name, C)
  }
  return C
}

// The error again, in this thread: of the same built-in class where it was
// one, else of a stand-in subclass of Error with the original class's name.
function fromRecord (record) {
  if (!record.error) return record.value
  const builtin = Object.prototype.hasOwnProperty.call(BUILTIN, record.className)
  const Ctor = builtin ? BUILTIN[record.className] : standIn(record.className)
  const e = Ctor === BUILTIN.AggregateError ? new Ctor([], record.message) : new Ctor(record.message)
  if (e.name !== record.name) {
    Object.defineProperty(e, 'name', { value: record.name, writable: true, configurable: true })
  }
  Object.defineProperty(e, 'stack', { value: record.stack, writable: true, configurable: true })
  if (record.hasCause) {
    Object.defineProperty(e, 'cause', { value: fromRecord(record.cause), writable: true, configurable: true })
  }
  Object.assign(e, record.props)
  return e
}

// --- the caller ------------------------------------------------------------------

function pathOf (workerPath) {
  if (workerPath instanceof URL) return fileURLToPath(workerPath)
  if (typeof workerPath !== 'string') {
    throw new TypeError(`createSyncFn: workerPath must be a string or a file: URL, got ${show(workerPath)}`)
  }
  if (workerPath.startsWith('file:')) return fileURLToPath(workerPath)
  if (!path.isAbsolute(workerPath)) {
    throw new TypeError(`createSyncFn: workerPath must be absolute (use require.resolve or new URL(…, import.meta.url)), got ${JSON.stringify(workerPath)}`)
  }
  return workerPath
}

function syncOptions (options) {
  if (options === undefined || options === null) return { timeout: Infinity, bytes: DEFAULT_BYTES, workerOptions: {}, workers: 1 }
  if (typeof options !== 'object') throw new TypeError(`createSyncFn: options must be an object, got ${show(options)}`)
  const timeout = timeoutOf('createSyncFn', options.timeout)
  const workers = options.workers === undefined ? 1 : options.workers
  if (typeof workers !== 'number') throw new TypeError(`createSyncFn: workers must be a number, got ${show(workers)}`)
  if (!Number.isInteger(workers) || workers < 1 || workers > MAX_WORKERS) {
    throw new RangeError(`createSyncFn: workers must be an integer from 1 to ${MAX_WORKERS}, got ${workers}`)
  }
  const bytes = options.bytes === undefined ? DEFAULT_BYTES : options.bytes
  const workerOptions = options.workerOptions === undefined ? {} : options.workerOptions
  if (workerOptions === null || typeof workerOptions !== 'object') {
    throw new TypeError(`createSyncFn: workerOptions must be an object, got ${show(workerOptions)}`)
  }
  if ('workerData' in workerOptions || 'eval' in workerOptions) {
    throw new TypeError('createSyncFn: workerOptions may not set workerData or eval (the call uses them)')
  }
  return { timeout, bytes, workerOptions, workers }
}

/**
 * A function that calls `serveSync`'s handler in the worker at `workerPath`
 * and blocks until it answers; see index.d.ts.
 */
function createSyncFn (workerPath, options) {
  const file = pathOf(workerPath)
  const opts = syncOptions(options)
  const requests = new Channel({ bytes: opts.bytes, codec: 'v8' })
  const answers = new Channel({ bytes: opts.bytes, codec: 'v8' })
  // The caller spins for the answer only while that pays: a worker woken
  // on its doorbell often answers later than a spin lasts, and a fruitless
  // spin takes the CPU that worker needs.
  adaptBlockingSpin(answers)
  // The workers' doorbell where V8 has Atomics.waitAsync: [rung, asleep
  // (how many workers sleep on it)].
  const bell = typeof Atomics.waitAsync === 'function' ? new Int32Array(new SharedArrayBuffer(8)) : null
  let started = false
  const tids = [] // of the pool's workers
  let gone = null // { reason, cause } once a worker failed or ended
  let lastId = 0

  const fail = () => new SyncWorkerError(
    `createSyncFn(${file}): the worker ${REASONS[gone.reason]}${gone.cause instanceof Error ? `: ${gone.cause.message}` : ''}`,
    gone.cause === undefined ? undefined : { cause: gone.cause })

  function start () {
    started = true
    for (let k = 0; k < opts.workers; k++) startOne()
  }

  function startOne () {
    const options = Object.assign({}, opts.workerOptions, {
      workerData: { file, requests: requests.handle, answers: answers.handle, bell: bell === null ? undefined : bell.buffer }
    })
    let worker
    // lib/sync-preload.js before any other preload of the worker (those of
    // its execArgv: by default the parent's), so that a preload that throws
    // or exits is reported, and the thread is in the registry of ended
    // threads before anything of the caller's runs. Where Node refuses that
    // execArgv (a V8 flag inherited from the parent), without it: the
    // worker's own script loads the same module first.
    const execArgv = opts.workerOptions.execArgv === undefined ? process.execArgv : opts.workerOptions.execArgv
    try {
      worker = new Worker(BOOT, Object.assign({}, options, { execArgv: ['--require', PRELOAD].concat(execArgv) }))
    } catch (e) {
      if (e.code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw e
      worker = new Worker(BOOT, options)
    }
    tids.push(worker.threadId)
    worker.unref()
    // Between calls the event loop runs: note what happened to the worker.
    worker.on('error', (e) => { if (gone === null) gone = { reason: 'uncaught', cause: e } })
    worker.on('exit', (code) => {
      if (gone === null) gone = { reason: 'exit', cause: new Error(`the worker thread exited with code ${code}`) }
    })
  }

  // A failure report sent by the worker (id 0).
  function reported (msg) {
    if (gone === null) gone = { reason: msg[1], cause: fromRecord(msg[2]) }
    return fail()
  }

  // Whether a worker's thread ended; if so, takes the report it may have
  // left and sets `gone`.
  function ended () {
    if (tids.every(isThreadAlive)) return false
    for (;;) {
      const msg = answers.tryRecv()
      if (msg === Channel.EMPTY) break
      if (msg[0] === 0) {
        reported(msg)
        break
      }
    }
    if (gone === null) gone = { reason: 'exit', cause: new Error('the worker thread ended (terminated, or exited) during the call') }
    return true
  }

  function timedOut (id) {
    return new SyncCallTimeoutError(`createSyncFn(${file}): call ${id} did not return within ${opts.timeout} ms (its late answer will be dropped)`)
  }

  return function syncFn (...args) {
    checkCanBlock('createSyncFn')
    if (gone !== null) throw fail()
    if (!started) start()
    const id = ++lastId
    const deadline = deadlineOf(opts.timeout)
    const request = [id, args]
    for (;;) {
      try {
        requests.send(request, { timeout: Math.min(SLICE, Math.max(0, timeLeft(deadline))) })
        // An idle worker sleeps on its doorbell, not on the channel. (A
        // caller stopped before ringing leaves nobody waiting for the answer.)
        if (bell !== null && Atomics.load(bell, 1) !== 0) {
          Atomics.add(bell, 0, 1)
          Atomics.notify(bell, 0) // every idle worker: one takes the request
        }
        break
      } catch (e) {
        if (!(e instanceof ChannelTimeoutError)) throw e
        if (ended()) throw fail()
        if (timeLeft(deadline) <= 0) throw timedOut(id)
      }
    }
    for (;;) {
      let msg
      try {
        msg = answers.recv({ timeout: Math.min(SLICE, Math.max(0, timeLeft(deadline))) })
      } catch (e) {
        if (!(e instanceof ChannelTimeoutError)) throw e
        if (ended()) throw fail()
        if (timeLeft(deadline) <= 0) throw timedOut(id)
        continue
      }
      if (msg[0] === 0) throw reported(msg)
      if (msg[0] !== id) continue // the late answer of a call that timed out
      if (msg[1]) return msg[2]
      throw fromRecord(msg[2])
    }
  }
}

// --- the worker ------------------------------------------------------------------

/**
 * In a worker started by createSyncFn: answers its calls with `fn(...args)`
 * (which may return a promise), one call at a time.
 */
function serveSync (fn) {
  if (typeof fn !== 'function') throw new TypeError(`serveSync: expected a function, got ${show(fn)}`)
  const serve = globalThis[SERVE]
  if (typeof serve !== 'function') {
    throw new Error('serveSync: this thread is not a worker started by createSyncFn')
  }
  serve(fn)
}

module.exports = { createSyncFn, serveSync, internal: { toRecord, fromRecord, SERVE } }
