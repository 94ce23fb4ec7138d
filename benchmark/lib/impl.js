'use strict'
// The wait / notify / waitAsync under test, by name, usable in any thread.
//   'ours':   this package (require of the repository root).
//   'native': V8's Atomics.
// Both sides of a wait/notify pair must use the same one: the addon's queues
// are separate from V8's.

const path = require('path')

const ROOT = path.join(__dirname, '..', '..')

function futex (name) {
  if (name === 'native') {
    return { wait: Atomics.wait, notify: Atomics.notify, waitAsync: Atomics.waitAsync }
  }
  if (name === 'ours') {
    const m = require(ROOT)
    return { wait: m.wait, notify: m.notify, waitAsync: m.waitAsync }
  }
  throw new Error(`unknown implementation ${name}`)
}

module.exports = { futex, ROOT }
