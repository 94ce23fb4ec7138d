'use strict'
// The Web Locks API (shared-futex/web-locks): when a request's callback runs
// and when its promise settles, against the W3C specification's steps
// (https://w3c.github.io/web-locks/): the callback runs in a task of the
// event loop ("process the lock request queue" queues it), never in a
// microtask of the turn that asked; a settled callback releases its lock,
// granting the next request, before the request's promise is resolved; and
// one signal shared by many pending requests listens once.
const assert = require('assert')
const { test, describe } = require('./harness')
const { locks } = require('../web-locks')

const T = { timeout: 10000 } // a test whose promise never settles fails instead of stalling the run
const HAS_ABORT = typeof AbortController === 'function'

let unique = 0
const uniqueName = () => `web-locks-tasks-test-${++unique}`

function deferred () {
  let resolve
  const promise = new Promise((r) => { resolve = r })
  return { promise, resolve }
}

// A chain of `n` microtasks that logs `label` at its end.
function microtasks (n, log, label) {
  let p = Promise.resolve()
  for (let i = 1; i < n; i++) p = p.then(() => {})
  return p.then(() => log.push(label))
}

describe('Web Locks: the callback runs in a task', () => {
  test('a lock granted at once: every microtask queued after request() returned runs before the callback', T, async () => {
    const log = []
    const done = locks.request(uniqueName(), () => { log.push('callback') })
    Promise.resolve().then(() => log.push('micro'))
    const chain = microtasks(20, log, 'micro x20')
    await Promise.all([done, chain])
    assert.deepStrictEqual(log, ['micro', 'micro x20', 'callback'])
  })

  test('shared and ifAvailable (granted, or given null) callbacks too', T, async () => {
    const log = []
    const name = uniqueName()
    const held = deferred()
    const got = deferred()
    const holder = locks.request(name, () => { got.resolve(); return held.promise })
    await got.promise
    const all = [
      locks.request(uniqueName(), { mode: 'shared' }, () => { log.push('shared') }),
      locks.request(uniqueName(), { ifAvailable: true }, (lock) => { log.push(lock === null ? 'null' : 'lock') }),
      locks.request(name, { ifAvailable: true }, (lock) => { log.push(lock === null ? 'null' : 'lock') })
    ]
    Promise.resolve().then(() => log.push('micro'))
    await Promise.all(all)
    assert.deepStrictEqual(log, ['micro', 'shared', 'lock', 'null'])
    held.resolve()
    await holder
  })

  test('each callback is its own task: the microtasks one queues run before the next callback', T, async () => {
    const log = []
    const a = locks.request(uniqueName(), () => {
      log.push('a')
      Promise.resolve().then(() => log.push('a micro'))
    })
    const b = locks.request(uniqueName(), () => { log.push('b') })
    await Promise.all([a, b])
    assert.deepStrictEqual(log, ['a', 'a micro', 'b'])
  })
})

