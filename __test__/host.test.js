'use strict'
// What the host allows, each scenario a fixture run in a child process with
// a hard timeout:
// - blocking waits run no code a user can intercept (a getter on
//   globalThis.Atomics, a Proxy in the global's prototype chain);
// - a thread that may not block ([[CanBlock]] false): every blocking call
//   throws V8's TypeError, everything else works;
// - a runtime without the Atomics global: the package loads, wait / notify /
//   waitAsync work, creating a primitive throws AtomicsUnavailableError.
const assert = require('assert')
const path = require('path')
const { execFileSync } = require('child_process')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')
const { kind } = require('./subject')

const HARD_TIMEOUT = 30000
const LONG = { timeout: HARD_TIMEOUT + 10000 }
const moduleOnly = kind === 'module' ? {} : { skip: 'the module\'s own primitives and probes' }
const MAJOR = Number(process.versions.node.split('.')[0])
const fixture = (name) => path.join(__dirname, 'fixtures', name)

async function resultOf (args) {
  const r = await runChild(args, { timeoutMs: HARD_TIMEOUT })
  assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
  return r.result
}

describe('no user code runs during a blocking wait', () => {
  let run = null // one run of the fixture for both tests
  const traps = () => run || (run = resultOf([fixture('no-user-code-in-wait.js'), '300']))

  test('a getter on globalThis.Atomics (and Object.prototype) and a Proxy in the global\'s prototype chain see no call while wait, lock, Condition.wait and Semaphore.acquire block for 300 ms', Object.assign({}, LONG, moduleOnly), async () => {
    const r = await traps()
    assert.deepStrictEqual(r.counts, { wait: 0, lock: 0, condition: 0, semaphore: 0 })
  })

  test('a getter on globalThis.Atomics that throws does not end a blocking wait', Object.assign({}, LONG, moduleOnly), async () => {
    const r = await traps()
    assert.strictEqual(r.withThrowingGetter, 'timed-out')
  })
})

// The blocking calls of cannot-block.js, by the name each error gives.
const BLOCKING = [
  'AsyncLock.lock', 'Condition.wait', 'Semaphore.acquire', 'RwLock.read', 'RwLock.write', 'Barrier.wait',
  'WaitGroup.wait', 'ManualResetEvent.wait', 'AutoResetEvent.wait', 'Atomics.Mutex.lock',
  'Atomics.Mutex.lock (callback)', 'Atomics.Mutex.lockIfAvailable (10 ms)', 'Atomics.Mutex.lockWithTimeout',
  'Atomics.Condition.wait', 'Atomics.Condition.wait (token)', 'Atomics.Condition.waitFor'
]
const NON_BLOCKING = {
  'Once.run (nobody else running fn)': 'returns true',
  'Atomics.Mutex.lockIfAvailable (0 ms)': 'returns locked',
  'Atomics.Mutex.tryLock': 'returns {"value":"ran","success":true}',
  'Atomics.Condition.notify': 'returns 0',
  'Atomics.waitAsync (polyfill)': 'resolves timed-out',
  notify: 'returns 1',
  waitAsync: 'resolves ok',
  'AsyncLock.lockAsync': 'resolves "locked"',
  'AsyncLock.tryLock': 'resolves "acquired"',
  'Condition.waitAsync': 'resolves "timed-out"',
  'Semaphore.acquireAsync': 'resolves "acquired"',
  'RwLock.readAsync': 'resolves "read"',
  'RwLock.writeAsync': 'resolves "written"',
  'Barrier.waitAsync': 'resolves true',
  'WaitGroup.waitAsync': 'resolves true',
  'ManualResetEvent.waitAsync': 'resolves true',
  'AutoResetEvent.waitAsync': 'resolves true',
  'Once.runAsync': 'resolves true',
  'Atomics.Mutex.lockAsync': 'resolves {"value":"ran","success":true}'
}

