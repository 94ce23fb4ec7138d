'use strict'
// Semaphore over a shared region's memory: one counting semaphore for every
// thread of every process that maps the region (docs/region.md,
// "Primitives"). The same 8 bytes as a Semaphore of one process (lib/semaphore.js):
//
//   WORD   the permits free (0 … 2^31 − 1)
//   SEQ    seq·2 + W: moves on by 2 whenever permits come back or a waiter
//          leaves (acquirers sleep on it); W: waiters are in line
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
// The line: an acquirer that finds too few permits (or others in line
// before it) writes itself in the table as a waiter, with the time it came
// (Date.now(), the machine's clock), and sets W. Permits go to the waiter
// that came first: a later acquirer, or a newcomer, passes it only while it
// has waited less than BARGE_MS (AsyncLock's and the Semaphore of one
// process's rule: a woken waiter is not made to wait for a thread that
// just arrived, and nobody waits long behind newcomers). A large request at
// the head is not passed by smaller ones behind it once its 1 ms is up. A
// waiter that leaves (timed out, aborted) takes itself out of the line; one
// whose thread ended or whose process died is taken out by the next look.
// W is cleared when the last waiter leaves the line; without it a take is
// one transaction that looks at no other entry.
//
// Acquirers sleep on SEQ in slices of SLICE ms (a release's wake-up comes
// after its transaction, and a process killed between the two must not
// leave anyone asleep); every release wakes every waiter, and each looks
// whether it is first.
const futex = require('./futex')
const { enqueueAsync } = futex.internal
const { holdsOf, register } = require('./region-holds')
const { SLICE } = require('./driver')
const { now } = require('./options')
const { ACQUIRED, LockTimeoutError } = require('./errors')

const SEQ = 1
const W = 1
const KIND = 1 // a hold of permits (lib/region-holds.js)
const WAITING = 3 // a place in the line
const MAX = 0x7fffffff
const BARGE_MS = 1

// WORD's index in the whole buffer of the region.
const wordOf = (ta) => ta.byteOffset >> 2

// SEQ moved on (W kept): the waiters look again.
function moveOn (tx, at) {
  tx.put(at + 1, (Atomics.load(tx.user, at + 1) + 2) | 0)
  tx.wake(at + 1)
}

// What a dead thread held goes back to the free permits; a dead waiter's
// place in line is freed (the entry is, by the table).
register(KIND, (tx, user, at, n) => {
  tx.put(at, Math.min(MAX, Atomics.load(user, at) + n))
  tx.put(at + 1, (Atomics.load(user, at + 1) + 2) | 0)
  return at + 1
})
register(WAITING, (tx, user, at) => {
  tx.put(at + 1, (Atomics.load(user, at + 1) + 2) | 0)
  return at + 1
})

// Under the transaction: whether this thread may take permits now, as far
// as the line goes: nobody in line came before it and has waited BARGE_MS.
// (Times are Date.now()'s low 32 bits, compared as such: right for waits
// shorter than 24 days.)
function mayGo (tx, at) {
  const seq = Atomics.load(tx.user, at + 1)
  if ((seq & W) === 0) return true
  const now = Date.now() | 0
  const e = tx.mine(at, WAITING)
  const since = e === -1 ? now : tx.auxOf(e)
  const others = tx.others(at, WAITING)
  // Nobody in line any more (the last ones died): W goes.
  if (others.length === 0 && e === -1) tx.put(at + 1, seq & ~W)
  for (const came of others) {
    if (((since - came) | 0) > 0 && ((now - came) | 0) >= BARGE_MS) return false
  }
  return true
}

// Takes this thread out of the line (if it is in it); W goes when nobody
// is left in it.
function outOfLine (tx, at) {
  if (tx.add(at, WAITING, -1) !== -1 || (Atomics.load(tx.user, at + 1) & W) === 0) return
  if (tx.others(at, WAITING).length === 0) tx.put(at + 1, Atomics.load(tx.user, at + 1) & ~W)
  moveOn(tx, at) // the next in line may go now
}

// Takes `n` permits if they are free and this thread's turn (after giving
// back what dead holders had, if they are not). `queue`: one that cannot
// takes a place in line (a waiter; not tryAcquire or the first look).
function take (ta, n, queue) {
  const at = wordOf(ta)
  return holdsOf(ta).run((tx) => {
    let v = Atomics.load(tx.user, at)
    if (v < n && tx.sweep(at) > 0) v = Atomics.load(tx.user, at)
    if (v >= n && mayGo(tx, at)) {
      tx.put(at, v - n)
      tx.add(at, KIND, n)
      if (queue && tx.mine(at, WAITING) !== -1) outOfLine(tx, at)
      return true
    }
    if (queue && tx.mine(at, WAITING) === -1) {
      tx.add(at, WAITING, 1, Date.now() | 0)
      const seq = Atomics.load(tx.user, at + 1)
      if ((seq & W) === 0) tx.put(at + 1, seq | W)
    }
    return false
  })
}

// A waiter that gives up (timed out, aborted) leaves the line.
function leave (ta) {
  const at = wordOf(ta)
  const h = holdsOf(ta)
  if ((Atomics.load(ta, SEQ) & W) === 0) return
  h.run((tx) => {
    if (tx.mine(at, WAITING) !== -1) outOfLine(tx, at)
  })
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
    moveOn(tx, at)
  })
}

const missing = (n) => n === 1 ? 'no permit' : `no ${n} permits`

// Blocks until `n` permits are taken; LockTimeoutError after `timeout` ms.
function acquire (ta, n, timeout, what) {
  const deadline = now() + timeout
  for (;;) {
    const seen = Atomics.load(ta, SEQ)
    if (take(ta, n, timeout !== 0)) return
    const remaining = deadline - now()
    if (remaining <= 0) {
      leave(ta)
      throw new LockTimeoutError(`${what}: ${missing(n)} within ${timeout} ms`)
    }
    futex.wait(ta, SEQ, seen, remaining > SLICE ? SLICE : remaining)
  }
}

// The protocol for lib/acquire.js, for acquisitions of n permits: every
// wake-up ('ok', or a slice that ran out) is a look again.
function protocol (n) {
  return {
    index: SEQ,
    now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && take(ta, n, false),
    park (ta, waited, remaining) {
      for (;;) {
        const seen = Atomics.load(ta, SEQ)
        if (take(ta, n, true)) return ACQUIRED
        const q = enqueueAsync(ta, SEQ, seen, remaining > SLICE ? SLICE : remaining, true)
        if (q === 'not-equal') continue
        return { token: q.token, promise: q.promise.then((o) => o === 'timed-out' ? 'ok' : o) }
      }
    },
    release: (ta) => give(ta, n, 'Semaphore.release'),
    passOn () {}, // every acquirer was woken
    leave,
    info: () => undefined,
    ok: undefined,
    missing: missing(n)
  }
}

module.exports = { acquire, take: (ta, n) => take(ta, n, false), give, protocol }
