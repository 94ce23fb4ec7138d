'use strict'
// waitAsync for Node versions without Atomics.waitAsync, done the way it was
// done before V8 8.7 (and still is by userland polyfills): a pool of helper
// workers. Each pending waitAsync occupies an idle helper (spawning one if
// none is idle), which blocks in Atomics.wait and posts the outcome back; the
// promise settles when that message arrives. The baseline of scenario 7.
// Runs on Node 12+.

const { Worker } = require('worker_threads')

const HELPER = `
const { parentPort } = require('worker_threads')
parentPort.on('message', ({ ta, index, value, timeout }) => {
  parentPort.postMessage(Atomics.wait(ta, index, value, timeout))
})
`

class HelperPool {
  constructor () {
    this.idle = []
    this.all = []
  }

  // Same arguments and results as Atomics.waitAsync (Int32Array only).
  waitAsync (ta, index, value, timeout = Infinity) {
    if (Atomics.load(ta, index) !== value) return { async: false, value: 'not-equal' }
    if (timeout <= 0) return { async: false, value: 'timed-out' }
    const helper = this.idle.pop() || this.spawn()
    const promise = new Promise((resolve) => { helper.resolve = resolve })
    helper.worker.postMessage({ ta, index, value, timeout })
    return { async: true, value: promise }
  }

  spawn () {
    const helper = { worker: new Worker(HELPER, { eval: true }), resolve: null }
    // Like a native pending waitAsync, helpers do not keep the process alive.
    helper.worker.unref()
    helper.worker.on('message', (outcome) => {
      const resolve = helper.resolve
      helper.resolve = null
      this.idle.push(helper)
      resolve(outcome)
    })
    this.all.push(helper)
    return helper
  }

  close () {
    return Promise.all(this.all.map((h) => h.worker.terminate()))
  }
}

module.exports = { HelperPool }
