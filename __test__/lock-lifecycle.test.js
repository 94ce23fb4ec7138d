'use strict'
// A pending async acquisition is pending work: it keeps the process alive
// until it succeeds, and nothing is left holding the process afterwards.
// Each case runs fixtures/lock-keepalive.js in a child process with a hard
// timeout: a child that exits early prints nothing, one that never exits is
// killed and fails the test.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild } = require('./util')

const HARD_TIMEOUT = 20000

const CASES = [
  ['lockAsync', 'AsyncLock.lockAsync()'],
  ['lockAsync-timeout', 'AsyncLock.lockAsync({ timeout })'],
  ['executeLocked', 'AsyncLock.executeLocked(fn)'],
  ['runExclusive', 'AsyncLock.runExclusive(fn)'],
  ['condition', 'Condition.waitAsync(lock)'],
  ['semaphore', 'Semaphore.acquireAsync()']
]

describe('async acquisitions keep the process alive (child processes)', () => {
  for (const [how, what] of CASES) {
    test(`${what} waiting on an unref'd worker: the process stays until it succeeds, then exits`, { timeout: HARD_TIMEOUT + 10000 }, async () => {
      const r = await runChild([path.join(__dirname, 'fixtures', 'lock-keepalive.js'), how], { timeoutMs: HARD_TIMEOUT })
      const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
      assert.ok(!r.timedOut, `hung: killed after ${HARD_TIMEOUT} ms${shown}`)
      assert.strictEqual(r.signal, null, shown)
      assert.strictEqual(r.code, 0, shown)
      assert.strictEqual(r.stdout, 'acquired\n', `the process exited before the acquisition succeeded${shown}`)
    })
  }
})

describe('two copies of the package in one process (child process)', () => {
  test('a lock held by a thread that only loaded the other copy is not taken over', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'two-copies.js')], { timeoutMs: HARD_TIMEOUT })
    const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
    assert.ok(!r.timedOut && r.code === 0, shown)
    assert.deepStrictEqual(r.stdout.split('\n').filter(Boolean), [
      'tryLock: false', // not 'owner-died': the other copy's thread is alive
      'lockAsync: ERR_LOCK_TIMEOUT',
      'after unlock: acquired'
    ], shown)
  })
})
