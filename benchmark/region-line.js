'use strict'
// Contended Semaphore and RwLock over a shared region, beside the region's
// AsyncLock (futex-core's lock, which hands off to one queued waiter) as
// the baseline of the same run:
//   node benchmark/region-line.js [--rounds N] [--processes P] [--threads T] [--ops K]
//   npm run bench:region-line
//
// P processes (default 4), each with T workers (default 4), take and give
// back one object K times each (default 1000): a region AsyncLock, a
// Semaphore of one permit, a RwLock's write lock, and the RwLock with one
// write in eight (readers share). Every thread waits blocking. Figures per
// case, the cases in alternation, N rounds of each (default 5), each round
// in fresh processes:
// - acquisitions per second (all threads);
// - context switches per acquisition (every process's threads, from
//   process.resourceUsage(): every wake-up of a sleeper is one);
// - CPU time (user + system) per acquisition.
// A Semaphore or RwLock waiter sleeps on its place in the line
// (lib/region-holds.js) and only the first is rung; the context switches
// per acquisition show whether a release wakes one waiter or all of them.
const path = require('path')
const { fork } = require('child_process')
const { options } = require('./lib/args')
const { summary } = require('./lib/stats')

const ROOT = path.join(__dirname, '..')
const CASES = ['AsyncLock', 'Semaphore(1)', 'RwLock write', 'RwLock 1/8 writes']

// A worker's loop over the object of `kind` at byte 0; word 16 is a plain
// counter updated inside (its final value checks exclusion).
const LOOP = `
const { workerData: { root, name, kind, ops } } = require('worker_threads')
const { SharedRegion, AsyncLock, Semaphore, RwLock } = require(root)
const region = SharedRegion.open(name)
const w = new Int32Array(region.buffer)
if (kind === 0) {
  const lock = new AsyncLock(region.buffer, 0)
  for (let i = 0; i < ops; i++) { lock.lock(); w[16]++; lock.unlock() }
} else if (kind === 1) {
  const sem = new Semaphore(region.buffer, 0)
  for (let i = 0; i < ops; i++) { sem.acquire(); w[16]++; sem.release() }
} else {
  const rw = new RwLock(region.buffer, 0)
  for (let i = 0; i < ops; i++) {
    if (kind === 2 || i % 8 === 0) { rw.write(); w[16]++; rw.writeUnlock() } else { rw.read(); Atomics.load(w, 16); rw.readUnlock() }
  }
}
`

function child () {
  const { Worker } = require('worker_threads')
  const [, , , name, kind, threads, ops] = process.argv
  let left = Number(threads)
  for (let t = 0; t < Number(threads); t++) {
    new Worker(LOOP, { eval: true, workerData: { root: ROOT, name, kind: Number(kind), ops: Number(ops) } }).on('exit', () => {
      if (--left > 0) return
      const u = process.resourceUsage()
      process.send({ switches: u.voluntaryContextSwitches + u.involuntaryContextSwitches, cpu: (u.userCPUTime + u.systemCPUTime) / 1000 }, () => process.exit(0))
    })
  }
}

async function round (kind, processes, threads, ops, n) {
  const { SharedRegion, Semaphore } = require('..')
  const name = `line-${process.pid}-${n}`
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes: 4096 })
  const w = new Int32Array(region.buffer)
  if (kind === 1) new Semaphore(region.buffer, 0, 1) // eslint-disable-line no-new
  const t0 = process.hrtime.bigint()
  const reports = await Promise.all(Array.from({ length: processes }, () => new Promise((resolve, reject) => {
    let report = null
    fork(__filename, ['child', name, String(kind), String(threads), String(ops)])
      .on('message', (m) => { report = m })
      .on('exit', (code) => code === 0 && report !== null ? resolve(report) : reject(new Error(`a child exited with ${code}`)))
  })))
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  const total = processes * threads * ops
  const expected = kind === 3 ? processes * threads * Math.ceil(ops / 8) : total
  if (w[16] !== expected) throw new Error(`${CASES[kind]}: the counter is ${w[16]}, not ${expected}: exclusion broken`)
  region.close()
  SharedRegion.unlink(name)
  const switches = reports.reduce((s, r) => s + r.switches, 0)
  const cpu = reports.reduce((s, r) => s + r.cpu, 0)
  return { rate: total / ms * 1000, switches: switches / total, cpu: cpu / total * 1000 }
}

const fmt = (s, digits) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`

async function main () {
  const args = options(process.argv.slice(2), {
    rounds: { int: true, min: 1, default: 5 },
    processes: { int: true, min: 1, default: 4 },
    threads: { int: true, min: 1, default: 4 },
    ops: { int: true, min: 1, default: 1000 }
  })
  const results = CASES.map(() => ({ rate: [], switches: [], cpu: [] }))
  for (let r = 0; r < args.rounds; r++) {
    for (let k = 0; k < CASES.length; k++) {
      const x = await round(k, args.processes, args.threads, args.ops, r * CASES.length + k)
      for (const key of ['rate', 'switches', 'cpu']) results[k][key].push(x[key])
    }
  }
  console.log(`Node ${process.version}, ${require('os').cpus().length} cores; ${args.processes} processes × ${args.threads} workers × ${args.ops} acquisitions, blocking; ${args.rounds} rounds, medians (range)`)
  console.log('| | acquisitions/s | context switches per acquisition | CPU µs per acquisition |')
  console.log('| --- | ---: | ---: | ---: |')
  for (let k = 0; k < CASES.length; k++) {
    const x = results[k]
    console.log(`| ${CASES[k]} | ${fmt(summary(x.rate), 0)} | ${fmt(summary(x.switches), 2)} | ${fmt(summary(x.cpu), 0)} |`)
  }
}

if (process.argv[2] === 'child') child()
else main().catch((e) => { console.error(e); process.exit(1) })
