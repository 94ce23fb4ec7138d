'use strict'
// The Web Locks API (shared-futex/web-locks), rule by rule from the W3C
// specification (https://w3c.github.io/web-locks/): the request method's
// argument handling and option checks, grantability and the FIFO queue per
// name, the callback's result holding the lock, ifAvailable, signal, steal,
// query(); then, in child processes with hard timeouts, several threads
// sharing the one manager of the process (fixtures/web-locks-threads.js).
const assert = require('assert')
const path = require('path')
const { test, describe, before } = require('./harness')
const { runChild, transcript } = require('./util')
const { LockManager, Lock } = require('../web-locks')

// WEB_LOCKS_UNDER_TEST=region runs the rules of the spec against a shared
// region's LockManager (`region.locks`, lib/region-locks.js) instead, as
// region-locks.test.js does: what only the process's own manager has (its
// identity and entry points, its per-thread fast path and the
// order of grants within a thread it documents, its clientIds, the threads
// of its child-process tests, requestSync's cycles of threads) is skipped
// there.
// WEB_LOCKS_UNDER_TEST=postgres does the same for a PostgresLockManager
// (web-locks-postgres.test.js), which also skips the rules its server's
// queue keeps otherwise (`notPostgres`: docs/web-locks-postgres.md) and
// requestSync; its `turn()` waits for the requests on their way to the server.
const REGION = process.env.WEB_LOCKS_UNDER_TEST === 'region'
const POSTGRES = process.env.WEB_LOCKS_UNDER_TEST === 'postgres'
const locks = REGION ? require('./fixtures/region-locks-manager') : POSTGRES ? require('./fixtures/postgres-locks-manager') : require('../web-locks').locks
const processOnly = REGION || POSTGRES ? { skip: 'the process\'s own manager only' } : {}
const notPostgres = (why) => POSTGRES ? { skip: `PostgresLockManager: ${why} (docs/web-locks-postgres.md)` } : {}
// Run alone, the PostgreSQL fixture starts a cluster of its own first.
if (POSTGRES) before(() => locks.ready)

const HARD_TIMEOUT = 60000
const T = { timeout: 10000 } // a test whose promise never settles fails instead of stalling the run
const HAS_ABORT = typeof AbortController === 'function'

let unique = 0
const uniqueName = () => `web-locks-test-${++unique}`

// A promise and the function that resolves it.
function deferred () {
  let resolve
  const promise = new Promise((r) => { resolve = r })
  return { promise, resolve }
}

// Lets queued microtasks and already-delivered grants run.
const turn = POSTGRES ? locks.turn : () => new Promise((resolve) => setImmediate(resolve))

const isDOMException = (name) => (e) => {
  assert.strictEqual(e.name, name)
  assert.ok(e instanceof Error || e.constructor.name === 'DOMException', 'a DOMException')
  return true
}

// The entries of query() for `name`.
async function stateOf (name) {
  const { held, pending } = await locks.query()
  const mine = (list) => list.filter((i) => i.name === name).map((i) => i.mode)
  return { held: mine(held), pending: mine(pending) }
}

describe('Web Locks: the API surface', () => {
  test('locks is the LockManager; LockManager and Lock cannot be constructed', processOnly, () => {
    assert.ok(locks instanceof LockManager)
    assert.throws(() => new LockManager(), TypeError)
    assert.throws(() => new Lock(), TypeError)
    assert.strictEqual(LockManager.prototype.request.length, 2)
    assert.strictEqual(Object.prototype.toString.call(locks), '[object LockManager]')
  })

  test('the ESM entry gives the same manager', { ...T, ...processOnly }, async () => {
    const esm = await import('../web-locks.mjs')
    assert.strictEqual(esm.locks, locks)
    assert.strictEqual(esm.Lock, Lock)
  })

  test('the callback gets a Lock with the name and mode', T, async () => {
    const name = uniqueName()
    const seen = await locks.request(name, (lock) => [lock instanceof Lock, lock.name, lock.mode])
    assert.deepStrictEqual(seen, [true, name, 'exclusive'])
    const shared = await locks.request(name, { mode: 'shared' }, (lock) => lock.mode)
    assert.strictEqual(shared, 'shared')
    assert.throws(() => Object.getOwnPropertyDescriptor(Lock.prototype, 'name').get.call({}), TypeError)
  })

  test('names are strings: ToString of the argument, every code unit counts', T, async () => {
    assert.strictEqual(await locks.request(12345, (lock) => lock.name), '12345')
    // Two lone surrogates are two names: both held at once, exclusively.
    const a = deferred()
    const b = deferred()
    const pa = locks.request('\uD800', () => a.promise)
    const pb = locks.request('\uDC00', () => b.promise)
    await turn()
    const { held } = await locks.query()
    assert.deepStrictEqual(held.map((i) => i.name).filter((n) => n.length === 1 && n >= '\uD800' && n <= '\uDFFF').sort(), ['\uD800', '\uDC00'])
    a.resolve()
    b.resolve()
    await Promise.all([pa, pb])
    await assert.rejects(locks.request(Symbol('x'), () => {}), TypeError)
  })
})

