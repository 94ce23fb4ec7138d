'use strict'
// The Web Locks API (W3C, https://w3c.github.io/web-locks/) over the
// process-wide lock manager of the addon (src/web_locks.rs): every thread
// and every copy of this file shares one set of queues and held locks.
// docs/web-locks.md has the design; this file does the WebIDL argument
// handling, the method steps, and what runs on the requesting thread (the
// callback, releasing when its promise settles, signal and steal).
const { threadId } = require('worker_threads')
const binding = require('./native')
const { webLockAsync, webLockCancel } = require('./futex').internal
const { DeadlockError } = require('./errors')
const { checkCanBlock } = require('./host')

// Answers of the addon's webLockRequest (0: queued) and its flags.
const GRANTED_NOW = 1
const NOT_AVAILABLE = 2
const DEADLOCK = 3
const SHARED = 1
const IF_AVAILABLE = 2
const STEAL = 4
const KEEP_ALIVE = 8

// --- DOMException ------------------------------------------------------------
// The global one (Node 17+); else Node's own, which a failed structured
// clone throws (Node 12–16); else a class with the same name, code and shape.
const CODES = { NotSupportedError: 9, InvalidStateError: 11, AbortError: 20 }

function findDOMException () {
  if (typeof globalThis.DOMException === 'function') return globalThis.DOMException
  try {
    const { port1, port2 } = new (require('worker_threads').MessageChannel)()
    try {
      port1.postMessage(() => {})
    } finally {
      port1.close()
      port2.close()
    }
  } catch (e) {
    if (e !== null && typeof e === 'object' && e.name === 'DataCloneError' && e.code === 25) return e.constructor
  }
  class DOMException extends Error {
    constructor (message = '', name = 'Error') {
      super(message)
      Object.defineProperty(this, 'name', { value: `${name}`, configurable: true, writable: true })
    }

    get code () { return CODES[this.name] || 0 }
  }
  return DOMException
}
const DOMExceptionClass = findDOMException()
const domError = (message, name) => new DOMExceptionClass(message, name)

// --- WebIDL conversions -----------------------------------------------------
const prefix = (what) => `Failed to execute '${what}' on 'LockManager': `

// DOMString: ToString, which throws a TypeError for a Symbol.
const toDOMString = (value) => `${value}`

const hasAbortSignal = typeof AbortSignal === 'function'

// An AbortSignal (of this realm, or one with its shape where the runtime
// has none, Node < 15).
function isAbortSignal (value) {
  if (value === null || typeof value !== 'object') return false
  if (hasAbortSignal && value instanceof AbortSignal) return true
  return typeof value.aborted === 'boolean' && typeof value.addEventListener === 'function' &&
    typeof value.removeEventListener === 'function'
}

// The LockOptions dictionary: undefined and null are the defaults; members
// are read once each, in lexicographic order, as WebIDL converts them.
function toLockOptions (options, what) {
  const PREFIX = prefix(what)
  const opts = { ifAvailable: false, mode: 'exclusive', signal: undefined, steal: false }
  if (options === undefined || options === null) return opts
  if (typeof options !== 'object' && typeof options !== 'function') {
    throw new TypeError(`${PREFIX}The provided value is not of type 'LockOptions'.`)
  }
  const ifAvailable = options.ifAvailable
  if (ifAvailable !== undefined) opts.ifAvailable = !!ifAvailable
  const mode = options.mode
  if (mode !== undefined) {
    const m = toDOMString(mode)
    if (m !== 'exclusive' && m !== 'shared') {
      throw new TypeError(`${PREFIX}Failed to read the 'mode' property from 'LockOptions': The provided value '${m}' is not a valid enum value of type LockMode.`)
    }
    opts.mode = m
  }
  const signal = options.signal
  if (signal !== undefined) {
    if (!isAbortSignal(signal)) {
      throw new TypeError(`${PREFIX}Failed to read the 'signal' property from 'LockOptions': Failed to convert value to 'AbortSignal'.`)
    }
    opts.signal = signal
  }
  const steal = options.steal
  if (steal !== undefined) opts.steal = !!steal
  return opts
}

// The signal's abort reason; an AbortError where the runtime keeps none.
function reasonOf (signal) {
  const reason = signal.reason
  return reason !== undefined ? reason : domError('The operation was aborted.', 'AbortError')
}

// --- Lock ---------------------------------------------------------------------
const INTERNAL = Symbol('internal')
const NAME = Symbol('name')
const MODE = Symbol('mode')

function checkLock (lock, what) {
  if (lock === null || typeof lock !== 'object' || !Object.prototype.hasOwnProperty.call(lock, NAME)) {
    throw new TypeError(`Illegal invocation: Lock.prototype.${what} called on an object that is not a Lock`)
  }
}

