'use strict'
// node benchmark/web-locks-checks.js [--node 24] [--rounds N] [--ours]
//
// Three behaviours of Node's Web Locks (worker_threads.locks) that matter
// when choosing between them and shared-futex's AsyncLock, checked on the
// running Node (or, with --node, on another one, fetched as the benchmark
// does). Prints what it saw; exits 0 either way: these are observations of
// Node, not tests of this package. With --ours, the same checks of
// shared-futex/web-locks (on any Node), which must see no overlap, every
// dead holder's lock granted, and the worker waiting.
//
// 1. Exclusion under contention: the main thread and 3 workers each take an
//    exclusive lock 20,000 times, awaited one after another; inside, a
//    shared in-section count (Atomics) says whether another thread is
//    inside too, and a plain shared counter is incremented.
// 2. A holder that dies: a worker holds a lock forever, the main thread
//    asks for it, then terminates the worker. Is the waiting request
//    granted? (once per round)
// 3. Keeping a thread alive: a worker whose only pending work is a lock
//    request (the lock is held elsewhere). Does it wait or exit?

const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { spawn } = require('child_process')

const ITERATIONS = 20000
const WORKERS = 3

// Node's own manager, or (--ours) this package's.
const ours = isMainThread ? process.argv.includes('--ours') : workerData.ours
const managerOf = (own) => (own ? require('../web-locks').locks : require('worker_threads').locks)

async function contend (locks, name, shared) {
  let overlaps = 0
  const critical = () => {
    if (Atomics.add(shared, 1, 1) !== 0) overlaps++
    shared[0]++
    Atomics.sub(shared, 1, 1)
  }
  for (let i = 0; i < ITERATIONS; i++) await locks.request(name, critical)
  return overlaps
}

function worker (data) {
  return new Worker(__filename, { workerData: { ...data, ours } })
}

const exited = (w) => new Promise((resolve) => w.once('exit', resolve))
const message = (w) => new Promise((resolve) => w.once('message', resolve))

async function exclusion (locks, round) {
  const shared = new Int32Array(new SharedArrayBuffer(8))
  const name = `exclusion-${round}`
  const workers = []
  for (let i = 0; i < WORKERS; i++) workers.push(worker({ role: 'contend', name, shared }))
  const theirs = workers.map(message)
  const exits = workers.map(exited)
  const alive = setInterval(() => {}, 1 << 30) // see check 3
  const ours = await contend(locks, name, shared)
  clearInterval(alive)
  const overlaps = ours + (await Promise.all(theirs)).reduce((a, b) => a + b, 0)
  await Promise.all(exits)
  const expected = (WORKERS + 1) * ITERATIONS
  return { overlaps, lost: expected - shared[0], expected }
}

// Whether the waiting request was granted within 3 s.
async function holderDies (locks, round) {
  const name = `dies-${round}`
  const w = worker({ role: 'hold', name })
  await message(w)
  const alive = setInterval(() => {}, 1000)
  const granted = locks.request(name, () => true)
  await w.terminate()
  const outcome = await Promise.race([granted, new Promise((resolve) => setTimeout(resolve, 3000, false))])
  clearInterval(alive)
  return outcome
}

async function keepsAlive (locks) {
  let release
  const holding = locks.request('alive', () => new Promise((resolve) => { release = resolve }))
  const w = worker({ role: 'wait', name: 'alive' })
  let got = false
  w.on('message', () => { got = true })
  const code = await Promise.race([exited(w), new Promise((resolve) => setTimeout(resolve, 500, null))])
  release()
  await holding
  if (code === null) await exited(w)
  return code === null ? 'the worker waited for the lock' : `the worker exited (code ${code}) while its request was pending${got ? '' : ', never granted'}`
}

async function main () {
  const argv = process.argv.slice(2)
  const at = argv.indexOf('--node')
  if (at >= 0) {
    const node = await require('./lib/other-node').nodeBinary(argv[at + 1])
    if (node) {
      const rest = argv.slice(0, at).concat(argv.slice(at + 2))
      const child = spawn(node, [__filename, ...rest], { stdio: 'inherit' })
      child.on('exit', (code) => { process.exitCode = code == null ? 1 : code })
      return
    }
  }
  const r = argv.indexOf('--rounds')
  const rounds = r >= 0 ? Number(argv[r + 1]) : 5
  const locks = managerOf(ours)
  if (!locks) {
    console.log(`Node ${process.version} has no Web Locks (Node 24.5+): try --node 24`)
    return
  }
  console.log(`${ours ? 'shared-futex/web-locks' : 'Web Locks'} on Node ${process.version}, ${require('os').cpus().length} CPUs`)
  console.log(`1. exclusion: main + ${WORKERS} workers, ${ITERATIONS} exclusive requests each, ${rounds} rounds`)
  let bad = 0
  for (let i = 0; i < rounds; i++) {
    const x = await exclusion(locks, i)
    if (x.overlaps || x.lost) bad++
    console.log(`   round ${i + 1}: ${x.overlaps} times a second thread was inside; ${x.lost} of ${x.expected} increments lost`)
  }
  console.log(`   ${bad} of ${rounds} rounds broke exclusion`)
  let granted = 0
  for (let i = 0; i < rounds; i++) if (await holderDies(locks, i)) granted++
  const { held, pending } = await locks.query()
  console.log(`2. holder terminated while a request waits: granted within 3 s in ${granted} of ${rounds} tries; ` +
    `left behind: ${held.length} held, ${pending.length} pending`)
  console.log(`3. a worker whose only pending work is a lock request: ${await keepsAlive(locks)}`)
  process.exit(0) // requests left pending by check 2 keep nothing alive, but be explicit
}

if (isMainThread) {
  main().catch((e) => { console.error(e); process.exitCode = 1 })
} else {
  const locks = managerOf(ours)
  const { role, name, shared } = workerData
  if (role === 'contend') {
    const alive = setInterval(() => {}, 1 << 30) // a pending request alone does not keep a worker alive (check 3)
    contend(locks, name, shared).then((overlaps) => { clearInterval(alive); parentPort.postMessage(overlaps) })
  } else if (role === 'hold') {
    locks.request(name, () => { parentPort.postMessage('held'); return new Promise(() => {}) })
  } else if (role === 'wait') {
    locks.request(name, () => parentPort.postMessage('granted'))
  }
}
