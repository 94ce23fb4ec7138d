'use strict'
// How long `await worker.terminate()` takes for a worker blocked in a wait
// that nothing will notify: shared-futex's `wait` against V8's
// `Atomics.wait`, alternating, in one process.
//
//   node benchmark/terminate-blocked.js [--rounds 20]
//
// V8 wakes its own waiter as soon as termination is requested; an addon's
// blocked wait learns of it only at its next liveness check (every 50 ms).
const path = require('path')
const { Worker } = require('worker_threads')

const ROOT = path.join(__dirname, '..')
const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 20

// Starts a worker that blocks in `impl`'s wait; resolves once it is about to.
async function blockedWorker (impl) {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const wait = impl === 'ours' ? `require(${JSON.stringify(ROOT)}).wait` : 'Atomics.wait'
  const w = new Worker(`
    const ta = new Int32Array(require('worker_threads').workerData)
    const wait = ${wait}
    Atomics.store(ta, 1, 1)
    wait(ta, 0, 0)
  `, { eval: true, workerData: ta.buffer })
  while (Atomics.load(ta, 1) === 0) await new Promise((resolve) => setTimeout(resolve, 1))
  // Let it reach the wait, then terminate at a random point of its 50 ms
  // liveness slice.
  await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 50))
  return w
}

async function main () {
  const times = { ours: [], native: [] }
  for (let i = 0; i < rounds; i++) {
    for (const impl of ['ours', 'native']) {
      const w = await blockedWorker(impl)
      const t0 = process.hrtime.bigint()
      await w.terminate()
      times[impl].push(Number(process.hrtime.bigint() - t0) / 1e6)
    }
  }
  for (const impl of ['ours', 'native']) {
    const t = times[impl].sort((a, b) => a - b)
    console.log(`${impl.padEnd(6)} terminate of a blocked worker: median ${t[t.length >> 1].toFixed(1)} ms, ` +
      `min ${t[0].toFixed(1)}, max ${t[t.length - 1].toFixed(1)} (${t.length} rounds)`)
  }
}

main()
