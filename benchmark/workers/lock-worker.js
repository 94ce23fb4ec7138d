'use strict'
// A worker of scenario 6: takes the lock with blocking lock() in a loop.
// workerData: impl ('ours' | 'blog'), lockSab, counter (Int32Array), ms, ctl.
// Posts { count, total, maxWaitMs }.

const { workerData, parentPort } = require('worker_threads')
const { makeLock } = require('../lib/locks')
const { arrive, startTime } = require('../lib/threads')
const { contendSync } = require('../lib/contend')

const { impl, lockSab, counter, ms, ctl } = workerData
const lock = makeLock(impl, lockSab, 0)
arrive(ctl)
const from = startTime(ctl)
parentPort.postMessage(contendSync(lock, counter, from, from + ms))
