'use strict'
// wait / notify / waitAsync with the argument handling of ECMAScript's
// Atomics.wait / Atomics.notify / Atomics.waitAsync (ES2024 DoWait and
// Atomics.notify), over the native wait table.
//
// Conversion order is the spec's: typed array kind and sharedness, then
// index (ToIndex), then value (ToInt32 / ToBigInt64), then timeout
// (ToNumber), then the comparison. Conversions run user code (valueOf), so
// they all happen here, before native code is entered.

const { types } = require('util')
const { threadId } = require('worker_threads')
const binding = require('./native')
const { Atomics, hasAtomics, canBlock, cannotBlock } = require('./host')
const { SharedRegionError } = require('./errors')

const TypedArrayPrototype = Object.getPrototypeOf(Int32Array.prototype)
const getter = (name) => Object.getOwnPropertyDescriptor(TypedArrayPrototype, name).get
// These work on typed arrays of any realm and never run user code.
const tagOf = getter(Symbol.toStringTag)
const bufferOf = getter('buffer')
const lengthOf = getter('length')

const detachedGetter = (Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'detached') || {}).get

// Whether a (non-shared) ArrayBuffer was detached. Node < 20 has no
// `detached` getter; constructing a view is the one check that tells a
// detached buffer from an empty one there.
function isDetached (buffer) {
  if (detachedGetter) return detachedGetter.call(buffer)
  try {
    new Uint8Array(buffer) // eslint-disable-line no-new
    return false
  } catch {
    return true
  }
}

