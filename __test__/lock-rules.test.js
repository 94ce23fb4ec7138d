'use strict'
// Every rule of AsyncLock, one test or more each: the pure-JS fast
// path, the state word, ownership errors, timeouts and abort leaving the
// queue, the handoff that newcomers cannot steal, dead owners, and input
// validation. Threads synchronise on shared memory and queue lengths only.
const assert = require('assert')
const { test, describe } = require('./harness')
const sf = require('..')
const binding = require('../lib/native')
const { cells, waiters, handle, startWorker, until } = require('./fixtures/lock-util')

const { AsyncLock } = sf
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')
const MAIN = 1 // the main thread's owner id (threadId 0 + 1)
const HAS_ABORT = typeof AbortController === 'function'

const isDeadlock = { name: 'DeadlockError', code: 'ERR_LOCK_DEADLOCK' }
const isNotOwner = { name: 'LockOwnershipError', code: 'ERR_LOCK_NOT_OWNER' }
const isTimeout = { name: 'LockTimeoutError', code: 'ERR_LOCK_TIMEOUT' }

// Counts calls into the addon's wait / notify / waitAsync while f runs. The
// lock's own entry points count as what they do: lockWait and lockTry wait
// (or look) blocking, lockWaitAsync queues an async waiter, lockRelease wakes.
async function nativeCalls (f) {
  const names = ['wait', 'notify', 'waitAsync', 'lockWait', 'lockTry', 'lockWaitAsync', 'lockRelease']
  const as = { lockWait: 'wait', lockTry: 'wait', lockWaitAsync: 'waitAsync', lockRelease: 'notify' }
  const saved = {}
  const counts = { wait: 0, notify: 0, waitAsync: 0 }
  for (const n of names) {
    saved[n] = binding[n]
    const counted = as[n] || n
    binding[n] = function () {
      counts[counted]++
      return saved[n].apply(this, arguments)
    }
  }
  try {
    await f()
  } finally {
    for (const n of names) binding[n] = saved[n]
  }
  return counts
}

// The handoff rule is about time: a queued waiter is handed the lock once
// its acquisition has waited 1 ms. Let more than that pass (the waiter
// queued before this is called; nothing here measures anything).
function waitedLongEnough () {
  const { performance } = require('perf_hooks') // no global before Node 16
  const start = performance.now()
  return until(() => performance.now() - start > 2, '2 ms to pass')
}

// A worker that holds `lock` until told to unlock (send anything).
async function heldByWorker (lock) {
  const w = startWorker('hold', { lock: handle(lock), then: 'message' })
  assert.strictEqual((await w.next('held')).status, 'acquired')
  return w
}

describe('AsyncLock: fast path and state word', () => {
  test('uncontended lock/unlock, tryLock, lockAsync, runExclusive never call into the addon', async () => {
    const lock = new AsyncLock()
    const counts = await nativeCalls(async () => {
      for (let i = 0; i < 1000; i++) {
        lock.lock()
        lock.unlock()
      }
      assert.strictEqual(lock.tryLock(), 'acquired')
      lock.unlock()
      const release = await lock.lockAsync()
      release()
      assert.strictEqual(await lock.runExclusive(() => 7), 7)
      assert.strictEqual(await lock.executeLocked(async () => 8), 8)
    })
    assert.deepStrictEqual(counts, { wait: 0, notify: 0, waitAsync: 0 })
  })

  test('under contention the waiter sleeps in the addon; the holder\'s unlock wakes it; with nobody else waiting its own unlock is pure JS', async () => {
    const lock = new AsyncLock()
    const w = await heldByWorker(lock)
    try {
      const counts = await nativeCalls(async () => {
        const p = lock.lockAsync()
        await until(() => waiters(lock) === 1, 'the main thread to queue')
        w.send('unlock')
        const release = await p
        // We took it after contention, and nobody else waits: WORD names us
        // and its waiters bit is clear (it is set exactly while some wait).
        assert.strictEqual(cells(lock)[0], MAIN * 2)
        release()
      })
      assert.ok(counts.waitAsync >= 1, JSON.stringify(counts))
      assert.strictEqual(counts.notify, 0, JSON.stringify(counts))
      assert.strictEqual(cells(lock)[0], 0)
    } finally {
      await w.terminate()
    }
  })

  test('WORD holds the owner id: (threadId + 1) · 2', async () => {
    const lock = new AsyncLock()
    lock.lock()
    assert.strictEqual(cells(lock)[0], MAIN * 2)
    lock.unlock()
    const w = startWorker('reentrant', { lock: handle(lock) })
    const r = await w.next('result')
    assert.strictEqual(r.stillHeld, true) // checked against (threadId + 1) · 2 in the worker
    assert.strictEqual(r.threadId, w.threadId)
    await w.exit
  })

  test('locks at different offsets of one buffer are independent; a rebuilt copy is the same lock', () => {
    const sab = new SharedArrayBuffer(3 * AsyncLock.BYTES)
    const a = new AsyncLock(sab, 0)
    const b = new AsyncLock(sab, AsyncLock.BYTES)
    assert.strictEqual(a.lock(), 'acquired')
    assert.strictEqual(b.tryLock(), 'acquired')
    const a2 = new AsyncLock(a.buffer, a.byteOffset)
    assert.strictEqual(a2.isLocked, true)
    assert.strictEqual(a2.tryLock(), false)
    a2.unlock() // same thread, same lock
    assert.strictEqual(a.isLocked, false)
    assert.strictEqual(b.isLocked, true)
    b.unlock()
    assert.strictEqual(b.byteOffset, 8)
    assert.strictEqual(b.buffer, sab)
  })
})

