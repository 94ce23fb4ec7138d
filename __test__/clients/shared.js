'use strict'
// The scenarios each test file of the client projects runs: async waits,
// locks and conditions whose results are delivered on this thread, and one
// wake-up from a worker. Each test file evaluates its own copy of the
// package (Jest's module registry per file, Vitest's VM context per file),
// while the addon is loaded once per thread.
const path = require('path')
const { Worker } = require('worker_threads')

const root = process.env.SHARED_FUTEX_ROOT || path.join(__dirname, '..', '..')

module.exports = function scenarios ({ test, expect }, futex) {
  const { waitAsync, notify, AsyncLock, Condition } = futex

  test('waitAsync settles by notify and by timeout', async () => {
    const ta = new Int32Array(new SharedArrayBuffer(8))
    const woken = waitAsync(ta, 0, 0)
    const timed = waitAsync(ta, 1, 0, 5)
    expect(woken.async).toBe(true)
    expect(notify(ta, 0)).toBe(1)
    expect(await woken.value).toBe('ok')
    expect(await timed.value).toBe('timed-out')
  })

  test('a lock is handed to the async waiter of this file', async () => {
    const lock = new AsyncLock()
    expect(lock.lock()).toBe('acquired')
    const pending = lock.lockAsync({ timeout: 10000 })
    // Queued behind this thread's own hold: the unlock hands it over.
    lock.unlock()
    const release = await pending
    expect(lock.isLocked).toBe(true)
    release()
    expect(lock.isLocked).toBe(false)
  })

  test('Condition.waitAsync is woken and relocks', async () => {
    const lock = new AsyncLock()
    const cond = new Condition()
    const release = await lock.lockAsync()
    const waiting = cond.waitAsync(lock, { timeout: 10000 })
    // The wait released the lock: take it, notify, give it back.
    const again = await lock.lockAsync()
    expect(cond.notifyOne()).toBe(1)
    again()
    expect(await waiting).toBe('ok')
    expect(lock.isLocked).toBe(true)
    release()
  })

  test('a worker wakes this file\'s waiter', async () => {
    const ta = new Int32Array(new SharedArrayBuffer(4))
    const r = waitAsync(ta, 0, 0)
    const worker = new Worker(`
      const { workerData } = require('worker_threads')
      const { notify } = require(workerData.root)
      const ta = new Int32Array(workerData.buffer)
      Atomics.store(ta, 0, 1)
      notify(ta, 0)
    `, { eval: true, workerData: { root, buffer: ta.buffer } })
    // Listened for at once: the worker may end before the wake-up is seen here.
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    expect(await r.value).toBe('ok')
    await exited
  })
}
