'use strict'
// Web Locks for every process that maps a shared region: `region.locks`,
// with the W3C semantics of `navigator.locks` (request with modes,
// ifAvailable, steal, signal; query) across processes (docs/region.md,
// "Web Locks").
//
// The table lives in a region of its own, beside the user's (the file
// `shared-futex-locks.<name>`), so that it takes none of the user's bytes:
//
//   words 0-1   the table's mutex: an AsyncLock in the region (lib/region-lock.js)
//   word 2      the next request's arrival number
//   then SLOTS request slots of SLOT_WORDS words each:
//     STATE     FREE, PENDING, HELD, STOLEN (held, then stolen: no longer counts)
//     MODE      bit 0: shared (else exclusive); bit 1 (SYNC): a blocking
//               requestSync's request (its thread runs nothing until granted)
//     ORDER     arrival number (the queue's order)
//     OWNER     the requesting thread's owner id in the table's region (liveness)
//     PID, TID  for clientId
//     LEN, HASH the name's length in UTF-16 code units, and a hash of it
//     NAME..    the name, two code units per word
//
// Every change is made under the mutex; the next holder of a mutex whose
// holder died processes every queue again. A request waits on its slot's STATE
// word (the region's shared queues): the process that grants it (any
// process, under the mutex) stores HELD and wakes it. Waiters sleep
// watching (the region's count of ends: a thread or process gone wakes
// them, src/region.rs) and sweep when an end came since their manager's
// last sweep, or when a slice ran out: requests and locks of threads that
// are gone (a process killed with SIGKILL, a worker that ended) are removed
// and the queues they held up processed, so a dead holder's lock is granted
// on as soon as its death is known (at once where the process's watcher of
// deaths follows the region; else within a slice of 50 ms).
// A slot's fields are written before its STATE: a process killed in the
// middle leaves a FREE slot or one the sweep removes.
const { threadId } = require('worker_threads')
const { setImmediate } = require('timers')
const binding = require('./native')
const futex = require('./futex')
const { enqueueWatchingAsync, waitWatching, cancelAsync, regionEnds } = futex.internal
const { AsyncLock } = require('./lock')
const { SharedRegionError, DeadlockError, OWNER_DIED } = require('./errors')
const { checkCanBlock } = require('./host')
const { parse, reasonOf, domError, newLock, adopt, cycleDeadlock } = require('./web-locks').internal

const SLOTS = 1024
const SLOT_WORDS = 128
const FIRST_SLOT = 16
const BYTES = (FIRST_SLOT + SLOTS * SLOT_WORDS) * 4
const SEQ = 2
const STATE = 0
const MODE = 1
const ORDER = 2
const OWNER = 3
const PID = 4
const TID = 5
const LEN = 6
const HASH = 7
const NAME_AT = 8
const MAX_NAME = (SLOT_WORDS - NAME_AT) * 2
const FREE = 0
const PENDING = 1
const HELD = 2
const STOLEN = 3
const SHARED = 1
const SYNC = 2

const at = (slot) => FIRST_SLOT + slot * SLOT_WORDS

function hashOf (name) {
  let h = 0x811c9dc5
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193)
  return h | 0
}

const MANAGER = Symbol('SharedLockManager state')

class SharedLockManager {
  // Made by SharedRegion (`region.locks`), over the table's region buffer.
  constructor (key, buffer) {
    if (key !== MANAGER) throw new TypeError('Illegal constructor')
    const w = new Int32Array(buffer)
    const mutex = new AsyncLock(buffer, 0)
    // sweptEnds: the region's count of ends as the last sweep here read it first.
    this[MANAGER] = { w, mutex, me: binding.regionOwner(w), sweptEnds: -1 }
    adopt(this)
  }

  /** request(name, [options], callback), as navigator.locks.request, for every process of the region. */
  request (name, options, callback) {
    let parsed
    try {
      parsed = parse(this, arguments, 'request')
      if (parsed.resource.length > MAX_NAME) {
        throw domError(`Names longer than ${MAX_NAME} UTF-16 code units are not supported by a region's locks.`, 'NotSupportedError')
      }
    } catch (e) {
      return Promise.reject(e)
    }
    const { resource, opts, fn } = parsed
    if (opts.signal !== undefined && opts.signal.aborted) return Promise.reject(reasonOf(opts.signal))
    return new Promise((resolve, reject) => request(this[MANAGER], resource, opts, fn, resolve, reject))
  }

