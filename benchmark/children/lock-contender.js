'use strict'
// One of the contending processes of benchmark/lock-processes.js, started
// with child_process.fork(this file, [JSON spec]):
//
//   spec.lib      which lock (see LIBS below)
//   spec.id       this process's number (0..n-1), for its messages
//   spec.region   the name of the SharedRegion of this measurement, or null:
//                 bytes 0..8 hold shared-futex's AsyncLock, the int32 at
//                 byte 8 the shared counter, the one at byte 12 who is inside
//                 the critical section (id + 1, 0: nobody)
//   spec.redis    { host, port } of the Redis server (redis-semaphore)
//   spec.pg       { host, port, user, database } (PostgreSQL advisory lock)
//   spec.file     the file proper-lockfile locks (it need not exist)
//   spec.limitMs  hard limit: past it the process exits with code 3
//
// It sets its lock up, sends { ready: true }, waits for { go: { from, to } }
// (absolute times, performance.timeOrigin + performance.now()), then loops
// until `to`: ask for the lock, hold it for the critical section, let it go.
// The critical section is the same for every library: a non-atomic
// read-modify-write of the counter in the region (a plain `+ 1` through an
// Int32Array, so two processes inside at once lose increments, which the
// parent sees), plus a check that nobody else is inside. Only the lock
// differs. Acquisitions whose ask came at or after `from` are counted, and
// their wait (ask → holding, performance.now()) goes into a histogram
// (lib/histogram.js). Then it sends
//   { result: { count, total, hist, maxWaitMs, overlaps, ownerDied, ownCpuMs } }
// and exits; on any failure it sends { error: message } and exits with code 2.
//
// It never outlives its measurement: it exits when the parent's IPC channel
// closes (the parent died), and past spec.limitMs whatever it is doing (a
// blocking loop checks the clock between acquisitions, and every blocking
// lock() has a timeout).

const { performance } = require('perf_hooks')
const { ROOT } = require('../lib/impl')
const { loopSync, loopAsync } = require('../lib/contend')
const { ownCpuMs, guardContender } = require('../lib/child')

const spec = JSON.parse(process.argv[2])
const started = Date.now()
// A blocking lock() that waits longer than this throws (reported as a failure).
const LOCK_TIMEOUT = 20000
const ME = spec.id + 1

const fail = guardContender(spec, 'lock-contender')

// The shared counter and the "who is inside" word: in the region when there
// is one, else local to this process (then nothing is checked across
// processes).
let region = null
let cells
if (spec.region !== null) {
  const { SharedRegion } = require(ROOT)
  region = SharedRegion.open(spec.region, { create: false })
  cells = new Int32Array(region.buffer)
} else {
  cells = new Int32Array(4)
}
const COUNTER = 2
const INSIDE = 3
let overlaps = 0

function critical () {
  if (Atomics.load(cells, INSIDE) !== 0) overlaps++
  Atomics.store(cells, INSIDE, ME)
  cells[COUNTER] = cells[COUNTER] + 1 // deliberately not atomic
  if (Atomics.load(cells, INSIDE) !== ME) overlaps++
  Atomics.store(cells, INSIDE, 0)
}

// Each library: setup() resolves with either
//   { lock(), unlock() }            blocking, in this thread
//   { acquire(), release() }        promises: acquire resolves holding it
//   { exclusive(fn) }               a promise that runs fn holding it
// and close() to disconnect.
let ownerDied = 0
const LIBS = {
  async 'shared-futex' () {
    const { AsyncLock, ACQUIRED } = require(ROOT)
    const lock = new AsyncLock(region.buffer, 0)
    return {
      lock () { if (lock.lock(LOCK_TIMEOUT) !== ACQUIRED) ownerDied++ },
      unlock () { lock.unlock() }
    }
  },
  async 'shared-futex-async' () {
    const { AsyncLock } = require(ROOT)
    const lock = new AsyncLock(region.buffer, 0)
    const options = { timeout: LOCK_TIMEOUT }
    return {
      exclusive: (fn) => lock.runExclusive((info) => {
        if (info.ownerDied) ownerDied++
        fn()
      }, options)
    }
  },
  async 'proper-lockfile' () {
    const lockfile = require('proper-lockfile')
    // Its `retries` go to the `retry` package: here one more try 1 ms after
    // each failed one, for ever (its default is no retry; `retries: n`
    // alone backs off from 1 s, doubling).
    const options = { realpath: false, retries: { forever: true, retries: 1, factor: 1, minTimeout: 1, maxTimeout: 1 } }
    let release = null
    return {
      async acquire () { release = await lockfile.lock(spec.file, options) },
      async release () { const r = release; release = null; await r() }
    }
  },
  async 'redis-semaphore' () { return redisMutex(spec.options) },
  async 'redis-semaphore-1ms' () { return redisMutex(spec.options) },
  async 'pg-advisory' () {
    const { Client } = require('pg')
    const client = new Client({ ...spec.pg, connectionTimeoutMillis: 10000 })
    client.on('error', fail)
    await client.connect()
    const key = 4242
    return {
      // Simple queries (no parameters): one round trip each.
      async acquire () { await client.query(`SELECT pg_advisory_lock(${key})`) },
      async release () {
        const r = await client.query(`SELECT pg_advisory_unlock(${key}) AS ok`)
        if (r.rows[0].ok !== true) throw new Error('pg_advisory_unlock: the lock was not held')
      },
      close: () => client.end()
    }
  }
}

async function redisMutex (options) {
  const Redis = require('ioredis')
  const { Mutex } = require('redis-semaphore')
  const client = new Redis({ ...spec.redis, lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 10000 })
  client.on('error', () => {}) // a failed command rejects; reconnection noise is not a result
  await client.connect()
  // One Mutex object per acquisition, as an application would make per task
  // (a Mutex holds one identifier).
  let mutex = null
  return {
    async acquire () {
      mutex = new Mutex(client, 'shared-futex-bench-lock', { acquireTimeout: LOCK_TIMEOUT, ...options })
      await mutex.acquire()
    },
    async release () { const m = mutex; mutex = null; await m.release() },
    close: () => client.quit()
  }
}

// The loops (lib/contend.js): the wait of each acquisition is from asking to
// holding, when the critical section starts.
let t1 = 0
const heldAt = () => t1
function held () {
  t1 = performance.now()
  critical()
}

function runBlocking (l, from, to) {
  const limit = { at: spec.limitMs - (Date.now() - started) + performance.now(), message: `still running after ${spec.limitMs} ms` }
  return loopSync(() => {
    l.lock()
    held()
    l.unlock()
  }, heldAt, from, to, limit)
}

function runAsync (l, from, to) {
  const acquire = l.exclusive
    ? () => l.exclusive(held)
    : async () => {
      await l.acquire()
      held()
      await l.release()
    }
  return loopAsync(acquire, heldAt, from, to)
}

async function main () {
  const setup = LIBS[spec.lib]
  if (!setup) throw new Error(`unknown library ${spec.lib}`)
  const l = await setup()
  const go = await new Promise((resolve) => {
    process.on('message', (m) => { if (m && m.go) resolve(m.go) })
    process.send({ ready: true })
  })
  const r = l.lock ? runBlocking(l, go.from, go.to) : await runAsync(l, go.from, go.to)
  if (l.close) await l.close()
  if (region) region.close()
  const result = { ...r, hist: Array.from(r.hist), overlaps, ownerDied, ownCpuMs: ownCpuMs() }
  process.removeAllListeners('disconnect')
  process.send({ result }, () => process.disconnect())
}

main().catch(fail)
