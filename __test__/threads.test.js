'use strict'
// Cross-thread behaviour: wake-ups between the main thread and workers, FIFO
// order over a mix of sync (worker) and async waiters, notify counts,
// timeouts, exactly one outcome per waiter, BigInt64Array and byteOffset
// views. Both sides of every pair use the implementation under test.
//
// Ordering without sleeps: an async waiter is queued when waitAsync returns,
// so async waiters are enqueued in a known order by construction. A sync
// waiter cannot report "queued" (it is blocked), and no API can tell without
// waking it; on Linux the worker posts its OS thread id right before calling
// wait, and util.untilBlocked() watches /proc until that thread sleeps
// (25 ms in a row). Tests that depend on the exact position of a sync waiter
// are skipped where /proc/thread-self does not exist.
const assert = require('assert')
const { test, describe } = require('./harness')
const { wait, notify, waitAsync } = require('./subject')
const {
  now, until, canObserveBlocking, untilBlocked, sharedI32, sharedI64, describeView, startWorker
} = require('./util')

const LONG = { timeout: 60000 }
const LINUX_ONLY = { timeout: 60000, skip: canObserveBlocking ? false : 'needs /proc/thread-self (Linux)' }

// Runs body(spawn) with the event loop held open (pending waitAsync promises
// alone do not hold it, as with native Atomics) and terminates every worker
// it started afterwards.
async function withWorkers (body) {
  const started = []
  const hold = setInterval(() => {}, 1000)
  try {
    return await body((role, data) => {
      const w = startWorker(role, data)
      started.push(w)
      return w
    })
  } finally {
    clearInterval(hold)
    await Promise.all(started.map((w) => w.terminate()))
  }
}

// Resolves once the sync waiter in worker w (which posts its thread id right
// before calling wait) is asleep in that wait. Linux only: elsewhere, tests
// poll with notify(…, 1) until it returns 1 instead, which wakes the waiter.
async function blocked (w) {
  const tid = await w.tid()
  await untilBlocked(tid, 'the waiting worker')
}

// An async waiter whose outcome lands in `log` as { id, result }.
function asyncWaiter (log, id, ta, index, value, timeout) {
  const r = waitAsync(ta, index, value, timeout)
  assert.strictEqual(r.async, true, `waiter ${id} is pending`)
  r.value.then((result) => log.push({ id, result }))
  return r
}
// Copies the results a worker posts into `log` as they arrive.
function collect (log, w) {
  w.worker.on('message', (m) => {
    if (m.type === 'result') log.push({ id: m.id, result: m.result })
  })
  return w
}

describe('wake-ups across threads', () => {
  test('a worker blocked in wait is woken by the main thread: wait returns ok', LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const w = spawn('wait', { view: describeView(ta), index: 0, value: 0 })
    if (canObserveBlocking) {
      await blocked(w)
      assert.strictEqual(notify(ta, 0, 1), 1)
    } else {
      await until(() => notify(ta, 0, 1) === 1, 'notify to find the waiting worker')
    }
    assert.strictEqual((await w.next('result')).result, 'ok')
    assert.strictEqual(notify(ta, 0), 0, 'the woken waiter left the queue')
  }))

  test("the main thread's waitAsync is woken by a worker's notify", LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const r = waitAsync(ta, 0, 0)
    assert.strictEqual(r.async, true)
    const w = spawn('notify', { view: describeView(ta), index: 0, count: 1 })
    assert.strictEqual((await w.next('result')).result, 1, "the worker's notify found the main thread's waiter")
    assert.strictEqual(await r.value, 'ok')
  }))

  test("a worker's async waiters are woken by the main thread, two then one", LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const woke = []
    const w = collect(woke, spawn('waitAsync', { view: describeView(ta), index: 0, value: 0, ids: [0, 1, 2] }))
    await w.next('queued')
    assert.strictEqual(notify(ta, 0, 2), 2)
    await until(() => woke.length === 2, 'two results')
    assert.strictEqual(notify(ta, 0, 2), 1)
    await until(() => woke.length === 3, 'the third result')
    assert.strictEqual(notify(ta, 0, 2), 0)
    assert.deepStrictEqual(woke, [{ id: 0, result: 'ok' }, { id: 1, result: 'ok' }, { id: 2, result: 'ok' }])
  }))

  test('main-thread async waiters are woken in FIFO order by a worker', LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const woke = []
    for (let id = 0; id < 5; id++) asyncWaiter(woke, id, ta, 0, 0)
    for (let k = 0; k < 5; k++) {
      const w = spawn('notify', { view: describeView(ta), index: 0, count: 1 })
      assert.strictEqual((await w.next('result')).result, 1)
      await until(() => woke.length === k + 1, `wake-up ${k}`)
    }
    assert.deepStrictEqual(woke.map((x) => x.id), [0, 1, 2, 3, 4])
    assert.ok(woke.every((x) => x.result === 'ok'))
  }))
})

