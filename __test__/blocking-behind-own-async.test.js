'use strict'
// A blocking acquisition by a thread whose own async acquisition of the same
// object is queued would wait for ever (what the queue hands the async one
// first can only be used once the thread runs JavaScript again): it throws
// DeadlockError at once, whatever its timeout, and the async acquisition
// still succeeds when the holder lets go. Each case runs in a child process
// with a hard timeout: the defect this guards against is a hang.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')
const { kind } = require('./subject')

const HARD_TIMEOUT = 20000
const skip = kind === 'module' ? false : 'the module\'s primitives'

const CASES = [
  ['lock', 'AsyncLock.lock() with a lockAsync() queued', 'acquired'],
  ['lock-timeout', 'AsyncLock.lock(60000) with a lockAsync({ timeout }) queued', 'acquired'],
  ['once', 'Once.run() with a runAsync() waiting for another thread\'s fn', 'false'],
  ['rwlock-write', 'RwLock.write() with a writeAsync() queued', 'acquired'],
  ['rwlock-read-behind-write', 'RwLock.read() with a writeAsync() queued', 'acquired'],
  ['rwlock-write-behind-read', 'RwLock.write() with a readAsync() queued', 'acquired'],
  ['semaphore', 'Semaphore.acquire() with an acquireAsync() queued', 'acquired'],
  ['mutex', 'Atomics.Mutex shape: Mutex.lock(m, fn) with a Mutex.lockAsync queued', 'true ran']
]

describe('a blocking acquisition behind this thread\'s own queued async one (child processes)', () => {
  for (const [name, what, asyncResult] of CASES) {
    test(`${what}: DeadlockError at once; the async one succeeds later`, { timeout: HARD_TIMEOUT + 10000, skip }, async () => {
      const r = await runChild([path.join(__dirname, 'fixtures', 'blocking-behind-own-async.js'), name], { timeoutMs: HARD_TIMEOUT })
      assert.ok(!r.timedOut && r.code === 0, transcript(r))
      assert.deepStrictEqual(r.stdout.split('\n').filter(Boolean), ['blocking: ERR_LOCK_DEADLOCK', `async: ${asyncResult}`], transcript(r))
    })
  }
})
