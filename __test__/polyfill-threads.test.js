'use strict'
// The polyfill across threads: one queue for Atomics.wait and
// Atomics.waitAsync (FIFO, counts), native waiters of threads without the
// polyfill, workers that install it automatically, the blog's AsyncLock
// under contention, and lifetimes. Each case is a fixture run in a child
// process with a hard timeout, against the standard Atomics API.
//
// The expectations are the native ones: in mode 'auto' on Node 16+ the
// fixtures run on V8's own Atomics and must pass too, which checks the
// tests; on Node 12 and 14 ('auto') and with 'force' they run on the polyfill.
const assert = require('assert')
const path = require('path')
const { test } = require('./harness')
const { runChild, transcript, modes, FIXTURES } = require('./fixtures/polyfill-helpers')

const THREADS = path.join(FIXTURES, 'polyfill-threads.js')
const NATIVE = typeof Atomics.waitAsync === 'function'

async function fixture (args, opts) {
  const r = await runChild(args, opts)
  assert.ok(r.code === 0 && r.result !== undefined, transcript(r))
  return r
}

for (const mode of modes()) {
  // Whether the fixtures run on the polyfill (else on native Atomics).
  const active = mode === 'force' || !NATIVE
  const label = `${mode}: ${active ? 'polyfill' : 'native Atomics'}`
  const t = (name, fn) => test(`polyfill across threads (${label}): ${name}`, fn)

  t('sync and async waiters share one FIFO queue', async () => {
    const { result } = await fixture([THREADS, 'fifo', mode])
    assert.strictEqual(result.active, active)
    // Worker A blocks, then the main thread's waitAsync, then worker B.
    assert.deepStrictEqual(result.order, ['A:ok', 'main:ok', 'B:ok'])
    assert.deepStrictEqual(result.counts, [1, 1, 1, 0])
  })

  t('notify counts hold across queues and wake native waiters of threads without the polyfill', async () => {
    const { result } = await fixture([THREADS, 'counts', mode])
    // Queued: N1 (native wait), P1 (wait), main (waitAsync), N2 (native wait).
    assert.strictEqual(result.zero, 0, 'notify(…, 0)')
    assert.strictEqual(result.three, 3, 'notify(…, 3) wakes exactly 3')
    // Natively: the first three in FIFO order. Polyfill: its own two
    // waiters first, then the oldest native one. The same three.
    assert.deepStrictEqual(result.firstThree, ['N1:ok', 'P1:ok', 'main:ok'])
    assert.strictEqual(result.last, 1, 'notify(…, 5) from a worker wakes the one left')
    assert.deepStrictEqual(result.all, ['N1:ok', 'N2:ok', 'P1:ok', 'main:ok'])
    assert.strictEqual(result.after, 0)
  })

  t(active ? 'limit: a thread without the polyfill cannot wake the polyfill\'s waiters'
    : 'a thread without the polyfill wakes native waiters', async () => {
    const { result } = await fixture([THREADS, 'uninstalledNotifier', mode])
    if (active) {
      assert.strictEqual(result.outsiderCount, 0)
      assert.deepStrictEqual(result.wokenBefore, [])
      assert.strictEqual(result.ours, 1)
    } else {
      assert.strictEqual(result.outsiderCount, 1)
      assert.deepStrictEqual(result.wokenBefore, ['main:ok'])
      assert.strictEqual(result.ours, 0)
    }
    assert.deepStrictEqual(result.woken, ['main:ok'])
  })

  const checkWorkers = (result, flag) => {
    for (const kind of ['file', 'eval', 'esm', 'execArgv', 'nested']) {
      const w = result[kind]
      assert.strictEqual(w.count, 1, `${kind}: its Atomics.notify woke the main thread's waitAsync`)
      assert.strictEqual(w.waitAsync, 'function', `${kind}: feature detection`)
      // The worker installed the polyfill exactly when the main thread did.
      assert.deepStrictEqual([w.nativeWait, w.nativeNotify, w.nativeWaitAsync],
        [!active, !active, !active], kind)
      if (flag) assert.strictEqual(w.gc, 'function', `${kind}: ${flag} still applies`)
    }
    assert.ok(result.execArgv.execArgv.indexOf('--no-deprecation') >= 0, 'the worker\'s own execArgv is kept')
    // A worker made with the Worker class from before installation keeps
    // native Atomics, and so cannot wake the polyfill's waiters.
    assert.strictEqual(result.original.nativeWait, true)
    assert.strictEqual(result.original.count, active ? 0 : 1)
  }

  t('workers created afterwards get it: file, eval, ES module, own execArgv, nested', async () => {
    const { result } = await fixture([THREADS, 'workers', mode])
    checkWorkers(result)
  })

  t('workers get it when the process has flags a worker\'s execArgv rejects', async () => {
    // --expose-gc is a V8 flag: process-wide, and refused in execArgv.
    const r = await fixture(['--expose-gc', THREADS, 'workers', mode])
    checkWorkers(r.result, '--expose-gc')
    assert.ok(r.stderr.indexOf('SHARED_FUTEX_POLYFILL_WORKER') < 0, r.stderr)
  })

  t('the blog\'s AsyncLock works under contention: main (waitAsync) and workers (wait)', async () => {
    const [workers, iterations, chains, perChain] = [3, 2000, 4, 100]
    const { result } = await fixture([path.join(FIXTURES, 'polyfill-lock.js'), mode,
      workers, iterations, chains, perChain].map(String), { timeoutMs: 120000 })
    assert.strictEqual(result.active, active)
    assert.strictEqual(result.overlaps, 0, 'two threads were inside the lock at once')
    assert.strictEqual(result.counter, result.expected, 'lost updates')
    assert.strictEqual(result.lockState, 0, 'left unlocked')
    // Contention happened: every chain queued a waitAsync and every worker
    // blocked while the main thread held the lock.
    assert.strictEqual(result.queuedBeforeRelease, chains)
    assert.ok(result.mainWaits >= chains, `main waited ${result.mainWaits} times`)
    assert.ok(result.workerWaits >= workers, `workers waited ${result.workerWaits} times`)
  })

  t('a pending Atomics.waitAsync does not keep the process alive', async () => {
    const r = await fixture([path.join(FIXTURES, 'polyfill-lifecycle.js'), 'pending-exit', mode], { timeoutMs: 30000 })
    assert.deepStrictEqual(r.result, { active, queued: true })
    assert.ok(r.stdout.indexOf('settled') < 0, r.stdout)
  })

  t('terminate() of a worker blocked in Atomics.wait resolves', async () => {
    const r = await fixture([path.join(FIXTURES, 'polyfill-lifecycle.js'), 'terminate', mode], { timeoutMs: 30000 })
    assert.deepStrictEqual(r.result, { active, terminated: true, code: 1, exited: 1 })
  })

  t('process.exit() while a worker is blocked in Atomics.wait exits', async () => {
    const r = await runChild([path.join(FIXTURES, 'polyfill-lifecycle.js'), 'exit', mode], { timeoutMs: 30000 })
    assert.strictEqual(r.code, 7, transcript(r))
    assert.deepStrictEqual(r.result, { active, exiting: true })
  })
}
