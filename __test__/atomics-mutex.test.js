'use strict'
// The shared-structs proposal's Atomics.Mutex / UnlockToken / Atomics.Condition
// shape (and V8's --harmony-struct forms) over AsyncLock and Condition:
// return values and errors of the spec draft, `using`, exclusion across
// threads, notify counts, owner death, and one script run against V8's own
// implementation where this Node has it.
const assert = require('assert')
const path = require('path')
const { spawnSync } = require('child_process')
const { Worker } = require('worker_threads')
const { performance } = require('perf_hooks') // no global before Node 16
const { test, describe } = require('./harness')
const { Mutex, Condition, UnlockToken } = require('../atomics-mutex')
const { waiters, sleepers, handle, until } = require('./fixtures/lock-util')
const { inbox, runChild, transcript } = require('./util')

const WORKER = path.join(__dirname, 'fixtures', 'atomics-mutex-worker.js')
const SHAPE = path.join(__dirname, 'fixtures', 'atomics-mutex-shape.js')
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')
const isDeadlock = (e) => e instanceof TypeError && e.code === 'ERR_LOCK_DEADLOCK'

const lockWord = (m) => Atomics.load(new Int32Array(m.buffer, m.byteOffset, 1), 0)

function start (role, data) {
  const worker = new Worker(WORKER, { workerData: Object.assign({ role }, data) })
  const box = inbox(worker, `the ${role} worker`)
  return { worker, next: box.next, send: (m) => worker.postMessage(m), terminate: () => worker.terminate() }
}

async function heldByWorker (m) {
  const w = start('hold', { mutex: handle(m) })
  await w.next('held')
  return w
}

// Whether `using` declarations parse here (Node 24 on).
let hasUsing = true
try {
  new Function('{ using x = null }') // eslint-disable-line no-new, no-new-func
} catch (e) {
  hasUsing = false
}