describe("Web Locks: a release grants the next request before the released request's promise settles", () => {
  for (const how of ['fulfils', 'rejects', 'throws']) {
    test(`this thread's next request runs before the first one's promise reactions (the callback ${how})`, T, async () => {
      const name = uniqueName()
      const log = []
      const hold = deferred()
      const got = deferred()
      const first = locks.request(name, () => {
        got.resolve()
        return hold.promise.then(() => {
          if (how === 'rejects') return Promise.reject(new Error('first'))
          if (how === 'throws') throw new Error('first')
          return 'first'
        })
      })
      const second = locks.request(name, () => { log.push('second callback') })
      let snapshot = null
      const after = first.then(
        () => { log.push('first settled') },
        () => { log.push('first settled') }).then(() => locks.query().then((s) => { snapshot = s }))
      await got.promise
      hold.resolve()
      await Promise.all([after, second])
      assert.deepStrictEqual(log, ['second callback', 'first settled'])
      assert.ok(snapshot !== null)
    })
  }

  test("the steps of metarhia/web-locks' `steps` test, synchronised on promises", T, async () => {
    const name = uniqueName()
    const steps = []
    const inFirst = deferred()
    const release = deferred()
    const a = (async () => {
      steps.push(0)
      await locks.request(name, async () => {
        steps.push(1)
        inFirst.resolve()
        await release.promise
        steps.push(3)
      })
      steps.push(5)
    })()
    await inFirst.promise
    steps.push(2)
    const b = locks.request(name, async () => { steps.push(4) }).then(() => steps.push(6))
    release.resolve()
    await Promise.all([a, b])
    assert.deepStrictEqual(steps, [0, 1, 2, 3, 4, 5, 6])
  })

  test('query() from the first promise reaction shows the next request holding, not pending', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const got = deferred()
    const first = locks.request(name, () => { got.resolve(); return hold.promise })
    const secondHeld = deferred()
    const second = locks.request(name, () => secondHeld.promise)
    const seen = first.then(() => locks.query())
    await got.promise
    hold.resolve()
    const { held, pending } = await seen
    assert.deepStrictEqual(held.filter((l) => l.name === name).map((l) => l.mode), ['exclusive'])
    assert.deepStrictEqual(pending.filter((l) => l.name === name), [])
    secondHeld.resolve()
    await second
  })
})

describe('Web Locks: one listener per AbortSignal', { skip: !HAS_ABORT && 'no AbortController' }, () => {
  test('50 requests pending on one signal: no MaxListenersExceededWarning; aborting rejects all 50 with an AbortError', T, async () => {
    const name = uniqueName()
    const warnings = []
    const sentinel = deferred()
    const onWarning = (w) => {
      if (w.message === 'web-locks-tasks sentinel') sentinel.resolve()
      else warnings.push(w)
    }
    process.on('warning', onWarning)
    try {
      const hold = deferred()
      const got = deferred()
      const holder = locks.request(name, () => { got.resolve(); return hold.promise })
      await got.promise
      const controller = new AbortController()
      const callbacks = []
      const all = []
      for (let i = 0; i < 50; i++) {
        all.push(locks.request(name, { signal: controller.signal }, () => { callbacks.push(i) }).then(
          () => 'fulfilled', (e) => e))
      }
      // Warnings are emitted in order: once this one arrives, any before it has.
      process.emitWarning('web-locks-tasks sentinel')
      await sentinel.promise
      assert.deepStrictEqual(warnings.map((w) => `${w.name}: ${w.message}`), [])
      const { pending } = await locks.query()
      assert.strictEqual(pending.filter((l) => l.name === name).length, 50)
      controller.abort()
      const results = await Promise.all(all)
      assert.strictEqual(results.length, 50)
      for (const r of results) assert.strictEqual(r.name, 'AbortError')
      const after = await locks.query()
      assert.strictEqual(after.pending.filter((l) => l.name === name).length, 0)
      hold.resolve()
      await holder
      assert.deepStrictEqual(callbacks, [])
    } finally {
      process.removeListener('warning', onWarning)
    }
  })

  test('the listener is removed once no request on the signal is pending', T, async () => {
    const { getEventListeners } = require('events')
    if (typeof getEventListeners !== 'function') return // Node 15.2+
    const name = uniqueName()
    const hold = deferred()
    const got = deferred()
    const holder = locks.request(name, () => { got.resolve(); return hold.promise })
    await got.promise
    const controller = new AbortController()
    const all = []
    for (let i = 0; i < 20; i++) all.push(locks.request(name, { signal: controller.signal }, () => i))
    assert.strictEqual(getEventListeners(controller.signal, 'abort').length, 1)
    hold.resolve()
    await holder
    assert.deepStrictEqual(await Promise.all(all), Array.from({ length: 20 }, (_, i) => i))
    assert.strictEqual(getEventListeners(controller.signal, 'abort').length, 0)
    // Granted at once: listened to until its callback's task runs, then not.
    const p = locks.request(uniqueName(), { signal: controller.signal }, () => 'again')
    assert.strictEqual(await p, 'again')
    assert.strictEqual(getEventListeners(controller.signal, 'abort').length, 0)
  })
})
