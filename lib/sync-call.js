'use strict'
// createSyncFn / serveSync: a synchronous call into a worker, over two
// Channels (docs/channel.md, "Synchronous calls").
//
//   requests  caller → worker: CALL id, the arguments
//   answers   worker → caller: RETURN id, the value | THROW id, an error
//             record (each with the worker's output of the call); or, when
//             the worker fails: REPORT (id 0), the reason and an error
//             record; or PULL id, a worker asking for a large CALL
// Each is one message of a 'bytes' channel, in the wire format below (a
// large one crosses the worker's MessagePort, and only a notice of it the
// channel).
//
// Ids grow with each call; the caller takes answers until it finds its own
// id and drops older ones (late answers of calls that timed out), so an
// answer can never be taken for another call's. While it waits, the caller
// looks every SLICE ms whether the worker's thread is still alive (the
// addon's registry of ended threads): a worker that is terminated, exits or
// crashes wakes the caller with a SyncWorkerError, and one that fails while
// loading the module, or throws outside a call, reports why first.
//
// What a caller needs before its worker starts is loaded with this module;
// the rest (the Channel, the addon, v8) when first needed: a function that
// starts its worker at once (shared-futex/synckit's) loads them while the
// worker thread boots, and hands the rings to it on its port (`handoff`).
const path = require('path')
const { Worker, isMainThread, MessageChannel, receiveMessageOnPort } = require('worker_threads')
const workerThreads = require('worker_threads')
const { fileURLToPath } = require('url')
const { checkCanBlock } = require('./host')
const { SyncCallTimeoutError, SyncWorkerError } = require('./errors')
const { show, timeoutOf, deadlineOf, timeLeft } = require('./options')
const { itemBytes, writeItem, readItem } = require('./wire')

let v8module = null
const v8 = () => v8module === null ? (v8module = require('v8')) : v8module
// lib/channel.js and lib/futex.js (with the addon), once; with the error
// classes the Channel throws and the addon's file, taken together from one
// module registry (a test runner may have made a fresh one since this
// module loaded: jest's resetModules).
let Channel = null
let adaptBlockingSpin = null
let isThreadAlive = null
let ChannelTimeoutError = null
let ChannelClosedError = null
let addon = null
function loadChannel () {
  if (Channel !== null) return
  const channel = require('./channel')
  isThreadAlive = require('./futex').internal.isThreadAlive
  const errors = require('./errors')
  ChannelTimeoutError = errors.ChannelTimeoutError
  ChannelClosedError = errors.ChannelClosedError
  addon = require('./addon-file')
  adaptBlockingSpin = channel.internal.adaptBlockingSpin
  Channel = channel.Channel
}

const SERVE = Symbol.for('shared-futex.serveSync')
// Set by lib/sync-worker.js as it starts loading the worker's module.
const MODULE_LOADING = Symbol.for('shared-futex.syncModuleLoading')
// In the workerData of each worker of createSyncFn's. (Another worker
// started from one inherits its execArgv, and so lib/sync-preload.js.)
const MARK = 'shared-futex.syncWorker'
const isOurs = (data) => data !== null && typeof data === 'object' && data[MARK] === 1
const NODE_12 = Number(process.versions.node.split('.')[0]) === 12
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

// A SyncWorkerError with its `reason`: a key of REASONS, 'closed' or
// 'preload'.
function workerError (reason, message, cause) {
  const e = new SyncWorkerError(message, cause === undefined ? undefined : { cause })
  e.reason = reason
  return e
}

// The workers of a function that was garbage-collected without close():
// terminated. The registry holds the pool (an array of Workers), never the
// function.
const freed = typeof FinalizationRegistry === 'function' // eslint-disable-line no-undef
  ? new FinalizationRegistry((pool) => { for (const w of pool) w.terminate().catch(() => {}) }) // eslint-disable-line no-undef
  : null

