'use strict'
// Web Locks for every process that maps a region (`region.locks`,
// lib/region-locks.js): the rules of the spec, as web-locks.test.js checks
// them for the process's own manager, run against a region's manager; then
// between real processes (fixtures/region-locks-child.js), each with a hard
// timeout: exclusion, shared locks held together, a holder killed with
// SIGKILL, steal, and query() naming every process.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, startChild, regionSkip, freshRegion, transcript, until } = require('./util')
const { SharedRegion, waitAsync, notify } = require('..')

const FIXTURE = path.join(__dirname, 'fixtures', 'region-locks-child.js')
const HARD_TIMEOUT = 30000
const skip = regionSkip()

const fresh = () => freshRegion('rl', 64)

const child = (args) => startChild(FIXTURE, args, HARD_TIMEOUT)

describe('region.locks: Web Locks across processes', skip, () => {
  test("the spec's rules (web-locks.test.js) hold for a region's manager", { timeout: 120000 }, async () => {
    // Run as a plain file (its own TAP summary), not as a subtest of this run.
    const saved = process.env.NODE_TEST_CONTEXT
    delete process.env.NODE_TEST_CONTEXT
    let r
    try {
      r = await runChild([path.join(__dirname, 'web-locks.test.js')], { timeoutMs: 100000, env: { WEB_LOCKS_UNDER_TEST: 'region' } })
    } finally {
      if (saved !== undefined) process.env.NODE_TEST_CONTEXT = saved
    }
    assert.ok(!r.timedOut, `hung\n${transcript(r)}`)
    assert.strictEqual(r.code, 0, transcript(r))
    assert.match(r.stdout, /(#|ℹ) fail 0/, transcript(r))
    assert.match(r.stdout, /(#|ℹ) pass [1-9]\d/, transcript(r))
  })

  test('exclusive requests exclude across 4 processes (a counter updated across an await)', { timeout: 60000 }, async () => {
    const { name, w } = fresh()
    const kids = [0, 1, 2, 3].map(() => child(['count', name, '150']))
    const ends = await Promise.all(kids.map((k) => k.exited))
    assert.deepStrictEqual(ends, ends.map(() => ({ code: 0, signal: null })))
    assert.strictEqual(w[0], 600)
    SharedRegion.unlink(name)
  })

  test('shared requests of three processes are held together; an exclusive one waits for all', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const kids = [0, 1, 2].map(() => child(['shared', name]))
    await until(() => Atomics.load(w, 1) === 3, 'three shared holders at once')
    const { held } = await region.locks.query()
    assert.deepStrictEqual(held.filter((h) => h.name === 'report').map((h) => h.mode), ['shared', 'shared', 'shared'])
    assert.strictEqual(new Set(held.map((h) => h.clientId)).size, 3, 'three clients')
    assert.strictEqual(await region.locks.request('report', { ifAvailable: true }, (lock) => lock), null)
    const exclusive = region.locks.request('report', async () => Atomics.load(w, 1))
    Atomics.store(w, 2, 1)
    require('..').notify(w, 2)
    assert.strictEqual(await exclusive, 3)
    await Promise.all(kids.map((k) => k.exited))
    SharedRegion.unlink(name)
  })

  test('a holder killed with SIGKILL: its lock goes to the next request; query() no longer shows it', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const holder = child(['hold', name])
    await until(() => Atomics.load(w, 3) !== 0, 'the holder')
    const pending = region.locks.request('job', (lock) => lock.name)
    const before = await region.locks.query()
    assert.strictEqual(before.held.filter((h) => h.name === 'job').length, 1)
    assert.strictEqual(before.pending.filter((h) => h.name === 'job').length, 1)
    holder.kill('SIGKILL')
    assert.strictEqual(await pending, 'job')
    await holder.exited
    assert.deepStrictEqual(await region.locks.query(), { held: [], pending: [] })
    SharedRegion.unlink(name)
  })

  test('requestSync in another process blocks until this one releases, then holds the lock', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    let release
    const held = region.locks.request('job', () => new Promise((resolve) => { release = resolve }))
    await until(() => release !== undefined, 'the lock')
    const blocked = child(['sync', name])
    await until(() => Atomics.load(w, 5) === 1, 'the child to ask')
    // Its request is queued (query() reads the table of every process).
    for (let i = 0; (await region.locks.query()).pending.length !== 1; i++) {
      assert.ok(i < 2000, 'the child\'s request never showed in query()')
      await new Promise((resolve) => setImmediate(resolve))
    }
    assert.strictEqual(Atomics.load(w, 6), 0, 'not granted while held here')
    release()
    await held
    assert.deepStrictEqual(await blocked.exited, { code: 0, signal: null })
    assert.strictEqual(Atomics.load(w, 6), 1)
    SharedRegion.unlink(name)
  })

  // Fixture words of the 'cycle' role.
  const CYCLE_HELD = 16
  const CYCLE_GO = 20
  const CYCLE_OUT = 24
  const untilPending = async (region, name, n) => {
    for (let i = 0; (await region.locks.query()).pending.filter((p) => p.name === name).length !== n; i++) {
      assert.ok(i < 4000, `${n} pending requests for ${name} never showed in query()`)
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
  // Processes 0, 1 and 2 hold a, b and c in requestSync (in the modes
  // given); then, one after the other, 0 asks for b and blocks, 1 for c and
  // blocks, and 2 for a.
  async function cycleOfThree (holdModes, askModes) {
    const { name, region, w } = freshRegion('rl', 128)
    const args = (k, hold, want) => ['cycle', name, hold, want, String(k), holdModes[k], askModes[k]]
    const kids = [child(args(0, 'a', 'b')), child(args(1, 'b', 'c'))]
    const ended = runChild([FIXTURE, ...args(2, 'c', 'a')], { timeoutMs: HARD_TIMEOUT })
    await until(() => [0, 1, 2].every((k) => Atomics.load(w, CYCLE_HELD + k) === 1), 'a, b and c held')
    for (const k of [0, 1, 2]) {
      Atomics.store(w, CYCLE_GO + k, 1)
      notify(w, CYCLE_GO + k)
      if (k < 2) await untilPending(region, k === 0 ? 'b' : 'c', 1)
    }
    const last = await ended
    for (const k of kids) assert.deepStrictEqual(await k.exited, { code: 0, signal: null }, 'the others go on')
    assert.strictEqual(last.code, 0, transcript(last))
    const outs = [0, 1, 2].map((k) => Atomics.load(w, CYCLE_OUT + k))
    assert.deepStrictEqual(await region.locks.query(), { held: [], pending: [] })
    SharedRegion.unlink(name)
    return { kids, outs, last }
  }

  test('a requestSync that would close a cycle of threads blocked in requestSync in three processes is a DeadlockError naming it; the others go on', { timeout: 60000 }, async () => {
    const { kids, outs, last } = await cycleOfThree(['exclusive', 'exclusive', 'exclusive'], ['exclusive', 'exclusive', 'exclusive'])
    assert.deepStrictEqual(outs, [1, 1, 2], 'the last to block is refused, the others are granted in the end')
    const { cycle, message } = JSON.parse(last.stdout.trim().split('\n').pop())
    assert.deepStrictEqual(cycle.map((c) => c.name), ['a', 'b', 'c'])
    const pids = cycle.map((c) => Number(c.clientId.split('-')[0]))
    assert.deepStrictEqual(pids.slice(1), kids.map((k) => k.pid), 'each waits for the next one\'s process')
    assert.ok(!pids.slice(1).includes(pids[0]))
    assert.match(message, new RegExp(`this thread \\(${cycle[0].clientId}\\) would wait for "a" on ${cycle[1].clientId}; ${cycle[1].clientId} waits for "b" on ${cycle[2].clientId}; ${cycle[2].clientId} waits for "c" on this thread`))
  })

  test('a wait that closes no cycle is no DeadlockError: a shared request beside a blocked shared holder', { timeout: 60000 }, async () => {
    const { outs } = await cycleOfThree(['shared', 'exclusive', 'exclusive'], ['exclusive', 'exclusive', 'shared'])
    assert.deepStrictEqual(outs, [1, 1, 1])
  })

  test("steal from another process: the holder's request rejects with an AbortError there", { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    const holder = child(['hold', name])
    await until(() => Atomics.load(w, 3) !== 0, 'the holder')
    assert.strictEqual(await region.locks.request('job', { steal: true }, (lock) => lock.mode), 'exclusive')
    while (Atomics.load(w, 4) === 0) {
      const r = waitAsync(w, 4, 0, 1000)
      if (r.async) await r.value
    }
    assert.strictEqual(Atomics.load(w, 4), 1, 'an AbortError')
    holder.kill('SIGKILL')
    await holder.exited
    SharedRegion.unlink(name)
  })

  // Its store made, the stealer never wakes the holder's watch: the death
  // it leaves (or a slice) must, or the holder here would learn of the
  // steal only when it releases.
  test('a stealer killed between its store and its wake-up: the holder here still learns that its lock was stolen', { timeout: 60000 }, async () => {
    const { name, region, w } = fresh()
    let release = null
    const outcome = region.locks.request('job', () => new Promise((resolve) => { release = resolve }))
      .then(() => 'resolved', (e) => e)
    await until(() => release !== null, 'the lock here')
    const stealer = child(['half-steal', name])
    await until(() => Atomics.load(w, 5) === 1, 'the stealer to store STOLEN')
    stealer.kill('SIGKILL')
    await stealer.exited
    // A held lock's watch keeps no process alive (nor does a pending
    // promise): a server would; here the bound's timer does.
    let timer
    const bound = new Promise((resolve) => { timer = setTimeout(resolve, 30000, new Error('not told within 30 s')) })
    const e = await Promise.race([outcome, bound])
    clearTimeout(timer)
    assert.strictEqual(e.name, 'AbortError', String(e))
    assert.strictEqual(e.message, 'The lock was stolen.')
    release()
    SharedRegion.unlink(name)
  })
})
