'use strict'
// Condition's waiters bit: set exactly while someone sleeps on the
// condition, so a notify with nobody asleep is one compareExchange and never
// calls into the addon, also after sleepers timed out or were aborted.
const assert = require('assert')
const { test, describe } = require('./harness')
const { AsyncLock, Condition } = require('..')
const binding = require('../lib/native')
const { sleepers, until } = require('./fixtures/lock-util')

const HAS_ABORT = typeof AbortController === 'function'
const word = (cond) => Atomics.load(new Int32Array(cond.buffer, cond.byteOffset, 1), 0)
const waiting = (cond) => (word(cond) & 1) === 1

// Counts the calls of the addon's condition wake-ups (conditionSignal: a
// whole notify; conditionNotify: a wake-up passed on) made while fn runs.
async function countingNotifies (fn) {
  const names = ['conditionSignal', 'conditionNotify']
  const saved = names.map((name) => binding[name])
  let calls = 0
  names.forEach((name, i) => {
    binding[name] = function () {
      calls++
      return saved[i].apply(this, arguments)
    }
  })
  try {
    await fn()
  } finally {
    names.forEach((name, i) => { binding[name] = saved[i] })
  }
  return calls
}

describe('Condition: the waiters bit', () => {
  test('is set while a waiter sleeps and cleared by the notify that wakes the last one', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    assert.strictEqual(waiting(cond), false)
    const release = await lock.lockAsync()
    const p = cond.waitAsync(lock)
    await until(() => sleepers(cond) === 1, 'the waiter to sleep')
    assert.strictEqual(waiting(cond), true)
    const calls = await countingNotifies(async () => {
      assert.strictEqual(cond.notifyAll(), 1)
      assert.strictEqual(waiting(cond), false)
      assert.strictEqual(await p, 'ok')
      assert.strictEqual(cond.notifyOne(), 0)
    })
    assert.strictEqual(calls, 1, 'only the notify that had someone to wake called the addon')
    release()
  })

  test('is cleared when the last waiter times out: a later notify does not call the addon', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const release = await lock.lockAsync()
    assert.strictEqual(await cond.waitAsync(lock, { timeout: 5 }), 'timed-out')
    assert.strictEqual(waiting(cond), false)
    assert.strictEqual(await countingNotifies(() => { cond.notifyOne(); cond.notifyAll() }), 0)
    release()
  })

  test('is cleared when the last waiter is aborted: a later notify does not call the addon', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const ac = new AbortController()
    const release = await lock.lockAsync()
    const p = cond.waitAsync(lock, { signal: ac.signal })
    await until(() => sleepers(cond) === 1, 'the waiter to sleep')
    ac.abort()
    await assert.rejects(p, { name: 'AbortError' })
    assert.strictEqual(waiting(cond), false)
    assert.strictEqual(await countingNotifies(() => { cond.notifyOne(); cond.notifyAll() }), 0)
    release()
  })
})
