'use strict'
// Thread and process teardown, each scenario a script in fixtures/ run as a
// child process with a hard timeout: a hang is killed and fails the test
// (with the child's output), a crash shows as a wrong exit code or signal.
// The child inherits SHARED_FUTEX_UNDER_TEST.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { canObserveBlocking, runChild } = require('./util')
const { kind } = require('./subject')

const HARD_TIMEOUT = 20000
const LONG = { timeout: HARD_TIMEOUT + 10000 }

// Runs a fixture and checks that it finished by itself with `code`.
async function expectExit (script, args, code, hardTimeout = HARD_TIMEOUT) {
  const r = await runChild([path.join(__dirname, 'fixtures', script)].concat(args || []), { timeoutMs: hardTimeout })
  const shown = `\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
  assert.ok(!r.timedOut, `${script} ${(args || []).join(' ')} hung: killed after ${hardTimeout} ms${shown}`)
  assert.strictEqual(r.signal, null, `died of ${r.signal}${shown}`)
  assert.strictEqual(r.code, code, `exit code${shown}`)
  return r.stdout.split('\n').filter(Boolean)
}

describe('lifecycle (child processes)', () => {
  test('(a) worker.terminate() resolves while the worker is blocked in wait', LONG, async () => {
    const lines = await expectExit('terminate-blocked.js', [], 0)
    // On Linux the fixture saw both workers asleep in wait before terminating.
    assert.strictEqual(lines[0], canObserveBlocking ? 'blocked' : 'started', lines.join('\n'))
    assert.match(lines[1], /^terminated in [\d.]+ ms$/)
    assert.match(lines[2], /^terminated in [\d.]+ ms$/)
    assert.strictEqual(lines[3], 'notify after terminate: 0 0', 'the dead workers\' waiters are not counted')
    assert.strictEqual(lines.length, 4)
  })

  for (const how of ['exit', 'return', 'terminate']) {
    test(`(b) a worker leaves by ${how} with async waiters pending; notify then finds none`, LONG, async () => {
      const lines = await expectExit('exit-with-async-waiters.js', [how], 0)
      assert.deepStrictEqual(lines, [
        `worker exited with ${how === 'terminate' ? 1 : 0}`,
        'notify after exit: 0',
        'notify again: 0',
        'still works: 1 ok'
      ])
    })
  }

  test('(c) process.exit(7) while a worker is blocked in wait exits with 7', LONG, async () => {
    const lines = await expectExit('exit-while-blocked.js', [], 7)
    assert.deepStrictEqual(lines, ['exiting'])
  })

  test('(d) by default, pending waitAsync promises do not keep the process alive', LONG, async () => {
    const lines = await expectExit('pending-promises.js', ['default'], 0)
    assert.deepStrictEqual(lines, ['pending'])
  })

  test('(d) setKeepAlive(true): the process stays until the 300 ms timeout resolves the promise', LONG, async () => {
    const lines = await expectExit('pending-promises.js', ['keepalive'], 0)
    assert.strictEqual(lines.length, 3, lines.join('\n'))
    assert.strictEqual(lines[0], 'previous: false')
    assert.strictEqual(lines[1], 'pending')
    const m = /^300 ms: timed-out after (\d+) ms$/.exec(lines[2])
    assert.ok(m, lines[2])
    assert.ok(Number(m[1]) >= 300, lines[2])
  })

  test('(d) setKeepAlive(true): a waiter woken by a worker settles, then the process exits by itself', LONG, async () => {
    const lines = await expectExit('pending-promises.js', ['keepalive-notify'], 0)
    assert.deepStrictEqual(lines.slice(0, 2), ['previous: false', 'pending'])
    assert.deepStrictEqual(lines.slice(2).map((l) => l.replace(/ after \d+ ms$/, '')).sort(),
      ['forever: ok', 'worker woke 1'])
  })

  for (const [name, outcome] of [
    ['RwLock', 'ERR_LOCK_TIMEOUT'], ['Barrier', 'ERR_LOCK_TIMEOUT'], ['WaitGroup', 'false'],
    ['ManualResetEvent', 'false'], ['AutoResetEvent', 'false'], ['Once', 'ERR_LOCK_TIMEOUT'],
    ['Atomics.Mutex', '{"success":false}']
  ]) {
    test(`(d) a pending async wait of ${name} keeps the process alive until its timeout settles it`, LONG, async () => {
      const lines = await expectExit('primitives-keepalive.js', [name], 0)
      assert.deepStrictEqual(lines, [`settled: ${outcome}`])
    })
  }

  test('(d) setKeepAlive(false) after true returns true and restores the default', LONG, async () => {
    const lines = await expectExit('pending-promises.js', ['keepalive-off'], 0)
    assert.deepStrictEqual(lines, ['previous: false true', 'pending'])
  })

  test('(d) setKeepAlive(true) in a worker keeps it alive until its waiter is notified', LONG, async () => {
    const lines = await expectExit('pending-promises.js', ['worker'], 0)
    assert.deepStrictEqual(lines, ['notify: 1', 'worker waiter: ok', 'worker exited with 0'])
  })

  // 20 rounds of two workers each: about 5 s on an idle machine, over 20 s
  // on a loaded one; the hard limit is there for a hang, not for speed.
  test('(e) a notify loop racing the termination of a worker with async waiters, 20 times', { timeout: 90000 }, async () => {
    const lines = await expectExit('notify-races-terminate.js', [], 0, 80000)
    assert.strictEqual(lines.length, 21, lines.join('\n'))
    assert.strictEqual(lines[20], 'done')
  })

  test('(h) no wake-up is lost to a notify that finds nobody queued: 5,000 turns passed with plain stores', LONG, async () => {
    const lines = await expectExit('presence-race.js', [], 0)
    assert.deepStrictEqual(lines, ['5000 some', '5000 some', 'done'])
  })

  const moduleOnly = kind === 'module' ? {} : { skip: 'the module\'s own delivery and probes' }

  test('(f) a waiter notified by its own thread is delivered before exit, also when the timer thread scheduled the delivery', Object.assign({}, LONG, moduleOnly), async () => {
    const lines = await expectExit('notify-at-exit.js', [], 0)
    assert.deepStrictEqual(lines, ['notify: 1', 'b: ok'])
  })

  for (const how of ['sync', 'async']) {
    // V8 counts such a wake-up and gives it to nobody (the second worker
    // times out): this is the module's alone.
    const skip = !canObserveBlocking ? 'needs /proc/thread-self' : kind !== 'module' ? 'V8 loses this wake-up' : false
    test(`(g) a wake-up taken by a ${how} waiter of a worker being terminated goes to the next waiter`, Object.assign({}, LONG, skip ? { skip } : {}), async () => {
      const lines = await expectExit('terminate-passes-on.js', [how], 0)
      assert.deepStrictEqual(lines, ['notify: 1', 'second: ok', 'then: 0'])
    })
  }

  test('(h) the liveness probe of a blocked wait leaves no handle behind', Object.assign({}, LONG, moduleOnly), async () => {
    const r = await runChild([path.join(__dirname, 'fixtures', 'probe-handles.js'), '10000'], { timeoutMs: HARD_TIMEOUT })
    assert.ok(r.result, `${r.stdout}${r.stderr}`)
    assert.strictEqual(r.result.alive, true)
    // Without a scope of its own each probe leaves 3 handles: 30 000 here.
    assert.ok(r.result.handleScopeEdges < 1000, `${r.result.handleScopeEdges} handles open after 10 000 probes`)
  })
})
