'use strict'
// Condition with an AsyncLock: blocking and async waits, timeouts, notifyOne
// versus notifyAll, abort (including an abort that races a notify: the
// wake-up must reach the next waiter), the relock after a dead owner, a
// woken waiter whose thread stops before its wait is over (child
// processes), and input validation.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { AsyncLock, Condition, OWNER_DIED } = require('..')
const binding = require('../lib/native')
const { internal } = require('../lib/futex')
const { cells, waiters, sleepers, handle, startWorker, until } = require('./fixtures/lock-util')
const { runChild, transcript } = require('./util')

const HAS_ABORT = typeof AbortController === 'function'
const MAIN = 1
const heldByMain = (lock) => cells(lock)[0] >>> 1 === MAIN
const waitersCell = (cond) => new Int32Array(cond.buffer, cond.byteOffset, 2)[1]

describe('Condition', () => {
  test('blocking wait(lock, timeout) in a worker returns timed-out with the lock held again', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const w = startWorker('condTimeout', { lock: handle(lock), cond: handle(cond), timeout: 20 })
    assert.deepStrictEqual(await w.next('result'), { type: 'result', result: 'timed-out', held: true })
    await w.exit
    assert.strictEqual(lock.isLocked, false)
    assert.strictEqual(waitersCell(cond), 0)
  })

  test('blocking wait(lock, timeout) on the main thread', () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    lock.lock()
    assert.strictEqual(cond.wait(lock, 5), 'timed-out')
    assert.ok(heldByMain(lock))
    assert.strictEqual(cond.wait(lock, 0), 'timed-out')
    lock.unlock()
  })

  test('waitAsync(lock, { timeout }) resolves timed-out with the lock held again', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const release = await lock.lockAsync()
    assert.strictEqual(await cond.waitAsync(lock, { timeout: 10 }), 'timed-out')
    assert.ok(heldByMain(lock))
    assert.strictEqual(sleepers(cond), 0)
    release()
    assert.strictEqual(lock.isLocked, false)
  })

  test('a worker waits for a predicate; the main thread sets it under the lock and notifies', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const shared = new Int32Array(new SharedArrayBuffer(4))
    const w = startWorker('condWait', { lock: handle(lock), cond: handle(cond), shared: shared.buffer })
    await w.next('waiting')
    await until(() => sleepers(cond) === 1, 'the worker to sleep on the condition')
    assert.strictEqual(lock.isLocked, false, 'wait released the lock')
    await lock.runExclusive(() => {
      shared[0] = 5
      assert.strictEqual(cond.notifyOne(), 1)
    })
    const r = await w.next('result')
    assert.strictEqual(r.seen, 5)
    assert.strictEqual(r.wakeups, 1)
    await w.exit
  })

  test('notifyOne wakes one waiter, notifyAll the rest; each resumes holding the lock', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const results = []
    const done = []
    for (let i = 0; i < 3; i++) {
      const release = await lock.lockAsync()
      done.push(cond.waitAsync(lock).then((r) => {
        results.push(r)
        assert.ok(heldByMain(lock))
        release()
      }))
    }
    await until(() => sleepers(cond) === 3, 'three waiters')
    assert.strictEqual(cond.notifyOne(), 1)
    await until(() => results.length === 1, 'one waiter to resume')
    assert.strictEqual(sleepers(cond), 2)
    assert.strictEqual(cond.notifyAll(), 2)
    await Promise.all(done)
    assert.deepStrictEqual(results, ['ok', 'ok', 'ok'])
    assert.strictEqual(lock.isLocked, false)
    assert.strictEqual(waitersCell(cond), 0)
  })

  test('notify with nobody waiting does not call into the addon', () => {
    const cond = new Condition()
    const saved = binding.notify
    let calls = 0
    binding.notify = function () {
      calls++
      return saved.apply(this, arguments)
    }
    try {
      assert.strictEqual(cond.notifyOne(), 0)
      assert.strictEqual(cond.notifyAll(), 0)
    } finally {
      binding.notify = saved
    }
    assert.strictEqual(calls, 0)
  })

  test('wait without holding the lock throws LockOwnershipError and changes nothing', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const isNotOwner = { name: 'LockOwnershipError', code: 'ERR_LOCK_NOT_OWNER' }
    assert.throws(() => cond.wait(lock, 1), isNotOwner)
    await assert.rejects(cond.waitAsync(lock), isNotOwner)
    const w = startWorker('hold', { lock: handle(lock), then: 'message' })
    await w.next('held')
    try {
      assert.throws(() => cond.wait(lock), isNotOwner)
      await assert.rejects(cond.waitAsync(lock), isNotOwner)
      assert.strictEqual(cells(lock)[0] >>> 1, w.threadId + 1, 'still the worker\'s')
    } finally {
      await w.terminate()
    }
    assert.strictEqual(waitersCell(cond), 0)
  })

  test('abort: waitAsync rejects with AbortError only after taking the lock back', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const ac = new AbortController()
    const release = await lock.lockAsync()
    const p = cond.waitAsync(lock, { signal: ac.signal })
    await until(() => sleepers(cond) === 1, 'the waiter to sleep')
    ac.abort()
    await assert.rejects(p, { name: 'AbortError', code: 'ABORT_ERR' })
    assert.ok(heldByMain(lock))
    assert.strictEqual(sleepers(cond), 0)
    assert.strictEqual(waitersCell(cond), 0)
    release()
  })

  test('an abort that loses the race with notifyOne passes the wake-up on to the next waiter', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const shared = new Int32Array(new SharedArrayBuffer(4))
    const ac = new AbortController()
    await lock.lockAsync()
    const first = cond.waitAsync(lock, { signal: ac.signal }) // first in the queue; unlocks
    await until(() => sleepers(cond) === 1, 'the main thread to sleep')
    const w = startWorker('condWait', { lock: handle(lock), cond: handle(cond), shared: shared.buffer })
    await w.next('waiting')
    await until(() => sleepers(cond) === 2, 'the worker to sleep behind it')
    shared[0] = 1
    // The notify takes the main thread's waiter out of the queue; the abort
    // comes too late to take it back, so the main thread got a wake-up it
    // will not use. Without passing it on, the worker would sleep forever.
    assert.strictEqual(cond.notifyOne(), 1)
    ac.abort()
    await assert.rejects(first, { name: 'AbortError' })
    lock.unlock() // first relocked before rejecting
    const r = await w.next('result')
    assert.strictEqual(r.seen, 1)
    await w.exit
    // The wake-up left the thread's record of relocks owed when it was passed on.
    assert.strictEqual(internal.diagnostics().relocking, 0)
  })

  test('when the relock finds the lock\'s owner dead, wait reports owner-died', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    lock.lock()
    const p = cond.waitAsync(lock)
    const w = startWorker('hold', { lock: handle(lock), then: 'stay' })
    await w.next('held')
    cond.notifyAll()
    await until(() => waiters(lock) === 1, 'the relock to queue')
    await w.terminate()
    assert.strictEqual(await p, OWNER_DIED)
    assert.ok(heldByMain(lock))
    lock.unlock()
  })

  // The death is reported exactly once, in waitAsync's result: an abort that
  // comes after the owner died cannot stop the relock from taking the dead
  // owner's lock over, so the caller holds it and must be told (a plain
  // AbortError would leave the half-updated data unreported).
  for (const order of ['abort while the owner is alive, relock queued', 'owner already dead when the abort fires']) {
    test(`an abort does not hide a dead owner from the relock (${order}): owner-died is reported once`, { skip: !HAS_ABORT && 'no AbortController' }, async () => {
      const lock = new AsyncLock()
      const cond = new Condition()
      const ac = new AbortController()
      lock.lock()
      const p = cond.waitAsync(lock, { signal: ac.signal })
      await until(() => sleepers(cond) === 1, 'the waiter to sleep')
      const w = startWorker('hold', { lock: handle(lock), then: 'stay' })
      await w.next('held')
      if (order.startsWith('abort')) {
        ac.abort()
        await until(() => waiters(lock) === 1, 'the relock to queue')
        await w.terminate()
      } else {
        await w.terminate()
        ac.abort()
      }
      assert.strictEqual(await p, OWNER_DIED)
      assert.ok(heldByMain(lock))
      assert.strictEqual(waitersCell(cond), 0)
      lock.unlock()
      // Reported once: the next owner takes an ordinary lock.
      assert.strictEqual(lock.tryLock(), 'acquired')
      lock.unlock()
    })
  }

  test('a notified async waiter is off its thread\'s record once it has relocked', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    lock.lock()
    const p = cond.waitAsync(lock)
    await until(() => sleepers(cond) === 1, 'the waiter to sleep')
    lock.lock() // the relock will wait for this
    const notified = cond.notifyOne()
    await until(() => waiters(lock) === 1, 'the relock to queue')
    // Delivered, not relocked yet: on record, for the thread's teardown.
    const relocking = internal.diagnostics().relocking
    lock.unlock()
    const r = await p
    const relockingAfter = internal.diagnostics().relocking
    lock.unlock()
    assert.deepStrictEqual({ notified, relocking, r, relockingAfter }, { notified: 1, relocking: 1, r: 'ok', relockingAfter: 0 })
  })

  test('bad input', async () => {
    assert.throws(() => new Condition(new ArrayBuffer(8)), TypeError)
    assert.throws(() => new Condition(new SharedArrayBuffer(8), 4), RangeError)
    assert.throws(() => new Condition(new SharedArrayBuffer(8), 2), RangeError)
    const lock = new AsyncLock()
    const cond = new Condition()
    assert.throws(() => cond.wait({}), TypeError)
    await assert.rejects(cond.waitAsync(null), TypeError)
    lock.lock()
    assert.throws(() => cond.wait(lock, -1), RangeError)
    await assert.rejects(cond.waitAsync(lock, { timeout: -1 }), RangeError)
    await assert.rejects(cond.waitAsync(lock, { signal: 1 }), TypeError)
    assert.ok(heldByMain(lock), 'still held: nothing happened')
    lock.unlock()
    assert.strictEqual(waitersCell(cond), 0)
  })
})

