'use strict'
// One contending process of benchmark/web-locks-postgres.js, started with
// child_process.fork(this file, [JSON spec]):
//
//   spec.lib      shared-futex | advisory-lock | redlock | redis-semaphore
//   spec.id       this process's number
//   spec.names    how many names: each acquisition takes one at random
//   spec.pg       connection string; spec.redis { host, port }
//   spec.region   a SharedRegion whose int32 words say who is inside each
//                 name's critical section (the exclusion check)
//   spec.limitMs  hard limit: past it the process exits with code 3
//
// It connects, sends { ready: true }, waits for { go: { from, to } } (times of
// performance.timeOrigin + performance.now()), then until `to`: picks a
// name, asks for its lock, holds it for the critical section (the check that
// nobody else is inside, one turn of the event loop), lets it go. Counted:
// acquisitions asked at or after `from`, and their waits (ask → holding).
// Sends { result: { count, waits, overlaps } } and exits.
const { performance } = require('perf_hooks')
const path = require('path')

const ROOT = path.join(__dirname, '..', '..')
const { guardContender } = require('../lib/child')

const spec = JSON.parse(process.argv[2])
const now = () => performance.timeOrigin + performance.now()

const fail = guardContender(spec, 'web-locks-postgres-contender')

const names = Array.from({ length: spec.names }, (_, i) => `bench-${i}`)

// Each library as `withLock(name, fn)`: fn runs while the lock is held.
const LIBS = {
  async 'shared-futex' () {
    const { PostgresLockManager } = require(path.join(ROOT, 'web-locks-postgres'))
    const locks = new PostgresLockManager({ connectionString: spec.pg, namespace: 'bench', heartbeatMs: 0 })
    await locks.request('warm-up', () => {})
    return { withLock: (name, fn) => locks.request(name, fn), close: () => locks.close() }
  },
  async 'advisory-lock' () {
    const createMutex = require('advisory-lock').default(spec.pg)
    const mutexes = new Map()
    const mutex = (name) => {
      if (!mutexes.has(name)) mutexes.set(name, createMutex(name))
      return mutexes.get(name)
    }
    return { withLock: (name, fn) => mutex(name).withLock(fn), close: async () => {} }
  },
  async redlock () {
    const Redis = require('ioredis')
    const Redlock = require('redlock')
    const client = new Redis({ ...spec.redis, lazyConnect: true, maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    await client.connect()
    // Its defaults (retry every 200 ± 100 ms), retrying for ever.
    const redlock = new Redlock([client], { retryCount: -1 })
    redlock.on('clientError', () => {})
    return {
      async withLock (name, fn) {
        const lock = await redlock.lock(name, 10000)
        try { await fn() } finally { await lock.unlock() }
      },
      close: () => client.quit()
    }
  },
  async 'redis-semaphore' () {
    const Redis = require('ioredis')
    const { Mutex } = require('redis-semaphore')
    const client = new Redis({ ...spec.redis, lazyConnect: true, maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    await client.connect()
    return {
      async withLock (name, fn) {
        // Its defaults (retry every 10 ms), waiting up to 60 s.
        const mutex = new Mutex(client, name, { acquireTimeout: 60000 })
        await mutex.acquire()
        try { await fn() } finally { await mutex.release() }
      },
      close: () => client.quit()
    }
  }
}

async function main () {
  const lib = await LIBS[spec.lib]()
  const { SharedRegion } = require(ROOT)
  const inside = new Int32Array(SharedRegion.open(spec.region, { bytes: 8 * Math.ceil(spec.names / 2) }).buffer)
  process.send({ ready: true })
  const { from, to } = await new Promise((resolve) => process.once('message', (m) => resolve(m.go)))
  while (now() < from - 200) await new Promise((resolve) => setTimeout(resolve, 1))
  let count = 0
  let overlaps = 0
  const waits = []
  for (;;) {
    const asked = now()
    if (asked >= to) break
    const i = Math.floor(Math.random() * spec.names)
    let waited = 0
    await lib.withLock(names[i], async () => {
      waited = now() - asked
      if (Atomics.add(inside, i, 1) !== 0) overlaps++
      await new Promise((resolve) => setImmediate(resolve))
      Atomics.sub(inside, i, 1)
    })
    if (asked >= from) {
      count++
      waits.push(waited)
    }
  }
  await lib.close()
  process.send({ result: { count, waits, overlaps } }, () => process.exit(0))
}
main().catch(fail)
