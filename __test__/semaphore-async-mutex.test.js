'use strict'
// Code written for async-mutex's Semaphore, over this package's Semaphore
// through a small adapter (fixtures/async-mutex-adapter.js): a port of the
// documented behaviour of async-mutex 0.5's own semaphore tests (weights,
// runExclusive with a weight, release(weight), cancel, queued order), with
// real timers instead of fake ones, and the same sequences of calls run on
// async-mutex itself (a pinned devDependency) and on the adapter, whose
// outcomes must agree. Where the two differ on purpose (priorities,
// negative counts, setValue; newcomers may pass a queued acquirer for up to
// 1 ms here) nothing is ported: docs/lock.md says so.
const assert = require('assert')
const { performance } = require('perf_hooks')
const { test, describe } = require('./harness')
const { AsyncMutexSemaphore, E_CANCELED } = require('./fixtures/async-mutex-adapter')
const { sleepers, until } = require('./fixtures/lock-util')

let asyncMutex = null
try {
  asyncMutex = require('async-mutex')
} catch (e) {
  // A devDependency: `npm install` brings it. CI must have it.
  if (process.env.CI) throw e
}

// Every test is bounded: a waiter left stranded fails it instead of stalling the run.
const BOUND = { timeout: 30000 }
const tick = () => new Promise((resolve) => setTimeout(resolve, 1))
const queued = (s) => sleepers(s.semaphore)

// Until every acquisition of `s` is either settled or queued (none is
// being delivered or looking again).
const settled = (s) => until(() => s.pending.size === queued(s), 'the acquisitions to settle or queue')

describe('async-mutex Semaphore suite, ported (adapter)', () => {
  test('acquire does not block while the semaphore has not reached zero', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    const values = []
    s.acquire().then(([value]) => values.push(value))
    s.acquire().then(([value]) => values.push(value))
    await until(() => values.length === 2, 'both')
    assert.deepStrictEqual(values.sort(), [1, 2])
  })

  test('acquire with weight blocks while the semaphore has reached zero until it is released again', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    const values = []
    let release2
    s.acquire(2).then(([value, release]) => { values.push(value); release2 = release })
    s.acquire(1).then(([value]) => values.push(value))
    await until(() => values.length === 1 && queued(s) === 1, 'the first to hold, the second to queue')
    assert.deepStrictEqual(values, [2])
    release2()
    await until(() => values.length === 2, 'the second')
    assert.deepStrictEqual(values, [2, 2])
  })

  test('acquire allows heavy items to run eventually', { timeout: 30000 }, async () => {
    const s = new AsyncMutexSemaphore(2)
    let done = false
    let rounds = 0
    async function lightLoop () {
      while (!done) {
        const [, release] = await s.acquire(1)
        rounds++
        await tick()
        release()
      }
    }
    const loops = [lightLoop(), tick().then(lightLoop)]
    s.acquire(2).then(([, release]) => { done = true; release() })
    await until(() => done, 'the heavy item to run')
    await Promise.all(loops)
    assert.ok(rounds > 0)
    assert.strictEqual(s.getValue(), 2)
  })

  test('acquire blocks when the semaphore has reached zero until it is released again', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    const values = []
    let release2
    s.acquire().then(([value]) => values.push(value))
    s.acquire().then(([value, release]) => { values.push(value); release2 = release })
    s.acquire().then(([value]) => values.push(value))
    await until(() => values.length === 2 && queued(s) === 1, 'two to hold, one to queue')
    assert.deepStrictEqual(values.sort(), [1, 2])
    release2()
    await until(() => values.length === 3, 'the third')
    assert.deepStrictEqual(values.sort(), [1, 1, 2])
  })

  test('the releaser is idempotent and increments by the correct weight', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    const [, release] = await s.acquire(2)
    assert.strictEqual(s.getValue(), 0)
    release()
    release()
    assert.strictEqual(s.getValue(), 2)
    s.release(2) // release(weight) without an acquisition, as async-mutex allows
    assert.strictEqual(s.getValue(), 4)
    await s.acquire()
    assert.strictEqual(s.getValue(), 3)
  })

  test('runExclusive passes the value, the result, rejections and exceptions, and the weight', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    assert.strictEqual(await s.runExclusive((v) => v), 2)
    assert.strictEqual(await s.runExclusive(() => Promise.resolve(10)), 10)
    await assert.rejects(s.runExclusive(() => Promise.reject(new Error('foo'))), /foo/)
    await assert.rejects(s.runExclusive(() => { throw new Error('bar') }), /bar/)
    const p = s.runExclusive(() => undefined, 2)
    assert.strictEqual(s.getValue(), 0, 'the weight is taken in the call')
    await p
    assert.strictEqual(s.getValue(), 2)
  })

  test('runExclusive is exclusive, and an exception does not leave the semaphore locked', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    s.acquire()
    let flag = false
    s.runExclusive(() => new Promise((resolve) => setTimeout(() => { flag = true; resolve() }, 20)))
    assert.strictEqual(flag, false)
    await s.runExclusive(() => undefined)
    assert.strictEqual(flag, true)
    s.runExclusive(() => { throw new Error() }).then(undefined, () => undefined)
    await s.runExclusive(() => undefined)
  })

  test('isLocked and getValue reflect the state', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    assert.strictEqual(s.isLocked(), false)
    const lock1 = s.acquire()
    assert.strictEqual(s.getValue(), 1)
    const lock2 = s.acquire()
    s.acquire()
    assert.strictEqual(s.isLocked(), true)
    const [, release1] = await lock1
    // Here a permit released before the queued acquirer has waited 1 ms is
    // free until that acquirer runs; after that it is handed over in the
    // call, as async-mutex always does.
    age()
    release1()
    assert.strictEqual(s.isLocked(), true, 'the third took the permit')
    const [, release2] = await lock2
    release2()
    assert.strictEqual(s.isLocked(), false)
  })

  test('a release runs every waiter it covers, in order, and no further', BOUND, async () => {
    const s = new AsyncMutexSemaphore(0)
    const flags = [false, false, false]
    s.acquire(1).then(() => { flags[0] = true })
    s.acquire(2).then(() => { flags[1] = true })
    const last = s.acquire(4).then(() => { flags[2] = true })
    await until(() => queued(s) === 3, 'three to queue')
    s.release(3)
    await until(() => flags[0] && flags[1], 'the first two')
    await settled(s)
    assert.deepStrictEqual(flags, [true, true, false])
    s.cancel() // a queued acquisition keeps the process alive
    await assert.rejects(last, (e) => e === E_CANCELED)
  })

  test('cancel rejects every pending acquisition with E_CANCELED (or a custom error); a cancelled one takes nothing', BOUND, async () => {
    for (const custom of [undefined, new Error('custom')]) {
      const s = new AsyncMutexSemaphore(1, custom)
      await s.acquire()
      const a = s.acquire()
      const b = s.runExclusive(() => assert.fail('ran'))
      await until(() => queued(s) === 2, 'two to queue')
      s.cancel()
      await assert.rejects(a, (e) => e === (custom || E_CANCELED))
      await assert.rejects(b, (e) => e === (custom || E_CANCELED))
      assert.strictEqual(s.getValue(), 0)
      s.release()
      assert.strictEqual(s.getValue(), 1, 'no cancelled waiter took it')
    }
  })

  test('waitForUnlock only resolves once its weight can be taken', BOUND, async () => {
    const s = new AsyncMutexSemaphore(2)
    const [, release] = await s.acquire(2)
    let unlocked = false
    s.waitForUnlock(2).then(() => { unlocked = true })
    await until(() => queued(s) === 1, 'the waiter to queue')
    s.release(1)
    await settled(s)
    assert.strictEqual(unlocked, false)
    release()
    await until(() => unlocked, 'waitForUnlock')
    assert.strictEqual(s.getValue(), 3)
  })

  test('weights of 0 or less throw', BOUND, () => {
    const s = new AsyncMutexSemaphore(2)
    assert.throws(() => s.acquire(0), /invalid weight/)
    assert.throws(() => s.release(-1), /invalid weight/)
    assert.throws(() => s.waitForUnlock(-1), /invalid weight/)
  })
})

