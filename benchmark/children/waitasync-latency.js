'use strict'
// Scenario 7, one measurement, in a process of the Node under test (14):
//   node waitasync-latency.js <impl> <warmMs> <ms>
// impl: 'polyfill' (shared-futex/polyfill's Atomics.waitAsync), 'helpers'
// (baselines/helper-pool.js), and as references on a Node that has
// Atomics.waitAsync: 'ours' (shared-futex's waitAsync) and 'native'.
// Prints one JSON line:
//   { latencyUs: median notify → continuation, p90Us, p99Us, samples, ownCpuMs }
//
// The main thread arms a waitAsync, tells a worker it is armed, and awaits;
// the worker sleeps 0.2 ms (so the waiter is really asleep, for either
// implementation), stamps the time and notifies. The latency of one sample
// is from just before the notify to the awaiting code running again, on
// CLOCK_MONOTONIC (process.hrtime), which all threads share.
// Written for Node 12+ (no newer syntax).

const path = require('path')
const { Worker } = require('worker_threads')
const { ROOT } = require('../lib/impl')
const { ownCpuMs } = require('../lib/child')

const [impl, warmArg, msArg] = process.argv.slice(2)
const warmMs = Number(warmArg)
const ms = Number(msArg)

// cells: [0] the waited-on value, [1] armed flag, [2] stop flag,
// bytes 16..23: the worker's notify timestamp (ns, as a float).
const sab = new SharedArrayBuffer(64)
const cells = new Int32Array(sab)
const stamp = new Float64Array(sab, 16, 1)

const nowNs = () => Number(process.hrtime.bigint())

const WORKER = `
const { workerData } = require('worker_threads')
const { sab, impl, polyfill, root } = workerData
// The notify that reaches the waiter: the polyfill installs its own as
// Atomics.notify; shared-futex's own waitAsync needs shared-futex's notify.
if (impl === 'polyfill') require(polyfill)
const notify = impl === 'ours' ? require(root).notify : Atomics.notify
const cells = new Int32Array(sab)
const stamp = new Float64Array(sab, 16, 1)
const nap = new Int32Array(new SharedArrayBuffer(4))
for (;;) {
  while (Atomics.load(cells, 1) === 0 && Atomics.load(cells, 2) === 0) Atomics.wait(cells, 1, 0)
  if (Atomics.load(cells, 2) !== 0) break
  Atomics.store(cells, 1, 0)
  Atomics.wait(nap, 0, 0, 0.2)
  stamp[0] = Number(process.hrtime.bigint())
  Atomics.store(cells, 0, 1)
  notify(cells, 0, 1)
}
`

function quantile (asc, q) {
  const pos = (asc.length - 1) * q
  const lo = Math.floor(pos)
  return asc[lo] + (asc[Math.ceil(pos)] - asc[lo]) * (pos - lo)
}

async function main () {
  let waitAsync
  let pool = null
  const polyfill = path.join(ROOT, 'polyfill.js')
  if (impl === 'polyfill') {
    require(polyfill)
    waitAsync = Atomics.waitAsync
  } else if (impl === 'ours') {
    waitAsync = require(ROOT).waitAsync
  } else if (impl === 'native') {
    waitAsync = Atomics.waitAsync
  } else if (impl === 'helpers') {
    const { HelperPool } = require('../baselines/helper-pool')
    pool = new HelperPool()
    waitAsync = (ta, i, v) => pool.waitAsync(ta, i, v)
  } else {
    throw new Error(`unknown implementation ${impl}`)
  }
  const worker = new Worker(WORKER, { eval: true, workerData: { sab, impl, polyfill, root: ROOT } })
  const exited = new Promise((resolve, reject) => { worker.once('exit', resolve); worker.once('error', reject) })
  const samples = []
  const start = nowNs()
  const from = start + warmMs * 1e6
  const to = from + ms * 1e6
  for (;;) {
    Atomics.store(cells, 0, 0)
    const r = waitAsync(cells, 0, 0)
    Atomics.store(cells, 1, 1)
    Atomics.notify(cells, 1, 1)
    if (!r.async) throw new Error(`waitAsync returned ${r.value} synchronously`)
    await r.value
    const t = nowNs()
    if (t >= to) break
    if (t >= from) samples.push((t - stamp[0]) / 1000)
  }
  Atomics.store(cells, 2, 1)
  Atomics.notify(cells, 1, 1)
  await exited
  if (pool) await pool.close()
  samples.sort((a, b) => a - b)
  process.stdout.write(JSON.stringify({
    latencyUs: quantile(samples, 0.5),
    p90Us: quantile(samples, 0.9),
    p99Us: quantile(samples, 0.99),
    samples: samples.length,
    ownCpuMs: ownCpuMs()
  }) + '\n')
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
