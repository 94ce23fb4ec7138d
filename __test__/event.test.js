'use strict'
// ManualResetEvent and AutoResetEvent: set / reset / wait blocking and
// async, a waiter asleep across set + reset, exactness of the auto-reset
// event (N sets with N waiters release exactly N, a set event set again
// stays one set), a set handed to an aborted waiter passed on, timeouts and
// abort that leave nothing queued, a waiter whose thread dies (leaving no
// count behind), bad input.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { ManualResetEvent, AutoResetEvent } = require('..')
const { until, startWorker, sleepers } = require('./fixtures/toolbox-util')
const { runChild, transcript } = require('./util')

const HAS_ABORT = typeof AbortController === 'function'
const queued = (e) => sleepers(e, 0)
// ManualResetEvent's STATE: bit 0 "a waiter may be asleep", bits 1– a
// counter, odd = set. AutoResetEvent's word: 1 set, the sign bit "waiters
// queued" (lib/event.js).
const manualWord = (e) => Atomics.load(new Int32Array(e.buffer, e.byteOffset, 1), 0)
const autoWord = (e) => Atomics.load(new Int32Array(e.buffer, e.byteOffset, 1), 0)
const result = (value) => ({ type: 'result', value, error: null })

describe('ManualResetEvent', () => {
  test('set / reset / isSet; wait returns at once while set', async () => {
    const e = new ManualResetEvent()
    assert.strictEqual(e.isSet, false)
    assert.strictEqual(e.wait(0), false)
    e.set()
    e.set()
    assert.strictEqual(e.isSet, true)
    assert.strictEqual(e.wait(), true)
    assert.strictEqual(await e.waitAsync(), true)
    e.reset()
    e.reset()
    assert.strictEqual(e.isSet, false)
    assert.strictEqual(await e.waitAsync({ timeout: 0 }), false)
    assert.strictEqual(new ManualResetEvent(true).isSet, true)
    const sab = new SharedArrayBuffer(16)
    const a = new ManualResetEvent(sab, 8, true)
    assert.strictEqual(new ManualResetEvent(a.buffer, a.byteOffset).isSet, true)
    assert.strictEqual(new ManualResetEvent(sab, 0).isSet, false)
  })

  test('set wakes every waiter: the main thread\'s (async) and a worker\'s (blocking)', async () => {
    const e = new ManualResetEvent()
    const ps = [e.waitAsync(), e.waitAsync({ timeout: 60000 })]
    const w = startWorker('ManualResetEvent', e, 'once', {})
    try {
      await until(() => queued(e) === 3, 'three sleepers')
      e.set()
      assert.deepStrictEqual(await Promise.all(ps), [true, true])
      assert.deepStrictEqual(await w.next('result'), result(true))
    } finally {
      await w.terminate()
    }
    assert.strictEqual(manualWord(e) & 1, 0, 'the set that woke them cleared the waiters bit')
  })

  test('a waiter asleep across set() is released even if reset() follows at once', async () => {
    const e = new ManualResetEvent()
    const p = e.waitAsync()
    const w = startWorker('ManualResetEvent', e, 'once', {})
    try {
      await until(() => queued(e) === 2, 'two sleepers')
      e.set()
      e.reset()
      assert.strictEqual(await p, true)
      assert.deepStrictEqual(await w.next('result'), result(true))
    } finally {
      await w.terminate()
    }
    assert.strictEqual(e.isSet, false)
  })

  test('timeout and abort: false / AbortError, nothing queued', async () => {
    const e = new ManualResetEvent()
    assert.strictEqual(await e.waitAsync({ timeout: 20 }), false)
    assert.strictEqual(e.wait(5), false)
    const w = startWorker('ManualResetEvent', e, 'once', { timeout: 20 })
    try {
      assert.deepStrictEqual(await w.next('result'), result(false))
    } finally {
      await w.terminate()
    }
    if (HAS_ABORT) {
      const ac = new AbortController()
      const p = e.waitAsync({ signal: ac.signal })
      await until(() => queued(e) === 1, 'the sleeper')
      ac.abort()
      await assert.rejects(p, { name: 'AbortError', code: 'ABORT_ERR' })
      e.set()
      await assert.rejects(e.waitAsync({ signal: ac.signal }), { name: 'AbortError' })
    }
    assert.strictEqual(queued(e), 0)
  })

  test('a waiter whose thread dies leaves nothing that hangs exit (child process)', { timeout: 40000 }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'waiter-thread-dies.js'), 'ManualResetEvent'], { timeoutMs: 20000 })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    assert.deepStrictEqual(r.result, { queuedAfterDeath: 0, outcome: true, queued: 0 }, transcript(r))
  })

  test('bad input', async () => {
    assert.throws(() => new ManualResetEvent(1), TypeError)
    assert.throws(() => new ManualResetEvent(true, 0), TypeError)
    assert.throws(() => new ManualResetEvent(new ArrayBuffer(8)), TypeError)
    assert.throws(() => new ManualResetEvent(new SharedArrayBuffer(8), 2), RangeError)
    assert.throws(() => new ManualResetEvent(new SharedArrayBuffer(8), 4), RangeError)
    const sab = new SharedArrayBuffer(8)
    assert.throws(() => new ManualResetEvent(sab, 0, 'yes'), TypeError)
    assert.strictEqual(new Int32Array(sab)[0], 0, 'nothing written')
    const e = new ManualResetEvent()
    assert.throws(() => e.wait(-1), RangeError)
    assert.throws(() => e.wait(null), TypeError)
    await assert.rejects(e.waitAsync({ timeout: NaN }), RangeError)
    await assert.rejects(e.waitAsync(1), TypeError)
  })
})