// --- the wire -------------------------------------------------------------------
// A message of the sync call, in one Buffer:
//
//   0   float64 id (0 in a REPORT)
//   8   uint8 kind: CALL, RETURN, THROW, REPORT
//   9   uint8 form: LIST or V8
//   10  uint8 REPORT's reason (an index into REASON_CODES)
//   11  uint8 flags: OUTPUT, LARGE
//   12  where OUTPUT is set (a RETURN, THROW or REPORT): the worker's output
//       of the call, uint32 bytes of what follows, then each write as uint8
//       fd (1 or 2), uint32 length, the bytes
//   …   the payload: a CALL's arguments (an array), a RETURN's value, a
//       THROW's or a REPORT's error record
//       V8    v8.serialize of the payload
//       LIST  a CALL's arguments or a RETURN's value when each is undefined,
//             null, a boolean, a number or a string: uint32 count, then
//             each as an item of lib/wire.js
//
// A LARGE message (more than largeBytes(): a quarter of the ring, at most
// 256 KiB) does not cross the ring: there only a notice goes, its header
// alone (LARGE set; byte 10 the index of the worker in the pool, for one
// of a worker), and the whole message crosses the MessagePort of that
// worker (one pair per worker, created with it). An answer's sender posts
// the message on its port and then sends the notice, so the caller, woken
// by the notice, finds the message there with receiveMessageOnPort. A
// CALL's receiver is not known when it is sent (any worker of the pool
// takes it): the worker that takes the notice asks for the message with a
// PULL (on the answer channel), and the caller, which waits for its answer
// anyway, posts it to that worker's port; a PULL for a call that is no
// longer waiting (it timed out) gets a `gone` instead, and the worker
// drops that call. So arguments and results of any size cross, and small
// ones keep the ring.
//
// v8.serialize and v8.deserialize cost microseconds each for the smallest
// value (a serializer object per call), several times a small call's whole
// round trip; LIST carries the usual small arguments without them. Both
// give the same values: a CALL's arguments are a fresh array (rest
// parameters: dense, no holes, no getters), and the primitives LIST takes
// clone as themselves (strings with every code unit, lone surrogates too).

const CALL = 1
const RETURN = 2
const THROW = 3
const REPORT = 4
const PULL = 5
const LIST = 1
const V8 = 2
const HEADER = 12
const REASON_CODES = ['start', 'uncaught', 'exit']
const LARGE = 2
const MAX_LARGE_BYTES = 256 * 1024

// Above how many bytes a message crosses the port, not `channel`'s ring.
const largeBytes = (channel) => Math.min(MAX_LARGE_BYTES, channel.capacity >> 2)

// The notice of a LARGE message, or a PULL: a header alone.
const notice = (id, kind, index) => {
  const buf = header(HEADER, id, kind, 0, index)
  if (kind !== PULL) buf[11] = LARGE
  return buf
}

// Posts `msg` (a Buffer) for message `id` on `port`, its memory moved
// rather than copied where it is a whole ArrayBuffer of its own.
function post (port, id, msg) {
  const whole = msg.byteOffset === 0 && msg.buffer.byteLength === msg.length
  port.postMessage({ id, msg }, whole ? [msg.buffer] : [])
}

// The message `id` from `port`, posted before its notice was sent;
// messages of older ids are dropped.
function takePosted (port, id) {
  for (;;) {
    const got = receiveMessageOnPort(port)
    if (got === undefined) throw new Error(`createSyncFn: message ${id} is missing from its port`)
    if (got.message.id === id) return got.message.msg
  }
}

function header (size, id, kind, form, reason) {
  const buf = Buffer.allocUnsafe(size)
  buf.writeDoubleLE(id, 0)
  buf[8] = kind
  buf[9] = form
  buf[10] = reason
  buf[11] = 0
  return buf
}

function encodeV8 (id, kind, payload, reason) {
  const body = v8().serialize(payload) // throws for what does not clone
  const buf = header(HEADER + body.length, id, kind, V8, reason)
  body.copy(buf, HEADER)
  return buf
}

// A CALL of `args` (a fresh array) or a RETURN of one value.
function encodeValues (id, kind, values) {
  let size = HEADER + 4
  const sizes = new Array(values.length)
  for (let k = 0; k < values.length; k++) {
    const n = itemBytes(values[k])
    if (n < 0) return encodeV8(id, kind, kind === CALL ? values : values[0], 0)
    sizes[k] = n
    size += n
  }
  const buf = header(size, id, kind, LIST, 0)
  buf.writeUInt32LE(values.length, HEADER)
  let at = HEADER + 4
  for (let k = 0; k < values.length; k++) at = writeItem(buf, at, values[k], sizes[k])
  return buf
}

const encodeCall = (id, args) => encodeValues(id, CALL, args)
const encodeReturn = (id, value) => encodeValues(id, RETURN, [value])
const encodeThrow = (id, record) => encodeV8(id, THROW, record, 0)
const encodeReport = (reason, record) => encodeV8(0, REPORT, record, REASON_CODES.indexOf(reason))

