'use strict'
// What each thread of each process holds of the Semaphores and RwLocks in a
// shared region's memory, so that what a thread that ends or a process that
// dies held is given back (docs/region.md, "Primitives").
//
// The state of such an object (its words in the user's region) and the
// table of holds change together, in transactions under one mutex per
// region. The table lives in a region of its own beside the user's (the
// file `shared-futex-holds.<name>`), so that it takes none of the user's
// bytes:
//
//   words 0-1   the mutex: an AsyncLock in the table's region (lib/region-lock.js)
//   word 2      LOGGED: the undo records of the transaction in progress
//   word 3      IDENTITY: the user's region file's inode (low 31 bits): a
//               table left by an earlier region of the same name is emptied
//               (and a process that still maps a region unlinked since, and
//               never opened its table, is refused the new region's)
//   from 4      LOG_MAX undo records of 3 words: where (0 the user's region,
//               1 the table), index, the value before
//   then        ENTRIES holds of 6 words:
//                 OWNER   the holder's owner id in the user's region (0: free)
//                 OBJECT  the object: the byte offset of its first word + 1
//                 KIND    what is held (a number a primitive registered)
//                 COUNT   how much
//                 AUX     the primitive's (a waiter's arrival time)
//                 BELL    a waiter's place: the word its thread sleeps on,
//                         rung (incremented and woken) when its turn may
//                         have come
//
// A transaction logs every word it is about to change (the record first,
// then LOGGED, then the word), and empties the log (LOGGED = 0) when it is
// done. A thread killed in the middle leaves the mutex to the next locker
// with 'owner-died': it restores the logged words, newest first, so the
// transaction never happened. A transaction that throws is undone the same
// way. Nothing else writes these words, so the values logged are exact.
//
// Entries name threads by their owner ids in the user's region (a thread
// slot and its generation: binding.regionOwnerAlive says whether it lives,
// whichever way it ended). A waiter that finds an object busy first sweeps
// it: each entry of a dead owner is given back to its object by the
// primitive that registered the entry's kind, in the same transaction.
const fs = require('fs')
const path = require('path')
const binding = require('./native')
const futex = require('./futex')
const regionLock = require('./region-lock')
const { regionBuffers, regionError } = futex.internal
const { OWNER_DIED, SharedRegionError } = require('./errors')
const { version } = require('../package.json')

const BUILD = `shared-futex ${version}`
const LOGGED = 2
const IDENTITY = 3
const LOG_AT = 4
const LOG_MAX = 256
const ENTRIES_AT = LOG_AT + LOG_MAX * 3
const ENTRIES = 1024
const ENTRY_WORDS = 6
const BYTES = (ENTRIES_AT + ENTRIES * ENTRY_WORDS) * 4
const OWNER = 0
const OBJECT = 1
const KIND = 2
const COUNT = 3
const AUX = 4
const BELL = 5
const LINED = 1
const GRACE_MS = 1

// kind → giveBack(tx, user, word, count): gives `count` of what a dead
// thread held back to the object whose first word is user[word], in the
// transaction (and rings the object's line: `moveOn`).
const kinds = new Map()

// The table of each region buffer, per thread.
const tables = new WeakMap()

// The file of a region's holds table, beside it.
const holdsFileOf = (file) => path.join(path.dirname(file), path.basename(file).replace(/^shared-futex\./, 'shared-futex-holds.'))

