'use strict'
// RwLock: a robust, phase-fair reader-writer lock in 16 bytes of a
// SharedArrayBuffer, shared by the main thread and every worker, with
// blocking and promise-based acquisition.
//
// Four int32 cells: STATE, then three reader slots.
//
//   STATE = owner·16 + flags
//   owner      0, or the thread that holds the write lock or has the
//              writer's place and waits for the readers to leave
//   PARKED     waiters are queued on STATE (readers and writers)
//   DRAINING   the writer `owner` sleeps until the readers leave
//   OVERFLOW   readers past the slots are registered in the addon
//   DIED       a writer died holding the lock: the next acquisition is told
//
//   SLOT 1..3  0, or the owner id of a thread that holds a read lock there
//              (+ MARK = 2^30 once a writer sleeps until the readers leave)
//
//   STATE              slots / overflow   the lock
//   0                  empty              free
//   0                  readers            read-locked
//   W·16               empty              write-locked by W
//   W·16 (+DRAINING)   readers            W waits for the readers to leave
//   … + PARKED         any                others are queued behind W
//
// `owner` is worker_threads.threadId + 1 (the main thread is 1), below 2^27.
// Waiters are queued only while `owner` is nonzero (docs/rwlock.md).
//
// Uncontended, everything is pure JavaScript:
//   read         claim a free slot (compareExchange 0 → me), load STATE:
//                no writer (and no news of a dead one) → held
//   read unlock  compareExchange the slot me → 0; if a sleeping writer
//                marked it (me + MARK), empty it and the addon wakes the
//                writer if the readers are gone
//   write        compareExchange STATE 0 → me·16, load the slots: empty → held
//   write unlock compareExchange STATE me·16 → 0
// A reader writes its slot and then reads STATE; a writer writes STATE and
// then reads the slots (all Atomics are sequentially consistent): of two
// that race, the later read sees the other, so they never both get in.
//
// Everything else is decided by the addon under the lock of the wait queue
// (crates/futex-core/src/rwlock.rs):
//   park     a reader queues while a writer holds or waits (so a stream of
//            readers cannot starve writers); a writer queues behind a writer
//   unlock   once the oldest waiter has waited 1 ms, a writer's unlock hands
//            the read lock to every queued reader and the writer's place to
//            the oldest queued writer, at once (phase-fair: a stream of
//            writers cannot starve readers); before that it releases the
//            lock and wakes every waiter to compete ('ok')
//   drain    a writer with the writer's place sleeps on SLOT 1's address
//            until the last reader leaves and hands it the write lock
//   death    a writer that ends holding the lock (or the writer's place,
//            waiting for the readers: blocking or async) is released as its
//            unlock would, the next owner told OWNER_DIED once; a reader that ends
//            holding a read lock is forgotten (its slot counts as empty)
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const held = require('./held')
const { protocolAsync, cancelAsync, threadId, inRegion } = require('./futex').internal
const regionRw = require('./region-rwlock')
const { now, sharedView, timeoutOf, asyncOptions, callbackOf } = require('./options')
const { ACQUIRED, OWNER_DIED, LockTimeoutError, LockOwnershipError, DeadlockError, abortError } = require('./errors')

const STATE = 0
const FIRST_SLOT = 1
const LAST_SLOT = 3
const DRAINING = 2
const OVERFLOW = 4
const SHIFT = 4
const ME = threadId + 1 // this thread's owner id
const WRITE_ME = ME << SHIFT
const MARK = 1 << 30 // on a reader's slot: a writer sleeps until the readers leave
const MARKED_ME = ME | MARK
const MAX_OWNER = (1 << 27) - 1
const REGION = Symbol('RwLock over region memory')
const VIEW = Symbol('RwLock view')

// Codes of the addon (src/lock.rs, src/rwlock.rs).
const STATUS = [ACQUIRED, OWNER_DIED]
const TIMED_OUT = 2
const DEADLOCK = 3

const ownerOf = (state) => state >>> SHIFT

function describe (state) {
  const owner = ownerOf(state)
  if (owner === 0) return 'not write-locked'
  if (owner === ME) return (state & DRAINING) !== 0 ? 'being acquired by this thread' : 'held by this thread'
  return owner === 1 ? 'held by the main thread' : `held by the worker with threadId ${owner - 1}`
}

