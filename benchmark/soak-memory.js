'use strict'
// Soak: memory of a long-running process, ours and native side by side.
//
//   node benchmark/soak-memory.js [--seconds 20] [--only 1|2|3] [--impl ours,native,load,none]
//                                 [--semi-space MB]
//
// Scenario 1, worker churn: rounds of 16 workers that each queue 200
// waitAsync (keep-alive, half with a one-hour timeout), half of which then
// block in wait; the main thread notifies a few and terminates them all.
// Scenario 2, fresh buffers: one waitAsync stays pending for the whole run
// while jobs each wait on a fresh 1 MiB SharedArrayBuffer (waitAsync →
// notify → await).
//
// Two controls for scenario 1 (--impl load, --impl none): workers that only
// load the package, and workers that load nothing; what they grow is the
// cost of a worker, not of its waiters.
// Scenario 3, worker churn over a shared region (Linux, Node 16+; impls ours
// and load): rounds of 16 workers that each take a permit of a region
// Semaphore and a read lock of a region RwLock, lock and unlock a region
// AsyncLock, send on a region Channel and leave a waitAsync pending; the
// main thread takes the 16 messages and terminates them all, holding what
// they took; then takes the write lock (which gives the dead readers' locks
// back). At the end it checks that every permit comes back, no reader or
// waiter record is left, and prints the growth per 1,000 workers beside the
// control's.
//
// Each (scenario, implementation) runs in a child process with --expose-gc
// for `--seconds` seconds. The first half of the run is warm-up; after it
// and at the end, memory is read after GC. Printed: growth of RSS per 1,000
// workers (scenario 1) and of RSS and array buffers per 1,000 buffers
// (scenario 2), and for scenario 2 the peak RSS and array buffers seen
// during the run: dead buffers pile up until V8 collects them, and the
// allocator may keep the pages. A leak shows as growth that does not shrink
// with a longer run; allocator noise is a few KB either way.
//
// V8 collects a dead SharedArrayBuffer with the young generation, and in
// these runs (--trace-gc, Node 20) every collection was one started by JS
// allocation, none by the buffers' external memory: the peak is about
// (young generation size ÷ JS bytes allocated per job) × 1 MiB. The young
// generation grows with what survives, so its size depends on everything the
// process did before, loading modules included. Scenario 2 therefore runs
// both implementations with the same fixed size (--semi-space, in MB, given
// to V8 as --min-semi-space-size and --max-semi-space-size; 1 by default,
// V8's starting size): only then do their peaks compare.
const path = require('path')
const { spawnSync } = require('child_process')
const { Worker } = require('worker_threads')
const { regionsUnsupported } = require('../__test__/util')

const ROOT = path.join(__dirname, '..')

function parse (argv) {
  const args = { seconds: 20, only: null, impl: null, child: null, semiSpace: 1 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--seconds') args.seconds = Number(argv[++i])
    else if (a === '--only') args.only = argv[++i]
    else if (a === '--impl') args.impl = argv[++i]
    else if (a === '--child') args.child = argv[++i]
    else if (a === '--semi-space') args.semiSpace = Number(argv[++i])
    else throw new Error(`unknown argument ${a}`)
  }
  return args
}

