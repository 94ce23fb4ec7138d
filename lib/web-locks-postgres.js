'use strict'
// The Web Locks API over PostgreSQL: `PostgresLockManager`, one manager per
// client, every client of a namespace (any process on any machine that
// reaches the server) sharing its locks. docs/web-locks-postgres.md has the
// design; in short:
//
// - A lock is a session-level advisory lock (pg_advisory_lock /
//   pg_advisory_lock_shared) on a connection of its own, taken from a pool:
//   one connection per held lock and per request waiting at the server. The
//   server's lock manager queues conflicting requests and grants them; the
//   session's end (a dead process, a dropped connection, a server restart,
//   pg_terminate_backend) releases its lock.
// - A name maps to a 64-bit key: a hash of (namespace, name), recorded in a
//   table (key → namespace, name); a key already recorded for another name
//   is a collision, and the next hash is tried.
// - The grant and the fencing token are one statement: the lock, then the
//   name's `token` column incremented, in the same transaction.
// - A held lock watches its connection ('error', 'end', and a heartbeat):
//   when the session is lost, `lock.signal` fires and the request rejects
//   with an AbortError at once.
// - A client sends its requests for one name in request order, each once the
//   one before it is at the server (granted, or seen waiting in pg_locks).
const crypto = require('crypto')
const os = require('os')
const { setImmediate } = require('timers')
const { parse, reasonOf, domError, newLock, adopt } = require('./web-locks').internal

// --- errors ---------------------------------------------------------------------
//   code                    when
//   ERR_PG_MISSING          the `pg` package cannot be loaded (a peer dependency)
//   ERR_PG_LOCKS_CONNECT    no connection to the server (unreachable, credentials, …; `cause`)
//   ERR_PG_LOCKS_LOST       the connection of a request waiting at the server was lost, and no new
//                           one could be had within reconnectMs (`cause`)
//   ERR_PG_LOCKS_SERVER     the server refused a statement of the manager (`cause`)
//   ERR_PG_LOCKS_CLOSED     the manager was closed
//   ERR_PG_LOCKS_NAMES      no free key for a name after every probe (a full key space, in practice never)
//   ERR_PG_LOCKS_RUNTIME    a runtime without AbortController (Node before 15; `pg` 8 needs 16)
class PostgresLockError extends Error {
  constructor (code, message, cause) {
    super(message)
    Object.defineProperty(this, 'code', { value: code, writable: true, configurable: true, enumerable: true })
    if (cause !== undefined) Object.defineProperty(this, 'cause', { value: cause, writable: true, configurable: true })
  }
}
Object.defineProperty(PostgresLockError.prototype, 'name', { value: 'PostgresLockError', writable: true, configurable: true })

const PREFIX = 'PostgresLockManager'

function loadPg (given) {
  if (given !== undefined) return given
  try {
    return require('pg')
  } catch (e) {
    if (e && e.code === 'MODULE_NOT_FOUND' && /'pg'/.test(e.message)) {
      throw new PostgresLockError('ERR_PG_MISSING', `${PREFIX}: the \`pg\` package is needed (a peer dependency): npm install pg`, e)
    }
    throw e
  }
}

// --- options -----------------------------------------------------------------------
const MANAGER_KEYS = new Set(['namespace', 'pool', 'clientId', 'table', 'heartbeatMs', 'maxConnections', 'reconnectMs', 'pg', 'createTable'])
const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/
const wellFormed = (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(^|[^\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)
const typeName = (v) => v === null ? 'null' : typeof v

function toOptions (options) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${PREFIX}: options must be an object ({ connectionString, namespace } or { pool, namespace }), got ${typeName(options)}`)
  }
  const o = {
    namespace: 'default',
    pool: null,
    clientId: null,
    table: 'shared_futex_locks',
    heartbeatMs: 5000,
    maxConnections: 32,
    reconnectMs: 30000,
    createTable: true,
    pg: undefined,
    connection: {}
  }
  for (const k of Object.keys(options)) {
    if (!MANAGER_KEYS.has(k)) o.connection[k] = options[k]
  }
  if (options.namespace !== undefined) {
    if (typeof options.namespace !== 'string') throw new TypeError(`${PREFIX}: namespace must be a string, got ${typeName(options.namespace)}`)
    if (options.namespace.length === 0 || options.namespace.length > 200 || !wellFormed(options.namespace)) {
      throw new RangeError(`${PREFIX}: namespace must be 1 to 200 characters of well-formed Unicode`)
    }
    o.namespace = options.namespace
  }
  if (options.pool !== undefined && options.pool !== null) {
    if (typeof options.pool !== 'object' || typeof options.pool.connect !== 'function') {
      throw new TypeError(`${PREFIX}: pool must be a pg.Pool (an object with connect()), got ${typeName(options.pool)}`)
    }
    if (Object.keys(o.connection).length > 0) {
      throw new TypeError(`${PREFIX}: give either a pool or connection options (${Object.keys(o.connection).join(', ')}), not both`)
    }
    o.pool = options.pool
  }
  if (options.clientId !== undefined) {
    if (typeof options.clientId !== 'string') throw new TypeError(`${PREFIX}: clientId must be a string, got ${typeName(options.clientId)}`)
    // It is the connections' application_name: at most 63 bytes, printable ASCII.
    if (!/^[\x20-\x7e]{1,63}$/.test(options.clientId)) throw new RangeError(`${PREFIX}: clientId must be 1 to 63 printable ASCII characters`)
    o.clientId = options.clientId
  }
  if (options.table !== undefined) {
    if (typeof options.table !== 'string') throw new TypeError(`${PREFIX}: table must be a string, got ${typeName(options.table)}`)
    if (!TABLE.test(options.table)) throw new RangeError(`${PREFIX}: table must be an identifier or schema.identifier (letters, digits, _), got ${JSON.stringify(options.table)}`)
    o.table = options.table
  }
  for (const [key, min] of [['heartbeatMs', 0], ['maxConnections', 2], ['reconnectMs', 0]]) {
    const v = options[key]
    if (v === undefined) continue
    if (typeof v !== 'number') throw new TypeError(`${PREFIX}: ${key} must be a number, got ${typeName(v)}`)
    if (!Number.isInteger(v) || v < min || (key === 'heartbeatMs' && v !== 0 && v < 100)) {
      throw new RangeError(`${PREFIX}: ${key} must be an integer ${key === 'heartbeatMs' ? '≥ 100 (or 0: no heartbeat)' : `≥ ${min}`}, got ${v}`)
    }
    o[key] = v
  }
  if (options.createTable !== undefined) o.createTable = !!options.createTable
  if (options.pg !== undefined) {
    if (options.pg === null || typeof options.pg !== 'object' || typeof options.pg.Pool !== 'function') {
      throw new TypeError(`${PREFIX}: pg must be the \`pg\` module, got ${typeName(options.pg)}`)
    }
    o.pg = options.pg
  }
  return o
}