  /**
   * Not in the standard (as the process's manager has it): blocks this
   * thread until granted, runs fn(lock) (fn(null) when `ifAvailable` found
   * it taken), releases when fn returns or throws, and returns fn's result.
   * A DeadlockError where a lock or request of this thread comes first for
   * the name; an AbortError after fn if the lock was stolen meanwhile.
   */
  requestSync (name, options, callback) {
    const { resource, opts, fn } = parse(this, arguments, 'requestSync')
    if (resource.length > MAX_NAME) {
      throw domError(`Names longer than ${MAX_NAME} UTF-16 code units are not supported by a region's locks.`, 'NotSupportedError')
    }
    if (opts.signal !== undefined) {
      throw domError("requestSync takes no 'signal': nothing can abort a blocked thread.", 'NotSupportedError')
    }
    if (!opts.ifAvailable && !opts.steal) checkCanBlock('LockManager.requestSync')
    return requestSync(this[MANAGER], resource, opts, fn)
  }

  /** The held locks and pending requests of every process of the region. */
  query () {
    const m = this[MANAGER]
    if (m === undefined) return Promise.reject(new TypeError("Illegal invocation: 'query' called on an object that is not a LockManager"))
    const held = []
    const pending = []
    locked(m, () => {
      sweep(m)
      const order = []
      for (let s = 0; s < SLOTS; s++) {
        const st = Atomics.load(m.w, at(s) + STATE)
        if (st === HELD || st === PENDING) order.push([Atomics.load(m.w, at(s) + ORDER), s, st])
      }
      order.sort((a, b) => (a[0] - b[0]) | 0)
      for (const [, s, st] of order) (st === HELD ? held : pending).push(infoOf(m.w, s))
    })
    return Promise.resolve({ held, pending })
  }
}
Object.defineProperty(SharedLockManager.prototype, Symbol.toStringTag, { value: 'LockManager', configurable: true })
Object.defineProperty(SharedLockManager.prototype.request, 'length', { value: 2 })
Object.defineProperty(SharedLockManager.prototype.requestSync, 'length', { value: 2 })

function infoOf (w, s) {
  const b = at(s)
  return {
    name: nameOf(w, s),
    mode: (Atomics.load(w, b + MODE) & SHARED) !== 0 ? 'shared' : 'exclusive',
    clientId: `${Atomics.load(w, b + PID)}-thread-${Atomics.load(w, b + TID)}`
  }
}

// Runs fn under the table's mutex. A mutex taken over from a thread that
// died holding it may have been left between two steps of an operation
// (a lock freed, its queue not processed yet): every queue with a request
// pending is processed again first.
function locked (m, fn) {
  if (m.mutex.lock() === OWNER_DIED) recover(m.w)
  try {
    return fn()
  } finally {
    m.mutex.unlock()
  }
}

function nameOf (w, s) {
  const b = at(s)
  const len = Atomics.load(w, b + LEN)
  let out = ''
  for (let i = 0; i < len; i++) {
    const word = Atomics.load(w, b + NAME_AT + (i >> 1))
    out += String.fromCharCode((i & 1) === 0 ? word & 0xffff : word >>> 16)
  }
  return out
}

function sameName (w, s, name, hash) {
  const b = at(s)
  if (Atomics.load(w, b + HASH) !== hash || Atomics.load(w, b + LEN) !== name.length) return false
  return nameOf(w, s) === name
}

function writeName (w, s, name) {
  const b = at(s)
  for (let i = 0; i < name.length; i += 2) {
    const lo = name.charCodeAt(i)
    const hi = i + 1 < name.length ? name.charCodeAt(i + 1) : 0
    Atomics.store(w, b + NAME_AT + (i >> 1), lo | (hi << 16))
  }
  Atomics.store(w, b + LEN, name.length)
  Atomics.store(w, b + HASH, hashOf(name))
}

