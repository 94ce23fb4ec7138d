'use strict'
// Semaphore acquisitions of several permits at once (docs/lock.md, "Weighted
// acquisitions"): taken all at once or not at all, blocking and async, in the
// main thread and in workers; queued requests served in order, a large one
// never passed by smaller ones queued behind it nor starved by a stream of
// small ones; a large waiter that times out, is aborted or whose thread dies
// lets the smaller ones behind it through; a thread that dies holding
// permits keeps them; bad counts are rejected before anything is touched.
const assert = require('assert')
const path = require('path')
const { performance } = require('perf_hooks')
const { test, describe } = require('./harness')
const { Semaphore } = require('..')
const { runChild, transcript } = require('./util')
const { sleepers, handle, startWorker, until } = require('./fixtures/lock-util')

const HAS_ABORT = typeof AbortController === 'function'
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')
const isTimeout = { name: 'LockTimeoutError', code: 'ERR_LOCK_TIMEOUT' }
// Every test is bounded: a waiter left stranded fails it instead of stalling the run.
const BOUND = { timeout: 30000 }

// Until every acquirer queued before the call has waited over 1 ms (from
// then on, permits released are reserved for the oldest one): a condition
// on the clock, not a sleep for something else to happen.
function age () {
  const from = performance.now()
  while (performance.now() - from < 2) {}
}

// A promise's state, readable synchronously.
function track (promise) {
  const t = { settled: false, value: undefined, error: undefined }
  t.done = promise.then((v) => { t.settled = true; t.value = v }, (e) => { t.settled = true; t.error = e })
  return t
}

describe('Semaphore: n permits at once', () => {
  test('blocking, try and async forms take and give back exactly n', BOUND, async () => {
    const sem = new Semaphore(5)
    sem.acquire({ permits: 3 })
    assert.strictEqual(sem.value, 2)
    sem.acquire({ permits: 2, timeout: 0 })
    assert.strictEqual(sem.value, 0)
    assert.throws(() => sem.acquire({ permits: 1, timeout: 0 }), isTimeout)
    assert.throws(() => sem.acquire({ timeout: 5 }), /no permit within 5 ms/)
    sem.release(5)
    assert.strictEqual(sem.tryAcquire(6), false, 'all or nothing')
    assert.strictEqual(sem.value, 5)
    assert.strictEqual(sem.tryAcquire(5), true)
    assert.strictEqual(sem.tryAcquire(), false)
    sem.release(5)

    const release = await sem.acquireAsync({ permits: 4 })
    assert.strictEqual(sem.value, 1)
    await assert.rejects(sem.acquireAsync({ permits: 2, timeout: 0 }), /no 2 permits within 0 ms/)
    assert.strictEqual(sem.value, 1, 'a timed-out acquisition took nothing')
    release()
    release()
    release[DISPOSE]()
    assert.strictEqual(sem.value, 5, 'the release function gives back the 4 it took, once')

    assert.strictEqual(await sem.runExclusive(() => sem.value, { permits: 5 }), 0)
    assert.strictEqual(sem.value, 5)
    await assert.rejects(sem.runExclusive(() => { throw new EvalError('x') }, { permits: 2 }), EvalError)
    assert.strictEqual(sem.value, 5)
  })

  test('the calls of one permit still work: acquire(timeout), tryAcquire(), release()', BOUND, () => {
    const sem = new Semaphore(1)
    sem.acquire(10)
    assert.throws(() => sem.acquire(10), isTimeout)
    sem.release()
    assert.strictEqual(sem.tryAcquire(), true)
    sem.release(1)
    assert.strictEqual(sem.value, 1)
  })

  test('an acquisition takes none of its permits before it can take them all', BOUND, async () => {
    const sem = new Semaphore(2)
    const big = track(sem.acquireAsync({ permits: 3 }))
    await until(() => sleepers(sem) === 1, 'the acquirer to queue')
    assert.strictEqual(sem.value, 2, 'no partial grant')
    assert.strictEqual(big.settled, false)
    age()
    sem.release(1)
    await big.done
    assert.strictEqual(typeof big.value, 'function')
    assert.strictEqual(sem.value, 0)
    big.value()
    assert.strictEqual(sem.value, 3)
  })

  test('a worker takes n permits blocking; the main thread sees them taken', BOUND, async () => {
    const sem = new Semaphore(4)
    const w = startWorker('semAcquire', { sem: handle(sem), permits: 3, keep: true })
    const r = await w.next('result')
    await w.exit
    assert.deepStrictEqual(r, { type: 'result', error: null, value: 1 })
    assert.strictEqual(sem.value, 1)
  })
})