describe('AsyncLock: ownership', () => {
  test('lock() by the thread that holds it throws DeadlockError and keeps it held (main thread)', () => {
    const lock = new AsyncLock()
    lock.lock()
    assert.throws(() => lock.lock(), isDeadlock)
    assert.throws(() => lock.lock(5), isDeadlock)
    assert.strictEqual(cells(lock)[0], MAIN * 2)
    assert.strictEqual(lock.tryLock(), false)
    lock.unlock()
    assert.strictEqual(lock.isLocked, false)
  })

  test('lock() by the thread that holds it throws DeadlockError (worker)', async () => {
    const lock = new AsyncLock()
    const w = startWorker('reentrant', { lock: handle(lock) })
    const r = await w.next('result')
    assert.strictEqual(r.error.name, 'DeadlockError')
    assert.strictEqual(r.error.code, 'ERR_LOCK_DEADLOCK')
    assert.strictEqual(r.stillHeld, true)
    await w.exit
    assert.strictEqual(lock.isLocked, false)
  })

  test('lockAsync() by the holding thread queues (another task of it may hold the lock)', async () => {
    const lock = new AsyncLock()
    lock.lock()
    let got = false
    const p = lock.lockAsync().then((release) => {
      got = true
      return release
    })
    await until(() => waiters(lock) === 1, 'lockAsync to queue')
    assert.strictEqual(got, false)
    lock.unlock()
    const release = await p
    assert.strictEqual(lock.isLocked, true)
    release()
    assert.strictEqual(lock.isLocked, false)
  })

  test('unlock() by a thread that does not hold it throws LockOwnershipError, naming the holder', async () => {
    const lock = new AsyncLock()
    assert.throws(() => lock.unlock(), Object.assign({ message: /not locked/ }, isNotOwner))
    lock.lock()
    const w = startWorker('foreignUnlock', { lock: handle(lock) })
    const r = await w.next('result')
    assert.strictEqual(r.error.code, 'ERR_LOCK_NOT_OWNER')
    assert.match(r.error.message, /main thread/)
    await w.exit
    assert.strictEqual(cells(lock)[0], MAIN * 2, 'still held by the main thread')
    lock.unlock()

    const h = await heldByWorker(lock)
    try {
      assert.throws(() => lock.unlock(), Object.assign({ message: new RegExp(`threadId ${h.threadId}`) }, isNotOwner))
      assert.strictEqual(lock.isLocked, true)
    } finally {
      await h.terminate()
    }
  })

  test('a release function is idempotent and Symbol.dispose-able', async () => {
    const lock = new AsyncLock()
    const r1 = await lock.lockAsync()
    assert.strictEqual(typeof r1[DISPOSE], 'function')
    assert.strictEqual(r1.ownerDied, false)
    r1()
    r1()
    const r2 = await lock.lockAsync()
    r1() // a stale release does not release someone else's hold
    r1[DISPOSE]()
    assert.strictEqual(lock.isLocked, true)
    r2[DISPOSE]()
    assert.strictEqual(lock.isLocked, false)
    r2()
  })

  test('runExclusive / executeLocked return the callback\'s result, pass { ownerDied }, release on throw', async () => {
    const lock = new AsyncLock()
    assert.deepStrictEqual(await lock.runExclusive((info) => info), { ownerDied: false })
    assert.strictEqual(await lock.executeLocked(() => Promise.resolve('v')), 'v')
    await assert.rejects(lock.runExclusive(() => { throw new URIError('x') }), URIError)
    assert.strictEqual(lock.isLocked, false)
  })

  test('runExclusive never calls back synchronously, and holds the lock only while the callback runs', async () => {
    const lock = new AsyncLock()
    let heldInside = null
    const p = lock.runExclusive(() => { heldInside = lock.isLocked })
    assert.strictEqual(heldInside, null)
    assert.strictEqual(lock.isLocked, false)
    await p
    assert.strictEqual(heldInside, true)
    assert.strictEqual(lock.isLocked, false)
  })
})