// --- the same calls on async-mutex and on the adapter ------------------------

// Until the acquirers queued before the call have waited over 1 ms: from
// then on a release reserves permits for the oldest, and newcomers queue
// behind it, as in async-mutex (whose newcomers always do).
function age () {
  const from = performance.now()
  while (performance.now() - from < 2) {}
}

// Runs `steps` on `s`; returns, after each step once everything settled,
// the acquisitions held in the order they were granted, those rejected,
// and the count when nobody waits.
async function run (s, steps, settle) {
  const held = {}
  const granted = []
  const rejected = []
  const log = []
  for (const [op, a, b] of steps) {
    if (op === 'acquire') {
      s.acquire(b).then(([, release]) => { held[a] = release; granted.push(a) }, () => rejected.push(a))
    } else if (op === 'release') {
      held[a]()
    } else if (op === 'give') {
      s.release(a)
    } else if (op === 'cancel') {
      s.cancel()
    } else if (op === 'age') {
      age()
    }
    await settle(s)
    log.push({ granted: granted.slice(), rejected: rejected.slice() })
  }
  return log
}

const SEQUENCES = {
  'a release serves the queue in order and stops at the first it does not cover': [
    ['acquire', 'a', 2], ['acquire', 'b', 1], ['acquire', 'c', 2], ['acquire', 'd', 1], ['age'],
    ['release', 'a'], ['release', 'b'], ['release', 'c'], ['release', 'd']
  ],
  'one release of several permits serves several waiters': [
    ['acquire', 'a', 2], ['acquire', 'b', 1], ['acquire', 'c', 1], ['acquire', 'd', 3], ['acquire', 'e', 1], ['age'],
    ['release', 'a'], ['give', 1], ['release', 'b'], ['release', 'c'], ['release', 'd'], ['release', 'e']
  ],
  'a heavy head is not passed by a light newcomer once it waited': [
    ['acquire', 'a', 2], ['acquire', 'b', 2], ['age'], ['give', 1], ['acquire', 'c', 1],
    ['release', 'a'], ['release', 'b'], ['release', 'c']
  ],
  'cancelled waiters take nothing; later ones are served': [
    ['acquire', 'a', 2], ['acquire', 'b', 1], ['acquire', 'c', 2], ['cancel'], ['acquire', 'd', 2], ['age'],
    ['release', 'a'], ['release', 'd']
  ]
}

describe('the same calls on async-mutex 0.5 and on the adapter', () => {
  for (const [name, steps] of Object.entries(SEQUENCES)) {
    test(name, { skip: asyncMutex === null && 'async-mutex is not installed (npm install)', timeout: 30000 }, async () => {
      const theirs = await run(new asyncMutex.Semaphore(2), steps, () => new Promise((resolve) => setImmediate(resolve)))
      const ours = await run(new AsyncMutexSemaphore(2), steps, settled)
      assert.deepStrictEqual(ours, theirs)
      // Not a sequence that decides nothing: some acquirer was served by a release.
      assert.ok(steps.some(([op], i) => op !== 'acquire' && i > 0 && theirs[i].granted.length > theirs[i - 1].granted.length))
    })
  }
})
