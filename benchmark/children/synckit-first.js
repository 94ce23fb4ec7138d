'use strict'
// Scenario 14's first call, in a fresh process: from the process's start
// (performance.now()'s origin) to the first answer of an async add, through
//   synckit                synckit's createSyncFn (npm)
//   shared-futex/synckit   the drop-in, on the same add
//   createSyncFn           shared-futex's own, with serveSync
// each loaded the way its users load it (the package's entry point), then
// createSyncFn, then the call. Prints { firstMs, cpuMs (the process's CPU
// time until then, every thread of it), ownCpuMs }.
//
//   node benchmark/children/synckit-first.js <impl>
const { performance } = require('perf_hooks')
const path = require('path')

const WORKERS = path.join(__dirname, '..', 'workers')
const impl = process.argv[2]
let add
if (impl === 'synckit') add = require('synckit').createSyncFn(path.join(WORKERS, 'synckit-add.js'))
else if (impl === 'shared-futex/synckit') add = require('../../synckit').createSyncFn(path.join(WORKERS, 'shared-futex-synckit-add.js'))
else if (impl === 'createSyncFn') add = require('../..').createSyncFn(path.join(WORKERS, 'sync-add.js'))
else throw new Error(`unknown implementation ${impl}`)
if (add(1, 2) !== 3) throw new Error('wrong sum')
const firstMs = performance.now()
const cpu = process.cpuUsage()
const cpuMs = (cpu.user + cpu.system) / 1000
console.log(JSON.stringify({ firstMs, cpuMs, ownCpuMs: cpuMs }))
process.exit(0) // synckit's worker is cached by path and stays
