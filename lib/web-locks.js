'use strict'
// The Web Locks API (W3C, https://w3c.github.io/web-locks/) over the
// process-wide lock manager of the addon (src/web_locks.rs): every thread
// and every copy of this file shares one set of queues and held locks.
// docs/web-locks.md has the design; this file does the WebIDL argument
// handling, the method steps, and what runs on the requesting thread (the
// callback, releasing when its promise settles, signal and steal).
const { threadId } = require('worker_threads')
const { setImmediate } = require('timers') // Node's, whatever a test framework puts on the global
const binding = require('./native')
const { webLockSlots, webLockDrop, webLockCancel, webLockCopy, webLockGranted, webLockBase, webLockFast: fast } = require('./futex').internal
const { DeadlockError } = require('./errors')
const { checkCanBlock, canBlock, Atomics: atomics, hasAtomics } = require('./host')

// Answers of the addon's webLockRequest and its flags.
const QUEUED = 0
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

// --- diagnostics_channel -------------------------------------------------------
// The events Node's own navigator.locks publishes (Node 24.15+), on the same
// plain channels, with the same payloads (docs/web-locks.md, "Diagnostics
// events"). Where the runtime has no diagnostics_channel (Node 12 to 14.16),
// nothing is published.
const channels = (() => {
  let dc
  try {
    dc = require('diagnostics_channel')
  } catch {
    return null
  }
  if (dc === null || typeof dc !== 'object' || typeof dc.channel !== 'function') return null
  const start = dc.channel('locks.request.start')
  if (typeof start.hasSubscribers !== 'boolean' || typeof start.publish !== 'function') return null
  return {
    start,
    grant: dc.channel('locks.request.grant'),
    miss: dc.channel('locks.request.miss'),
    end: dc.channel('locks.request.end')
  }
})()

function publishStart (name, mode) {
  channels.start.publish({ name, mode })
}

// --- WebIDL conversions -----------------------------------------------------
const prefix = (what) => `Failed to execute '${what}' on 'LockManager': `

// DOMString: ToString, which throws a TypeError for a Symbol.
const toDOMString = (value) => `${value}`

// The runtime's AbortSignal `aborted` getter, which checks its receiver's
// brand (throws for anything but a real AbortSignal, whatever its prototype),
// as WebIDL's conversion to AbortSignal does.
const abortedGetter = (() => {
  if (typeof AbortSignal !== 'function') return undefined
  const d = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')
  return d !== undefined && typeof d.get === 'function' ? d.get : undefined
})()

// An AbortSignal: a real one where the runtime has AbortSignal (a look-alike,
// or an object made from its prototype, is not); where it has none (Node 12
// to 14 without --experimental-abortcontroller), one with its shape, as a
// polyfill makes.
function isAbortSignal (value) {
  if (value === null || typeof value !== 'object') return false
  if (abortedGetter !== undefined) {
    try {
      Reflect.apply(abortedGetter, value, [])
      return true
    } catch {
      return false
    }
  }
  return typeof value.aborted === 'boolean' && typeof value.addEventListener === 'function' &&
    typeof value.removeEventListener === 'function'
}

// The LockOptions dictionary: undefined and null are the defaults; members
// are read once each, in lexicographic order, as WebIDL converts them.
const DEFAULT_OPTIONS = Object.freeze({ ifAvailable: false, mode: 'exclusive', signal: undefined, steal: false })

