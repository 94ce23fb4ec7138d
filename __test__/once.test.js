'use strict'
// Once: exactly one run of fn under contention, reruns after a throw, a
// rejection or the runner's death, timeouts and aborts that leave nothing
// behind, deadlocks reported, bad input refused. Threads synchronise on
// shared memory and queue lengths only.
const assert = require('assert')
const path = require('path')
const { Worker } = require('worker_threads')
const { test, describe } = require('./harness')
const sf = require('..')
const binding = require('../lib/native')
const { waiters, handle, until } = require('./fixtures/lock-util')
const { inbox, runChild, transcript } = require('./util')

const { Once, notify } = sf
const HAS_ABORT = typeof AbortController === 'function'
const WORKER = path.join(__dirname, 'fixtures', 'once-worker.js')
const HARD_TIMEOUT = 20000

const isDeadlock = { name: 'DeadlockError', code: 'ERR_LOCK_DEADLOCK' }
const isTimeout = { name: 'LockTimeoutError', code: 'ERR_LOCK_TIMEOUT' }
const isAbort = { name: 'AbortError', code: 'ABORT_ERR' }

// The lock word of a Once (its first cell; 0 = free, nobody queued).
const lockWord = (once) => Atomics.load(new Int32Array(once.buffer, once.byteOffset, 1), 0)

function start (role, data) {
  const worker = new Worker(WORKER, { workerData: Object.assign({ role }, data) })
  const box = inbox(worker, `the ${role} worker`)
  return { worker, next: box.next, terminate: () => worker.terminate() }
}

// A worker that runs `once` blocking and stays inside fn until end() says
// how to leave it: 'throw' or 'return'.
async function heldByWorker (once) {
  const ctl = new Int32Array(new SharedArrayBuffer(16))
  const w = start('hold', { once: handle(once), ctl: ctl.buffer })
  await until(() => Atomics.load(ctl, 1) === 1, 'the worker inside fn')
  w.end = (how) => {
    Atomics.store(ctl, 0, how === 'throw' ? 1 : 2)
    notify(ctl, 0)
  }
  return w
}