let serial = 0
function defaultClientId () {
  // The thread too: each worker has its own copy of this module (and of `serial`).
  const { threadId } = require('worker_threads')
  const tail = `-${process.pid}-${threadId > 0 ? `t${threadId}-` : ''}${++serial}`
  return `${os.hostname().replace(/[^\x20-\x7e]/g, '?').slice(0, 63 - tail.length)}${tail}`
}

// --- names → keys -------------------------------------------------------------------
// The candidate keys of a name: the first 8 bytes of SHA-256 over the
// namespace, the name (both as UTF-16 code units: every JavaScript string
// is its own name, lone surrogates included) and the probe number.
const PROBES = 16

function candidate (namespace, name, probe) {
  const h = crypto.createHash('sha256')
  h.update(Buffer.from(namespace, 'utf16le'))
  h.update(Buffer.from([0, 0, probe]))
  h.update(Buffer.from(name, 'utf16le'))
  return h.digest().readBigInt64BE(0).toString()
}

// The halves of a key as pg_locks shows them (classid, objid: oids).
function halves (key) {
  const k = BigInt.asUintN(64, BigInt(key))
  return [Number(k >> 32n), Number(k & 0xffffffffn)]
}

// --- the manager's state -------------------------------------------------------------
const STATE = Symbol('PostgresLockManager state')
const KEYS_KEPT = 10000

class PostgresLockManager {
  /**
   * new PostgresLockManager({ connectionString, namespace }) (any option of
   * pg.Pool besides these) or ({ pool, namespace }). Nothing is connected
   * until the first request or query().
   */
  constructor (options) {
    const o = toOptions(options)
    if (typeof AbortController !== 'function') {
      throw new PostgresLockError('ERR_PG_LOCKS_RUNTIME', `${PREFIX}: needs AbortController (Node 16 or later, as pg 8 does)`)
    }
    const pg = loadPg(o.pg)
    const clientId = o.clientId || defaultClientId()
    const m = {
      pg,
      namespace: o.namespace,
      clientId,
      table: o.table,
      heartbeatMs: o.heartbeatMs,
      reconnectMs: o.reconnectMs,
      createTable: o.createTable,
      pool: o.pool,
      ownPool: o.pool === null,
      control: null, // the pool of the manager's own statements (names, confirmations, cancels, query)
      keys: new Map(),
      ready: null,
      local: new Map(), // name → this client's requests not yet at the server, in request order
      live: new Set(), // requests not settled
      cancels: new Set(), // aborts under way (query() waits for them)
      appNames: new WeakMap(), // connection → its application_name, for a pool given by the user
      busy: new Set(), // requests on their way somewhere (see quiet())
      statements: new Set(), // the manager's own statements under way (close() waits for them)
      idle: [], // quiet()'s waiters
      seq: 0, // requests made so far (each has its number: r.seq)
      placedWaiters: [], // placed()'s waiters: { seq, name, resolve }
      closed: false
    }
    if (m.ownPool) {
      const c = o.connection
      // Keepalive on both ends: a holder whose machine vanishes is dropped
      // by the server within tcp_keepalives_idle + interval × count.
      const keepalive = '-c tcp_keepalives_idle=15 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3'
      const config = {
        ...c,
        application_name: clientId,
        keepAlive: c.keepAlive !== undefined ? c.keepAlive : true,
        options: c.options ? `${c.options} ${keepalive}` : keepalive,
        allowExitOnIdle: true
      }
      m.pool = new pg.Pool({ ...config, max: o.maxConnections })
      m.control = new pg.Pool({ ...config, max: 2 })
      for (const p of [m.pool, m.control]) p.on('error', () => {}) // an idle connection lost: the pool drops it
    } else {
      m.control = m.pool
    }
    this[STATE] = m
    adopt(this)
  }

  /** request(name, [options], callback), as navigator.locks.request, for every client of the namespace. */
  request (name, options, callback) {
    let parsed
    try {
      parsed = parse(this, arguments, 'request')
    } catch (e) {
      return Promise.reject(e)
    }
    const m = this[STATE]
    const { resource, opts, fn } = parsed
    if (opts.signal !== undefined && opts.signal.aborted) return Promise.reject(reasonOf(opts.signal))
    if (m.closed) return Promise.reject(closedError())
    return new Promise((resolve, reject) => start(m, resource, opts, fn, resolve, reject))
  }

  /**
   * The held locks and the pending requests of every client of the
   * namespace, from the server (pg_locks and pg_stat_activity), with this
   * client's requests not yet sent there.
   */
  query () {
    const m = this[STATE]
    if (m === undefined) return Promise.reject(new TypeError("Illegal invocation: 'query' called on an object that is not a LockManager"))
    if (m.closed) return Promise.reject(closedError())
    return query(m)
  }

