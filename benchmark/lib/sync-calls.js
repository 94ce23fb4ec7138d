'use strict'
// The synchronous-call figure of scenarios 11 and 12: add(i, 1) through
// createSyncFn or synckit's createSyncFn, warmed up for warmMs, then counted
// for ms, with the CPU time the process (every thread of it) used meanwhile;
// with `loaded`, one spinning process per core runs from before the warm-up
// to the end.
const path = require('path')
const { createSyncFn } = require('../..')
const { now } = require('./threads')
const { startSpinners, stopSpinners } = require('./spinners')

const ADD = path.join(__dirname, '..', 'workers', 'sync-add.js')
const SYNCKIT_ADD = path.join(__dirname, '..', 'workers', 'synckit-add.js')

// A baseline from npm (a devDependency), or null where it is not installed.
function optional (name) {
  try {
    return require(name)
  } catch (e) {
    return null
  }
}

// Calls `call(i)` (which checks its answer), `batch` calls between looks at
// the clock, for warmMs, then counts the calls of the next ms with the
// process's CPU time: { rate (calls/s), cpuPerCall (µs) }.
function rateOf (call, { warmMs, ms, batch = 4 }) {
  let i = 0
  const until = (end) => {
    while (now() < end) {
      for (let k = 0; k < batch; k++) call(i++)
    }
  }
  until(now() + warmMs)
  const i0 = i
  const cpu0 = process.cpuUsage()
  const t0 = now()
  until(t0 + ms)
  const elapsed = now() - t0
  const cpu = process.cpuUsage(cpu0)
  const calls = i - i0
  return { rate: calls / (elapsed / 1000), cpuPerCall: (cpu.user + cpu.system) / calls }
}

async function syncCall (impl, loaded, { warmMs, ms }) {
  const spinners = loaded ? await startSpinners(warmMs + ms + 30000) : null
  const add = impl === 'createSyncFn' ? createSyncFn(ADD) : optional('synckit').createSyncFn(SYNCKIT_ADD)
  try {
    return rateOf((i) => {
      if (add(i, 1) !== i + 1) throw new Error('wrong sum')
    }, { warmMs, ms, batch: 16 })
  } finally {
    if (spinners) await stopSpinners(spinners)
    if (typeof add.close === 'function') await add.close() // ours; synckit's stays, cached by path
  }
}

module.exports = { syncCall, optional, rateOf }