// --- reading -----------------------------------------------------------------
// The fast path: true if a slot was free and no writer is about.
// `look`: claim only a slot seen empty (while spinning: a compareExchange
// that fails still takes the cache line from the readers inside, who need
// it to leave).
function readNow (ta, look) {
  for (let i = FIRST_SLOT; i <= LAST_SLOT; i++) {
    if ((!look || Atomics.load(ta, i) === 0) && Atomics.compareExchange(ta, i, 0, ME) === 0) {
      if ((Atomics.load(ta, STATE) & ~OVERFLOW) === 0) return true
      leaveSlot(ta, i)
      return false
    }
  }
  return false
}

// Before queueing, spin briefly (about a microsecond, as AsyncLock does):
// critical sections are often shorter than a sleep and a wake-up. A reader
// spins while a writer is inside and nobody is queued; once someone is
// queued it queues behind them.
const SPINS = 100
const PARKED = 1

function readSpin (ta) {
  for (let i = 0; i < SPINS; i++) {
    const s = Atomics.load(ta, STATE)
    if ((s & ~OVERFLOW) === 0) {
      if (readNow(ta, true)) return true
    } else if ((s & PARKED) !== 0) {
      return false
    }
  }
  return false
}

// Backs out of slot `i`, just claimed: empties it (a writer that waits for
// the readers may have marked it meanwhile), then wakes that writer if it
// sleeps: it set DRAINING before it looked at the slots.
function leaveSlot (ta, i) {
  Atomics.exchange(ta, i, 0)
  if ((Atomics.load(ta, STATE) & DRAINING) !== 0) binding.rwReadRelease(ta, STATE, ME, true)
}

// Our slot holds ME, or ME + MARK once a writer sleeps until the readers
// leave: then the addon wakes it if we were the last.
function readRelease (ta) {
  for (let i = FIRST_SLOT; i <= LAST_SLOT; i++) {
    const v = Atomics.compareExchange(ta, i, ME, 0)
    if (v === ME) return
    if (v === MARKED_ME && Atomics.compareExchange(ta, i, MARKED_ME, 0) === MARKED_ME) {
      binding.rwReadRelease(ta, STATE, ME, true)
      return
    }
  }
  // Past the slots: registered in the addon.
  if ((Atomics.load(ta, STATE) & OVERFLOW) === 0 || !binding.rwReadRelease(ta, STATE, ME, false)) {
    throw new LockOwnershipError('RwLock.readUnlock: this thread holds no read lock')
  }
}

// Whether this thread holds a read lock: in a slot, or registered past them.
function holdsRead (ta) {
  for (let i = FIRST_SLOT; i <= LAST_SLOT; i++) if ((Atomics.load(ta, i) & ~MARK) === ME) return true
  return (Atomics.load(ta, STATE) & OVERFLOW) !== 0 && binding.rwOverflowReaders(ta, STATE, ME) > 0
}

// --- writing -----------------------------------------------------------------
const HELD = 0
const PENDING = 1 // we have the writer's place; readers are inside
const BUSY = 2

function writeNow (ta) {
  if (Atomics.compareExchange(ta, STATE, 0, WRITE_ME) !== 0) return BUSY
  for (let i = FIRST_SLOT; i <= LAST_SLOT; i++) if (Atomics.load(ta, i) !== 0) return PENDING
  return HELD
}

// A writer spins too: for the place while a writer is inside and nobody is
// queued, then (holding the place) for the readers to leave.
function writeSpin (ta, r) {
  for (let i = 0; i < SPINS && r === BUSY; i++) {
    const s = Atomics.load(ta, STATE)
    if (s === 0) r = writeNow(ta)
    else if ((s & PARKED) !== 0 || ownerOf(s) === ME) return r
  }
  if (r !== PENDING) return r
  for (let i = 0; i < SPINS; i++) {
    if (Atomics.load(ta, 1) === 0 && Atomics.load(ta, 2) === 0 && Atomics.load(ta, 3) === 0) return HELD
  }
  return PENDING
}

// Releases the write lock, or gives the writer's place up.
function writeRelease (ta) {
  if (Atomics.compareExchange(ta, STATE, WRITE_ME, 0) === WRITE_ME) return
  if (!binding.rwWriteRelease(ta, STATE, ME)) {
    throw new LockOwnershipError(`RwLock.writeUnlock: the lock is ${describe(Atomics.load(ta, STATE))}`)
  }
}

