'use strict'
// RwLock over a shared region's memory: one reader-writer lock for every
// thread of every process that maps the region (docs/region.md,
// "Primitives"). The same 16 bytes as a RwLock of one process
// (lib/rwlock.js), four int32 cells:
//
//   STATE    owner·2: the writer's owner id in the region (0: none)
//   READERS  read locks held
//   (cell 2) reserved, stays 0
//   SEQ      seq·2 + LINED: moves on by 2 whenever the lock is let go or a
//            waiter leaves the line; LINED: waiters are in line
//
// Every change is a transaction of the region's holds table
// (lib/region-holds.js), which records each thread's read locks: a reader
// that ends or whose process dies without unlocking is given back by the
// next waiter (its read locks leave READERS); a writer that does is taken
// over by the next acquirer, told OWNER_DIED.
//
// The line (lib/region-holds.js, "lines of waiters"): a reader or writer
// that must wait takes a place, by arrival time. A writer goes only when
// nobody in line (reader or writer) came before it and has waited 1 ms; a
// reader only when no writer did: so readers that came together go
// together, a writer is not starved by a stream of readers, nor readers by
// a stream of writers (in the order they came, as a task-fair lock). A
// newcomer passes a waiter only while it has waited less than 1 ms. Waiters
// sleep on their place's bell in the table, watching (the table region's
// count of ends, read before the look: the end of a thread or process wakes
// them, src/region.rs; each sleep also lasts a slice at most). An unlock
// rings the first live place of the line, and the readers right behind a
// reader there: they may go together.
const futex = require('./futex')
const held = require('./held')
const binding = require('./native')
const { waitWatching, enqueueWatchingAsync, regionEnds } = futex.internal
const { holdsOf, register, LINED } = require('./region-holds')
const { now } = require('./options')
const acquiring = require('./acquire')
const { ACQUIRED, OWNER_DIED, LockTimeoutError, LockOwnershipError, DeadlockError } = require('./errors')

const STATE = 0
const READERS = 1
const SEQ = 3
const KIND = 2 // read locks (lib/region-holds.js)
const READ_WAIT = 4 // places in line
const WRITE_WAIT = 5
const LINE = [READ_WAIT, WRITE_WAIT]
const WRITERS = [WRITE_WAIT]

// SEQ moves on, and the first of the line (with the readers right behind a
// reader there) is rung.
const letGo = (tx, i) => tx.moveOn(i, i + SEQ, LINE, READ_WAIT)

const BUSY = 0
const MINE = 1 // held by this thread in a way that makes waiting a deadlock

// STATE's index in the whole buffer of the region.
const at = (ta) => ta.byteOffset >> 2

// The read locks of a dead thread leave READERS; its place in line is
// freed (the entry is, by the table). Either way the line is rung.
register(KIND, (tx, user, i, n) => {
  tx.put(i + READERS, Math.max(0, Atomics.load(user, i + READERS) - n))
  letGo(tx, i)
})
for (const kind of LINE) {
  register(kind, (tx, user, i) => {
    letGo(tx, i)
  })
}

const liveOther = (tx, owner) => owner !== 0 && owner !== tx.me && binding.regionOwnerAlive(tx.user, owner)

// One attempt at a read lock: ACQUIRED, OWNER_DIED, BUSY or MINE. Without
// `takeOver`, a dead writer's lock is BUSY (the async fast path leaves it to
// the step that reports it). `queue`: one that cannot takes a place in line,
// and is to sleep on its bell (the table's `parked`).
function readOnce (ta, takeOver, queue) {
  const i = at(ta)
  return holdsOf(ta).run((tx) => {
    const writer = Atomics.load(tx.user, i + STATE) >>> 1
    // A waiting writer holds new readers off, this thread's own too.
    if (writer === tx.me || tx.mine(i, WRITE_WAIT) !== -1) return MINE
    if ((writer !== 0 && (!takeOver || liveOther(tx, writer))) || !tx.mayGo(i, i + SEQ, READ_WAIT, WRITERS, LINE)) {
      if (queue) tx.queue(i, i + SEQ, READ_WAIT, LINE)
      return BUSY
    }
    if (writer !== 0) tx.put(i + STATE, 0) // a dead writer's: taken over
    tx.put(i + READERS, Atomics.load(tx.user, i + READERS) + 1)
    tx.add(i, KIND, 1)
    // The readers right behind it were rung with it.
    tx.unqueue(i, i + SEQ, READ_WAIT, LINE, false)
    return writer !== 0 ? OWNER_DIED : ACQUIRED
  })
}

