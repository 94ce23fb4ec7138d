'use strict'
// The `{ timeout, signal }` options every async method shares
// (lib/options.js), with a signal that is any AbortSignal-like object: its
// shape is checked up front, and its getters and methods, read while the
// call waits, cannot leave a promise pending or anything held. Plain objects
// stand for the signal, so this runs where AbortController does not exist.
const assert = require('assert')
const { test, describe } = require('./harness')
const sf = require('..')
const { internal } = require('../lib/futex')
const { holdables, cellsOf } = require('./fixtures/holdables')

// Every async method that takes `{ signal }`, on a fresh object that it
// finds free (or set): `call(options)` returns what the method returns.
const methods = {
  'AsyncLock.lockAsync': (o) => new sf.AsyncLock().lockAsync(o),
  'AsyncLock.runExclusive': (o) => new sf.AsyncLock().runExclusive(() => 1, o),
  'Semaphore.acquireAsync': (o) => new sf.Semaphore(1).acquireAsync(o),
  'Semaphore.runExclusive': (o) => new sf.Semaphore(1).runExclusive(() => 1, o),
  'RwLock.readAsync': (o) => new sf.RwLock().readAsync(o),
  'RwLock.writeAsync': (o) => new sf.RwLock().writeAsync(o),
  'RwLock.runRead': (o) => new sf.RwLock().runRead(() => 1, o),
  'RwLock.runWrite': (o) => new sf.RwLock().runWrite(() => 1, o),
  'Barrier.waitAsync': (o) => new sf.Barrier(1).waitAsync(o),
  'WaitGroup.waitAsync': (o) => new sf.WaitGroup().waitAsync(o),
  'ManualResetEvent.waitAsync': (o) => new sf.ManualResetEvent(true).waitAsync(o),
  'AutoResetEvent.waitAsync': (o) => new sf.AutoResetEvent(true).waitAsync(o),
  'Once.runAsync': (o) => new sf.Once().runAsync(() => 1, o),
  'Condition.waitAsync': (o) => {
    const lock = new sf.AsyncLock()
    lock.lock()
    return new sf.Condition().waitAsync(lock, o)
  }
}

// Calls f and tells how it ended: a promise's outcome, or a synchronous throw.
async function outcome (f) {
  let p
  try {
    p = f()
  } catch (e) {
    return { threw: e }
  }
  assert.ok(p instanceof Promise, 'returns a promise')
  return p.then((value) => ({ value }), (rejected) => ({ rejected }))
}

const listeners = { addEventListener () {}, removeEventListener () {} }
// A call that never settles fails its test instead of stalling the run.
const BOUNDED = { timeout: 10000 }
const boom = new Error('boom')

describe('options: the shape of a signal is checked up front', () => {
  for (const name of Object.keys(methods)) {
    test(`${name}: a signal without removeEventListener is a TypeError (a rejection)`, BOUNDED, async () => {
      const r = await outcome(() => methods[name]({ signal: { aborted: false, addEventListener () {} } }))
      assert.ok(r.rejected instanceof TypeError, `rejected with a TypeError, got ${JSON.stringify(Object.keys(r))}`)
      assert.match(r.rejected.message, /signal must be an AbortSignal/)
    })
  }
})

describe('options: a signal whose getters throw rejects the call, never throws', () => {
  for (const name of Object.keys(methods)) {
    test(`${name}: aborted, with a reason getter that throws: AbortError, caused by the throw`, BOUNDED, async () => {
      const signal = Object.assign({ aborted: true, get reason () { throw boom } }, listeners)
      const r = await outcome(() => methods[name]({ signal }))
      assert.ok(r.rejected, `rejects (${r.threw ? 'threw synchronously' : 'resolved'})`)
      assert.strictEqual(r.rejected.code, sf.E_ABORTED)
      assert.strictEqual(r.rejected.cause, boom)
    })

    test(`${name}: an aborted getter that throws after its first read: rejects with the throw, or an AbortError caused by it`, BOUNDED, async () => {
      let reads = 0
      const signal = Object.assign({ get aborted () { if (reads++ < 1) return false; throw boom } }, listeners)
      const r = await outcome(() => methods[name]({ signal }))
      assert.ok(r.rejected, `rejects (${r.threw ? 'threw synchronously' : 'resolved'})`)
      if (r.rejected !== boom) {
        assert.strictEqual(r.rejected.code, sf.E_ABORTED)
        assert.strictEqual(r.rejected.cause, boom)
      }
    })
  }
})

