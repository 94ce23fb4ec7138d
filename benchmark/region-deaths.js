'use strict'
// What the watcher of deaths (src/region/watch.rs) changes, side by side:
//   node benchmark/region-deaths.js [--rounds N] [--idle-ms N]
//   npm run bench:region-deaths
//
// Two figures, each measured with the watcher and with
// SHARED_FUTEX_NO_WATCHER=1 in every process (each measurement in fresh
// processes, this script run again for it; the variants in alternation, N
// rounds of each, default 10):
//
// - **death to next holder**: a child process holds a region AsyncLock; this
//   process's main thread waits for it (`lockAsync`) and a worker of a
//   second child waits blocking (`lock()`); the holder is killed with
//   SIGKILL, and the figure is the time from `kill()` to the first
//   acquisition (each waiter reports when it got the lock, the time read on
//   the same clock: performance.timeOrigin + now()).
// - **idle wake-ups**: a child whose main thread waits for a lock
//   (`lockAsync`, its event loop otherwise idle) held for --idle-ms
//   (default 3000) by this process: the context switches of the child's
//   threads over that time (from /proc; every wake-up of a sleeping thread
//   is one), per second. (A thread blocked in `lock()` wakes every 50 ms in
//   either case, as every blocking wait of the package does, to see whether
//   its thread is being terminated: docs/robustness.md.)
//
// Prints medians (and ranges); Linux only (pidfds, /proc).
const fs = require('fs')
const path = require('path')
const { spawn, execFileSync } = require('child_process')
const { options } = require('./lib/args')
const { summary } = require('./lib/stats')

const ROOT = path.join(__dirname, '..')

const VARIANTS = [
  { label: 'watcher', env: {} },
  { label: 'no watcher (50 ms slices)', env: { SHARED_FUTEX_NO_WATCHER: '1' } }
]

// --- children -------------------------------------------------------------------

const CHILD = `
const { SharedRegion, AsyncLock } = require(${JSON.stringify(ROOT)})
const { Worker } = require('worker_threads')
const [role, name] = process.argv.slice(1)
const region = SharedRegion.open(name)
const lock = new AsyncLock(region.buffer, 0)
const w = new Int32Array(region.buffer)
const now = () => performance.timeOrigin + performance.now()
if (role === 'holder') {
  lock.lock()
  Atomics.store(w, 4, 1)
  setInterval(() => {}, 1000)
} else if (role === 'waiting') {
  // Waits async in its main thread until given the lock, then leaves.
  Atomics.add(w, 5, 1)
  lock.lockAsync().then((release) => release())
} else {
  // A worker blocked in lock(): reports the time it got it at [16..17].
  const worker = new Worker(\`
    const { SharedRegion, AsyncLock } = require(${JSON.stringify(ROOT)})
    const { workerData } = require('worker_threads')
    const region = SharedRegion.open(workerData)
    const lock = new AsyncLock(region.buffer, 0)
    const f = new Float64Array(region.buffer, 64, 2)
    Atomics.add(new Int32Array(region.buffer), 5, 1)
    lock.lock()
    f[1] = performance.timeOrigin + performance.now()
    lock.unlock()
  \`, { eval: true, workerData: name })
  worker.on('exit', () => process.exit(0))
}
`

function child (role, name, env) {
  const c = spawn(process.execPath, ['-e', CHILD, role, name], { stdio: ['ignore', 'inherit', 'inherit'], env: Object.assign({}, process.env, env) })
  c.exited = new Promise((resolve) => c.on('exit', resolve))
  setTimeout(() => c.kill('SIGKILL'), 60000).unref()
  return c
}

const until = async (f) => { while (!f()) await new Promise((resolve) => setTimeout(resolve, 1)) }