describe('AutoResetEvent', () => {
  test('with nobody waiting, a set stays until one wait consumes it; setting a set event does nothing', async () => {
    const e = new AutoResetEvent()
    assert.strictEqual(e.isSet, false)
    e.set()
    e.set()
    assert.strictEqual(e.isSet, true)
    assert.strictEqual(e.wait(0), true)
    assert.strictEqual(e.isSet, false)
    assert.strictEqual(e.wait(0), false, 'the second set did nothing')
    assert.strictEqual(await e.waitAsync({ timeout: 0 }), false)
    e.set()
    assert.strictEqual(await e.waitAsync(), true)
    e.set()
    e.reset()
    assert.strictEqual(e.wait(0), false, 'reset cleared it')
    assert.strictEqual(new AutoResetEvent(true).wait(0), true)
    assert.strictEqual(autoWord(e), 0)
  })

  test('N sets with N waiters release exactly N (main async + workers blocking), never N + 1', { timeout: 60000 }, async () => {
    const e = new AutoResetEvent()
    const shared = new Int32Array(new SharedArrayBuffer(8))
    const workers = [0, 1, 2].map(() => startWorker('AutoResetEvent', e, 'releases', { shared: shared.buffer, count: 1, timeout: 60000 }))
    try {
      const mine = [e.waitAsync(), e.waitAsync()]
      await until(() => queued(e) === 5, 'five sleepers')
      for (let k = 0; k < 5; k++) e.set()
      assert.deepStrictEqual(await Promise.all(mine), [true, true])
      for (const w of workers) await w.next('done')
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assert.strictEqual(Atomics.load(shared, 0), 3)
    assert.strictEqual(e.isSet, false)
    assert.strictEqual(autoWord(e), 0, 'no signal left over, nobody registered')
    assert.strictEqual(await e.waitAsync({ timeout: 10 }), false)
    e.set()
    e.set()
    assert.strictEqual(autoWord(e), 1, 'N + 1 sets: N released, the event left set once')
  })

  test('under contention: every set made while a waiter is queued releases one', { timeout: 120000 }, async () => {
    const K = 300
    const e = new AutoResetEvent()
    const shared = new Int32Array(new SharedArrayBuffer(8))
    const workers = [0, 1, 2].map(() => startWorker('AutoResetEvent', e, 'releases', { shared: shared.buffer, count: K, timeout: 60000 }))
    try {
      for (let k = 0; k < 3 * K; k++) {
        // A waiter queued (the word's sign bit), then set.
        await until(() => autoWord(e) < 0, `a waiter for set ${k}`)
        e.set()
      }
      for (const w of workers) await w.next('done', 60000)
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assert.strictEqual(Atomics.load(shared, 0), 3 * K)
    assert.strictEqual(Atomics.load(shared, 1), 0)
    assert.strictEqual(autoWord(e), 0)
  })

  test('a waiter aborted after its set woke it passes the wake-up on', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const e = new AutoResetEvent()
    const ac = new AbortController()
    const first = e.waitAsync({ signal: ac.signal })
    await until(() => queued(e) === 1, 'the main thread to sleep')
    const w = startWorker('AutoResetEvent', e, 'once', {})
    try {
      await until(() => queued(e) === 2, 'the worker to sleep behind it')
      e.set() // wakes the main thread's waiter...
      ac.abort() // ...which can no longer be taken back
      await assert.rejects(first, { name: 'AbortError' })
      assert.deepStrictEqual(await w.next('result'), result(true), 'the worker got the set')
    } finally {
      await w.terminate()
    }
    assert.strictEqual(autoWord(e), 0)
  })

  test('timeout and abort: false / AbortError; nobody stays queued and no set is kept for them', async () => {
    const e = new AutoResetEvent()
    assert.strictEqual(await e.waitAsync({ timeout: 20 }), false)
    assert.strictEqual(e.wait(5), false)
    const w = startWorker('AutoResetEvent', e, 'once', { timeout: 20 })
    try {
      assert.deepStrictEqual(await w.next('result'), result(false))
    } finally {
      await w.terminate()
    }
    if (HAS_ABORT) {
      const ac = new AbortController()
      const p = e.waitAsync({ signal: ac.signal })
      await until(() => queued(e) === 1, 'the sleeper')
      ac.abort()
      await assert.rejects(p, { name: 'AbortError', code: 'ABORT_ERR' })
      e.set()
      await assert.rejects(e.waitAsync({ signal: ac.signal }), { name: 'AbortError' })
      assert.strictEqual(e.isSet, true, 'an aborted signal consumes nothing')
      e.reset()
    }
    assert.strictEqual(queued(e), 0)
    assert.strictEqual(autoWord(e), 0)
  })

  test('a waiter whose thread dies while it waits leaves no count behind: two sets with nobody waiting are one', async () => {
    const e = new AutoResetEvent()
    const w = startWorker('AutoResetEvent', e, 'once', {})
    await until(() => queued(e) === 1, 'the worker to sleep')
    await w.terminate()
    assert.strictEqual(queued(e), 0)
    e.set()
    e.set()
    assert.strictEqual(e.wait(0), true)
    assert.strictEqual(e.wait(0), false, 'the dead waiter kept a set for itself')
    assert.strictEqual(autoWord(e), 0)
  })

  test('a waiter whose thread dies leaves nothing that hangs exit (child process)', { timeout: 40000 }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'waiter-thread-dies.js'), 'AutoResetEvent'], { timeoutMs: 20000 })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    assert.deepStrictEqual(r.result, { queuedAfterDeath: 0, outcome: true, queued: 0 }, transcript(r))
  })

  test('bad input', async () => {
    assert.throws(() => new AutoResetEvent(0), TypeError)
    assert.throws(() => new AutoResetEvent(false, 0), TypeError)
    assert.throws(() => new AutoResetEvent(new SharedArrayBuffer(4), 4), RangeError)
    assert.throws(() => new AutoResetEvent(new SharedArrayBuffer(8), 1), RangeError)
    assert.throws(() => new AutoResetEvent(new SharedArrayBuffer(4), 0, 1), TypeError)
    const e = new AutoResetEvent()
    assert.throws(() => e.wait(-5), RangeError)
    await assert.rejects(e.waitAsync({ timeout: '1' }), TypeError)
    await assert.rejects(e.waitAsync({ signal: 1 }), TypeError)
    assert.strictEqual(autoWord(e), 0)
  })
})