// Under the mutex: the slots of `name`, held and pending (queue order).
function slotsOf (w, name) {
  const hash = hashOf(name)
  const held = []
  const pending = []
  for (let s = 0; s < SLOTS; s++) {
    const st = Atomics.load(w, at(s) + STATE)
    if ((st === HELD || st === PENDING) && sameName(w, s, name, hash)) (st === HELD ? held : pending).push(s)
  }
  pending.sort((a, b) => (Atomics.load(w, at(a) + ORDER) - Atomics.load(w, at(b) + ORDER)) | 0)
  return { held, pending }
}

const isShared = (w, s) => (Atomics.load(w, at(s) + MODE) & SHARED) !== 0
const ownerOf = (w, s) => Atomics.load(w, at(s) + OWNER)

// Under the mutex: the owners that pending request `s` waits for: the
// holders of its name it conflicts with, and the owners of requests queued
// ahead of it, except shared ones a shared `s` would be granted with (no
// exclusive request between them).
function blockersOf (w, s) {
  const name = nameOf(w, s)
  const { held, pending } = slotsOf(w, name)
  const shared = isShared(w, s)
  const out = new Set()
  for (const h of held) if (!shared || !isShared(w, h)) out.add(ownerOf(w, h))
  let exclusiveBetween = !shared
  for (let i = pending.indexOf(s) - 1; i >= 0; i--) {
    const p = pending[i]
    if (!isShared(w, p)) exclusiveBetween = true
    if (exclusiveBetween) out.add(ownerOf(w, p))
  }
  return out
}

// Under the mutex: the cycle of threads blocked in requestSync that the
// blocking request `start` (of this thread, pending) closes, as slots, each
// waiting for the next one's owner, the last for this thread; or null. A
// thread blocked in requestSync has exactly one pending SYNC request.
function cycleFrom (m, start) {
  const w = m.w
  const blockedIn = new Map()
  for (let s = 0; s < SLOTS; s++) {
    if (Atomics.load(w, at(s) + STATE) === PENDING && (Atomics.load(w, at(s) + MODE) & SYNC) !== 0) blockedIn.set(ownerOf(w, s), s)
  }
  const seen = new Set()
  const path = []
  const visit = (s) => {
    path.push(s)
    for (const o of blockersOf(w, s)) {
      if (o === m.me) return true
      const next = blockedIn.get(o)
      if (next === undefined || seen.has(o)) continue
      seen.add(o)
      if (visit(next)) return true
    }
    path.pop()
    return false
  }
  return visit(start) ? path : null
}

// Under the mutex: grants the requests of `name` that can be, in order
// (the spec's "process the lock request queue").
function processQueue (w, name) {
  const { held, pending } = slotsOf(w, name)
  let exclusiveHeld = held.some((s) => !isShared(w, s))
  let anyHeld = held.length > 0
  for (const s of pending) {
    const shared = isShared(w, s)
    if (shared ? exclusiveHeld : anyHeld) return
    Atomics.store(w, at(s) + STATE, HELD)
    futex.notify(w, at(s) + STATE)
    anyHeld = true
    if (!shared) exclusiveHeld = true
  }
}

// Under the mutex: removes the requests and locks of threads that are gone,
// and processes the queues they were in.
function sweep (m) {
  const w = m.w
  m.sweptEnds = regionEnds(w)
  const names = new Set()
  for (let s = 0; s < SLOTS; s++) {
    const b = at(s)
    const st = Atomics.load(w, b + STATE)
    if (st === FREE) continue
    const owner = Atomics.load(w, b + OWNER)
    if (owner === m.me || binding.regionOwnerAlive(w, owner)) continue
    if (st === HELD || st === PENDING) names.add(nameOf(w, s))
    Atomics.store(w, b + STATE, FREE)
  }
  for (const name of names) processQueue(w, name)
}

function recover (w) {
  const names = new Set()
  for (let s = 0; s < SLOTS; s++) {
    if (Atomics.load(w, at(s) + STATE) === PENDING) names.add(nameOf(w, s))
  }
  for (const name of names) processQueue(w, name)
}

function allocate (w) {
  for (let s = 0; s < SLOTS; s++) {
    if (Atomics.load(w, at(s) + STATE) === FREE) return s
  }
  return -1
}