// One round of "death to next holder" for a variant: ms.
async function deathRound (variant, n) {
  const { SharedRegion, AsyncLock } = require('..')
  const name = `deaths-${process.pid}-${n}`
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes: 4096 })
  const w = new Int32Array(region.buffer)
  const f = new Float64Array(region.buffer, 64, 2)
  const lock = new AsyncLock(region.buffer, 0)
  const holder = child('holder', name, variant.env)
  const waiter = child('worker', name, variant.env)
  try {
    await until(() => Atomics.load(w, 4) === 1 && Atomics.load(w, 5) === 1)
    let mine = 0
    const got = lock.lockAsync().then((release) => {
      mine = performance.timeOrigin + performance.now()
      release()
    })
    // Both asleep on the lock; killed at a random point of a 50 ms slice.
    await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * 50))
    const t = performance.timeOrigin + performance.now()
    holder.kill('SIGKILL')
    await got
    await waiter.exited
    return Math.min(mine, f[1]) - t
  } finally {
    holder.kill('SIGKILL')
    waiter.kill('SIGKILL')
    await Promise.all([holder.exited, waiter.exited])
    region.close()
    SharedRegion.unlink(name)
  }
}

// Context switches of process `pid`'s threads so far.
function switches (pid) {
  let n = 0
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const status = fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'latin1')
    for (const key of ['voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches']) {
      const m = status.match(new RegExp(`^${key}:\\s*(\\d+)`, 'm'))
      if (m) n += Number(m[1])
    }
  }
  return n
}

// One round of "idle wake-ups" for a variant: switches per second.
async function idleRound (variant, n, ms) {
  const { SharedRegion, AsyncLock } = require('..')
  const name = `idle-${process.pid}-${n}`
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes: 4096 })
  const w = new Int32Array(region.buffer)
  const lock = new AsyncLock(region.buffer, 0)
  lock.lock()
  const blocked = child('waiting', name, variant.env)
  try {
    await until(() => Atomics.load(w, 5) === 1)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const before = switches(blocked.pid)
    await new Promise((resolve) => setTimeout(resolve, ms))
    const after = switches(blocked.pid)
    return (after - before) / (ms / 1000)
  } finally {
    lock.unlock()
    await blocked.exited
    region.close()
    SharedRegion.unlink(name)
  }
}

// One measurement in this process (run by `main` with the variant's environment).
async function one (what, ms) {
  const v = { env: {} }
  const x = what === 'death' ? await deathRound(v, 0) : await idleRound(v, 0, ms)
  process.stdout.write(`${x}\n`)
}

function fresh (variant, what, ms) {
  const env = Object.assign({}, process.env, variant.env)
  if (!variant.env.SHARED_FUTEX_NO_WATCHER) delete env.SHARED_FUTEX_NO_WATCHER
  const out = execFileSync(process.execPath, [__filename, '--one', what, '--idle-ms', String(ms)], { env, timeout: ms + 60000 })
  return Number(String(out).trim().split('\n').pop())
}

async function main () {
  if (process.platform !== 'linux') throw new Error('Linux only (pidfds, /proc)')
  const args = options(process.argv.slice(2), { rounds: { int: true, min: 1, default: 10 }, 'idle-ms': { min: 100, default: 3000 }, one: { string: true, default: null } })
  if (args.one !== null) return one(args.one, args['idle-ms'])
  const deaths = VARIANTS.map(() => [])
  const idle = VARIANTS.map(() => [])
  for (let round = 0; round < args.rounds; round++) {
    for (const [k, v] of VARIANTS.entries()) {
      deaths[k].push(fresh(v, 'death', args['idle-ms']))
      idle[k].push(fresh(v, 'idle', args['idle-ms']))
    }
  }
  const fmt = (xs, unit) => {
    const { median, min, max } = summary(xs)
    return `${median.toFixed(1)} ${unit} (${min.toFixed(1)}–${max.toFixed(1)})`
  }
  console.log(`Node ${process.version}, ${require('os').cpus().length} cores, ${args.rounds} rounds, medians (range)`)
  for (const [k, v] of VARIANTS.entries()) {
    console.log(`${v.label.padEnd(28)} death to next holder ${fmt(deaths[k], 'ms').padEnd(26)} idle waiter ${fmt(idle[k], 'wake-ups/s')}`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