function waited (r, what, timeout) {
  if (r === TIMED_OUT) throw new LockTimeoutError(`${what}: not acquired within ${timeout} ms`)
  if (r === DEADLOCK) throw new DeadlockError(`${what}: this thread holds the write lock, or has an async acquisition of this lock queued; blocking would never end`)
  return STATUS[r]
}

// --- async -------------------------------------------------------------------
// Resolves with ACQUIRED or OWNER_DIED; rejects with LockTimeoutError or
// AbortError, leaving nothing held or queued. `write`: the write lock, else
// a read lock. Each step either takes the lock or queues one waiter whose
// outcome is 'owner-died' (held), 'handoff' (held; for a writer queued on
// STATE: the writer's place, step again to wait for the readers), 'ok' (the
// lock was released: step again), 'timed-out' or 'cancelled'. A death taken
// over is always reported, even past an abort. A step that throws (a native
// step, or a give-back that finds nothing to give because this thread's own
// unlock released it: ownership is per thread) rejects with what it threw;
// the writer's place, if the step had it, is given back.
function acquireAsync (ta, opts, write, pending, what) {
  const signal = opts.signal
  const timeout = opts.timeout
  const start = now()
  const aborted = () => signal !== undefined && signal.aborted
  const release = write ? writeRelease : readRelease
  return new Promise((resolve, reject) => {
    let queued = null // { token, index } of our queued waiter
    const onAbort = () => {
      if (queued !== null && cancelAsync(ta, queued.index, queued.token)) queued = null
    }
    const finish = (settle, value) => {
      if (signal !== undefined) signal.removeEventListener('abort', onAbort)
      settle(value)
    }
    const got = (status) => {
      pending = false // held now: what release gives back
      if (status === OWNER_DIED || !aborted()) return finish(resolve, status)
      release(ta) // handed to us while we were being aborted: pass it on
      finish(reject, abortError(signal))
    }
    let where = 0 // the queue of our last waiter: 0 STATE, 1 the writer's wait for the readers
    const step = (outcome) => {
      try {
        advance(outcome)
      } catch (e) {
        queued = null
        if (pending) {
          // The step threw holding the writer's place: give it up. (If that
          // throws too, the place is not ours any more.)
          pending = false
          try { writeRelease(ta) } catch {}
        }
        finish(reject, e)
      }
    }
    const advance = (outcome) => {
      queued = null
      if (outcome === 'owner-died') return got(OWNER_DIED)
      if (outcome === 'handoff') {
        if (!write || where === 1) return got(ACQUIRED)
        pending = true // the writer's place is ours: now the readers
      }
      const remaining = start + timeout - now()
      if (outcome === 'cancelled' || outcome === 'timed-out' || remaining <= 0 || aborted()) {
        if (pending) {
          pending = false
          writeRelease(ta) // give the writer's place up
        }
        return finish(reject, aborted() ? abortError(signal) : new LockTimeoutError(`${what}: not acquired within ${timeout} ms`))
      }
      const q = protocolAsync(ta, write
        ? (slot) => binding.rwWriteWaitAsync(ta, STATE, ME, pending, remaining, slot)
        : (slot) => binding.rwReadWaitAsync(ta, STATE, ME, remaining, slot))
      if (q === 0 || q === -1) return got(q === 0 ? ACQUIRED : OWNER_DIED)
      where = q.index
      if (where === 1) pending = true // it waits for the readers
      queued = q
      q.promise.then(step)
    }
    if (signal !== undefined) signal.addEventListener('abort', onAbort)
    step('start')
  })
}

function readAsync (ta, opts, what) {
  if (opts.signal !== undefined && opts.signal.aborted) return Promise.reject(abortError(opts.signal))
  if (readNow(ta) || readSpin(ta)) return Promise.resolve(ACQUIRED)
  return acquireAsync(ta, opts, false, false, what)
}

function writeAsync (ta, opts, what) {
  if (opts.signal !== undefined && opts.signal.aborted) return Promise.reject(abortError(opts.signal))
  let r = writeNow(ta)
  if (r !== HELD) r = writeSpin(ta, r)
  if (r === HELD) return Promise.resolve(ACQUIRED)
  return acquireAsync(ta, opts, true, r === PENDING, what)
}