class Holds {
  constructor (user, words, identity) {
    this.user = user
    this.w = words
    this.me = binding.regionOwner(user)
    this.tableMe = binding.regionOwner(words)
    // Lines whose first waiters are to be rung when the transaction is
    // done ([word, seqAt, kinds, together] each), and the bells rung.
    this.rings = []
    this.bells = []
    // The bell this thread's waiter is to sleep on (an index in `w`, -1:
    // none) and its value, read in the transaction that queued it.
    this.parked = -1
    this.parkedBell = 0
    // Where this thread's entries are (object → entry), checked on use: a
    // release by another thread can empty one.
    this.cache = new Map()
    this.hint = ENTRIES_AT
    if (Atomics.load(words, IDENTITY) !== identity) {
      // A new table, or one left by an earlier region of this name: its log
      // and its entries are of another region's memory.
      const status = regionLock.lock(words, this.tableMe, Infinity, 'SharedRegion')
      try {
        if (Atomics.load(words, IDENTITY) !== identity) {
          for (let i = LOGGED; i < ENTRIES_AT + ENTRIES * ENTRY_WORDS; i++) Atomics.store(words, i, 0)
          Atomics.store(words, IDENTITY, identity)
        } else if (status === OWNER_DIED) {
          this.undo()
        }
      } finally {
        regionLock.unlock(words, this.tableMe, 'SharedRegion')
      }
    }
  }

  // Runs fn(this) as a transaction (see the top of the file). Blocks for as
  // long as another thread holds the mutex (a few microseconds; a holder
  // killed meanwhile: one slice).
  run (fn) {
    const w = this.w
    if (regionLock.lock(w, this.tableMe, Infinity, 'SharedRegion') === OWNER_DIED) this.undo()
    let result
    try {
      result = fn(this)
      if (this.rings.length !== 0) this.ringFirsts()
      Atomics.store(w, LOGGED, 0)
    } catch (e) {
      this.undo()
      throw e
    } finally {
      regionLock.unlock(w, this.tableMe, 'SharedRegion')
      const bells = this.bells
      if (bells.length !== 0) {
        this.bells = []
        for (const i of bells) futex.notify(w, i)
      }
    }
    return result
  }

  undo () {
    const w = this.w
    for (let n = Atomics.load(w, LOGGED); n > 0; n--) {
      const r = LOG_AT + (n - 1) * 3
      const target = Atomics.load(w, r) === 0 ? this.user : w
      Atomics.store(target, Atomics.load(w, r + 1), Atomics.load(w, r + 2))
    }
    Atomics.store(w, LOGGED, 0)
    this.rings = []
    this.bells = []
  }

  // Changes a word, logged: `where` is 0 for user[i], 1 for the table's w[i].
  set (where, i, value) {
    const w = this.w
    const target = where === 0 ? this.user : w
    const n = Atomics.load(w, LOGGED)
    if (n === LOG_MAX) throw new SharedRegionError('ERR_REGION_FULL', 'a change of the holds table needed more than its log holds')
    const r = LOG_AT + n * 3
    Atomics.store(w, r, where)
    Atomics.store(w, r + 1, i)
    Atomics.store(w, r + 2, Atomics.load(target, i))
    Atomics.store(w, LOGGED, n + 1)
    Atomics.store(target, i, value)
  }

  // user[i] = value, logged.
  put (i, value) { this.set(0, i, value) }


  // This thread's entry of `kind` for the object at user[word] that this
  // table made (the last one), or -1. A thread whose holds were also
  // recorded through another buffer over the region has other entries too:
  // they count the same (a release pays this thread's entries first,
  // `payOthers`).
  mine (word, kind) {
    const w = this.w
    const object = word * 4 + 1
    const e = this.cache.get(object * 8 + kind)
    return e !== undefined && Atomics.load(w, e + OWNER) === this.me && Atomics.load(w, e + OBJECT) === object &&
      Atomics.load(w, e + KIND) === kind
      ? e
      : -1
  }

  // AUX of entry `e`.
  auxOf (e) { return Atomics.load(this.w, e + AUX) }

  // How much of `kind` this thread holds of the object at user[word].
  held (word, kind) {
    const e = this.mine(word, kind)
    return e === -1 ? 0 : Atomics.load(this.w, e + COUNT)
  }

