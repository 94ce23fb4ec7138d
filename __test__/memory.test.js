'use strict'
// Nothing is kept after its owner is gone. Each scenario runs in a child
// process with --expose-gc and a hard timeout, and asserts on counts: the
// bytes of array buffers still allocated after GC, and the addon's own
// diagnostic counts of what it holds natively. Never on RSS or timings.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')
const { kind } = require('./subject')

const HARD_TIMEOUT = 30000
const LONG = { timeout: HARD_TIMEOUT + 10000 }
const moduleOnly = kind === 'module' ? {} : { skip: 'diagnostics of the module' }

async function run (script, args) {
  const r = await runChild(['--expose-gc', path.join(__dirname, 'fixtures', script)].concat(args || []), { timeoutMs: HARD_TIMEOUT })
  assert.ok(!r.timedOut && r.code === 0 && r.signal === null, transcript(r))
  assert.ok(r.result, `no RESULT line\n${transcript(r)}`)
  return r
}

describe('memory: nothing kept after its owner is gone (child processes)', () => {
  test('one long-lived waiter does not keep the buffers of settled waiters alive', LONG, async () => {
    const r = await run('memory-buffers.js', ['64'])
    // 64 jobs of 1 MiB each: what stays is the long-lived waiter's own
    // buffer and allocator slack, not the jobs' 64 MiB.
    assert.ok(r.result.retainedMiB < 8, `${r.result.retainedMiB} MiB of array buffers still allocated\n${transcript(r)}`)
    assert.match(r.stdout, /shutdown: ok/)
  })

  test('after worker churn, no native waiter record, delivery, resolver or timer entry is left', Object.assign({}, LONG, moduleOnly), async () => {
    const r = await run('memory-churn.js', ['4', '6', '200'])
    assert.deepStrictEqual(r.result, {
      workers: 24,
      queued: 0, // the dead workers' waiters are not counted by notify
      queuedAsync: 0,
      undelivered: 0,
      resolvers: 0, // the main thread never queued an async waiter
      timerEntries: 0,
      deadThreadRanges: 1, // 24 ended threads, ids 1 to 24: one range
      presence: 0, // no address is left marked as waited on
      relocking: 0 // no condition wake-up on record for a relock
    }, transcript(r))
  })

  test('deadlines of waiters woken early leave the timer', Object.assign({}, LONG, moduleOnly), async () => {
    const r = await run('timer-entries.js', ['2000'])
    assert.deepStrictEqual(r.result, { before: 2000, settled: 2000, timerEntries: 0 }, transcript(r))
  })
})
