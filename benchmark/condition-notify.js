'use strict'
// Condition: what a notify costs with nobody waiting, a notifyAll to N
// async waiters of the main thread until all of them hold the lock again in
// turn, and a turn passed back and forth between two workers that block in
// Condition.wait (wake-up and relock). Usage: node benchmark/condition-notify.js [root ...]: each root
// is a checkout of this package (default: this one), measured in turn in
// this process, alternated over 5 rounds, so two versions compare in one run.
const path = require('path')
const { performance } = require('perf_hooks')
const { Worker } = require('worker_threads')

const roots = process.argv.slice(2).map((r) => path.resolve(r))
if (roots.length === 0) roots.push(path.join(__dirname, '..'))
const libs = roots.map((root) => ({ root, lib: require(root) }))

function idleNotify ({ Condition }) {
  const cond = new Condition()
  const n = 1e7
  const t0 = performance.now()
  for (let i = 0; i < n; i++) cond.notifyOne()
  return ((performance.now() - t0) * 1e6) / n // ns per notify
}

async function herd ({ AsyncLock, Condition }, waiters, rounds) {
  const lock = new AsyncLock()
  const cond = new Condition()
  const t0 = performance.now()
  for (let r = 0; r < rounds; r++) {
    let queued = 0
    const all = []
    for (let i = 0; i < waiters; i++) {
      all.push(lock.runExclusive(() => {
        queued++
        return cond.waitAsync(lock)
      }))
    }
    while (queued < waiters) await null
    await lock.runExclusive(() => cond.notifyAll())
    await Promise.all(all)
  }
  return ((performance.now() - t0) * 1000) / rounds // us per round
}

// Two workers pass a turn `turns` times: each waits (blocking) under the
// lock until the turn is its own, passes it and notifies. Microseconds per
// turn passed.
function pingPong (root, turns) {
  const shared = new SharedArrayBuffer(24) // lock (8), condition (8), turn
  const source = `
    const { workerData: d, parentPort } = require('worker_threads')
    const { AsyncLock, Condition } = require(d.root)
    const lock = new AsyncLock(d.shared, 0)
    const cond = new Condition(d.shared, 8)
    const turn = new Int32Array(d.shared, 16, 1)
    for (let i = d.me; i < d.turns; i += 2) {
      lock.lock()
      while (turn[0] !== d.me) cond.wait(lock)
      turn[0] = 1 - d.me
      cond.notifyOne()
      lock.unlock()
    }
    parentPort.postMessage('done')
  `
  const t0 = performance.now()
  const done = [0, 1].map((me) => new Promise((resolve, reject) => {
    const w = new Worker(source, { eval: true, workerData: { root, shared, me, turns } })
    w.once('message', resolve)
    w.once('error', reject)
  }))
  return Promise.all(done).then(() => ((performance.now() - t0) * 1000) / turns)
}

async function main () {
  const rows = libs.map(() => ({ idle: [], herd: [], pingPong: [] }))
  for (let round = 0; round < 5; round++) {
    for (let k = 0; k < libs.length; k++) {
      rows[k].idle.push(idleNotify(libs[k].lib))
      rows[k].herd.push(await herd(libs[k].lib, 64, 200))
      rows[k].pingPong.push(await pingPong(libs[k].root, 20000))
    }
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1]
  libs.forEach(({ root }, k) => {
    console.log(`${root}\n  notifyOne, nobody waiting: ${median(rows[k].idle).toFixed(1)} ns` +
      `\n  notifyAll to 64 async waiters, all relocked: ${median(rows[k].herd).toFixed(0)} us per round` +
      `\n  a turn passed between two workers in wait(): ${median(rows[k].pingPong).toFixed(2)} us per turn`)
  })
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
