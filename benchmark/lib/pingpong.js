'use strict'
// The ping-pong protocol of scenarios 1, 2, 4, 7 and 13, on one Int32Array cell:
//
//   cell   meaning
//   0      the ping side's turn (pong waits while it is 0)
//   1      the pong side's turn (ping waits while it is 1)
//   2      stop (written by ping when its time is up)
//
// One round trip = ping hands the turn over and gets it back: a store, a
// notify and (usually) a wait on each side. Both sides of a pair use the same
// implementation `f` ({ wait, notify, waitAsync }).

const { now } = require('./threads')
const { ownCpuMs } = require('./child')

const PING = 0
const PONG = 1
const STOP = 2

// Pings until the absolute time `to` (see threads.now), counting the round
// trips completed from `from` on; then stops the partner.
// Returns { count, elapsedMs, cpuMs } of the counted part; cpuMs is the CPU
// time the whole process (every thread) used meanwhile: spinning shows there.
//
// `timeout` bounds each wait: the main thread passes one, because nothing
// could interrupt it if its partner died (a worker is terminated instead).
// `cpuMs` reads the CPU clock the figure is taken from (default: this
// process's; scenario 13 adds its partner process's).
function ping (f, cells, at, from, to, timeout = Infinity, cpuMs = ownCpuMs) {
  const { notify } = f
  const wait = timeout === Infinity ? f.wait : (ta, i, v) => {
    if (f.wait(ta, i, v, timeout) === 'timed-out') throw new Error(`no answer within ${timeout} ms`)
  }
  let count = 0
  let t = now()
  while (t < from) {
    for (let i = 0; i < 64; i++) {
      Atomics.store(cells, at, PONG)
      notify(cells, at, 1)
      while (Atomics.load(cells, at) === PONG) wait(cells, at, PONG)
    }
    t = now()
  }
  const t0 = t
  const cpu0 = cpuMs()
  while (t < to) {
    for (let i = 0; i < 64; i++) {
      Atomics.store(cells, at, PONG)
      notify(cells, at, 1)
      while (Atomics.load(cells, at) === PONG) wait(cells, at, PONG)
    }
    count += 64
    t = now()
  }
  const used = cpuMs() - cpu0
  stop(f, cells, at)
  return { count, elapsedMs: t - t0, cpuMs: used }
}

// The same with the waiting side asynchronous (`await waitAsync`), as the
// main thread of scenario 2 does. `timeout` and `cpuMs` as for `ping`.
async function pingAsync (f, cells, at, from, to, timeout = Infinity, cpuMs = ownCpuMs) {
  const { notify, waitAsync } = f
  let count = 0
  let t = now()
  let t0 = 0
  let cpu0 = null
  for (;;) {
    for (let i = 0; i < 16; i++) {
      Atomics.store(cells, at, PONG)
      notify(cells, at, 1)
      while (Atomics.load(cells, at) === PONG) {
        const r = waitAsync(cells, at, PONG, timeout)
        if (r.async && (await r.value) === 'timed-out') throw new Error(`no answer within ${timeout} ms`)
      }
    }
    t = now()
    if (t0 === 0) {
      if (t >= from) {
        t0 = t
        cpu0 = cpuMs()
      }
    } else {
      count += 16
      if (t >= to) break
    }
  }
  const used = cpuMs() - cpu0
  stop(f, cells, at)
  return { count, elapsedMs: t - t0, cpuMs: used }
}

function stop (f, cells, at) {
  Atomics.store(cells, at, STOP)
  f.notify(cells, at, 1)
}

// Answers every ping until told to stop.
function pong (f, cells, at) {
  const { wait, notify } = f
  for (;;) {
    let v
    while ((v = Atomics.load(cells, at)) === PING) wait(cells, at, PING)
    if (v === STOP) return
    Atomics.store(cells, at, PING)
    notify(cells, at, 1)
  }
}

// Cells of different pairs sit 64 bytes apart: distinct addresses on
// distinct cache lines, so pairs share nothing but the implementation.
const STRIDE = 16

// The figures of a ping-pong scenario: round trips per second, and the CPU
// time all threads spent per round trip.
function roundTripMetrics (rateLabel) {
  return [
    { name: 'rate', label: rateLabel, unit: '/s', better: 'higher' },
    { name: 'cpuUs', label: 'CPU time per round trip (all threads)', unit: 'us', better: 'lower' }
  ]
}

// Those figures from a measurement of `count` round trips.
function roundTripFigures (count, elapsedMs, cpuMs) {
  return { rate: count / (elapsedMs / 1000), cpuUs: (cpuMs * 1000) / count }
}

module.exports = { ping, pingAsync, pong, STRIDE, roundTripMetrics, roundTripFigures }