describe('Once: the rules on one thread', () => {
  test('run: true the first time, false after; fn runs once; isDone follows', () => {
    const once = new Once()
    let runs = 0
    assert.strictEqual(once.isDone, false)
    assert.strictEqual(once.run(() => { runs++ }), true)
    assert.strictEqual(once.isDone, true)
    assert.strictEqual(once.run(() => { runs++ }), false)
    assert.strictEqual(runs, 1)
    assert.strictEqual(lockWord(once), 0)
  })

  test('fn is told whether an earlier run died inside it (not here: ownerDied false)', () => {
    const once = new Once()
    let info = null
    once.run((i) => { info = i })
    assert.deepStrictEqual(info, { ownerDied: false })
  })

  test('run: fn throws → the error reaches the caller, not done, the next call runs fn again', () => {
    const once = new Once()
    const boom = new Error('boom')
    assert.throws(() => once.run(() => { throw boom }), (e) => e === boom)
    assert.strictEqual(once.isDone, false)
    assert.strictEqual(lockWord(once), 0)
    assert.strictEqual(once.run(() => {}), true)
  })

  test('runAsync: resolves true then false; a sync fn is done at once, fn never runs inside the call', async () => {
    const once = new Once()
    let runs = 0
    const p = once.runAsync(() => { runs++ })
    assert.strictEqual(runs, 0)
    assert.strictEqual(await p, true)
    assert.strictEqual(await once.runAsync(() => { runs++ }), false)
    assert.strictEqual(runs, 1)
  })

  test('runAsync: done when fn\'s promise fulfils; a rejection reaches that caller and the next call reruns fn', async () => {
    const once = new Once()
    const boom = new Error('boom')
    await assert.rejects(once.runAsync(async () => { await null; throw boom }), (e) => e === boom)
    assert.strictEqual(once.isDone, false)
    assert.strictEqual(lockWord(once), 0)
    let resolveFn
    const gate = new Promise((resolve) => { resolveFn = resolve })
    const first = once.runAsync(() => gate)
    const second = once.runAsync(() => { throw new Error('must not run') }) // waits behind the first
    await until(() => lockWord(once) !== 0, 'the first runAsync to hold the lock')
    assert.strictEqual(once.isDone, false) // not done while fn's promise is pending
    resolveFn()
    assert.strictEqual(await first, true)
    assert.strictEqual(await second, false)
    assert.strictEqual(once.isDone, true)
  })

  test('concurrent runAsync calls of one thread: one runs fn, the others wait and get false', async () => {
    const once = new Once()
    let runs = 0
    const results = await Promise.all([1, 2, 3, 4].map(() => once.runAsync(async () => { runs++; await null })))
    assert.deepStrictEqual(results.slice().sort(), [false, false, false, true])
    assert.strictEqual(runs, 1)
  })

  test('the done path: fn not called, no call into the addon, runAsync answers with one shared settled promise', async () => {
    const once = new Once()
    once.run(() => {})
    const names = ['wait', 'notify', 'waitAsync', 'lockWait', 'lockTry', 'lockWaitAsync', 'lockRelease']
    const saved = {}
    let calls = 0
    for (const n of names) {
      saved[n] = binding[n]
      binding[n] = function () { calls++; return saved[n].apply(this, arguments) }
    }
    try {
      const p1 = once.runAsync(() => { throw new Error('must not run') })
      const p2 = once.runAsync(() => { throw new Error('must not run') }, { timeout: 5 })
      assert.strictEqual(p1, p2)
      assert.strictEqual(await p1, false)
      for (let i = 0; i < 100; i++) assert.strictEqual(once.run(() => { throw new Error('must not run') }), false)
    } finally {
      for (const n of names) binding[n] = saved[n]
    }
    assert.strictEqual(calls, 0)
  })

  test('several Onces in one buffer are independent; a copy rebuilt from buffer/byteOffset is the same Once', () => {
    const buffer = new SharedArrayBuffer(3 * Once.BYTES)
    const a = new Once(buffer, 0)
    const b = new Once(buffer, Once.BYTES)
    const c = new Once(buffer, 2 * Once.BYTES)
    assert.strictEqual(b.run(() => {}), true)
    assert.deepStrictEqual([a.isDone, b.isDone, c.isDone], [false, true, false])
    const copy = new Once(b.buffer, b.byteOffset)
    assert.strictEqual(copy.isDone, true)
    assert.strictEqual(copy.run(() => {}), false)
    assert.strictEqual(b.buffer, buffer)
    assert.strictEqual(b.byteOffset, Once.BYTES)
    assert.strictEqual(Once.BYTES, 12)
  })
})

describe('Once: deadlocks are reported, not waited for', () => {
  test('run inside its own fn → DeadlockError (and the outer run ends with it, not done)', () => {
    const once = new Once()
    assert.throws(() => once.run(() => once.run(() => {})), isDeadlock)
    assert.strictEqual(once.isDone, false)
    assert.strictEqual(lockWord(once), 0)
    // a copy of the same Once counts as the same
    const copy = new Once(once.buffer, once.byteOffset)
    assert.throws(() => once.run(() => copy.run(() => {})), isDeadlock)
  })

  test('runAsync inside run\'s fn rejects with DeadlockError; fn may catch it and finish', async () => {
    const once = new Once()
    let inner
    assert.strictEqual(once.run(() => { inner = once.runAsync(() => {}) }), true)
    await assert.rejects(inner, isDeadlock)
  })

  test('run inside runAsync\'s fn → DeadlockError, before and after fn\'s first await', async () => {
    const once = new Once()
    await assert.rejects(once.runAsync(() => { once.run(() => {}) }), isDeadlock)
    await assert.rejects(once.runAsync(async () => { await null; once.run(() => {}) }), isDeadlock)
    assert.strictEqual(once.isDone, false)
    assert.strictEqual(lockWord(once), 0)
  })

  test('runAsync inside runAsync\'s fn, before its first await → DeadlockError', async () => {
    const once = new Once()
    await assert.rejects(once.runAsync(() => once.runAsync(() => {})), isDeadlock)
    assert.strictEqual(once.isDone, false)
  })

  test('a nested run of another Once is fine', () => {
    const a = new Once()
    const b = new Once()
    assert.strictEqual(a.run(() => { assert.strictEqual(b.run(() => {}), true) }), true)
  })
})

