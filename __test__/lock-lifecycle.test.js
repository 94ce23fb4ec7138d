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

describe('only one async waiter of a held lock watches its owner (child process)', () => {
  test('the poll role passes on when its holder times out or is aborted, and a dead owner is still noticed', { timeout: HARD_TIMEOUT + 10000, skip: typeof AbortController !== 'function' && 'no AbortController before Node 15' }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'lock-poll-role.js')], { timeoutMs: HARD_TIMEOUT })
    const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
    assert.ok(!r.timedOut && r.code === 0 && r.result, shown)
    const { phase0, phase1, aborted, phase2, outcomes, pollRoles } = r.result
    // While w0 waited, nobody but w0 looked at the owner.
    assert.ok(phase0.length > 0, shown)
    assert.deepStrictEqual([...new Set(phase0)], [0], shown)
    // Then one other waiter watched (any other looked at most once, when it
    // was woken for the hand-over), and after its abort one more.
    const watchers = (tally) => Object.keys(tally).filter((k) => tally[k] > 1).map(Number)
    assert.deepStrictEqual(watchers(phase1), [aborted], shown)
    assert.notStrictEqual(aborted, 0, shown)
    const [last] = watchers(phase2)
    assert.deepStrictEqual(watchers(phase2), [last], shown)
    assert.ok(last !== 0 && last !== aborted, shown)
    // The owner's death reached the waiters left: all got the lock, one was told.
    assert.strictEqual(outcomes[0], 'ERR_LOCK_TIMEOUT', shown)
    assert.strictEqual(outcomes[aborted], 'ABORT_ERR', shown)
    const rest = outcomes.filter((o, k) => k !== 0 && k !== aborted)
    assert.strictEqual(rest.filter((o) => o === 'owner-died').length, 1, shown)
    assert.strictEqual(rest.filter((o) => o === 'acquired').length, rest.length - 1, shown)
    assert.strictEqual(pollRoles, 0, shown)
  })

  test('the poll role of a terminated thread passes to a waiter of another thread', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'lock-poll-death.js')], { timeoutMs: HARD_TIMEOUT })
    const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
    assert.ok(!r.timedOut && r.code === 0 && r.result, shown)
    assert.strictEqual(r.result.whileB, 0, `the main thread's waiters looked while another thread held the role${shown}`)
    assert.deepStrictEqual(r.result.outcomes.slice().sort(), ['acquired', 'acquired', 'acquired', 'owner-died'], shown)
    assert.strictEqual(r.result.pollRoles, 0, shown)
  })
})
