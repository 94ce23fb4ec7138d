'use strict'
// One suite, run against every way of taking an AsyncLock on the main
// thread: blocking lock()/unlock(), the executeLocked callback, the lockAsync
// promise, and `using` (the statement where the runtime parses it, else the
// release function's Symbol.dispose called as the statement would).
const assert = require('assert')
const { test, describe } = require('./harness')
const { AsyncLock } = require('..')
const { cells, waiters, handle, startWorker } = require('./fixtures/lock-util')

const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')

let usingStatement = null
try {
  // eslint-disable-next-line no-new-func
  usingStatement = new Function('lock', 'body',
    'return (async () => { using release = await lock.lockAsync(); return await body() })()')
} catch (e) {
  // This runtime does not parse `using`.
}

// run(lock, body): takes the lock, runs body (sync or async) under it,
// releases it, resolves with body's result.
const styles = [
  {
    name: 'blocking lock() / unlock()',
    async run (lock, body) {
      lock.lock()
      try {
        return body()
      } finally {
        lock.unlock()
      }
    }
  },
  {
    name: 'callback: executeLocked(fn)',
    run: (lock, body) => lock.executeLocked(() => body())
  },
  {
    name: 'promise: lockAsync() → release()',
    async run (lock, body) {
      const release = await lock.lockAsync()
      try {
        return await body()
      } finally {
        release()
      }
    }
  },
  {
    name: usingStatement ? 'using: the `using` statement' : 'using: release[Symbol.dispose]() as `using` calls it',
    run: usingStatement || (async (lock, body) => {
      const release = await lock.lockAsync()
      try {
        return await body()
      } finally {
        release[DISPOSE]()
      }
    })
  }
]

const LONG = { timeout: 60000 }

for (const style of styles) {
  describe(`AsyncLock, ${style.name}`, () => {
    test('takes a free lock with the one-compareExchange fast path and gives it back', async () => {
      const lock = new AsyncLock()
      const seen = await style.run(lock, () => ({ word: cells(lock)[0], isLocked: lock.isLocked }))
      // The main thread is owner 1: WORD = 1·2, no contended bit.
      assert.deepStrictEqual(seen, { word: 2, isLocked: true })
      assert.strictEqual(cells(lock)[0], 0)
      assert.strictEqual(lock.isLocked, false)
    })

    test('waits for a worker that holds the lock, and runs after its critical section', async () => {
      const lock = new AsyncLock()
      const shared = new Int32Array(new SharedArrayBuffer(4))
      const w = startWorker('hold', { lock: handle(lock), shared: shared.buffer, then: 'queued', queued: 1, marker: 42 })
      try {
        assert.strictEqual((await w.next('held')).status, 'acquired')
        // The worker releases only once we are queued, after writing 42.
        const seen = await style.run(lock, () => shared[0])
        assert.strictEqual(seen, 42)
        await w.next('released')
        assert.strictEqual(lock.isLocked, false)
        assert.strictEqual(waiters(lock), 0)
      } finally {
        await w.terminate()
      }
    })

    test('a body that throws leaves the lock free', async () => {
      const lock = new AsyncLock()
      await assert.rejects(style.run(lock, () => { throw new SyntaxError('boom') }), SyntaxError)
      assert.strictEqual(lock.isLocked, false)
      await assert.rejects(style.run(lock, () => Promise.reject(new SyntaxError('boom'))), SyntaxError)
      assert.strictEqual(lock.isLocked, false)
    })

    test('mutual exclusion: main + 2 blocking + 2 async workers, non-atomic counter, exact', LONG, async () => {
      const M = 3000
      const lock = new AsyncLock(new SharedArrayBuffer(64), 16) // not at offset 0
      const shared = new Int32Array(new SharedArrayBuffer(4))
      const workers = ['sync', 'async', 'sync', 'async'].map((mode) =>
        startWorker('increment', { lock: handle(lock), shared: shared.buffer, count: M, mode }))
      try {
        for (let k = 0; k < M; k++) {
          await style.run(lock, () => { shared[0] = shared[0] + 1 })
        }
        for (const w of workers) await w.next('done', 50000)
        assert.strictEqual(shared[0], 5 * M)
        assert.strictEqual(lock.isLocked, false)
        assert.strictEqual(waiters(lock), 0)
        assert.strictEqual(cells(lock)[1], 0, 'the reserved second cell is untouched')
      } finally {
        await Promise.all(workers.map((w) => w.terminate()))
      }
    })
  })
}
