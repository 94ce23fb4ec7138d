'use strict'
// A worker of scenario 9 (and of rwlock-threads.js): read-mostly operations
// with the blocking forms. workerData: impl, lockSab, table (Int32Array),
// writeEvery, ms, ctl, and countCalls (rwlock-threads.js: also count the
// addon's RwLock calls). Posts { count, writes[, calls] }.

const path = require('path')
const { workerData, parentPort } = require('worker_threads')
const { makeRwLock, mixSync } = require('../lib/rw')
const { arrive, startTime } = require('../lib/threads')
const { ROOT } = require('../lib/impl')

const { impl, lockSab, table, writeEvery, ms, ctl, countCalls } = workerData

// Wraps the addon's rw* entry points before the lock is made: lib/rwlock.js
// looks them up on the binding object at each call.
const calls = {}
if (countCalls) {
  const binding = require(path.join(ROOT, 'lib', 'native'))
  for (const name of Object.keys(binding).filter((k) => k.startsWith('rw'))) {
    const f = binding[name]
    calls[name] = 0
    binding[name] = function (...args) {
      calls[name]++
      return f.apply(this, args)
    }
  }
}

const lock = makeRwLock(impl, lockSab, 0)
arrive(ctl)
const from = startTime(ctl)
const result = mixSync(lock, table, from, from + ms, writeEvery)
if (countCalls) result.calls = calls
parentPort.postMessage(result)