function toLockOptions (options, what) {
  if (options === undefined || options === null) return DEFAULT_OPTIONS
  const PREFIX = prefix(what)
  const opts = { ifAvailable: false, mode: 'exclusive', signal: undefined, steal: false }
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

const RESOLVED = Promise.resolve()

// `new Promise(capture)` hands out its functions without a closure per call.
const captured = { resolve: null, reject: null }
function capture (resolve, reject) {
  captured.resolve = resolve
  captured.reject = reject
}
const stolenError = () => domError("Lock broken by another request with the 'steal' option.", 'AbortError')

// --- the fast path (docs/web-locks.md, "The fast path") ----------------------
// A name this copy uses gets a slot from the addon: one Int32 word of
// process-wide memory (every STRIDE-th of `words`), 0 while nothing is held
// or queued for the name anywhere. An exclusive request that finds it 0
// takes it with one compareExchange to this copy's client number `me`, and
// its release puts 0 back: no native call. Any other value sends the
// request to the addon, which claims the word first (a lock taken here
// becomes a held lock there, released with webLockFastRelease) and gives it
// back when the name is idle again.
// The state lives in `fast` (lib/futex.js): one per client, that is per
// copy of lib/futex.js. These are its fields once set up:
let words = null // the words
let me = 0 // the client number
let fastHolds = null // slot → the hold taken there (SYNC_HOLD: a requestSync's)
let stale = null // slot → steal news still on its way for holds that learnt of their steal first
const STRIDE = 16
const FROZEN = 0x40000000 // or-ed in while query() reads the words
const LEASES = 512 // names whose slot a client keeps at once
const SYNC_HOLD = {}

function setUpFast () {
  if (fast.state === 0) {
    fast.state = -1
    if (!hasAtomics) return
    const buffer = binding.webLockWords()
    if (buffer === null) return
    const view = new Int32Array(buffer)
    try {
      atomics.load(view, 0) // Atomics on memory that is not shared: V8 9+
    } catch {
      return
    }
    fast.me = binding.webLockClient(webLockCopy(), threadId)
    fast.words = view
    fast.holds = new Array(view.length / STRIDE).fill(undefined)
    fast.stale = new Int32Array(view.length / STRIDE)
    fast.onStolen = onStolen
    fast.state = 1
  }
  if (fast.state === 1) {
    words = fast.words
    me = fast.me
    fastHolds = fast.holds
    stale = fast.stale
  }
}

// The slot of `name` for this copy, or -1 (no fast path for it).
function slotOf (name) {
  if (words === null) {
    setUpFast()
    if (words === null) return -1
  }
  if (name === fast.lastName) return fast.lastSlot
  let s = fast.leases.get(name)
  if (s === undefined) {
    if (fast.leases.size >= LEASES) forgetIdle()
    s = binding.webLockLease(name, me)
    fast.leases.set(name, s)
  }
  fast.lastName = name
  fast.lastSlot = s
  return s
}

// Drops the names of the table that hold no lock taken on the fast path.
function forgetIdle () {
  const names = []
  for (const [name, s] of fast.leases) {
    if (s >= 0 && fastHolds[s] !== undefined) continue
    fast.leases.delete(name)
    if (s >= 0) names.push(name)
  }
  fast.lastName = null
  if (names.length > 0) binding.webLockForget(names, me)
}

// Steal news does not say which hold it is about, only the slot. Each steal
// of a lock this copy took on the fast path brings one piece, in no
// promised order; a hold that learns of its steal first (its release finds
// the lock gone, or a new hold of the slot finds it still registered: it
// can only have lost its word to a steal) counts its news as stale. So news
// that finds no stale count is about the hold registered now.
function onStolen (s) {
  if (stale[s] > 0) {
    stale[s]--
    return
  }
  const hold = fastHolds[s]
  if (hold === undefined || hold === SYNC_HOLD) return
  fastHolds[s] = undefined
  stolen(hold)
}

// Registers `hold` (or SYNC_HOLD), which took slot `s` on the fast path
// (registered and marked first, with no call in between: a request stopped
// after that is not registered twice, see `made`).
function takeFast (s, hold) {
  const previous = fastHolds[s]
  fastHolds[s] = hold
  if (hold !== SYNC_HOLD) hold.taken = true
  if (previous !== undefined) {
    // Its word was free again, so it was stolen; its news is on its way.
    stale[s]++
    if (previous !== SYNC_HOLD) stolen(previous)
  }
}

// Releases the lock `hold` took on the fast path at slot `s` for `name`:
// false if it was stolen; else true, or requests of this copy it granted
// (see handOver).
function releaseFast (name, s, hold) {
  if (fastHolds[s] !== hold) return false // stolen, and counted then
  fastHolds[s] = undefined
  return atomics.compareExchange(words, s * STRIDE, me, 0) === me || releaseClaimed(name, s)
}

// The word no longer says this client: claimed by the addon since.
function releaseClaimed (name, s) {
  const r = binding.webLockFastRelease(name, me, webLockBase())
  if (r === false) stale[s]++
  return r
}

// A release on this thread granted requests of this copy (the slots of
// their grant waiters, which the addon handed back instead of delivering
// them through the event loop): granted now, in grant order, each queuing
// the task of its callback.
function handOver (granted) {
  if (granted === true || granted === false) return
  for (let i = 0; i < granted.length; i++) webLockGranted(granted[i])
}

// --- the lock tasks of this thread -------------------------------------------
// The spec runs a granted request's callback (or an ifAvailable request's
// callback with null) in a task it queues on the requesting thread's event
// loop; here each is an immediate of Node's own setImmediate, so every
// microtask queued before it runs first, and the microtasks of one callback
// run before the next callback. `tasks` counts the ones queued and not yet
// run: a released request's promise is settled in a task queued after them
// while there are any (docs/web-locks.md, "When the callback runs, and when
// the promise settles").
let tasks = 0

function queueTask (step, hold) {
  tasks++
  setImmediate(runTask, step, hold)
}

function runTask (step, hold) {
  tasks--
  step(hold)
}

// --- requests -------------------------------------------------------------------
// A request of this copy, once granted or queued: what the callback, the
// release and the signal need.
class Hold {
  constructor (name, mode, ifAvailable, steal, slot, signal, callback, resolve, reject) {
    this.name = name
    this.mode = mode
    this.ifAvailable = ifAvailable
    this.steal = steal
    this.slot = slot // on the fast path; -1: through the addon
    this.word = undefined // what the fast path's compareExchange found there (0: taken)
    this.taken = false // registered as the fast path's hold of its slot (takeFast)
    this.answer = null // Float64Array: the addon's answer to the request (-1 until made)
    this.id = 0 // the addon's id of the request (slot -1)
    this.grantSlot = -1
    this.stealSlot = -1
    this.signal = signal
    this.listening = null // the signal's listener entry, while this request is in it
    this.callback = callback
    this.resolve = resolve // settle the request's promise (the lock's released promise)
    this.reject = reject
    this.granted = false // the callback was invoked (the signal is ignored from then on)
    this.stolen = false // the steal's news arrived (the promise is rejected)
    this.ended = false // the promise is settled (and the end event published)
    this.ok = true // how it settles once its lock is released, when that waits for a task
    this.value = undefined
  }
}

// Settles the request's promise, publishing the end event first (as Node
// does, right before its promise settles). Once per request.
function end (hold, ok, value) {
  if (hold.ended) return
  hold.ended = true
  if (channels !== null && channels.end.hasSubscribers) {
    channels.end.publish({ name: hold.name, mode: hold.mode, ifAvailable: hold.ifAvailable, steal: hold.steal, error: ok ? undefined : value })
  }
  if (ok) hold.resolve(value)
  else hold.reject(value)
}

const endLater = (hold) => end(hold, hold.ok, hold.value)

// Releases the lock: false if it was not held any more (stolen, and the
// news is on its way or here already); else true, or requests of this copy
// it granted (see handOver).
function release (hold) {
  if (hold.stolen) return false
  if (hold.slot >= 0) return releaseFast(hold.name, hold.slot, hold)
  const r = binding.webLockRelease(hold.name, hold.id, webLockBase())
  if (r !== false) webLockCancel(hold.stealSlot)
  return r
}

function stolen (hold) {
  hold.stolen = true
  end(hold, false, stolenError())
}

// The lock is granted: the spec's steps run in a task of this thread.
function granted (hold) {
  queueTask(runGranted, hold)
}

// The spec's steps for a granted lock, in their task: the signal, then the
// callback; the lock is released when its result settles, and the request's
// promise settles as that result (rejects if the lock was stolen meanwhile,
// even if the news is still on its way).
function runGranted (hold) {
  if (hold.signal !== undefined) {
    if (hold.signal.aborted) {
      // Aborted before this task: released, not run; the promise rejects
      // once the name is free (as `settle` orders it).
      settle(hold, false, reasonOf(hold.signal))
      return
    }
    unlisten(hold)
  }
  hold.granted = true
  if (channels !== null && channels.grant.hasSubscribers) channels.grant.publish({ name: hold.name, mode: hold.mode })
  let result
  try {
    result = Reflect.apply(hold.callback, undefined, [new Lock(INTERNAL, hold.name, hold.mode)])
  } catch (e) {
    RESOLVED.then(() => settle(hold, false, e))
    return
  }
  if ((typeof result === 'object' && result !== null) || typeof result === 'function') {
    // The waiting promise, resolved with the result (a thenable's `then` is read once, there).
    new Promise((resolve) => resolve(result)).then((v) => settle(hold, true, v), (e) => settle(hold, false, e))
  } else {
    RESOLVED.then(() => settle(hold, true, result))
  }
}

// The callback's result settled: the spec's "release the lock" (which
// grants the requests it can, queuing the tasks of their callbacks), then
// the request's promise settles as that result: at once, or, while tasks of
// this thread's lock callbacks or settlements are queued (those of the
// requests just granted among them), in a task queued after them.
function settle (hold, ok, value) {
  const r = release(hold)
  if (r === false) return stolen(hold)
  handOver(r)
  if (tasks === 0) return end(hold, ok, value)
  hold.ok = ok
  hold.value = value
  queueTask(endLater, hold)
}

// Signal to abort the request: out of its queue if still there, and the
// promise rejects with the reason. A grant already decided finds the signal
// aborted and releases the lock without running the callback.
// One listener per signal, however many requests wait on it: the entry of
// `listeners` lists them (in request order), and is removed with its listener
// once none is left.
const listeners = new WeakMap() // signal → { holds: Set, onAbort }

function listen (hold) {
  const signal = hold.signal
  let entry = listeners.get(signal)
  if (entry === undefined) {
    entry = { holds: new Set(), onAbort: null }
    const own = entry
    entry.onAbort = () => abortAll(signal, own)
    // Listening before the entry is on record: a thread stopped in between
    // (a vm timeout) leaves a listener with nothing to do, never a request
    // on record with no listener.
    signal.addEventListener('abort', entry.onAbort)
    listeners.set(signal, entry)
  }
  hold.listening = entry
  entry.holds.add(hold)
}

function unlisten (hold) {
  const entry = hold.listening
  if (entry === null) return
  hold.listening = null
  entry.holds.delete(hold)
  if (entry.holds.size === 0) forget(hold.signal, entry)
}

function forget (signal, entry) {
  signal.removeEventListener('abort', entry.onAbort)
  if (listeners.get(signal) === entry) listeners.delete(signal)
}

function abortAll (signal, entry) {
  forget(signal, entry)
  const holds = Array.from(entry.holds)
  entry.holds.clear()
  for (let i = 0; i < holds.length; i++) {
    holds[i].listening = null
    abort(holds[i], signal)
  }
}

function abort (hold, signal) {
  if (hold.granted) return
  if (hold.slot < 0 && binding.webLockAbort(hold.name, hold.id)) {
    webLockCancel(hold.grantSlot)
    webLockCancel(hold.stealSlot)
    // Both slots are free again (another request may take them before
    // `made` runs): nothing is left for `made` to read or drop.
    hold.answer = null
    hold.grantSlot = -1
    hold.stealSlot = -1
    end(hold, false, reasonOf(signal))
  }
  // Else the grant is decided (on the fast path, or by the addon) and its
  // task is queued or on its way: it finds the signal aborted, releases the
  // lock and then rejects, so that the name is free when the promise
  // settles (the spec's lock manager saw the abort before the request).
}

// ifAvailable and not grantable: the callback gets null, in a task.
function notAvailable (hold) {
  queueTask(runNotAvailable, hold)
}

function runNotAvailable (hold) {
  if (channels !== null && channels.miss.hasSubscribers) channels.miss.publish({ name: hold.name, mode: hold.mode })
  invoke(hold.callback, null).then((v) => end(hold, true, v), (e) => end(hold, false, e))
}

// Request a lock: the spec's steps from "request a lock" on, once the
// arguments are checked. `resolve` / `reject` settle the request's promise
// (the lock's released promise).
//
// A vm timeout can stop this thread's JavaScript at any function entry and
// let the thread live on (docs/web-locks.md, "Threads that end"). So the
// request's continuation (`made`, one microtask) is queued first, then its
// waiters and the signal's listener are set up, and the step that takes or
// asks for the lock comes last: the fast path's compareExchange, its result
// stored in the same statement, or the native request, which writes its
// answer where `made` reads it. Stopped before that step, the request was
// never made and `made` undoes the set-up (the promise never settles);
// stopped after it, `made` and the waiters finish the request.
function requestLock (name, mode, ifAvailable, steal, signal, callback, resolve, reject) {
  const hold = new Hold(name, mode, ifAvailable, steal, -1, signal, callback, resolve, reject)
  RESOLVED.then(() => made(hold))
  if (signal !== undefined) listen(hold)
  if (!steal && mode === 'exclusive') {
    const s = slotOf(name)
    if (s >= 0) {
      hold.slot = s
      hold.word = atomics.compareExchange(words, s * STRIDE, 0, me)
      // 0: nothing held or queued for the name anywhere: granted (`made`
      // runs the callback). A lock held on the fast path at the moment of
      // the load: an ifAvailable request is not grantable.
      if (hold.word === 0) {
        takeFast(s, hold)
        return
      }
      if (ifAvailable && hold.word > 0 && hold.word < FROZEN) return
      hold.slot = -1
    }
  }
  const flags = (mode === 'shared' ? SHARED : 0) | (ifAvailable ? IF_AVAILABLE : 0) | (steal ? STEAL : 0) | (keepAlive ? KEEP_ALIVE : 0)
  webLockSlots(hold,
    (outcome) => { if (outcome !== 'cancelled') granted(hold) },
    (outcome) => { if (outcome !== 'cancelled') stolen(hold) })
  const at = hold.grantSlot
  if (at >= answers.length) growAnswers(at)
  hold.answer = answers
  answers[at] = -1
  const base = webLockBase()
  const n = binding.webLockRequest(name, flags, threadId, base + at, base + hold.stealSlot, answers, at)
  // Known at once for an abort in this turn (`made` sets it too, from the answer).
  hold.id = (n - n % 4) / 4
}

// The addon's answers to this copy's requests, by grant slot: a slot is the
// request's until `made` has read it. Grown by replacing it (to the most
// requests pending at once: 8 bytes a slot); a request keeps the array it
// was answered in (hold.answer).
let answers = new Float64Array(64)
function growAnswers (at) {
  let length = answers.length
  while (length <= at) length *= 2
  answers = new Float64Array(length)
}

// The continuation of requestLock, in the microtask it queued first.
function made (hold) {
  if (hold.slot >= 0) {
    if (hold.word === 0) {
      if (!hold.taken) takeFast(hold.slot, hold) // stopped before it
      granted(hold)
    } else if (hold.word !== undefined) {
      unlisten(hold)
      notAvailable(hold)
    } else {
      unlisten(hold) // stopped before the compareExchange: never made
    }
    return
  }
  const n = hold.answer === null ? -1 : hold.answer[hold.grantSlot]
  if (n < 0) {
    // Never made: the native call threw (the request's promise rejected
    // with that), or the thread was stopped before it.
    if (hold.grantSlot >= 0) webLockDrop(hold.grantSlot)
    if (hold.stealSlot >= 0) webLockDrop(hold.stealSlot)
    unlisten(hold)
    return
  }
  const status = n % 4
  hold.id = (n - status) / 4
  if (status === QUEUED) return // the grant waiter runs `granted`
  webLockDrop(hold.grantSlot) // not counted by the addon
  if (status === GRANTED_NOW) {
    granted(hold)
    return
  }
  webLockDrop(hold.stealSlot) // NOT_AVAILABLE: neither
  unlisten(hold)
  notAvailable(hold)
}

// A requestSync granted on the fast path at slot `s`: runs fn, releases.
// Between fn's end and the release's compareExchange there is no function
// call, where a vm timeout could stop this thread and leave it the lock;
// and a release that grants requests of this copy lets the addon deliver
// them (no handing over in this frame: docs/web-locks.md, "Threads that end").
function runSyncFast (name, s, fn) {
  takeFast(s, SYNC_HOLD)
  let done = false
  let result
  try {
    result = fn(new Lock(INTERNAL, name, 'exclusive'))
    done = true
  } finally {
    let released = false
    if (fastHolds[s] === SYNC_HOLD) {
      fastHolds[s] = undefined
      released = atomics.compareExchange(words, s * STRIDE, me, 0) === me || releaseSyncClaimed(name, s)
    }
    if (done && !released) throw stolenError() // eslint-disable-line no-unsafe-finally
  }
  return result
}

// As releaseClaimed, for requestSync: grants to this copy are delivered by
// the addon.
function releaseSyncClaimed (name, s) {
  const r = binding.webLockFastRelease(name, me, -1)
  if (r === false) stale[s]++
  return r !== false
}

// --- requestSync stopped by a vm timeout ----------------------------------------
// A vm timeout stops this thread's JavaScript where it is and lets the thread
// live on, with no `finally` run: a requestSync stopped while it blocks (it
// returns with the lock), in its callback or before its release would keep
// the lock. So every requestSync counts itself in `syncFrames` while it runs,
// and the first of a turn arms `sweep`, an immediate of this thread's event
// loop. When an immediate runs, the thread's JavaScript stack is empty: no
// requestSync of the thread is running, so a count left above zero means
// that some were stopped, and any lock a requestSync of this thread still
// holds is one of theirs. The sweep releases those: the ones taken on the
// fast path (by this copy's client number) and those held in the addon.
// A stopped requestSync keeps its lock until its thread's loop turns (or the
// thread ends). An event loop run from inside a callback (deasync) would
// release a lock in use: not supported (docs/web-locks.md, "Threads that end").
let syncFrames = 0
let sweepArmed = false

// Marked armed once armed: a requestSync stopped in between leaves it to
// the next one to arm (two sweeps are no harm; none would be).
function armSweep () {
  const immediate = setImmediate(sweep)
  sweepArmed = true
  if (typeof immediate.unref === 'function') immediate.unref()
}

function sweep () {
  sweepArmed = false
  if (syncFrames === 0) return
  syncFrames = 0
  if (fastHolds !== null) {
    for (const [name, s] of fast.leases) {
      if (s >= 0) sweepSlot(name, s)
    }
  }
  binding.webLockSweepSync(threadId)
}

// The fast path's slot `s` of `name`, as a stopped requestSync may have left
// it: registered as its hold (runSyncFast's release), or taken and not yet
// registered, or unregistered and not yet released, either as the word or
// claimed by the addon since.
function sweepSlot (name, s) {
  const hold = fastHolds[s]
  if (hold === SYNC_HOLD) {
    fastHolds[s] = undefined
    if (atomics.compareExchange(words, s * STRIDE, me, 0) !== me) releaseSyncClaimed(name, s)
  } else if (hold === undefined) {
    // No request of this copy holds the name now (every `made` has run):
    // if its word or the addon says this client holds it, a stopped
    // requestSync does. (Not held by this client: fast_release does nothing.)
    const w = atomics.load(words, s * STRIDE)
    if (w === me && atomics.compareExchange(words, s * STRIDE, me, 0) === me) return
    if (w === me || w === -1 || w === (me | FROZEN)) binding.webLockFastRelease(name, me, -1)
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
    let started = null // the request's options once its start event is published
    try {
      if (arguments.length === 2 && isPlainCall(this, name, options)) {
        const promise = new Promise(capture)
        if (channels !== null && channels.start.hasSubscribers) {
          // Its subscribers may make requests: `captured` is read first.
          const { resolve, reject } = captured
          publishStart(name, 'exclusive')
          started = { resource: name, opts: DEFAULT_OPTIONS }
          requestLock(name, 'exclusive', false, false, undefined, options, resolve, reject)
          return promise
        }
        requestLock(name, 'exclusive', false, false, undefined, options, captured.resolve, captured.reject)
        return promise
      }
      const { resource, opts, fn } = parse(this, arguments, 'request')
      if (opts.signal !== undefined && opts.signal.aborted) return Promise.reject(reasonOf(opts.signal))
      const promise = new Promise(capture)
      const { resolve, reject } = captured
      if (channels !== null && channels.start.hasSubscribers) {
        publishStart(resource, opts.mode)
        started = { resource, opts }
      }
      requestLock(resource, opts.mode, opts.ifAvailable, opts.steal, opts.signal, fn, resolve, reject)
      return promise
    } catch (e) {
      // A request that could not be made after its start event: its end too, as Node does.
      if (started !== null && channels.end.hasSubscribers) {
        const { resource, opts } = started
        channels.end.publish({ name: resource, mode: opts.mode, ifAvailable: opts.ifAvailable, steal: opts.steal, error: e })
      }
      return Promise.reject(e)
    }
  }

  /**
   * Not in the standard: requestSync(name, [options], fn) blocks this thread
   * until the lock is granted, runs fn(lock) (fn(null) when `ifAvailable`
   * found it unavailable), releases the lock when fn returns or throws, and
   * returns fn's result. Options as for request, without `signal`. Throws a
   * DeadlockError instead of blocking for ever when a lock or request of
   * this thread comes first for the name, or when blocking would close a
   * cycle of threads blocked in requestSync (its `cycle` names them), and an
   * AbortError DOMException after fn if the lock was stolen meanwhile.
   */
  requestSync (name, options, callback) {
    // Counted while it runs, for the sweep (above); not uncounted if stopped.
    syncFrames++
    if (!sweepArmed) armSweep()
    try {
      // The usual call, requestSync(name, fn), with nothing to convert or
      // check: first the fast path, then as any other.
      if (arguments.length === 2 && isPlainCall(this, name, options) && canBlock) {
        const s = slotOf(name)
        if (s >= 0 && atomics.compareExchange(words, s * STRIDE, 0, me) === 0) return runSyncFast(name, s, options)
      }
      return requestSyncSlow(this, arguments)
    } finally {
      syncFrames--
    }
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

// requestSync past its fast path for the usual call.
function requestSyncSlow (self, args) {
  const { resource, opts, fn } = parse(self, args, 'requestSync')
  if (opts.signal !== undefined) {
    throw domError("requestSync takes no 'signal': nothing can abort a blocked thread.", 'NotSupportedError')
  }
  // A thread that may not block (as Atomics.wait may not) may still ask
  // with ifAvailable or steal, which never wait.
  if (!opts.ifAvailable && !opts.steal) checkCanBlock('LockManager.requestSync')
  if (!opts.steal && opts.mode === 'exclusive') {
    const s = slotOf(resource)
    if (s >= 0) {
      const w = atomics.compareExchange(words, s * STRIDE, 0, me)
      if (w === 0) return runSyncFast(resource, s, fn)
      if (opts.ifAvailable && w > 0 && w < FROZEN) return Reflect.apply(fn, undefined, [null])
    }
  }
  const flags = (opts.mode === 'shared' ? SHARED : 0) | (opts.ifAvailable ? IF_AVAILABLE : 0) | (opts.steal ? STEAL : 0)
  const n = binding.webLockRequestSync(resource, flags, threadId)
  const status = n % 4
  if (status === DEADLOCK) {
    if (n === DEADLOCK) throw cycleError(resource)
    throw new DeadlockError(`LockManager.requestSync: a lock or request of this thread comes first for ${JSON.stringify(resource)}; blocking would never end`)
  }
  if (status === NOT_AVAILABLE) return Reflect.apply(fn, undefined, [null])
  const id = (n - status) / 4
  // Released as runSyncFast does: no call between fn's end and the
  // release, whose grants to this copy the addon delivers.
  let done = false
  let result
  try {
    result = Reflect.apply(fn, undefined, [new Lock(INTERNAL, resource, opts.mode)])
    done = true
  } finally {
    if (binding.webLockRelease(resource, id, -1) === false && done) throw stolenError() // eslint-disable-line no-unsafe-finally
  }
  return result
}

// The DeadlockError of a requestSync that would have closed a cycle of
// threads blocked in requestSync, each waiting for the next: its `cycle`
// lists them ({ clientId, name }, this thread first).
function cycleError (resource) {
  return cycleDeadlock(resource, binding.webLockLastCycle().map(([thread, name]) => ({ clientId: clientIdOf(thread), name })))
}

// The same, for a cycle of { clientId, name }, as any manager finds it.
function cycleDeadlock (resource, cycle) {
  const steps = cycle.map((c, i) => `${i === 0 ? `this thread (${c.clientId}) would wait` : `${c.clientId} waits`} for ${JSON.stringify(c.name)} on ${i + 1 < cycle.length ? cycle[i + 1].clientId : 'this thread'}`)
  const e = new DeadlockError(`LockManager.requestSync: blocking for ${JSON.stringify(resource)} would close a cycle of threads blocked in requestSync: ${steps.join('; ')}`)
  e.cycle = cycle
  return e
}

// Whether request(name, callback) / requestSync(name, callback) on `self`
// needs nothing of parse(): the manager, a string name that is not
// reserved, a function.
function isPlainCall (self, name, callback) {
  return self === locks && typeof name === 'string' && typeof callback === 'function' && name.charCodeAt(0) !== 45
}

// The arguments of request / requestSync, converted as WebIDL does for the
// overloads (name, callback) and (name, options, callback), then the method
// steps' checks. Throws the errors the spec gives.
function parse (self, args, what) {
  if (!managers.has(self)) throw new TypeError(`Illegal invocation: '${what}' called on an object that is not a LockManager`)
  const n = args.length
  if (n < 2) throw new TypeError(`${prefix(what)}2 arguments required, but only ${n} present.`)
  const resource = toDOMString(args[0])
  const opts = toLockOptions(n === 2 ? undefined : args[1], what)
  const fn = n === 2 ? args[1] : args[2]
  if (typeof fn !== 'function') {
    throw new TypeError(`${prefix(what)}parameter ${n === 2 ? 2 : 3} is not of type 'LockGrantedCallback'.`)
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

module.exports = {
  locks,
  LockManager,
  Lock,
  setKeepAlive,
  DOMException: DOMExceptionClass,
  // For the Web Locks of a shared region (lib/region-locks.js): the same
  // argument handling, errors and Lock objects.
  internal: {
    cycleDeadlock,
    parse,
    reasonOf,
    domError,
    newLock: (name, mode) => new Lock(INTERNAL, name, mode),
    adopt: (manager) => managers.add(manager)
  }
}
