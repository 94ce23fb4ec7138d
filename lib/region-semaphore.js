'use strict'
// Semaphore over a shared region's memory: one counting semaphore for every
// thread of every process that maps the region (docs/region.md,
// "Primitives"). The same 8 bytes as a Semaphore of one process (lib/semaphore.js):
//
//   WORD   the permits free (0 … 2^31 − 1)
//   SEQ    moves on whenever permits come back: acquirers sleep on it
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
// Acquirers that find too few permits sleep on SEQ, in slices of SLICE ms
// (a release's wake-up comes after its transaction, and a process killed
// between the two must not leave anyone asleep), and compete again when
// woken: every release wakes every acquirer. There is no queue: a large
// request can be passed by smaller ones (unlike the Semaphore of one
// process, which serves its queue in order).
const futex = require('./futex')
const { enqueueAsync } = futex.internal
const { holdsOf, register } = require('./region-holds')
const { SLICE } = require('./driver')
const { now } = require('./options')
const { ACQUIRED, LockTimeoutError } = require('./errors')

const SEQ = 1
const KIND = 1 // a hold of permits (lib/region-holds.js)
const MAX = 0x7fffffff

// WORD's index in the whole buffer of the region.
const wordOf = (ta) => ta.byteOffset >> 2

// What a dead thread held goes back to the free permits.
register(KIND, (tx, user, at, n) => {
  tx.put(at, Math.min(MAX, Atomics.load(user, at) + n))
  tx.put(at + 1, (Atomics.load(user, at + 1) + 1) | 0)
  return at + 1
})

// Takes `n` permits if they are free (after giving back what dead holders
// had, if they are not).
function take (ta, n) {
  const at = wordOf(ta)
  return holdsOf(ta).run((tx) => {
    let v = Atomics.load(tx.user, at)
    if (v < n && tx.sweep(at) > 0) v = Atomics.load(tx.user, at)
    if (v < n) return false
    tx.put(at, v - n)
    tx.add(at, KIND, n)
    return true
  })
}

function give (ta, n, what) {
  const at = wordOf(ta)
  holdsOf(ta).run((tx) => {
    const v = Atomics.load(tx.user, at)
    if (v > MAX - n) throw new RangeError(`${what}: ${v} + ${n} permits would exceed ${MAX}`)
    tx.put(at, v + n)
    const mine = Math.min(tx.held(at), n)
    if (mine > 0) tx.add(at, KIND, -mine)
    if (n > mine) tx.payOthers(at, n - mine)
    tx.put(at + 1, (Atomics.load(tx.user, at + 1) + 1) | 0)
    tx.wake(at + 1)
  })
}

const missing = (n) => n === 1 ? 'no permit' : `no ${n} permits`

// Blocks until `n` permits are taken; LockTimeoutError after `timeout` ms.
function acquire (ta, n, timeout, what) {
  const deadline = now() + timeout
  for (;;) {
    const seen = Atomics.load(ta, SEQ)
    if (take(ta, n)) return
    const remaining = deadline - now()
    if (remaining <= 0) throw new LockTimeoutError(`${what}: ${missing(n)} within ${timeout} ms`)
    futex.wait(ta, SEQ, seen, remaining > SLICE ? SLICE : remaining)
  }
}

// The protocol for lib/acquire.js, for acquisitions of n permits: every
// wake-up ('ok', or a slice that ran out) is a look again.
function protocol (n) {
  return {
    index: SEQ,
    now: (ta, opts) => !(opts.signal !== undefined && opts.signal.aborted) && take(ta, n),
    park (ta, waited, remaining) {
      for (;;) {
        const seen = Atomics.load(ta, SEQ)
        if (take(ta, n)) return ACQUIRED
        const q = enqueueAsync(ta, SEQ, seen, remaining > SLICE ? SLICE : remaining, true)
        if (q === 'not-equal') continue
        return { token: q.token, promise: q.promise.then((o) => o === 'timed-out' ? 'ok' : o) }
      }
    },
    release: (ta) => give(ta, n, 'Semaphore.release'),
    passOn () {}, // every acquirer was woken
    info: () => undefined,
    ok: undefined,
    missing: missing(n)
  }
}

module.exports = { acquire, take, give, protocol }
