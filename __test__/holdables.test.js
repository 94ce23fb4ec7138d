'use strict'
// The shared suite: every primitive that is taken and given back
// (fixtures/holdables.js) in every style a user takes it — blocking, a
// callback, a promise, `using` — on the main thread, against workers that
// take it blocking. The same rules for all: exclusion under contention,
// timeouts and aborts that leave nothing queued or held, give-backs that
// run once however often they are called.
const assert = require('assert')
const path = require('path')
const { Worker } = require('worker_threads')
const { test, describe } = require('./harness')
const { internal } = require('../lib/futex')
const { until, inbox } = require('./util')
const { holdables, cellsOf } = require('./fixtures/holdables')

const WORKER = path.join(__dirname, 'fixtures', 'holdable-worker.js')
const HAS_ABORT = typeof AbortController === 'function'
const isTimeout = { name: 'LockTimeoutError', code: 'ERR_LOCK_TIMEOUT' }
const isAbort = { name: 'AbortError', code: 'ABORT_ERR' }

// `using held = await acquire()` where the runtime has the syntax.
let usingBlock = null
try {
  const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor
  usingBlock = new AsyncFunction('acquire', 'body', 'using held = await acquire()\nreturn await body(held)')
} catch (e) {
  if (!(e instanceof SyntaxError)) throw e
}

// How the main thread takes `x` and runs `body` while holding it, per style.
// A blocking body is synchronous; the others may await.
const styles = {
  blocking: {
    async: false,
    run (k, x, body, options) {
      const giveBack = k.block(x, options && options.timeout)
      try {
        return body()
      } finally {
        giveBack()
      }
    }
  },
  callback: { async: true, run: (k, x, body, options) => k.callback(x, body, options) },
  promise: {
    async: true,
    async run (k, x, body, options) {
      const release = await k.promise(x, options)
      try {
        return await body(release)
      } finally {
        release()
      }
    }
  },
  using: { async: true, skip: usingBlock === null && 'no `using` syntax', run: (k, x, body, options) => usingBlock(() => k.promise(x, options), body) }
}

function queued (x) {
  const cells = cellsOf(x)
  let n = 0
  for (let i = 0; i < cells.length; i++) n += internal.queueLength(cells, i)
  return n
}

function startWorker (kind, x, shared, role, extra) {
  const worker = new Worker(WORKER, {
    workerData: Object.assign({ kind, role, handle: { buffer: x.buffer, byteOffset: x.byteOffset }, shared: shared.buffer }, extra)
  })
  const box = inbox(worker, `the ${role} worker`)
  return { next: box.next, send: (m) => worker.postMessage(m), terminate: () => worker.terminate() }
}

// The mode others contend with: the kind itself, or its exclusive counterpart.
const exclusiveOf = (name) => holdables[name].counterpart || name

// Nothing is queued on x, and it can be taken (and is given back).
async function assertFree (x, name) {
  await until(() => queued(x) === 0, 'the queue to empty')
  const giveBack = holdables[exclusiveOf(name)].attempt(x)
  assert.notStrictEqual(giveBack, null, 'free again')
  giveBack()
}

