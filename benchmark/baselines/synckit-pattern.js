'use strict'
// The mechanism of synckit's createSyncFn (and make-synchronized, sync-rpc),
// written out for the benchmark: per call, the caller posts { id, args } on
// a MessagePort, blocks in Atomics.wait on a SharedArrayBuffer flag, and
// takes the answer with receiveMessageOnPort; the worker awaits the
// function, posts { id, result }, stores the flag and notifies. No timeout
// and no error path: only the cost of a call.
const { Worker, MessageChannel, receiveMessageOnPort, isMainThread, workerData } = require('worker_threads')

function createSyncFn () {
  const flag = new Int32Array(new SharedArrayBuffer(4))
  const { port1, port2 } = new MessageChannel()
  const worker = new Worker(__filename, { workerData: { port: port2, flag }, transferList: [port2] })
  worker.unref()
  let id = 0
  return (...args) => {
    Atomics.store(flag, 0, 0)
    port1.postMessage({ id: ++id, args })
    Atomics.wait(flag, 0, 0)
    const { message } = receiveMessageOnPort(port1)
    if (message.id !== id) throw new Error(`Expected id ${id} but got id ${message.id}`)
    return message.result
  }
}

if (!isMainThread && workerData && workerData.port) {
  const { port, flag } = workerData
  const fn = async (a, b) => a + b
  port.on('message', async ({ id, args }) => {
    const result = await fn(...args)
    port.postMessage({ id, result })
    Atomics.store(flag, 0, 1)
    Atomics.notify(flag, 0)
  })
}

module.exports = { createSyncFn }