  /** This manager's clientId: the application_name of its connections. */
  get clientId () {
    const m = this[STATE]
    if (m === undefined) throw new TypeError("Illegal invocation: 'clientId' read on an object that is not a PostgresLockManager")
    return m.clientId
  }

  /**
   * Ends the manager: pending requests are cancelled on the server and
   * reject with ERR_PG_LOCKS_CLOSED; held locks are released by ending
   * their sessions (their signals fire, their requests reject with an
   * AbortError); its own pool is ended. Resolves once that is done.
   */
  async close () {
    const m = this[STATE]
    if (m === undefined) throw new TypeError("Illegal invocation: 'close' called on an object that is not a PostgresLockManager")
    if (m.closed) return
    m.closed = true
    await Promise.all([...m.live].map((r) => r.close()))
    await Promise.all([...m.cancels])
    await Promise.all([...m.statements])
    if (m.ownPool) {
      await Promise.all([m.pool.end(), m.control.end()])
    }
  }
}
Object.defineProperty(PostgresLockManager.prototype, Symbol.toStringTag, { value: 'LockManager', configurable: true })
Object.defineProperty(PostgresLockManager.prototype.request, 'length', { value: 2 })

const closedError = () => new PostgresLockError('ERR_PG_LOCKS_CLOSED', `${PREFIX}: the manager is closed`)

// --- connections -------------------------------------------------------------------------
function connectError (e) {
  if (e instanceof PostgresLockError) return e
  return new PostgresLockError('ERR_PG_LOCKS_CONNECT', `${PREFIX}: cannot connect to PostgreSQL: ${e && e.message}`, e)
}

function serverError (e, what) {
  if (e instanceof PostgresLockError) return e
  return new PostgresLockError('ERR_PG_LOCKS_SERVER', `${PREFIX}: ${what}: ${e && e.message}`, e)
}

// A connection of the lock pool, its application_name this client's id.
async function connect (m) {
  let client
  try {
    client = await m.pool.connect()
  } catch (e) {
    throw connectError(e)
  }
  if (!m.ownPool && m.appNames.get(client) !== m.clientId) {
    try {
      await client.query("SELECT set_config('application_name', $1, false)", [m.clientId])
      m.appNames.set(client, m.clientId)
    } catch (e) {
      client.release(true)
      throw connectError(e)
    }
  }
  return client
}

// Ends a connection (and with it the session and every lock it holds): resolves
// once the server has closed it (a backend releases its locks before that).
function discard (client) {
  return new Promise((resolve) => {
    const socket = client.connection && client.connection.stream
    if (!socket || socket.destroyed) {
      try { client.release(true) } catch {}
      resolve()
      return
    }
    const timer = setTimeout(() => { socket.destroy(); resolve() }, 5000)
    socket.once('close', () => { clearTimeout(timer); resolve() })
    try {
      client.release(true)
    } catch {
      socket.destroy()
    }
  })
}

// The manager's own statements, on its control pool.
function control (m, text, values) {
  const p = controlStatement(m, text, values)
  const settled = p.then(() => m.statements.delete(settled), () => m.statements.delete(settled))
  m.statements.add(settled)
  return p
}

async function controlStatement (m, text, values) {
  let client
  try {
    client = await m.control.connect()
  } catch (e) {
    throw connectError(e)
  }
  try {
    const r = await client.query(text, values)
    client.release()
    return r
  } catch (e) {
    client.release(true)
    throw e
  }
}

// --- the table -------------------------------------------------------------------------------
function ready (m) {
  if (m.ready === null) {
    m.ready = setUp(m)
    m.ready.catch(() => { m.ready = null }) // tried again by the next request
  }
  return m.ready
}

async function setUp (m) {
  let r
  try {
    r = await control(m, "SELECT current_setting('server_version_num')::int AS v")
  } catch (e) {
    throw connectError(e)
  }
  if (r.rows[0].v < 140000) {
    throw new PostgresLockError('ERR_PG_LOCKS_SERVER', `${PREFIX}: PostgreSQL 14 or later is needed (pg_locks.waitstart, pg_terminate_backend with a timeout); the server is ${r.rows[0].v}`)
  }
  if (!m.createTable) return
  const sql = `CREATE TABLE IF NOT EXISTS ${m.table} (
    key bigint PRIMARY KEY,
    namespace text NOT NULL,
    name bytea NOT NULL,
    label text NOT NULL,
    token bigint NOT NULL DEFAULT 0
  )`
  for (let attempt = 0; ; attempt++) {
    try {
      await control(m, sql)
      return
    } catch (e) {
      // Two clients creating it at once: one of them gets a unique violation,
      // or finds the table's row type already there (duplicate_object).
      if (attempt < 3 && (e.code === '23505' || e.code === '42P07' || e.code === '42710')) continue
      throw serverError(e, `cannot create the table ${m.table}`)
    }
  }
}