describe('Once: bad input', () => {
  test('constructor: the buffer and offset checks of every primitive', () => {
    assert.throws(() => new Once(new ArrayBuffer(12)), TypeError)
    assert.throws(() => new Once({}), TypeError)
    assert.throws(() => new Once(new SharedArrayBuffer(16), '0'), TypeError)
    assert.throws(() => new Once(new SharedArrayBuffer(16), 2), RangeError)
    assert.throws(() => new Once(new SharedArrayBuffer(16), -4), RangeError)
    assert.throws(() => new Once(new SharedArrayBuffer(16), 8), RangeError)
    assert.throws(() => new Once(new SharedArrayBuffer(8)), RangeError)
    assert.throws(() => new Once(undefined, 4), TypeError)
  })

  test('run: not a function, bad timeout (done or not)', () => {
    for (const once of [new Once(), (() => { const o = new Once(); o.run(() => {}); return o })()]) {
      assert.throws(() => once.run(), TypeError)
      assert.throws(() => once.run('fn'), TypeError)
      assert.throws(() => once.run(() => {}, '5'), TypeError)
      assert.throws(() => once.run(() => {}, -1), RangeError)
      assert.throws(() => once.run(() => {}, NaN), RangeError)
    }
  })

  test('runAsync: bad input rejects (never throws), done or not', async () => {
    for (const once of [new Once(), (() => { const o = new Once(); o.run(() => {}); return o })()]) {
      await assert.rejects(once.runAsync(), TypeError)
      await assert.rejects(once.runAsync(42), TypeError)
      await assert.rejects(once.runAsync(() => {}, 5), TypeError)
      await assert.rejects(once.runAsync(() => {}, { timeout: '5' }), TypeError)
      await assert.rejects(once.runAsync(() => {}, { timeout: -1 }), RangeError)
      await assert.rejects(once.runAsync(() => {}, { signal: {} }), TypeError)
      await assert.rejects(once.runAsync(() => {}, { signal: null }), TypeError)
    }
  })

  test('run with an fn that returns a promise → TypeError, not done, lock free', () => {
    const once = new Once()
    assert.throws(() => once.run(() => Promise.resolve()), /runAsync/)
    assert.strictEqual(once.isDone, false)
    assert.strictEqual(lockWord(once), 0)
  })

  test('fn returns something whose `then` cannot be read: that error, not done, lock free, the next call runs fn', async () => {
    const boom = new Error('then getter')
    const unreadable = () => ({ get then () { throw boom } })
    const once = new Once()
    assert.throws(() => once.run(unreadable), (e) => e === boom)
    assert.strictEqual(lockWord(once), 0)
    await assert.rejects(once.runAsync(unreadable), (e) => e === boom)
    assert.strictEqual(lockWord(once), 0)
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    await assert.rejects(once.runAsync(() => proxy), TypeError)
    assert.strictEqual(once.isDone, false)
    assert.strictEqual(lockWord(once), 0)
    assert.strictEqual(await once.runAsync(() => {}), true)
  })
})