// A notify's wake-up must not be lost with a thread stopped before its wait
// is over (docs/lock.md, "A woken sleeper whose thread stops"): worker A,
// woken first, is terminated at the point each case names; worker B, asleep
// behind it, must get the wake-up ('ok', not its 10 s timeout).
// fixtures/condition-waker-dies.js.
describe('Condition: a woken waiter whose thread stops passes the wake-up on (child processes)', () => {
  const HARD_TIMEOUT = 40000
  const CASES = [
    ['blocking', 'wait(): terminated while its relock waits for the lock'],
    ['async-queued', 'waitAsync(): terminated while its relock is queued'],
    ['async-handed', 'waitAsync(): terminated after its relock was given the lock, before delivery'],
    ['async-delivered', 'waitAsync(): terminated after the wake-up was delivered, before its relock started'],
    ['async-undelivered', 'waitAsync(): terminated before the wake-up was delivered']
  ]
  for (const [mode, what] of CASES) {
    test(what, { timeout: HARD_TIMEOUT + 10000 }, async () => {
      const r = await runChild([path.join(__dirname, 'fixtures', 'condition-waker-dies.js'), mode], { timeoutMs: HARD_TIMEOUT })
      const shown = '\n' + transcript(r)
      assert.ok(!r.timedOut && r.code === 0 && r.result, shown)
      assert.strictEqual(r.result.notified, 1, shown)
      assert.strictEqual(r.result.second, 'ok', `the sleeper behind got the wake-up${shown}`)
      assert.strictEqual(r.result.lockWord, 0, `nothing holds the lock${shown}`)
      assert.strictEqual(r.result.relocking, 0, `no wake-up left on record${shown}`)
    })
  }
})