describe('Web Locks: argument errors and the option checks', () => {
  test('setKeepAlive takes a boolean and returns the previous setting', processOnly, () => {
    const { setKeepAlive } = require('../web-locks')
    assert.throws(() => setKeepAlive('no'), TypeError)
    assert.strictEqual(setKeepAlive(false), true)
    assert.strictEqual(setKeepAlive(true), false)
  })

  test('errors reject the returned promise, never throw', T, async () => {
    const p = locks.request('x')
    assert.ok(p instanceof Promise)
    await assert.rejects(p, TypeError)
  })

  test('a missing or non-callable callback is a TypeError', T, async () => {
    await assert.rejects(locks.request(uniqueName(), {}), TypeError)
    await assert.rejects(locks.request(uniqueName(), {}, 'no'), TypeError)
    await assert.rejects(locks.request(uniqueName(), {}, undefined), TypeError)
    await assert.rejects(locks.request(uniqueName(), () => {}, undefined), TypeError, 'three arguments: the second one is the options')
  })

  test('bad options are TypeErrors: a non-object, an unknown mode, a signal that is not an AbortSignal', T, async () => {
    await assert.rejects(locks.request(uniqueName(), 5, () => {}), TypeError)
    await assert.rejects(locks.request(uniqueName(), { mode: 'read' }, () => {}), TypeError)
    await assert.rejects(locks.request(uniqueName(), { signal: {} }, () => {}), TypeError)
    await assert.rejects(locks.request(uniqueName(), { signal: null }, () => {}), TypeError)
  })

  test('a signal must be a real AbortSignal: one with its shape, or made from its prototype, is a TypeError and never queued', { skip: !HAS_ABORT }, async () => {
    const name = uniqueName()
    const lookAlike = { aborted: false, reason: undefined, addEventListener () {}, removeEventListener () {} }
    let ran = 0
    await assert.rejects(locks.request(name, { signal: lookAlike }, () => { ran++ }), TypeError)
    await assert.rejects(locks.request(name, { signal: Object.create(AbortSignal.prototype) }, () => { ran++ }), TypeError)
    assert.strictEqual(ran, 0)
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
    assert.strictEqual(await locks.request(name, { signal: new AbortController().signal }, (lock) => lock.name), name)
    if (typeof AbortSignal.timeout === 'function') {
      assert.strictEqual(await locks.request(name, { signal: AbortSignal.timeout(60000) }, (lock) => lock.mode), 'exclusive')
    }
  })

  test('options are read once each, in WebIDL dictionary order', T, async () => {
    const read = []
    const options = {}
    for (const key of ['steal', 'signal', 'mode', 'ifAvailable']) {
      Object.defineProperty(options, key, { get () { read.push(key) } })
    }
    await locks.request(uniqueName(), options, () => {})
    assert.deepStrictEqual(read, ['ifAvailable', 'mode', 'signal', 'steal'])
  })

  test('a receiver that is not the LockManager rejects with a TypeError', T, async () => {
    await assert.rejects(LockManager.prototype.request.call({}, 'x', () => {}), TypeError)
    await assert.rejects(LockManager.prototype.query.call({}), TypeError)
  })

  test("names starting with '-' are NotSupportedError, and the callback never runs", T, async () => {
    let called = false
    await assert.rejects(locks.request('-reserved', () => { called = true }), isDOMException('NotSupportedError'))
    await assert.rejects(locks.request('-', { mode: 'shared' }, () => { called = true }), isDOMException('NotSupportedError'))
    assert.strictEqual(await locks.request('a-b', (lock) => lock.name), 'a-b')
    assert.strictEqual(called, false)
  })

  test('forbidden option combinations are NotSupportedError', T, async () => {
    const cb = () => {}
    await assert.rejects(locks.request(uniqueName(), { steal: true, ifAvailable: true }, cb), isDOMException('NotSupportedError'))
    await assert.rejects(locks.request(uniqueName(), { steal: true, mode: 'shared' }, cb), isDOMException('NotSupportedError'))
    if (HAS_ABORT) {
      const signal = new AbortController().signal
      await assert.rejects(locks.request(uniqueName(), { signal, steal: true }, cb), isDOMException('NotSupportedError'))
      await assert.rejects(locks.request(uniqueName(), { signal, ifAvailable: true }, cb), isDOMException('NotSupportedError'))
    }
  })

  test('a NotSupportedError has the DOMException code 9', T, async () => {
    await assert.rejects(locks.request('-x', () => {}), (e) => e.code === 9)
  })
})

