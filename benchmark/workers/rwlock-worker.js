'use strict'
// A worker of scenario 9: read-mostly operations with the blocking forms.
// workerData: impl, lockSab, table (Int32Array), writeEvery, ms, ctl. Posts { count, writes }.

const { workerData, parentPort } = require('worker_threads')
const { makeRwLock, mixSync } = require('../lib/rw')
const { arrive, startTime } = require('../lib/threads')

const { impl, lockSab, table, writeEvery, ms, ctl } = workerData
const lock = makeRwLock(impl, lockSab, 0)
arrive(ctl)
const from = startTime(ctl)
parentPort.postMessage(mixSync(lock, table, from, from + ms, writeEvery))