class Lock {
  constructor (key, name, mode) {
    if (key !== INTERNAL) throw new TypeError('Illegal constructor')
    this[NAME] = name
    this[MODE] = mode
  }

  get name () {
    checkLock(this, 'name')
    return this[NAME]
  }

  get mode () {
    checkLock(this, 'mode')
    return this[MODE]
  }
}
Object.defineProperty(Lock.prototype, Symbol.toStringTag, { value: 'Lock', configurable: true })

// --- requests -----------------------------------------------------------------
// Whether requests made from now on keep this thread alive while pending.
let keepAlive = true

/**
 * Not in the standard: sets whether pending requests made from now on by
 * this thread (through this copy of the package) keep its event loop alive.
 * Default true. Returns the previous setting.
 */
function setKeepAlive (enabled) {
  if (typeof enabled !== 'boolean') {
    throw new TypeError(`web-locks setKeepAlive: enabled must be a boolean, got ${typeof enabled === 'string' ? JSON.stringify(enabled) : typeof enabled}`)
  }
  const previous = keepAlive
  keepAlive = enabled
  return previous
}

// The clientId of this thread's locks and requests (see docs/web-locks.md).
const clientIdOf = (thread) => `thread-${thread}`

// Invokes the callback as WebIDL does: a throw becomes a rejected promise.
function invoke (callback, arg) {
  return new Promise((resolve) => resolve(Reflect.apply(callback, undefined, [arg])))
}

// Request a lock: the spec's steps from "request a lock" on, once the
// arguments are checked. `resolve` / `reject` settle the request's promise
// (the lock's released promise).
function requestLock (name, mode, ifAvailable, steal, signal, callback, resolve, reject) {
  const flags = (mode === 'shared' ? SHARED : 0) | (ifAvailable ? IF_AVAILABLE : 0) | (steal ? STEAL : 0) | (keepAlive ? KEEP_ALIVE : 0)
  const stolen = () => reject(domError("Lock broken by another request with the 'steal' option.", 'AbortError'))
  const r = webLockAsync(
    (grantSlot, stealSlot) => binding.webLockRequest(name, flags, threadId, grantSlot, stealSlot),
    (outcome) => { if (outcome !== 'cancelled') stolen() }
  )
  const id = r.id
  if (r.status === NOT_AVAILABLE) {
    // ifAvailable and not grantable: the callback gets null, on a later turn.
    Promise.resolve().then(() => resolve(invoke(callback, null)))
    return
  }
  let granted = false // the callback was invoked (the signal is ignored from then on)
  let onAbort
  if (signal !== undefined) {
    // Signal to abort the request: out of its queue if still there, and
    // the promise rejects with the reason. A grant already decided finds
    // the signal aborted and releases the lock without running the callback.
    onAbort = () => {
      if (granted) return
      signal.removeEventListener('abort', onAbort)
      if (binding.webLockAbort(name, id)) {
        webLockCancel(r.grantSlot)
        webLockCancel(r.stealSlot)
      }
      reject(reasonOf(signal))
    }
    signal.addEventListener('abort', onAbort)
  }
  // Releases the lock; false if it was not held any more: stolen, and the
  // steal waiter's news is on its way (or here already).
  const release = () => {
    if (!binding.webLockRelease(name, id)) return false
    webLockCancel(r.stealSlot)
    return true
  }
  const onGranted = () => {
    if (signal !== undefined) {
      if (signal.aborted) {
        release()
        return
      }
      signal.removeEventListener('abort', onAbort)
    }
    granted = true
    const waiting = invoke(callback, new Lock(INTERNAL, name, mode))
    // When the waiting promise settles: release the lock, then resolve the
    // released promise with the waiting one.
    // A lock stolen before it settled rejects, even if the news is still on its way.
    const settled = () => (release() ? resolve(waiting) : stolen())
    waiting.then(settled, settled)
  }
  if (r.status === GRANTED_NOW) {
    Promise.resolve().then(onGranted)
  } else {
    r.grant.then((outcome) => { if (outcome !== 'cancelled') onGranted() })
  }
}

// --- LockManager ----------------------------------------------------------------
const managers = new WeakSet()

class LockManager {
  constructor (key) {
    if (key !== INTERNAL) throw new TypeError('Illegal constructor')
    managers.add(this)
  }

  /**
   * request(name, callback) or request(name, options, callback): resolves
   * or rejects as the callback's result once the lock is released.
   */
  request (name, options, callback) {
    try {
      const { resource, opts, fn } = parse(this, arguments, 'request')
      if (opts.signal !== undefined && opts.signal.aborted) return Promise.reject(reasonOf(opts.signal))
      return new Promise((resolve, reject) => {
        requestLock(resource, opts.mode, opts.ifAvailable, opts.steal, opts.signal, fn, resolve, reject)
      })
    } catch (e) {
      return Promise.reject(e)
    }
  }