// The key of `name`: the first candidate recorded for it, or the first free
// one (recorded now). A candidate recorded for another name is a collision.
async function keyOf (m, name) {
  const known = m.keys.get(name)
  if (known !== undefined) return known
  await ready(m)
  const bytes = Buffer.from(name, 'utf16le')
  // Readable only (text: no lone surrogates, no NUL); `name` is the name.
  const label = (wellFormed(name) ? name : name.replace(/[\uD800-\uDFFF]/g, '\uFFFD')).replace(/\0/g, '\uFFFD')
  for (let probe = 0, tries = 0; probe < PROBES && tries < PROBES * 4; tries++) {
    const key = candidate(m.namespace, name, probe)
    let r
    try {
      r = await control(m, `WITH ins AS (
          INSERT INTO ${m.table} (key, namespace, name, label) VALUES ($1::bigint, $2, $3, $4)
          ON CONFLICT (key) DO NOTHING RETURNING namespace, name)
        SELECT namespace, name FROM ins UNION ALL SELECT namespace, name FROM ${m.table} WHERE key = $1::bigint`,
      [key, m.namespace, bytes, label])
    } catch (e) {
      throw serverError(e, `cannot record the name ${JSON.stringify(label)}`)
    }
    if (r.rows.length === 0) continue // recorded by another client since this statement's snapshot: look again
    const row = r.rows[0]
    if (row.namespace === m.namespace && Buffer.compare(row.name, bytes) === 0) {
      if (m.keys.size >= KEYS_KEPT) m.keys.clear()
      m.keys.set(name, key)
      return key
    }
    probe++ // a collision: the next candidate
  }
  throw new PostgresLockError('ERR_PG_LOCKS_NAMES', `${PREFIX}: no free key for the name ${JSON.stringify(label)} after ${PROBES} candidates`)
}

// --- the statements of a request ---------------------------------------------------------
// The gate of a key: the advisory lock (int4, int4) on its two halves, a lock
// space of its own (objsubid 2 in pg_locks) that no name's key (bigint,
// objsubid 1) shares. A steal holds it exclusively while it clears the way;
// every other request passes it (shared, let go at once) on its way to the
// key, so none reaches the key's queue during a steal.
const gateOf = (key) => halves(key).map((h) => h | 0)

// `how`: 'gate' (a request: through the gate, then the key), 'requeue' (a
// request whose wait a steal cancelled: whatever its session may hold let go,
// then the key again, at the back of its queue), 'try' (ifAvailable), 'steal'
// (the stealer, holding the gate: the key).
function lockStatement (m, mode, how) {
  const tryOnly = how === 'try'
  const fn = `pg_${tryOnly ? 'try_' : ''}advisory_lock${mode === 'shared' ? '_shared' : ''}`
  // The lock, then the name's token, in one statement (one transaction): the
  // token of a grant is larger than that of every grant before it. An update
  // of the row by another grant while this one waited is seen (READ COMMITTED
  // takes the row's newest version). One row: ok (granted), token.
  let pre = ''
  let from = ''
  if (how === 'gate') {
    pre = 'g AS MATERIALIZED (SELECT pg_advisory_unlock_shared($2::int4, $3::int4) AS u FROM (SELECT pg_advisory_lock_shared($2::int4, $3::int4)) x),'
    from = 'g, '
  } else if (how === 'requeue') {
    pre = 'g AS MATERIALIZED (SELECT pg_advisory_unlock_all() AS u),'
    from = 'g, '
  }
  const lock = tryOnly ? `SELECT ${fn}($1::bigint) AS ok` : `SELECT true AS ok FROM ${from}(SELECT ${fn}($1::bigint)) x`
  return `WITH ${pre} l AS MATERIALIZED (${lock}),
    u AS (UPDATE ${m.table} SET token = token + 1 FROM l WHERE key = $1::bigint AND l.ok RETURNING token)
    SELECT l.ok, (SELECT token::text FROM u) AS token FROM l`
}

const IN_DB = 'database = (SELECT oid FROM pg_database WHERE datname = current_database())'
const WAITING = `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 AND classid = $2 AND objid = $3 AND objsubid = 1
  AND ${IN_DB}`

// For a steal (its backend $3): the sessions waiting for the key ahead of it, in
// queue order, and whether it is granted; null waitstart (a wait a moment old)
// counts as ahead until it is set.
const AHEAD = `WITH k AS (SELECT pid, granted, waitstart FROM pg_locks
    WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1 AND ${IN_DB}),
  me AS (SELECT granted, waitstart FROM k WHERE pid = $3)
  SELECT (SELECT granted FROM me) AS granted, (SELECT waitstart IS NULL FROM me) AS unset,
    ARRAY(SELECT k.pid FROM k, me WHERE NOT k.granted AND k.pid <> $3
      AND (k.waitstart IS NULL OR me.waitstart IS NULL OR k.waitstart < me.waitstart) ORDER BY k.waitstart NULLS LAST) AS ahead,
    ARRAY(SELECT k.pid FROM k, me WHERE NOT k.granted AND k.pid <> $3 AND k.waitstart > me.waitstart) AS behind`

// Ends the sessions that hold the key (its holders' requests then reject with
// an AbortError), each gone before this returns.
const STEAL = `SELECT count(pg_terminate_backend(pid, 10000)) AS n FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2 AND objsubid = 1 AND pid <> $3
  AND ${IN_DB}`

// --- a client's order -----------------------------------------------------------------------
// The spec's lock manager takes a client's requests, releases and queries in
// the order they are made. Here each goes its own way to the server, so a
// step waits for the requests made before it to be *placed*: at the server
// (granted, or seen waiting in pg_locks), queued in this client behind
// another request of the name, or settled. Grants are delivered (callbacks
// run) in request order, a release is sent, and query() reads the server,
// once the earlier requests are placed: a few round trips at most. A request
// waiting for a connection of an exhausted pool counts as placed (the
// connections may be those of the grants waiting for it), and no step waits
// more than PLACED_MAX_MS.
const PLACED_MAX_MS = 5000

// On its way to the server, not there yet, for a step about `name` (a
// release's, a grant's; none for query()). A steal is placed for a step about
// its own name once granted (it goes ahead of the queue and of the releases
// that follow it), for any other once it has its connection (its wait for
// the gate and the holders' end are no business of other names).
function unplaced (r, name) {
  if (r.state !== 'sending' || r.aborting !== null) return false
  if (r.handover) return true
  if (!r.sent || (r.connecting && exhausted(r.m.pool))) return false
  if (r.opts.steal) return name === r.name || r.client === null
  return !r.atServer
}