describe('a thread that may not block (V8\'s %SetAllowAtomicsWait(false), the spec\'s [[CanBlock]] false)', () => {
  for (const where of ['main', 'worker']) {
    test(`${where}: wait, the polyfill's Atomics.wait and every blocking method throw V8's TypeError; nothing else changes`, Object.assign({}, LONG, moduleOnly), async () => {
      const r = await resultOf(['--allow-natives-syntax', fixture('cannot-block.js'), where, 'disallowed'])
      // V8's own answer on this thread: "Atomics.wait cannot be called in this context".
      const m = /^throws TypeError: (Atomics\.wait)(.+)$/.exec(r.native)
      assert.ok(m, `V8's Atomics.wait: ${r.native}`)
      const refused = (name) => `throws TypeError: ${name.replace(/ \(.*\)$/, '')}${m[2]}`
      const { calls, after } = r
      // wait: refused whatever the value and timeout, after the argument
      // checks and conversions (the spec's DoWait order), like V8's.
      for (const name of ['wait (equal, timeout 0)', 'wait (not equal)', 'wait (equal, timeout 10)', 'wait (converted arguments)']) {
        assert.strictEqual(calls[name], r.native, name)
      }
      assert.deepStrictEqual(r.order, ['index', 'value', 'timeout'])
      assert.strictEqual(calls['wait (not shared)'], 'throws TypeError: [object Int32Array] is not a shared typed array.')
      assert.strictEqual(calls['wait (index out of range)'], 'throws RangeError: Invalid atomic access index')
      assert.strictEqual(calls['Atomics.wait (polyfill)'], r.native)
      for (const name of BLOCKING) assert.strictEqual(calls[name], refused(name), name)
      // Once.run refuses only where it would have to wait.
      assert.strictEqual(calls['Once.run (another thread running fn)'], refused('Once.run'))
      for (const [name, expected] of Object.entries(NON_BLOCKING)) assert.strictEqual(calls[name], expected, name)
      // A refused call took nothing, gave nothing back and consumed nothing.
      assert.deepStrictEqual(after, {
        'AsyncLock.lock': false,
        'Condition.wait': true, // the lock is still held
        'Semaphore.acquire': 1,
        'RwLock.read': 0,
        'RwLock.write': false,
        'Barrier.wait': { waiting: 0, isBroken: false },
        'ManualResetEvent.wait': true,
        'AutoResetEvent.wait': true, // still set
        'Once.run (another thread running fn)': false,
        'Atomics.Condition.wait (token)': true,
        'Atomics.Condition.waitFor': true
      })
    })
  }

  test('the same calls where blocking is allowed: none throws the TypeError', Object.assign({}, LONG, moduleOnly), async () => {
    const r = await resultOf(['--allow-natives-syntax', fixture('cannot-block.js'), 'worker', 'allowed'])
    assert.strictEqual(r.native, 'returns timed-out')
    const thrown = Object.entries(r.calls).filter(([, o]) => /cannot be called/.test(o))
    assert.deepStrictEqual(thrown, [])
    assert.strictEqual(r.calls['wait (equal, timeout 10)'], 'returns timed-out')
    assert.strictEqual(r.calls['AsyncLock.lock'], 'returns acquired')
    assert.strictEqual(r.calls['Once.run (another thread running fn)'], 'throws LockTimeoutError: Once.run: another thread\'s fn did not finish within 10 ms')
  })
})

// The V8 flag that removes the Atomics global, where this Node has one.
function noAtomicsFlag () {
  const options = execFileSync(process.execPath, ['--v8-options'], { encoding: 'utf8' })
  return /--harmony-atomics\b/.test(options) ? '--no-harmony-atomics' : null
}
const NO_ATOMICS = noAtomicsFlag()
const noAtomicsSkip = kind !== 'module'
  ? 'the module\'s own loading'
  : NO_ATOMICS === null && (MAJOR < 16
    ? 'no flag of this Node removes Atomics alone (--no-harmony-sharedarraybuffer also removes SharedArrayBuffer, which Node\'s own worker_threads needs)'
    : 'this Node\'s V8 has no --harmony-atomics: Atomics cannot be removed')

describe('a runtime without the Atomics global (node --no-harmony-atomics)', () => {
  test('the entry points load, the polyfill installs nothing, wait / notify / waitAsync work, a primitive throws AtomicsUnavailableError', Object.assign({}, LONG, { skip: noAtomicsSkip }), async () => {
    const r = await resultOf([NO_ATOMICS, fixture('no-atomics.js')])
    assert.strictEqual(r.atomics, 'undefined', `${NO_ATOMICS} removed the global`)
    assert.deepStrictEqual(r.loads, { index: 'returns loaded', polyfill: 'returns loaded', 'atomics-mutex': 'returns loaded' })
    assert.deepStrictEqual(r.polyfill, { isInstalled: false, install: false, installForced: false, atomics: 'undefined' })
    for (const [name, made] of Object.entries(r.primitives)) {
      // name, code, instanceof, and a message that starts with the class's name
      assert.strictEqual(made, 'AtomicsUnavailableError ERR_NO_ATOMICS true true', name)
    }
    assert.strictEqual(Object.keys(r.primitives).length, 11)
    const calls = {
      'wait (not equal)': 'returns not-equal',
      'wait (timeout 0)': 'returns timed-out',
      'wait (timeout 20)': 'returns timed-out',
      'waitAsync (not equal)': 'returns {"async":false,"value":"not-equal"}',
      'waitAsync (not equal, timeout 0)': 'returns {"async":false,"value":"not-equal"}',
      'waitAsync (timeout 0)': 'returns {"async":false,"value":"timed-out"}',
      'notify (one async waiter)': 'returns 1',
      'waitAsync (notified)': 'ok',
      'waitAsync (timeout 20)': 'timed-out'
    }
    // Node 16's own worker bootstrap needs Atomics (no worker starts there).
    if (MAJOR === 16) {
      assert.match(r.workers, /^unavailable/)
    } else {
      assert.strictEqual(r.workers, 'available')
      Object.assign(calls, { 'notify (a blocked worker)': 1, 'wait (in the worker)': 'ok' })
    }
    assert.deepStrictEqual(r.calls, calls)
  })
})
