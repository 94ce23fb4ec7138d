'use strict'
// Owner death of an RwLock, each case in a child process with a hard
// timeout (fixtures/rwlock-death.js): a writer that dies is recovered and
// reported exactly once; a reader that dies, in a slot or past the slots,
// does not block writers.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild } = require('./util')

const HARD_TIMEOUT = 20000
const FIXTURE = path.join(__dirname, 'fixtures', 'rwlock-death.js')

async function run (name, form) {
  const r = await runChild([FIXTURE, name].concat(form === undefined ? [] : [form]), { timeoutMs: HARD_TIMEOUT })
  const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
  assert.ok(!r.timedOut, `hung: killed after ${HARD_TIMEOUT} ms${shown}`)
  assert.strictEqual(r.code, 0, shown)
  assert.ok(r.result, shown)
  return r.result
}

describe('RwLock: owner death (child processes)', () => {
  test('a writer dies holding the lock with waiters queued: the queued readers get in first, the first of them told once; then the writer', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await run('writer-dies-queued')
    assert.deepStrictEqual(r.order, [['r1', 'owner-died'], ['r3', 'acquired'], ['w2', 'acquired']])
    assert.strictEqual(r.readersAfter, 2)
    assert.strictEqual(r.again, 'acquired')
    assert.deepStrictEqual(r.cells, [0, 0, 0, 0])
  })

  test('a writer dies holding the lock, nobody queued: the next locker takes it over and is told, once', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await run('writer-dies-idle')
    assert.deepStrictEqual([r.first, r.second, r.write], ['owner-died', 'acquired', 'acquired'])
    assert.deepStrictEqual(r.cells, [0, 0, 0, 0])
  })

  // A writer that has the writer's place and waits for the readers to leave
  // is reported when its thread ends, in both forms: it had the place, and
  // the lock cannot tell that it never wrote.
  for (const form of ['blocking', 'async']) {
    const call = form === 'blocking' ? 'write()' : 'writeAsync()'
    test(`a writer terminated while it waits for the readers in ${call}, a reader queued behind it: that reader gets in and is told, once`, { timeout: HARD_TIMEOUT + 10000 }, async () => {
      const r = await run('draining-writer-dies-queued', form)
      assert.deepStrictEqual([r.told, r.next], ['owner-died', 'acquired'])
      assert.deepStrictEqual(r.cells, [0, 0, 0, 0])
    })

    test(`a writer terminated while it waits for the readers in ${call}, nobody queued: the next locker is told, once`, { timeout: HARD_TIMEOUT + 10000 }, async () => {
      const r = await run('draining-writer-dies-idle', form)
      assert.deepStrictEqual([r.first, r.second], ['owner-died', 'acquired'])
      assert.deepStrictEqual(r.cells, [0, 0, 0, 0])
    })
  }

  test('a reader dies holding a read lock in a slot: the writer waiting for the readers gets in (not told: a reader changed nothing)', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await run('reader-dies')
    assert.strictEqual(r.got, 'acquired')
    assert.deepStrictEqual(r.cells, [0, 0, 0, 0])
  })

  test('a reader dies holding a read lock, nobody queued: it no longer counts, and tryWrite takes the lock (not told)', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await run('reader-dies-idle')
    assert.strictEqual(r.before, 1)
    assert.strictEqual(r.readers, 0)
    assert.strictEqual(r.write, 'acquired')
    assert.deepStrictEqual(r.cells, [0, 0, 0, 0])
  })

  test('a reader past the three slots (registered in the addon) dies: forgotten, and the waiting writer gets in', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await run('overflow-reader-dies')
    assert.strictEqual(r.registered, 1)
    assert.strictEqual(r.got, 'acquired')
    assert.strictEqual(r.left, 0)
    assert.deepStrictEqual(r.cells, [0, 0, 0, 0])
  })
})