// What was waited for arrives while the signal misbehaves: the call still
// settles, and gives back what it was handed when it rejects.
describe('options: a queued call whose signal starts throwing settles and holds nothing', () => {
  // A signal whose `aborted` getter, or whose removeEventListener, throws
  // once armed (after the call has queued).
  function armedSignal (what) {
    const signal = {
      armed: false,
      get aborted () {
        if (this.armed && what === 'aborted') throw boom
        return false
      },
      addEventListener () {},
      removeEventListener () {
        if (this.armed && what === 'removeEventListener') throw boom
      }
    }
    return signal
  }
  // Waiters queued on any cell of x.
  const queuedOn = (x) => {
    const cells = cellsOf(x)
    let n = 0
    for (let i = 0; i < cells.length; i++) n += internal.queueLength(cells, i)
    return n
  }
  const isFree = (k, x) => {
    const giveBack = k.attempt(x)
    if (giveBack !== null) giveBack()
    return giveBack !== null
  }
  // The async styles of taking a holdable (fixtures/holdables.js).
  const styles = {
    promise: (k, x, options) => k.promise(x, options),
    callback: (k, x, options) => k.callback(x, () => 'ran', options)
  }

  for (const [name, styleName] of ['AsyncLock', 'Semaphore(1)', 'RwLock write'].flatMap((n) => Object.keys(styles).map((st) => [n, st]))) {
    const k = holdables[name]
    async function handOver (what) {
      const x = k.make()
      const giveBack = k.block(x)
      const signal = armedSignal(what)
      const p = styles[styleName](k, x, { signal })
      // runExclusive asks for it one microtask after the call.
      for (let i = 0; i < 100 && queuedOn(x) === 0; i++) await null
      assert.ok(queuedOn(x) > 0, 'queued')
      signal.armed = true
      giveBack()
      const r = await outcome(() => p)
      assert.strictEqual(queuedOn(x), 0)
      return { x, r }
    }

    test(`${name}, ${styleName}: handed over while the aborted getter throws: AbortError, and free again`, BOUNDED, async () => {
      const { x, r } = await handOver('aborted')
      assert.ok(r.rejected, 'rejects')
      assert.strictEqual(r.rejected.code, sf.E_ABORTED)
      assert.strictEqual(r.rejected.cause, boom)
      assert.ok(isFree(k, x), 'free again: what was handed over was given back')
    })

    test(`${name}, ${styleName}: handed over while removeEventListener throws: taken, and free once given back`, BOUNDED, async () => {
      const { x, r } = await handOver('removeEventListener')
      assert.ok(!r.rejected, 'resolves')
      if (typeof r.value === 'function') r.value() // a release function
      assert.ok(isFree(k, x), 'free again')
    })
  }

  for (const what of ['aborted', 'removeEventListener']) {
    test(`ManualResetEvent: set while the signal's ${what} throws: the wait settles`, BOUNDED, async () => {
      const e = new sf.ManualResetEvent()
      const signal = armedSignal(what)
      const p = e.waitAsync({ signal })
      signal.armed = true
      e.set()
      const r = await outcome(() => p)
      assert.ok(r.value === true || (r.rejected && r.rejected.code === sf.E_ABORTED), 'settled: set, or aborted')
    })

    test(`Condition: notified while the signal's ${what} throws: settles holding the lock again`, BOUNDED, async () => {
      const lock = new sf.AsyncLock()
      const cond = new sf.Condition()
      lock.lock()
      const signal = armedSignal(what)
      const p = cond.waitAsync(lock, { signal })
      signal.armed = true
      cond.notifyOne()
      const r = await outcome(() => p)
      assert.ok(r.value !== undefined || r.rejected, 'settled')
      assert.strictEqual(lock.tryLock(), false, 'the lock is held again (by this thread)')
      lock.unlock()
    })
  }
})

// Calls that have to wait, each on a fresh object nobody will satisfy.
describe('options: a signal whose addEventListener throws rejects a call that has to wait', () => {
  const waiting = {
    'AsyncLock.lockAsync': (o) => { const l = new sf.AsyncLock(); l.lock(); return l.lockAsync(o) },
    'Semaphore.acquireAsync': (o) => new sf.Semaphore(0).acquireAsync(o),
    'RwLock.readAsync': (o) => { const l = new sf.RwLock(); l.write(); return l.readAsync(o) },
    'Condition.waitAsync': (o) => { const l = new sf.AsyncLock(); l.lock(); return new sf.Condition().waitAsync(l, o) },
    'Barrier.waitAsync': (o) => new sf.Barrier(2).waitAsync(o),
    'WaitGroup.waitAsync': (o) => new sf.WaitGroup(1).waitAsync(o),
    'ManualResetEvent.waitAsync': (o) => new sf.ManualResetEvent().waitAsync(o),
    'AutoResetEvent.waitAsync': (o) => new sf.AutoResetEvent().waitAsync(o)
  }
  for (const name of Object.keys(waiting)) {
    test(`${name}: AbortError, caused by the throw, before the timeout`, BOUNDED, async () => {
      const signal = { aborted: false, addEventListener () { throw boom }, removeEventListener () {} }
      const r = await outcome(() => waiting[name]({ signal, timeout: 60000 }))
      assert.ok(r.rejected, `rejects (${r.threw ? 'threw synchronously' : 'resolved'})`)
      assert.strictEqual(r.rejected.code, sf.E_ABORTED)
      assert.strictEqual(r.rejected.cause, boom)
    })
  }
})
