'use strict'
// What the state-changing operations of the coordination primitives cost
// with nobody waiting (the uncontended paths, which stay pure JavaScript
// wherever the word can say that nobody waits): ManualResetEvent set +
// reset, AutoResetEvent set + wait, WaitGroup add(1) + done() (the done
// reaches zero), a one-party Barrier's wait, Condition.notifyOne.
// Usage: node benchmark/idle-ops.js [root ...]: each root is a checkout of
// this package (default: this one), measured in turn in this process,
// alternated over 5 rounds, so two versions compare in one run.
const path = require('path')
const { performance } = require('perf_hooks')

const roots = process.argv.slice(2).map((r) => path.resolve(r))
if (roots.length === 0) roots.push(path.join(__dirname, '..'))
const libs = roots.map((root) => ({ root, lib: require(root) }))

const N = 2e6

function per (n, f) {
  const t0 = performance.now()
  f(n)
  return ((performance.now() - t0) * 1e6) / n // ns per step
}

const cases = {
  'ManualResetEvent set + reset': ({ ManualResetEvent }) => {
    const e = new ManualResetEvent()
    return per(N, (n) => { for (let i = 0; i < n; i++) { e.set(); e.reset() } })
  },
  'AutoResetEvent set + wait(0)': ({ AutoResetEvent }) => {
    const e = new AutoResetEvent()
    return per(N, (n) => { for (let i = 0; i < n; i++) { e.set(); e.wait(0) } })
  },
  'WaitGroup add(1) + done()': ({ WaitGroup }) => {
    const wg = new WaitGroup()
    return per(N, (n) => { for (let i = 0; i < n; i++) { wg.add(1); wg.done() } })
  },
  'WaitGroup add(2) + done()': ({ WaitGroup }) => {
    const wg = new WaitGroup(1)
    return per(N, (n) => { for (let i = 0; i < n; i++) { wg.add(2); wg.add(-2) } })
  },
  'Barrier(1) wait': ({ Barrier }) => {
    const b = new Barrier(1)
    return per(N, (n) => { for (let i = 0; i < n; i++) b.wait() })
  },
  'Condition notifyOne': ({ Condition }) => {
    const c = new Condition()
    return per(N, (n) => { for (let i = 0; i < n; i++) c.notifyOne() })
  }
}

const results = {}
for (let round = 0; round < 5; round++) {
  for (const { root, lib } of libs) {
    for (const [name, f] of Object.entries(cases)) {
      const key = `${name} | ${root}`
      ;(results[key] = results[key] || []).push(f(lib))
    }
  }
}
for (const [key, xs] of Object.entries(results)) {
  xs.sort((a, b) => a - b)
  console.log(`${key}: median ${xs[2].toFixed(1)} ns (${xs[0].toFixed(1)}–${xs[4].toFixed(1)})`)
}