describe('AsyncLock: timeouts and abort leave the queue', () => {
  test('lockAsync({ timeout }) rejects with LockTimeoutError; the waiter never takes the lock later', async () => {
    const lock = new AsyncLock()
    const w = await heldByWorker(lock)
    try {
      await assert.rejects(lock.lockAsync({ timeout: 30 }), isTimeout)
      let ran = false
      await assert.rejects(lock.runExclusive(() => { ran = true }, { timeout: 5 }), isTimeout)
      assert.strictEqual(ran, false)
      assert.strictEqual(waiters(lock), 0)
      assert.strictEqual(cells(lock)[1], 0, 'no heir left registered')
      w.send('unlock')
      await w.next('released')
      assert.strictEqual(lock.isLocked, false, 'nobody took it')
    } finally {
      await w.terminate()
    }
  })

  test('timeout 0 tries once', async () => {
    const lock = new AsyncLock()
    const release = await lock.lockAsync({ timeout: 0 })
    const w = startWorker('lockTimeout', { lock: handle(lock), timeout: 0 })
    assert.strictEqual((await w.next('result')).error.code, 'ERR_LOCK_TIMEOUT')
    await w.exit
    release()
  })

  test('blocking lock(timeout) throws LockTimeoutError and leaves the queue (worker and main thread)', async () => {
    const lock = new AsyncLock()
    lock.lock()
    const w = startWorker('lockTimeout', { lock: handle(lock), timeout: 20 })
    const r = await w.next('result')
    assert.strictEqual(r.error.name, 'LockTimeoutError')
    assert.strictEqual(r.error.code, 'ERR_LOCK_TIMEOUT')
    assert.strictEqual(r.waiters, 0)
    await w.exit
    lock.unlock()

    const h = await heldByWorker(lock)
    try {
      assert.throws(() => lock.lock(10), isTimeout)
      assert.strictEqual(waiters(lock), 0)
    } finally {
      await h.terminate()
    }
  })

  test('abort while queued rejects with AbortError (cause: the reason) and leaves the queue', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const w = await heldByWorker(lock)
    try {
      const ac = new AbortController()
      const p = lock.lockAsync({ signal: ac.signal })
      await until(() => waiters(lock) === 1, 'the waiter to queue')
      const reason = new Error('changed my mind')
      ac.abort(reason)
      await assert.rejects(p, (e) => {
        assert.strictEqual(e.name, 'AbortError')
        assert.strictEqual(e.code, 'ABORT_ERR')
        assert.ok(e instanceof sf.AbortError)
        if ('reason' in ac.signal) assert.strictEqual(e.cause, reason)
        return true
      })
      assert.strictEqual(waiters(lock), 0)
      w.send('unlock')
      await w.next('released')
      assert.strictEqual(lock.isLocked, false)
    } finally {
      await w.terminate()
    }
  })

  test('abort after waiting long enough to be handed the lock withdraws; the next unlock does not hand it over', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const w = await heldByWorker(lock)
    try {
      const ac = new AbortController()
      const p = lock.lockAsync({ signal: ac.signal })
      // After 1 ms of waiting the next unlock would hand the lock to it.
      await until(() => waiters(lock) === 1, 'the main thread to queue')
      await waitedLongEnough()
      assert.strictEqual(cells(lock)[0], w.threadId * 2 + 2 + 1, 'held by the worker, a waiter queued')
      ac.abort()
      await assert.rejects(p, { name: 'AbortError' })
      assert.strictEqual(cells(lock)[0], (w.threadId + 1) * 2, 'the last waiter left: the waiters bit is clear')
      assert.strictEqual(cells(lock)[1], 0)
      assert.strictEqual(waiters(lock), 0)
      w.send('unlock')
      await w.next('released')
      assert.strictEqual(lock.isLocked, false)
    } finally {
      await w.terminate()
    }
  })

  test('an already aborted signal rejects at once and takes nothing, even a free lock', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const ac = new AbortController()
    ac.abort()
    await assert.rejects(lock.lockAsync({ signal: ac.signal }), { name: 'AbortError' })
    let ran = false
    await assert.rejects(lock.runExclusive(() => { ran = true }, { signal: ac.signal }), { name: 'AbortError' })
    assert.strictEqual(ran, false)
    assert.strictEqual(lock.isLocked, false)
  })

  test('aborting after the lock was acquired changes nothing', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const ac = new AbortController()
    const release = await lock.lockAsync({ signal: ac.signal })
    ac.abort()
    assert.strictEqual(lock.isLocked, true)
    release()
    assert.strictEqual(lock.isLocked, false)
  })
})