describe('FIFO order across sync and async waiters on one address', () => {
  // M: async waiter of the main thread; S: worker blocked in wait;
  // R: async waiter of another worker.
  for (const pattern of ['MSMSRMS', 'SSMRSMR']) {
    test(`enqueued as ${pattern}, woken one at a time in that order`, LINUX_ONLY, () => withWorkers(async (spawn) => {
      const ta = sharedI32([0, 0])
      const view = describeView(ta)
      const woke = []
      for (let id = 0; id < pattern.length; id++) {
        if (pattern[id] === 'M') {
          asyncWaiter(woke, id, ta, 1, 0)
        } else if (pattern[id] === 'S') {
          await blocked(collect(woke, spawn('wait', { view, index: 1, value: 0, id })))
        } else {
          await collect(woke, spawn('waitAsync', { view, index: 1, value: 0, ids: [id] })).next('queued')
        }
      }
      for (let k = 0; k < pattern.length; k++) {
        assert.strictEqual(notify(ta, 1, 1), 1, `notify ${k} found a waiter`)
        await until(() => woke.length > k, `wake-up ${k}`)
      }
      assert.strictEqual(notify(ta, 1), 0, 'nobody left')
      assert.deepStrictEqual(woke.map((x) => x.id), pattern.split('').map((_, id) => id), 'wake order = enqueue order')
      assert.ok(woke.every((x) => x.result === 'ok'), JSON.stringify(woke))
    }))
  }
})

describe('notify counts', () => {
  test('three blocked workers: notify(…, 2) wakes 2 (the first two), then 1, then 0', LINUX_ONLY, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const woke = []
    for (let id = 0; id < 3; id++) {
      await blocked(collect(woke, spawn('wait', { view: describeView(ta), index: 0, value: 0, id })))
    }
    assert.strictEqual(notify(ta, 0, 2), 2)
    await until(() => woke.length === 2, 'two workers to wake')
    assert.deepStrictEqual(woke.map((x) => x.id).sort(), [0, 1])
    assert.strictEqual(notify(ta, 0, 2), 1)
    await until(() => woke.length === 3, 'the third worker to wake')
    assert.strictEqual(woke[2].id, 2)
    assert.strictEqual(notify(ta, 0, 2), 0)
    assert.ok(woke.every((x) => x.result === 'ok'))
  }))

  test('notify(…, 0) and notify at another index wake nobody, even with a blocked worker', LINUX_ONLY, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0, 0])
    const w = spawn('wait', { view: describeView(ta), index: 0, value: 0 })
    await blocked(w)
    assert.strictEqual(notify(ta, 0, 0), 0)
    assert.strictEqual(notify(ta, 1), 0)
    assert.strictEqual(notify(ta, 0), 1)
    assert.strictEqual((await w.next('result')).result, 'ok')
  }))
})

