'use strict'
// AsyncLock over a shared region (lib/region-lock.js): one lock for every
// thread of every process that maps the region, robust to a holder killed
// with SIGKILL or a holding worker terminated. Real processes
// (fixtures/region-lock-child.js), each with a hard timeout.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { until, stressRounds, startChild, regionSkip, freshRegion } = require('./util')
const { SharedRegion, AsyncLock, Condition, LockOwnershipError, LockTimeoutError, SharedRegionError, ACQUIRED, OWNER_DIED } = require('..')

const FIXTURE = path.join(__dirname, 'fixtures', 'region-lock-child.js')
const HARD_TIMEOUT = 30000
const COUNT = 2
const HELD = 3
const RELEASE = 4
const TURNS = 5

const skip = regionSkip()

function fresh () {
  const made = freshRegion('lk', 64)
  return Object.assign(made, { lock: new AsyncLock(made.region.buffer, 0) })
}

// A child process with a hard timeout; `exited` resolves with its exit.
const child = (args) => startChild(FIXTURE, args, HARD_TIMEOUT)

describe('AsyncLock in a shared region', skip, () => {
  test('excludes exactly across 4 processes × (main thread + 2 workers), blocking and async', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const N = 500
    const kids = [0, 1, 2, 3].map(() => child(['count', name, String(N)]))
    const ends = await Promise.all(kids.map((k) => k.exited))
    assert.deepStrictEqual(ends, ends.map(() => ({ code: 0, signal: null })))
    assert.strictEqual(w[COUNT], 4 * 3 * N)
    assert.strictEqual(Atomics.load(w, 0), 0, 'free at the end, no waiter mark left')
    region.close()
    SharedRegion.unlink(name)
  })

  test('a holder killed with SIGKILL: the next locker gets it with owner-died (blocking and async)', { timeout: 60000 }, async () => {
    for (const how of ['async', 'tryLock']) {
      const { name, w, lock } = fresh()
      const holder = child(['hold', name])
      await until(() => Atomics.load(w, HELD) !== 0, 'the holder to take the lock')
      assert.strictEqual(lock.tryLock(), false)
      assert.strictEqual(lock.isLocked, true)
      if (how === 'async') {
        const pending = lock.lockAsync({ timeout: 10000 })
        holder.kill('SIGKILL')
        const release = await pending
        assert.strictEqual(release.ownerDied, true)
        release()
      } else {
        holder.kill('SIGKILL')
        await holder.exited
        assert.strictEqual(lock.tryLock(), OWNER_DIED)
        lock.unlock()
      }
      await holder.exited
      assert.strictEqual(lock.tryLock(), ACQUIRED, 'told once: the next locker just acquires')
      lock.unlock()
      SharedRegion.unlink(name)
    }
  })

  test('a worker of another process that ends holding it: owner-died', { timeout: 60000 }, async () => {
    const { name, w, lock } = fresh()
    const proc = child(['hold-worker', name])
    await until(() => Atomics.load(w, HELD) !== 0, 'the worker to take the lock')
    const pending = lock.lockAsync({ timeout: 10000 })
    Atomics.store(w, RELEASE, 1)
    require('..').notify(w, RELEASE)
    const release = await pending
    assert.strictEqual(release.ownerDied, true)
    release()
    proc.kill('SIGKILL')
    await proc.exited
    SharedRegion.unlink(name)
  })

  test('timeouts, signals and ownership, as for a lock of one process', { timeout: 60000 }, async () => {
    const { name, w, region } = fresh()
    const holder = child(['hold', name])
    await until(() => Atomics.load(w, HELD) !== 0, 'the holder')
    const lock = new AsyncLock(region.buffer, 0)
    await assert.rejects(lock.lockAsync({ timeout: 120 }), LockTimeoutError)
    assert.throws(() => lock.lock(120), LockTimeoutError)
    const ac = new AbortController()
    const aborted = lock.lockAsync({ signal: ac.signal })
    setTimeout(() => ac.abort(), 30)
    await assert.rejects(aborted, { name: 'AbortError' })
    assert.throws(() => lock.unlock(), LockOwnershipError)
    assert.throws(() => new Condition().wait(lock), (e) => e instanceof SharedRegionError && e.code === 'ERR_REGION_UNSUPPORTED')
    holder.kill('SIGKILL')
    await holder.exited
    assert.strictEqual(await lock.runExclusive(({ ownerDied }) => ownerDied), true)
    assert.strictEqual(await lock.runExclusive(({ ownerDied }) => ownerDied), false)
    SharedRegion.unlink(name)
  })

  test('processes killed at random points of lock / unlock loops never strand the others', { timeout: 120000 }, async () => {
    const rounds = stressRounds(8)
    for (let round = 0; round < rounds; round++) {
      const { name, w, lock } = fresh()
      const kids = [0, 1, 2].map(() => child(['churn', name]))
      await until(() => Atomics.load(w, TURNS) > 200 * (round + 1), 'the loops to turn')
      const victim = kids[round % kids.length]
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20))
      victim.kill('SIGKILL')
      await victim.exited
      const before = Atomics.load(w, TURNS)
      await until(() => Atomics.load(w, TURNS) > before + 200, 'the survivors to go on')
      for (const k of kids) k.kill('SIGKILL')
      await Promise.all(kids.map((k) => k.exited))
      // Whoever held it last is dead: the next locker takes it over.
      const got = lock.tryLock()
      assert.ok(got === ACQUIRED || got === OWNER_DIED, `round ${round}: ${got}`)
      lock.unlock()
      SharedRegion.unlink(name)
    }
  })
})