describe('Web Locks: granting, holding, releasing', () => {
  test('the callback runs after request() returns, not inside it', T, async () => {
    let called = false
    const p = locks.request(uniqueName(), () => { called = true })
    assert.strictEqual(called, false)
    await p
    assert.strictEqual(called, true)
  })

  test("the request's promise settles as the callback's result", T, async () => {
    assert.strictEqual(await locks.request(uniqueName(), () => 42), 42)
    assert.strictEqual(await locks.request(uniqueName(), async () => 'async'), 'async')
    const err = new Error('inside')
    await assert.rejects(locks.request(uniqueName(), async () => { throw err }), (e) => e === err)
  })

  test('a callback that throws synchronously rejects the request and releases the lock', T, async () => {
    const name = uniqueName()
    const err = new Error('sync throw')
    await assert.rejects(locks.request(name, () => { throw err }), (e) => e === err)
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
    assert.strictEqual(await locks.request(name, { ifAvailable: true }, (lock) => lock !== null), true)
  })

  test('the lock is held until the promise the callback returns settles', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    let second = false
    const first = locks.request(name, () => hold.promise)
    const next = locks.request(name, () => { second = true })
    await turn()
    assert.deepStrictEqual(await stateOf(name), { held: ['exclusive'], pending: ['exclusive'] })
    assert.strictEqual(second, false)
    hold.resolve('done')
    assert.strictEqual(await first, 'done')
    await next
    assert.strictEqual(second, true)
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
  })

  test('a rejected returned promise releases the lock too', T, async () => {
    const name = uniqueName()
    await assert.rejects(locks.request(name, () => Promise.reject(new Error('no'))), /no/)
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
  })

  test('exclusive requests of one name are granted one at a time, in request order', T, async () => {
    const name = uniqueName()
    const order = []
    let inside = 0
    let overlap = false
    const all = []
    for (let i = 0; i < 20; i++) {
      all.push(locks.request(name, async () => {
        if (++inside > 1) overlap = true
        order.push(i)
        await turn()
        inside--
      }))
    }
    await Promise.all(all)
    assert.strictEqual(overlap, false)
    assert.deepStrictEqual(order, Array.from({ length: 20 }, (_, i) => i))
  })

  test('different names do not exclude each other', T, async () => {
    const hold = deferred()
    const a = locks.request(uniqueName(), () => hold.promise)
    const b = await locks.request(uniqueName(), () => 'b ran while a was held')
    assert.strictEqual(b, 'b ran while a was held')
    hold.resolve()
    await a
  })

  test('shared requests are granted together; an exclusive one waits for all of them', T, async () => {
    const name = uniqueName()
    const h1 = deferred()
    const h2 = deferred()
    const s1 = locks.request(name, { mode: 'shared' }, () => h1.promise)
    const s2 = locks.request(name, { mode: 'shared' }, () => h2.promise)
    let exclusive = false
    const x = locks.request(name, () => { exclusive = true })
    await turn()
    assert.deepStrictEqual(await stateOf(name), { held: ['shared', 'shared'], pending: ['exclusive'] })
    h1.resolve()
    await s1
    await turn()
    assert.strictEqual(exclusive, false, 'one shared lock is still held')
    h2.resolve()
    await Promise.all([s2, x])
    assert.strictEqual(exclusive, true)
  })

  test('a shared request behind a queued exclusive one waits for it (FIFO)', T, async () => {
    const name = uniqueName()
    const order = []
    const h = deferred()
    const s1 = locks.request(name, { mode: 'shared' }, () => { order.push('s1'); return h.promise })
    const x = locks.request(name, async () => { order.push('x'); await turn() })
    const s2 = locks.request(name, { mode: 'shared' }, () => { order.push('s2') })
    await turn()
    assert.deepStrictEqual(await stateOf(name), { held: ['shared'], pending: ['exclusive', 'shared'] })
    h.resolve()
    await Promise.all([s1, x, s2])
    assert.deepStrictEqual(order, ['s1', 'x', 's2'])
  })
})

describe('Web Locks: ifAvailable', () => {
  test('granted when available; the callback gets null when not, and nothing is queued', T, async () => {
    const name = uniqueName()
    assert.strictEqual(await locks.request(name, { ifAvailable: true }, (lock) => lock && lock.name), name)
    const hold = deferred()
    const holder = locks.request(name, () => hold.promise)
    await turn()
    let arg
    const r = await locks.request(name, { ifAvailable: true }, (lock) => { arg = lock; return 'skipped' })
    assert.strictEqual(arg, null)
    assert.strictEqual(r, 'skipped')
    assert.deepStrictEqual(await stateOf(name), { held: ['exclusive'], pending: [] })
    hold.resolve()
    await holder
  })

  test('shared is available next to shared locks, but not when a request is queued', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const s = locks.request(name, { mode: 'shared' }, () => hold.promise)
    await turn()
    assert.strictEqual(await locks.request(name, { mode: 'shared', ifAvailable: true }, (l) => l !== null), true)
    const x = locks.request(name, () => {})
    assert.strictEqual(await locks.request(name, { mode: 'shared', ifAvailable: true }, (l) => l), null)
    hold.resolve()
    await Promise.all([s, x])
  })

  test('a throwing callback given null rejects the request', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const holder = locks.request(name, () => hold.promise)
    await turn()
    await assert.rejects(locks.request(name, { ifAvailable: true }, () => { throw new Error('null-path') }), /null-path/)
    hold.resolve()
    await holder
  })
})