describe('Semaphore: queued requests in order, no starvation', () => {
  test('a large request at the head is served before smaller ones behind it; nobody takes what is set aside for it', BOUND, async () => {
    const sem = new Semaphore(0)
    const order = []
    const big = track(sem.acquireAsync({ permits: 3 }).then((r) => { order.push('big'); return r }))
    await until(() => sleepers(sem) === 1, 'the large acquirer to queue')
    age()
    const small = track(sem.acquireAsync({ permits: 1 }).then((r) => { order.push('small'); return r }))
    assert.strictEqual(sleepers(sem), 2)
    sem.release(1)
    sem.release(1)
    assert.strictEqual(sem.value, 0, 'the two permits are set aside for the head')
    assert.strictEqual(sem.tryAcquire(), false, 'tryAcquire cannot take them')
    assert.strictEqual(sleepers(sem), 2, 'the small acquirer behind it was not served')
    sem.release(1)
    await big.done
    assert.strictEqual(small.settled, false)
    sem.release(1)
    await small.done
    assert.deepStrictEqual(order, ['big', 'small'])
    big.value()
    small.value()
    assert.strictEqual(sem.value, 4)
    assert.strictEqual(sleepers(sem), 0)
  })

  test('a blocking worker queued for 3 is served before the main thread queued for 1 behind it', BOUND, async () => {
    const sem = new Semaphore(0)
    const w = startWorker('semAcquire', { sem: handle(sem), permits: 3, timeout: 60000 })
    await until(() => sleepers(sem) === 1, 'the worker to queue')
    age()
    const small = track(sem.acquireAsync({ permits: 1 }))
    sem.release(2)
    assert.strictEqual(sem.value, 0)
    sem.release(1)
    const r = await w.next('result')
    assert.strictEqual(r.error, null)
    assert.strictEqual(r.value, 0, 'the worker held 3 and nothing was free')
    await w.exit // it gave its 3 back: the main thread's acquirer got 1
    await small.done
    small.value()
    assert.strictEqual(sem.value, 3)
  })

  test('permits released while the head waits are set aside for it: two workers that always hold one between them cannot starve a request for both', { timeout: 60000 }, async () => {
    const sem = new Semaphore(2)
    // [stop, turn (2: nobody's yet), turns of worker 0, of worker 1, holders]
    const shared = new Int32Array(new SharedArrayBuffer(20))
    shared[1] = 2
    const cap = 100000
    const workers = [0, 1].map((id) => startWorker('semRelay', { sem: handle(sem), shared: shared.buffer, id, cap }))
    try {
      await until(() => Atomics.load(shared, 4) === 2, 'both workers to hold a permit')
      const both = sem.acquireAsync({ permits: 2 })
      assert.strictEqual(sleepers(sem), 1)
      age()
      Atomics.store(shared, 1, 0)
      Atomics.notify(shared, 1)
      const release = await both
      Atomics.store(shared, 0, 1)
      Atomics.notify(shared, 1)
      release()
      for (const w of workers) {
        const done = await w.next('done', 50000)
        assert.strictEqual(done.capped, false, `${cap} turns passed and the request for both permits was not served`)
      }
    } finally {
      Atomics.store(shared, 0, 1)
      Atomics.notify(shared, 1)
      await Promise.all(workers.map((w) => w.terminate()))
    }
    assert.strictEqual(sem.value, 2)
  })

  for (const mode of ['sync', 'async']) {
    test(`a stream of small acquisitions (two ${mode === 'sync' ? 'blocking' : 'async'} workers) cannot starve a large one`, { timeout: 60000 }, async () => {
      const sem = new Semaphore(2)
      const shared = new Int32Array(new SharedArrayBuffer(12)) // [stop, rounds of worker 0, of worker 1]
      const cap = 2000000
      const workers = [0, 1].map((id) => startWorker('semHog', { sem: handle(sem), shared: shared.buffer, id, cap, mode }))
      try {
        await until(() => Atomics.load(shared, 1) > 0 && Atomics.load(shared, 2) > 0, 'both workers to be cycling')
        const release = await sem.acquireAsync({ permits: 2 })
        Atomics.store(shared, 0, 1)
        release()
        for (const w of workers) {
          const done = await w.next('done', 50000)
          assert.strictEqual(done.capped, false, `a worker ran ${cap} rounds before the large request was served`)
        }
      } finally {
        Atomics.store(shared, 0, 1)
        await Promise.all(workers.map((w) => w.terminate()))
      }
      assert.strictEqual(sem.value, 2)
    })
  }
})

