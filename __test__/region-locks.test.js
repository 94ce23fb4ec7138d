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
const { SharedRegion, waitAsync } = require('..')

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
})