// One attempt at the write lock (see readOnce).
function writeOnce (ta, takeOver, queue) {
  const i = at(ta)
  return holdsOf(ta).run((tx) => {
    const writer = Atomics.load(tx.user, i + STATE) >>> 1
    if (writer === tx.me || tx.held(i, KIND) > 0) return MINE
    // Readers that are gone give their read locks back first (the first
    // change of the transaction: all of them, however many).
    if (Atomics.load(tx.user, i + READERS) > 0) tx.sweep(i)
    const free = !(writer !== 0 && (!takeOver || liveOther(tx, writer))) && tx.mayGo(i, i + SEQ, WRITE_WAIT, LINE, LINE) &&
      Atomics.load(tx.user, i + READERS) === 0
    if (!free) {
      if (queue) tx.queue(i, i + SEQ, WRITE_WAIT, LINE)
      return BUSY
    }
    tx.put(i + STATE, tx.me << 1)
    tx.unqueue(i, i + SEQ, WRITE_WAIT, LINE, false)
    return writer !== 0 ? OWNER_DIED : ACQUIRED
  })
}

// A waiter that gives up (timed out, aborted) leaves the line.
const leaveAs = (kind) => (ta) => {
  if ((Atomics.load(ta, SEQ) & LINED) === 0) return
  const i = at(ta)
  holdsOf(ta).run((tx) => tx.unqueue(i, i + SEQ, kind, LINE, true, READ_WAIT))
}
const leaveRead = leaveAs(READ_WAIT)
const leaveWrite = leaveAs(WRITE_WAIT)

function readUnlock (ta, what) {
  const i = at(ta)
  holdsOf(ta).run((tx) => {
    if (tx.held(i, KIND) === 0) throw new LockOwnershipError(`${what}: this thread holds no read lock of it`)
    tx.add(i, KIND, -1)
    tx.put(i + READERS, Math.max(0, Atomics.load(tx.user, i + READERS) - 1))
    letGo(tx, i)
  })
}

function describe (tx, s) {
  const writer = s >>> 1
  if (writer === 0) return 'not write-locked'
  if (writer === tx.me) return 'held by this thread'
  return binding.regionOwnerAlive(tx.user, writer) ? 'held by another thread (of this process or another)' : 'held by a thread that ended'
}

function writeUnlock (ta, what) {
  const i = at(ta)
  holdsOf(ta).run((tx) => {
    const s = Atomics.load(tx.user, i + STATE)
    if (s >>> 1 !== tx.me) throw new LockOwnershipError(`${what}: the write lock is ${describe(tx, s)}`)
    tx.put(i + STATE, 0)
    letGo(tx, i)
  })
}

function downgrade (ta, what) {
  const i = at(ta)
  holdsOf(ta).run((tx) => {
    const s = Atomics.load(tx.user, i + STATE)
    if (s >>> 1 !== tx.me) throw new LockOwnershipError(`${what}: the write lock is ${describe(tx, s)}`)
    tx.put(i + STATE, 0)
    tx.put(i + READERS, Atomics.load(tx.user, i + READERS) + 1)
    tx.add(i, KIND, 1)
    letGo(tx, i)
  })
}