describe('timeouts', () => {
  const T = 50
  const inRange = (elapsed) => {
    assert.ok(elapsed >= T, `waited ${elapsed} ms, at least ${T}`)
    assert.ok(elapsed < 10000, `waited ${elapsed} ms, far beyond ${T}`)
  }

  test(`a worker's wait(…, ${T}) returns timed-out after ≥ ${T} ms, and leaves the queue`, LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const w = spawn('wait', { view: describeView(ta), index: 0, value: 0, timeout: T })
    const m = await w.next('result')
    assert.strictEqual(m.result, 'timed-out')
    inRange(m.elapsed)
    assert.strictEqual(notify(ta, 0), 0)
  }))

  test(`wait(…, ${T}) on the main thread returns timed-out after ≥ ${T} ms`, () => {
    const ta = sharedI32([0])
    const t0 = now()
    assert.strictEqual(wait(ta, 0, 0, T), 'timed-out')
    inRange(now() - t0)
    assert.strictEqual(notify(ta, 0), 0)
  })

  test(`waitAsync(…, ${T}) on the main thread resolves timed-out after ≥ ${T} ms, and leaves the queue`, LONG, () => withWorkers(async () => {
    const ta = sharedI32([0])
    const t0 = now()
    const r = waitAsync(ta, 0, 0, T)
    assert.strictEqual(r.async, true)
    assert.strictEqual(await r.value, 'timed-out')
    inRange(now() - t0)
    assert.strictEqual(notify(ta, 0), 0)
  }))

  test(`a worker's waitAsync(…, ${T}) resolves timed-out after ≥ ${T} ms`, LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const w = spawn('waitAsync', { view: describeView(ta), index: 0, value: 0, timeout: T, ids: [0] })
    const m = await w.next('result')
    assert.deepStrictEqual([m.async, m.result], [true, 'timed-out'])
    inRange(m.elapsed)
    assert.strictEqual(notify(ta, 0), 0)
  }))

  test('a timed-out waiter ahead in the queue does not swallow a wake-up', LONG, () => withWorkers(async () => {
    const ta = sharedI32([0])
    const woke = []
    asyncWaiter(woke, 'short', ta, 0, 0, 20)
    asyncWaiter(woke, 'forever', ta, 0, 0)
    await until(() => woke.length === 1, 'the short waiter to time out')
    assert.strictEqual(notify(ta, 0, 1), 1)
    await until(() => woke.length === 2, 'the second waiter to wake')
    assert.deepStrictEqual(woke, [{ id: 'short', result: 'timed-out' }, { id: 'forever', result: 'ok' }])
  }))

  test('a timed-out sync waiter ahead in the queue does not swallow a wake-up', LINUX_ONLY, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const woke = []
    const view = describeView(ta)
    await blocked(collect(woke, spawn('wait', { view, index: 0, value: 0, timeout: 1000, id: 'short' })))
    await blocked(collect(woke, spawn('wait', { view, index: 0, value: 0, id: 'forever' })))
    await until(() => woke.length === 1, 'the short waiter to time out')
    assert.strictEqual(notify(ta, 0, 1), 1)
    await until(() => woke.length === 2, 'the second waiter to wake')
    assert.deepStrictEqual(woke, [{ id: 'short', result: 'timed-out' }, { id: 'forever', result: 'ok' }])
  }))
})

describe('exactly one outcome per waiter (notify racing timeouts)', () => {
  // notify returns how many waiters it woke; each of those must see 'ok' and
  // every other one 'timed-out'. A waiter both woken and timed out breaks
  // "sum of notify results = number of ok" one way or the other.
  test('sync waiters in two workers, 1 ms timeouts, a third worker notifying every 0–2 ms', LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const view = describeView(ta)
    const stop = new SharedArrayBuffer(4)
    const rounds = 300
    const waiters = [0, 1].map(() => spawn('waitLoop', { view, index: 0, value: 0, timeout: 1, rounds }))
    const notifier = spawn('notifyLoop', { view, index: 0, stop, pause: 2 })
    const done = await Promise.all(waiters.map((w) => w.next('done', 60000)))
    Atomics.store(new Int32Array(stop), 0, 1)
    const { woken } = await notifier.next('done')
    let ok = 0
    for (const { counts } of done) {
      assert.strictEqual(counts['not-equal'], 0)
      assert.strictEqual(counts.ok + counts['timed-out'], rounds)
      ok += counts.ok
    }
    assert.strictEqual(ok, woken, `${ok} waits returned ok, notify reported ${woken} woken`)
  }))

  test('async waiters on the main thread, 1–3 ms timeouts, a worker notifying', LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI32([0])
    const stop = new SharedArrayBuffer(4)
    const notifier = spawn('notifyLoop', { view: describeView(ta), index: 0, stop })
    const tally = { ok: 0, 'timed-out': 0 }
    for (let batch = 0; batch < 20; batch++) {
      const rs = []
      for (let i = 0; i < 50; i++) rs.push(waitAsync(ta, 0, 0, 1 + (i % 3)))
      for (const r of rs) {
        assert.strictEqual(r.async, true)
        tally[await r.value]++
      }
    }
    Atomics.store(new Int32Array(stop), 0, 1)
    const { woken } = await notifier.next('done')
    assert.strictEqual(tally.ok + tally['timed-out'], 1000)
    assert.strictEqual(tally.ok, woken, `${tally.ok} promises resolved ok, notify reported ${woken} woken`)
  }))
})