describe('Atomics.Mutex shape: Mutex and UnlockToken (the spec draft)', () => {
  test('lock → a new UnlockToken holding the mutex; unlock → true, then false', () => {
    const m = new Mutex()
    const t = Mutex.lock(m)
    assert.ok(t instanceof UnlockToken)
    assert.strictEqual(t.locked, true)
    assert.strictEqual(t.ownerDied, false)
    assert.notStrictEqual(lockWord(m), 0)
    assert.strictEqual(t.unlock(), true)
    assert.strictEqual(t.locked, false)
    assert.strictEqual(lockWord(m), 0)
    assert.strictEqual(t.unlock(), false) // unlocking an empty token
  })

  test('a given empty token is filled and returned (reuse); a locked one or a non-token → TypeError', () => {
    const m = new Mutex()
    const token = new Mutex.UnlockToken()
    assert.strictEqual(Mutex.UnlockToken, UnlockToken)
    assert.strictEqual(token.locked, false)
    assert.strictEqual(Mutex.lock(m, token), token)
    const other = new Mutex()
    assert.throws(() => Mutex.lock(other, token), TypeError) // already holds a mutex
    assert.strictEqual(lockWord(other), 0)
    token.unlock()
    assert.strictEqual(Mutex.lock(m, token), token) // reused
    token.unlock()
    assert.throws(() => Mutex.lock(m, {}), TypeError)
    assert.throws(() => Mutex.lock(m, 1), TypeError)
    assert.throws(() => Mutex.lock(m, null), TypeError)
    assert.strictEqual(lockWord(m), 0)
  })

  test('[Symbol.dispose] unlocks and returns undefined; a second call does nothing', () => {
    const m = new Mutex()
    const t = Mutex.lock(m)
    assert.strictEqual(t[DISPOSE](), undefined)
    assert.strictEqual(t.locked, false)
    assert.strictEqual(lockWord(m), 0)
    assert.strictEqual(t[DISPOSE](), undefined)
  })

  test('using: the mutex is unlocked at the end of the block', { skip: !hasUsing && 'no `using` in this Node' }, () => {
    const m = new Mutex()
    const f = new Function('Mutex', 'm', 'lockWord', `
      {
        using t = Mutex.lock(m)
        if (lockWord(m) === 0) throw new Error('not locked inside the block')
      }
      return lockWord(m)
    `) // eslint-disable-line no-new-func
    assert.strictEqual(f(Mutex, m, lockWord), 0)
  })

  test('not recursive: lock / lockIfAvailable (even with timeout 0) by the holder → TypeError (code ERR_LOCK_DEADLOCK), still held once', () => {
    const m = new Mutex()
    const t = Mutex.lock(m)
    assert.throws(() => Mutex.lock(m), isDeadlock)
    assert.throws(() => Mutex.lockIfAvailable(m, 0), isDeadlock)
    assert.throws(() => Mutex.lockIfAvailable(m, 10), isDeadlock)
    assert.strictEqual(t.unlock(), true)
    assert.strictEqual(lockWord(m), 0)
  })

  test('lockIfAvailable: a token when free; null when held elsewhere (timeout 0 or elapsed); nothing left queued', async () => {
    const m = new Mutex()
    const t = Mutex.lockIfAvailable(m, 0)
    assert.strictEqual(t.locked, true)
    t.unlock()
    const w = await heldByWorker(m)
    try {
      assert.strictEqual(Mutex.lockIfAvailable(m, 0), null)
      assert.strictEqual(Mutex.lockIfAvailable(m, -5), null) // ≤ 0: not waiting
      assert.strictEqual(Mutex.lockIfAvailable(m, -Infinity), null)
      assert.strictEqual(Mutex.lockIfAvailable(m, 15), null)
      const token = new UnlockToken()
      assert.strictEqual(Mutex.lockIfAvailable(m, 5, token), null)
      assert.strictEqual(token.locked, false)
      assert.strictEqual(waiters(m), 0)
      w.send('unlock')
      await w.next('released')
      assert.strictEqual(Mutex.lockIfAvailable(m, 100, token), token)
      token.unlock()
    } finally {
      await w.terminate()
    }
  })

  test("lockIfAvailable while the mutex is handed to this thread's queued lockAsync: null (not recursion); the callback then runs", async () => {
    const m = new Mutex()
    const w = await heldByWorker(m)
    try {
      const p = Mutex.lockAsync(m, (info) => ['ran', info.ownerDied])
      await until(() => waiters(m) === 1, 'lockAsync to queue')
      // Queued over 1 ms, it is handed the mutex (docs/lock.md, "Bounded
      // unfairness"), not woken to compete for it.
      const aged = performance.now() + 2
      while (performance.now() < aged);
      w.send('unlock')
      // Without returning to the event loop: the worker's unlock hands the
      // mutex to the queued lockAsync, whose callback cannot run yet.
      const end = Date.now() + 10000
      while (waiters(m) !== 0 && Date.now() < end);
      assert.strictEqual(waiters(m), 0, 'the worker never unlocked')
      assert.notStrictEqual(lockWord(m), 0)
      assert.strictEqual(Mutex.lockIfAvailable(m, 0), null)
      assert.deepStrictEqual(await p, { value: ['ran', false], success: true })
      assert.strictEqual(lockWord(m), 0)
    } finally {
      await w.terminate()
    }
  })

  test('lockIfAvailable: timeout must be a Number (TypeError), checked after the mutex and the token', () => {
    const m = new Mutex()
    assert.throws(() => Mutex.lockIfAvailable(m), TypeError)
    assert.throws(() => Mutex.lockIfAvailable(m, '5'), TypeError)
    assert.throws(() => Mutex.lockIfAvailable(m, 5n), TypeError)
    assert.throws(() => Mutex.lockIfAvailable({}, 5), /expected an Atomics.Mutex/)
    assert.throws(() => Mutex.lockIfAvailable(m, '5', {}), /UnlockToken/)
    assert.strictEqual(lockWord(m), 0)
  })

  test('wrong receivers and arguments → TypeError', () => {
    const m = new Mutex()
    assert.throws(() => Mutex(), TypeError) // eslint-disable-line new-cap
    assert.throws(() => UnlockToken(), TypeError) // eslint-disable-line new-cap
    assert.throws(() => Mutex.lock(), TypeError)
    assert.throws(() => Mutex.lock({}), TypeError)
    assert.throws(() => Mutex.lock(new Condition()), TypeError)
    assert.throws(() => Mutex.lock(Object.create(m)), TypeError)
    const locked = Object.getOwnPropertyDescriptor(UnlockToken.prototype, 'locked').get
    assert.throws(() => locked.call({}), TypeError)
    assert.throws(() => UnlockToken.prototype.unlock.call({}), TypeError)
    assert.throws(() => UnlockToken.prototype[DISPOSE].call(m), TypeError)
    assert.throws(() => Object.getOwnPropertyDescriptor(Mutex.prototype, 'buffer').get.call({}), TypeError)
  })

  test('constructor: a fresh buffer, or buffer/byteOffset (validated); copies are the same mutex', () => {
    assert.strictEqual(Mutex.BYTES, 8)
    assert.strictEqual(Condition.BYTES, 8)
    const buffer = new SharedArrayBuffer(24)
    const m = new Mutex(buffer, 8)
    assert.strictEqual(m.buffer, buffer)
    assert.strictEqual(m.byteOffset, 8)
    const copy = new Mutex(m.buffer, m.byteOffset)
    const t = Mutex.lock(m)
    assert.strictEqual(Mutex.lockIfAvailable(new Mutex(buffer, 16), 0).unlock(), true) // a neighbour is independent
    assert.throws(() => Mutex.lock(copy), isDeadlock) // the same mutex
    t.unlock()
    assert.throws(() => new Mutex(new ArrayBuffer(8)), TypeError)
    assert.throws(() => new Mutex(buffer, 2), RangeError)
    assert.throws(() => new Mutex(buffer, 20), RangeError)
    assert.throws(() => new Condition(buffer, -4), RangeError)
    assert.throws(() => new Condition({}), TypeError)
  })
})

