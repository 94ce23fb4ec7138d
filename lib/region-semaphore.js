'use strict'
// Semaphore over a shared region's memory: one counting semaphore for every
// thread of every process that maps the region (docs/region.md,
// "Primitives"). The same 8 bytes as a Semaphore of one process (lib/semaphore.js):
//
//   WORD   the permits free (0 … 2^31 − 1)
//   SEQ    seq·2 + LINED: moves on by 2 whenever permits come back or a
//          waiter leaves; LINED: waiters are in line
//
// Every change is a transaction of the region's holds table
// (lib/region-holds.js), which records what each thread took: a release
// takes its permits off the releasing thread's own record first, then off
// other threads' (a permit may be released by a thread that did not take
// it); the permits of a thread that ends, or whose process dies, without
// giving them back are given back by the next acquirer that finds too few
// free. So no permit is lost with a killed process, and none is counted
// twice.
//
// The line (lib/region-holds.js, "lines of waiters"): an acquirer that
// finds too few permits (or others in line before it) takes a place in the
// table with the time it came (the machine's clock) and sets LINED. Permits
// go to the waiter that came first: a later acquirer, or a newcomer, passes
// it only while it has waited less than 1 ms (AsyncLock's and the Semaphore
// of one process's rule). So a large request at the head is not passed by
// smaller ones behind it once its 1 ms is up. A waiter that leaves (timed
// out, aborted) takes itself out of the line; one whose thread ended or
// whose process died is taken out by the next look. LINED goes when the
// line is found empty; without it a take looks at no other entry.
//
// Acquirers sleep on their place's bell in the table, watching (a
// release's wake-up comes after its transaction, and a process killed
// between the two must not leave anyone asleep: the table region's count of
// ends, read before the look, and the end of a thread or process wakes
// every watching sleeper, src/region.rs; each sleep also lasts a slice at
// most). A release rings the first live place of the line, not every
// waiter; a waiter that takes permits and leaves some rings the next.
const futex = require('./futex')
const { waitWatching, enqueueWatchingAsync, regionEnds } = futex.internal
const { holdsOf, register, LINED } = require('./region-holds')
const { now } = require('./options')
const { ACQUIRED, LockTimeoutError } = require('./errors')

const SEQ = 1
const KIND = 1 // a hold of permits (lib/region-holds.js)
const WAITING = 3 // a place in the line
const MAX = 0x7fffffff

// WORD's index in the whole buffer of the region.
const wordOf = (ta) => ta.byteOffset >> 2

const LINE = [WAITING]

// What a dead thread held goes back to the free permits; a dead waiter's
// place in line is freed (the entry is, by the table). Either way the line
// is rung.
register(KIND, (tx, user, at, n) => {
  tx.put(at, Math.min(MAX, Atomics.load(user, at) + n))
  tx.moveOn(at, at + 1, LINE)
})
register(WAITING, (tx, user, at) => {
  tx.moveOn(at, at + 1, LINE)
})

// Takes `n` permits if they are free and this thread's turn (after giving
// back what dead holders had, if they are not). `queue`: one that cannot
// takes a place in line (a waiter; not tryAcquire or the first look), and
// is to sleep on its bell (the table's `parked`).
function take (ta, n, queue) {
  const at = wordOf(ta)
  return holdsOf(ta).run((tx) => {
    let v = Atomics.load(tx.user, at)
    if (v < n && tx.sweep(at) > 0) v = Atomics.load(tx.user, at)
    if (v >= n && tx.mayGo(at, at + 1, WAITING, LINE, LINE)) {
      tx.put(at, v - n)
      tx.add(at, KIND, n)
      tx.unqueue(at, at + 1, WAITING, LINE, v > n)
      return true
    }
    if (queue) tx.queue(at, at + 1, WAITING)
    return false
  })
}

// A waiter that gives up (timed out, aborted) leaves the line.
function leave (ta) {
  if ((Atomics.load(ta, SEQ) & LINED) === 0) return
  const at = wordOf(ta)
  holdsOf(ta).run((tx) => tx.unqueue(at, at + 1, WAITING, LINE, true))
}

function give (ta, n, what) {
  const at = wordOf(ta)
  holdsOf(ta).run((tx) => {
    const v = Atomics.load(tx.user, at)
    if (v > MAX - n) throw new RangeError(`${what}: ${v} + ${n} permits would exceed ${MAX}`)
    tx.put(at, v + n)
    const mine = Math.min(tx.held(at, KIND), n)
    if (mine > 0) tx.add(at, KIND, -mine)
    if (n > mine) tx.payOthers(at, KIND, n - mine)
    tx.moveOn(at, at + 1, LINE)
  })
}

const missing = (n) => n === 1 ? 'no permit' : `no ${n} permits`

// Blocks until `n` permits are taken; LockTimeoutError after `timeout` ms.
function acquire (ta, n, timeout, what) {
  const deadline = now() + timeout
  const table = holdsOf(ta)
  try {
    for (;;) {
      const ends = regionEnds(table.w)
      if (take(ta, n, timeout !== 0)) return
      const remaining = deadline - now()
      if (remaining <= 0) throw new LockTimeoutError(`${what}: ${missing(n)} within ${timeout} ms`)
      waitWatching(table.w, table.parked, table.parkedBell, ends, remaining)
    }
  } catch (e) {
    // Timed out, or a wait that could not be queued: out of the line.
    try {
      leave(ta)
    } catch {}
    throw e
  }
}

// The protocol for lib/acquire.js, for acquisitions of n permits: every
// wake-up ('ok', or a slice that ran out) is a look again.
function protocol (n) {
  return {
    index: SEQ,
    now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && take(ta, n, false),
    park (ta, waited, remaining) {
      const table = holdsOf(ta)
      for (;;) {
        const ends = regionEnds(table.w)
        if (take(ta, n, true)) return ACQUIRED
        const q = enqueueWatchingAsync(table.w, table.parked, table.parkedBell, ends, remaining, true)
        if (q === 'not-equal') continue
        return { token: q.token, promise: q.promise.then((o) => o === 'timed-out' ? 'ok' : o), at: [table.w, table.parked] }
      }
    },
    release: (ta) => give(ta, n, 'Semaphore.release'),
    passOn () {}, // leave() rings the next
    leave,
    info: () => undefined,
    ok: undefined,
    missing: missing(n)
  }
}

module.exports = { acquire, take: (ta, n) => take(ta, n, false), give, protocol }