// Every connection of the pool taken, and requests waiting for one.
const exhausted = (p) => p.waitingCount > 0 && p.idleCount === 0 && p.options !== undefined && p.totalCount >= p.options.max

// Resolves once every request numbered below `seq` is placed for a step
// about `name` (or after PLACED_MAX_MS).
function placed (m, seq, name) {
  return new Promise((resolve) => {
    let timer = null
    const w = {
      seq,
      name,
      resolve: () => {
        if (timer !== null) clearTimeout(timer)
        resolve()
      }
    }
    m.placedWaiters.push(w)
    checkPlaced(m)
    if (m.placedWaiters.includes(w)) {
      timer = setTimeout(() => {
        const i = m.placedWaiters.indexOf(w)
        if (i >= 0) m.placedWaiters.splice(i, 1)
        resolve()
      }, PLACED_MAX_MS)
      timer.unref()
    }
  })
}

function checkPlaced (m) {
  if (m.placedWaiters.length === 0) return
  const first = new Map() // name → the number of the first request not placed for it
  for (const w of m.placedWaiters) {
    if (first.has(w.name)) continue
    let f = Infinity
    for (const r of m.live) if (r.seq < f && unplaced(r, w.name)) f = r.seq
    first.set(w.name, f)
  }
  // A request that holds up a waiter is seen once it waits at the server.
  let last = 0
  for (const w of m.placedWaiters) if (w.seq > last) last = w.seq
  for (const r of m.live) {
    if (r.seq < last && !r.opts.ifAvailable && !r.opts.steal && unplaced(r)) r.confirm()
  }
  const ready = m.placedWaiters.filter((w) => w.seq <= first.get(w.name)).sort((a, b) => a.seq - b.seq)
  if (ready.length === 0) return
  m.placedWaiters = m.placedWaiters.filter((w) => w.seq > first.get(w.name))
  for (const w of ready) w.resolve() // in request order
}

function start (m, name, opts, fn, resolve, reject) {
  const r = new Request(m, name, opts, fn, resolve, reject)
  r.seq = ++m.seq
  m.live.add(r)
  if (opts.signal !== undefined) {
    r.onAbort = () => r.abort()
    opts.signal.addEventListener('abort', r.onAbort)
  }
  if (opts.ifAvailable) {
    // Requests of this client for the name are queued ahead of it: not
    // available, answered once they are at the server (where other clients
    // see them).
    const queued = m.local.get(name)
    if (queued !== undefined && queued.length > 0) {
      r.busy(true)
      placed(m, r.seq, name).then(() => {
        if (r.state === 'queued') r.notAvailable()
        else r.busy(false)
      })
      return
    }
    r.send()
    return
  }
  // A steal too is sent once this client's earlier requests for the name are
  // at the server (it ends the sessions holding the name then).
  let queued = m.local.get(name)
  if (queued === undefined) {
    queued = []
    m.local.set(name, queued)
  }
  queued.push(r)
  r.inLocal = true
  if (queued.length === 1) r.send()
  else queued[0].confirm()
}

class Request {
  constructor (m, name, opts, fn, resolve, reject) {
    this.m = m
    this.name = name
    this.mode = opts.mode
    this.opts = opts
    this.fn = fn
    this.resolve = resolve
    this.reject = reject
    this.state = 'queued' // queued (in this client), sending (at the server), held, done
    this.inLocal = false
    this.sent = false // its lock statement is on its way or at the server
    this.atServer = false // granted, or seen waiting in pg_locks
    this.confirming = false
    this.wanted = false // a request of this client waits behind it
    this.client = null
    this.key = null
    this.pid = 0
    this.lockDone = null // the lock statement's promise
    this.stealDone = false // a steal's lock statement has ended
    this.connecting = false // waiting for a connection of the pool
    this.handover = false // the release of this client's request ahead of it may grant it (see release())
    this.aborting = null
    this.onAbort = null
    this.settled = false
    this.controller = null
    this.heartbeat = null
    this.onLost = null
  }

  // On its way (to the server, to its callback, to its release): see quiet().
  busy (on) {
    const m = this.m
    if (on) {
      m.busy.add(this)
      return
    }
    if (!m.busy.delete(this) || m.busy.size > 0) return
    const idle = m.idle
    m.idle = []
    for (const f of idle) f()
  }

  settle (ok, value) {
    this.busy(false)
    if (this.settled) return
    this.settled = true
    this.handover = false
    this.m.live.delete(this)
    checkPlaced(this.m)
    this.unlisten()
    if (ok) this.resolve(value)
    else this.reject(value)
  }

  unlisten () {
    if (this.onAbort !== null) {
      this.opts.signal.removeEventListener('abort', this.onAbort)
      this.onAbort = null
    }
  }

  // Out of this client's queue: the next request of the name may be sent.
  leaveLocal () {
    if (!this.inLocal) return
    this.inLocal = false
    const queued = this.m.local.get(this.name)
    const i = queued.indexOf(this)
    queued.splice(i, 1)
    if (queued.length === 0) this.m.local.delete(this.name)
    else if (i === 0) {
      queued[0].send()
      if (queued.length > 1) queued[0].confirm()
    }
  }

  // At the server (granted, or waiting there): the next may be sent.
  arrived () {
    if (this.atServer) return
    this.atServer = true
    this.busy(false)
    this.leaveLocal()
    checkPlaced(this.m)
  }

