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

describe('waiters of a held lock sleep until woken; owner death is pushed to them (child processes)', () => {
  test('no waiter wakes while the owner lives (beside a timeout and an abort); its death reaches the rest', { timeout: HARD_TIMEOUT + 10000, skip: typeof AbortController !== 'function' && 'no AbortController before Node 15' }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'lock-idle-waiters.js')], { timeoutMs: HARD_TIMEOUT })
    const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
    assert.ok(!r.timedOut && r.code === 0 && r.result, shown)
    const { parksWhileOwned, outcomes, queuedAsync, word } = r.result
    // Each of the 8 waiters queued once and nobody woke to look at the owner.
    assert.strictEqual(parksWhileOwned, 8, shown)
    assert.strictEqual(outcomes[0], 'ERR_LOCK_TIMEOUT', shown)
    assert.strictEqual(outcomes[3], 'ABORT_ERR', shown)
    // The owner's death reached the waiters left: all got the lock, one was told.
    const rest = outcomes.filter((o, k) => k !== 0 && k !== 3)
    assert.strictEqual(rest.filter((o) => o === 'owner-died').length, 1, shown)
    assert.strictEqual(rest.filter((o) => o === 'acquired').length, rest.length - 1, shown)
    assert.strictEqual(queuedAsync, 0, shown)
    assert.strictEqual(word, 0, shown)
  })

  test('a waiter whose thread is terminated leaves; the owner\'s later death still reaches the other threads\' waiters', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'lock-waiter-thread-dies.js')], { timeoutMs: HARD_TIMEOUT })
    const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
    assert.ok(!r.timedOut && r.code === 0 && r.result, shown)
    assert.strictEqual(r.result.afterB, 4, `B's waiter left the queue${shown}`)
    assert.strictEqual(r.result.parksBeforeA, 4, `the main thread's waiters slept while A lived${shown}`)
    assert.deepStrictEqual(r.result.outcomes.slice().sort(), ['acquired', 'acquired', 'acquired', 'owner-died'], shown)
    assert.strictEqual(r.result.queuedAsync, 0, shown)
  })
})
