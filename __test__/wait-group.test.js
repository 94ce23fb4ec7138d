'use strict'
// WaitGroup: counting, waiting blocking and async, the zero rule (a waiter
// asleep across a zero is released even if the counter goes up again at
// once), timeouts and abort that leave nothing queued, errors that leave
// the counter unchanged, workers blocking with the main thread async, a
// waiter whose thread dies, bad input.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { WaitGroup, NegativeCounterError, E_NEGATIVE_COUNTER } = require('..')
const { until, startWorker, sleepers } = require('./fixtures/toolbox-util')
const { runChild, transcript } = require('./util')

const HAS_ABORT = typeof AbortController === 'function'
const queued = (wg) => sleepers(wg, 1)

describe('WaitGroup', () => {
  test('counts up and down; wait is true at zero', async () => {
    const wg = new WaitGroup()
    assert.strictEqual(wg.count, 0)
    assert.strictEqual(wg.wait(), true)
    assert.strictEqual(await wg.waitAsync(), true)
    wg.add(3)
    wg.done()
    wg.add(-1)
    assert.strictEqual(wg.count, 1)
    wg.add(0)
    assert.strictEqual(wg.count, 1)
    wg.done()
    assert.strictEqual(wg.count, 0)
    assert.strictEqual(new WaitGroup(5).count, 5)
  })

  test('lives in a shared buffer: the creator sets the count, copies attach to it', () => {
    const sab = new SharedArrayBuffer(2 * WaitGroup.BYTES)
    const a = new WaitGroup(sab, 12, 2)
    const b = new WaitGroup(a.buffer, a.byteOffset)
    b.done()
    assert.strictEqual(a.count, 1)
    assert.strictEqual(new WaitGroup(sab, 0).count, 0)
  })

  test('reaching zero wakes every waiter', async () => {
    const wg = new WaitGroup(2)
    const ps = [wg.waitAsync(), wg.waitAsync(), wg.waitAsync({ timeout: 60000 })]
    await until(() => queued(wg) === 3, 'three sleepers')
    wg.done()
    assert.strictEqual(queued(wg), 3, 'not at zero yet')
    wg.done()
    assert.deepStrictEqual(await Promise.all(ps), [true, true, true])
    assert.strictEqual(queued(wg), 0)
  })

  test('a waiter asleep across a zero is released even if the counter goes up again at once', async () => {
    const wg = new WaitGroup(1)
    const p = wg.waitAsync()
    await until(() => queued(wg) === 1, 'the sleeper')
    wg.done()
    wg.add(5) // before the waiter's promise can run
    assert.strictEqual(await p, true)
    const w = startWorker('WaitGroup', wg, 'once', {})
    try {
      await w.next('waiting')
      await until(() => queued(wg) === 1, 'the worker to sleep')
      wg.add(-5)
      wg.add(1)
      assert.deepStrictEqual(await w.next('result'), { type: 'result', value: true, error: null })
    } finally {
      await w.terminate()
    }
    assert.strictEqual(wg.count, 1)
  })

  test('timeout: false, and nothing stays queued', async () => {
    const wg = new WaitGroup(1)
    assert.strictEqual(await wg.waitAsync({ timeout: 20 }), false)
    assert.strictEqual(await wg.waitAsync({ timeout: 0 }), false)
    assert.strictEqual(wg.wait(5), false)
    assert.strictEqual(wg.wait(0), false)
    assert.strictEqual(queued(wg), 0)
    const w = startWorker('WaitGroup', wg, 'once', { timeout: 20 })
    try {
      assert.deepStrictEqual(await w.next('result'), { type: 'result', value: false, error: null })
    } finally {
      await w.terminate()
    }
  })

  test('abort: rejects with AbortError, nothing stays queued', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const wg = new WaitGroup(1)
    const ac = new AbortController()
    const p = wg.waitAsync({ signal: ac.signal })
    await until(() => queued(wg) === 1, 'the sleeper')
    ac.abort()
    await assert.rejects(p, { name: 'AbortError', code: 'ABORT_ERR' })
    assert.strictEqual(queued(wg), 0)
    await assert.rejects(wg.waitAsync({ signal: ac.signal }), { name: 'AbortError' })
    wg.done()
    await assert.rejects(wg.waitAsync({ signal: ac.signal }), { name: 'AbortError' }, 'an aborted signal rejects even at zero')
  })

  test('below zero: NegativeCounterError; past 2^31 − 1: RangeError; the counter unchanged', () => {
    const wg = new WaitGroup(1)
    assert.throws(() => wg.add(-2), { name: 'NegativeCounterError', code: 'ERR_NEGATIVE_COUNTER' })
    assert.strictEqual(wg.count, 1)
    wg.done()
    assert.throws(() => wg.done(), NegativeCounterError)
    assert.strictEqual(wg.count, 0)
    assert.strictEqual(E_NEGATIVE_COUNTER, 'ERR_NEGATIVE_COUNTER')
    wg.add(0x7fffffff)
    assert.throws(() => wg.add(1), RangeError)
    assert.strictEqual(wg.count, 0x7fffffff)
    assert.throws(() => wg.add(-0x80000000), NegativeCounterError)
    assert.strictEqual(wg.count, 0x7fffffff)
  })

  test('3 workers wait (blocking), the main thread counts down', { timeout: 60000 }, async () => {
    const wg = new WaitGroup(100)
    const workers = [0, 1, 2].map(() => startWorker('WaitGroup', wg, 'once', {}))
    try {
      for (const w of workers) await w.next('waiting')
      await until(() => queued(wg) === 3, 'the workers to sleep')
      for (let k = 0; k < 99; k++) wg.done()
      assert.strictEqual(queued(wg), 3)
      wg.done()
      for (const w of workers) assert.deepStrictEqual(await w.next('result'), { type: 'result', value: true, error: null })
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
  })

  test('workers count down (blocking side), the main thread waits async', { timeout: 60000 }, async () => {
    const N = 200
    const wg = new WaitGroup(3 * N)
    const shared = new Int32Array(new SharedArrayBuffer(4))
    const workers = [0, 1, 2].map(() => startWorker('WaitGroup', wg, 'countDown', { shared: shared.buffer, count: N }))
    try {
      const p = wg.waitAsync()
      for (let k = 1; k <= N; k++) {
        Atomics.store(shared, 0, k)
        Atomics.notify(shared, 0)
        await until(() => wg.count <= 3 * (N - k), `round ${k}`)
      }
      assert.strictEqual(await p, true)
      for (const w of workers) await w.next('done')
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assert.strictEqual(wg.count, 0)
  })

  test('a waiter whose thread dies leaves nothing that hangs exit (child process)', { timeout: 40000 }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'waiter-thread-dies.js'), 'WaitGroup'], { timeoutMs: 20000 })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    assert.deepStrictEqual(r.result, { queuedAfterDeath: 0, outcome: true, queued: 0 }, transcript(r))
  })

  test('bad input', async () => {
    assert.throws(() => new WaitGroup(-1), RangeError)
    assert.throws(() => new WaitGroup(1.5), RangeError)
    assert.throws(() => new WaitGroup(2 ** 31), RangeError)
    assert.throws(() => new WaitGroup('2'), TypeError)
    assert.throws(() => new WaitGroup(1, 4), TypeError)
    assert.throws(() => new WaitGroup(new ArrayBuffer(12)), TypeError)
    assert.throws(() => new WaitGroup(new SharedArrayBuffer(12), 4), RangeError)
    assert.throws(() => new WaitGroup(new SharedArrayBuffer(16), 2), RangeError)
    const sab = new SharedArrayBuffer(12)
    assert.throws(() => new WaitGroup(sab, 0, -2), RangeError)
    const wg = new WaitGroup(1)
    assert.throws(() => wg.add(0.5), RangeError)
    assert.throws(() => wg.add(NaN), RangeError)
    assert.throws(() => wg.add(Infinity), RangeError)
    assert.throws(() => wg.add('1'), TypeError)
    assert.throws(() => wg.add(), TypeError)
    assert.throws(() => wg.wait(-1), RangeError)
    await assert.rejects(wg.waitAsync({ timeout: -1 }), RangeError)
    await assert.rejects(wg.waitAsync('x'), TypeError)
    assert.strictEqual(wg.count, 1, 'nothing changed')
  })
})
