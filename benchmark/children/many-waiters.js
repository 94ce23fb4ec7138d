'use strict'
// Scenario 3, one measurement, in a fresh process (run with --expose-gc):
//   node --expose-gc many-waiters.js <impl> <n>
// Queues n waitAsync on one address, then notifies all from this thread.
// Prints one JSON line: { createMs, settleMs, heapPerWaiter, rssPerWaiter }.

const { performance } = require('perf_hooks')
const { futex } = require('../lib/impl')

const [impl, nArg] = process.argv.slice(2)
const n = Number(nArg)
const { notify, waitAsync } = futex(impl)

function memory () {
  global.gc()
  global.gc()
  const m = process.memoryUsage()
  return { heap: m.heapUsed, rss: m.rss }
}

async function main () {
  const cells = new Int32Array(new SharedArrayBuffer(64))
  // Hold the loop open for the whole measurement: pending waitAsync do not
  // keep the process alive, for either implementation.
  const hold = setInterval(() => {}, 1000)
  // Warm the code paths (and create our per-thread resolver) first.
  for (let i = 0; i < 1000; i++) waitAsync(cells, 1, 0)
  notify(cells, 1)
  await new Promise((resolve) => setTimeout(resolve, 10))

  const promises = new Array(n)
  const before = memory()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) promises[i] = waitAsync(cells, 0, 0).value
  const t1 = performance.now()
  const after = memory()

  const all = Promise.all(promises)
  const t2 = performance.now()
  const woken = notify(cells, 0)
  const results = await all
  const t3 = performance.now()
  clearInterval(hold)
  if (woken !== n || results.some((r) => r !== 'ok')) throw new Error(`woke ${woken} of ${n}`)
  process.stdout.write(JSON.stringify({
    createMs: t1 - t0,
    settleMs: t3 - t2,
    heapPerWaiter: (after.heap - before.heap) / n,
    rssPerWaiter: (after.rss - before.rss) / n
  }) + '\n')
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
