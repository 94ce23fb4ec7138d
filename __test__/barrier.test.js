'use strict'
// Barrier: generations, exactly one `true` per generation, the break rules
// (timeout, abort, reset) with exactly one outcome per generation, main
// thread async with workers blocking, a party whose thread dies, bad input.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { Barrier, BarrierBrokenError, E_BARRIER_BROKEN } = require('..')
const { until, startWorker, sleepers } = require('./fixtures/toolbox-util')
const { runChild, transcript } = require('./util')

const HAS_ABORT = typeof AbortController === 'function'
const isBroken = { name: 'BarrierBrokenError', code: 'ERR_BARRIER_BROKEN' }
const isTimeout = { name: 'LockTimeoutError', code: 'ERR_LOCK_TIMEOUT' }
const queued = (b) => sleepers(b, 0, BigInt64Array)
const settledOf = (p) => p.then((v) => ({ v }), (e) => ({ e: e.code }))

describe('Barrier', () => {
  test('releases a generation when the last party arrives: it alone gets true; reusable', async () => {
    const b = new Barrier(3)
    assert.strictEqual(b.parties, 3)
    for (let gen = 0; gen < 3; gen++) {
      const first = b.waitAsync()
      const second = b.waitAsync()
      assert.strictEqual(b.waiting, 2)
      await until(() => queued(b) === 2, 'two sleepers')
      const third = await b.waitAsync()
      assert.deepStrictEqual([await first, await second, third], [false, false, true])
      assert.strictEqual(b.waiting, 0)
    }
    assert.strictEqual(new Barrier(1).wait(), true, 'one party: every wait is the last')
    assert.strictEqual(BarrierBrokenError.name, 'BarrierBrokenError')
    assert.strictEqual(E_BARRIER_BROKEN, 'ERR_BARRIER_BROKEN')
  })

  test('lives in a shared buffer: the creator sets parties, copies read them', () => {
    const sab = new SharedArrayBuffer(3 * Barrier.BYTES)
    const a = new Barrier(sab, 16, 2)
    const b = new Barrier(a.buffer, a.byteOffset)
    assert.strictEqual(b.parties, 2)
    assert.strictEqual(b.byteOffset, 16)
    assert.throws(() => new Barrier(sab, 0), RangeError, 'no barrier was created at 0')
  })

  test('a timeout breaks the generation: the others get BarrierBrokenError, so does every later wait until reset()', async () => {
    const b = new Barrier(3)
    const other = settledOf(b.waitAsync())
    await assert.rejects(b.waitAsync({ timeout: 20 }), isTimeout)
    assert.deepStrictEqual(await other, { e: 'ERR_BARRIER_BROKEN' })
    assert.strictEqual(b.isBroken, true)
    assert.strictEqual(b.waiting, 0, 'nobody counted after leaving')
    await assert.rejects(b.waitAsync(), isBroken)
    assert.throws(() => b.wait(), isBroken)
    assert.throws(() => b.wait(0), isBroken)
    assert.strictEqual(queued(b), 0)
    b.reset()
    assert.strictEqual(b.isBroken, false)
    const p = b.waitAsync()
    const q = b.waitAsync()
    assert.strictEqual(await b.waitAsync(), true, 'usable again after reset()')
    assert.deepStrictEqual([await p, await q], [false, false])
  })

  test('blocking wait(timeout) in a worker: LockTimeoutError, and the main thread waiting with it gets BarrierBrokenError', async () => {
    const b = new Barrier(3)
    const mine = settledOf(b.waitAsync())
    const w = startWorker('Barrier', b, 'once', { timeout: 30 })
    try {
      assert.strictEqual((await w.next('result')).error, 'ERR_LOCK_TIMEOUT')
      assert.deepStrictEqual(await mine, { e: 'ERR_BARRIER_BROKEN' })
    } finally {
      await w.terminate()
    }
    assert.strictEqual(b.waiting, 0)
  })

  test('abort breaks the generation; an already aborted signal arrives nowhere', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const b = new Barrier(3)
    const ac = new AbortController()
    const other = settledOf(b.waitAsync())
    const p = b.waitAsync({ signal: ac.signal })
    await until(() => queued(b) === 2, 'two sleepers')
    ac.abort()
    await assert.rejects(p, { name: 'AbortError', code: 'ABORT_ERR' })
    assert.deepStrictEqual(await other, { e: 'ERR_BARRIER_BROKEN' })
    assert.strictEqual(queued(b), 0)
    b.reset()
    await assert.rejects(b.waitAsync({ signal: ac.signal }), { name: 'AbortError' })
    assert.strictEqual(b.waiting, 0)
    assert.strictEqual(b.isBroken, false)
  })

  test('reset() breaks the generation in progress; an idle reset changes nothing', async () => {
    const b = new Barrier(2)
    b.reset()
    assert.strictEqual(b.isBroken, false)
    const p = b.waitAsync()
    await until(() => queued(b) === 1, 'the sleeper')
    b.reset()
    await assert.rejects(p, isBroken)
    assert.strictEqual(b.isBroken, false, 'reset leaves it usable')
    const q = b.waitAsync()
    assert.strictEqual(await b.waitAsync(), true)
    assert.strictEqual(await q, false)
  })

  test('a sleeper woken late still learns its own generation\'s fate after newer generations', async () => {
    const b = new Barrier(2)
    // Generation 0 completes; its sleeper's promise runs only after the
    // generation reset() breaks and another one completes.
    const late = b.waitAsync()
    await until(() => queued(b) === 1, 'the sleeper')
    const last = b.waitAsync()
    const broken = b.waitAsync() // generation 1, broken by reset
    b.reset()
    const c = b.waitAsync()
    const d = b.waitAsync() // generation 2 completes
    assert.deepStrictEqual(await Promise.all([late, last, settledOf(broken), c, d]), [false, true, { e: 'ERR_BARRIER_BROKEN' }, false, true])
  })

  test('main (async) + 3 workers (blocking), 2000 generations: nobody passes early, exactly one true per generation', { timeout: 120000 }, async () => {
    const G = 2000
    const b = new Barrier(4)
    const shared = new Int32Array(new SharedArrayBuffer(12)) // [arrivals, early passes, trues]
    const workers = [0, 1, 2].map(() => startWorker('Barrier', b, 'barrierLoop', { shared: shared.buffer, count: G }))
    try {
      for (let k = 0; k < G; k++) {
        Atomics.add(shared, 0, 1)
        if (await b.waitAsync()) Atomics.add(shared, 2, 1)
        if (Atomics.load(shared, 0) < 4 * (k + 1)) Atomics.add(shared, 1, 1)
      }
      for (const w of workers) await w.next('done', 60000)
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assert.strictEqual(Atomics.load(shared, 1), 0, 'a party passed before its generation was complete')
    assert.strictEqual(Atomics.load(shared, 2), G, 'one true per generation')
    assert.strictEqual(b.waiting, 0)
    assert.strictEqual(b.isBroken, false)
  })

  test('last arrival racing a timeout: each generation is either complete or broken, never a mixture', { timeout: 120000 }, async () => {
    const ROUNDS = 400
    const x = new Barrier(2)
    const sync = new Barrier(2)
    const shared = new Int32Array(new SharedArrayBuffer(4 * ROUNDS))
    const w = startWorker('Barrier', x, 'barrierRace', { shared: shared.buffer, count: ROUNDS, sync: { buffer: sync.buffer, byteOffset: sync.byteOffset } })
    const mine = []
    try {
      for (let k = 0; k < ROUNDS; k++) {
        // Arrive around the worker's 0–1 ms deadline.
        const until = Date.now() + (k % 3)
        while (Date.now() < until);
        const r = await settledOf(x.waitAsync())
        mine.push(r.e === 'ERR_BARRIER_BROKEN' ? 4 : r.e ? 9 : r.v ? 1 : 2)
        await sync.waitAsync()
        x.reset()
        await sync.waitAsync()
      }
      await w.next('done', 60000)
    } finally {
      await w.terminate()
    }
    const seen = {}
    for (let k = 0; k < ROUNDS; k++) {
      const pair = `${Atomics.load(shared, k)}${mine[k]}`
      assert.ok(['12', '21', '34'].includes(pair), `round ${k}: worker ${shared[k]}, main ${mine[k]} (1 true, 2 false, 3 timed out, 4 broken)`)
      seen[pair] = (seen[pair] || 0) + 1
    }
    assert.ok(seen['34'] > 0, `no round timed out: ${JSON.stringify(seen)}`)
  })

  test('a party whose thread dies while waiting: its generation completes with it; the next waits for a timeout (child processes)', { timeout: 60000 }, async () => {
    const two = await runChild([path.join(__dirname, 'fixtures', 'barrier-thread-dies.js'), '2'], { timeoutMs: 20000 })
    assert.ok(!two.timedOut && two.code === 0 && two.result, transcript(two))
    assert.deepStrictEqual(two.result, { afterDeath: { waiting: 1, queued: 0 }, outcome: true, isBroken: false, queued: 0 }, transcript(two))
    const three = await runChild([path.join(__dirname, 'fixtures', 'barrier-thread-dies.js'), '3'], { timeoutMs: 20000 })
    assert.ok(!three.timedOut && three.code === 0 && three.result, transcript(three))
    assert.deepStrictEqual(three.result, { afterDeath: { waiting: 1, queued: 0 }, outcome: 'ERR_LOCK_TIMEOUT', isBroken: true, queued: 0 }, transcript(three))
  })

  test('bad input', async () => {
    assert.throws(() => new Barrier(), TypeError)
    assert.throws(() => new Barrier(0), RangeError)
    assert.throws(() => new Barrier(1.5), RangeError)
    assert.throws(() => new Barrier(2 ** 30 + 1), RangeError)
    assert.throws(() => new Barrier('2'), TypeError)
    assert.throws(() => new Barrier(2, 8), TypeError)
    assert.throws(() => new Barrier(new ArrayBuffer(16), 0, 2), TypeError)
    assert.throws(() => new Barrier(new SharedArrayBuffer(16), 4, 2), RangeError)
    assert.throws(() => new Barrier(new SharedArrayBuffer(32), 4, 2), RangeError, 'not a multiple of 8')
    assert.throws(() => new Barrier(new SharedArrayBuffer(16), 0, 0), RangeError)
    const sab = new SharedArrayBuffer(16)
    assert.throws(() => new Barrier(sab, 0, -1), RangeError)
    assert.strictEqual(new Int32Array(sab)[2], 0, 'nothing written')
    // Rebuilt from a buffer whose parties cell is out of range (a wrong
    // byteOffset, other data): not a barrier.
    for (const stored of [-7, 2 ** 30 + 1, 2 ** 31 - 1]) {
      const other = new SharedArrayBuffer(16)
      new Int32Array(other)[2] = stored
      assert.throws(() => new Barrier(other, 0), RangeError, `parties ${stored}`)
    }
    assert.strictEqual(new Barrier(2 ** 30).parties, 2 ** 30)
    const b = new Barrier(2)
    assert.throws(() => b.wait(-1), RangeError)
    assert.throws(() => b.wait('1'), TypeError)
    await assert.rejects(b.waitAsync({ timeout: -1 }), RangeError)
    await assert.rejects(b.waitAsync(5), TypeError)
    await assert.rejects(b.waitAsync({ signal: {} }), TypeError)
    assert.strictEqual(b.waiting, 0, 'nobody arrived')
  })
})
