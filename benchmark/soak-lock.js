'use strict'
// Soak: the main thread (async) and N workers (half blocking lock(), half
// lockAsync()) increment one non-atomic counter under one AsyncLock for a
// bounded time. Prints the contended throughput, the longest single wait and
// wait percentiles per participant, and checks the counter is exact.
//
//   node benchmark/soak-lock.js [--workers 4] [--seconds 5] [--mix mixed|sync|async]
//                               [--lock ours|blog] [--work 0]
//
// --work N spins N iterations inside the critical section (0: just the
// increment). --lock blog runs the same load on the V8 blog post's lock over
// native Atomics (benchmark/baselines/blog-lock.js) for comparison.
// Then (for this lock) --deaths rounds of owner-death recovery: a worker is
// terminated while holding the lock with the main thread asleep waiting for
// it; the time from calling terminate() to the main thread holding the lock
// (the thread's teardown hands it over).
// Exits 1 if the counter is wrong, a recovery is not reported as owner-died,
// or the run overstays its time budget.
const path = require('path')
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { performance } = require('perf_hooks')

const ROOT = path.join(__dirname, '..')

function makeLock (kind, buffer, byteOffset) {
  if (kind === 'blog') {
    const { BlogAsyncLock } = require('./baselines/blog-lock')
    const lock = new BlogAsyncLock(buffer, byteOffset)
    // The same surface as AsyncLock for this script: the loop of the post's
    // executeLocked, returning a release function instead of running a callback.
    lock.lockAsync = async function () {
      for (;;) {
        if (Atomics.compareExchange(this.i32a, 0, 0, 1) === 0) return () => this.unlock()
        const r = Atomics.waitAsync(this.i32a, 0, 1)
        if (r.async) await r.value
      }
    }
    return lock
  }
  const { AsyncLock } = require(ROOT)
  return new AsyncLock(buffer, byteOffset)
}

// Waits in µs, in log2 buckets: bucket k holds [2^(k-1), 2^k) µs.
function histogram () {
  return new Array(40).fill(0)
}
function record (h, ms) {
  const us = ms * 1000
  h[us < 1 ? 0 : Math.min(39, Math.floor(Math.log2(us)) + 1)]++
}
function percentile (h, p) {
  const total = h.reduce((a, b) => a + b, 0)
  let seen = 0
  for (let k = 0; k < h.length; k++) {
    seen += h[k]
    if (seen >= total * p) return k === 0 ? 0.001 : Math.pow(2, k) / 1000 // upper bound, ms
  }
  return NaN
}

function spin (n) {
  let x = 0
  for (let i = 0; i < n; i++) x += i
  return x
}

// One participant's loop. `ctl`: [0] go, [1] stop.
async function participant (lock, counter, ctl, mode, work) {
  // Native Atomics.waitAsync does not keep the thread alive (the blog lock's).
  const hold = setInterval(() => {}, 1 << 30)
  try {
    return await contend(lock, counter, ctl, mode, work)
  } finally {
    clearInterval(hold)
  }
}

async function contend (lock, counter, ctl, mode, work) {
  const h = histogram()
  let count = 0
  let maxWait = 0
  let ownerDied = 0
  while (Atomics.load(ctl, 0) === 0) await new Promise((resolve) => setImmediate(resolve))
  while (Atomics.load(ctl, 1) === 0) {
    const t0 = performance.now()
    let release = null
    if (mode === 'sync') {
      if (lock.lock() === 'owner-died') ownerDied++
    } else {
      release = await lock.lockAsync()
      if (release.ownerDied) ownerDied++
    }
    const waited = performance.now() - t0
    counter[0] = counter[0] + 1
    if (work) spin(work)
    if (release) release()
    else lock.unlock()
    count++
    if (waited > maxWait) maxWait = waited
    record(h, waited)
  }
  return { mode, count, maxWait, h, ownerDied }
}

function parseArgs (argv) {
  const o = { workers: 4, seconds: 5, mix: 'mixed', lock: 'ours', work: 0, deaths: 5 }
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '')
    if (!(k in o)) throw new Error(`unknown option ${argv[i]}`)
    o[k] = typeof o[k] === 'number' ? Number(argv[i + 1]) : argv[i + 1]
  }
  return o
}