describe('Web Locks: signal', { skip: !HAS_ABORT }, () => {
  test('an already aborted signal rejects with its reason; the callback never runs', T, async () => {
    const c = new AbortController()
    const reason = new Error('why')
    c.abort(reason)
    let called = false
    await assert.rejects(locks.request(uniqueName(), { signal: c.signal }, () => { called = true }), (e) => e === reason)
    assert.strictEqual(called, false)
  })

  test('an abort right after request() returns, the name free, comes before the grant: rejected with the reason, the callback never runs, the name free', T, async () => {
    const name = uniqueName()
    const c = new AbortController()
    const reason = new Error('at once')
    let called = false
    const p = locks.request(name, { signal: c.signal }, () => { called = true })
    c.abort(reason)
    await assert.rejects(p, (e) => e === reason)
    assert.strictEqual(called, false)
    assert.strictEqual(await locks.request(name, { ifAvailable: true }, (lock) => lock !== null), true, 'nothing left held')
  })

  test('aborting a pending request takes it out of the queue at once and rejects with the reason', { ...T, ...notPostgres('its promise rejects while this test awaits a query() of the server, unhandled meanwhile; web-locks-postgres.test.js checks the rule') }, async () => {
    const name = uniqueName()
    const hold = deferred()
    const holder = locks.request(name, () => hold.promise)
    const c = new AbortController()
    let called = false
    const p = locks.request(name, { signal: c.signal }, () => { called = true })
    const after = locks.request(name, () => 'after')
    await turn()
    assert.deepStrictEqual(await stateOf(name), { held: ['exclusive'], pending: ['exclusive', 'exclusive'] })
    const reason = new Error('stop')
    c.abort(reason)
    assert.deepStrictEqual(await stateOf(name), { held: ['exclusive'], pending: ['exclusive'] })
    await assert.rejects(p, (e) => e === reason)
    hold.resolve()
    await holder
    assert.strictEqual(await after, 'after')
    assert.strictEqual(called, false)
  })

  test('without a reason the rejection is an AbortError', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const holder = locks.request(name, () => hold.promise)
    const c = new AbortController()
    const p = locks.request(name, { signal: c.signal }, () => {})
    c.abort()
    await assert.rejects(p, isDOMException('AbortError'))
    hold.resolve()
    await holder
  })

  test('aborting the first pending request grants the ones it held up', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const s = locks.request(name, { mode: 'shared' }, () => hold.promise)
    const c = new AbortController()
    const x = locks.request(name, { signal: c.signal }, () => {})
    let shared2 = false
    const s2 = locks.request(name, { mode: 'shared' }, () => { shared2 = true })
    await turn()
    assert.strictEqual(shared2, false, 'behind a queued exclusive request')
    const rejected = assert.rejects(x, isDOMException('AbortError'))
    c.abort()
    await s2
    assert.strictEqual(shared2, true)
    await rejected
    hold.resolve()
    await s
  })

  test('once the callback runs, the signal is ignored', T, async () => {
    const c = new AbortController()
    const r = await locks.request(uniqueName(), { signal: c.signal }, async () => {
      c.abort()
      await turn()
      return 'kept'
    })
    assert.strictEqual(r, 'kept')
  })
})

describe('Web Locks: steal', () => {
  test("steal releases the held lock: its request rejects with an AbortError, the stealer's callback runs", T, async () => {
    const name = uniqueName()
    const never = new Promise(() => {})
    const first = locks.request(name, () => never)
    // Rejected by the steal itself, before the stealer's callback runs.
    const firstRejected = assert.rejects(first, isDOMException('AbortError'))
    await turn()
    const got = await locks.request(name, { steal: true }, async (lock) => {
      // The stolen lock is gone from the held set.
      assert.deepStrictEqual(await stateOf(name), { held: ['exclusive'], pending: [] })
      return lock.mode
    })
    assert.strictEqual(got, 'exclusive')
    await firstRejected
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
  })

  test('a stolen lock whose callback ends before the news arrives still rejects with an AbortError', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const first = locks.request(name, () => hold.promise)
    await turn()
    const stealer = locks.request(name, { steal: true }, () => 'stole')
    hold.resolve('finished') // the stolen holder's callback ends in this very turn
    await assert.rejects(first, isDOMException('AbortError'))
    assert.strictEqual(await stealer, 'stole')
  })

  // A lock taken on the fast path learns of its steal by news about its
  // name's slot; news still on its way must not break the next lock this
  // thread takes on that name.
  test("news of a steal still on its way when the thread takes the name again does not break the new lock", T, async () => {
    const name = uniqueName()
    // The stolen holder's callback never ends; the name is taken again as
    // soon as the stealer is done, before the news can arrive.
    const first = locks.request(name, () => new Promise(() => {}))
    await turn()
    const stealer = locks.request(name, { steal: true }, () => 'stole')
    const second = stealer.then(() => locks.request(name, () => 'second kept its lock'))
    await assert.rejects(first, isDOMException('AbortError'))
    assert.strictEqual(await second, 'second kept its lock')
    // The stolen holder's callback ends first (its release finds the lock
    // gone), then the name is taken again, still before the news arrives.
    const hold = deferred()
    const third = locks.request(name, () => hold.promise)
    await turn()
    hold.resolve('done')
    const stealer2 = locks.request(name, { steal: true }, async () => {
      for (let i = 0; i < 10; i++) await null
      return 'stole again'
    })
    const fourth = stealer2.then(() => locks.request(name, async () => {
      await turn() // the news arrives meanwhile
      return 'fourth kept its lock'
    }))
    await assert.rejects(third, isDOMException('AbortError'))
    assert.strictEqual(await fourth, 'fourth kept its lock')
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
  })

  test('steal goes ahead of the queued requests, which are granted after it', T, async () => {
    const name = uniqueName()
    const order = []
    const hold = deferred()
    const s1 = locks.request(name, { mode: 'shared' }, () => hold.promise)
    const s2 = locks.request(name, { mode: 'shared' }, () => hold.promise)
    const queued = locks.request(name, () => { order.push('queued') })
    await turn()
    const stolen = locks.request(name, { steal: true }, async () => { order.push('steal'); await turn() })
    // (Both handled from now on: over PostgreSQL the two sessions end one after the other.)
    const rejected = [assert.rejects(s1, isDOMException('AbortError')), assert.rejects(s2, isDOMException('AbortError'))]
    await rejected[0]
    await rejected[1]
    await Promise.all([stolen, queued])
    assert.deepStrictEqual(order, ['steal', 'queued'])
    hold.resolve() // the stolen holders' callbacks end: nothing left to release
    await turn()
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
  })
})

