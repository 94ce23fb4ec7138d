'use strict'
// A barrier over native Atomics.wait / Atomics.notify, for workers only (the
// main thread must not block): the baseline of scenario 10's workers-only
// case. The textbook design, without timeouts or breaking:
//   cell 0  parties arrived in the current generation
//   cell 1  the generation; waiters sleep on it
// The last to arrive zeroes the count, bumps the generation, notifies all.

class AtomicsBarrier {
  constructor (parties, sab, byteOffset) {
    this.parties = parties
    this.cells = new Int32Array(sab, byteOffset, 2)
  }

  wait () {
    const c = this.cells
    const g = Atomics.load(c, 1)
    if (Atomics.add(c, 0, 1) + 1 === this.parties) {
      Atomics.store(c, 0, 0)
      Atomics.add(c, 1, 1)
      Atomics.notify(c, 1)
      return true
    }
    while (Atomics.load(c, 1) === g) Atomics.wait(c, 1, g)
    return false
  }
}

module.exports = { AtomicsBarrier }