  // Adds `n` (may be negative) to this thread's hold of `kind` of the
  // object; a new entry gets `aux`. Returns the entry (-1: none left).
  add (word, kind, n, aux) {
    const w = this.w
    let e = this.mine(word, kind)
    if (e === -1) {
      if (n <= 0) return -1
      const key = (word * 4 + 1) * 8 + kind
      const last = this.cache.get(key)
      e = last !== undefined && Atomics.load(w, last + OWNER) === 0 ? last : this.free()
      this.cache.set(key, e)
      this.set(1, e + OBJECT, word * 4 + 1)
      this.set(1, e + KIND, kind)
      this.set(1, e + COUNT, n)
      this.set(1, e + AUX, aux === undefined ? 0 : aux)
      this.set(1, e + OWNER, this.me)
      return e
    }
    const count = Atomics.load(w, e + COUNT) + n
    this.set(1, e + COUNT, count)
    if (count > 0) return e
    this.set(1, e + OWNER, 0)
    return -1
  }

  // The AUX of every live entry of `kind` for the object at user[word] of
  // other threads (those of dead owners are given back on the way).
  others (word, kind) {
    const w = this.w
    const object = word * 4 + 1
    const found = []
    for (let e = ENTRIES_AT; e < ENTRIES_AT + ENTRIES * ENTRY_WORDS; e += ENTRY_WORDS) {
      const owner = Atomics.load(w, e + OWNER)
      if (owner === 0 || owner === this.me || Atomics.load(w, e + OBJECT) !== object || Atomics.load(w, e + KIND) !== kind) continue
      if (binding.regionOwnerAlive(this.user, owner)) found.push(Atomics.load(w, e + AUX))
      else if (Atomics.load(w, LOGGED) <= LOG_MAX - 8) this.giveBack(e)
    }
    return found
  }

  // --- lines of waiters (a primitive's waiting acquirers, by arrival) ---
  // A waiter's place is an entry of a waiting kind with its arrival time in
  // AUX (Date.now()'s low 32 bits, compared as such: right for waits shorter
  // than 24 days). user[seqAt] is the object's sequence word: bit 0 (LINED)
  // says whether anyone may be in line, the rest moves on by 2 when the
  // line or the object changes.
  //
  // A waiter sleeps on its place's BELL (watching the table region's count
  // of ends), with the value read in the transaction that queued it. A
  // change that may let a waiter go rings the first live place of the line
  // when its transaction is done (and, `together`, the places of that kind
  // right behind it: readers behind a reader), not every waiter: the first
  // that goes rings the next if there is more to take. A place whose thread
  // died is passed over; the end its death counts wakes every watching
  // sleeper, and the first look gives the place back.

  // Whether this thread may go now as far as the line goes: no other
  // thread's live place of `before` kinds came before this thread's own
  // place of `mine` (or now, if it has none) and has waited GRACE_MS (a
  // newcomer may pass a waiter only that long). Nobody left in line of
  // `all` kinds: LINED goes.
  mayGo (word, seqAt, mine, before, all) {
    const seq = Atomics.load(this.user, seqAt)
    if ((seq & LINED) === 0) return true
    const now = Date.now() | 0
    const e = this.mine(word, mine)
    const since = e === -1 ? now : Atomics.load(this.w, e + AUX)
    let go = true
    let lined = e !== -1
    for (const kind of all) {
      for (const came of this.others(word, kind)) {
        lined = true
        if (before.includes(kind) && ((since - came) | 0) > 0 && ((now - came) | 0) >= GRACE_MS) go = false
      }
    }
    if (!lined) this.put(seqAt, seq & ~LINED)
    return go
  }

  // This thread takes a place of `kind` in line (if it has none), and is to
  // sleep on its bell (`parked`, `parkedBell`). Places
  // in one object's line (of `all` kinds) get distinct arrival times, in
  // the order of these transactions (which the table's lock puts one after
  // the other): one in the same millisecond as, or before (a clock set
  // back), the latest in line comes 1 ms after it. Otherwise two waiters
  // of one millisecond would each find that the other did not come first,
  // and the later could go first.
  queue (word, seqAt, kind, all) {
    let e = this.mine(word, kind)
    if (e === -1) e = this.place(word, seqAt, kind, all)
    this.parked = e + BELL
    this.parkedBell = Atomics.load(this.w, e + BELL)
  }