describe('BigInt64Array across threads', () => {
  test('a worker waiting on a BigInt64Array is woken by the main thread', LONG, () => withWorkers(async (spawn) => {
    const big = 2n ** 40n + 7n
    const ta = sharedI64([0n, big])
    const w = spawn('wait', { view: describeView(ta), index: 1, value: big })
    if (canObserveBlocking) {
      await blocked(w)
      assert.strictEqual(notify(ta, 0), 0, 'index 0 is another address')
      assert.strictEqual(notify(ta, 1, 1), 1)
    } else {
      await until(() => notify(ta, 1, 1) === 1, 'notify to find the waiting worker')
    }
    assert.strictEqual((await w.next('result')).result, 'ok')
  }))

  test('a worker whose value differs only in the high word gets not-equal', LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI64([2n ** 32n + 7n])
    const w = spawn('wait', { view: describeView(ta), index: 0, value: 7n })
    assert.strictEqual((await w.next('result')).result, 'not-equal')
  }))

  test("the main thread's waitAsync on a BigInt64Array is woken by a worker", LONG, () => withWorkers(async (spawn) => {
    const ta = sharedI64([0n, -1n])
    const r = waitAsync(ta, 1, -1n)
    assert.strictEqual(r.async, true)
    const w = spawn('notify', { view: describeView(ta), index: 1 })
    assert.strictEqual((await w.next('result')).result, 1)
    assert.strictEqual(await r.value, 'ok')
  }))
})

describe('byteOffset views across threads: one element, two views', () => {
  test('worker waits on Int32Array(sab, 8, 2)[0], main notifies Int32Array(sab)[2]', LONG, () => withWorkers(async (spawn) => {
    const sab = new SharedArrayBuffer(16)
    const full = new Int32Array(sab)
    const w = spawn('wait', { view: describeView(new Int32Array(sab, 8, 2)), index: 0, value: 0 })
    if (canObserveBlocking) {
      await blocked(w)
      assert.strictEqual(notify(full, 0), 0, 'element 0 is another address')
      assert.strictEqual(notify(full, 3), 0, 'element 3 is another address')
      assert.strictEqual(notify(new Int32Array(sab, 4, 1), 0), 0, 'byte 4 is another address')
      assert.strictEqual(notify(full, 2, 1), 1)
    } else {
      await until(() => notify(full, 2, 1) === 1, 'notify to find the waiting worker')
    }
    assert.strictEqual((await w.next('result')).result, 'ok')
  }))

  test("main waits on Int32Array(sab)[3], a worker notifies Int32Array(sab, 8, 2)[1]", LONG, () => withWorkers(async (spawn) => {
    const sab = new SharedArrayBuffer(16)
    const r = waitAsync(new Int32Array(sab), 3, 0)
    assert.strictEqual(r.async, true)
    const w = spawn('notify', { view: describeView(new Int32Array(sab, 8, 2)), index: 1 })
    assert.strictEqual((await w.next('result')).result, 1)
    assert.strictEqual(await r.value, 'ok')
  }))

  test('async waiter in a worker on BigInt64Array(sab, 8, 1)[0], main notifies BigInt64Array(sab)[1]', LONG, () => withWorkers(async (spawn) => {
    const sab = new SharedArrayBuffer(24)
    const full = new BigInt64Array(sab)
    const woke = []
    const w = collect(woke, spawn('waitAsync', { view: describeView(new BigInt64Array(sab, 8, 1)), index: 0, value: 0n, ids: [0] }))
    await w.next('queued')
    assert.strictEqual(notify(full, 0), 0)
    assert.strictEqual(notify(full, 2), 0)
    assert.strictEqual(notify(full, 1), 1)
    await until(() => woke.length === 1, 'the worker\'s waiter to resolve')
    assert.deepStrictEqual(woke, [{ id: 0, result: 'ok' }])
  }))

  test('worker waits on BigInt64Array(sab, 8)[0], main notifies Int32Array(sab)[2] (same byte address)', LONG, () => withWorkers(async (spawn) => {
    const sab = new SharedArrayBuffer(24)
    const w = spawn('wait', { view: describeView(new BigInt64Array(sab, 8)), index: 0, value: 0n })
    const full = new Int32Array(sab)
    if (canObserveBlocking) {
      await blocked(w)
      assert.strictEqual(notify(full, 3), 0, 'byte 12 is another address')
      assert.strictEqual(notify(full, 2), 1)
    } else {
      await until(() => notify(full, 2) === 1, 'notify to find the waiting worker')
    }
    assert.strictEqual((await w.next('result')).result, 'ok')
  }))
})
