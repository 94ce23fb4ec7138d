'use strict'
// Every async acquisition and wait settles, whatever throws inside one of
// its steps (a release that finds nothing to give back, a native call that
// fails): the promise rejects with the error, and nothing stays held or
// queued. A step runs inside a promise callback, where a throw that escaped
// it would leave the promise pending for good.
//
// "Pending" is decided after the step has run, as the waiter's own state
// shows (its outcome was delivered to this thread), never after a sleep.
const assert = require('assert')
const { test, describe } = require('./harness')
const sf = require('..')
const binding = require('../lib/native')
const { internal } = require('../lib/futex')
const { until } = require('./util')

const BOUNDED = { timeout: 20000 }
const ME = internal.threadId + 1
const boom = new Error('boom')

// How `p` stands once `ran()` holds and the microtasks queued by then have
// run: { value }, { rejected } or { pending: true }.
async function standing (p, ran, what) {
  let state = { pending: true }
  p.then((value) => { state = { value } }, (rejected) => { state = { rejected } })
  await until(ran, what)
  await new Promise((resolve) => setImmediate(resolve))
  return state
}

// This thread's async waiters have all had their outcome delivered (each
// one's step runs in the same turn).
const delivered = () => internal.pendingAsync().pending === 0

// An AbortSignal-like object (plain, so this runs where AbortController does not exist).
function controller () {
  const listeners = new Set()
  const signal = {
    aborted: false,
    reason: undefined,
    addEventListener (type, l) { if (type === 'abort') listeners.add(l) },
    removeEventListener (type, l) { listeners.delete(l) }
  }
  return {
    signal,
    abort () {
      signal.aborted = true
      signal.reason = new Error('aborted')
      for (const l of [...listeners]) l()
    }
  }
}

// Lets this thread's queued waiter pass the 1 ms after which an unlock
// hands the lock to it instead of waking it to compete (docs/lock.md).
// The callers check that the handoff happened.
function ageWaiter () {
  const cell = new Int32Array(new SharedArrayBuffer(4))
  Atomics.wait(cell, 0, 0, 3)
}

// Makes binding[name] throw `boom` from its next call on, until restored.
function failing (name) {
  const original = binding[name]
  binding[name] = () => { throw boom }
  return () => { binding[name] = original }
}

function assertRejected (state, expected, what) {
  assert.ok(!state.pending, `${what}: still pending after its step ran`)
  assert.ok('rejected' in state, `${what}: resolved instead of rejecting`)
  if (typeof expected === 'function') assert.ok(state.rejected instanceof expected, `${what}: rejected with ${state.rejected}`)
  else assert.strictEqual(state.rejected, expected)
}

describe('a release that throws inside a step settles the acquisition', () => {
  test('AsyncLock.lockAsync handed the lock while aborted, after this thread\'s own unlock() released it: rejects with LockOwnershipError', BOUNDED, async () => {
    const lock = new sf.AsyncLock()
    const ta = new Int32Array(lock.buffer)
    lock.lock()
    const c = controller()
    const p = lock.lockAsync({ signal: c.signal })
    assert.strictEqual(internal.queueLength(ta, 0), 1)
    ageWaiter()
    lock.unlock()
    assert.strictEqual(Atomics.load(ta, 0) >>> 1, ME, 'the unlock handed the lock to the queued waiter')
    c.abort() // too late to take the waiter back out: it was handed the lock
    lock.unlock() // per thread: this releases the lock handed to the waiter
    const state = await standing(p, delivered, 'the handoff to be delivered')
    assertRejected(state, sf.LockOwnershipError, 'lockAsync')
    assert.strictEqual(lock.isLocked, false)
    assert.strictEqual(internal.queueLength(ta, 0), 0)
  })

  test('RwLock.readAsync handed a read lock while aborted, after this thread\'s own readUnlock(): rejects with LockOwnershipError', BOUNDED, async () => {
    const lock = new sf.RwLock()
    const ta = new Int32Array(lock.buffer)
    lock.write()
    const c = controller()
    const p = lock.readAsync({ signal: c.signal })
    assert.strictEqual(internal.queueLength(ta, 0), 1)
    ageWaiter()
    lock.writeUnlock()
    assert.strictEqual(lock.readers, 1, 'the unlock handed a read lock to the queued reader')
    c.abort()
    lock.readUnlock()
    const state = await standing(p, delivered, 'the handoff to be delivered')
    assertRejected(state, sf.LockOwnershipError, 'readAsync')
    assert.strictEqual(lock.readers, 0)
    assert.strictEqual(lock.isWriteLocked, false)
    assert.deepStrictEqual(Array.from(ta), [0, 0, 0, 0])
  })

  test('RwLock.writeAsync aborted while it waits for the readers, after this thread\'s own writeUnlock() gave its place up: rejects with LockOwnershipError', BOUNDED, async () => {
    const lock = new sf.RwLock()
    const ta = new Int32Array(lock.buffer)
    assert.strictEqual(lock.read(), sf.ACQUIRED)
    const c = controller()
    const p = lock.writeAsync({ signal: c.signal }) // takes the writer's place, waits for our read lock
    assert.strictEqual(internal.queueLength(ta, 1), 1, 'the writer waits for the readers')
    c.abort() // takes the waiter back out; the step gives the place up
    lock.writeUnlock() // before that step runs: per thread, this releases the place
    const state = await standing(p, delivered, 'the cancellation to be delivered')
    assertRejected(state, sf.LockOwnershipError, 'writeAsync')
    lock.readUnlock()
    assert.strictEqual(lock.isWriteLocked, false)
    assert.deepStrictEqual(Array.from(ta), [0, 0, 0, 0])
  })
})