describe('Web Locks: names in use, grants within the thread', processOnly, () => {
  test('more names than a thread keeps at hand: a held lock stays held and exclusive, every name still works', T, async () => {
    const kept = uniqueName()
    const hold = deferred()
    const held = locks.request(kept, () => hold.promise)
    await turn()
    for (let i = 0; i < 1200; i++) await locks.request(`${kept}-${i}`, () => {})
    assert.strictEqual(await locks.request(kept, { ifAvailable: true }, (lock) => lock), null)
    assert.deepStrictEqual(await stateOf(kept), { held: ['exclusive'], pending: [] })
    assert.strictEqual(locks.requestSync(`${kept}-7`, (lock) => lock.name), `${kept}-7`)
    hold.resolve()
    await held
    assert.strictEqual(await locks.request(kept, { ifAvailable: true }, (lock) => lock !== null), true)
    assert.deepStrictEqual(await stateOf(kept), { held: [], pending: [] })
  })

  test('a lock stolen by another thread before its callback ran, then taken again in the same turn: the new request keeps it', T, async () => {
    // request A takes the name; a worker steals it while this thread blocks;
    // request B, still in the same turn, takes the name again. A rejects
    // with AbortError; B's callback runs and B resolves with its result.
    const { Worker } = require('worker_threads')
    const name = uniqueName()
    const flag = new Int32Array(new SharedArrayBuffer(8))
    const worker = new Worker(`
      const { workerData: { name, flag, lib } } = require('worker_threads')
      const { locks } = require(lib)
      Atomics.store(flag, 0, 1)
      Atomics.notify(flag, 0)
      Atomics.wait(flag, 1, 0)
      locks.requestSync(name, { steal: true }, () => {})
      Atomics.store(flag, 1, 2)
      Atomics.notify(flag, 1)
    `, { eval: true, workerData: { name, flag, lib: path.join(__dirname, '..', 'web-locks') } })
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    while (Atomics.load(flag, 0) === 0) await turn()
    const order = []
    const a = locks.request(name, () => { order.push('A') })
    Atomics.store(flag, 1, 1)
    Atomics.notify(flag, 1)
    Atomics.wait(flag, 1, 1) // until the worker's steal is done
    const b = locks.request(name, () => { order.push('B'); return 'B done' })
    const [ra, rb] = await Promise.allSettled([a, b])
    await exited
    assert.strictEqual(ra.status, 'rejected')
    assert.strictEqual(ra.reason.name, 'AbortError')
    assert.deepStrictEqual(rb, { status: 'fulfilled', value: 'B done' })
    assert.ok(order.includes('B'), `callbacks run: ${order}`)
    await turn()
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
  })

  test("a release that grants this thread's next request runs its callback before the first request's promise settles (docs/web-locks.md)", T, async () => {
    const name = uniqueName()
    const order = []
    const hold = deferred()
    const first = locks.request(name, () => hold.promise)
    const second = locks.request(name, () => { order.push('second granted') })
    await turn()
    hold.resolve()
    await first
    assert.deepStrictEqual(order, ['second granted'])
    await second
  })
})

describe('Web Locks: query()', () => {
  test('held and pending entries name the mode and the client; pending in request order', { ...T, ...processOnly }, async () => {
    const name = uniqueName()
    const hold = deferred()
    const h = locks.request(name, { mode: 'shared' }, () => hold.promise)
    const p1 = locks.request(name, () => {})
    const p2 = locks.request(name, { mode: 'shared' }, () => {})
    await turn()
    const { held, pending } = await locks.query()
    assert.deepStrictEqual(held.filter((i) => i.name === name), [{ name, mode: 'shared', clientId: 'thread-0' }])
    assert.deepStrictEqual(pending.filter((i) => i.name === name), [
      { name, mode: 'exclusive', clientId: 'thread-0' },
      { name, mode: 'shared', clientId: 'thread-0' }
    ])
    hold.resolve()
    await Promise.all([h, p1, p2])
  })

  test('an idle manager shows nothing', T, async () => {
    await turn()
    assert.deepStrictEqual(await locks.query(), { held: [], pending: [] })
  })
})