const resizableGetter = (Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable') || {}).get
const keysOf = Object.getPrototypeOf(Int32Array.prototype).keys

// IsTypedArrayOutOfBounds for a view of a (non-shared, not detached)
// ArrayBuffer: only a resizable one can shrink under its views. Its length
// getter answers 0 then, as for an empty view; %TypedArray%.prototype.keys
// runs ValidateTypedArray, which throws for exactly this case (and runs no
// user code).
function isOutOfBounds (ta, buffer) {
  if (!resizableGetter || !resizableGetter.call(buffer)) return false
  try {
    keysOf.call(ta)
    return false
  } catch {
    return true
  }
}

const RESULTS = ['ok', 'not-equal', 'timed-out']
const MAX_SAFE = Number.MAX_SAFE_INTEGER

// The value named in an error message, found without running user code (as
// the built-ins do): no getter, no Proxy trap, no toString.
function describe (value) {
  if (typeof value === 'function') return 'function'
  if (typeof value === 'symbol') return 'Symbol()'
  if (typeof value !== 'object' || value === null) return String(value)
  if (types.isProxy(value)) return '[object Object]'
  if (types.isTypedArray(value)) return `[object ${tagOf.call(value)}]`
  if (Array.isArray(value)) return '[object Array]'
  return '[object Object]'
}

// What `validate` found: not on shared memory (falsy), or a shared
// Int32Array / BigInt64Array.
const NOT_SHARED = 0
const SHARED_I32 = 1
const SHARED_I64 = 2

// ValidateIntegerTypedArray(ta, waitable = true): throws a TypeError for other
// kinds and for detached or out-of-bounds arrays; otherwise returns one of
// the codes above.
function validate (ta) {
  const tag = tagOf.call(ta)
  if (tag !== 'Int32Array' && tag !== 'BigInt64Array') {
    throw new TypeError(`${describe(ta)} is not an int32 or BigInt64 typed array.`)
  }
  const buffer = bufferOf.call(ta)
  if (types.isSharedArrayBuffer(buffer) || isRegionBuffer(buffer)) return tag === 'Int32Array' ? SHARED_I32 : SHARED_I64
  if (isDetached(buffer)) throw new TypeError('Cannot perform Atomics operation on a detached ArrayBuffer')
  if (isOutOfBounds(ta, buffer)) throw new TypeError('Cannot perform Atomics operation on an out-of-bounds typed array')
  return NOT_SHARED
}

// ValidateAtomicAccess (ES2025): the array's length is read first, then
// ToIndex runs (user code: it may grow, shrink or detach the buffer), and
// the index is checked against the length read before.
function toIndex (ta, index) {
  const length = lengthOf.call(ta)
  let i
  if (typeof index === 'number' && index >= 0 && index <= MAX_SAFE) {
    i = Math.floor(index) // fast path: no user code can run
  } else if (index === undefined) {
    i = 0
  } else {
    const n = +index // ToNumber: TypeError for Symbol and BigInt
    i = n !== n ? 0 : Math.trunc(n)
    if (i < 0 || i > MAX_SAFE) throw new RangeError('Invalid atomic access index')
  }
  if (i >= length) throw new RangeError('Invalid atomic access index')
  return i
}

// ToInt32 (for Int32Array) or ToBigInt64 (for BigInt64Array).
function toValue (big, value) {
  // `BigInt.asIntN` applies ToBigInt (TypeError for numbers, undefined,
  // symbols; SyntaxError for bad strings), then wraps to 64 bits.
  if (big) return BigInt.asIntN(64, value)
  // `| 0` is ToNumeric + ToInt32: a BigInt or Symbol throws a TypeError.
  return value | 0
}

// ToNumber(timeout), with NaN and undefined meaning forever and negatives 0.
function toTimeout (timeout) {
  if (timeout === undefined) return Infinity
  const t = +timeout
  if (t !== t) return Infinity
  return t > 0 ? t : 0
}

// The count of Atomics.notify: undefined is all; else ToIntegerOrInfinity, at least 0.
function toCount (count) {
  if (count === undefined) return Infinity
  const c = +count
  if (c !== c || c <= 0) return 0
  return c === Infinity ? Infinity : Math.trunc(c)
}

// --- arrays on shared memory ----------------------------------------------
//
// A shared Int32Array or BigInt64Array stays one: its kind, its buffer and
// the address of its elements never change. So each one this thread has
// validated is remembered (weakly) with what the calls need of it:
//   big   whether its elements are 64-bit
//   base  the low 32 bits of the address of element 0
// A WeakMap lookup runs no user code (not even a Proxy's traps), and spares
// the checks of `validate` on every later call.
const known = new WeakMap()

// The buffers over shared regions' memory that are not SharedArrayBuffers
// (Node before 24.16 can make no other: lib/region.js): shared memory, for
// wait / notify / waitAsync, like a SharedArrayBuffer.
const regionBuffers = new WeakSet()

// Whether `buffer` is one of them: opened by this copy of the layer (in the
// set), or found by the addon to be over a region's bytes: a buffer opened
// by another copy in this thread (a hot reloader's new copy given the old
// one's buffer, another test file's registry under Jest).
function isRegionBuffer (buffer) {
  if (regionBuffers.has(buffer)) return true
  if (!types.isArrayBuffer(buffer) || buffer.byteLength < 4 || !binding.inRegion(new Int32Array(buffer, 0, 1))) return false
  regionBuffers.add(buffer)
  return true
}

// ValidateIntegerTypedArray for a shared array: its entry in `known`, or null
// for a valid array on non-shared memory (throws for anything else).
function lookup (ta) {
  let info = known.get(ta)
  if (info === undefined) {
    const kind = validate(ta)
    if (kind === NOT_SHARED) return null
    // `region`: its waiters live in a shared region's queues, which the
    // presence counts of this process's table know nothing of.
    info = { big: kind === SHARED_I64, base: binding.addressOf(ta), region: binding.inRegion(ta) }
    known.set(ta, info)
  }
  return info
}

// ValidateIntegerTypedArray plus the "must be shared" rule of wait/waitAsync.
function lookupShared (ta) {
  const info = lookup(ta)
  if (info === null) throw new TypeError(`${describe(ta)} is not a shared typed array.`)
  return info
}

// A Uint32Array over words of the addon's own memory (`buffer`), read in
// place with Atomics: null where the runtime allows no external buffers
// (`buffer` null), or no Atomics on memory that is not shared (V8 before 9,
// Node 14). The wait table's presence counts (see futex-core's table
// module) are such words.
function atomicsView (buffer) {
  if (buffer === null) return null
  const view = new Uint32Array(buffer)
  try {
    Atomics.load(view, 0)
    return view
  } catch {
    return null
  }
}
const presence = atomicsView(binding.presenceBuffer())
// Each count is alone on a 64-byte line: count i is presence[i * 16].
const PRESENCE_STRIDE = 16
const PRESENCE_SHIFT = presence === null ? 0 : 32 - Math.log2(presence.length / PRESENCE_STRIDE)
// A word of this thread's own, stored to as a full fence (see mayHaveWaiters).
const fence = presence === null ? null : new Int32Array(new SharedArrayBuffer(4))

// Whether element `i` of the array `info` describes may have waiters. False
// only if no address of its presence slot has a queue, and no waiter is
// checking its value: then nobody can be waiting for a value this thread
// changed before the call. The store below is the notifier's half of the
// protocol in the table's docs, `fence(SeqCst)`: a SeqCst store (x86 xchg,
// arm64 stlr, which no later ldar passes) orders every store of this thread
// before it ahead of the count's SeqCst load. V8 and JavaScriptCore perform
// Atomics on every buffer, shared or not, as SeqCst machine atomics.
function mayHaveWaiters (info, i) {
  if (presence === null) return true
  Atomics.store(fence, 0, 0)
  const low = (info.base + (info.big ? i * 8 : i * 4)) >>> 2
  return Atomics.load(presence, (Math.imul(low, 0x9E3779B1) >>> PRESENCE_SHIFT) * PRESENCE_STRIDE) !== 0
}

// --- async waiters of this copy --------------------------------------------

// A queued waiter of this copy has a slot here, named by its number, which
// the native table knows it by. The slot holds what the waiter needs exactly
// as long as it is pending, and nothing longer:
//   settlers[slot]  the function that settles its promise
//   arrays[slot]    its typed array: the SharedArrayBuffer, and so the queued
//                   address, cannot be collected and reused while it waits
// Both are dropped when the waiter settles (delivered, cancelled). When the
// thread ends, its heap goes with it: nothing native refers to either.
//
// A thread may evaluate this file more than once while the addon is loaded
// once (Jest's registry per test file, Vitest's VM contexts, hot reloaders):
// each copy has its own table, and its own index among the thread's copies
// (`initAsync`), which it puts above the slot numbers it hands the addon,
// so that its outcomes come back here and nowhere else (src/resolver.rs).
let settlers = []
const arrays = []
let freeSlots = []
let pendingCount = 0
let keepAliveDefault = false
// This copy's index · LOCAL_SLOTS, once initAsync gave it one.
let copyBase = -1
// Slots of one copy: the addon keeps the copy's index above 22 bits.
const LOCAL_SLOTS = 0x400000

// `new Promise(capture)` hands its resolve function out without a closure per call.
let captured
function capture (resolve) { captured = resolve }

// Empties a waiter's slot; returns the function that settles its promise.
function release (slot) {
  const resolve = settlers[slot]
  settlers[slot] = undefined
  arrays[slot] = undefined
  freeSlots.push(slot)
  if (typeof resolve !== 'function') {
    throw new Error(`shared-futex: an outcome for async waiter slot ${slot}, which has no waiter (a call stopped, by a vm timeout, before it registered one)`)
  }
  return resolve
}

function settle (slot, value) {
  pendingCount--
  release(slot)(value)
}

// Outcomes as the addon numbers them; 'handoff' and 'owner-died' only reach
// a lock's waiters (src/lock.rs): they hold the lock.
const OUTCOMES = ['ok', 'timed-out', 'handoff', 'owner-died']

// Entries with this bit are Web Locks events about a name slot, not a
// waiter's outcome (src/resolver.rs, Token::web_event): for lib/web-locks.js.
const WEB_EVENT = 0x80000000

// The state of lib/web-locks.js's fast path: one per copy of this file,
// whose resolver is the fast path's client, shared by every copy of
// web-locks.js that uses this copy (a reloader may evaluate that one again
// alone). lib/web-locks.js sets it up.
const webLockFast = {
  state: 0, // 0: not set up yet; 1: on; -1: off
  words: null, // the addon's words (Int32Array)
  me: 0, // this copy's client number
  leases: new Map(), // name → slot, or -1
  lastName: null, // the last name looked up, and its slot
  lastSlot: -1,
  holds: null, // slot → the hold taken on the fast path there
  stale: null, // slot → steal news still on its way
  onStolen: null // (slot) → called with each steal news
}
const webLockEvent = (s) => webLockFast.onStolen(s)

// Called natively on this thread with a batch of outcomes, each
// slot << 2 | outcome: a number for a batch of one, else a Uint32Array.
// (Each waiter has exactly one outcome, so each slot appears once.)
function deliver (list) {
  if (typeof list === 'number') {
    if (list >= WEB_EVENT) return webLockEvent((list - WEB_EVENT) >>> 2)
    pendingCount--
    release(list >>> 2)(OUTCOMES[list & 3])
    return
  }
  const n = list.length
  // One entry that fails (a settler that throws, or none where the
  // addon delivered: a request stopped by a vm timeout before it registered
  // it) must not cost the rest of the batch their outcomes: the first error
  // is thrown once every entry is delivered.
  let failure = null
  for (let k = 0; k < n; k++) {
    const entry = list[k]
    try {
      if (entry >= WEB_EVENT) {
        pendingCount++ // not a waiter: uncounted below
        webLockEvent((entry - WEB_EVENT) >>> 2)
      } else {
        release(entry >>> 2)(OUTCOMES[entry & 3])
      }
    } catch (e) {
      if (failure === null) failure = e
    }
  }
  pendingCount -= n
  if (pendingCount === 0 && settlers.length > 65536) {
    // Nothing pending: let go of the tables a burst of waiters grew.
    settlers = []
    arrays.length = 0
    freeSlots = []
  }
  if (failure !== null) throw failure
}

// The sequence number and slot of the most recent waiter queueAsync queued.
let lastSeq = 0
let lastSlot = 0

// Queues an async waiter whose arguments are already converted. Returns
// 'not-equal', or { token, promise } with a promise of 'ok' | 'timed-out'.
// With `keepAlive` the event loop stays alive until the promise settles.
function enqueueAsync (ta, index, value, timeout, keepAlive) {
  const promise = queue(ta, index, value, timeout, keepAlive)
  if (promise === null) return 'not-equal'
  return { token: [lastSeq, lastSlot], promise }
}

// Watching waits (src/raw.rs, `waitWatching`): a wait on ta[index] that is
// also woken by any thread's end, and does not sleep if a thread ended
// after threadEnds() returned `ends`. A caller reads threadEnds(), checks
// the threads it depends on (isThreadAlive), then waits with that count.
const endsView = atomicsView(binding.threadEndsBuffer())
const threadEnds = endsView === null ? binding.threadEnds : () => Atomics.load(endsView, 0)

// Blocking: 'ok' | 'not-equal' | 'timed-out' (ta, index, value and timeout
// already checked by the caller, as for a plain wait).
function waitWatching (ta, index, value, ends, timeout) {
  return RESULTS[binding.waitWatching(ta, index, value, ends, timeout)]
}

// Async: 'not-equal', or { token, promise } as enqueueAsync answers.
function enqueueWatchingAsync (ta, index, value, ends, timeout, keepAlive) {
  const slot = claimSlot()
  let seq
  try {
    seq = binding.waitWatchingAsync(ta, index, value, ends, timeout, keepAlive, copyBase + slot)
  } catch (e) {
    throw unclaim(slot, e)
  }
  const promise = register(ta, seq, slot)
  if (promise === null) return 'not-equal'
  return { token: [seq, slot], promise }
}

// The slot (within this copy) for the next waiter of this copy; the addon
// knows it as copyBase + slot.
function claimSlot () {
  if (copyBase < 0) copyBase = binding.initAsync(deliver) * LOCAL_SLOTS
  if (freeSlots.length > 0) return freeSlots.pop()
  if (settlers.length >= LOCAL_SLOTS) {
    throw new RangeError(`more than ${LOCAL_SLOTS} async waiters pending on this thread`)
  }
  return settlers.length
}

// A native call that was to queue a waiter in `slot` threw: nothing was
// queued, and the slot is free again.
function unclaim (slot, error) {
  if (slot < settlers.length) freeSlots.push(slot)
  return error
}

// After a native waitAsync answered `seq` for the waiter in `slot`: its
// promise, or null for 'not-equal' (seq 0; the slot is free again).
function register (ta, seq, slot) {
  if (seq === 0) {
    if (slot < settlers.length) freeSlots.push(slot)
    return null
  }
  // Its outcome is delivered on this thread, after this call: in time.
  const promise = new Promise(capture)
  settlers[slot] = captured
  arrays[slot] = ta
  pendingCount++
  return promise
}

function queue (ta, index, value, timeout, keepAlive) {
  const slot = claimSlot()
  let seq
  try {
    seq = binding.waitAsync(ta, index, value, timeout, keepAlive, copyBase + slot)
  } catch (e) {
    throw unclaim(slot, regionError(e))
  }
  const promise = register(ta, seq, slot)
  if (promise !== null) {
    lastSeq = seq
    lastSlot = slot
  }
  return promise
}

// One step of an async acquisition by a protocol of the addon (src/lock.rs,
// src/semaphore.rs, src/event.rs): `park(slot)` calls the addon with this thread's next
// slot and answers a sequence number, or 0 / -1 if the caller holds what it
// asked for now. Returns that number, or { token, promise } for the queued
// waiter, whose promise settles with 'handoff' or 'owner-died' (held now),
// 'ok' (look again) or 'timed-out'. Keeps the event loop alive while queued.
function parkAsync (ta, park) {
  const slot = claimSlot()
  let seq
  try {
    seq = park(copyBase + slot)
  } catch (e) {
    throw unclaim(slot, e)
  }
  if (seq <= 0) {
    register(ta, 0, slot)
    return seq
  }
  return { token: [seq, slot], promise: register(ta, seq, slot) }
}

// The lock word ta[index], by owner `me` that has waited `waited` ms: 0 if
// it took the lock now, -1 if it took it from a dead owner.
function lockAsync (ta, index, me, waited, timeout) {
  return parkAsync(ta, (slot) => binding.lockWaitAsync(ta, index, me, waited, timeout, slot))
}

// The lock word ta[index], by owner `me`, for a waiter that is only ever
// woken to compete, never handed the lock: 0 / -1 as lockAsync.
function lockCompeteAsync (ta, index, me, timeout) {
  return parkAsync(ta, (slot) => binding.lockCompeteAsync(ta, index, me, timeout, slot))
}

// `n` permits of the semaphore at ta[index], by a caller that has waited
// `waited` ms: 0 if it took them now.
function semaphoreAsync (ta, index, n, waited, timeout) {
  return parkAsync(ta, (slot) => binding.semaphoreWaitAsync(ta, index, n, waited, timeout, slot))
}

// The condition word ta[index], if it still holds the sequence `seen`: 0 if
// it moved on (nothing queued).
function conditionAsync (ta, index, seen, timeout) {
  return parkAsync(ta, (slot) => binding.conditionWaitAsync(ta, index, seen, timeout, slot))
}

// A condition waiter of this copy, woken on ta[index] by a notify, is done
// with the wake-up: relocked, or (passOn) giving it up to the next sleeper.
// Takes it off the record that its thread's teardown would pass on.
function conditionRelocked (ta, index, passOn) {
  return binding.conditionRelocked(ta, index, copyBase, passOn)
}

// The auto-reset event word ta[index]: 0 if it took the signal now.
function eventAsync (ta, index, timeout) {
  return parkAsync(ta, (slot) => binding.autoEventWaitAsync(ta, index, timeout, slot))
}

// One step of an async acquisition of a protocol with two queues (the
// reader-writer lock, src/rwlock.rs): `call(slot)` answers 0 or -1 (taken
// now), or seq · 2 + q for a waiter queued in `slot` on ta[index + q].
// Returns that 0 / -1, or { token, index: q, promise }.
function protocolAsync (ta, call) {
  const slot = claimSlot()
  let n
  try {
    n = call(copyBase + slot)
  } catch (e) {
    throw unclaim(slot, e)
  }
  if (n <= 0) {
    register(ta, 0, slot)
    return n
  }
  const seq = Math.floor(n / 2)
  return { token: [seq, slot], index: n % 2, promise: register(ta, seq, slot) }
}

// The two waiters of a Web Locks request (src/web_locks.rs), registered
// before the request is made, so that a thread stopped right after the
// native call (a vm timeout) leaves nothing its continuation cannot finish:
// `onGrant` is called with 'handoff' when the lock is granted (in the
// delivery; lib/web-locks.js then queues the callback's task), or
// 'cancelled'; `onSteal` with 'ok' if the lock is stolen while held, or
// 'cancelled'. Sets hold.grantSlot and hold.stealSlot, each as soon as it is
// claimed. The addon counts the waiters the request leaves pending; the
// continuation drops the others (webLockDrop). The slots the addon knows
// them by are webLockBase() + those.
function webLockSlots (hold, onGrant, onSteal) {
  const grantSlot = claimSlot()
  settlers[grantSlot] = onGrant
  pendingCount++
  hold.grantSlot = grantSlot
  let stealSlot
  try {
    stealSlot = claimSlot()
  } catch (e) {
    webLockDrop(grantSlot)
    hold.grantSlot = -1
    throw e
  }
  settlers[stealSlot] = onSteal
  pendingCount++
  hold.stealSlot = stealSlot
}

// Frees a Web Locks waiter that the addon never counted (its request was
// granted at once, found unavailable, or never made), without settling it.
function webLockDrop (slot) {
  pendingCount--
  release(slot)
}

// This copy's slot base for the addon (its resolver set up): for lib/web-locks.js.
function webLockCopy () {
  if (copyBase < 0) copyBase = binding.initAsync(deliver) * LOCAL_SLOTS
  return copyBase
}

// A Web Locks grant waiter of this copy that a release on this thread
// granted and handed back (the addon no longer counts it): 'handoff'.
function webLockGranted (slot) {
  settle(slot, 'handoff')
}

// Settles a Web Locks waiter of this copy that the addon no longer counts
// (its request was aborted, or its lock released): 'cancelled'.
function webLockCancel (slot) {
  settle(slot, 'cancelled')
}

// Takes a queued waiter back out (`token` as enqueueAsync returned it). True
// if it had not been woken or timed out yet: it consumed no wake-up, and its
// promise settles with 'cancelled'.
function cancelAsync (ta, index, token) {
  if (!binding.cancelAsync(ta, index, token[0])) return false
  settle(token[1], 'cancelled')
  return true
}

// --- the three operations --------------------------------------------------
//
// 'not-equal' in JS. Once every argument is converted (user code can run no
// more), a value that differs from ta[index] is answered here, without
// entering native code. This is one SeqCst load, as the spec's comparison
// inside the WaiterList's critical section is; a value that matches is
// compared again by the native layer under the queue's lock, which is the
// comparison that decides whether the caller sleeps. Both answers are ones
// the spec allows: the load is a point at which the value differed.

// Atomics.notify once its arguments are checked and converted: `info` is
// lookup(ta), `i` the index, `c` the count.
function notifyConverted (ta, info, i, c) {
  // Non-shared memory has no waiters (Node 16+ returns 0 here too).
  if (info === null || c === 0 || (!info.region && !mayHaveWaiters(info, i))) return 0
  return binding.notify(ta, i, c)
}

// Without Atomics (lib/host.js), the comparison that decides is the native
// one, except for waitAsync with a timeout of 0, which must answer without
// queueing: it reads the element with a plain load, which is what every
// access of a program without Atomics is.

// A wait on a shared region's memory, which can fail for want of a waiter
// record (ERR_REGION_FULL) or for a call region memory does not support.
function regionWait (ta, i, v, t) {
  try {
    return RESULTS[binding.wait(ta, i, v, t)]
  } catch (e) {
    throw regionError(e)
  }
}

// The addon's region failures ("ERR_REGION_…: message") as SharedRegionErrors.
function regionError (e) {
  const m = /^(ERR_REGION_[A-Z_]+): ([\s\S]*)$/.exec(e && e.message)
  return m === null ? e : new SharedRegionError(m[1], m[2])
}

// Method syntax: like the built-ins, these are not constructors.
const api = {
  wait (ta, index, value, timeout) {
    const info = lookupShared(ta)
    const i = toIndex(ta, index)
    const v = toValue(info.big, value)
    const t = toTimeout(timeout)
    // AgentCanSuspend(): after the conversions, before the comparison.
    if (!canBlock) throw cannotBlock('Atomics.wait')
    if (!hasAtomics) return RESULTS[binding.wait(ta, i, v, t)]
    // A value that differs needs no queue (see "'not-equal' in JS" above).
    if (Atomics.load(ta, i) !== v) return 'not-equal'
    if (t === 0) return 'timed-out'
    if (info.region) return regionWait(ta, i, v, t)
    return RESULTS[binding.wait(ta, i, v, t)]
  },

  notify (ta, index, count) {
    const info = lookup(ta)
    return notifyConverted(ta, info, toIndex(ta, index), toCount(count))
  },

  waitAsync (ta, index, value, timeout) {
    const info = lookupShared(ta)
    const i = toIndex(ta, index)
    const v = toValue(info.big, value)
    const t = toTimeout(timeout)
    if (hasAtomics ? Atomics.load(ta, i) !== v : t === 0 && ta[i] !== v) return { async: false, value: 'not-equal' }
    if (t === 0) return { async: false, value: 'timed-out' }
    const promise = queue(ta, i, v, t, keepAliveDefault)
    if (promise === null) return { async: false, value: 'not-equal' }
    return { async: true, value: promise }
  }
}

// Sets whether async waiters created from now on by this thread's
// `waitAsync` keep the event loop alive. Returns the previous setting.
function setKeepAlive (enabled) {
  if (typeof enabled !== 'boolean') {
    throw new TypeError(`setKeepAlive: enabled must be a boolean, got ${typeof enabled === 'string' ? JSON.stringify(enabled) : describe(enabled)}`)
  }
  const previous = keepAliveDefault
  keepAliveDefault = enabled
  return previous
}

binding.registerThread(threadId)

module.exports = {
  wait: api.wait,
  notify: api.notify,
  waitAsync: api.waitAsync,
  setKeepAlive,
  // Internal: for the lock and polyfill modules.
  internal: {
    lookup, // null: not on shared memory
    notifyConverted,
    toIndex,
    toCount,
    enqueueAsync,
    threadEnds,
    waitWatching,
    enqueueWatchingAsync,
    lockAsync,
    lockCompeteAsync,
    semaphoreAsync,
    conditionAsync,
    conditionRelocked,
    eventAsync,
    protocolAsync,
    cancelAsync,
    webLockSlots,
    webLockDrop,
    webLockCancel,
    webLockCopy,
    webLockGranted,
    webLockBase: () => copyBase, // -1: no waiter of this copy yet
    webLockFast,
    isThreadAlive: binding.isThreadAlive,
    regionBuffers,
    isRegionBuffer,
    regionError,
    // Whether `ta` (a valid integer typed array) is over a shared region's memory.
    inRegion: (ta) => {
      const info = lookup(ta)
      return info !== null && info.region
    },
    queueLength: binding.queueLength,
    // The count of ends (threads and processes gone) the region of `ta`'s
    // memory has seen: the `ends` of a watching wait over it (waitWatching,
    // enqueueWatchingAsync), read before looking at what to wait for.
    regionEnds: binding.regionEnds,
    threadId,
    // For tests: what the process holds natively (see src/lib.rs), what this
    // thread holds for its pending async waiters, and the probe of a blocked wait.
    diagnostics: binding.diagnostics,
    pendingAsync: () => ({ pending: pendingCount, slots: settlers.length }),
    probeAlive: binding.probeAlive
  }
}
