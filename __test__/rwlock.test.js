'use strict'
// Every rule of RwLock, one test or more each: the pure-JS fast paths, the
// snapshot getters, ownership and deadlock errors, timeouts and abort
// leaving the queues, phase-fair handoff, downgrade, readers past the slots,
// exactness under contention, fairness both ways, and bad input. Threads
// synchronise on shared memory and queue lengths only; the main thread is
// async and the workers block.
const assert = require('assert')
const { test, describe } = require('./harness')
const { RwLock, AsyncLock } = require('..')
const binding = require('../lib/native')
const { until, cells, queued, rwWorker } = require('./fixtures/rwlock-util')

const HAS_ABORT = typeof AbortController === 'function'
const isDeadlock = { name: 'DeadlockError', code: 'ERR_LOCK_DEADLOCK' }
const isNotOwner = { name: 'LockOwnershipError', code: 'ERR_LOCK_NOT_OWNER' }
const isTimeout = { name: 'LockTimeoutError', code: 'ERR_LOCK_TIMEOUT' }
const isAbort = { name: 'AbortError', code: 'ABORT_ERR' }
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')

// Counts calls into the addon's reader-writer entry points while f runs.
async function nativeCalls (f) {
  const names = Object.keys(binding).filter((n) => n.startsWith('rw'))
  const saved = {}
  let count = 0
  for (const n of names) {
    saved[n] = binding[n]
    binding[n] = function () {
      count++
      return saved[n].apply(this, arguments)
    }
  }
  try {
    await f()
  } finally {
    for (const n of names) binding[n] = saved[n]
  }
  return count
}

// An unlock hands the lock over (phase-fair) once the oldest waiter has
// waited 1 ms; younger waiters are woken to compete. Let more than that pass
// (the waiters queued before this is called; nothing here measures anything).
function waitedLongEnough () {
  const { performance } = require('perf_hooks') // no global before Node 16
  const start = performance.now()
  return until(() => performance.now() - start > 2, '2 ms to pass')
}

// The lock is free and nothing is queued or left behind.
function assertIdle (lock) {
  assert.deepStrictEqual(Array.from(cells(lock)), [0, 0, 0, 0])
  assert.strictEqual(queued(lock), 0)
  assert.strictEqual(binding.rwOverflowReaders(cells(lock), 0), 0)
}

// A worker that takes the lock blocking (`how`: 'read' / 'write'), says
// 'held', and releases when sent anything.
async function heldByWorker (lock, how) {
  const w = rwWorker(`
    const status = lock.${how}()
    post('held', { status })
    parentPort.once('message', () => { lock.${how}Unlock(); post('released') })
  `, lock)
  assert.strictEqual((await w.next('held')).status, 'acquired')
  return w
}

describe('RwLock: fast paths and snapshots', () => {
  test('uncontended read, write, tryRead, tryWrite, readAsync, writeAsync, runRead, runWrite never call into the addon', async () => {
    const lock = new RwLock()
    const calls = await nativeCalls(async () => {
      for (let i = 0; i < 1000; i++) {
        assert.strictEqual(lock.read(), 'acquired')
        lock.readUnlock()
        assert.strictEqual(lock.write(), 'acquired')
        lock.writeUnlock()
      }
      assert.strictEqual(lock.tryRead(), 'acquired')
      assert.strictEqual(lock.tryRead(), 'acquired') // readers share
      lock.readUnlock()
      lock.readUnlock()
      assert.strictEqual(lock.tryWrite(), 'acquired')
      lock.writeUnlock()
      const r = await lock.readAsync()
      r()
      const w = await lock.writeAsync()
      w()
      assert.strictEqual(await lock.runRead(() => 7), 7)
      assert.strictEqual(await lock.runWrite(async () => 8), 8)
    })
    assert.strictEqual(calls, 0)
    assertIdle(lock)
  })

  test('BYTES, buffer, byteOffset; copies at the same offset are the same lock; snapshots', async () => {
    assert.strictEqual(RwLock.BYTES, 16)
    assert.strictEqual(RwLock.ACQUIRED, 'acquired')
    assert.strictEqual(RwLock.OWNER_DIED, 'owner-died')
    const sab = new SharedArrayBuffer(64)
    const a = new RwLock(sab, 16)
    const b = new RwLock(sab, 16)
    assert.strictEqual(a.buffer, sab)
    assert.strictEqual(a.byteOffset, 16)
    a.read()
    a.read()
    assert.strictEqual(b.readers, 2)
    assert.strictEqual(b.isWriteLocked, false)
    assert.strictEqual(b.tryWrite(), false)
    a.readUnlock()
    a.readUnlock()
    b.write()
    assert.strictEqual(a.isWriteLocked, true)
    assert.strictEqual(a.readers, 0)
    assert.strictEqual(a.tryRead(), false)
    b.writeUnlock()
    assert.deepStrictEqual(Array.from(new Int32Array(sab)), new Array(16).fill(0))
  })
})