describe('a native step that throws settles the acquisition, with nothing held or queued', () => {
  test('AsyncLock.lockAsync: the step after a wake-up throws: rejects with the error', BOUNDED, async () => {
    const lock = new sf.AsyncLock()
    const ta = new Int32Array(lock.buffer)
    // A holder of another copy of the addon (a thread id this copy never
    // saw): the waiter looks again after the lock's safety slice, 250 ms.
    const foreign = 999
    Atomics.store(ta, 0, foreign << 1)
    const p = lock.lockAsync()
    assert.strictEqual(internal.queueLength(ta, 0), 1)
    const restore = failing('lockWaitAsync')
    try {
      const state = await standing(p, delivered, 'the safety slice to wake the waiter')
      assertRejected(state, boom, 'lockAsync')
    } finally {
      restore()
    }
    assert.strictEqual(internal.queueLength(ta, 0), 0)
    assert.strictEqual(Atomics.load(ta, 0), foreign << 1, 'the foreign holder still holds it; nothing of ours is set')
  })

  test('RwLock.writeAsync: handed the writer\'s place, the step that waits for the readers throws: rejects, and the place is given back', BOUNDED, async () => {
    const lock = new sf.RwLock()
    const ta = new Int32Array(lock.buffer)
    lock.write()
    const p = lock.writeAsync()
    assert.strictEqual(internal.queueLength(ta, 0), 1)
    ageWaiter()
    const restore = failing('rwWriteWaitAsync')
    try {
      lock.writeUnlock()
      assert.strictEqual(Atomics.load(ta, 0) >>> 4, ME, 'the unlock handed the writer\'s place to the queued writer')
      const state = await standing(p, delivered, 'the handoff to be delivered')
      assertRejected(state, boom, 'writeAsync')
    } finally {
      restore()
    }
    assert.strictEqual(lock.isWriteLocked, false, 'the writer\'s place was given back')
    assert.strictEqual(internal.queueLength(ta, 0) + internal.queueLength(ta, 1), 0)
    assert.deepStrictEqual(Array.from(ta), [0, 0, 0, 0])
    assert.strictEqual(lock.tryRead(), sf.ACQUIRED)
    lock.readUnlock()
  })

  test('Condition.waitAsync: the sleep\'s native call throws: rejects (never throws), with the lock held again', BOUNDED, async () => {
    const lock = new sf.AsyncLock()
    const cond = new sf.Condition()
    lock.lock()
    const restore = failing('conditionWaitAsync')
    let p
    try {
      p = cond.waitAsync(lock)
    } catch (e) {
      p = { threw: e }
    } finally {
      restore()
    }
    assert.ok(p instanceof Promise, `returns a promise (threw ${p.threw})`)
    const state = await standing(p, () => true, 'nothing')
    assertRejected(state, boom, 'Condition.waitAsync')
    assert.strictEqual(lock.isLocked, true, 'the lock is held again')
    lock.unlock()
    assert.strictEqual(lock.isLocked, false)
  })

  test('Barrier.waitAsync: queueing the party\'s wait throws: rejects, and the party leaves as an aborted one does', BOUNDED, async () => {
    const barrier = new sf.Barrier(2)
    const restore = failing('waitAsync')
    let p
    try {
      p = barrier.waitAsync()
    } finally {
      restore()
    }
    const state = await standing(p, () => true, 'nothing')
    assertRejected(state, boom, 'Barrier.waitAsync')
    assert.strictEqual(barrier.waiting, 0, 'the failed party is not counted as arrived')
    assert.strictEqual(barrier.isBroken, true, 'its generation is broken, as by an aborted party')
  })
})

describe('a native call that throws while queueing frees the slot it was given', () => {
  test('no slot of the thread\'s table of waiters is lost', BOUNDED, async () => {
    const ta = new Int32Array(new SharedArrayBuffer(8))
    // One waiter settled: its slot is free for the next one.
    const first = sf.waitAsync(ta, 0, 0)
    sf.notify(ta, 0)
    await first.value
    const before = internal.pendingAsync().slots
    const original = binding.waitAsync
    binding.waitAsync = () => { throw boom }
    try {
      for (let i = 0; i < 3; i++) assert.throws(() => sf.waitAsync(ta, 0, 0), (e) => e === boom)
    } finally {
      binding.waitAsync = original
    }
    // The freed slot is used again: two waiters need one new slot, not two.
    const a = sf.waitAsync(ta, 0, 0)
    const b = sf.waitAsync(ta, 0, 0)
    assert.strictEqual(internal.pendingAsync().slots, before + 1)
    sf.notify(ta, 0)
    assert.deepStrictEqual([await a.value, await b.value], ['ok', 'ok'])
  })
})
