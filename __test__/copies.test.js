'use strict'
// The JavaScript layer evaluated several times in one thread over one addon:
// Jest's module registry per test file, Vitest's VM contexts, hot reloaders
// (`delete require.cache`), ESM under a cache-busting query. Each copy gets
// its own results; a copy nobody uses any more is freed; a pending waiter
// keeps its copy until it settles. Every case runs in a child process with
// a hard timeout.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')
const { kind } = require('./subject')

const root = path.join(__dirname, '..')
const major = Number(process.versions.node.split('.')[0])
const moduleOnly = kind === 'module' ? false : 'copies of the module'
const HARD_TIMEOUT = 120000

describe('copies of the JavaScript layer in one thread (child processes)', () => {
  test('require.cache reloads and a cache-busting ESM import: each copy gets its results; unused copies are freed', { timeout: HARD_TIMEOUT + 10000, skip: moduleOnly || (major < 14 && 'dynamic import of ESM needs Node 14') }, async () => {
    const r = await runChild(['--expose-gc', path.join(__dirname, 'fixtures', 'copies-in-one-thread.js')], { timeoutMs: HARD_TIMEOUT })
    assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
    const each = { notify: 1, woken: 'ok', timed: 'timed-out', relocked: true, unlocked: true, notified: 1, condResult: 'ok' }
    assert.deepStrictEqual(r.result, {
      distinct: true,
      secondFromFirst: each,
      firstFromSecond: each,
      esmDistinct: true,
      esmFromSecond: each,
      resolversWithThree: 2,
      droppedPending: 'ok', // its copy was dropped meanwhile: the waiter kept it
      freed: true,
      resolversLeft: 1, // the copy referenced nowhere was freed; two are in use
      queuedAsync: 0
    }, transcript(r))
  })

  // The real clients, from the npm registry (devDependencies): three test
  // files, each with async waits, a lock handed over, a condition and a
  // wake-up from a worker.
  const clients = [
    ['Jest (--runInBand: every test file in one thread, a registry each)', 'jest', ['node_modules/jest/bin/jest.js', '--runInBand', '--rootDir', '__test__/clients/jest'], major >= 16, /Tests:\s+12 passed, 12 total/],
    ['Vitest (--pool=vmThreads, one thread: a VM context per test file)', 'vitest', ['node_modules/vitest/vitest.mjs', 'run', '--root', '__test__/clients/vitest'], major >= 18, /Tests\s+12 passed \(12\)/]
  ]
  for (const [what, name, args, supported, passed] of clients) {
    test(what, { timeout: HARD_TIMEOUT + 10000, skip: moduleOnly || (!supported && `${name} needs a newer Node`) }, async () => {
      const r = await runChild(args.map((a, i) => i === 0 || a.startsWith('__test__') ? path.join(root, a) : a), { timeoutMs: HARD_TIMEOUT, env: { CI: 'true', NO_COLOR: '1', FORCE_COLOR: '0' } })
      assert.ok(!r.timedOut, transcript(r))
      assert.strictEqual(r.code, 0, transcript(r))
      assert.match(r.stdout + r.stderr, passed, transcript(r))
    })
  }
})
