'use strict'
// createSyncFn (lib/sync-call.js) in whole processes: preloads of the
// parent, the worker's output, workers freed. Each scenario is a child
// process with a hard timeout.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')

const HARD_TIMEOUT = 20000
const T = { timeout: HARD_TIMEOUT + 5000 }
const SYNC = path.join(__dirname, 'fixtures', 'sync')
const NODE_MAJOR = Number(process.versions.node.split('.')[0])

async function run (args) {
  const r = await runChild(args, { timeoutMs: HARD_TIMEOUT })
  assert.ok(!r.timedOut, `hung: killed after ${HARD_TIMEOUT} ms\n${transcript(r)}`)
  assert.strictEqual(r.code, 0, transcript(r))
  return r
}

describe('createSyncFn in a process', () => {
  test('a preload of the parent (node -r hook.js) that calls at load does not run again in the worker', T, async () => {
    const hook = path.join(SYNC, 'hook.js')
    const app = path.join(SYNC, 'hook-app.js')
    // With --expose-gc too: a flag Node refuses in a worker's execArgv.
    for (const args of [['-r', hook, app], ['--expose-gc', '-r', hook, app]]) {
      const r = await run(args)
      assert.deepStrictEqual(r.stdout.split('\n').filter((l) => l.startsWith('HOOK')), ['HOOK main 3'], transcript(r))
      assert.deepStrictEqual(r.result, { app: true })
    }
  })

  test('a preload given to the worker that calls at load: SyncWorkerError, not a worker starting a worker without end', T, async () => {
    const r = await run([path.join(SYNC, 'hook-app.js'), 'explicit'])
    const e = r.result.explicit
    assert.strictEqual(e.code, 'ERR_SYNC_WORKER', transcript(r))
    // Node 12 runs a worker's preloads before the worker can report
    // (docs/channel.md): there the thread is only seen to end.
    assert.match(e.message, NODE_MAJOR > 12 ? /failed to start: .*refused in a preload of a createSyncFn worker/ : /exited: the worker thread ended/)
  })

  test('close() ends the workers and resolves once they have exited; a call after it throws SyncWorkerError (reason closed); functions no longer referenced free their workers when collected', T, async () => {
    const r = (await run(['--expose-gc', path.join(SYNC, 'gc-app.js')])).result
    assert.deepStrictEqual(r.closed, {
      isPromise: true,
      same: true,
      value: 'undefined',
      workers: 2,
      exitedBeforeResolve: 2,
      after: r.closed.after,
      asyncDispose: true,
      unstarted: true
    })
    assert.deepStrictEqual([r.closed.after.ctor, r.closed.after.code, r.closed.after.reason], ['SyncWorkerError', 'ERR_SYNC_WORKER', 'closed'])
    if (typeof FinalizationRegistry === 'function') { // eslint-disable-line no-undef
      // 6 functions, 9 workers: each has exited (the fixture waits for every
      // 'exit'); a function still referenced still serves.
      assert.deepStrictEqual(r.collected, { workers: 9, exited: 9, keptStillServes: 42 })
    }
  })

  test('the worker\'s output during a call reaches the caller\'s stdout and stderr before the call returns, in order, even when the caller exits at once', T, async () => {
    const r = await run([path.join(SYNC, 'output-app.js'), 'exit'])
    const lines = (text) => text.split('\n').filter((l) => l !== '')
    assert.deepStrictEqual(lines(r.stdout), [
      'caller before',
      'worker loading', // while it loaded, before the first answer
      ...Array.from({ length: 7 }, (_, k) => `worker line ${k + 1}`),
      'worker bytes',
      'worker before throw', // with a thrown error too
      'caller caught',
      'caller after'
    ], transcript(r))
    assert.deepStrictEqual(lines(r.stderr), ['caller error before', 'worker error line', 'caller error after'], transcript(r))
  })

  const HAS_BROADCAST = typeof require('worker_threads').BroadcastChannel === 'function'
  test('the worker\'s output outside a call still reaches the caller\'s output', Object.assign({ skip: !HAS_BROADCAST && 'no BroadcastChannel (the fixture learns of the write by one)' }, T), async () => {
    const r = await run([path.join(SYNC, 'output-app.js'), 'outside'])
    const lines = r.stdout.split('\n')
    assert.ok(lines.indexOf('worker outside a call') > lines.indexOf('caller after'), transcript(r))
    assert.ok(lines.includes('caller closed'), transcript(r))
  })
})