// Under the mutex: queues a request of this thread (granting it if it can
// be): its slot; UNAVAILABLE (ifAvailable found it taken), FULL, or, for a
// blocking caller, DEADLOCK (a lock or request of this thread would keep it
// waiting for ever) or CYCLE (it would close a cycle of threads blocked in
// requestSync, in any processes: m.lastCycle says which).
const UNAVAILABLE = -1
const FULL = -2
const DEADLOCK = -3
const CYCLE = -4

function enqueue (m, name, opts, blocking) {
  const w = m.w
  let slot = FULL
  locked(m, () => {
    sweep(m)
    const { held, pending } = slotsOf(w, name)
    const mine = (s) => Atomics.load(w, at(s) + OWNER) === m.me
    if (blocking && !opts.steal && !opts.ifAvailable &&
        (pending.some(mine) || held.some((s) => mine(s) && (opts.mode === 'exclusive' || !isShared(w, s))))) {
      slot = DEADLOCK
      return
    }
    if (opts.steal) {
      for (const s of held) {
        Atomics.store(w, at(s) + STATE, STOLEN)
        futex.notify(w, at(s) + STATE)
      }
    } else if (opts.ifAvailable) {
      const shared = opts.mode === 'shared'
      const grantable = pending.length === 0 && (shared ? held.every((s) => isShared(w, s)) : held.length === 0)
      if (!grantable) {
        slot = UNAVAILABLE
        return
      }
    }
    const s = allocate(w)
    if (s < 0) return
    const b = at(s)
    writeName(w, s, name)
    Atomics.store(w, b + MODE, (opts.mode === 'shared' ? SHARED : 0) | (blocking ? SYNC : 0))
    Atomics.store(w, b + OWNER, m.me)
    Atomics.store(w, b + PID, process.pid)
    Atomics.store(w, b + TID, threadId)
    Atomics.store(w, b + ORDER, Atomics.add(w, SEQ, 1))
    if (opts.steal) {
      // Granted at once, ahead of the queue, as the spec's steal.
      Atomics.store(w, b + STATE, HELD)
    } else {
      Atomics.store(w, b + STATE, PENDING)
      processQueue(w, name)
    }
    slot = s
    // Registered as blocked and the cycle looked for in one step under the
    // mutex: of the threads that close a cycle, the last to block finds it.
    if (blocking && Atomics.load(w, b + STATE) === PENDING) {
      const cycle = cycleFrom(m, s)
      if (cycle !== null) {
        m.lastCycle = cycle.map((c) => { const { clientId, name } = infoOf(w, c); return { clientId, name } })
        Atomics.store(w, b + STATE, FREE)
        processQueue(w, name)
        slot = CYCLE
      }
    }
  })
  return slot
}

const fullError = () => new SharedRegionError('ERR_REGION_FULL', `the region's lock table is full (${SLOTS} requests and locks)`)

// Releases the lock in `slot`; true if it had been stolen meanwhile.
function releaseSlot (m, slot, name) {
  const b = at(slot)
  let st = FREE
  locked(m, () => {
    st = Atomics.load(m.w, b + STATE)
    if (st === HELD || st === STOLEN) {
      Atomics.store(m.w, b + STATE, FREE)
      if (st === HELD) processQueue(m.w, name)
    }
  })
  futex.notify(m.w, b + STATE) // ends a steal watch
  return st === STOLEN
}

function requestSync (m, name, opts, fn) {
  const w = m.w
  const slot = enqueue(m, name, opts, true)
  if (slot === DEADLOCK) {
    throw new DeadlockError(`LockManager.requestSync: a lock or request of this thread comes first for ${JSON.stringify(name)}; blocking would never end`)
  }
  if (slot === CYCLE) throw cycleDeadlock(name, m.lastCycle)
  if (slot === FULL) throw fullError()
  if (slot === UNAVAILABLE) return Reflect.apply(fn, undefined, [null])
  const b = at(slot)
  for (;;) {
    const ends = regionEnds(w)
    // A thread or process gone since the last sweep: sweep for dead holders.
    if (ends !== m.sweptEnds) locked(m, () => sweep(m))
    if (Atomics.load(w, b + STATE) !== PENDING) break
    // So does a slice that runs out.
    if (waitWatching(w, b + STATE, PENDING, ends, Infinity) === 'timed-out') locked(m, () => sweep(m))
  }
  let done = false
  let result
  try {
    result = Reflect.apply(fn, undefined, [newLock(name, opts.mode)])
    done = true
  } finally {
    if (releaseSlot(m, slot, name) && done) throw domError('The lock was stolen.', 'AbortError') // eslint-disable-line no-unsafe-finally
  }
  return result
}