  place (word, seqAt, kind, all) {
    let arrival = Date.now() | 0
    for (const k of all || [kind]) {
      for (const came of this.others(word, k)) {
        if (((came - arrival) | 0) >= 0) arrival = (came + 1) | 0
      }
    }
    const e = this.add(word, kind, 1, arrival)
    const seq = Atomics.load(this.user, seqAt)
    if ((seq & LINED) === 0) this.put(seqAt, seq | LINED)
    return e
  }

  // This thread leaves its place of `kind` (if it has one): it took what
  // it waited for (`next`: and there may be more for the next waiter), or
  // gave up (`next`: it may have been rung); the next are rung as `ring`
  // says. Its other waiters on the same object (async acquisitions of one
  // thread share its place) wake and take a place again.
  unqueue (word, seqAt, kind, all, next, together) {
    const e = this.mine(word, kind)
    if (e === -1) return
    this.add(word, kind, -1)
    this.put(seqAt, (Atomics.load(this.user, seqAt) + 2) | 0)
    this.bells.push(e + BELL)
    if (next) this.ring(word, seqAt, all, together)
  }

  // user[seqAt] moves on (LINED kept), and the first of the line (of `all`
  // kinds) is rung.
  moveOn (word, seqAt, all, together) {
    this.put(seqAt, (Atomics.load(this.user, seqAt) + 2) | 0)
    this.ring(word, seqAt, all, together)
  }

  // The first of the line of the object at user[word] (of `all` kinds) is
  // rung once the transaction is done (with those of kind `together`
  // right behind it, if it is of that kind).
  ring (word, seqAt, all, together) {
    const r = this.rings.find((r) => r[0] === word)
    if (r === undefined) this.rings.push([word, seqAt, all, together])
    else if (together !== undefined) r[3] = together
  }

  ringFirsts () {
    const w = this.w
    for (const [word, seqAt, all, together] of this.rings) {
      if ((Atomics.load(this.user, seqAt) & LINED) === 0) continue
      const object = word * 4 + 1
      const line = []
      for (let e = ENTRIES_AT; e < ENTRIES_AT + ENTRIES * ENTRY_WORDS; e += ENTRY_WORDS) {
        if (Atomics.load(w, e + OWNER) !== 0 && Atomics.load(w, e + OBJECT) === object && all.includes(Atomics.load(w, e + KIND))) line.push(e)
      }
      line.sort((a, b) => (Atomics.load(w, a + AUX) - Atomics.load(w, b + AUX)) | 0)
      // Asked of the first places only (a probe of another process's
      // liveness is a system call).
      let rung = 0
      for (const e of line) {
        const owner = Atomics.load(w, e + OWNER)
        if (owner !== this.me && !binding.regionOwnerAlive(this.user, owner)) continue
        const kind = Atomics.load(w, e + KIND)
        if (rung > 0 && kind !== together) break
        Atomics.add(w, e + BELL, 1)
        this.bells.push(e + BELL)
        rung++
        if (kind !== together) break
      }
    }
    this.rings = []
  }

  // Takes up to `n` of `kind` of the object off the holds of this thread's
  // other entries, then of other threads' (a release made by a thread that
  // did not acquire); returns how much it found.
  payOthers (word, kind, n) {
    const w = this.w
    const object = word * 4 + 1
    let paid = 0
    for (let pass = 0; pass < 2 && paid < n; pass++) {
      for (let e = ENTRIES_AT; e < ENTRIES_AT + ENTRIES * ENTRY_WORDS && paid < n; e += ENTRY_WORDS) {
        const owner = Atomics.load(w, e + OWNER)
        if (owner === 0 || (owner === this.me) !== (pass === 0) || Atomics.load(w, e + OBJECT) !== object ||
          Atomics.load(w, e + KIND) !== kind) continue
        const count = Atomics.load(w, e + COUNT)
        const take = Math.min(count, n - paid)
        paid += take
        this.set(1, e + COUNT, count - take)
        if (count === take) this.set(1, e + OWNER, 0)
      }
    }
    return paid
  }

