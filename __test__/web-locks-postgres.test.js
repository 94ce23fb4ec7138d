'use strict'
// PostgresLockManager (shared-futex/web-locks/postgres) against a real
// PostgreSQL server that this file starts (scripts/pg-cluster.js: initdb into
// a temporary directory, a free port on 127.0.0.1, removed at the end);
// skipped, with the reason, where PostgreSQL or `pg` is absent. First the
// spec's rules of web-locks.test.js with one manager; then several clients
// (managers, and processes with hard timeouts): exclusion, FIFO, shared
// locks, fencing tokens, a SIGKILLed holder, steal, a server restart, aborted
// and timed-out requests, connections, names, bad input and failures.
const assert = require('assert')
const path = require('path')
const { spawn } = require('child_process')
const { test, describe, before, after } = require('./harness')
const { runChild, transcript, postgresUnavailable, PG_CLUSTER } = require('./util')

const HARD_TIMEOUT = 60000
const FIXTURE = path.join(__dirname, 'fixtures', 'postgres-locks-child.js')
const why = postgresUnavailable()
const pgCluster = why ? null : require(PG_CLUSTER)
const skip = why ? { skip: `no PostgreSQL here: ${why}` } : {}
const HAS_TIMEOUT_SIGNAL = typeof AbortSignal === 'function' && typeof AbortSignal.timeout === 'function'

const now = () => Number(process.hrtime.bigint()) / 1e6