function api (impl) {
  if (impl === 'native' || impl === 'none') {
    return { waitAsync: Atomics.waitAsync, notify: Atomics.notify, path: null }
  }
  const m = require(ROOT)
  return { waitAsync: m.waitAsync, notify: m.notify, path: ROOT }
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

async function memory () {
  for (let i = 0; i < 4; i++) {
    global.gc()
    await turn()
  }
  const m = process.memoryUsage()
  return { rss: m.rss, arrayBuffers: m.arrayBuffers }
}

function workerSource (impl) {
  if (impl === 'load' || impl === 'none') {
    return `
const { parentPort } = require('worker_threads')
${impl === 'load' ? `require(${JSON.stringify(ROOT)})` : ''}
parentPort.on('message', () => {})
parentPort.postMessage('queued')
`
  }
  const load = impl === 'native'
    ? 'const waitAsync = Atomics.waitAsync; const wait = Atomics.wait'
    : `const { waitAsync, wait, setKeepAlive } = require(${JSON.stringify(ROOT)}); setKeepAlive(true)`
  return `
const { workerData, parentPort } = require('worker_threads')
${load}
const ta = new Int32Array(workerData.buffer)
parentPort.on('message', () => {})
for (let i = 0; i < 200; i++) waitAsync(ta, i % 4, 0, i % 2 === 0 ? 3600e3 : undefined)
parentPort.postMessage('queued')
if (workerData.block) wait(ta, 4, 0)
`
}

async function churn (impl, seconds) {
  const { notify } = api(impl)
  const source = workerSource(impl)
  const ta = new Int32Array(new SharedArrayBuffer(4 * 5))
  let workers = 0
  let start = null
  const t0 = Date.now()
  const warmUntil = t0 + seconds * 500
  for (;;) {
    const ws = await Promise.all(Array.from({ length: 16 }, (_, k) => new Promise((resolve, reject) => {
      const w = new Worker(source, { eval: true, workerData: { buffer: ta.buffer, block: k % 2 === 1 } })
      w.once('message', () => resolve(w))
      w.once('error', reject)
    })))
    await Promise.all(ws.map((w, k) => {
      notify(ta, k % 4, 3)
      return w.terminate()
    }))
    workers += 16
    if (start === null && Date.now() >= warmUntil) start = { workers, mem: await memory() }
    if (Date.now() - t0 >= seconds * 1000) break
  }
  const end = await memory()
  const n = workers - start.workers
  return { workers: n, rssPerThousand: (end.rss - start.mem.rss) / n * 1000 }
}

function regionWorkerSource (impl, name) {
  if (impl === 'load') return workerSource('load')
  return `
const { workerData, parentPort } = require('worker_threads')
const { SharedRegion, Semaphore, RwLock, AsyncLock, Channel, waitAsync } = require(${JSON.stringify(ROOT)})
const b = SharedRegion.open(${JSON.stringify(name)}).buffer
const sem = new Semaphore(b, 0)
const rw = new RwLock(b, 64)
const lock = new AsyncLock(b, 32)
const ch = new Channel({ buffer: b, byteOffset: 4096, bytes: 8192, codec: 'v8' })
parentPort.on('message', () => {})
;(async () => {
  sem.acquire()
  rw.read()
  const release = await lock.lockAsync()
  release()
  ch.send(workerData.k)
  waitAsync(new Int32Array(b, 2048, 4), 0, 0, 3600e3)
  parentPort.postMessage('queued')
})()
`
}

async function regionChurn (impl, seconds) {
  const { SharedRegion, Semaphore, RwLock, Channel, ACQUIRED } = require(ROOT)
  const binding = require(path.join(ROOT, 'lib', 'native'))
  const name = `soak-memory-${process.pid}`
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes: 1 << 16 })
  const b = region.buffer
  const sem = new Semaphore(b, 0, 16)
  const rw = new RwLock(b, 64)
  const ch = new Channel({ buffer: b, byteOffset: 4096, bytes: 8192, codec: 'v8' })
  const source = regionWorkerSource(impl, name)
  const problems = []
  let workers = 0
  let start = null
  const t0 = Date.now()
  const warmUntil = t0 + seconds * 500
  try {
    for (;;) {
      const ws = await Promise.all(Array.from({ length: 16 }, (_, k) => new Promise((resolve, reject) => {
        const w = new Worker(source, { eval: true, workerData: { k } })
        w.once('message', () => resolve(w))
        w.once('error', reject)
      })))
      if (impl !== 'load') for (let k = 0; k < 16; k++) ch.recv({ timeout: 10000 })
      await Promise.all(ws.map((w) => w.terminate()))
      const status = rw.tryWrite()
      if (status !== ACQUIRED) problems.push(`round ${workers / 16}: tryWrite after the readers ended gave ${status}`)
      else rw.writeUnlock()
      workers += 16
      if (start === null && Date.now() >= warmUntil) start = { workers, mem: await memory() }
      if (Date.now() - t0 >= seconds * 1000 || problems.length > 0) break
    }
    const end = await memory()
    if (!sem.tryAcquire(16)) problems.push('not every permit came back')
    else sem.release(16)
    if (rw.readers !== 0) problems.push(`${rw.readers} read locks left`)
    const info = binding.regionInfo(new Int32Array(b), 512)
    if (info.recordsInUse !== 0) problems.push(`${info.recordsInUse} waiter records left`)
    const n = workers - start.workers
    return { workers: n, rssPerThousand: (end.rss - start.mem.rss) / n * 1000, problems }
  } finally {
    SharedRegion.unlink(name)
  }
}