  // A free entry; the entries of dead owners are given back first when
  // there is none.
  free () {
    const end = ENTRIES_AT + ENTRIES * ENTRY_WORDS
    for (let pass = 0; pass < 2; pass++) {
      // From where the last search stopped, round the table.
      for (let k = 0, e = this.hint; k < ENTRIES; k++, e = e + ENTRY_WORDS === end ? ENTRIES_AT : e + ENTRY_WORDS) {
        if (Atomics.load(this.w, e + OWNER) === 0) {
          this.hint = e
          return e
        }
      }
      if (pass === 0) this.sweep(-1)
    }
    throw new SharedRegionError('ERR_REGION_FULL', `every one of the ${ENTRIES} holds of the region's Semaphores and RwLocks belongs to a live thread`)
  }

  // Frees entry `e` of a dead owner, giving what it held back to its object.
  giveBack (e) {
    const w = this.w
    const giveBack = kinds.get(Atomics.load(w, e + KIND))
    const at = (Atomics.load(w, e + OBJECT) - 1) >> 2
    this.set(1, e + OWNER, 0)
    if (giveBack !== undefined) {
      giveBack(this, this.user, at, Atomics.load(w, e + COUNT))
    }
  }

  // Gives back what dead owners held of the object at user[word] (of every
  // object: -1). Returns how many entries it gave back.
  //
  // Each give-back is whole by itself (an entry freed, what it held back in
  // its object), so a sweep that is the first change of its transaction
  // commits the give-backs done so far whenever the log runs short, and
  // goes on: however many threads died holding something, one sweep gives
  // all of it back. A sweep after other changes stops there instead, and
  // leaves the rest to the next sweep.
  sweep (word) {
    const w = this.w
    const object = word * 4 + 1
    const first = Atomics.load(w, LOGGED) === 0
    let swept = 0
    for (let e = ENTRIES_AT; e < ENTRIES_AT + ENTRIES * ENTRY_WORDS; e += ENTRY_WORDS) {
      // Room in the log for this entry's give-back.
      if (Atomics.load(w, LOGGED) > LOG_MAX - 8) {
        if (!first) break
        Atomics.store(w, LOGGED, 0)
      }
      const owner = Atomics.load(w, e + OWNER)
      if (owner === 0 || owner === this.me || (word !== -1 && Atomics.load(w, e + OBJECT) !== object)) continue
      if (binding.regionOwnerAlive(this.user, owner)) continue
      this.giveBack(e)
      swept++
    }
    return swept
  }
}

// The holds table of the region of `ta`'s memory, for this thread.
function holdsOf (ta) {
  let table = tables.get(ta.buffer)
  if (table !== undefined) return table
  const file = binding.regionPath(ta)
  const identity = binding.regionInode(ta)
  let stat = null
  try {
    stat = fs.statSync(file)
  } catch {}
  // The table beside the file at that path is this region's only while the
  // path names the file mapped here.
  if (stat === null || ((stat.ino & 0x7fffffff) || 1) !== identity) {
    throw new SharedRegionError('ERR_REGION_NOT_FOUND', `${file} was unlinked (or made again) before this process first used a Semaphore or RwLock of it: open the region again`)
  }
  const mode = stat.mode & 0o777
  let opened
  try {
    opened = binding.regionOpen(holdsFileOf(file), BYTES, true, mode, BUILD, 0, 0)
  } catch (e) {
    throw regionError(e)
  }
  const buffer = opened[0]
  if (!(buffer instanceof SharedArrayBuffer)) regionBuffers.add(buffer)
  table = new Holds(new Int32Array(ta.buffer), new Int32Array(buffer), identity)
  tables.set(ta.buffer, table)
  return table
}

// Registers what gives back a hold of `kind` (see `kinds`).
function register (kind, giveBack) {
  kinds.set(kind, giveBack)
}

module.exports = { holdsOf, register, holdsFileOf, LINED, layout: { ENTRIES_AT, ENTRY_WORDS, OWNER, OBJECT, KIND, AUX, BELL } }