for (const name of Object.keys(holdables)) {
  const k = holdables[name]
  const shared = !!k.counterpart
  describe(`${name}: every style, against blocking workers`, () => {
    for (const styleName of Object.keys(styles)) {
      const style = styles[styleName]
      const opts = { skip: style.skip }

      test(`${styleName}: excludes the others under contention (main + 2 workers, nothing lost)`, opts, async () => {
        const x = k.make()
        const counter = new Int32Array(new SharedArrayBuffer(4))
        const N = 150
        const workers = [0, 1].map(() => startWorker(exclusiveOf(name), x, counter, 'count', { count: N }))
        try {
          // A shared holder sees the count stand still; an exclusive one
          // increments it non-atomically, across an await where it can.
          const section = shared
            ? (style.async ? async () => { const v = counter[0]; await null; assert.strictEqual(counter[0], v) } : () => {})
            : (style.async ? async () => { const v = counter[0]; await null; counter[0] = v + 1 } : () => { counter[0] = counter[0] + 1 })
          for (let i = 0; i < N; i++) await style.run(k, x, section)
          await Promise.all(workers.map((w) => w.next('done')))
          assert.strictEqual(counter[0], shared ? 2 * N : 3 * N)
          await assertFree(x, name)
        } finally {
          await Promise.all(workers.map((w) => w.terminate()))
        }
      })

      test(`${styleName}: a timeout throws LockTimeoutError and leaves nothing queued or held`, opts, async () => {
        const x = k.make()
        const w = startWorker(exclusiveOf(name), x, new Int32Array(new SharedArrayBuffer(4)), 'hold')
        try {
          await w.next('held')
          let ran = false
          const attempt = () => style.run(k, x, () => { ran = true }, { timeout: 5 })
          if (style.async) await assert.rejects(attempt(), isTimeout)
          else assert.throws(attempt, isTimeout)
          assert.strictEqual(ran, false)
          await until(() => queued(x) === 0, 'the queue to empty')
          w.send('release')
          await w.next('released')
          await assertFree(x, name)
        } finally {
          await w.terminate()
        }
      })

      if (style.async) {
        test(`${styleName}: an abort while queued rejects with AbortError and leaves nothing queued or held`, { skip: style.skip || (!HAS_ABORT && 'no AbortController') }, async () => {
          const x = k.make()
          const w = startWorker(exclusiveOf(name), x, new Int32Array(new SharedArrayBuffer(4)), 'hold')
          try {
            await w.next('held')
            const ac = new AbortController()
            let ran = false
            const p = style.run(k, x, () => { ran = true }, { signal: ac.signal })
            await until(() => queued(x) >= 1, 'the acquisition to queue')
            const reason = new Error('stop')
            ac.abort(reason)
            const e = await p.then(() => null, (err) => err)
            assert.ok(e !== null, 'rejected')
            assert.strictEqual(e.name, isAbort.name)
            assert.strictEqual(e.code, isAbort.code)
            assert.strictEqual(e.cause, reason)
            assert.strictEqual(ran, false)
            await until(() => queued(x) === 0, 'the queue to empty')
            w.send('release')
            await w.next('released')
            await assertFree(x, name)
          } finally {
            await w.terminate()
          }
        })

        test(`${styleName}: while the main thread holds it, a worker finds it taken; afterwards free`, opts, async () => {
          const x = k.make()
          const counter = new Int32Array(new SharedArrayBuffer(4))
          await style.run(k, x, async () => {
            const w = startWorker(exclusiveOf(name), x, counter, 'try')
            try {
              assert.strictEqual((await w.next('tried')).free, false)
            } finally {
              await w.terminate()
            }
          })
          const w = startWorker(exclusiveOf(name), x, counter, 'try')
          try {
            assert.strictEqual((await w.next('tried')).free, true)
          } finally {
            await w.terminate()
          }
        })
      }
    }

    test('a release function gives back once, however often it is called or disposed', async () => {
      const x = k.make()
      const release = await k.promise(x)
      release()
      release()
      release[typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose')]()
      // Given back exactly once: taken once more, then it is taken.
      const again = k.attempt(x)
      assert.notStrictEqual(again, null)
      assert.strictEqual(holdables[exclusiveOf(name)].attempt(x), null)
      again()
      await assertFree(x, name)
    })

    test('callback: resolves with fn\'s result, and gives back when fn throws or rejects', async () => {
      const x = k.make()
      assert.strictEqual(await k.callback(x, () => 42), 42)
      assert.strictEqual(await k.callback(x, async () => { await null; return 'async' }), 'async')
      await assert.rejects(k.callback(x, () => { throw new Error('sync') }), /sync/)
      await assert.rejects(k.callback(x, async () => { throw new Error('async') }), /async/)
      await assertFree(x, name)
    })

    test('callback: gives back when fn\'s result cannot be read as a promise', async () => {
      const x = k.make()
      const boom = new Error('then getter')
      await assert.rejects(k.callback(x, () => ({ get then () { throw boom } })), (e) => e === boom)
      await assertFree(x, name)
      const { proxy, revoke } = Proxy.revocable({}, {})
      revoke()
      await assert.rejects(k.callback(x, () => proxy), TypeError)
      await assertFree(x, name)
      // A promise whose `constructor` getter throws (Promise.resolve reads it).
      const p = Promise.resolve(1)
      Object.defineProperty(p, 'constructor', { get () { throw boom } })
      const r = await k.callback(x, () => p).then((v) => ({ v }), (e) => ({ e }))
      assert.ok(r.v === 1 || r.e === boom, 'settles as the promise does, or with the getter\'s throw')
      await assertFree(x, name)
    })
  })
}