  // Someone waits behind this request: find out when it is at the server
  // (once its lock statement is sent).
  confirm () {
    this.wanted = true
    // A steal is at the server once granted: it goes ahead of the queue, and
    // a release this client makes after it waits for it (the release loses).
    if (this.opts.steal) return
    if (this.confirming || this.atServer || this.state === 'done' || this.lockDone === null) return
    this.confirming = true
    const [hi, lo] = halves(this.key)
    let delay = 1
    const look = async () => {
      if (this.atServer || this.state === 'done') return
      try {
        // Waiting there; granted there is not yet placed: its answer is on
        // its way, and its callback comes before those of later grants.
        const r = await control(this.m, `${WAITING} AND NOT granted`, [this.pid, hi, lo])
        if (r.rows.length > 0) return this.arrived()
      } catch {
        // The statement's own outcome settles it.
      }
      if (this.atServer || this.state === 'done') return
      delay = Math.min(delay * 2, 50)
      setTimeout(look, delay).unref()
    }
    look()
  }

  async send () {
    if (this.sent || this.state === 'done') return
    this.sent = true
    this.state = 'sending'
    this.busy(true)
    const m = this.m
    let lostAt = 0 // when the connection of this request was lost (it is asked again on a new one)
    let delay = 50
    try {
      this.key = await keyOf(m, this.name)
      if (this.state === 'done') return
      let result
      for (;;) {
        try {
          result = await this.attempt()
          break
        } catch (e) {
          if (this.aborting !== null || this.state === 'done') return
          const hadConnection = this.client !== null
          // Not granted, and its session gone with anything it had (a grant
          // the answer of which was lost is released with the session): asked
          // again, on a new connection, for up to reconnectMs.
          const lost = hadConnection ? !(e instanceof PostgresLockError) && lostConnection(e) : lostAt > 0 && e instanceof PostgresLockError && e.code === 'ERR_PG_LOCKS_CONNECT'
          if (!lost) throw e
          if (lostAt === 0) lostAt = Date.now()
          if (hadConnection) await this.drop()
          if (Date.now() - lostAt + delay > m.reconnectMs) {
            throw lostError(hadConnection ? e : e.cause || e)
          }
          await new Promise((resolve) => setTimeout(resolve, delay))
          delay = Math.min(delay * 2, 1000)
          if (this.aborting !== null || this.state === 'done') return
        }
      }
      if (result === undefined) return // aborted, or closed, meanwhile
      if (this.aborting !== null || this.state === 'done') return // the abort finishes it
      const { ok, token } = result.rows[0]
      if (!ok) {
        // ifAvailable, not available: the connection holds nothing.
        this.recycle()
        this.notAvailable()
        return
      }
      if (token === null) {
        throw new PostgresLockError('ERR_PG_LOCKS_SERVER', `${PREFIX}: the name ${JSON.stringify(this.name)} is no longer in ${m.table}`)
      }
      this.granted(Number(token))
    } catch (e) {
      if (this.aborting !== null || this.state === 'done') return
      this.arrived()
      this.state = 'done'
      const hadConnection = this.client !== null
      this.drop()
      if (e instanceof PostgresLockError) this.settle(false, e)
      else if (!hadConnection) this.settle(false, connectError(e))
      else if (lostConnection(e)) this.settle(false, lostError(e))
      else this.settle(false, serverError(e, `the request for ${JSON.stringify(this.name)} failed`))
    }
  }

  // One try on a connection of its own: the lock statement's result, or
  // undefined when the request was aborted or closed meanwhile.
  async attempt () {
    const m = this.m
    this.lockDone = null
    this.stealDone = false
    this.connecting = true
    let client
    try {
      client = await connect(m)
    } finally {
      this.connecting = false
    }
    if (this.state === 'done') {
      client.release()
      return undefined
    }
    this.client = client
    this.pid = client.processID
    // A connection lost while waiting: its statement fails (handled by send()).
    this.onLost = () => {}
    client.on('error', this.onLost)
    const gate = gateOf(this.key)
    let result
    if (this.opts.steal) {
      // The gate, exclusively: no other request reaches the key's queue
      // until this one is granted (another steal waits here for this one).
      await client.query('SELECT pg_advisory_lock($1::int4, $2::int4)', gate)
      if (this.state === 'done') {
        this.drop()
        return undefined
      }
      this.lockDone = client.query(lockStatement(m, this.mode, 'steal'), [this.key])
      if (this.wanted) this.confirm()
      // Meanwhile, on the manager's own connection: the waiters ahead of it
      // sent to the back of the queue, then the holders' sessions ended.
      const cleared = this.clearWay()
      try {
        result = await this.lockDone
      } finally {
        this.stealDone = true
      }
      await cleared
      if (this.aborting !== null || this.state === 'done') return undefined
      await client.query('SELECT pg_advisory_unlock($1::int4, $2::int4)', gate)
      return result
    }
    if (this.state === 'done') {
      this.drop()
      return undefined
    }
    const how = this.opts.ifAvailable ? 'try' : 'gate'
    this.lockDone = client.query(lockStatement(m, this.mode, how), how === 'try' ? [this.key] : [this.key, ...gate])
    if (this.wanted) this.confirm()
    for (;;) {
      try {
        return await this.lockDone
      } catch (e) {
        // A steal cancelled this wait to go ahead of it: back in the queue,
        // behind the stealer (the statement let go of anything it got).
        if (e && e.code === '57014' && /user request/.test(e.message) && this.aborting === null && this.state === 'sending') {
          this.lockDone = client.query(lockStatement(m, this.mode, 'requeue'), [this.key])
          continue
        }
        throw e
      }
    }
  }