// Release functions (lib/held.js), with `ownerDied`; a write release also
// has downgrade(), which turns it into a read release.
function readReleaser (ta, status) {
  const release = held.releaser(readRelease, ta)
  release.ownerDied = status === OWNER_DIED
  return release
}

function writeReleaser (ta, status) {
  let state = 'write' // → 'read' (downgraded) or 'released'
  const release = held.releaser(() => {
    if (state === 'write') writeRelease(ta)
    state = 'released'
  }, ta)
  release.ownerDied = status === OWNER_DIED
  release.downgrade = () => {
    if (state !== 'write') throw new LockOwnershipError('RwLock: downgrade() of a write lock already released or downgraded')
    downgrade(ta, 'RwLock.downgrade')
    state = 'read'
    release() // marks the write release function used, without releasing anything
    return readReleaser(ta, ACQUIRED)
  }
  return release
}

function downgrade (ta, what) {
  if (!binding.rwDowngrade(ta, STATE, ME)) {
    throw new LockOwnershipError(`${what}: the write lock is ${describe(Atomics.load(ta, STATE))}`)
  }
}

const RESOLVED = Promise.resolve()
const INFO_OK = Object.freeze({ ownerDied: false })
const INFO_OWNER_DIED = Object.freeze({ ownerDied: true })

// runRead / runWrite: the lock is asked for one microtask after the call,
// fn runs in the turn it is taken, and the lock is released however fn ends.
function run (ta, fn, options, write, what) {
  let opts
  try {
    callbackOf(what, fn)
    opts = asyncOptions(what, options)
  } catch (e) {
    return Promise.reject(e)
  }
  const release = write ? writeRelease : readRelease
  return RESOLVED.then(() => (write ? writeAsync : readAsync)(ta, opts, what)).then((status) =>
    held.runHeld(fn, status === OWNER_DIED ? INFO_OWNER_DIED : INFO_OK, release, ta))
}

// --- the class ---------------------------------------------------------------
class RwLock {
  /**
   * @param {SharedArrayBuffer} [buffer] where the lock lives; a fresh one if omitted
   * @param {number} [byteOffset=0] a multiple of 4; the lock takes RwLock.BYTES bytes
   */
  constructor (buffer, byteOffset) {
    if (ME > MAX_OWNER) throw new RangeError(`RwLock: threadId ${threadId} is too large (at most ${MAX_OWNER - 1})`)
    this[VIEW] = sharedView('RwLock', buffer, byteOffset, RwLock.BYTES)
    // Over a shared region's memory: lib/region-rwlock.js does the work.
    this[REGION] = buffer !== undefined && inRegion(this[VIEW])
  }

  get buffer () { return this[VIEW].buffer }
  get byteOffset () { return this[VIEW].byteOffset }

  /** Whether a thread holds the write lock or has the writer's place (a snapshot). */
  get isWriteLocked () {
    if (this[REGION]) return regionRw.isWriteLocked(this[VIEW])
    return ownerOf(Atomics.load(this[VIEW], STATE)) !== 0
  }

  /**
   * Read locks held by live threads through the slots, plus those registered
   * past them (a snapshot). A slot naming a thread that ended counts as empty.
   */
  get readers () {
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.readers(ta)
    let n = 0
    for (let i = FIRST_SLOT; i <= LAST_SLOT; i++) {
      const owner = Atomics.load(ta, i) & ~MARK
      if (owner !== 0 && binding.isThreadAlive(owner - 1)) n++
    }
    if ((Atomics.load(ta, STATE) & OVERFLOW) !== 0) n += binding.rwOverflowReaders(ta, STATE)
    return n
  }

  /** Blocks until a read lock is held: ACQUIRED or OWNER_DIED. */
  read (timeout) {
    const t = timeout === undefined ? Infinity : timeoutOf('RwLock.read', timeout)
    checkCanBlock('RwLock.read')
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.block(ta, false, t, 'RwLock.read')
    if (readNow(ta) || readSpin(ta)) return ACQUIRED
    return waited(binding.rwReadWait(ta, STATE, ME, t), 'RwLock.read', t)
  }

