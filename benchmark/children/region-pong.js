'use strict'
// Scenario 13, the child side of a cross-process ping-pong:
//   node region-pong.js region <name> <bytes> <limitMs>
//     opens the SharedRegion <name> (made by the parent, <bytes> bytes),
//     prints "ready", then answers the parent's pings on element 0 of an
//     Int32Array over it with shared-futex's blocking wait / notify
//     (lib/pingpong.js's pong) until the parent writes STOP.
//   node region-pong.js socket <path> <limitMs>
//     connects to the Unix domain socket <path> and echoes every byte it
//     gets until the parent ends the connection.
// Prints one JSON line at the end: { ownCpuMs } (lib/child.js).
//
// It never outlives its measurement: a wait wakes every second to see
// whether the parent is still there (a dead parent's children are
// re-parented), and past <limitMs> from its start the child exits with
// code 3 whatever it is doing.

const net = require('net')
const { futex, ROOT } = require('../lib/impl')
const { pong } = require('../lib/pingpong')
const { ownCpuMs } = require('../lib/child')

const [mode, ...args] = process.argv.slice(2)
const parent = process.ppid
const started = Date.now()

function give (why) {
  process.stderr.write(`region-pong: ${why}\n`)
  process.exit(3)
}

function done () {
  process.stdout.write(JSON.stringify({ ownCpuMs: ownCpuMs() }) + '\n')
}

if (mode === 'region') {
  const [name, bytes, limit] = [args[0], Number(args[1]), Number(args[2])]
  const { SharedRegion } = require(ROOT)
  const region = SharedRegion.open(name, { bytes, create: false })
  const cells = new Int32Array(region.buffer)
  const f = futex('ours')
  const wait = (ta, i, v) => {
    if (f.wait(ta, i, v, 1000) !== 'timed-out') return
    if (process.ppid !== parent) give('the parent is gone')
    if (Date.now() - started > limit) give(`still running after ${limit} ms`)
  }
  process.stdout.write('ready\n')
  pong({ wait, notify: f.notify }, cells, 0)
  region.close()
  done()
} else if (mode === 'socket') {
  const [file, limit] = [args[0], Number(args[1])]
  setTimeout(() => give(`still running after ${limit} ms`), limit).unref()
  const socket = net.connect(file)
  socket.on('data', (d) => socket.write(d))
  socket.on('error', (e) => give(e.message))
  socket.on('end', () => socket.end())
  socket.on('close', done)
} else {
  give(`unknown mode ${mode}`)
}
