'use strict'
// 'wake-ring': not a lock but the bound of one. The threads pass a token
// round a ring in a fixed order, each waiting for it with this package's
// waitAsync (an idle event loop woken by the thread before it, the same
// delivery a Web Locks grant to another thread takes) and passing it on
// with a store and a notify. A lock that is FIFO across threads, as Web
// Locks are, hands each grant of a contended name to another thread, and
// cannot grant faster than this ring passes its token: here each pass is
// one cross-thread wake and nothing else.
//
// Built, like the locks of lib/locks.js, from a buffer every thread shares
// (lockBuffer()); the first thread to build one (the main thread) holds
// the token first. A thread that stops calls leave(): the token skips it.
// Words (Int32 indices): THREADS the count of threads that joined; then
// per thread i, its token word (1: it holds the token) and its done flag.

const { ROOT } = require('./impl')

const THREADS = 16
const TOKEN = 17 // TOKEN + i
const DONE = 33 // DONE + i
const MAX = 16

class WakeRing {
  constructor (sab) {
    this.ta = new Int32Array(sab)
    this.me = Atomics.add(this.ta, THREADS, 1)
    if (this.me >= MAX) throw new Error(`wake-ring: at most ${MAX} threads`)
    if (this.me === 0) Atomics.store(this.ta, TOKEN, 1)
    this.futex = require(ROOT)
  }

  async executeLocked (fn) {
    const { ta, me, futex } = this
    while (Atomics.load(ta, TOKEN + me) !== 1) {
      const previous = futex.setKeepAlive(true)
      const r = futex.waitAsync(ta, TOKEN + me, 0)
      futex.setKeepAlive(previous)
      if (r.async) await r.value
    }
    fn()
    Atomics.store(ta, TOKEN + me, 0)
    this.pass(me)
  }

  // Hands the token to the next thread after `from` that has not left
  // (`from` itself last: alone, it keeps the token).
  pass (from) {
    const { ta } = this
    const n = Atomics.load(ta, THREADS)
    for (let k = 1; k <= n; k++) {
      const next = (from + k) % n
      if (Atomics.load(ta, DONE + next) !== 0) continue
      Atomics.store(ta, TOKEN + next, 1)
      this.futex.notify(ta, TOKEN + next, 1)
      // It may have left meanwhile (see leave): take the token back then.
      if (Atomics.load(ta, DONE + next) === 0 || Atomics.compareExchange(ta, TOKEN + next, 1, 0) !== 1) return
      from = next
      k = 0
    }
  }

  leave () {
    const { ta, me } = this
    Atomics.store(ta, DONE + me, 1)
    if (Atomics.compareExchange(ta, TOKEN + me, 1, 0) === 1) this.pass(me)
  }
}

module.exports = { WakeRing }