// `msg` (an encoded answer) with the worker's output of the call: `out`,
// a list of fd, Buffer, fd, Buffer, ….
const OUTPUT = 1
function withOutput (msg, out) {
  if (out === null || out.length === 0) return msg
  let size = 4
  for (let k = 1; k < out.length; k += 2) size += 5 + out[k].length
  const buf = Buffer.allocUnsafe(msg.length + size)
  msg.copy(buf, 0, 0, HEADER)
  buf[11] |= OUTPUT
  buf.writeUInt32LE(size - 4, HEADER)
  let at = HEADER + 4
  for (let k = 0; k < out.length; k += 2) {
    buf[at] = out[k]
    buf.writeUInt32LE(out[k + 1].length, at + 1)
    out[k + 1].copy(buf, at + 5)
    at += 5 + out[k + 1].length
  }
  msg.copy(buf, at, HEADER)
  return buf
}

// A message as { id, kind, payload, reason, output }: the payload of a CALL
// is its arguments, of a RETURN its value, of a THROW or REPORT the error
// record; output (null or fd, Buffer, …) what the worker wrote.
function decode (bytes) {
  // Copied into a Buffer (from Buffer's pool), not viewed: a message of up
  // to 64 bytes comes in an array kept in V8's heap, whose `.buffer` would
  // move it out (an allocation of its own, about a microsecond).
  let buf
  if (bytes.length > 4096) {
    buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)
  } else {
    buf = Buffer.allocUnsafe(bytes.length)
    buf.set(bytes)
  }
  const id = buf.readDoubleLE(0)
  const kind = buf[8]
  // A notice: the message is on the port of worker `index`.
  if ((buf[11] & LARGE) !== 0 || kind === PULL) return { id, kind, large: true, index: buf[10] }
  let body = HEADER
  let output = null
  if ((buf[11] & OUTPUT) !== 0) {
    const end = HEADER + 4 + buf.readUInt32LE(HEADER)
    output = []
    for (let at = HEADER + 4; at < end;) {
      const n = buf.readUInt32LE(at + 1)
      output.push(buf[at], buf.subarray(at + 5, at + 5 + n))
      at += 5 + n
    }
    body = end
  }
  let payload
  if (buf[9] === V8) {
    payload = v8().deserialize(buf.subarray(body))
  } else {
    const values = new Array(buf.readUInt32LE(body))
    let at = body + 4
    for (let k = 0; k < values.length; k++) at = readItem(buf, at, values, k)
    payload = kind === CALL ? values : values[0]
  }
  return { id, kind, payload, reason: REASON_CODES[buf[10]], output }
}

// The worker's output of a call, written here (before the call returns):
// through this thread's process.stdout / process.stderr, which in a main
// thread write to a file, pipe or terminal at once (POSIX), and in a
// worker that is itself serving a call are that worker's output of it.
function replay (output) {
  if (output === null) return
  for (let k = 0; k < output.length; k += 2) {
    (output[k] === 2 ? process.stderr : process.stdout).write(output[k + 1])
  }
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
    v8().serialize(value)
    return true
  } catch {
    return false
  }
}

const hasOwn = (o, key) => Object.prototype.hasOwnProperty.call(o, key)
const isDOMException = (e) => typeof DOMException === 'function' ? e instanceof DOMException : (e !== null && typeof e === 'object' && e.constructor !== undefined && e.constructor.name === 'DOMException') // eslint-disable-line no-undef

