'use strict'
// AsyncLock over a shared region's memory: the same lock for every thread of
// every process that maps the region (docs/region.md, "Locks").
//
// One int32 cell, WORD, as for the lock of one process (lib/lock.js):
//
//   0               unlocked, nobody waits
//   C               unlocked, waiters may be waiting
//   owner·2 (+ C)   locked by `owner`
//   + STARVE        (bit 31) a waiter has waited longer than STARVING ms: the
//                   word, once free, is only for a waiter that has slept
//
// `owner` is the holder's owner id in the region (src/region.rs,
// `regionOwner`): a thread slot of the region's control block and its
// generation, so that it names one thread of one process, and stops naming a
// live one when that thread ends or its process dies (however it dies: the
// kernel's record lock on the process slot says so). No pid is involved.
//
// The protocol is a robust futex mutex on the region's shared queues:
//
//   lock     take a free word (0 → me·2, keeping C), or a word whose owner
//            is dead (→ me·2 + C: 'owner-died'); else set C and wait on the
//            word, watching (below), asking each time it wakes whether
//            the owner still lives. A waiter that has slept takes the word
//            with C set: others may still be queued behind it.
//   unlock   me·2 → 0 if C is clear; else store 0 and wake one waiter.
//
// The queue of the word is FIFO, and a woken waiter competes with threads
// that arrive meanwhile, as in Go's `sync.Mutex`; and as there, a waiter
// that has waited longer than STARVING ms switches the word to starvation
// mode (STARVE): an unlock then leaves the word free for the waiter it
// wakes (the oldest), and newcomers queue instead of taking it. The waiter
// that takes it clears the bit. Were nobody left to wake, a newcomer takes
// it after its first slice.
//
// A waiter sleeps *watching* (waitWatching over a region): it reads the
// region's count of ends before it looks at the owner, and the end of a
// thread or process (its thread slot given back, or its death, which the
// process's watcher of deaths learns of at once: src/region/watch.rs)
// wakes it, so that a dead owner is noticed when it dies. Each sleep still
// lasts one slice at most (src/region.rs, `slice_end`: a second where the
// watcher follows every process of the region, else 50 ms).
const binding = require('./native')
const futex = require('./futex')
const { waitWatching, enqueueWatchingAsync, regionEnds } = futex.internal
const { now } = require('./options')
const { ACQUIRED, OWNER_DIED, LockTimeoutError, LockOwnershipError, DeadlockError } = require('./errors')

const WORD = 0
const C = 1
const STARVE = 1 << 31
const STARVING = 1

const ownerOf = (w) => (w >>> 1) & 0x3fffffff

function describeOwner (ta, w, me) {
  const owner = ownerOf(w)
  if (owner === 0) return 'not locked'
  if (owner === me) return 'held by this thread'
  return binding.regionOwnerAlive(ta, owner) ? 'held by another thread (of this process or another)' : 'held by a thread that ended'
}

// One attempt without waiting: ACQUIRED, OWNER_DIED, or the word seen
// (held by a live owner, or free and kept for a woken waiter). `contended`:
// the caller has slept (it takes a free word with C set, also in
// starvation mode).
function attempt (ta, me, contended) {
  for (;;) {
    const w = Atomics.load(ta, WORD)
    const owner = ownerOf(w)
    if (owner === 0) {
      if ((w & STARVE) !== 0 && !contended) return w
      if (Atomics.compareExchange(ta, WORD, w, (me << 1) | (contended ? C : w & C)) === w) return ACQUIRED
      continue
    }
    if (owner !== me && !binding.regionOwnerAlive(ta, owner)) {
      if (Atomics.compareExchange(ta, WORD, w, (me << 1) | C) === w) return OWNER_DIED
      continue
    }
    return w
  }
}

// Sets C (and STARVE when `starving`) on a held word `w`; the word to wait
// on, or -1 if it changed.
function markWaiting (ta, w, starving) {
  const marked = w | C | (starving ? STARVE : 0)
  if (marked === w) return w
  return Atomics.compareExchange(ta, WORD, w, marked) === w ? marked : -1
}