describe('AsyncLock: bounded unfairness', () => {
  for (const mode of ['sync', 'async']) {
    test(`a waiter that waited > 1 ms (${mode}) is handed the lock; a newcomer cannot take it`, async () => {
      const lock = new AsyncLock()
      lock.lock()
      const w = startWorker('acquire', { lock: handle(lock), mode })
      try {
        const heir = w.threadId + 1
        await until(() => waiters(lock) === 1, 'the worker to queue')
        await waitedLongEnough()
        lock.unlock()
        // Handed off: WORD already names the heir (nobody else waits, so no
        // waiters bit); the lock was never free.
        assert.strictEqual(cells(lock)[0], heir * 2)
        assert.strictEqual(lock.tryLock(), false)
        await assert.rejects(lock.lockAsync({ timeout: 0 }), isTimeout)
        assert.strictEqual((await w.next('acquired')).status, 'acquired')
        assert.strictEqual(cells(lock)[1], 0, 'the second cell stays unused')
        w.send('unlock')
        await w.next('released')
        assert.strictEqual(lock.isLocked, false)
      } finally {
        await w.terminate()
      }
    })
  }

  test('a heir whose thread is gone is skipped', async () => {
    const lock = new AsyncLock()
    lock.lock()
    const w = startWorker('acquire', { lock: handle(lock), mode: 'sync' })
    try {
      await until(() => waiters(lock) === 1, 'the worker to queue')
      await waitedLongEnough()
    } finally {
      await w.terminate()
    }
    assert.strictEqual(waiters(lock), 0)
    assert.strictEqual(cells(lock)[0], MAIN * 2, 'the leaving waiter cleared the waiters bit')
    lock.unlock()
    assert.strictEqual(cells(lock)[0], 0)
    assert.strictEqual(cells(lock)[1], 0)
  })
})