describe('Web Locks: threads (child processes)', processOnly, () => {
  const run = async (mode) => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'web-locks-threads.js'), mode], { timeoutMs: HARD_TIMEOUT })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    return { result: r.result, shown: transcript(r) }
  }

  test('main thread + 3 workers, 5,000 exclusive requests each: never two holders, no lost update', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('exclusion')
    assert.strictEqual(result.overlaps, 0, shown)
    assert.strictEqual(result.counter, result.expected, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })

  test('shared and exclusive mixed across threads: a writer is always alone, readers do overlap', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('mixed')
    assert.strictEqual(result.writerOverlaps, 0, shown)
    assert.strictEqual(result.readersBesideWriter, 0, shown)
    assert.strictEqual(result.writes, result.expectedWrites, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })

  test("a terminated worker's held lock is released to the main thread's pending request", { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('holder-dies')
    assert.deepStrictEqual(result.before, { held: [`thread-${result.worker}`], pending: ['thread-0'] }, shown)
    assert.strictEqual(result.granted, true, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })

  test("a terminated worker's pending requests vanish from query() and are never granted", { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('waiter-dies')
    assert.deepStrictEqual(result.before, { held: ['thread-0'], pending: [`thread-${result.worker}`, `thread-${result.worker}`] }, shown)
    assert.deepStrictEqual(result.afterTerminate, { held: ['thread-0'], pending: [] }, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })

  test('a pending request keeps its worker alive until it is granted', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('keepalive')
    assert.strictEqual(result.seen, true, shown)
    assert.strictEqual(result.granted, true, shown)
    assert.strictEqual(result.exitCode, 0, shown)
  })

  test('with setKeepAlive(false) a worker waiting only for a lock exits, and its request leaves the queue', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('no-keepalive')
    assert.deepStrictEqual(result, { granted: false, exitCode: 0, after: { held: ['thread-0'], pending: [] } }, shown)
  })

  test('workers holding and waiting (async and requestSync) terminated at random: nothing is left held or pending', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('churn')
    assert.ok(result.grantsDuringChurn > 0, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
    assert.strictEqual(result.free, true, shown)
  })

  test('a second copy of the JavaScript layer in one thread shares the manager: excluded, then granted', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('copies')
    assert.deepStrictEqual(result, {
      distinct: true,
      unavailable: true,
      before: { held: 1, pending: 1 },
      got: 'granted to the second copy: lifecycle-copies',
      after: { held: [], pending: [] }
    }, shown)
  })

  test('workers share a shared lock with the main thread; an exclusive one excludes the main thread or another worker until released', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('workers-share')
    const [w1, w2] = result.workers
    // Shared: the main thread's callback ran while the worker held it too.
    assert.deepStrictEqual(result.shared, [w1, 'thread-0'], shown)
    // Worker holds exclusively: the main thread's request waits (ifAvailable
    // gets null), and is granted once the worker releases.
    assert.strictEqual(result.mainIfAvailable, null, shown)
    assert.deepStrictEqual(result.mainWaiting, { held: [w1], pending: ['thread-0'] }, shown)
    assert.strictEqual(result.mainGrantedEarly, false, shown)
    assert.strictEqual(result.mainGranted, true, shown)
    // The same between two workers.
    assert.strictEqual(result.w2IfAvailable, 'null', shown)
    assert.deepStrictEqual(result.w2Waiting, { held: [w1], pending: [w2] }, shown)
    assert.strictEqual(result.w2GrantedEarly, false, shown)
    const empty = { held: [], pending: [] }
    assert.deepStrictEqual(result.after, { shared: empty, x: empty, y: empty }, shown)
  })

  test('query() lists pending requests of three clients in the order they were made, and grants them in that order', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('query-order')
    const [w1, w2] = result.workers
    const main = result.main
    // Behind the main thread's lock: worker 1, worker 2, main thread.
    assert.deepStrictEqual(result.first, { held: [main], pending: [w1, w2, main] }, shown)
    // Then main thread, worker 2, worker 1: after the first group.
    assert.deepStrictEqual(result.both, { held: [main], pending: [w1, w2, main, main, w2, w1] }, shown)
    // Once the first group has been granted and released in turn, the
    // second group is pending in its own order.
    assert.deepStrictEqual(result.second, { held: [main], pending: [main, w2, w1] }, shown)
    assert.strictEqual(result.b3done, true, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })

  test('a worker waiting with a signal is terminated: its request leaves the queue, the requests behind it are granted in order', { timeout: HARD_TIMEOUT + 10000, skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const { result, shown } = await run('signal-waiter-dies')
    const { dying, other } = result
    assert.deepStrictEqual(result.before, { held: ['thread-0'], pending: [dying, other, 'thread-0'] }, shown)
    assert.deepStrictEqual(result.afterTerminate, { held: ['thread-0'], pending: [other, 'thread-0'] }, shown)
    // The next in line after the released lock is the other worker, not the dead one.
    assert.deepStrictEqual(result.whileOther, { held: [other], pending: ['thread-0'] }, shown)
    assert.strictEqual(result.mainBeforeOther, false, shown)
    assert.strictEqual(result.mineGranted, true, shown)
    assert.strictEqual(result.dyingOutcome, 'none', shown)
    // A worker terminated right after asking, with a signal, for a free name
    // leaves it free.
    assert.strictEqual(result.freeAfter, true, shown)
    const empty = { held: [], pending: [] }
    assert.deepStrictEqual(result.after, { name: empty, free: empty }, shown)
  })

  test('locks held by the main thread and two workers show each client in query(), in grant order', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('clients')
    assert.deepStrictEqual(result.held, ['thread-0', `thread-${result.workers[0]}`, `thread-${result.workers[1]}`], shown)
    assert.deepStrictEqual(result.pending, [`thread-${result.workers[0]}`], shown)
  })
})