function request (m, name, opts, fn, resolve, reject) {
  const w = m.w
  const slot = enqueue(m, name, opts, false)
  if (slot === FULL) {
    reject(fullError())
    return
  }
  if (slot === UNAVAILABLE) {
    setImmediate(() => {
      if (opts.signal !== undefined && opts.signal.aborted) reject(reasonOf(opts.signal))
      else settle(fn, null, resolve, reject, () => {})
    })
    return
  }
  const b = at(slot)
  const signal = opts.signal
  let token = null
  let done = false
  const onAbort = () => {
    if (done) return
    let taken = false
    locked(m, () => {
      if (Atomics.load(w, b + STATE) === PENDING && Atomics.load(w, b + OWNER) === m.me) {
        Atomics.store(w, b + STATE, FREE)
        processQueue(w, name)
        taken = true
      }
    })
    if (!taken) return // granted meanwhile: the callback runs
    done = true
    if (token !== null) cancelAsync(w, b + STATE, token)
    reject(reasonOf(signal))
  }
  if (signal !== undefined) signal.addEventListener('abort', onAbort)
  const granted = () => {
    done = true
    if (signal !== undefined) signal.removeEventListener('abort', onAbort)
    const lock = newLock(name, opts.mode)
    let released = false
    let stolen = false
    const stolenNow = () => {
      if (stolen) return
      stolen = true
      reject(domError('The lock was stolen.', 'AbortError'))
    }
    const release = () => {
      if (released) return
      released = true
      // Stolen before the news reached this thread: still an AbortError.
      if (releaseSlot(m, slot, name)) stolenNow()
    }
    // A steal makes the request's promise reject with an AbortError at once;
    // the callback runs on, and its lock no longer counts. The watch sleeps
    // watching: a stealer killed between its store and its wake-up leaves
    // STOLEN to be found by the look after the end its death counts (or
    // after a slice), not by this lock's release.
    const watch = () => {
      if (released) return
      const ends = regionEnds(w)
      if (Atomics.load(w, b + STATE) === STOLEN) return stolenNow()
      const q = enqueueWatchingAsync(w, b + STATE, HELD, ends, Infinity, false)
      if (q === 'not-equal') return watch()
      q.promise.then(watch)
    }
    watch()
    setImmediate(() => {
      // The spec grants in a task of the lock manager: an abort made before
      // this task (right after request() returned, say) came first there,
      // even where the table granted at once. Released, not run.
      if (signal !== undefined && signal.aborted) {
        release()
        reject(reasonOf(signal))
        return
      }
      settle(fn, lock, resolve, reject, release)
    })
  }
  const step = () => {
    if (done) return
    const ends = regionEnds(w)
    if (ends !== m.sweptEnds) locked(m, () => sweep(m))
    const st = Atomics.load(w, b + STATE)
    if (st === HELD) return granted()
    if (st !== PENDING) return
    const q = enqueueWatchingAsync(w, b + STATE, PENDING, ends, Infinity, true)
    if (q === 'not-equal') return step()
    token = q.token
    q.promise.then((outcome) => {
      token = null
      if (done || outcome === 'cancelled') return
      // A slice ran out: sweep for dead holders, then look again.
      if (outcome === 'timed-out') locked(m, () => sweep(m))
      step()
    })
  }
  step()
}

// Runs fn(lock) as a task; releases before settling with its result.
function settle (fn, lock, resolve, reject, release) {
  let result
  try {
    result = fn(lock)
  } catch (e) {
    release()
    reject(e)
    return
  }
  Promise.resolve(result).then((v) => { release(); resolve(v) }, (e) => { release(); reject(e) })
}

// For tests that play a process stopped at a given step.
const internal = { slotsOf, stateOf: (s) => at(s) + STATE, STOLEN }

module.exports = { SharedLockManager, MANAGER, BYTES, internal }