// Resolves once the async predicate is truthy (with its value), checking
// again after each answer; fails after timeoutMs.
async function eventually (predicate, what, timeoutMs = 20000) {
  const deadline = now() + timeoutMs
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

function deferred () {
  let resolve
  const promise = new Promise((r) => { resolve = r })
  return { promise, resolve }
}

// A child process of FIXTURE: its stdout lines, a line matching `re`, its exit.
function child (args) {
  const proc = spawn(process.execPath, [FIXTURE, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  const timer = setTimeout(() => proc.kill('SIGKILL'), HARD_TIMEOUT)
  const lines = []
  const waiters = []
  let buffer = ''
  proc.stdout.setEncoding('utf8').on('data', (d) => {
    buffer += d
    let i
    while ((i = buffer.indexOf('\n')) >= 0) {
      lines.push(buffer.slice(0, i))
      buffer = buffer.slice(i + 1)
      for (const w of waiters.slice()) w()
    }
  })
  proc.exited = new Promise((resolve) => proc.on('exit', (code, signal) => {
    clearTimeout(timer)
    for (const w of waiters.slice()) w()
    resolve({ code, signal })
  }))
  proc.lines = lines
  proc.line = (re) => new Promise((resolve, reject) => {
    const check = () => {
      const found = lines.find((l) => re.test(l))
      if (found !== undefined) {
        waiters.splice(waiters.indexOf(check), 1)
        resolve(found)
      } else if (proc.exitCode !== null || proc.signalCode !== null) {
        waiters.splice(waiters.indexOf(check), 1)
        reject(new Error(`the child exited (${proc.exitCode}, ${proc.signalCode}) before printing ${re}: ${lines.join(' | ')}`))
      }
    }
    waiters.push(check)
    check()
  })
  return proc
}

describe('PostgresLockManager: Web Locks over PostgreSQL', skip, () => {
  let cluster = null
  let admin = null
  const managers = []
  let serial = 0
  let PostgresLockManager

  // A manager of its own namespace per test (`ns`), closed at the end.
  const manager = (ns, extra = {}) => {
    const m = new PostgresLockManager({ connectionString: cluster.connectionString, namespace: ns, ...extra })
    managers.push(m)
    return m
  }
  const freshNamespace = () => `t${process.pid}-${++serial}`
  const sql = async (text, values) => (await admin.query(text, values)).rows

  // The advisory locks of a namespace on the server: { granted, waiting }.
  async function serverLocks (ns) {
    const rows = await sql(`SELECT l.granted FROM pg_locks l
      JOIN shared_futex_locks n ON n.key = ((l.classid::bigint << 32) | l.objid::bigint)
      WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND n.namespace = $1`, [ns])
    return { granted: rows.filter((r) => r.granted).length, waiting: rows.filter((r) => !r.granted).length }
  }
  // The backends of a client (its application_name).
  const backendsOf = async (m) => (await sql('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [m.clientId])).length
  async function pendingOf (m, name) {
    const { pending } = await m.query()
    return pending.filter((p) => p.name === name)
  }

  before(async () => {
    cluster = await pgCluster.startPostgres()
    PostgresLockManager = require('../web-locks-postgres').PostgresLockManager
    // A pool: its connections survive the server's restart (a test restarts it).
    const { Pool } = require('pg')
    admin = new Pool({ connectionString: cluster.connectionString, max: 2 })
    admin.on('error', () => {})
  })

  after(async () => {
    await Promise.all(managers.map((m) => m.close().catch(() => {})))
    if (admin !== null) await admin.end().catch(() => {})
    if (cluster !== null) await cluster.stop()
  })

  test("the spec's rules (web-locks.test.js) hold for a PostgresLockManager", { timeout: 180000 }, async () => {
    const saved = process.env.NODE_TEST_CONTEXT
    delete process.env.NODE_TEST_CONTEXT
    let r
    try {
      r = await runChild([path.join(__dirname, 'web-locks.test.js')], {
        timeoutMs: 150000,
        env: { WEB_LOCKS_UNDER_TEST: 'postgres', WEB_LOCKS_PG_URL: cluster.connectionString }
      })
    } finally {
      if (saved !== undefined) process.env.NODE_TEST_CONTEXT = saved
    }
    assert.ok(!r.timedOut, `hung\n${transcript(r)}`)
    assert.strictEqual(r.code, 0, transcript(r))
    assert.match(r.stdout, /(#|ℹ) fail 0/, transcript(r))
    assert.match(r.stdout, /(#|ℹ) pass [1-9]\d/, transcript(r))
  })

  test('bad options are TypeErrors and RangeErrors; a lock has a token and a signal; names as the other managers', { timeout: 30000 }, async () => {
    assert.throws(() => new PostgresLockManager(), TypeError)
    assert.throws(() => new PostgresLockManager('postgres://x'), TypeError)
    assert.throws(() => new PostgresLockManager({ namespace: 5 }), TypeError)
    assert.throws(() => new PostgresLockManager({ namespace: '' }), RangeError)
    assert.throws(() => new PostgresLockManager({ namespace: '\uD800' }), RangeError)
    assert.throws(() => new PostgresLockManager({ pool: {} }), TypeError)
    assert.throws(() => new PostgresLockManager({ pool: { connect () {} }, connectionString: 'x' }), TypeError)
    assert.throws(() => new PostgresLockManager({ clientId: 'é' }), RangeError)
    assert.throws(() => new PostgresLockManager({ table: 'x; drop table y' }), RangeError)
    assert.throws(() => new PostgresLockManager({ heartbeatMs: 10 }), RangeError)
    assert.throws(() => new PostgresLockManager({ heartbeatMs: '5' }), TypeError)
    assert.throws(() => new PostgresLockManager({ maxConnections: 1 }), RangeError)
    assert.throws(() => new PostgresLockManager({ reconnectMs: -1 }), RangeError)
    assert.throws(() => new PostgresLockManager({ reconnectMs: '1' }), TypeError)
    const m = manager(freshNamespace())
    assert.strictEqual(Object.prototype.toString.call(m), '[object LockManager]')
    await assert.rejects(m.request('x'), TypeError)
    await assert.rejects(m.request('x', { mode: 'read' }, () => {}), TypeError)
    await assert.rejects(m.request('-x', () => {}), (e) => e.name === 'NotSupportedError' && e.code === 9)
    await assert.rejects(m.request('x', { steal: true, ifAvailable: true }, () => {}), (e) => e.name === 'NotSupportedError')
    await assert.rejects(PostgresLockManager.prototype.query.call({}), TypeError)
    const { Lock } = require('../web-locks')
    const seen = await m.request('invoice:42', (lock) => ({
      isLock: lock instanceof Lock,
      name: lock.name,
      mode: lock.mode,
      token: lock.token,
      aborted: lock.signal.aborted
    }))
    assert.deepStrictEqual(seen, { isLock: true, name: 'invoice:42', mode: 'exclusive', token: 1, aborted: false })
    assert.strictEqual(await m.request('invoice:42', (lock) => lock.token), 2)
  })

  test('names: two namespaces never share a lock; a key recorded for another name is a collision, and the next key is used', { timeout: 30000 }, async () => {
    const { candidate } = require('../lib/web-locks-postgres').internal
    const a = manager(freshNamespace())
    const b = manager(freshNamespace())
    const hold = deferred()
    const held = a.request('same', () => hold.promise)
    await eventually(async () => (await a.query()).held.length === 1, 'the lock held')
    assert.strictEqual(await b.request('same', { ifAvailable: true }, (lock) => lock !== null), true, 'another namespace')
    hold.resolve()
    await held
    // The first key of a name, taken by another name: recorded by hand, as a collision would.
    const ns = freshNamespace()
    const c = manager(ns)
    await c.request('warm-up', () => {}) // the table exists
    const first = candidate(ns, 'collides', 0)
    await sql("INSERT INTO shared_futex_locks (key, namespace, name, label) VALUES ($1, $2, $3, 'other')", [first, ns, Buffer.from('other', 'utf16le')])
    const hold2 = deferred()
    const held2 = c.request('collides', () => hold2.promise)
    await eventually(async () => (await c.query()).held.some((h) => h.name === 'collides'), 'the colliding name held')
    const rows = await sql('SELECT key::text AS key FROM shared_futex_locks WHERE namespace = $1 AND name = $2', [ns, Buffer.from('collides', 'utf16le')])
    assert.deepStrictEqual(rows, [{ key: candidate(ns, 'collides', 1) }])
    // The other name's lock is a different lock.
    assert.strictEqual(await c.request('other', { ifAvailable: true }, (lock) => lock !== null), true)
    hold2.resolve()
    await held2
  })

  test('FIFO across clients: conflicting requests are granted in the order they reached the server; tokens increase', { timeout: 30000 }, async () => {
    const ns = freshNamespace()
    const clients = [0, 1, 2, 3].map(() => manager(ns))
    const order = []
    const hold = deferred()
    const first = clients[0].request('fifo', (lock) => { order.push([0, lock.token]); return hold.promise })
    await eventually(async () => (await clients[0].query()).held.length === 1, 'the first holder')
    const rest = []
    for (const i of [3, 1, 2]) {
      rest.push(clients[i].request('fifo', (lock) => { order.push([i, lock.token]) }))
      // The next asks once this one waits at the server.
      await eventually(async () => (await pendingOf(clients[0], 'fifo')).length === rest.length, `client ${i} queued`)
    }
    const { pending } = await clients[0].query()
    assert.deepStrictEqual(pending.map((p) => p.clientId), [3, 1, 2].map((i) => clients[i].clientId))
    hold.resolve()
    await Promise.all([first, ...rest])
    assert.deepStrictEqual(order.map(([i]) => i), [0, 3, 1, 2])
    const tokens = order.map(([, t]) => t)
    assert.deepStrictEqual(tokens, tokens.slice().sort((x, y) => x - y))
    assert.strictEqual(new Set(tokens).size, 4)
  })

  test('shared requests of three clients are held together; an exclusive one waits for all, then shared ones behind it wait for it', { timeout: 30000 }, async () => {
    const ns = freshNamespace()
    const [a, b, c, x, s] = [0, 1, 2, 3, 4].map(() => manager(ns))
    const hold = deferred()
    let inside = 0
    let most = 0
    const shared = [a, b, c].map((m) => m.request('report', { mode: 'shared' }, async () => {
      most = Math.max(most, ++inside)
      await hold.promise
      inside--
    }))
    await eventually(async () => (await a.query()).held.length === 3, 'three shared holders')
    const { held } = await a.query()
    assert.deepStrictEqual(held.map((h) => h.mode), ['shared', 'shared', 'shared'])
    assert.deepStrictEqual(held.map((h) => h.clientId).sort(), [a, b, c].map((m) => m.clientId).sort())
    assert.strictEqual(await x.request('report', { ifAvailable: true }, (lock) => lock), null)
    let exclusiveRan = false
    const exclusive = x.request('report', () => { exclusiveRan = true; return inside })
    await eventually(async () => (await pendingOf(a, 'report')).length === 1, 'the exclusive request queued')
    // A shared request behind a queued exclusive one waits (and ifAvailable gets null).
    assert.strictEqual(await s.request('report', { mode: 'shared', ifAvailable: true }, (lock) => lock), null)
    const late = s.request('report', { mode: 'shared' }, () => exclusiveRan)
    await eventually(async () => (await pendingOf(a, 'report')).length === 2, 'the shared request queued')
    hold.resolve()
    assert.strictEqual(await exclusive, 0)
    assert.strictEqual(await late, true)
    await Promise.all(shared)
    assert.strictEqual(most, 3)
  })

  test('exclusion is exact across 4 processes: no lost update, tokens increase in grant order', { timeout: HARD_TIMEOUT + 30000 }, async () => {
    const ns = freshNamespace()
    await sql('CREATE TABLE IF NOT EXISTS pg_test_counter (id int PRIMARY KEY, value bigint NOT NULL, last_token bigint NOT NULL)')
    await sql('DELETE FROM pg_test_counter')
    await sql('INSERT INTO pg_test_counter VALUES (1, 0, 0)')
    const n = 100
    const kids = [0, 1, 2, 3].map(() => child([cluster.connectionString, ns, 'count', String(n)]))
    const ends = await Promise.all(kids.map((k) => k.exited))
    assert.deepStrictEqual(ends, ends.map(() => ({ code: 0, signal: null })), kids.map((k) => k.lines.join('\n')).join('\n'))
    const [row] = await sql('SELECT value::int AS value, last_token::int AS last FROM pg_test_counter WHERE id = 1')
    assert.strictEqual(row.value, 4 * n)
    assert.strictEqual(row.last, 4 * n, 'one token per grant')
  })

  test('a holder killed with SIGKILL: the next waiter is granted, with a larger token; nothing is left on the server', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const ns = freshNamespace()
    const m = manager(ns)
    for (let round = 0; round < 3; round++) {
      const holder = child([cluster.connectionString, ns, 'hold', 'job'])
      const heldLine = await holder.line(/^held \d+$/)
      const childToken = Number(heldLine.split(' ')[1])
      const waiting = m.request('job', (lock) => lock.token)
      await eventually(async () => (await pendingOf(m, 'job')).length === 1, 'the waiter queued')
      // Killed while it holds, at a different moment of its heartbeat each round.
      holder.kill('SIGKILL')
      const token = await waiting
      assert.ok(token > childToken, `${token} > ${childToken}`)
      await holder.exited
      assert.deepStrictEqual(await m.query(), { held: [], pending: [] })
    }
  })

  test('a client taking and releasing a name in a loop, SIGKILLed at random points: the name is granted next, with a larger token', { timeout: HARD_TIMEOUT + 10000 }, async () => {
    const ns = freshNamespace()
    const m = manager(ns)
    for (let round = 0; round < 8; round++) {
      const churn = child([cluster.connectionString, ns, 'churn', 'job'])
      // Killed once it has printed a random number of grants: wherever its
      // loop then is (asking, granted, holding, releasing).
      const k = 1 + Math.floor(Math.random() * 30)
      await eventually(() => churn.lines.length >= k, `${k} grants`)
      churn.kill('SIGKILL')
      await churn.exited
      const printed = Math.max(...churn.lines.map((l) => Number(l.split(' ')[1])))
      const token = await m.request('job', (lock) => lock.token)
      assert.ok(token > printed, `round ${round}: ${token} > ${printed}`)
      assert.deepStrictEqual(await m.query(), { held: [], pending: [] })
    }
  })

  test("steal from another client ends the holder's session: its signal fires, its request rejects with an AbortError", { timeout: 30000 }, async () => {
    const ns = freshNamespace()
    const a = manager(ns)
    const b = manager(ns)
    let signal = null
    let holderToken = 0
    const stolen = a.request('job', (lock) => {
      signal = lock.signal
      holderToken = lock.token
      return new Promise(() => {})
    })
    const rejected = assert.rejects(stolen, (e) => e.name === 'AbortError')
    await eventually(async () => signal !== null && (await a.query()).held.length === 1, 'the holder')
    const fired = new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason)))
    const got = await b.request('job', { steal: true }, async (lock) => {
      const { held } = await b.query()
      return { token: lock.token, held: held.map((h) => h.clientId) }
    })
    assert.ok(got.token > holderToken)
    assert.deepStrictEqual(got.held, [b.clientId])
    await rejected
    assert.strictEqual((await fired).name, 'AbortError')
    assert.deepStrictEqual(await a.query(), { held: [], pending: [] })
  })

  test('a steal while others queue: the holder is ended, the stealer is granted next, the queue after it in its order; tokens increase; a second steal wins over the first', { timeout: 60000 }, async () => {
    const ns = freshNamespace()
    const holder = manager(ns)
    const waiters = [manager(ns), manager(ns), manager(ns)]
    const thief = manager(ns)
    const order = []
    let signal = null
    let holderToken = 0
    const stolen = holder.request('job', (lock) => {
      signal = lock.signal
      holderToken = lock.token
      return new Promise(() => {})
    })
    const rejected = assert.rejects(stolen, (e) => e.name === 'AbortError')
    await eventually(async () => signal !== null && (await serverLocks(ns)).granted === 1, 'the holder')
    const fired = new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason)))
    // Three clients queue at the server, one after the other, one of them shared.
    const queued = []
    for (const [i, w] of waiters.entries()) {
      queued.push(w.request('job', { mode: i === 1 ? 'shared' : 'exclusive' }, (lock) => { order.push([`waiter ${i}`, lock.token]) }))
      await eventually(async () => (await serverLocks(ns)).waiting === i + 1, `waiter ${i} at the server`)
    }
    const release = deferred()
    const stealer = thief.request('job', { steal: true }, async (lock) => {
      order.push(['stealer', lock.token])
      // While it holds: the holder's session is gone, the three still wait.
      assert.deepStrictEqual(await serverLocks(ns), { granted: 1, waiting: 3 })
      const { held, pending } = await thief.query()
      assert.deepStrictEqual(held.map((h) => h.clientId), [thief.clientId])
      assert.deepStrictEqual(pending.map((p) => p.clientId), waiters.map((w) => w.clientId), 'the queue keeps its order behind the stealer')
      await release.promise
      return lock.token
    })
    await rejected
    assert.strictEqual((await fired).name, 'AbortError')
    await eventually(() => order.length === 1, 'the stealer granted')
    assert.strictEqual(order[0][0], 'stealer', 'the stealer is granted before the requests that queued ahead of it')
    release.resolve()
    const stealerToken = await stealer
    await Promise.all(queued)
    assert.deepStrictEqual(order.map((o) => o[0]), ['stealer', 'waiter 0', 'waiter 1', 'waiter 2'])
    const tokens = [holderToken, ...order.map((o) => o[1])]
    assert.strictEqual(stealerToken, order[0][1])
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens increase: ${tokens}`)
    // Last caller wins: a steal of a name a steal holds.
    const first = thief.request('job', { steal: true }, () => new Promise(() => {}))
    const firstRejected = assert.rejects(first, (e) => e.name === 'AbortError')
    await eventually(async () => (await serverLocks(ns)).granted === 1, 'the first steal holds')
    assert.strictEqual(await holder.request('job', { steal: true }, (lock) => lock.token > tokens[tokens.length - 1]), true)
    await firstRejected
    assert.deepStrictEqual(await serverLocks(ns), { granted: 0, waiting: 0 })
  })

  test('an aborted and a timed-out request leave nothing on the server (pg_locks), and reject with the reason', { timeout: 30000 }, async () => {
    const ns = freshNamespace()
    const a = manager(ns)
    const b = manager(ns)
    const hold = deferred()
    const held = a.request('slow', () => hold.promise)
    await eventually(async () => (await a.query()).held.length === 1, 'the holder')
    assert.deepStrictEqual(await serverLocks(ns), { granted: 1, waiting: 0 })
    const c = new AbortController()
    const reason = new Error('stop')
    const aborted = b.request('slow', { signal: c.signal }, () => 'never')
    const behind = b.request('slow', () => 'behind')
    await eventually(async () => (await serverLocks(ns)).waiting === 2, 'two waiting at the server')
    c.abort(reason)
    await assert.rejects(aborted, (e) => e === reason)
    assert.deepStrictEqual(await serverLocks(ns), { granted: 1, waiting: 1 }, 'the aborted request has left the server')
    if (HAS_TIMEOUT_SIGNAL) {
      const timedOut = b.request('slow', { signal: AbortSignal.timeout(200) }, () => 'never')
      await assert.rejects(timedOut, (e) => e.name === 'TimeoutError')
      assert.deepStrictEqual(await serverLocks(ns), { granted: 1, waiting: 1 }, 'the timed-out request has left the server')
    }
    hold.resolve()
    await held
    assert.strictEqual(await behind, 'behind')
    assert.deepStrictEqual(await serverLocks(ns), { granted: 0, waiting: 0 })
  })

  test('connections are not leaked: requests that throw, are aborted, time out or are not available; close() ends every one', { timeout: 30000 }, async () => {
    const ns = freshNamespace()
    const m = manager(ns, { maxConnections: 4 })
    const other = manager(ns)
    const hold = deferred()
    const held = other.request('n', () => hold.promise)
    await eventually(async () => (await other.query()).held.length === 1, 'the holder')
    for (let i = 0; i < 20; i++) {
      await assert.rejects(m.request(`t${i}`, () => { throw new Error('boom') }), /boom/)
      assert.strictEqual(await m.request('n', { ifAvailable: true }, (lock) => lock), null)
      const c = new AbortController()
      const p = m.request('n', { signal: c.signal }, () => {})
      await eventually(async () => (await serverLocks(ns)).waiting === 1, 'the request waiting')
      c.abort()
      await assert.rejects(p, (e) => e.name === 'AbortError')
    }
    // With 4 connections at most, 60 requests above went through: none kept one.
    assert.ok(await backendsOf(m) <= 4)
    hold.resolve()
    await held
    assert.strictEqual(await m.request('n', (lock) => lock.name), 'n')
    await m.close()
    await other.close()
    await eventually(async () => (await backendsOf(m)) === 0 && (await backendsOf(other)) === 0, 'every connection closed')
    await assert.rejects(m.request('n', () => {}), { code: 'ERR_PG_LOCKS_CLOSED' })
  })

  test('the server restarted mid-hold: every holder\'s signal fires; a waiter asks again on a new connection and is granted once, after every old holder knew (with reconnectMs: 0 it rejects); no two holders with valid tokens', { timeout: 60000 }, async () => {
    const ns = freshNamespace()
    const [a, b, c, d] = [0, 1, 2, 3].map(() => manager(ns))
    const e = manager(ns, { reconnectMs: 0 })
    const events = []
    const holders = []
    const hold = (m, name, mode) => {
      let entry = null
      const p = m.request(name, { mode }, (lock) => {
        entry = { name, token: lock.token, granted: now(), lost: null }
        holders.push(entry)
        lock.signal.addEventListener('abort', () => {
          entry.lost = now()
          events.push(`${name} lost`)
        })
        return new Promise(() => {})
      })
      return p
    }
    const px = hold(a, 'x', 'exclusive')
    const py1 = hold(b, 'y', 'shared')
    const py2 = hold(c, 'y', 'shared')
    await eventually(async () => (await a.query()).held.length === 3, 'three holders')
    // A waiter that asks again after losing its connection, and one that does not.
    let calls = 0
    const waiter = d.request('x', (lock) => ({ token: lock.token, at: now(), calls: ++calls }))
    await eventually(async () => (await pendingOf(a, 'x')).length === 1, 'the waiter queued')
    const gives = e.request('x', () => 'never')
    await eventually(async () => (await pendingOf(a, 'x')).length === 2, 'the second waiter queued')
    const rejections = Promise.allSettled([px, py1, py2, gives])
    await cluster.restart()
    const settled = await rejections
    assert.deepStrictEqual(settled.slice(0, 3).map((s) => s.status === 'rejected' && s.reason.name), ['AbortError', 'AbortError', 'AbortError'])
    assert.strictEqual(settled[3].status, 'rejected')
    assert.strictEqual(settled[3].reason.code, 'ERR_PG_LOCKS_LOST', String(settled[3].reason))
    assert.strictEqual(holders.filter((h) => h.lost !== null).length, 3, events.join(', '))
    // The waiter, granted after the restart on a new connection: once, with a
    // larger token, after every old holder knew its lock was lost.
    const oldX = holders.find((h) => h.name === 'x')
    const got = await waiter
    assert.strictEqual(got.calls, 1)
    assert.ok(got.token > oldX.token, `${got.token} > ${oldX.token}`)
    for (const h of holders) assert.ok(h.lost < got.at)
    const again = await d.request('x', (lock) => ({ token: lock.token, at: now() }))
    assert.ok(again.token > got.token, `${again.token} > ${got.token}`)
    assert.strictEqual(calls, 1)
    assert.deepStrictEqual(await a.query(), { held: [], pending: [] })
  })

  test('clients creating the table at once all get on (a unique violation or the row type already there is tried again)', { timeout: 30000 }, async () => {
    const table = `fresh_${process.pid}_${++serial}`
    const ns = freshNamespace()
    const ms = [0, 1, 2, 3, 4, 5].map(() => manager(ns, { table }))
    const tokens = await Promise.all(ms.map((m) => m.request('first', (lock) => lock.token)))
    assert.deepStrictEqual(tokens.sort((a, b) => a - b), [1, 2, 3, 4, 5, 6])
    await sql(`DROP TABLE ${table}`)
  })

  test('a waiting request whose session is ended asks again on a new connection: granted once, when the holder releases', { timeout: 30000 }, async () => {
    const ns = freshNamespace()
    const a = manager(ns)
    const b = manager(ns)
    const hold = deferred()
    const held = a.request('job', (lock) => hold.promise.then(() => lock.token))
    await eventually(async () => (await serverLocks(ns)).granted === 1, 'the holder')
    let calls = 0
    const waiting = b.request('job', (lock) => { calls++; return lock.token })
    await eventually(async () => (await serverLocks(ns)).waiting === 1, 'the waiter at the server')
    const [{ pid }] = await sql(`SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
      WHERE l.locktype = 'advisory' AND NOT l.granted AND s.application_name = $1`, [b.clientId])
    await sql('SELECT pg_terminate_backend($1, 5000)', [pid])
    // Back at the server on another session, still waiting.
    await eventually(async () => {
      const rows = await sql(`SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND NOT l.granted AND s.application_name = $1`, [b.clientId])
      return rows.length === 1 && rows[0].pid !== pid
    }, 'the waiter on a new session')
    assert.strictEqual(calls, 0)
    hold.resolve()
    const first = await held
    assert.ok(await waiting > first)
    assert.strictEqual(calls, 1)
    assert.deepStrictEqual(await serverLocks(ns), { granted: 0, waiting: 0 })
  })

  test('a holding session that stops answering (heartbeat) or that the server ends (idle_session_timeout): the signal fires, the lock is granted on', { timeout: 30000 }, async () => {
    const ns = freshNamespace()
    const a = manager(ns, { heartbeatMs: 200 })
    const b = manager(ns)
    let signal = null
    const stalled = a.request('job', (lock) => { signal = lock.signal; return new Promise(() => {}) })
    const rejected = assert.rejects(stalled, (e) => e.name === 'AbortError' && /heartbeat/.test(e.message))
    await eventually(async () => signal !== null && (await a.query()).held.length === 1, 'the holder')
    const fired = new Promise((resolve) => signal.addEventListener('abort', resolve))
    // Its backend stopped: the connection stays up, nothing answers.
    const [{ pid }] = await sql(`SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`, [a.clientId])
    process.kill(pid, 'SIGSTOP')
    try {
      await fired
      await rejected
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    // The backend, running again, reads the end of its connection and exits.
    assert.strictEqual(await b.request('job', (lock) => lock.mode), 'exclusive')
    // A server that ends idle sessions ends a holder's that sends no heartbeat.
    const idle = manager(ns, { heartbeatMs: 0, options: '-c idle_session_timeout=300' })
    let idleSignal = null
    const ended = idle.request('job', (lock) => { idleSignal = lock.signal; return new Promise(() => {}) })
    await assert.rejects(ended, (e) => e.name === 'AbortError')
    assert.strictEqual(idleSignal.aborted, true)
    // (Told before its backend has finished exiting: the next request waits for that.)
    assert.strictEqual(await b.request('job', (lock) => lock.mode), 'exclusive')
  })

  test('with a pg.Pool of yours: its connections carry the clientId, and go back to it', { timeout: 30000 }, async () => {
    const { Pool } = require('pg')
    const pool = new Pool({ connectionString: cluster.connectionString, max: 5 })
    try {
      const ns = freshNamespace()
      const m = new PostgresLockManager({ pool, namespace: ns, clientId: 'my-service-1' })
      managers.push(m)
      const seen = await m.request('p', async () => (await m.query()).held)
      assert.deepStrictEqual(seen, [{ name: 'p', mode: 'exclusive', clientId: 'my-service-1' }])
      await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((i) => m.request(`p${i % 3}`, () => {})))
      await m.close()
      assert.strictEqual(pool.totalCount - pool.idleCount, 0, 'every connection given back')
      assert.strictEqual((await pool.query('SELECT 1 AS one')).rows[0].one, 1, 'the pool still works')
    } finally {
      await pool.end()
    }
  })

  test('the example of docs/web-locks-postgres.md runs as printed', { timeout: 30000 }, async () => {
    const fs = require('fs')
    const os = require('os')
    const doc = fs.readFileSync(path.join(__dirname, '..', 'docs', 'web-locks-postgres.md'), 'utf8')
    const code = /^```js\n([\s\S]*?)^```$/m.exec(doc)[1]
    const file = /^\/\/ ([\w.-]+\.js)/.exec(code)[1]
    const expected = [...code.matchAll(/\/\/.*?\bprints: (.*\S)\s*$/gm)].map((m) => m[1])
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-pgdoc-'))
    try {
      fs.mkdirSync(path.join(dir, 'node_modules'))
      fs.symlinkSync(path.join(__dirname, '..'), path.join(dir, 'node_modules', 'shared-futex'), 'junction')
      fs.writeFileSync(path.join(dir, file), code)
      const r = await runChild([file], { cwd: dir, timeoutMs: 20000, env: { DATABASE_URL: cluster.connectionString } })
      assert.strictEqual(r.code, 0, transcript(r))
      assert.strictEqual(r.stderr, '', transcript(r))
      assert.deepStrictEqual(r.stdout.split('\n').filter((l) => l !== ''), expected, transcript(r))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('failures have clear errors: an unreachable server, an unknown role, `pg` missing', { timeout: 30000 }, async () => {
    const port = await pgCluster.freePort()
    const down = manager('x', { connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`, connectionTimeoutMillis: 5000 })
    await assert.rejects(down.request('a', () => {}), (e) => e.code === 'ERR_PG_LOCKS_CONNECT' && /cannot connect/.test(e.message) && e.cause !== undefined)
    await assert.rejects(down.query(), { code: 'ERR_PG_LOCKS_CONNECT' })
    const stranger = manager('x', { connectionString: `postgres://nobody-here@127.0.0.1:${cluster.info.port}/postgres` })
    await assert.rejects(stranger.request('a', () => {}), (e) => e.code === 'ERR_PG_LOCKS_CONNECT' && /nobody-here/.test(e.message))
    // `pg` that cannot be found.
    const r = await runChild(['-e', `
      const Module = require('module')
      const resolve = Module._resolveFilename
      Module._resolveFilename = function (request, ...rest) {
        if (request === 'pg') { const e = new Error("Cannot find module 'pg'"); e.code = 'MODULE_NOT_FOUND'; throw e }
        return resolve.call(this, request, ...rest)
      }
      const { PostgresLockManager } = require(${JSON.stringify(path.join(__dirname, '..', 'web-locks-postgres'))})
      try { new PostgresLockManager({ namespace: 'x' }) } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }
    `], { timeoutMs: 20000 })
    assert.strictEqual(r.code, 0, transcript(r))
    const out = JSON.parse(r.stdout)
    assert.strictEqual(out.code, 'ERR_PG_MISSING')
    assert.match(out.message, /npm install pg/)
  })
})
