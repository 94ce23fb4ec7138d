'use strict'
// Semaphore's rules, beyond the count: a permit released while acquirers
// have waited 1 ms is handed to the oldest (tryAcquire and newcomers cannot
// take it past them), a permit handed to an acquirer that is being aborted
// goes on to the next one, and an acquirer whose thread ends loses nothing
// (child processes with hard timeouts).
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { Semaphore } = require('..')
const { runChild } = require('./util')
const { sleepers, handle, startWorker, until } = require('./fixtures/lock-util')

const HAS_ABORT = typeof AbortController === 'function'
const { performance } = require('perf_hooks')

// Until every acquirer queued before the call has waited over 1 ms (the age
// from which a release hands it the permit): a condition on the clock, not
// a sleep for something else to happen.
function age () {
  const from = performance.now()
  while (performance.now() - from < 2) {}
}
const waitersCell = (sem) => new Int32Array(sem.buffer, sem.byteOffset, 2)[1]

describe('Semaphore: queued acquirers first (the protocol in the addon)', () => {
  test('permits go to the oldest acquirers in order; tryAcquire cannot take one past them', async () => {
    const sem = new Semaphore(0)
    const order = []
    const releases = []
    const done = [0, 1, 2].map((i) => sem.acquireAsync().then((release) => { order.push(i); releases.push(release) }))
    await until(() => sleepers(sem) === 3, 'three acquirers to queue')
    age()
    sem.release()
    assert.strictEqual(sem.tryAcquire(), false, 'the released permit went to the queue, not to the word')
    assert.strictEqual(sem.value, 0)
    await until(() => order.length === 1, 'the oldest to get it')
    sem.release(3)
    await Promise.all(done)
    assert.deepStrictEqual(order, [0, 1, 2])
    assert.strictEqual(sem.value, 1, 'the permit nobody waited for')
    assert.strictEqual(sleepers(sem), 0)
    releases.forEach((r) => r())
    assert.strictEqual(sem.value, 4)
    assert.strictEqual(waitersCell(sem), 0)
  })

  test('a blocking acquirer in a worker queued first is served first', async () => {
    const sem = new Semaphore(0)
    const w = startWorker('semTimeout', { sem: handle(sem), timeout: 60000 })
    await until(() => sleepers(sem) === 1, 'the worker to queue')
    let mine = false
    const p = sem.acquireAsync().then((release) => { mine = true; return release })
    await until(() => sleepers(sem) === 2, 'the main thread to queue behind it')
    age()
    sem.release()
    assert.strictEqual((await w.next('result')).error, null, 'the worker got the permit')
    await w.exit
    assert.strictEqual(mine, false)
    sem.release()
    ;(await p)()
    assert.strictEqual(sem.value, 1)
  })

  test('an abort after a permit was handed over gives it to the next acquirer', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const sem = new Semaphore(0)
    const ac = new AbortController()
    const first = sem.acquireAsync({ signal: ac.signal })
    const second = sem.acquireAsync()
    await until(() => sleepers(sem) === 2, 'two acquirers to queue')
    age()
    sem.release() // hands the permit to the first...
    ac.abort() // ...which can no longer be taken out of the queue
    await assert.rejects(first, { name: 'AbortError' })
    const release = await second
    assert.strictEqual(sem.value, 0)
    release()
    assert.strictEqual(sem.value, 1)
  })

  for (const mode of ['sync', 'async']) {
    test(`the thread of a queued ${mode === 'sync' ? 'blocking' : 'async'} acquirer ends while a permit is released: the permit reaches the next acquirer (child process)`, { timeout: 40000 }, async () => {
      const r = await runChild([path.join(__dirname, 'fixtures', 'semaphore-acquirer-dies.js'), mode], { timeoutMs: 30000 })
      const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
      assert.ok(!r.timedOut, `hung: killed after 30000 ms${shown}`)
      assert.strictEqual(r.code, 0, shown)
      assert.ok(r.result, shown)
      for (const o of r.result.outcomes) assert.deepStrictEqual(o, { value: 0, queued: 0 }, shown)
      assert.strictEqual(r.result.queuedAsync, 0, shown)
    })
  }
})