describe('Atomics.Mutex shape: Condition (the spec draft)', () => {
  test('wait / waitFor argument checks: TypeError for a wrong cv, an empty token or a non-token, before anything is touched', () => {
    const m = new Mutex()
    const cv = new Condition()
    const t = Mutex.lock(m)
    try {
      assert.throws(() => Condition.wait({}, t), TypeError)
      assert.throws(() => Condition.wait(m, t), TypeError)
      assert.throws(() => Condition.wait(cv, new UnlockToken()), TypeError)
      assert.throws(() => Condition.wait(cv, {}), TypeError)
      assert.throws(() => Condition.wait(cv), TypeError)
      assert.throws(() => Condition.waitFor(cv, new UnlockToken(), 5), TypeError)
      assert.throws(() => Condition.waitFor({}, t, 5), TypeError)
      assert.strictEqual(t.locked, true)
      assert.strictEqual(sleepers(cv), 0)
    } finally {
      t.unlock()
    }
    assert.strictEqual(lockWord(m), 0)
  })

  test('waitFor: false on timeout (relocked), true at once when the predicate holds, the predicate runs holding the mutex', () => {
    const m = new Mutex()
    const cv = new Condition()
    const t = Mutex.lock(m)
    try {
      assert.strictEqual(Condition.waitFor(cv, t, 10), false)
      assert.strictEqual(t.locked, true)
      assert.throws(() => Mutex.lock(m), isDeadlock) // relocked by this thread
      assert.strictEqual(Condition.waitFor(cv, t, 0), false)
      let calls = 0
      assert.strictEqual(Condition.waitFor(cv, t, Infinity, () => { calls++; return Mutex.tryLock(m, () => 0).success === false }), true)
      assert.strictEqual(calls, 1)
      assert.strictEqual(Condition.waitFor(cv, t, 5, () => 0), false) // the last value, as a boolean
      assert.strictEqual(Condition.waitFor(cv, t, NaN, () => 'yes'), true)
      assert.throws(() => Condition.waitFor(cv, t, '5'), TypeError)
      assert.throws(() => Condition.waitFor(cv, t), TypeError)
      assert.throws(() => Condition.waitFor(cv, t, 5, 'not callable'), TypeError)
    } finally {
      t.unlock()
    }
    assert.strictEqual(lockWord(m), 0)
  })

  test('notify: count checks; 0 with nobody waiting', () => {
    const cv = new Condition()
    assert.strictEqual(Condition.notify(cv), 0)
    assert.strictEqual(Condition.notify(cv, 1), 0)
    assert.strictEqual(Condition.notify(cv, Infinity), 0)
    assert.strictEqual(Condition.notify(cv, 0), 0)
    assert.strictEqual(Condition.notify(cv, -3), 0)
    assert.throws(() => Condition.notify(cv, 1.5), TypeError)
    assert.throws(() => Condition.notify(cv, '1'), TypeError)
    assert.throws(() => Condition.notify(cv, NaN), TypeError)
    assert.throws(() => Condition.notify({}), TypeError)
  })

  test('wait / notify across threads: 3 workers wait; notify(cv, 2) → 2, notify(cv) → 1; wait returns undefined holding the mutex', async () => {
    const m = new Mutex()
    const cv = new Condition()
    const shared = new Int32Array(new SharedArrayBuffer(8))
    const workers = [1, 2, 3].map(() => start('wait', { mutex: handle(m), cv: handle(cv), shared: shared.buffer }))
    try {
      await until(() => sleepers(cv) === 3, 'three waiters asleep')
      const t = Mutex.lock(m) // the waiters released it
      t.unlock()
      assert.strictEqual(Condition.notify(cv, 2), 2)
      await until(() => Atomics.load(shared, 1) === 2, 'two woken')
      assert.strictEqual(sleepers(cv), 1)
      assert.strictEqual(Condition.notify(cv), 1)
      const results = await Promise.all(workers.map((w) => w.next('result')))
      for (const r of results) assert.deepStrictEqual(r, { type: 'result', r: undefined, locked: true })
      assert.strictEqual(Condition.notify(cv), 0)
      assert.strictEqual(lockWord(m), 0)
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
  })

  test('waitFor with a predicate across threads: the worker wakes when the predicate holds', async () => {
    const m = new Mutex()
    const cv = new Condition()
    const shared = new Int32Array(new SharedArrayBuffer(4))
    const w = start('waitFor', { mutex: handle(m), cv: handle(cv), shared: shared.buffer })
    try {
      await until(() => sleepers(cv) === 1, 'the worker asleep')
      Condition.notify(cv) // predicate still false: it sleeps again
      await until(() => sleepers(cv) === 1 && lockWord(m) === 0, 'the worker asleep again')
      Mutex.lock(m, () => { shared[0] = 1 })
      Condition.notify(cv)
      assert.strictEqual((await w.next('result')).r, true)
    } finally {
      await w.terminate()
    }
  })
})

describe('Atomics.Mutex shape: across threads and owner death', () => {
  test('mutual exclusion: main thread (lockAsync) + 3 workers (blocking lock, token and callback forms)', async () => {
    const m = new Mutex()
    const shared = new Int32Array(new SharedArrayBuffer(4))
    const COUNT = 2000
    const workers = [1, 2, 3].map(() => start('increment', { mutex: handle(m), shared: shared.buffer, count: COUNT }))
    try {
      for (let k = 0; k < COUNT; k++) {
        const r = await Mutex.lockAsync(m, async () => {
          const v = shared[0]
          await null // an await inside the critical section
          shared[0] = v + 1
          return k
        })
        assert.deepStrictEqual(r, { value: k, success: true })
      }
      await Promise.all(workers.map((w) => w.next('done')))
      assert.strictEqual(shared[0], 4 * COUNT)
      assert.strictEqual(lockWord(m), 0)
    } finally {
      await Promise.all(workers.map((w) => w.terminate()))
    }
  })

  test('V8\'s forms while a worker holds it: tryLock / lockWithTimeout / lockAsync report success: false; nothing queued', async () => {
    const m = new Mutex()
    const w = await heldByWorker(m)
    try {
      assert.deepStrictEqual(Mutex.tryLock(m, () => 1), { value: undefined, success: false })
      assert.deepStrictEqual(Mutex.lockWithTimeout(m, () => 1, 10), { value: undefined, success: false })
      assert.deepStrictEqual(await Mutex.lockAsync(m, () => 1, 10), { value: undefined, success: false })
      assert.strictEqual(waiters(m), 0)
      const later = Mutex.lockAsync(m, () => 'mine')
      await until(() => waiters(m) === 1, 'lockAsync queued')
      w.send('unlock')
      assert.deepStrictEqual(await later, { value: 'mine', success: true })
      assert.strictEqual(lockWord(m), 0)
    } finally {
      await w.terminate()
    }
  })

  test('lockAsync: argument errors throw (as V8\'s); a rejecting callback rejects after unlocking', async () => {
    const m = new Mutex()
    assert.throws(() => Mutex.lockAsync({}, () => 1), TypeError)
    assert.throws(() => Mutex.lockAsync(m), TypeError)
    assert.throws(() => Mutex.lockAsync(m, () => 1, '5'), TypeError)
    const boom = new Error('boom')
    await assert.rejects(Mutex.lockAsync(m, async () => { throw boom }), (e) => e === boom)
    assert.strictEqual(lockWord(m), 0)
    // A promise whose `constructor` getter throws, a revoked Proxy: still unlocked.
    const p = Promise.resolve(1)
    Object.defineProperty(p, 'constructor', { get () { throw boom } })
    const r = await Mutex.lockAsync(m, () => p).then((v) => v, (e) => e)
    assert.ok(r === boom || (r.success === true && r.value === 1), 'settles as the promise, or with the getter\'s throw')
    assert.strictEqual(lockWord(m), 0)
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    await assert.rejects(Mutex.lockAsync(m, () => proxy), TypeError)
    assert.strictEqual(lockWord(m), 0)
  })

  test('Condition.waitAsync inside lockAsync: resolves undefined (as V8\'s) with the mutex held again; a notify wakes it', async () => {
    const m = new Mutex()
    const cv = new Condition()
    assert.throws(() => Condition.waitAsync(cv, m), TypeError) // not held by this thread
    const r = await Mutex.lockAsync(m, async () => {
      const timedOut = await Condition.waitAsync(cv, m, 5)
      const p = Condition.waitAsync(cv, m)
      await until(() => sleepers(cv) === 1 && lockWord(m) === 0, 'the async waiter queued')
      assert.strictEqual(Condition.notify(cv), 1)
      const notified = await p
      return [timedOut, notified, Mutex.tryLock(m, () => 0).success]
    })
    assert.deepStrictEqual(r, { value: [undefined, undefined, false], success: true })
    assert.strictEqual(lockWord(m), 0)
  })

  test('V8\'s Condition.wait(cv, mutex, timeout) → false on timeout; true when notified', () => {
    const m = new Mutex()
    const cv = new Condition()
    assert.strictEqual(Mutex.lock(m, () => Condition.wait(cv, m, 5)), false)
    assert.throws(() => Condition.wait(cv, m, 5), TypeError) // not held
  })

  test('owner death: a worker terminated holding the mutex → the next token says ownerDied (once)', async () => {
    const m = new Mutex()
    const w = await heldByWorker(m)
    await w.terminate()
    const t = Mutex.lockIfAvailable(m, 1000)
    assert.strictEqual(t.locked, true)
    assert.strictEqual(t.ownerDied, true)
    t.unlock()
    const again = Mutex.lock(m)
    assert.strictEqual(again.ownerDied, false)
    again.unlock()
    // and through a callback form: the info argument
    const w2 = await heldByWorker(m)
    await w2.terminate()
    assert.strictEqual(Mutex.lock(m, (info) => info.ownerDied), true)
    assert.strictEqual(Mutex.lock(m, (info) => info.ownerDied), false)
  })

  // fixtures/atomics-mutex-relock-owner-died.js: tasks of the main thread
  // wait in Condition.waitAsync(cv, mutex) inside Mutex.lockAsync; a worker
  // locks, notifies and is terminated holding the mutex. The task whose
  // relock took the mutex over (the first to resume) is told; the next one,
  // which got it from that task, is not.
  for (const [mode, what] of [['two-tasks', 'two waiting tasks'], ['lock-between', 'another task locked and unlocked meanwhile']]) {
    test(`Condition.waitAsync(cv, mutex) whose relock takes over a dead owner's mutex tells the task that waited (${what})`, { timeout: 50000 }, async () => {
      const r = await runChild([path.join(__dirname, 'fixtures', 'atomics-mutex-relock-owner-died.js'), mode], { timeoutMs: 40000 })
      const shown = '\n' + transcript(r)
      assert.ok(!r.timedOut && r.code === 0 && r.result, shown)
      const { resumed } = r.result
      assert.deepStrictEqual(resumed.map(([name]) => name).sort(), mode === 'two-tasks' ? ['A', 'B'] : ['A'], shown)
      assert.deepStrictEqual(resumed.map(([, ownerDied]) => ownerDied), mode === 'two-tasks' ? [true, false] : [true], shown)
    })
  }
})

describe('Atomics.Mutex shape against V8\'s own (node --harmony-struct)', () => {
  const probe = spawnSync(process.execPath, ['--harmony-struct', '-e', 'process.exit(typeof Atomics.Mutex === "function" ? 0 : 3)'], { stdio: 'ignore' })
  const skip = probe.status !== 0 && 'this Node has no --harmony-struct Atomics.Mutex'

  test('the same script gives the same results on both, for every part V8 has', { skip, timeout: 60000 }, async () => {
    const ours = await runChild([SHAPE, 'ours'], { timeoutMs: 20000 })
    const v8 = await runChild(['--harmony-struct', SHAPE, 'v8'], { timeoutMs: 20000 })
    assert.ok(ours.code === 0 && ours.result, transcript(ours))
    assert.ok(v8.code === 0 && v8.result, transcript(v8))
    const names = Object.keys(v8.result)
    assert.ok(names.length >= 15, `only ${names.length} checks ran against V8`)
    for (const name of names) {
      assert.deepStrictEqual(ours.result[name], v8.result[name], `${name}: ours ${JSON.stringify(ours.result[name])}, V8 ${JSON.stringify(v8.result[name])}`)
    }
  })
})
