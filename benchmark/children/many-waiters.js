'use strict'
// Scenario 3, one measurement, in a fresh process (run with --expose-gc):
//   node --expose-gc many-waiters.js <impl> <n>
// Queues n waitAsync on one address, then notifies all from this thread.
// Prints one JSON line:
//   { heapPerWaiter, rssPerWaiter, createColdMs, createMs, settleMs, ownCpuMs }
//
// Two passes. The first runs in a process that has queued only a small
// warm-up batch: its memory figures are not flattered by pages an earlier,
// larger batch left behind, and its creation time (createColdMs) includes
// the JIT still optimising the caller-side code. Then 20 000 more waiters are
// created and settled, and the second pass gives the steady-state times
// (createMs, settleMs) the targets are about.

const { performance } = require('perf_hooks')
const { futex } = require('../lib/impl')
const { ownCpuMs } = require('../lib/child')

const [impl, nArg] = process.argv.slice(2)
const n = Number(nArg)
const { notify, waitAsync } = futex(impl)
const cells = new Int32Array(new SharedArrayBuffer(64))

function memory () {
  global.gc()
  global.gc()
  const m = process.memoryUsage()
  return { heap: m.heapUsed, rss: m.rss }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 5))

async function batch (count, at) {
  for (let i = 0; i < count; i++) waitAsync(cells, at, 0)
  notify(cells, at)
  await tick()
}

// One pass: create n waiters, optionally measure memory, notify all, await all.
async function pass (withMemory) {
  const promises = new Array(n)
  const before = withMemory ? memory() : null
  const t0 = performance.now()
  for (let i = 0; i < n; i++) promises[i] = waitAsync(cells, 0, 0).value
  const t1 = performance.now()
  const after = withMemory ? memory() : null
  const all = Promise.all(promises)
  const t2 = performance.now()
  const woken = notify(cells, 0)
  const results = await all
  const t3 = performance.now()
  if (woken !== n || results.some((r) => r !== 'ok')) throw new Error(`woke ${woken} of ${n}`)
  const out = { createMs: t1 - t0, settleMs: t3 - t2 }
  if (withMemory) {
    out.heapPerWaiter = (after.heap - before.heap) / n
    out.rssPerWaiter = (after.rss - before.rss) / n
  }
  return out
}

async function main () {
  // Hold the loop open for the whole measurement: pending waitAsync do not
  // keep the process alive, for either implementation.
  const hold = setInterval(() => {}, 1000)
  await batch(1000, 1) // also creates shared-futex's per-thread resolver
  const cold = await pass(true)
  for (let i = 0; i < 4; i++) await batch(5000, 1)
  const warm = await pass(false)
  clearInterval(hold)
  process.stdout.write(JSON.stringify({
    heapPerWaiter: cold.heapPerWaiter,
    rssPerWaiter: cold.rssPerWaiter,
    createColdMs: cold.createMs,
    createMs: warm.createMs,
    settleMs: warm.settleMs,
    ownCpuMs: ownCpuMs()
  }) + '\n')
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
