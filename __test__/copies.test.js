'use strict'
// The JavaScript layer evaluated several times in one thread over one addon:
// Jest's module registry per test file, Vitest's VM contexts, hot reloaders
// (`delete require.cache`), ESM under a cache-busting query. Each copy gets
// its own results; a copy nobody uses any more is freed; a pending waiter
// keeps its copy until it settles. Every case runs in a child process with
// a hard timeout.
const assert = require('assert')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, removeDir } = require('./util')
const { kind } = require('./subject')

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
  // Found as the package's devDependencies (or through NODE_PATH, where the
  // suite runs on an installed copy of the package).
  const bin = (name, file) => {
    try {
      return path.join(path.dirname(require.resolve(`${name}/package.json`)), file)
    } catch {
      return null
    }
  }
  const clients = [
    ['Jest (--runInBand: every test file in one thread, a registry each)', 'jest', bin('jest', 'bin/jest.js'), ['--runInBand', '--rootDir', path.join(__dirname, 'clients', 'jest')], major >= 16, /Tests:\s+12 passed, 12 total/],
    ['Vitest (--pool=vmThreads, one thread: a VM context per test file)', 'vitest', bin('vitest', 'vitest.mjs'), ['run', '--root', path.join(__dirname, 'clients', 'vitest')], major >= 18, /Tests\s+12 passed \(12\)/]
  ]
  for (const [what, name, main, args, supported, passed] of clients) {
    const skip = moduleOnly || (!supported && `${name} needs a newer Node`) || (main === null && `${name} is not installed`)
    test(what, { timeout: HARD_TIMEOUT + 10000, skip }, async () => {
      // Jest finds no test file inside a node_modules (where the suite runs
      // on an installed copy of the package): it runs a copy of its project
      // from a temporary directory, pointed at the package.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-clients-'))
      fs.cpSync(path.join(__dirname, 'clients'), dir, { recursive: true })
      const project = path.join(dir, name)
      try {
        const r = await runChild([main].concat(args.map((a) => a === path.join(__dirname, 'clients', name) ? project : a)), {
          timeoutMs: HARD_TIMEOUT,
          env: { CI: 'true', NO_COLOR: '1', FORCE_COLOR: '0', SHARED_FUTEX_ROOT: path.join(__dirname, '..') }
        })
        assert.ok(!r.timedOut, transcript(r))
        assert.strictEqual(r.code, 0, transcript(r))
        assert.match(r.stdout + r.stderr, passed, transcript(r))
      } finally {
        removeDir(dir)
      }
    })
  }
})
