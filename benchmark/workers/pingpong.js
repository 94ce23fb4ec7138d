'use strict'
// One side of a ping-pong pair in a worker. workerData:
//   impl ('ours' | 'native'), role ('ping' | 'pong'), cells (Int32Array on a
//   SharedArrayBuffer), at (cell index), ms (measured window), ctl (start
//   barrier, which also says when the window opens).
// A ping posts { count, elapsedMs } when done.

const { workerData, parentPort } = require('worker_threads')
const { futex } = require('../lib/impl')
const { arrive, startTime } = require('../lib/threads')
const { ping, pong } = require('../lib/pingpong')

const { impl, role, cells, at, ms, ctl } = workerData
const f = futex(impl)
arrive(ctl)
const from = startTime(ctl)
if (role === 'ping') parentPort.postMessage(ping(f, cells, at, from, from + ms))
else pong(f, cells, at)