  /** A read lock if one is to be had now: ACQUIRED, OWNER_DIED or false. */
  tryRead () {
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.attempt(ta, false)
    if (readNow(ta)) return ACQUIRED
    const r = binding.rwReadTry(ta, STATE, ME)
    return r < STATUS.length ? STATUS[r] : false
  }

  readUnlock () {
    if (this[REGION]) regionRw.readUnlock(this[VIEW], 'RwLock.readUnlock')
    else readRelease(this[VIEW])
  }

  /** Blocks until the write lock is held: ACQUIRED or OWNER_DIED. */
  write (timeout) {
    const t = timeout === undefined ? Infinity : timeoutOf('RwLock.write', timeout)
    checkCanBlock('RwLock.write')
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.block(ta, true, t, 'RwLock.write')
    let r = writeNow(ta)
    if (r === HELD) return ACQUIRED
    if (r === BUSY && ownerOf(Atomics.load(ta, STATE)) === ME) {
      throw new DeadlockError('RwLock.write: this thread already holds the write lock; blocking would never end')
    }
    if (holdsRead(ta)) {
      if (r === PENDING) writeRelease(ta)
      throw new DeadlockError('RwLock.write: this thread holds a read lock; waiting for the readers would never end')
    }
    r = writeSpin(ta, r)
    if (r === HELD) return ACQUIRED
    return waited(binding.rwWriteWait(ta, STATE, ME, r === PENDING, t), 'RwLock.write', t)
  }

  /** The write lock if free now (or held by a dead thread): ACQUIRED, OWNER_DIED or false. */
  tryWrite () {
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.attempt(ta, true)
    const r = writeNow(ta)
    if (r === HELD) return ACQUIRED
    // Readers' slots are taken: give the place back and let the addon look,
    // which empties the slots of readers whose thread ended.
    if (r === PENDING) writeRelease(ta)
    const c = binding.rwWriteTry(ta, STATE, ME)
    return c < STATUS.length ? STATUS[c] : false
  }

  writeUnlock () {
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.writeUnlock(ta, 'RwLock.writeUnlock')
    if (Atomics.compareExchange(ta, STATE, WRITE_ME, 0) === WRITE_ME) return
    const s = Atomics.load(ta, STATE)
    if (ownerOf(s) !== ME || (s & DRAINING) !== 0) {
      throw new LockOwnershipError(`RwLock.writeUnlock: the write lock is ${describe(s)}`)
    }
    writeRelease(ta)
  }

  /** Write lock → read lock, atomically (no writer gets in between). */
  downgrade () {
    const ta = this[VIEW]
    if (ta === undefined) throw new TypeError('RwLock.downgrade: called on an object that is not a RwLock')
    if (this[REGION]) regionRw.downgrade(ta, 'RwLock.downgrade')
    else downgrade(ta, 'RwLock.downgrade')
  }

  /** Resolves with a read release function (idempotent, Symbol.dispose-able). */
  readAsync (options) {
    let opts
    try {
      opts = asyncOptions('RwLock.readAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.readAsync(ta, opts, 'RwLock.readAsync')
    return readAsync(ta, opts, 'RwLock.readAsync').then((status) => readReleaser(ta, status))
  }

  /** Resolves with a write release function, which also has downgrade(). */
  writeAsync (options) {
    let opts
    try {
      opts = asyncOptions('RwLock.writeAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const ta = this[VIEW]
    if (this[REGION]) return regionRw.writeAsync(ta, opts, 'RwLock.writeAsync')
    return writeAsync(ta, opts, 'RwLock.writeAsync').then((status) => writeReleaser(ta, status))
  }

  /** Runs fn(info) holding a read lock; resolves with its result, always releasing. */
  runRead (fn, options) {
    return (this[REGION] ? regionRw.run : run)(this[VIEW], fn, options, false, 'RwLock.runRead')
  }

  /** Runs fn(info) holding the write lock; resolves with its result, always releasing. */
  runWrite (fn, options) {
    return (this[REGION] ? regionRw.run : run)(this[VIEW], fn, options, true, 'RwLock.runWrite')
  }
}

RwLock.BYTES = 16
RwLock.ACQUIRED = ACQUIRED
RwLock.OWNER_DIED = OWNER_DIED

module.exports = { RwLock }