describe('RwLock: ownership and deadlocks', () => {
  test('writeUnlock by a thread without the write lock, readUnlock without a read lock: LockOwnershipError, nothing changes', async () => {
    const lock = new RwLock()
    assert.throws(() => lock.writeUnlock(), isNotOwner)
    assert.throws(() => lock.readUnlock(), isNotOwner)
    assert.throws(() => lock.downgrade(), isNotOwner)
    lock.read()
    assert.throws(() => lock.writeUnlock(), isNotOwner)
    lock.readUnlock()
    assert.throws(() => lock.readUnlock(), isNotOwner)
    const w = await heldByWorker(lock, 'write')
    try {
      assert.throws(() => lock.writeUnlock(), (e) => isNotOwner.code === e.code && /worker with threadId/.test(e.message))
      assert.throws(() => lock.downgrade(), isNotOwner)
      assert.throws(() => lock.readUnlock(), isNotOwner)
      assert.strictEqual(lock.isWriteLocked, true)
      w.send('go')
      await w.next('released')
    } finally {
      await w.terminate()
    }
    assertIdle(lock)
  })

  test('a blocking write or read by the thread holding the write lock, or a blocking write by a reader: DeadlockError', () => {
    const lock = new RwLock()
    lock.write()
    assert.throws(() => lock.write(), isDeadlock)
    assert.throws(() => lock.read(), isDeadlock)
    lock.writeUnlock()
    lock.read()
    assert.throws(() => lock.write(), isDeadlock)
    assert.strictEqual(lock.isWriteLocked, false, 'the writer\'s place was given back')
    lock.readUnlock()
    assertIdle(lock)
  })

  test('a blocking write by a reader registered past the slots: DeadlockError, not a wait until its timeout', async () => {
    const lock = new RwLock()
    const workers = []
    try {
      for (let i = 0; i < 3; i++) workers.push(await heldByWorker(lock, 'read'))
      assert.strictEqual(lock.tryRead(), 'acquired') // past the slots: the workers hold them
      assert.strictEqual(binding.rwOverflowReaders(cells(lock), 0), 1)
      assert.throws(() => lock.write(60000), isDeadlock)
      assert.strictEqual(lock.isWriteLocked, false, 'the writer\'s place was given back')
      assert.strictEqual(queued(lock), 0)
      lock.readUnlock()
      for (const w of workers) {
        w.send('release')
        await w.next('released')
      }
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assertIdle(lock)
  })

  test('async acquisitions of the holding thread wait like anyone else', async () => {
    const lock = new RwLock()
    const w = await lock.writeAsync()
    const second = lock.writeAsync()
    const reader = lock.readAsync()
    await until(() => queued(lock) === 2, 'two queued')
    await waitedLongEnough()
    w()
    const r = await reader
    assert.strictEqual(lock.readers, 1)
    r()
    ;(await second)()
    assertIdle(lock)
  })
})

describe('RwLock: bad input', () => {
  test('constructor: not shared, misaligned, too small, out of range, bad offset type', () => {
    assert.throws(() => new RwLock(new ArrayBuffer(16)), TypeError)
    assert.throws(() => new RwLock(new SharedArrayBuffer(16), '0'), TypeError)
    assert.throws(() => new RwLock(new SharedArrayBuffer(32), 2), RangeError)
    assert.throws(() => new RwLock(new SharedArrayBuffer(12)), RangeError)
    assert.throws(() => new RwLock(new SharedArrayBuffer(32), 20), RangeError)
    assert.throws(() => new RwLock(new SharedArrayBuffer(32), -4), RangeError)
    assert.throws(() => new RwLock(undefined, 4), TypeError)
  })

  test('methods called on something that is not a RwLock throw a TypeError', () => {
    const lock = new RwLock()
    for (const self of [{}, 1, new AsyncLock(), Object.create(RwLock.prototype)]) {
      assert.throws(() => RwLock.prototype.downgrade.call(self), TypeError)
      assert.throws(() => RwLock.prototype.tryWrite.call(self), TypeError)
    }
    assertIdle(lock)
  })

  test('timeouts and options: blocking methods throw, async ones reject', async () => {
    const lock = new RwLock()
    assert.throws(() => lock.read('1'), TypeError)
    assert.throws(() => lock.write(-1), RangeError)
    assert.throws(() => lock.write(NaN), RangeError)
    await assert.rejects(lock.readAsync({ timeout: -1 }), RangeError)
    await assert.rejects(lock.writeAsync(5), TypeError)
    await assert.rejects(lock.writeAsync({ signal: {} }), TypeError)
    await assert.rejects(lock.runRead(5), TypeError)
    await assert.rejects(lock.runWrite(() => {}, { timeout: 'x' }), TypeError)
    assertIdle(lock)
  })
})

describe('RwLock: timeouts and abort leave the queues', () => {
  test('a reader behind a writer and a writer waiting for readers time out; nothing stays queued or held', async () => {
    const lock = new RwLock()
    const w = await heldByWorker(lock, 'write')
    try {
      await assert.rejects(lock.readAsync({ timeout: 20 }), isTimeout)
      await assert.rejects(lock.writeAsync({ timeout: 20 }), isTimeout)
      assert.throws(() => lock.read(20), isTimeout)
      assert.strictEqual(queued(lock), 0)
      assert.strictEqual(cells(lock)[0] & 1, 0, 'PARKED is clear')
      w.send('go')
      await w.next('released')
    } finally {
      await w.terminate()
    }
    const r = await heldByWorker(lock, 'read')
    try {
      // The writer takes the writer's place, waits for the reader, gives up.
      await assert.rejects(lock.writeAsync({ timeout: 20 }), isTimeout)
      assert.throws(() => lock.write(20), isTimeout)
      assert.strictEqual(lock.isWriteLocked, false)
      assert.strictEqual(queued(lock), 0)
      assert.strictEqual(lock.tryRead(), 'acquired', 'readers come in again')
      lock.readUnlock()
      r.send('go')
      await r.next('released')
    } finally {
      await r.terminate()
    }
    assertIdle(lock)
  })

  test('abort: queued readers and writers leave; an already-aborted signal rejects at once', { skip: !HAS_ABORT && 'no AbortController before Node 15' }, async () => {
    const lock = new RwLock()
    const pre = new AbortController()
    pre.abort()
    await assert.rejects(lock.readAsync({ signal: pre.signal }), isAbort)
    const w = await heldByWorker(lock, 'write')
    try {
      const ac = new AbortController()
      const p1 = lock.readAsync({ signal: ac.signal })
      const p2 = lock.writeAsync({ signal: ac.signal })
      const p3 = lock.runRead(() => assert.fail('ran'), { signal: ac.signal })
      await until(() => queued(lock) === 3, 'three queued')
      ac.abort()
      await assert.rejects(p1, isAbort)
      await assert.rejects(p2, isAbort)
      await assert.rejects(p3, isAbort)
      assert.strictEqual(queued(lock), 0)
      w.send('go')
      await w.next('released')
    } finally {
      await w.terminate()
    }
    const r = await heldByWorker(lock, 'read')
    try {
      const ac = new AbortController()
      const p = lock.writeAsync({ signal: ac.signal })
      await until(() => queued(lock) === 1, 'the writer waits for the reader')
      ac.abort()
      await assert.rejects(p, isAbort)
      assert.strictEqual(lock.isWriteLocked, false)
      r.send('go')
      await r.next('released')
    } finally {
      await r.terminate()
    }
    assertIdle(lock)
  })
})

describe('RwLock: policy, handoff and downgrade (main thread async, workers blocking)', () => {
  test('phase-fair: a writer\'s unlock lets every queued reader in before the next writer; readers arriving while a writer waits queue behind it', async () => {
    const lock = new RwLock()
    const w = await heldByWorker(lock, 'write')
    const order = []
    try {
      const r1 = lock.readAsync().then((r) => { order.push('r1'); return r })
      await until(() => queued(lock) === 1, 'r1 queued')
      const w2 = lock.writeAsync().then((r) => { order.push('w2'); return r })
      await until(() => queued(lock) === 2, 'w2 queued')
      const r3 = lock.readAsync().then((r) => { order.push('r3'); return r })
      await until(() => queued(lock) === 3, 'r3 queued')
      await waitedLongEnough()
      w.send('go')
      await w.next('released')
      const [a, b] = await Promise.all([r1, r3])
      assert.deepStrictEqual(order, ['r1', 'r3'])
      assert.strictEqual(lock.readers, 2)
      // w2 has the writer's place: a new reader queues behind it.
      await until(() => lock.isWriteLocked, 'w2 has the writer\'s place')
      assert.strictEqual(lock.tryRead(), false)
      const r4 = lock.readAsync().then((r) => { order.push('r4'); return r })
      await until(() => queued(lock) === 2, 'r4 queued, w2 waits for the readers')
      a()
      b()
      const release = await w2
      assert.deepStrictEqual(order, ['r1', 'r3', 'w2'])
      release()
      ;(await r4)()
      assert.deepStrictEqual(order, ['r1', 'r3', 'w2', 'r4'])
    } finally {
      await w.terminate()
    }
    assertIdle(lock)
  })

  test('before a waiter has waited 1 ms, an unlock releases and wakes every waiter to compete; all get in', async () => {
    const lock = new RwLock()
    const w = await lock.writeAsync()
    const waiting = [lock.readAsync(), lock.writeAsync(), lock.readAsync(), lock.writeAsync()]
    await until(() => queued(lock) === 4, 'four queued')
    w()
    const outcomes = []
    await Promise.all(waiting.map((p) => p.then((release) => {
      outcomes.push(release.ownerDied)
      release()
    })))
    assert.deepStrictEqual(outcomes, [false, false, false, false])
    assertIdle(lock)
  })

  test('a worker\'s blocking read waits for the main thread\'s write and gets in on its unlock', async () => {
    const lock = new RwLock()
    const shared = new Int32Array(new SharedArrayBuffer(8))
    const release = await lock.writeAsync()
    const w = rwWorker(`
      post('reading')
      const status = lock.read()
      post('read', { status, seen: shared[0] })
      lock.readUnlock()
    `, lock, shared)
    try {
      await w.next('reading')
      await until(() => queued(lock) === 1, 'the worker queued')
      shared[0] = 42
      release()
      const m = await w.next('read')
      assert.deepStrictEqual([m.status, m.seen], ['acquired', 42])
    } finally {
      await w.terminate()
    }
  })

  test('downgrade: write → read atomically; queued readers come in, a queued writer does not', async () => {
    const lock = new RwLock()
    const release = await lock.writeAsync()
    const w = rwWorker(`
      post('writing')
      lock.write()
      post('wrote')
      lock.writeUnlock()
    `, lock)
    try {
      await w.next('writing')
      await until(() => queued(lock) === 1, 'the writer queued')
      const reader = lock.readAsync()
      await until(() => queued(lock) === 2, 'a reader queued')
      await waitedLongEnough()
      const read = release.downgrade()
      assert.throws(() => release.downgrade(), isNotOwner)
      release() // already given up by the downgrade: does nothing
      const r2 = await reader
      assert.strictEqual(lock.readers, 2)
      assert.strictEqual(read.ownerDied, false)
      read()
      r2()
      await w.next('wrote')
    } finally {
      await w.terminate()
    }
    // The blocking form.
    lock.write()
    lock.downgrade()
    assert.strictEqual(lock.readers, 1)
    assert.strictEqual(lock.isWriteLocked, false)
    assert.throws(() => lock.downgrade(), isNotOwner)
    lock.readUnlock()
    assertIdle(lock)
  })

  test('runRead / runWrite release however fn ends; release functions are idempotent and disposable', async () => {
    const lock = new RwLock()
    await assert.rejects(lock.runWrite(() => { throw new Error('boom') }), /boom/)
    await assert.rejects(lock.runRead(async () => { throw new Error('late') }), /late/)
    assert.deepStrictEqual(await lock.runRead((info) => info), { ownerDied: false })
    const r = await lock.readAsync()
    assert.strictEqual(typeof r[DISPOSE], 'function')
    r[DISPOSE]()
    r()
    const w = await lock.writeAsync()
    w()
    w()
    assertIdle(lock)
  })
})

describe('RwLock: readers past the three slots', () => {
  test('are registered natively: counted, released, and a writer waits for them too', async () => {
    const lock = new RwLock()
    const releases = []
    for (let i = 0; i < 6; i++) releases.push(await lock.readAsync())
    assert.strictEqual(lock.readers, 6)
    assert.strictEqual(binding.rwOverflowReaders(cells(lock), 0), 3)
    const w = rwWorker(`lock.write(); post('wrote'); lock.writeUnlock(); post('done')`, lock)
    try {
      await until(() => queued(lock) === 1, 'the writer waits for the readers')
      for (const r of releases.splice(0, 5)) r()
      assert.strictEqual(lock.readers, 1)
      assert.strictEqual(queued(lock), 1, 'the writer still waits for the last reader')
      releases[0]()
      await w.next('done')
    } finally {
      await w.terminate()
    }
    assertIdle(lock)
  })
})

describe('RwLock: exactness and fairness under contention', () => {
  test('stress: main thread async + 3 blocking workers, reads and writes mixed; no writer ever overlaps anyone', { timeout: 120000 }, async () => {
    const lock = new RwLock()
    // [0] writes done, [1] and [2] a pair writers keep equal, [3] readers
    // inside, [4] writers inside, [5] violations.
    const shared = new Int32Array(new SharedArrayBuffer(32))
    const ROUNDS = 4000
    const body = (isAsync) => `
      for (let i = 0; i < ${ROUNDS}; i++) {
        if (i % 5 === 3) {
          ${isAsync ? 'const release = await lock.writeAsync()' : 'lock.write()'}
          if (Atomics.add(shared, 4, 1) !== 0 || Atomics.load(shared, 3) !== 0) Atomics.add(shared, 5, 1)
          const v = shared[1]
          ${isAsync ? 'await null' : ''}
          shared[1] = v + 1
          for (let k = 0; k < 500; k++) if (Atomics.load(shared, 3) !== 0) Atomics.add(shared, 5, 1)
          shared[2] = v + 1
          shared[0]++
          Atomics.sub(shared, 4, 1)
          ${isAsync ? 'release()' : 'lock.writeUnlock()'}
        } else {
          ${isAsync ? 'const release = await lock.readAsync()' : 'lock.read()'}
          Atomics.add(shared, 3, 1)
          for (let k = 0; k < 50; k++) if (Atomics.load(shared, 4) !== 0 || shared[1] !== shared[2]) Atomics.add(shared, 5, 1)
          ${isAsync ? 'await null' : ''}
          Atomics.sub(shared, 3, 1)
          ${isAsync ? 'release()' : 'lock.readUnlock()'}
        }
      }
    `
    const workers = [0, 1, 2].map(() => rwWorker(body(false) + `; post('done')`, lock, shared))
    try {
      const run = new Function('lock', 'shared', `return (async () => { ${body(true)} })()`) // eslint-disable-line no-new-func
      await run(lock, shared)
      for (const w of workers) await w.next('done', 100000)
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assert.strictEqual(shared[5], 0, 'a writer overlapped a reader or a writer')
    assert.strictEqual(shared[0], 4 * ROUNDS / 5)
    assert.strictEqual(shared[1], 4 * ROUNDS / 5)
    assertIdle(lock)
  })

  test('a continuous stream of readers does not starve a writer', { timeout: 60000 }, async () => {
    const lock = new RwLock()
    const shared = new Int32Array(new SharedArrayBuffer(12)) // [0] reads, [1] stop, [2] readers inside
    // Three overlapping readers: at almost every instant one holds a read lock.
    const stream = `
      while (Atomics.load(shared, 1) === 0) {
        lock.read(); Atomics.add(shared, 2, 1); Atomics.add(shared, 0, 1)
        for (let k = 0; k < 200; k++) Atomics.load(shared, 0)
        Atomics.sub(shared, 2, 1); lock.readUnlock()
      }
      post('done')
    `
    const workers = [0, 1, 2].map(() => rwWorker(stream, lock, shared))
    try {
      await until(() => shared[0] > 1000, 'the readers to be streaming')
      const release = await lock.writeAsync({ timeout: 20000 })
      const readsWhileWriting = shared[0]
      assert.strictEqual(Atomics.load(shared, 2), 0, 'a reader is inside with the writer')
      release()
      await until(() => shared[0] > readsWhileWriting, 'the readers to go on')
      Atomics.store(shared, 1, 1)
      for (const w of workers) await w.next('done')
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assertIdle(lock)
  })

  test('a continuous stream of writers does not starve a reader', { timeout: 60000 }, async () => {
    const lock = new RwLock()
    const shared = new Int32Array(new SharedArrayBuffer(8)) // [0] writes, [1] stop
    const stream = `
      while (Atomics.load(shared, 1) === 0) {
        lock.write(); shared[0]++
        for (let k = 0; k < 200; k++) Atomics.load(shared, 0)
        lock.writeUnlock()
      }
      post('done')
    `
    const workers = [0, 1].map(() => rwWorker(stream, lock, shared))
    try {
      await until(() => shared[0] > 1000, 'the writers to be streaming')
      for (let i = 0; i < 20; i++) {
        const release = await lock.readAsync({ timeout: 20000 })
        release()
      }
      Atomics.store(shared, 1, 1)
      for (const w of workers) await w.next('done')
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assertIdle(lock)
  })

  test('RwLock and AsyncLock are different locks in different buffers (no cross-talk)', async () => {
    const rw = new RwLock()
    const mutex = new AsyncLock()
    const r = await rw.readAsync()
    const m = await mutex.lockAsync()
    m()
    r()
    assertIdle(rw)
  })
})
