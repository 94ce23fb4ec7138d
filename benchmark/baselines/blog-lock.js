'use strict'
// The AsyncLock of V8's blog post "Atomics.wait, Atomics.notify,
// Atomics.waitAsync" (2020), written from the post's description over the
// native Atomics: the baseline of scenarios 5 and 6.
//
// Its design, kept as described:
// - two states, UNLOCKED (0) and LOCKED (1), in one Int32 of a SharedArrayBuffer;
// - lock(): compareExchange 0 → 1, else Atomics.wait while it reads LOCKED, retry;
// - unlock(): compareExchange 1 → 0 (throws if it was not locked), then
//   notify one waiter, every time, whether or not anyone waits;
// - executeLocked(fn): the same loop with Atomics.waitAsync, runs fn, unlocks.
// No fairness: a woken waiter competes with newcomers (it may starve).
//
// Deviations, both in the baseline's favour or neutral: executeLocked returns
// the promise of its loop (the post returns nothing) so callers can await it
// as they await shared-futex's, and it awaits only a real promise (the post
// also awaits the synchronous 'not-equal' string, one extra microtask).

const UNLOCKED = 0
const LOCKED = 1

class BlogAsyncLock {
  constructor (sab = new SharedArrayBuffer(4), byteOffset = 0) {
    this.sab = sab
    this.i32a = new Int32Array(sab, byteOffset, 1)
  }

  lock () {
    for (;;) {
      if (Atomics.compareExchange(this.i32a, 0, UNLOCKED, LOCKED) === UNLOCKED) return
      Atomics.wait(this.i32a, 0, LOCKED)
    }
  }

  unlock () {
    if (Atomics.compareExchange(this.i32a, 0, LOCKED, UNLOCKED) !== LOCKED) {
      throw new Error('Tried to unlock while not holding the mutex')
    }
    Atomics.notify(this.i32a, 0, 1)
  }

  async executeLocked (fn) {
    for (;;) {
      if (Atomics.compareExchange(this.i32a, 0, UNLOCKED, LOCKED) === UNLOCKED) {
        try {
          return fn()
        } finally {
          this.unlock()
        }
      }
      const result = Atomics.waitAsync(this.i32a, 0, LOCKED)
      if (result.async) await result.value
    }
  }
}

module.exports = { BlogAsyncLock }
