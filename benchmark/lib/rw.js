'use strict'
// The read-mostly loops of scenario 9 and the locks they run under, by name:
//   'ours':     shared-futex's RwLock (lib/rwlock.js);
//   'mutex':    shared-futex's AsyncLock, for reads and writes alike;
//   'textbook': the textbook reader-writer lock over native Atomics (baselines/).
// Each lock is given the same interface: blocking read/readUnlock,
// write/writeUnlock, and async runRead(fn) / runWrite(fn).
//
// Every `writeEvery`-th operation writes (10: 90 % reads; 0: reads only):
// a write rewrites the TABLE cells of a shared table
// so that they all hold one new value. The others read: they sum the table
// and check that every cell held the same value (a torn read means the lock
// let a writer in with a reader, and stops the run).

const { performance } = require('perf_hooks')
const { ROOT } = require('./impl')
const { TextbookRwLock } = require('../baselines/rwlock-textbook')

const TABLE = 64

function makeRwLock (name, sab, byteOffset) {
  if (name === 'ours') return new (require(ROOT).RwLock)(sab, byteOffset)
  if (name === 'textbook') return new TextbookRwLock(sab, byteOffset)
  if (name === 'mutex') {
    const m = new (require(ROOT).AsyncLock)(sab, byteOffset)
    return {
      read: () => m.lock(),
      readUnlock: () => m.unlock(),
      write: () => m.lock(),
      writeUnlock: () => m.unlock(),
      runRead: (fn) => m.runExclusive(fn),
      runWrite: (fn) => m.runExclusive(fn)
    }
  }
  throw new Error(`unknown reader-writer lock ${name}`)
}

function readTable (table) {
  const first = table[0]
  let sum = 0
  for (let i = 0; i < TABLE; i++) {
    const v = table[i]
    if (v !== first) throw new Error('torn read: a writer was inside with a reader')
    sum += v
  }
  return sum
}

function writeTable (table) {
  const v = table[0] + 1
  for (let i = 0; i < TABLE; i++) table[i] = v
}

// Counts operations that started in [from, to) (absolute times, threads.now()).
function mixSync (lock, table, from, to, writeEvery) {
  const start = from - performance.timeOrigin
  const end = to - performance.timeOrigin
  let count = 0
  let writes = 0
  for (let i = 0; ; i++) {
    const t0 = performance.now()
    if (t0 >= end) break
    if (writeEvery > 0 && i % writeEvery === 0) {
      lock.write()
      writeTable(table)
      lock.writeUnlock()
      writes++
    } else {
      lock.read()
      readTable(table)
      lock.readUnlock()
    }
    if (t0 >= start) count++
  }
  return { count, writes }
}

async function mixAsync (lock, table, from, to, writeEvery) {
  const start = from - performance.timeOrigin
  const end = to - performance.timeOrigin
  const write = () => writeTable(table)
  const read = () => readTable(table)
  let count = 0
  let writes = 0
  for (let i = 0; ; i++) {
    const t0 = performance.now()
    if (t0 >= end) break
    if (writeEvery > 0 && i % writeEvery === 0) {
      await lock.runWrite(write)
      writes++
    } else {
      await lock.runRead(read)
    }
    if (t0 >= start) count++
  }
  return { count, writes }
}

module.exports = { TABLE, makeRwLock, mixSync, mixAsync }
