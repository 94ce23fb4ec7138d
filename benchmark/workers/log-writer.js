'use strict'
// The worker of scenario 12's log transport over a Channel
// (benchmark/children/log-transport.js): takes the lines there, up to
// workerData.batch at once, and writes each batch to workerData.file with
// one fs.writeSync, until the channel is closed and drained.
const fs = require('fs')
const { workerData, parentPort } = require('worker_threads')
const { Channel } = require('../..')

const ch = new Channel(workerData.handle).join('receiver')
const fd = fs.openSync(workerData.file, 'w')
parentPort.postMessage('ready')
for (;;) {
  let batch
  try {
    batch = ch.recvMany(workerData.batch)
  } catch (e) {
    if (e.code === 'ERR_CHANNEL_CLOSED') break
    throw e
  }
  fs.writeSync(fd, batch.join(''))
}
fs.closeSync(fd)