describe('AsyncLock: a dead owner\'s lock is recovered, and the next owner is told', () => {
  test('worker terminated while holding it, main thread waiting: lockAsync resolves with ownerDied', async () => {
    const lock = new AsyncLock()
    const w = startWorker('hold', { lock: handle(lock), then: 'stay' })
    await w.next('held')
    const p = lock.lockAsync()
    await until(() => waiters(lock) === 1, 'the main thread to queue')
    await w.terminate()
    const release = await p
    assert.strictEqual(release.ownerDied, true)
    assert.strictEqual(cells(lock)[0] >>> 1, MAIN)
    release()
    assert.strictEqual(lock.isLocked, false)
    // The next acquisition is an ordinary one.
    assert.strictEqual((await lock.lockAsync()).ownerDied, false)
  })

  test('the death is pushed to the oldest waiter, and an abort that comes after it does not hide it', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const lock = new AsyncLock()
    const w = startWorker('hold', { lock: handle(lock), then: 'stay' })
    await w.next('held')
    const ac = new AbortController()
    const p = lock.lockAsync({ signal: ac.signal })
    await until(() => waiters(lock) === 1, 'the main thread to queue')
    const exited = w.terminate()
    // Without returning to the event loop (so the outcome cannot have been
    // delivered yet): the worker's teardown hands the lock to the main thread.
    const giveUp = Date.now() + 20000
    while (cells(lock)[0] >>> 1 !== MAIN) assert.ok(Date.now() < giveUp, 'the death was never pushed')
    ac.abort()
    const release = await p
    assert.strictEqual(release.ownerDied, true)
    release()
    await exited
    // Reported once: the next acquisition is an ordinary one.
    assert.strictEqual(lock.tryLock(), 'acquired')
    lock.unlock()
  })

  for (const how of ['exit', 'return']) {
    test(`worker leaves by ${how} while holding it: tryLock / runExclusive report it`, async () => {
      const lock = new AsyncLock()
      const w = startWorker('hold', { lock: handle(lock), then: how })
      await w.next('held')
      await w.exit
      assert.strictEqual(lock.isLocked, true)
      if (how === 'exit') {
        assert.strictEqual(lock.tryLock(), 'owner-died')
        lock.unlock()
      } else {
        assert.deepStrictEqual(await lock.runExclusive((info) => info), { ownerDied: true })
      }
      assert.strictEqual(lock.isLocked, false)
    })
  }

  test('a blocked lock() in another worker gets OWNER_DIED', async () => {
    const lock = new AsyncLock()
    const holder = startWorker('hold', { lock: handle(lock), then: 'stay' })
    await holder.next('held')
    const waiter = startWorker('acquire', { lock: handle(lock), mode: 'sync' })
    try {
      await waiter.next('waiting')
      await until(() => waiters(lock) === 1, 'the worker to queue')
      await holder.terminate()
      assert.strictEqual((await waiter.next('acquired')).status, sf.OWNER_DIED)
      waiter.send('unlock')
      await waiter.next('released')
      assert.strictEqual(lock.isLocked, false)
    } finally {
      await waiter.terminate()
    }
  })
})

describe('AsyncLock: bad input throws TypeError / RangeError and leaves nothing locked', () => {
  test('constructor', () => {
    const sab = new SharedArrayBuffer(16)
    assert.throws(() => new AsyncLock(new ArrayBuffer(8)), TypeError)
    assert.throws(() => new AsyncLock(new Int32Array(sab)), TypeError)
    assert.throws(() => new AsyncLock(sab, '4'), TypeError)
    assert.throws(() => new AsyncLock(undefined, 4), TypeError)
    assert.throws(() => new AsyncLock(sab, 2), RangeError)
    assert.throws(() => new AsyncLock(sab, 1.5), RangeError)
    assert.throws(() => new AsyncLock(sab, -4), RangeError)
    assert.throws(() => new AsyncLock(sab, 12), RangeError) // 8 bytes do not fit
    assert.throws(() => new AsyncLock(new SharedArrayBuffer(4)), RangeError)
    assert.strictEqual(new AsyncLock(sab, 8).byteOffset, 8)
    assert.deepStrictEqual(Array.from(new Int32Array(sab)), [0, 0, 0, 0])
  })

  test('methods', async () => {
    const lock = new AsyncLock()
    assert.throws(() => lock.lock(-1), RangeError)
    assert.throws(() => lock.lock(NaN), RangeError)
    assert.throws(() => lock.lock('10'), TypeError)
    await assert.rejects(lock.lockAsync({ timeout: -1 }), RangeError)
    await assert.rejects(lock.lockAsync({ timeout: '1' }), TypeError)
    await assert.rejects(lock.lockAsync({ signal: {} }), TypeError)
    await assert.rejects(lock.lockAsync(5), TypeError)
    await assert.rejects(lock.runExclusive('not a function'), TypeError)
    await assert.rejects(lock.runExclusive(), TypeError)
    await assert.rejects(lock.executeLocked(null), TypeError)
    await assert.rejects(lock.runExclusive(() => {}, { timeout: -5 }), RangeError)
    assert.strictEqual(lock.isLocked, false)
    assert.strictEqual(waiters(lock), 0)
  })
})