describe('Semaphore: a large waiter that leaves lets the ones behind it through', () => {
  test('aborted', { skip: !HAS_ABORT && 'no AbortController', timeout: 30000 }, async () => {
    const sem = new Semaphore(0)
    const ac = new AbortController()
    const big = track(sem.acquireAsync({ permits: 3, signal: ac.signal }))
    await until(() => sleepers(sem) === 1, 'the large acquirer to queue')
    age()
    const a = track(sem.acquireAsync({ permits: 1 }))
    const b = track(sem.acquireAsync({ permits: 1 }))
    sem.release(2)
    assert.strictEqual(sem.value, 0)
    assert.strictEqual(sleepers(sem), 3)
    ac.abort()
    await big.done
    assert.strictEqual(big.error && big.error.name, 'AbortError')
    await a.done
    await b.done
    assert.strictEqual(typeof a.value, 'function')
    assert.strictEqual(typeof b.value, 'function')
    assert.strictEqual(sem.value, 0)
    assert.strictEqual(sleepers(sem), 0)
    a.value()
    b.value()
    assert.strictEqual(sem.value, 2)
  })

  test('timed out (async)', BOUND, async () => {
    const sem = new Semaphore(0)
    const big = track(sem.acquireAsync({ permits: 3, timeout: 100 }))
    await until(() => sleepers(sem) === 1, 'the large acquirer to queue')
    age()
    const small = track(sem.acquireAsync({ permits: 1 }))
    sem.release(2)
    await big.done
    assert.strictEqual(big.error && big.error.code, 'ERR_LOCK_TIMEOUT')
    await small.done
    assert.strictEqual(typeof small.value, 'function')
    assert.strictEqual(sem.value, 1)
    assert.strictEqual(sleepers(sem), 0)
  })

  test('timed out (blocking, in a worker)', BOUND, async () => {
    const sem = new Semaphore(0)
    const w = startWorker('semAcquire', { sem: handle(sem), permits: 3, timeout: 300 })
    await until(() => sleepers(sem) === 1, 'the worker to queue')
    age()
    const small = track(sem.acquireAsync({ permits: 1 }))
    sem.release(2)
    const r = await w.next('result')
    assert.strictEqual(r.error && r.error.code, 'ERR_LOCK_TIMEOUT')
    await w.exit
    await small.done
    assert.strictEqual(typeof small.value, 'function')
    assert.strictEqual(sem.value, 1)
    assert.strictEqual(sleepers(sem), 0)
  })

  for (const mode of ['sync', 'async']) {
    test(`its thread is terminated while it waits for 3 (${mode === 'sync' ? 'blocking' : 'async'}; child process)`, { timeout: 60000 }, async () => {
      const r = await runChild([path.join(__dirname, 'fixtures', 'semaphore-weighted-dies.js'), `wait-${mode}`], { timeoutMs: 45000 })
      assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
      for (const o of r.result.outcomes) {
        assert.deepStrictEqual(o, { held: false, value: 1, reserved: 0, queued: 0 }, transcript(r))
      }
      assert.strictEqual(r.result.queuedAsync, 0, transcript(r))
    })
  }
})

describe('Semaphore: a thread that dies holding permits', () => {
  for (const mode of ['sync', 'async']) {
    test(`keeps them: they are not given back (${mode === 'sync' ? 'blocking' : 'async'}; child process)`, { timeout: 40000 }, async () => {
      const r = await runChild([path.join(__dirname, 'fixtures', 'semaphore-weighted-dies.js'), `hold-${mode}`], { timeoutMs: 30000 })
      assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
      assert.deepStrictEqual(r.result, { afterDeath: 2, timedOut: true, two: true, value: 0 }, transcript(r))
    })
  }
})

describe('Semaphore: bad permit counts', () => {
  test('are rejected with TypeError / RangeError before anything is touched', BOUND, async () => {
    const sem = new Semaphore(3)
    const bad = [
      [0, RangeError], [-1, RangeError], [1.5, RangeError], [NaN, RangeError], [Infinity, RangeError],
      [2 ** 30, RangeError], ['2', TypeError], [null, TypeError], [2n, TypeError], [{}, TypeError]
    ]
    for (const [permits, E] of bad) {
      assert.throws(() => sem.acquire({ permits }), E, `acquire ${String(permits)}`)
      assert.throws(() => sem.tryAcquire(permits), E, `tryAcquire ${String(permits)}`)
      await assert.rejects(sem.acquireAsync({ permits }), E, `acquireAsync ${String(permits)}`)
      await assert.rejects(sem.runExclusive(() => assert.fail('ran'), { permits }), E, `runExclusive ${String(permits)}`)
    }
    assert.throws(() => sem.acquire(null), TypeError)
    assert.throws(() => sem.acquire('5'), TypeError)
    assert.throws(() => sem.acquire({ permits: 1, timeout: -1 }), RangeError)
    assert.throws(() => sem.acquire({ timeout: '1' }), TypeError)
    assert.throws(() => sem.release(2 ** 31), RangeError)
    // The largest request is valid: it waits (and times out here).
    assert.throws(() => sem.acquire({ permits: 2 ** 30 - 1, timeout: 0 }), isTimeout)
    await assert.rejects(sem.runExclusive(42, { permits: 0 }), TypeError, 'the callback is checked first')
    assert.strictEqual(sem.value, 3, 'nothing was taken or given')
    assert.strictEqual(sleepers(sem), 0, 'nothing was queued')
  })
})
