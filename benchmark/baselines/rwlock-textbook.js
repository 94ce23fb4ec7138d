'use strict'
// A textbook reader-writer lock over the native Atomics.wait / notify /
// waitAsync: the baseline of scenario 9, as one would write it from an
// operating-systems course.
//
// One Int32 of a SharedArrayBuffer:
//   n ≥ 0   n readers inside (0: free)
//   -1      a writer inside
// read():   compareExchange n → n + 1 while n ≥ 0, else Atomics.wait while it is -1
// write():  compareExchange 0 → -1, else Atomics.wait while it holds the value seen
// unlocks:  the last reader out (1 → 0) and a leaving writer (-1 → 0) notify
//           everyone, every time; woken threads compete again.
// The async forms loop with Atomics.waitAsync. Readers' preference: a
// stream of overlapping readers starves writers (no fairness at all), and
// a reader or writer that dies holding it blocks the others forever.

const FREE = 0
const WRITER = -1

class TextbookRwLock {
  constructor (sab = new SharedArrayBuffer(4), byteOffset = 0) {
    this.i32a = new Int32Array(sab, byteOffset, 1)
  }

  read () {
    const a = this.i32a
    for (;;) {
      const n = Atomics.load(a, 0)
      if (n >= 0) {
        if (Atomics.compareExchange(a, 0, n, n + 1) === n) return
      } else {
        Atomics.wait(a, 0, WRITER)
      }
    }
  }

  readUnlock () {
    if (Atomics.sub(this.i32a, 0, 1) === 1) Atomics.notify(this.i32a, 0)
  }

  write () {
    const a = this.i32a
    for (;;) {
      const n = Atomics.compareExchange(a, 0, FREE, WRITER)
      if (n === FREE) return
      Atomics.wait(a, 0, n)
    }
  }

  writeUnlock () {
    Atomics.store(this.i32a, 0, FREE)
    Atomics.notify(this.i32a, 0)
  }

  async runRead (fn) {
    const a = this.i32a
    for (;;) {
      const n = Atomics.load(a, 0)
      if (n >= 0) {
        if (Atomics.compareExchange(a, 0, n, n + 1) === n) break
      } else {
        const r = Atomics.waitAsync(a, 0, WRITER)
        if (r.async) await r.value
      }
    }
    try {
      return fn()
    } finally {
      this.readUnlock()
    }
  }

  async runWrite (fn) {
    const a = this.i32a
    for (;;) {
      const n = Atomics.compareExchange(a, 0, FREE, WRITER)
      if (n === FREE) break
      const r = Atomics.waitAsync(a, 0, n)
      if (r.async) await r.value
    }
    try {
      return fn()
    } finally {
      this.writeUnlock()
    }
  }
}

module.exports = { TextbookRwLock }