// Blocks: ACQUIRED or OWNER_DIED; throws LockTimeoutError, DeadlockError.
function lock (ta, me, timeout, what) {
  const start = now()
  const deadline = start + timeout
  let contended = false
  let ends = -1 // the count of ends, read before the look at the owner
  for (;;) {
    const r = attempt(ta, me, contended)
    if (typeof r === 'string') return r
    if (ownerOf(r) === me) throw new DeadlockError(`${what}: this thread already holds the lock; blocking would never end`)
    if (ends === -1) {
      // (Not read for the first try, which usually takes the lock.)
      ends = regionEnds(ta)
      continue
    }
    const w = markWaiting(ta, r, contended && now() - start > STARVING)
    if (w === -1) continue
    const remaining = deadline - now()
    if (remaining <= 0) throw new LockTimeoutError(`${what}: not acquired within ${timeout} ms`)
    waitWatching(ta, WORD, w, ends, remaining)
    ends = regionEnds(ta)
    contended = true
  }
}

function tryLock (ta, me) {
  const r = attempt(ta, me, false)
  return typeof r === 'string' ? r : false
}

function unlock (ta, me, what) {
  if (Atomics.compareExchange(ta, WORD, me << 1, 0) === me << 1) return
  const w = Atomics.load(ta, WORD)
  if (ownerOf(w) !== me) throw new LockOwnershipError(`${what}: the lock is ${describeOwner(ta, w, me)}`)
  // In starvation mode the free word stays kept for the waiter woken here.
  Atomics.store(ta, WORD, (w & STARVE) !== 0 ? STARVE | C : 0)
  futex.notify(ta, WORD, 1)
}

// The protocol for lib/acquire.js (see there), for the owner `me`.
function protocol (me) {
  const release = (ta) => unlock(ta, me, 'AsyncLock.unlock')
  return {
    index: WORD,
    now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) &&
      Atomics.compareExchange(ta, WORD, 0, me << 1) === 0,
    park (ta, waited, remaining) {
      for (;;) {
        const ends = regionEnds(ta)
        // A waiter that was woken (waited > 0) takes the word with C.
        const r = attempt(ta, me, waited > 0)
        if (typeof r === 'string') return r
        const w = markWaiting(ta, r, waited > STARVING)
        if (w === -1) continue
        const q = enqueueWatchingAsync(ta, WORD, w, ends, remaining, true)
        if (q === 'not-equal') continue
        // A slice that ran out is a look again: acquire.js ends the wait
        // once no time remains.
        return { token: q.token, promise: q.promise.then((o) => o === 'timed-out' ? 'ok' : o) }
      }
    },
    release,
    passOn (ta) {
      // A wake-up to compete that will not be used: if the word is free,
      // take and release it, which wakes the next waiter.
      const w = Atomics.load(ta, WORD)
      if (ownerOf(w) === 0 && Atomics.compareExchange(ta, WORD, w, (me << 1) | C | (w & STARVE)) === w) release(ta)
    },
    info: (status) => status === OWNER_DIED ? INFO_OWNER_DIED : INFO_OK,
    ok: null,
    missing: 'not acquired'
  }
}

const INFO_OK = Object.freeze({ ownerDied: false })
const INFO_OWNER_DIED = Object.freeze({ ownerDied: true })

function protocolFor (me) {
  const p = protocol(me)
  p.ok = INFO_OK
  return p
}

// This thread's owner id in the region of `ta`'s memory (0: not region memory).
function ownerIn (ta) {
  try {
    return binding.regionOwner(ta)
  } catch (e) {
    throw futex.internal.regionError(e)
  }
}

module.exports = {
  lock,
  tryLock,
  unlock,
  protocolFor,
  ownerIn,
  isLocked: (ta) => ownerOf(Atomics.load(ta, WORD)) !== 0,
  heldBy: (ta, me) => ownerOf(Atomics.load(ta, WORD)) === me
}