  // A steal's work while its lock statement waits: every session waiting for
  // the key ahead of it is cancelled (its request sends its statement again,
  // behind this one), one after the other in queue order so that they keep
  // their order; then the sessions holding the key are ended. The server then
  // grants the key to this request first. The gate (held) keeps newcomers out.
  async clearWay () {
    const m = this.m
    const [hi, lo] = halves(this.key)
    const deadline = Date.now() + 30000
    const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
    const look = async () => (await control(m, AHEAD, [hi, lo, this.pid])).rows[0]
    try {
      while (!this.stealDone && this.state === 'sending' && Date.now() < deadline) {
        const now = await look()
        if (now.granted === true) return
        if (now.granted === null || now.unset) { // not in the queue yet, or its wait a moment old
          await pause(1)
          continue
        }
        if (now.ahead.length > 0) {
          const pid = now.ahead[0]
          // Until it has left its place and is back in line behind this one
          // (the next one is cancelled only then: they keep their order), or
          // gone for 1 s; the cancel sent again while it waits ahead, as a
          // cancel that arrives early is lost.
          let left = 0
          for (let i = 0; i < 2000 && !this.stealDone; i++) {
            if (left === 0) await control(m, 'SELECT pg_cancel_backend($1)', [pid])
            await pause(Math.min(1 + i, 10))
            const after = await look()
            if (after.granted === true || after.behind.includes(pid)) break
            if (after.ahead.includes(pid)) continue
            if (left === 0) left = Date.now()
            else if (Date.now() - left > 1000) break
          }
          continue
        }
        // Nobody ahead: the holders' sessions ended; the key is this request's next.
        await control(m, STEAL, [hi, lo, this.pid])
        await pause(1)
      }
    } catch {
      // The lock statement's own outcome settles the request.
    }
  }

  // Gives the connection back, holding nothing.
  recycle () {
    const client = this.client
    this.client = null
    if (client === null) return
    client.removeListener('error', this.onLost)
    client.release()
  }

  // Ends the connection, and with it anything it holds or waits for.
  drop () {
    const client = this.client
    this.client = null
    if (client === null) return Promise.resolve()
    const ended = discard(client)
    // An 'error' after the end is nobody's.
    return ended.then(() => client.removeListener('error', this.onLost))
  }

  notAvailable () {
    // In request order (see placed()): waits for the earlier ones, before this one counts as placed.
    placed(this.m, this.seq, this.name).then(() => setImmediate(() => runCallback(this, null)))
    this.state = 'done'
    this.unlisten()
    this.busy(true)
    checkPlaced(this.m)
  }

  granted (token) {
    // Its callback in request order (see placed()): waits for the earlier
    // requests, asked before this one counts as placed.
    let deliver = null // set below, before the promise's reaction can run
    placed(this.m, this.seq, this.name).then(() => deliver())
    this.handover = false
    this.arrived()
    checkPlaced(this.m)
    this.state = 'held'
    this.busy(true)
    this.unlisten()
    const controller = new AbortController()
    this.controller = controller
    const lock = newLock(this.name, this.mode)
    Object.defineProperty(lock, 'token', { value: token, enumerable: true })
    Object.defineProperty(lock, 'signal', { value: controller.signal, enumerable: true })
    // The session that holds it is lost: the lock is gone.
    const client = this.client
    client.removeListener('error', this.onLost)
    this.onLost = (e) => this.lost(e)
    client.on('error', this.onLost)
    client.once('end', this.onLost)
    if (this.m.heartbeatMs > 0) this.startHeartbeat(client)
    deliver = () => setImmediate(() => runCallback(this, lock))
  }

  startHeartbeat (client) {
    let inFlight = 0
    const ms = this.m.heartbeatMs
    this.heartbeat = setInterval(() => {
      if (this.state !== 'held') return
      if (inFlight !== 0) {
        if (Date.now() - inFlight >= ms) this.lost(new Error(`no answer to a heartbeat within ${ms} ms`))
        return
      }
      inFlight = Date.now()
      client.query('SELECT 1').then(() => { inFlight = 0 }, (e) => this.lost(e))
    }, ms)
    this.heartbeat.unref()
  }

  stopHeartbeat () {
    if (this.heartbeat !== null) {
      clearInterval(this.heartbeat)
      this.heartbeat = null
    }
  }

  // The holding session is lost (stolen, connection dropped, server gone).
  lost (cause) {
    if (this.state !== 'held') return
    this.state = 'done'
    this.stopHeartbeat()
    const e = domError(`The lock ${JSON.stringify(this.name)} was lost: its PostgreSQL session ended (stolen, connection lost or server restarted)${cause && cause.message ? `: ${cause.message}` : ''}`, 'AbortError')
    try { Object.defineProperty(e, 'cause', { value: cause, configurable: true, writable: true }) } catch {}
    this.drop()
    this.controller.abort(e)
    this.settle(false, e)
  }

  // The callback's result settled: release, then settle as it.
  async release (ok, value) {
    if (this.state !== 'held') {
      // Lost meanwhile: already rejected with an AbortError.
      return
    }
    this.busy(true)
    // After the requests this client made before it are at the server (see placed()).
    await placed(this.m, this.m.seq + 1, this.name)
    if (this.state !== 'held') return // lost meanwhile
    this.stopHeartbeat()
    const client = this.client
    client.removeListener('end', this.onLost)
    // This client's next request for the name, waiting at the server behind
    // this one: the unlock may grant it, and the grants asked after it then
    // wait for its callback (in the spec, releases and grants are one queue).
    let next = null
    for (const r of this.m.live) {
      if (r !== this && r.name === this.name && r.state === 'sending' && r.atServer && r.pid !== 0 && r.seq > this.seq && (next === null || r.seq < next.seq)) next = r
    }
    if (next !== null) next.handover = true
    let released = false
    try {
      await client.query('SELECT pg_advisory_unlock_all()')
      released = true
    } catch {}
    if (next !== null && next.handover) {
      // Granted by this unlock, or not (another client's request is first):
      // the server's lock table says so at once.
      let granted = false
      try {
        const [hi, lo] = halves(next.key)
        const r = await control(this.m, `${WAITING} AND granted`, [next.pid, hi, lo])
        granted = r.rows.length > 0
      } catch {}
      if (!granted && next.handover) {
        next.handover = false
        checkPlaced(this.m)
      }
    }
    if (this.state !== 'held') return // lost during the release
    this.state = 'done'
    if (released) {
      this.recycle()
      this.settle(ok, value)
    } else {
      // The session ended with the lock: it is released, but it may have been
      // lost before the callback ended.
      await this.drop()
      this.settle(false, domError(`The lock ${JSON.stringify(this.name)} was lost before its release: its PostgreSQL session ended`, 'AbortError'))
    }
  }