  /**
   * Not in the standard: requestSync(name, [options], fn) blocks this thread
   * until the lock is granted, runs fn(lock) (fn(null) when `ifAvailable`
   * found it unavailable), releases the lock when fn returns or throws, and
   * returns fn's result. Options as for request, without `signal`. Throws a
   * DeadlockError instead of blocking for ever when a lock or request of
   * this thread comes first for the name, and an AbortError DOMException
   * after fn if the lock was stolen meanwhile.
   */
  requestSync (name, options, callback) {
    const { resource, opts, fn } = parse(this, arguments, 'requestSync')
    if (opts.signal !== undefined) {
      throw domError("requestSync takes no 'signal': nothing can abort a blocked thread.", 'NotSupportedError')
    }
    // A thread that may not block (as Atomics.wait may not) may still ask
    // with ifAvailable or steal, which never wait.
    if (!opts.ifAvailable && !opts.steal) checkCanBlock('LockManager.requestSync')
    const flags = (opts.mode === 'shared' ? SHARED : 0) | (opts.ifAvailable ? IF_AVAILABLE : 0) | (opts.steal ? STEAL : 0)
    const n = binding.webLockRequestSync(resource, flags, threadId)
    const status = n % 4
    if (status === DEADLOCK) {
      throw new DeadlockError(`LockManager.requestSync: a lock or request of this thread comes first for ${JSON.stringify(resource)}; blocking would never end`)
    }
    if (status === NOT_AVAILABLE) return Reflect.apply(fn, undefined, [null])
    const id = (n - status) / 4
    let result
    try {
      result = Reflect.apply(fn, undefined, [new Lock(INTERNAL, resource, opts.mode)])
    } catch (e) {
      binding.webLockRelease(resource, id)
      throw e
    }
    if (!binding.webLockRelease(resource, id)) {
      throw domError("Lock broken by another request with the 'steal' option.", 'AbortError')
    }
    return result
  }

  /** A snapshot of the held locks and pending requests of every thread of the process. */
  query () {
    if (!managers.has(this)) {
      return Promise.reject(new TypeError("Illegal invocation: 'query' called on an object that is not a LockManager"))
    }
    const { held, pending } = binding.webLockQuery()
    return Promise.resolve({ held: held.map(infoOf), pending: pending.map(infoOf) })
  }
}
Object.defineProperty(LockManager.prototype.request, 'length', { value: 2 })
Object.defineProperty(LockManager.prototype.requestSync, 'length', { value: 2 })

// The arguments of request / requestSync, converted as WebIDL does for the
// overloads (name, callback) and (name, options, callback), then the method
// steps' checks. Throws the errors the spec gives.
function parse (self, args, what) {
  if (!managers.has(self)) throw new TypeError(`Illegal invocation: '${what}' called on an object that is not a LockManager`)
  const PREFIX = prefix(what)
  const n = args.length
  if (n < 2) throw new TypeError(`${PREFIX}2 arguments required, but only ${n} present.`)
  const resource = toDOMString(args[0])
  const opts = toLockOptions(n === 2 ? undefined : args[1], what)
  const fn = n === 2 ? args[1] : args[2]
  if (typeof fn !== 'function') {
    throw new TypeError(`${PREFIX}parameter ${n === 2 ? 2 : 3} is not of type 'LockGrantedCallback'.`)
  }
  if (resource.startsWith('-')) {
    throw domError("Names cannot start with '-'.", 'NotSupportedError')
  }
  if (opts.steal && opts.ifAvailable) {
    throw domError("The 'steal' and 'ifAvailable' options cannot be used together.", 'NotSupportedError')
  }
  if (opts.steal && opts.mode !== 'exclusive') {
    throw domError("The 'steal' option may only be used with 'exclusive' locks.", 'NotSupportedError')
  }
  if (opts.signal !== undefined && (opts.steal || opts.ifAvailable)) {
    throw domError("The 'signal' option cannot be used with the 'steal' or 'ifAvailable' options.", 'NotSupportedError')
  }
  return { resource, opts, fn }
}
Object.defineProperty(LockManager.prototype, Symbol.toStringTag, { value: 'LockManager', configurable: true })

function infoOf (entry) {
  return { name: entry.name, mode: entry.shared ? 'shared' : 'exclusive', clientId: clientIdOf(entry.threadId) }
}

const locks = new LockManager(INTERNAL)

module.exports = { locks, LockManager, Lock, setKeepAlive, DOMException: DOMExceptionClass }
