'use strict'
// The loop every party of scenario 10 runs: generation after generation of
// one barrier until the measured window has passed. All parties must run the
// same number of generations (a party that stopped early would leave the
// others waiting), so the first party to see the window end at the top of
// generation k sets `stop` (a shared Int32 cell, initially 2^31 − 1) to
// k + 1: nobody can have arrived at k + 1 yet, since this party has not
// arrived at k, and everyone reads `stop` before arriving at k + 1.
// Returns { count, elapsedMs }: generations completed since the window
// opened (`from`), and the time they took.

const { now } = require('./threads')

function step (stop, k, from, end, mark) {
  if (k >= Atomics.load(stop, 0)) return false
  const t = now()
  if (mark.k < 0 && t >= from) {
    mark.k = k
    mark.t = t
  }
  if (t >= end) {
    for (let s = Atomics.load(stop, 0); s > k + 1; s = Atomics.load(stop, 0)) {
      if (Atomics.compareExchange(stop, 0, s, k + 1) === s) break
    }
  }
  return true
}

function generationsSync (wait, stop, from, end) {
  const mark = { k: -1, t: 0 }
  let k = 0
  while (step(stop, k, from, end, mark)) {
    wait()
    k++
  }
  return { count: k - mark.k, elapsedMs: now() - mark.t }
}

async function generationsAsync (waitAsync, stop, from, end) {
  const mark = { k: -1, t: 0 }
  let k = 0
  while (step(stop, k, from, end, mark)) {
    await waitAsync()
    k++
  }
  return { count: k - mark.k, elapsedMs: now() - mark.t }
}

function stopCell () {
  const stop = new Int32Array(new SharedArrayBuffer(4))
  stop[0] = 0x7fffffff
  return stop
}

module.exports = { generationsSync, generationsAsync, stopCell }