// Blocks: ACQUIRED or OWNER_DIED; LockTimeoutError, DeadlockError.
function block (ta, write, timeout, what) {
  const deadline = now() + timeout
  const table = holdsOf(ta)
  try {
    for (;;) {
      const ends = regionEnds(table.w)
      const r = write ? writeOnce(ta, true, timeout !== 0) : readOnce(ta, true, timeout !== 0)
      if (r === MINE) {
        throw new DeadlockError(write
          ? `${what}: this thread holds the lock (to write or to read); blocking would never end`
          : `${what}: this thread holds the write lock, or waits for it; blocking would never end`)
      }
      if (r !== BUSY) return r
      const remaining = deadline - now()
      if (remaining <= 0) throw new LockTimeoutError(`${what}: not acquired within ${timeout} ms`)
      waitWatching(table.w, table.parked, table.parkedBell, ends, remaining)
    }
  } catch (e) {
    // A deadlock, a timeout, or a wait that could not be queued: out of the line.
    try {
      if (write) leaveWrite(ta)
      else leaveRead(ta)
    } catch {}
    throw e
  }
}

// tryRead / tryWrite: ACQUIRED, OWNER_DIED or false.
function attempt (ta, write) {
  const r = write ? writeOnce(ta, true, false) : readOnce(ta, true, false)
  return r === BUSY || r === MINE ? false : r
}

// The protocols for lib/acquire.js.
function protocolOf (write) {
  const once = write ? writeOnce : readOnce
  const kind = write ? WRITE_WAIT : READ_WAIT
  const release = write ? (ta) => writeUnlock(ta, 'RwLock.writeUnlock') : (ta) => readUnlock(ta, 'RwLock.readUnlock')
  return {
    index: SEQ,
    now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && once(ta, false, false) === ACQUIRED,
    park (ta, waited, remaining) {
      const table = holdsOf(ta)
      for (;;) {
        const ends = regionEnds(table.w)
        const r = once(ta, true, true)
        if (r !== BUSY && r !== MINE) return r
        // An async acquisition behind this thread's own hold (or its own
        // waiting writer) waits for it, in line: the release rings the line.
        if (r === MINE) {
          const i = at(ta)
          table.run((tx) => tx.queue(i, i + SEQ, kind, LINE))
        }
        const q = enqueueWatchingAsync(table.w, table.parked, table.parkedBell, ends, remaining, true)
        if (q === 'not-equal') continue
        return { token: q.token, promise: q.promise.then((o) => o === 'timed-out' ? 'ok' : o), at: [table.w, table.parked] }
      }
    },
    release,
    passOn () {}, // leave() rings the next
    leave: write ? leaveWrite : leaveRead,
    info: (status) => status === OWNER_DIED ? INFO_OWNER_DIED : INFO_OK,
    ok: null,
    missing: 'not acquired'
  }
}

const INFO_OK = Object.freeze({ ownerDied: false })
const INFO_OWNER_DIED = Object.freeze({ ownerDied: true })
const READ = protocolOf(false)
const WRITE = protocolOf(true)
READ.ok = INFO_OK
WRITE.ok = INFO_OK

function readReleaser (ta, status) {
  const release = held.releaser(READ.release, ta)
  release.ownerDied = status === OWNER_DIED
  return release
}

function writeReleaser (ta, status) {
  let state = 'write'
  const release = held.releaser(() => {
    if (state === 'write') WRITE.release(ta)
    state = 'released'
  }, ta)
  release.ownerDied = status === OWNER_DIED
  release.downgrade = () => {
    if (state !== 'write') throw new LockOwnershipError('RwLock: downgrade() of a write lock already released or downgraded')
    downgrade(ta, 'RwLock.downgrade')
    state = 'read'
    release()
    return readReleaser(ta, ACQUIRED)
  }
  return release
}

module.exports = {
  block,
  attempt,
  readUnlock,
  writeUnlock,
  downgrade,
  readAsync: (ta, opts, what) => acquiring.acquireAsync(READ, ta, opts, what).then((s) => readReleaser(ta, s)),
  writeAsync: (ta, opts, what) => acquiring.acquireAsync(WRITE, ta, opts, what).then((s) => writeReleaser(ta, s)),
  run: (ta, fn, options, write, what) => acquiring.exclusive(write ? WRITE : READ, ta, fn, options, what, true),
  isWriteLocked: (ta) => Atomics.load(ta, STATE) >>> 1 !== 0,
  readers (ta) {
    const i = at(ta)
    return holdsOf(ta).run((tx) => {
      tx.sweep(i)
      return Atomics.load(tx.user, i + READERS)
    })
  }
}