describe('Once across threads', () => {
  test('exactly once under contention: main thread async + 3 workers blocking, 200 fresh Onces', async () => {
    const COUNT = 200
    const buffer = new SharedArrayBuffer(COUNT * Once.BYTES)
    const counts = new Int32Array(new SharedArrayBuffer(4 * COUNT))
    const trues = new Int32Array(new SharedArrayBuffer(4 * COUNT))
    const startFlag = new Int32Array(new SharedArrayBuffer(4))
    const workers = [1, 2, 3].map(() => start('contend', { buffer, count: COUNT, counts: counts.buffer, trues: trues.buffer, start: startFlag.buffer }))
    try {
      await Promise.all(workers.map((w) => w.next('ready')))
      Atomics.store(startFlag, 0, 1)
      notify(startFlag, 0)
      const mine = []
      for (let k = 0; k < COUNT; k++) {
        const once = new Once(buffer, k * Once.BYTES)
        mine.push(once.runAsync(() => { Atomics.add(counts, k, 1) }).then((ran) => { if (ran) Atomics.add(trues, k, 1) }))
      }
      await Promise.all(mine)
      await Promise.all(workers.map((w) => w.next('done')))
      for (let k = 0; k < COUNT; k++) {
        assert.strictEqual(counts[k], 1, `fn of Once ${k} ran ${counts[k]} times`)
        assert.strictEqual(trues[k], 1, `${trues[k]} callers of Once ${k} were told they ran it`)
        assert.strictEqual(lockWord(new Once(buffer, k * Once.BYTES)), 0)
      }
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
  })

  test('fn throws in a worker → a waiting runAsync of the main thread runs it again and gets true', async () => {
    const once = new Once()
    const w = await heldByWorker(once)
    try {
      let mainRuns = 0
      const mine = once.runAsync(() => { mainRuns++ })
      await until(() => waiters(once) === 1, 'the main thread queued')
      w.end('throw')
      assert.strictEqual((await w.next('result')).outcome, 'boom')
      assert.strictEqual(await mine, true)
      assert.strictEqual(mainRuns, 1)
      assert.strictEqual(once.isDone, true)
      assert.strictEqual(lockWord(once), 0)
    } finally {
      await w.terminate()
    }
  })

  test('a worker finishes fn → a waiting runAsync gets false without running fn', async () => {
    const once = new Once()
    const w = await heldByWorker(once)
    try {
      const mine = once.runAsync(() => { throw new Error('must not run') })
      await until(() => waiters(once) === 1, 'the main thread queued')
      w.end('return')
      assert.strictEqual((await w.next('result')).outcome, true)
      assert.strictEqual(await mine, false)
    } finally {
      await w.terminate()
    }
  })

  test('timeout and abort while a worker runs fn: LockTimeoutError / AbortError, nothing held or queued', { skip: !HAS_ABORT && 'no AbortController before Node 15' }, async () => {
    const once = new Once()
    const w = await heldByWorker(once)
    try {
      await assert.rejects(once.runAsync(() => {}, { timeout: 20 }), isTimeout)
      assert.strictEqual(waiters(once), 0)
      assert.throws(() => once.run(() => {}, 20), isTimeout) // blocking, on the main thread
      assert.strictEqual(waiters(once), 0)
      const ac = new AbortController()
      const aborted = once.runAsync(() => {}, { signal: ac.signal })
      await until(() => waiters(once) === 1, 'the main thread queued')
      ac.abort()
      await assert.rejects(aborted, isAbort)
      assert.strictEqual(waiters(once), 0)
      const pre = new AbortController()
      pre.abort()
      await assert.rejects(once.runAsync(() => {}, { signal: pre.signal }), isAbort)
      assert.strictEqual(waiters(once), 0)
      w.end('return')
      assert.strictEqual((await w.next('result')).outcome, true)
      assert.strictEqual(lockWord(once), 0)
      // done: nothing to wait for, so even an aborted signal gets false
      assert.strictEqual(await once.runAsync(() => {}, { signal: pre.signal }), false)
    } finally {
      await w.terminate()
    }
  })

  test('timeout while a worker runs fn (no AbortController needed): nothing held or queued', async () => {
    const once = new Once()
    const w = await heldByWorker(once)
    try {
      await assert.rejects(once.runAsync(() => {}, { timeout: 0 }), isTimeout)
      await assert.rejects(once.runAsync(() => {}, { timeout: 15 }), isTimeout)
      assert.strictEqual(waiters(once), 0)
      w.end('throw')
      assert.strictEqual((await w.next('result')).outcome, 'boom')
      assert.strictEqual(lockWord(once), 0)
      assert.strictEqual(await once.runAsync(() => {}), true)
    } finally {
      await w.terminate()
    }
  })

  test('the thread running fn is terminated inside it: the next caller runs fn and gets true (child process)', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'once-runner-dies.js')], { timeoutMs: HARD_TIMEOUT })
    const shown = transcript(r)
    assert.ok(!r.timedOut && r.code === 0 && r.result, shown)
    const { one, two, queuedAsync } = r.result
    // A blocking worker and the main thread waited: exactly one of them reran fn, told so.
    assert.deepStrictEqual([one.mainRan, one.bRan].sort(), [false, true], shown)
    assert.strictEqual(one.fnRunsAfterDeath, 1, shown)
    assert.strictEqual(one.ownerDiedSeen, 1, shown)
    assert.strictEqual(one.done, true, shown)
    assert.strictEqual(one.again, false, shown)
    assert.strictEqual(one.lockWord, 0, shown)
    assert.strictEqual(one.queued, 0, shown)
    // Nobody waiting when it died: a later run takes the lock over and reruns fn.
    assert.deepStrictEqual(two, { ran: true, ownerDied: true, done: true, lockWord: 0 }, shown)
    assert.strictEqual(queuedAsync, 0, shown)
  })
})