async function buffers (impl, seconds) {
  const { waitAsync, notify } = api(impl)
  const hold = setInterval(() => {}, 1000)
  const signal = new Int32Array(new SharedArrayBuffer(4))
  const shutdown = waitAsync(signal, 0, 0)
  let jobs = 0
  let start = null
  // Highest RSS and array buffers seen between collections, read every 50
  // jobs: dead buffers wait there for V8 to collect them.
  const peak = { rss: 0, arrayBuffers: 0 }
  const t0 = Date.now()
  const warmUntil = t0 + seconds * 500
  for (;;) {
    const m = process.memoryUsage()
    peak.rss = Math.max(peak.rss, m.rss)
    peak.arrayBuffers = Math.max(peak.arrayBuffers, m.arrayBuffers)
    for (let k = 0; k < 50; k++) {
      const ta = new Int32Array(new SharedArrayBuffer(1 << 20))
      ta[1] = 1 // touch the pages, as a real job would
      const r = waitAsync(ta, 0, 0)
      notify(ta, 0, 1)
      await r.value
      jobs++
    }
    if (start === null && Date.now() >= warmUntil) start = { jobs, mem: await memory() }
    if (Date.now() - t0 >= seconds * 1000) break
  }
  const end = await memory()
  notify(signal, 0, 1)
  await shutdown.value
  clearInterval(hold)
  const n = jobs - start.jobs
  return {
    buffers: n,
    rssPerThousand: (end.rss - start.mem.rss) / n * 1000,
    arrayBuffersPerThousand: (end.arrayBuffers - start.mem.arrayBuffers) / n * 1000,
    peakRss: peak.rss,
    peakArrayBuffers: peak.arrayBuffers
  }
}

const MB = (bytes) => `${(bytes / 1e6).toFixed(2)} MB`

function main () {
  const args = parse(process.argv.slice(2))
  if (args.child) {
    const [scenario, impl] = args.child.split(':')
    const run = scenario === '1' ? churn : scenario === '3' ? regionChurn : buffers
    run(impl, args.seconds).then((r) => process.stdout.write(JSON.stringify(r) + '\n'))
    return
  }
  const impls = args.impl ? args.impl.split(',') : ['ours', 'native']
  const scenarios = args.only ? [args.only] : ['1', '2', '3']
  for (const scenario of scenarios) {
    // Scenario 3 has no native counterpart: its control is a worker that loads the package.
    const these = scenario !== '3' ? impls : args.impl ? impls.filter((i) => i === 'ours' || i === 'load') : ['ours', 'load']
    if (scenario === '3' && regionsUnsupported()) {
      console.log(`3 region churn    skipped: ${regionsUnsupported()}`)
      continue
    }
    for (const impl of these) {
      const flags = ['--expose-gc']
      if (scenario === '2') flags.push(`--min-semi-space-size=${args.semiSpace}`, `--max-semi-space-size=${args.semiSpace}`)
      const r = spawnSync(process.execPath, [...flags, __filename, '--child', `${scenario}:${impl}`, '--seconds', String(args.seconds)],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
      if (r.status !== 0) {
        console.log(`scenario ${scenario} ${impl}: failed (exit ${r.status})`)
        process.exitCode = 1
        continue
      }
      const out = JSON.parse(r.stdout.trim().split('\n').pop())
      if (scenario === '1') {
        console.log(`1 worker churn    ${impl.padEnd(6)} ${String(out.workers).padStart(6)} workers   RSS ${MB(out.rssPerThousand)} per 1,000 workers`)
      } else if (scenario === '3') {
        console.log(`3 region churn    ${impl.padEnd(6)} ${String(out.workers).padStart(6)} workers   RSS ${MB(out.rssPerThousand)} per 1,000 workers` +
          (out.problems.length ? `; FAILED: ${out.problems.join('; ')}` : '; every permit, read lock and record given back'))
        if (out.problems.length) process.exitCode = 1
      } else {
        console.log(`2 fresh buffers   ${impl.padEnd(6)} ${String(out.buffers).padStart(6)} buffers   RSS ${MB(out.rssPerThousand)}, array buffers ${MB(out.arrayBuffersPerThousand)} per 1,000 buffers; ` +
          `peak RSS ${MB(out.peakRss)}, peak array buffers ${MB(out.peakArrayBuffers)}`)
      }
    }
  }
}

main()