  // The signal fired while pending: out of this client's queue, or cancelled at
  // the server (its connection ended); rejects with the signal's reason once
  // nothing of it is left on the server.
  abort () {
    if (this.state !== 'queued' && this.state !== 'sending') return
    if (this.aborting !== null) return
    const reason = reasonOf(this.opts.signal)
    const wasSent = this.sent
    this.state = 'done'
    this.leaveLocal()
    checkPlaced(this.m)
    if (!wasSent) {
      this.settle(false, reason)
      return
    }
    this.busy(true)
    this.aborting = this.cancel().then(() => {
      this.m.cancels.delete(this.aborting)
      this.settle(false, reason)
    })
    this.m.cancels.add(this.aborting)
  }

  // Cancels the lock statement on the server, if sent, then ends the
  // connection (a stray cancel must not hit its next statement).
  async cancel () {
    if (this.lockDone !== null && this.client !== null) {
      let settled = false
      const done = this.lockDone.then(() => { settled = true }, () => { settled = true })
      // The cancel may reach the backend before it reads the statement:
      // sent again until the statement ends; after 2 s of that, the session
      // is ended instead (a waiting backend does not read its socket, so
      // closing the connection alone would leave it in the queue).
      const until = Date.now() + 2000
      for (let i = 0; !settled && Date.now() < until + 8000; i++) {
        const fn = Date.now() < until ? 'pg_cancel_backend($1)' : 'pg_terminate_backend($1, 5000)'
        try {
          await control(this.m, `SELECT ${fn}`, [this.pid])
        } catch {}
        await Promise.race([done, new Promise((resolve) => setTimeout(resolve, Math.min(5 * (i + 1), 50)))])
      }
    }
    // Granted just before the cancel, or never cancelled: ending the session releases it.
    await this.drop()
  }

  // The manager closes.
  async close () {
    if (this.state === 'held') {
      this.lost(new Error('the manager was closed'))
      return
    }
    if (this.state === 'done') {
      if (this.aborting !== null) await this.aborting
      return
    }
    const wasSent = this.sent
    this.state = 'done'
    this.leaveLocal()
    if (wasSent) await this.cancel()
    this.settle(false, closedError())
  }
}

// Whether a statement failed because its connection or session is gone.
function lostConnection (e) {
  if (!e || typeof e.severity !== 'string') return true // not the server's answer: the connection failed
  return /^(57P0[1-4]|08)/.test(e.code || '')
}

function lostError (cause) {
  return new PostgresLockError('ERR_PG_LOCKS_LOST', `${PREFIX}: the connection of a waiting request was lost: ${cause && cause.message}`, cause)
}

// Runs the callback as a task, releases when its result settles, then settles.
function runCallback (r, lock) {
  r.busy(false)
  let result
  try {
    result = Reflect.apply(r.fn, undefined, [lock])
  } catch (e) {
    if (lock === null) r.settle(false, e)
    else r.release(false, e)
    return
  }
  Promise.resolve(result).then(
    (v) => lock === null ? r.settle(true, v) : r.release(true, v),
    (e) => lock === null ? r.settle(false, e) : r.release(false, e))
}

// --- query() -------------------------------------------------------------------------------------
async function query (m) {
  await Promise.all([...m.cancels])
  // After the requests this client made before it are at the server (see placed()).
  await placed(m, m.seq + 1)
  await ready(m)
  let r
  try {
    r = await control(m, `SELECT l.pid, l.granted, l.mode, n.name, a.application_name
      FROM pg_locks l
      JOIN ${m.table} n ON n.key = ((l.classid::bigint << 32) | l.objid::bigint)
      LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND n.namespace = $1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY l.waitstart NULLS FIRST, a.state_change, l.pid`, [m.namespace])
  } catch (e) {
    throw serverError(e, 'query() failed')
  }
  const held = []
  const pending = []
  const seen = new Set()
  for (const row of r.rows) {
    seen.add(row.pid)
    const info = {
      name: row.name.toString('utf16le'),
      mode: row.mode === 'ShareLock' ? 'shared' : 'exclusive',
      clientId: row.application_name || `pid-${row.pid}`
    }
    ;(row.granted ? held : pending).push(info)
  }
  // This client's requests not at the server yet (or not seen there by this snapshot).
  for (const queued of m.local.values()) {
    for (const q of queued) {
      if (q.state !== 'done' && !seen.has(q.pid)) pending.push({ name: q.name, mode: q.mode, clientId: m.clientId })
    }
  }
  return { held, pending }
}

// Resolves once no request of the manager is on its way anywhere: each is
// held (its callback invoked), waiting at the server, queued in this client
// behind one waiting there, or settled. (For tests: the moment a manager
// whose grants are synchronous reaches after one turn of the event loop.)
function quiet (m) {
  return new Promise((resolve) => {
    const check = () => {
      if (m.busy.size === 0) return resolve()
      // A request waiting at the server is seen there (pg_locks).
      for (const r of m.busy) if (r.state === 'sending') r.confirm()
      m.idle.push(() => setImmediate(check))
    }
    setImmediate(check)
  })
}

module.exports = {
  PostgresLockManager,
  PostgresLockError,
  internal: { quiet: (manager) => quiet(manager[STATE]), candidate, halves }
}
