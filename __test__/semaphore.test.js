'use strict'
// Semaphore: counting, blocking and async acquisition, timeouts and abort
// that leave the queue and consume no permit, a wake-up taken by an aborted
// waiter reaching the next one, a concurrency bound across threads, and
// input validation.
const assert = require('assert')
const { test, describe } = require('./harness')
const { Semaphore } = require('..')
const { sleepers, handle, startWorker, until } = require('./fixtures/lock-util')

const HAS_ABORT = typeof AbortController === 'function'
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')
const isTimeout = { name: 'LockTimeoutError', code: 'ERR_LOCK_TIMEOUT' }
const waitersCell = (sem) => new Int32Array(sem.buffer, sem.byteOffset, 2)[1]

describe('Semaphore', () => {
  test('counts permits', () => {
    const sem = new Semaphore(2)
    assert.strictEqual(sem.value, 2)
    assert.strictEqual(sem.tryAcquire(), true)
    sem.acquire()
    assert.strictEqual(sem.tryAcquire(), false)
    assert.strictEqual(sem.value, 0)
    sem.release()
    assert.strictEqual(sem.value, 1)
    sem.release(2)
    assert.strictEqual(sem.value, 3)
    sem.release(0)
    assert.strictEqual(sem.value, 3)
  })

  test('lives in a shared buffer: the creator initialises it, copies attach to the same count', () => {
    const sab = new SharedArrayBuffer(4 * Semaphore.BYTES)
    const a = new Semaphore(sab, 8, 5)
    const b = new Semaphore(a.buffer, a.byteOffset)
    assert.strictEqual(b.value, 5)
    b.acquire()
    assert.strictEqual(a.value, 4)
    assert.strictEqual(new Semaphore(sab, 0).value, 0)
  })

  test('acquireAsync waits for a release; the release function is idempotent and disposable', async () => {
    const sem = new Semaphore(0)
    let got = null
    const p = sem.acquireAsync().then((release) => { got = release })
    await until(() => sleepers(sem) === 1, 'the waiter to queue')
    assert.strictEqual(got, null)
    sem.release()
    await p
    assert.strictEqual(sem.value, 0)
    got()
    got()
    got[DISPOSE]()
    assert.strictEqual(sem.value, 1)
    assert.strictEqual(waitersCell(sem), 0)
  })

  test('timeout: rejects with LockTimeoutError, leaves the queue, consumes no later permit', async () => {
    const sem = new Semaphore(0)
    await assert.rejects(sem.acquireAsync({ timeout: 20 }), isTimeout)
    await assert.rejects(sem.acquireAsync({ timeout: 0 }), isTimeout)
    assert.strictEqual(sleepers(sem), 0)
    assert.strictEqual(waitersCell(sem), 0)
    sem.release()
    assert.strictEqual(sem.value, 1)
    assert.throws(() => new Semaphore(0).acquire(5), isTimeout)
  })

  test('blocking acquire(timeout) in a worker throws LockTimeoutError', async () => {
    const sem = new Semaphore(0)
    const w = startWorker('semTimeout', { sem: handle(sem), timeout: 20 })
    const r = await w.next('result')
    assert.strictEqual(r.error.code, 'ERR_LOCK_TIMEOUT')
    await w.exit
    assert.strictEqual(waitersCell(sem), 0)
  })

  test('abort: rejects with AbortError, leaves the queue, consumes no later permit', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const sem = new Semaphore(0)
    const ac = new AbortController()
    const p = sem.acquireAsync({ signal: ac.signal })
    await until(() => sleepers(sem) === 1, 'the waiter to queue')
    ac.abort()
    await assert.rejects(p, { name: 'AbortError', code: 'ABORT_ERR' })
    assert.strictEqual(sleepers(sem), 0)
    sem.release()
    assert.strictEqual(sem.value, 1)
    await assert.rejects(sem.acquireAsync({ signal: ac.signal }), { name: 'AbortError' })
    assert.strictEqual(sem.value, 1, 'an aborted signal takes nothing, even when a permit is free')
  })

  test('an abort that loses the race with release passes the wake-up on', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const sem = new Semaphore(0)
    const ac = new AbortController()
    const first = sem.acquireAsync({ signal: ac.signal })
    await until(() => sleepers(sem) === 1, 'the main thread to queue')
    const w = startWorker('semTimeout', { sem: handle(sem), timeout: 60000 })
    await until(() => sleepers(sem) === 2, 'the worker to queue behind it')
    sem.release() // wakes the main thread's waiter...
    ac.abort() // ...which can no longer be taken back
    await assert.rejects(first, { name: 'AbortError' })
    assert.strictEqual((await w.next('result')).error, null, 'the worker got the permit')
    await w.exit
    assert.strictEqual(sem.value, 0)
  })

  test('at most N holders at once: main + 2 blocking + 2 async workers', { timeout: 60000 }, async () => {
    const N = 2
    const sem = new Semaphore(N)
    const shared = new Int32Array(new SharedArrayBuffer(8)) // [holders now, most seen]
    const workers = ['sync', 'async', 'sync', 'async'].map((mode) =>
      startWorker('semaphore', { sem: handle(sem), shared: shared.buffer, count: 1000, mode }))
    try {
      for (let k = 0; k < 1000; k++) {
        await sem.runExclusive(async () => {
          const now = Atomics.add(shared, 0, 1) + 1
          if (now > Atomics.load(shared, 1)) Atomics.store(shared, 1, now) // racy max: a lower bound
          await null
          Atomics.sub(shared, 0, 1)
        })
      }
      for (const w of workers) await w.next('done', 50000)
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assert.ok(Atomics.load(shared, 1) <= N, `${Atomics.load(shared, 1)} holders at once`)
    assert.strictEqual(Atomics.load(shared, 0), 0)
    assert.strictEqual(sem.value, N)
    assert.strictEqual(waitersCell(sem), 0)
  })

  test('runExclusive returns the result and gives the permit back on throw', async () => {
    const sem = new Semaphore(1)
    assert.strictEqual(await sem.runExclusive(() => 3), 3)
    await assert.rejects(sem.runExclusive(() => { throw new EvalError('x') }), EvalError)
    await assert.rejects(sem.runExclusive(() => Promise.reject(new EvalError('y'))), EvalError)
    assert.strictEqual(sem.value, 1)
  })

  test('bad input', async () => {
    assert.throws(() => new Semaphore(), TypeError)
    assert.throws(() => new Semaphore(-1), RangeError)
    assert.throws(() => new Semaphore(1.5), RangeError)
    assert.throws(() => new Semaphore('2'), TypeError)
    assert.throws(() => new Semaphore(2, 16), TypeError, 'a byteOffset needs a buffer')
    assert.throws(() => new Semaphore(2, 'x'), TypeError)
    assert.strictEqual(new Semaphore(2, 0).value, 2)
    // On something that is not a Semaphore, even releasing nothing.
    assert.throws(() => Semaphore.prototype.release.call({}, 0), TypeError)
    assert.throws(() => Semaphore.prototype.release.call(new Semaphore(1).constructor.prototype, 1), TypeError)
    assert.throws(() => new Semaphore(new ArrayBuffer(8)), TypeError)
    assert.throws(() => new Semaphore(new SharedArrayBuffer(8), 4), RangeError)
    assert.throws(() => new Semaphore(new SharedArrayBuffer(8), 0, -2), RangeError)
    const sem = new Semaphore(1)
    assert.throws(() => sem.acquire(-1), RangeError)
    assert.throws(() => sem.release(-1), RangeError)
    assert.throws(() => sem.release(0.5), RangeError)
    assert.throws(() => sem.release('1'), TypeError)
    assert.throws(() => sem.release(0x7fffffff), RangeError) // would overflow
    await assert.rejects(sem.acquireAsync({ timeout: -1 }), RangeError)
    await assert.rejects(sem.runExclusive(42), TypeError)
    assert.strictEqual(sem.value, 1, 'nothing was taken or given')
  })
})