function toRecord (e, depth) {
  const d = depth || 0
  if (!(e instanceof Error || isDOMException(e)) || d > 16) {
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
  // A DOMException's code is its prototype's getter (from its name).
  if (isDOMException(e)) {
    record.className = 'DOMException'
    record.domCode = Number(e.code)
  }
  if (hasOwn(e, 'cause')) {
    record.hasCause = true
    record.cause = toRecord(e.cause, d + 1)
  }
  // An AggregateError's errors (an own, non-enumerable array), each rebuilt.
  if (hasOwn(e, 'errors') && Array.isArray(e.errors)) {
    record.errors = e.errors.map((x) => toRecord(x, d + 1))
  }
  for (const key of Object.keys(e)) {
    if (key === 'cause' || key === 'name' || key === 'message' || key === 'stack' || (key === 'errors' && record.errors !== undefined)) continue
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
// one (an AggregateError with its errors, a DOMException with its name and
// code, where this thread has the class), else of a stand-in subclass of
// Error with the original class's name.
function fromRecord (record) {
  if (!record.error) return record.value
  const errors = record.errors === undefined ? undefined : record.errors.map(fromRecord)
  let e
  if (record.className === 'DOMException' && typeof DOMException === 'function') { // eslint-disable-line no-undef
    e = new DOMException(record.message, record.name) // eslint-disable-line no-undef
  } else if (hasOwn(BUILTIN, record.className)) {
    const Ctor = BUILTIN[record.className]
    e = Ctor === BUILTIN.AggregateError ? new Ctor(errors || [], record.message) : new Ctor(record.message)
  } else {
    e = new (standIn(record.className))(record.message)
    if (record.domCode !== undefined) {
      Object.defineProperty(e, 'code', { value: record.domCode, writable: true, configurable: true, enumerable: true })
    }
  }
  if (errors !== undefined && !(BUILTIN.AggregateError !== undefined && e instanceof BUILTIN.AggregateError)) {
    Object.defineProperty(e, 'errors', { value: errors, writable: true, configurable: true })
  }
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

// The parent's execArgv without its preloads (--require / -r, --import,
// --loader / --experimental-loader, each with its value): the default
// execArgv of a worker. A preload that makes a synchronous call while it
// loads (a hook run with `node -r ./hook.js app.js`) would otherwise run
// again in the worker, start a worker of its own, and so on without end.
// (synckit passes an execArgv of its own, never the parent's.) A worker
// that needs a preload gets it through workerOptions.execArgv.
const PRELOAD_FLAGS = ['--require', '-r', '--import', '--loader', '--experimental-loader']
function inheritedExecArgv () {
  const out = []
  const argv = process.execArgv
  for (let k = 0; k < argv.length; k++) {
    const arg = argv[k]
    if (PRELOAD_FLAGS.includes(arg)) {
      k++ // and its value
      continue
    }
    if (PRELOAD_FLAGS.some((flag) => flag.startsWith('--') && arg.startsWith(`${flag}=`))) continue
    out.push(arg)
  }
  return out
}

// The flags Node named in an ERR_WORKER_INVALID_EXEC_ARGV.
function refusedFlags (e) {
  const at = String(e.message).indexOf(': ')
  return at < 0 ? [] : e.message.slice(at + 2).split(', ')
}

function newWorker (options, own) {
  const withPreload = (argv) => Object.assign({}, options, { execArgv: ['--require', PRELOAD].concat(argv) })
  // execArgv the caller gave: as given. Node refuses it with or without
  // the preload (or takes it).
  if (own !== undefined) return new Worker(BOOT, withPreload(own))
  // By default the parent's execArgv without its preloads. Node refuses
  // some flags in a worker's execArgv that it inherits without a word (V8's
  // --expose-gc, --max-old-space-size, …, which are the process's anyway):
  // without those.
  let argv = inheritedExecArgv()
  for (let tries = 0; ; tries++) {
    try {
      return new Worker(BOOT, withPreload(argv))
    } catch (e) {
      if (e.code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw e
      const refused = refusedFlags(e)
      const fewer = argv.filter((arg) => !refused.includes(arg))
      if (tries < 2 && fewer.length < argv.length) {
        argv = fewer
        continue
      }
      // Node names no flag of ours: the parent's execArgv, inherited as a
      // whole (its preloads too); the worker's script loads the preload
      // module first.
      return new Worker(BOOT, options)
    }
  }
}

// Whether this thread is a worker of createSyncFn's whose module has not
// started loading: a preload of it runs (one the caller gave in
// workerOptions.execArgv, or one of NODE_OPTIONS). Node 12 sets workerData
// (null until then) only after the preloads.
function inPreloadOfSyncWorker () {
  if (isMainThread || globalThis[MODULE_LOADING] === true || !process.execArgv.includes(PRELOAD)) return false
  const data = workerThreads.workerData
  return isOurs(data) || (NODE_12 && data === null)
}

/**
 * A function that calls `serveSync`'s handler in the worker at `workerPath`
 * and blocks until it answers; see index.d.ts.
 */
function createSyncFn (workerPath, options) {
  return create(workerPath, options, false)
}

// createSyncFn; `early`: the workers start now, not at the first call (as
// synckit's do), and the rings are made while they boot.
function create (workerPath, options, early) {
  const file = pathOf(workerPath)
  const opts = syncOptions(options)
  let requests = null
  let answers = null
  let large = Infinity
  // The rings: made here (a `bytes` the Channel refuses throws from
  // createSyncFn), or, `early`, once the workers are started.
  function rings () {
    loadChannel()
    requests = new Channel({ bytes: opts.bytes, codec: 'bytes' })
    answers = new Channel({ bytes: opts.bytes, codec: 'bytes' })
    // The caller spins for the answer only while that pays: a worker woken
    // on its doorbell often answers later than a spin lasts, and a fruitless
    // spin takes the CPU that worker needs.
    adaptBlockingSpin(answers)
    large = largeBytes(requests)
  }
  if (!early) rings()
  // The workers' doorbell where V8 has Atomics.waitAsync: [rung, asleep
  // (how many workers sleep on it)].
  const bell = typeof Atomics.waitAsync === 'function' ? new Int32Array(new SharedArrayBuffer(8)) : null
  // Workers started before the rings exist wait on this word (0) until the
  // caller has posted the rings' handles on their ports (1), or failed (2).
  const handoff = early ? new Int32Array(new SharedArrayBuffer(4)) : null
  let started = false
  const workers = [] // the pool
  const ports = [] // the caller's end of each worker's port
  let pending = null // { id, msg }: a LARGE CALL, until a worker pulls it
  const tids = [] // of the pool's workers
  let gone = null // { reason, cause } once a worker failed or ended
  let lastId = 0

  const fail = () => gone.reason === 'closed'
    ? workerError('closed', `createSyncFn(${file}): the function was closed (close()): it makes no more calls`)
    : workerError(gone.reason, `createSyncFn(${file}): the worker ${REASONS[gone.reason]}${gone.cause instanceof Error ? `: ${gone.cause.message}` : ''}`,
    gone.cause)

  // Ends the pool: later calls throw SyncWorkerError (reason 'closed');
  // resolves once every worker has exited. Idempotent.
  let closing = null
  function close () {
    if (closing === null) {
      gone = { reason: 'closed', cause: undefined }
      if (freed !== null) freed.unregister(unregisterToken)
      closing = Promise.all(workers.map((w) => w.terminate())).then(() => undefined)
    }
    return closing
  }
  const unregisterToken = {}

  // A Worker that cannot be constructed (execArgv or env that Node
  // refuses, resourceLimits out of range, …) fails the function for good:
  // this call and every later one throw, none waits for a worker that was
  // never started. Those of the pool already started are terminated.
  function start () {
    started = true
    try {
      for (let k = 0; k < opts.workers; k++) startOne()
      if (requests === null) {
        rings()
        const handles = { requests: requests.handle, answers: answers.handle, addon: addon.file }
        for (const port of ports) port.postMessage(handles)
        Atomics.store(handoff, 0, 1)
        Atomics.notify(handoff, 0)
      }
    } catch (e) {
      if (handoff !== null && Atomics.load(handoff, 0) === 0) {
        Atomics.store(handoff, 0, 2)
        Atomics.notify(handoff, 0)
      }
      gone = { reason: 'start', cause: e }
      for (const w of workers) w.terminate().catch(() => {})
      workers.length = 0
      throw fail()
    }
  }

  function startOne () {
    const { port1, port2 } = new MessageChannel()
    const options = Object.assign({}, opts.workerOptions, {
      workerData: requests !== null
        ? { [MARK]: 1, file, requests: requests.handle, answers: answers.handle, addon: addon.file, bell: bell === null ? undefined : bell.buffer, port: port2, index: workers.length }
        : { [MARK]: 1, file, handoff: handoff.buffer, bell: bell === null ? undefined : bell.buffer, port: port2, index: workers.length },
      transferList: (opts.workerOptions.transferList || []).concat([port2])
    })
    // lib/sync-preload.js before any other preload of the worker (those of
    // workerOptions.execArgv), so that a preload that throws or exits is
    // reported, and the thread is in the registry of ended threads before
    // anything of the caller's runs.
    const worker = newWorker(options, opts.workerOptions.execArgv)
    workers.push(worker)
    port1.unref() // never started: read with receiveMessageOnPort only
    ports.push(port1)
    tids.push(worker.threadId)
    worker.unref()
    // Between calls the event loop runs: note what happened to the worker.
    worker.on('error', (e) => { if (gone === null) gone = { reason: 'uncaught', cause: e } })
    worker.on('exit', (code) => {
      if (gone === null) gone = { reason: 'exit', cause: new Error(`the worker thread exited with code ${code}`) }
    })
  }

  // A failure report sent by the worker.
  function reported (msg) {
    if (gone === null) gone = { reason: msg.reason, cause: fromRecord(msg.payload) }
    return fail()
  }

  // Whether a worker's thread ended (or, `surely`, the channel closed
  // because every worker is gone); if so, takes the report it may have left
  // and sets `gone`.
  function ended (surely) {
    if (!surely && tids.every(isThreadAlive)) return false
    for (;;) {
      let bytes
      try {
        bytes = answers.tryRecv()
      } catch (e) {
        if (e instanceof ChannelClosedError) break
        throw e
      }
      if (bytes === Channel.EMPTY) break
      const msg = receive(bytes)
      if (msg.kind === PULL) continue
      replay(msg.output)
      if (msg.kind === REPORT) {
        reported(msg)
        break
      }
    }
    if (gone === null) gone = { reason: 'exit', cause: new Error('the worker thread ended (terminated, or exited) during the call') }
    return true
  }

  // An answer as decode() gives it; a notice's message taken from its port
  // (a PULL as it is).
  function receive (bytes) {
    const msg = decode(bytes)
    if (!msg.large || msg.kind === PULL) return msg
    return decode(takePosted(ports[msg.index], msg.id))
  }

  // A worker asks for the LARGE CALL `msg.id`.
  function pulled (msg) {
    const port = ports[msg.index]
    if (pending !== null && pending.id === msg.id) {
      post(port, msg.id, pending.msg)
      pending = null
    } else {
      port.postMessage({ id: msg.id, gone: true }) // that call timed out
    }
  }

  function timedOut (id) {
    return new SyncCallTimeoutError(`createSyncFn(${file}): call ${id} did not return within ${opts.timeout} ms (its late answer will be dropped)`)
  }

  // No closure here refers to `fn`: the workers' listeners (held as long
  // as a worker runs) must not keep it alive.
  const fn = function syncFn (...args) {
    checkCanBlock('createSyncFn')
    if (gone !== null) throw fail()
    // A preload that calls at load would run again in the worker this call
    // starts, which would start another, without end.
    if (!started && inPreloadOfSyncWorker()) {
      throw workerError('preload', `createSyncFn(${file}): refused in a preload of a createSyncFn worker (its module not loaded yet): the preload would run again in the worker this call starts, and so on without end`)
    }
    if (!started) start()
    const id = ++lastId
    const deadline = deadlineOf(opts.timeout)
    let request = encodeCall(id, args)
    pending = null
    if (request.length > large) {
      pending = { id, msg: request }
      request = notice(id, CALL, 0)
    }
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
        if (e instanceof ChannelClosedError && ended(true)) throw fail() // every worker is gone
        if (!(e instanceof ChannelTimeoutError)) throw e
        if (ended()) throw fail()
        if (timeLeft(deadline) <= 0) throw timedOut(id)
      }
    }
    for (;;) {
      let msg
      try {
        msg = receive(answers.recv({ timeout: Math.min(SLICE, Math.max(0, timeLeft(deadline))) }))
      } catch (e) {
        if (e instanceof ChannelClosedError && ended(true)) throw fail() // every worker is gone
        if (!(e instanceof ChannelTimeoutError)) throw e
        if (ended()) throw fail()
        if (timeLeft(deadline) <= 0) throw timedOut(id)
        continue
      }
      if (msg.kind === PULL) {
        pulled(msg)
        continue
      }
      replay(msg.output) // a late answer's too: it was written
      if (msg.kind === REPORT) throw reported(msg)
      if (msg.id !== id) continue // the late answer of a call that timed out
      if (msg.kind === RETURN) return msg.payload
      throw fromRecord(msg.payload)
    }
  }
  // Started now (a Worker that cannot be constructed throws here, as
  // synckit's createSyncFn does).
  if (early && !inPreloadOfSyncWorker()) start()
  fn.close = close
  if (typeof Symbol.asyncDispose === 'symbol') fn[Symbol.asyncDispose] = close
  if (typeof Symbol.dispose === 'symbol') fn[Symbol.dispose] = () => { close() }
  if (freed !== null) freed.register(fn, workers, unregisterToken)
  return fn
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

module.exports = {
  createSyncFn,
  serveSync,
  internal: { create, toRecord, fromRecord, SERVE, MODULE_LOADING, isOurs, decode, encodeReturn, encodeThrow, encodeReport, withOutput, largeBytes, notice, post, CALL, PULL }
}