async function main () {
  const o = parseArgs(process.argv.slice(2))
  const budget = setTimeout(() => {
    console.error(`soak-lock: still running ${o.seconds + 30} s after start; giving up`)
    process.exit(1)
  }, (o.seconds + 30) * 1000)
  const buffer = new SharedArrayBuffer(64)
  const lock = makeLock(o.lock, buffer, 0)
  const counter = new Int32Array(new SharedArrayBuffer(64))
  const ctl = new Int32Array(new SharedArrayBuffer(8))
  const modes = []
  for (let i = 0; i < o.workers; i++) {
    modes.push(o.mix === 'mixed' ? (i % 2 === 0 ? 'sync' : 'async') : o.mix)
  }
  const results = modes.map((mode) => new Promise((resolve, reject) => {
    const w = new Worker(__filename, { workerData: { lock: o.lock, buffer, counter: counter.buffer, ctl: ctl.buffer, mode, work: o.work } })
    w.once('message', resolve)
    w.once('error', reject)
  }))
  const mine = participant(lock, counter, ctl, 'async', o.work)
  Atomics.store(ctl, 0, 1)
  const t0 = performance.now()
  await new Promise((resolve) => setTimeout(resolve, o.seconds * 1000))
  Atomics.store(ctl, 1, 1)
  const all = [await mine].concat(await Promise.all(results))
  const elapsed = (performance.now() - t0) / 1000
  clearTimeout(budget)

  const total = all.reduce((a, r) => a + r.count, 0)
  const h = histogram()
  for (const r of all) r.h.forEach((n, k) => { h[k] += n })
  const longest = all.reduce((a, r) => (r.maxWait > a.maxWait ? r : a))
  const names = ['main (async)'].concat(modes.map((m, i) => `worker ${i + 1} (${m})`))
  console.log(`soak-lock: lock=${o.lock}, main (async) + ${o.workers} workers (${o.mix}), ${o.seconds} s, ` +
    `work in critical section=${o.work}, node ${process.version}, ${require('os').cpus().length} CPUs`)
  console.log(`  contended throughput: ${Math.round(total / elapsed)} acquisitions/s (${total} in ${elapsed.toFixed(2)} s)`)
  console.log(`  longest single wait:  ${longest.maxWait.toFixed(3)} ms (${names[all.indexOf(longest)]})`)
  console.log(`  wait p50 ≤ ${percentile(h, 0.5)} ms, p99 ≤ ${percentile(h, 0.99)} ms, p99.9 ≤ ${percentile(h, 0.999)} ms`)
  all.forEach((r, i) => {
    console.log(`  ${names[i].padEnd(18)} ${String(r.count).padStart(9)} acquisitions (${(100 * r.count / total).toFixed(1)}%), ` +
      `longest wait ${r.maxWait.toFixed(3)} ms, p99 ≤ ${percentile(r.h, 0.99)} ms`)
  })
  const ownerDied = all.reduce((a, r) => a + r.ownerDied, 0)
  const exact = counter[0] === total && ownerDied === 0
  console.log(`  counter: ${counter[0]} for ${total} acquisitions: ${exact ? 'exact' : 'WRONG'}` +
    (ownerDied ? `, ${ownerDied} unexpected owner-died` : ''))
  if (!exact) process.exitCode = 1
  if (o.lock === 'ours' && o.deaths > 0) await recovery(o.deaths)
}

async function recovery (rounds) {
  const { AsyncLock } = require(ROOT)
  const { queueLength } = require(path.join(ROOT, 'lib', 'futex')).internal
  const times = []
  for (let i = 0; i < rounds; i++) {
    const lock = new AsyncLock()
    const cells = new Int32Array(lock.buffer, lock.byteOffset, 2)
    const w = new Worker(__filename, { workerData: { role: 'die', buffer: lock.buffer } })
    await new Promise((resolve) => w.once('message', resolve))
    const p = lock.lockAsync()
    // Queued and asleep on the lock word: from now on only the owner's
    // death, pushed by the addon, can wake it.
    while (queueLength(cells, 0) === 0) await new Promise((resolve) => setImmediate(resolve))
    const t0 = performance.now()
    await w.terminate()
    const release = await p
    times.push(performance.now() - t0)
    if (!release.ownerDied) process.exitCode = 1
    release()
  }
  times.sort((a, b) => a - b)
  console.log(`  owner-death recovery (${rounds} rounds, terminate() called → lock held): ` +
    `median ${times[times.length >> 1].toFixed(1)} ms, max ${times[times.length - 1].toFixed(1)} ms` +
    (process.exitCode ? ' — NOT reported as owner-died' : ', reported as owner-died'))
}

if (isMainThread) {
  main().catch((e) => {
    console.error(e)
    process.exit(1)
  })
} else if (workerData.role === 'die') {
  // Holds the lock until terminated.
  const { AsyncLock } = require(ROOT)
  new AsyncLock(workerData.buffer, 0).lock()
  parentPort.postMessage('held')
  setInterval(() => {}, 1 << 30)
} else {
  const d = workerData
  const lock = makeLock(d.lock, d.buffer, 0)
  participant(lock, new Int32Array(d.counter), new Int32Array(d.ctl), d.mode, d.work)
    .then((r) => parentPort.postMessage(r))
}
