'use strict'
// Starting the workers of one measurement, lining them up, collecting their
// results, and making sure none outlives the measurement.
//
// The start line is a plain SharedArrayBuffer barrier over native Atomics
// (for every implementation under test, so it costs them all the same and
// is not part of any measured interval):
//   ctl[0]  workers that have arrived (ready)
//   ctl[1]  0 until the main thread says go, then 1
//   ctl[2..3] (as a Float64Array element 1) the absolute time (ms since the
//           epoch, `now()` below) at which measuring starts: every thread
//           warms up until then and counts over the same window after it

const { Worker } = require('worker_threads')
const { performance } = require('perf_hooks')

const ARRIVED = 0
const GO = 1

function control () {
  return new Int32Array(new SharedArrayBuffer(16))
}

// Milliseconds since the epoch with sub-millisecond resolution, comparable
// across threads (each thread's performance.now() has its own origin).
function now () {
  return performance.timeOrigin + performance.now()
}

// When measuring starts, as set by `go`.
function startTime (ctl) {
  return new Float64Array(ctl.buffer, 8, 1)[0]
}

// In a worker (or on the main thread): announce readiness, block until go.
function arrive (ctl) {
  Atomics.add(ctl, ARRIVED, 1)
  while (Atomics.load(ctl, GO) === 0) Atomics.wait(ctl, GO, 0)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// On the main thread, without blocking its event loop: wait for `n` arrivals.
async function arrivals (ctl, n, deadline) {
  while (Atomics.load(ctl, ARRIVED) < n) {
    if (Date.now() > deadline) throw new Error('workers did not get ready in time')
    await sleep(1)
  }
}

// Releases everyone at the barrier; measuring starts `warmMs` from now.
function go (ctl, warmMs = 0) {
  new Float64Array(ctl.buffer, 8, 1)[0] = now() + warmMs
  Atomics.store(ctl, GO, 1)
  Atomics.notify(ctl, GO)
}

// Starts one worker per spec ({ file, data, transfer? }), each with `ctl` in its
// workerData. Returns { workers, results, done }: `results[i]` is the first
// message worker i posts; `done` resolves once every worker has exited.
function start (specs, ctl) {
  const results = new Array(specs.length).fill(null)
  const workers = []
  const exits = []
  for (let i = 0; i < specs.length; i++) {
    const w = new Worker(specs[i].file, { workerData: { ...specs[i].data, ctl }, transferList: specs[i].transfer || [] })
    workers.push(w)
    w.once('message', (m) => { results[i] = m })
    exits.push(new Promise((resolve, reject) => {
      w.once('error', reject)
      w.once('exit', resolve)
    }))
  }
  return { workers, results, done: Promise.all(exits) }
}

// Runs `main(ctl)` (the main thread's part, may be async) with the workers of
// `specs` started, lined up at the barrier with it. Resolves with
// { main: main's value, results: each worker's first message } once every
// worker has exited; after `timeoutMs` all of them are terminated and it rejects.
async function withWorkers (specs, main, { timeoutMs = 60000 } = {}) {
  const ctl = control()
  const { workers, results, done } = start(specs, ctl)
  const deadline = Date.now() + timeoutMs
  let timer
  const watchdog = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`measurement timed out after ${timeoutMs} ms`)), timeoutMs)
  })
  try {
    const run = (async () => {
      await arrivals(ctl, specs.length, deadline)
      const value = await main(ctl)
      await done
      return { main: value, results }
    })()
    return await Promise.race([run, watchdog])
  } finally {
    clearTimeout(timer)
    // Normally they have all exited already; this is for timeouts and errors.
    await Promise.all(workers.map((w) => w.terminate()))
  }
}

module.exports = { control, arrive, go, arrivals, withWorkers, sleep, now, startTime }
