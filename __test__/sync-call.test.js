'use strict'
// createSyncFn / serveSync (lib/sync-call.js). A synchronous call blocks the
// calling thread, so every scenario runs in a child process with a hard
// timeout (fixtures/sync-call-cases.js).
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')

const HARD_TIMEOUT = 20000
const FIXTURE = path.join(__dirname, 'fixtures', 'sync-call-cases.js')
const WORKER = path.join(__dirname, 'fixtures', 'sync-worker-ok.js')

async function run (name) {
  const r = await runChild([FIXTURE, name], { timeoutMs: HARD_TIMEOUT })
  assert.ok(!r.timedOut, `hung: killed after ${HARD_TIMEOUT} ms\n${transcript(r)}`)
  assert.strictEqual(r.code, 0, transcript(r))
  assert.ok(r.result !== undefined, transcript(r))
  return r.result
}

const T = { timeout: HARD_TIMEOUT + 5000 }

describe('createSyncFn / serveSync', () => {
  test('returns what the (async) handler returns, for CommonJS and ES module workers', T, async () => {
    const r = await run('values')
    assert.deepStrictEqual(r, { echo: { a: [1, 'two', null], b: 1 }, add: 6, later: 'async ok', esm: 'a+b' })
  })

  test('arguments and results arrive as structured clone makes them: primitives of every kind, strings with lone surrogates, objects, shared references', T, async () => {
    const r = await run('clone')
    assert.deepStrictEqual(r, { bad: [], count: [1, 2, 5], sameObject: true, sameString: true, many: 1000 })
  })

  test('rethrows errors with their class, message, stack, code and cause; the worker keeps serving', T, async () => {
    const r = await run('errors')
    assert.strictEqual(r.thrown.ctor, 'TypeError')
    assert.strictEqual(r.thrown.message, 'bad: x')
    assert.strictEqual(r.thrown.code, 'ERR_BAD')
    assert.ok(r.thrown.stack.includes(WORKER), r.thrown.stack) // the worker's stack
    assert.deepStrictEqual([r.thrown.cause.ctor, r.thrown.cause.message, r.thrown.cause.code], ['RangeError', 'the cause', 'ERR_CAUSE'])
    // A class the caller does not have: a subclass of Error of the same name.
    assert.deepStrictEqual([r.custom.ctor, r.custom.isError, r.custom.message], ['MyError', true, 'custom class'])
    assert.deepStrictEqual(r.value, { not: 'an error' })
    assert.match(r.unserializableResult.message, /could not be cloned/)
    assert.match(r.unserializableArg.message, /could not be cloned/)
    assert.strictEqual(r.after, 4)
  })

  test('an AggregateError arrives with its errors (each rebuilt, recursively), a DOMException as a DOMException with its name, message and code', T, async () => {
    const r = await run('rich-errors')
    if (typeof AggregateError === 'function') { // eslint-disable-line no-undef
      const a = r.aggregate
      assert.deepStrictEqual([a.ctor, a.isAggregate, a.message, a.errorsEnumerable], ['AggregateError', true, 'many', false])
      assert.strictEqual(a.errors.length, 4)
      assert.deepStrictEqual([a.errors[0].ctor, a.errors[0].message, a.errors[0].code], ['TypeError', 'first', 'ERR_FIRST'])
      assert.deepStrictEqual([a.errors[1].ctor, a.errors[1].isError, a.errors[1].message], ['MyError', true, 'second'])
      assert.strictEqual(a.errors[2], 5)
      assert.deepStrictEqual([a.errors[3].ctor, a.errors[3].message], ['AggregateError', 'nested'])
      assert.deepStrictEqual([a.errors[3].errors[0].ctor, a.errors[3].errors[0].message], ['RangeError', 'deep'])
    }
    if (typeof DOMException === 'function') { // eslint-disable-line no-undef
      const d = r.dom
      assert.deepStrictEqual([d.isDOMException, d.name, d.message, d.code], [true, 'DataCloneError', 'no clone', 25])
      assert.ok(d.stack.includes(WORKER), d.stack)
    }
  })

  test('a call that timed out never shifts later answers: its late answer is dropped, the worker keeps serving', T, async () => {
    const r = await run('timeout')
    assert.strictEqual(r.first.code, 'ERR_SYNC_CALL_TIMEOUT')
    assert.strictEqual(r.first.ctor, 'SyncCallTimeoutError')
    assert.deepStrictEqual(r.second, { value: 'mine' })
    assert.deepStrictEqual(r.third, { value: 2 })
  })

  test('a worker module that does not exist: SyncWorkerError naming why, on this call and the next', T, async () => {
    const r = await run('missing-file')
    for (const e of [r.first, r.again]) {
      assert.strictEqual(e.code, 'ERR_SYNC_WORKER')
      assert.match(e.message, /failed to start: Cannot find module/)
      assert.strictEqual(e.cause.isError, true)
    }
  })

  test('a worker module that throws while loading, or never calls serveSync', T, async () => {
    const load = await run('throws-at-load')
    assert.strictEqual(load.code, 'ERR_SYNC_WORKER')
    assert.match(load.message, /failed to start: broken at load/)
    assert.deepStrictEqual([load.cause.ctor, load.cause.message], ['SyntaxError', 'broken at load'])
    const none = await run('no-serve')
    assert.match(none.message, /did not call serveSync/)
  })

  test('a Worker that cannot be constructed (execArgv or env Node refuses): SyncWorkerError with the cause, on this call and at once on every later one', T, async () => {
    const r = await run('bad-start')
    const causes = { execArgv: 'ERR_WORKER_INVALID_EXEC_ARGV', env: 'ERR_INVALID_ARG_TYPE', pool: 'ERR_INVALID_ARG_TYPE' }
    for (const name of Object.keys(causes)) {
      for (const e of [r[name].first, r[name].again]) {
        assert.strictEqual(e.ctor, 'SyncWorkerError', name)
        assert.strictEqual(e.code, 'ERR_SYNC_WORKER', name)
        assert.match(e.message, /the worker failed to start: /, name)
        assert.strictEqual(e.cause.code, causes[name], name)
      }
    }
  })

  test('a worker that dies at once, does not parse, or whose preload throws or exits: SyncWorkerError, never a hang (calls without a timeout)', T, async () => {
    const exit = await run('exit-at-load')
    assert.strictEqual(exit.code, 'ERR_SYNC_WORKER')
    assert.match(exit.message, /exited: the worker called process\.exit\(0\)/)
    const syntax = await run('syntax-error')
    assert.strictEqual(syntax.code, 'ERR_SYNC_WORKER')
    assert.match(syntax.message, /failed to start: /)
    assert.strictEqual(syntax.cause.ctor, 'SyntaxError')
    // Node 12 runs a worker's preloads before it sets workerData, so the
    // worker cannot report a preload's failure: the caller finds the thread
    // ended (docs/channel.md).
    const reports = Number(process.versions.node.split('.')[0]) > 12
    const ended = /exited: the worker thread ended/
    const preloadThrows = await run('preload-throws')
    assert.strictEqual(preloadThrows.code, 'ERR_SYNC_WORKER')
    assert.match(preloadThrows.message, reports ? /failed to start: preload throws/ : ended)
    const preloadExits = await run('preload-exits')
    assert.strictEqual(preloadExits.code, 'ERR_SYNC_WORKER')
    assert.match(preloadExits.message, reports ? /exited: the worker called process\.exit\(5\)/ : ended)
  })

  test('a worker that exits during a call (process.exit), or whose thread ends without a word, wakes the caller', T, async () => {
    const exit = await run('process-exit')
    assert.strictEqual(exit.during.code, 'ERR_SYNC_WORKER')
    assert.match(exit.during.message, /exited: the worker called process\.exit\(3\)/)
    assert.strictEqual(exit.after.code, 'ERR_SYNC_WORKER')
    const vanish = await run('vanish')
    assert.strictEqual(vanish.code, 'ERR_SYNC_WORKER')
    assert.match(vanish.message, /thread ended/)
  })

  test('an error thrown in the worker outside any call wakes the pending call with it', T, async () => {
    const r = await run('stray')
    assert.strictEqual(r.code, 'ERR_SYNC_WORKER')
    assert.match(r.message, /threw outside a call: stray async throw/)
    assert.strictEqual(r.cause.message, 'stray async throw')
  })

  const HAS_BROADCAST = typeof require('worker_threads').BroadcastChannel === 'function'
  test('a pool of workers behind one function: the others serve while one is held in a call that timed out; bad sizes', Object.assign({ skip: !HAS_BROADCAST && 'no BroadcastChannel (the test holds a worker with one)' }, T), async () => {
    const r = await run('pool')
    assert.strictEqual(r.late, 'ERR_SYNC_CALL_TIMEOUT')
    // Served while one worker is held (until 'release' reaches it through
    // another worker): each answer belongs to its own call.
    assert.deepStrictEqual(r.during, Array.from({ length: 20 }, (_, i) => i))
    assert.strictEqual(r.released, 'sent')
    assert.strictEqual(r.after, 42)
    assert.ok(r.threadsSeen >= 1 && r.threadsSeen <= 3, JSON.stringify(r))
    assert.deepStrictEqual([r.zero, r.many, r.fraction, r.text], ['RangeError', 'RangeError', 'RangeError', 'TypeError'])
  })

  test('arguments, results and errors of 4 MiB, larger than the rings, cross whole (one worker, a pool, a ring of 4 KiB)', T, async () => {
    const r = await run('large')
    assert.deepStrictEqual(r, {
      one: true,
      two: true,
      bytes: true,
      made: true,
      argLength: 4 << 20,
      thrown: ['RangeError', 4 << 20],
      small: 3,
      tiny: [true, 4],
      pooled: Array(9).fill(true)
    })
  })

  test('a large answer that comes after its call timed out is dropped, and so is a large call that timed out before a worker took it', T, async () => {
    assert.deepStrictEqual(await run('large-timeout'), {
      lateAnswer: 'ERR_SYNC_CALL_TIMEOUT',
      lateCall: 'ERR_SYNC_CALL_TIMEOUT',
      after: 'mine',
      afterBig: true
    })
  })

  test('a worker calls another worker synchronously', T, async () => {
    assert.strictEqual(await run('nested'), 42)
  })

  test('a plain Worker started in the worker (inheriting its execArgv) runs as any worker, and may make synchronous calls', T, async () => {
    assert.deepStrictEqual(await run('plain-worker'), [{ data: { x: 1 }, sum: 3 }, { sum: 3 }])
  })

  test('bad input', T, async () => {
    assert.deepStrictEqual(await run('bad-input'), {
      relative: 'TypeError',
      number: 'TypeError',
      options: 'TypeError',
      timeout: 'RangeError',
      workerData: 'TypeError',
      bytes: 'RangeError',
      serveOutside: 'Error',
      serveNotFn: 'TypeError'
    })
  })
})