describe('Web Locks: locks taken without a native call, when their thread or copy goes (child processes)', processOnly, () => {
  const run = async (mode, flags = []) => {
    const r = await runChild([...flags, path.join(__dirname, 'fixtures', 'web-locks-fast.js'), mode], { timeoutMs: HARD_TIMEOUT })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    return { result: r.result, shown: transcript(r) }
  }

  test('a worker that took a free name and is terminated with nobody waiting leaves it free', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('dies-holding')
    assert.deepStrictEqual(result.held, { held: [result.worker], pending: [] }, shown)
    assert.strictEqual(result.availableThen, false, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
    assert.strictEqual(result.free, true, shown)
  })

  test('a worker terminated inside a requestSync callback leaves the name free', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('dies-in-sync')
    assert.deepStrictEqual(result.held, { held: [result.worker], pending: [] }, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
    assert.strictEqual(result.free, true, shown)
    assert.strictEqual(result.sync, 'fast-dies-in-sync', shown)
  })

  test('workers taking names in a loop, terminated at random moments: every time, nothing is left held', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('dies-at-random')
    assert.deepStrictEqual(result, { rounds: [], count: 20, after: { held: [], pending: [] } }, shown)
  })

  test("a worker's second request, granted by its own release, leaves nothing keeping the worker alive", { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('handover-exit')
    assert.deepStrictEqual(result, { got: 'second granted', code: 0, after: { held: [], pending: [] } }, shown)
  })

  test('a copy of the package collected while its callback never settles: the lock stays held until stolen', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('copy-collected', ['--expose-gc'])
    assert.deepStrictEqual(result, {
      fast: result.fast,
      during: 1,
      collected: result.fast, // else its waiter keeps the copy alive
      held: { held: ['exclusive thread-0'], pending: [] },
      availableAfter: false,
      stole: 'fast-copy-collected',
      after: { held: [], pending: [] },
      free: true
    }, shown)
  })
})

describe('Web Locks: the polyfill (child processes)', processOnly, () => {
  const run = async (mode) => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'web-locks-polyfill.js'), mode], { timeoutMs: HARD_TIMEOUT })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    return { result: r.result, shown: transcript(r) }
  }

  test('where Node has no Web Locks it installs navigator.locks, worker_threads.locks, LockManager and Lock; workers share them', { timeout: HARD_TIMEOUT + 10000, skip: Number(process.versions.node.split('.')[0]) >= 24 && 'this Node has its own navigator.locks' }, async () => {
    const { result, shown } = await run('missing')
    assert.strictEqual(result.hadLocks, false, shown)
    assert.deepStrictEqual(result, {
      hadLocks: false,
      installed: true,
      navigator: true,
      workerThreads: true,
      globals: true,
      esmSame: true,
      worker: { available: false, held: ['thread-0'] }
    }, shown)
  })

  test("an existing navigator.locks is kept; install({ force: true }) replaces it; bad options are TypeErrors", { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const { result, shown } = await run('existing')
    assert.deepStrictEqual(result, { kept: true, badOption: 'TypeError', forced: true, navigator: true, workerThreads: true }, shown)
  })
})

