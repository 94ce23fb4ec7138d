'use strict'
// Condition: what a notify costs with nobody waiting, and a notifyAll to
// N async waiters of the main thread until all of them hold the lock again
// in turn. Usage: node benchmark/condition-notify.js [root ...]: each root
// is a checkout of this package (default: this one), measured in turn in
// this process, alternated over 5 rounds, so two versions compare in one run.
const path = require('path')
const { performance } = require('perf_hooks')

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

async function main () {
  const rows = libs.map(() => ({ idle: [], herd: [] }))
  for (let round = 0; round < 5; round++) {
    for (let k = 0; k < libs.length; k++) {
      rows[k].idle.push(idleNotify(libs[k].lib))
      rows[k].herd.push(await herd(libs[k].lib, 64, 200))
    }
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1]
  libs.forEach(({ root }, k) => {
    console.log(`${root}\n  notifyOne, nobody waiting: ${median(rows[k].idle).toFixed(1)} ns` +
      `\n  notifyAll to 64 async waiters, all relocked: ${median(rows[k].herd).toFixed(0)} us per round`)
  })
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