describe('Web Locks: requestSync (not in the standard)', notPostgres('no requestSync'), () => {
  test('runs the callback with the lock and returns its result; a throw releases', () => {
    const name = uniqueName()
    assert.deepStrictEqual(locks.requestSync(name, (lock) => [lock.name, lock.mode]), [name, 'exclusive'])
    assert.strictEqual(locks.requestSync(name, { mode: 'shared' }, (lock) => lock.mode), 'shared')
    assert.throws(() => locks.requestSync(name, () => { throw new Error('sync boom') }), /sync boom/)
    assert.strictEqual(locks.requestSync(name, { ifAvailable: true }, (lock) => lock !== null), true)
  })

  test("bad arguments throw at once, as request's reject", () => {
    assert.throws(() => locks.requestSync('x'), TypeError)
    assert.throws(() => locks.requestSync('x', {}, 1), TypeError)
    assert.throws(() => locks.requestSync('x', { mode: 'both' }, () => {}), TypeError)
    assert.throws(() => locks.requestSync('-x', () => {}), isDOMException('NotSupportedError'))
    assert.throws(() => locks.requestSync('x', { steal: true, mode: 'shared' }, () => {}), isDOMException('NotSupportedError'))
    if (HAS_ABORT) {
      assert.throws(() => locks.requestSync('x', { signal: new AbortController().signal }, () => {}), isDOMException('NotSupportedError'))
    }
    assert.throws(() => LockManager.prototype.requestSync.call({}, 'x', () => {}), TypeError)
  })

  test("behind this thread's own lock it is a DeadlockError, not a hang; ifAvailable gets null; steal takes it", T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const held = locks.request(name, { mode: 'shared' }, () => hold.promise)
    await turn()
    assert.throws(() => locks.requestSync(name, () => {}), { name: 'DeadlockError', code: 'ERR_LOCK_DEADLOCK' })
    assert.strictEqual(locks.requestSync(name, { mode: 'shared' }, (lock) => lock.mode), 'shared', 'shared beside shared is granted')
    assert.strictEqual(locks.requestSync(name, { ifAvailable: true }, (lock) => lock), null)
    const stolen = assert.rejects(held, isDOMException('AbortError'))
    assert.strictEqual(locks.requestSync(name, { steal: true }, (lock) => lock.name), name)
    await stolen
    hold.resolve()
    await turn()
    assert.deepStrictEqual(await stateOf(name), { held: [], pending: [] })
  })

  const run = async (mode) => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'web-locks-threads.js'), mode], { timeoutMs: HARD_TIMEOUT })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    return { result: r.result, shown: transcript(r) }
  }

  test('a worker blocks until the main thread releases, then sees what the holder wrote', { timeout: HARD_TIMEOUT + 10000, ...processOnly }, async () => {
    const { result, shown } = await run('sync-waits')
    assert.deepStrictEqual(result.before, { held: ['thread-0'], pending: [`thread-${result.worker}`] }, shown)
    assert.strictEqual(result.got, 'exclusive after 42', shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })

  test('a worker terminated while blocked leaves the queue', { timeout: HARD_TIMEOUT + 10000, ...processOnly }, async () => {
    const { result, shown } = await run('sync-terminated')
    assert.deepStrictEqual(result.afterTerminate, { held: ['thread-0'], pending: [] }, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })

  test('a requestSync that would close a cycle of threads blocked in requestSync is a DeadlockError naming the cycle; the others go on', { timeout: HARD_TIMEOUT + 10000, ...processOnly }, async () => {
    for (const mode of ['sync-cycle', 'sync-cycle-queued']) {
      const { result, shown } = await run(mode)
      const [a, b, c] = result.threads
      const [n0, n1, n2] = result.names
      assert.deepStrictEqual(result.outcomes.slice(0, 2), ['granted', 'granted'], shown)
      const e = result.outcomes[2]
      assert.deepStrictEqual({ name: e.name, code: e.code, cycle: e.cycle }, {
        name: 'DeadlockError',
        code: 'ERR_LOCK_DEADLOCK',
        cycle: [{ clientId: c, name: n0 }, { clientId: a, name: n1 }, { clientId: b, name: n2 }]
      }, `${mode}: ${shown}`)
      assert.match(e.message, new RegExp(`this thread \\(${c}\\) would wait for "${n0}" on ${a}; ${a} waits for "${n1}" on ${b}; ${b} waits for "${n2}" on this thread`), shown)
      // The main thread's queued request (a running thread) is granted in the end.
      assert.strictEqual(result.main, mode === 'sync-cycle-queued' ? 'main: exclusive' : null, shown)
      assert.deepStrictEqual(result.after, [0, 1, 2].map(() => ({ held: [], pending: [] })), shown)
    }
  })

  test('a wait that closes no cycle is no DeadlockError: a shared request beside a shared holder that is blocked', { timeout: HARD_TIMEOUT + 10000, ...processOnly }, async () => {
    const { result, shown } = await run('sync-cycle-shared')
    assert.deepStrictEqual(result.outcomes, ['granted', 'granted', 'granted'], shown)
    assert.deepStrictEqual(result.after, [0, 1, 2].map(() => ({ held: [], pending: [] })), shown)
  })

  test('stopped by a vm timeout (blocked, or in its callback), its lock is released once its thread\'s loop turns', { timeout: HARD_TIMEOUT + 10000, ...processOnly }, async () => {
    const { result, shown } = await run('sync-vm-stopped')
    assert.deepStrictEqual(result.stopped, { blocked: 'stopped', sameTurn: 'DeadlockError', fast: 'stopped' }, shown)
    assert.deepStrictEqual([result.got, result.gotFast], ['exclusive', 'exclusive'], shown)
    assert.deepStrictEqual(result.after, { held: [] }, shown)
  })

  test('a thread that may not block gets a TypeError from requestSync, except with ifAvailable or steal', { timeout: HARD_TIMEOUT + 10000, ...processOnly }, async () => {
    const r = await runChild(['--allow-natives-syntax', path.join(__dirname, 'fixtures', 'web-locks-threads.js'), 'cannot-block'], { timeoutMs: HARD_TIMEOUT })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    assert.deepStrictEqual(r.result, {
      blocking: 'throws TypeError',
      ifAvailable: 'returns true',
      steal: 'returns stole',
      async: 'async ran',
      after: { held: [], pending: [] }
    }, transcript(r))
  })

  test('main (async) + 3 workers (requestSync): never two holders, no lost update', { timeout: HARD_TIMEOUT + 10000, ...processOnly }, async () => {
    const { result, shown } = await run('sync-exclusion')
    assert.strictEqual(result.overlaps, 0, shown)
    assert.strictEqual(result.counter, result.expected, shown)
    assert.deepStrictEqual(result.after, { held: [], pending: [] }, shown)
  })
})
