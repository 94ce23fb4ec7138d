'use strict'
// A throwaway PostgreSQL cluster for tests and benchmarks: initdb into a
// temporary directory, then `postgres` itself on 127.0.0.1 and a free port
// (fsync off; its unix socket in the temporary directory), removed at the end.
//
//   const { startPostgres } = require('./scripts/pg-cluster')
//   const pg = await startPostgres()   // throws where PostgreSQL is absent
//   pg.info              { host, port, user, database } for `pg`
//   pg.connectionString  postgres://postgres@127.0.0.1:<port>/postgres
//   await pg.restart()   fast shutdown, then the same cluster on the same port
//   await pg.stop()      fast shutdown; the directory is removed
//   pg.kill()            SIGKILL now (synchronous)
//
// The server runs as a child of this process under `setpriv --pdeathsig KILL`
// (so it dies with this process, even one killed with SIGKILL; `pg_ctl start`
// would daemonize it away from that). As root, initdb and postgres run as
// the `postgres` user (PostgreSQL refuses root), through setpriv (or runuser
// where setpriv is missing). The binaries are looked for in $PG_BIN, then in
// /usr/lib/postgresql/<newest>/bin (Debian's `postgresql` package), then
// beside a pg_ctl on PATH. What is left running or on disk is removed when
// this process exits.
const fs = require('fs')
const os = require('os')
const net = require('net')
const path = require('path')
const { spawn, execFile, execFileSync } = require('child_process')

const live = new Set() // clusters not stopped yet

function cleanupSync () {
  for (const c of live) c.kill()
}
process.once('exit', cleanupSync)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function freePort () {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

function which (cmd) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const f = path.join(dir, cmd)
    try {
      fs.accessSync(f, fs.constants.X_OK)
      return f
    } catch {}
  }
  return null
}

// Runs `cmd` as the server user: setpriv with a parent-death signal (the
// process dies with this one), and as root the given user.
function asServerUser (cmd, args, user) {
  const setpriv = which('setpriv')
  if (user) {
    if (setpriv) return [setpriv, [`--reuid=${user}`, `--regid=${user}`, '--init-groups', '--pdeathsig', 'KILL', '--', cmd, ...args]]
    const runuser = which('runuser')
    if (!runuser) throw new Error(`running as root, and neither setpriv nor runuser is here to run ${path.basename(cmd)} as ${user}`)
    return [runuser, ['-u', user, '--', cmd, ...args]]
  }
  return setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', cmd, ...args]] : [cmd, args]
}

// A server process: its output's tail (for error messages), stop() (signal,
// then SIGKILL after `graceMs`), kill() (SIGKILL now, synchronous).
function serverProcess (cmd, args, { stopSignal, graceMs = 10000, cwd }) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd })
  let tail = ''
  const keep = (d) => { tail = (tail + d).slice(-4000) }
  child.stdout.setEncoding('utf8').on('data', keep)
  child.stderr.setEncoding('utf8').on('data', keep)
  let exit = null
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => { exit = { code, signal }; resolve(exit) })
    child.once('error', (e) => { keep(`\n${e.message}`); exit = exit || { code: -1, signal: null }; resolve(exit) })
  })
  return {
    child,
    exited,
    get exit () { return exit },
    tail: () => tail.trim(),
    async stop () {
      if (exit === null) {
        child.kill(stopSignal)
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
        await exited
        clearTimeout(timer)
      }
    },
    kill () { if (exit === null) child.kill('SIGKILL') }
  }
}

/** The directory of initdb and postgres; throws, naming where it looked, when there is none. */
function postgresBin () {
  const dirs = []
  if (process.env.PG_BIN) dirs.push(process.env.PG_BIN)
  try {
    const versions = fs.readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a)
    for (const v of versions) dirs.push(`/usr/lib/postgresql/${v}/bin`)
  } catch {}
  const onPath = which('pg_ctl')
  if (onPath) dirs.push(path.dirname(fs.realpathSync(onPath)))
  dirs.push('/usr/local/bin', '/usr/local/pgsql/bin')
  for (const d of dirs) {
    if (fs.existsSync(path.join(d, 'initdb')) && fs.existsSync(path.join(d, 'postgres'))) return d
  }
  throw new Error(`no PostgreSQL binaries (initdb and postgres) in ${dirs.join(', ')} (Debian: apt-get install -y postgresql)`)
}

function run (cmd, args, opts) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 120000, killSignal: 'SIGKILL', maxBuffer: 16 << 20, ...opts }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${path.basename(args.find((a) => a.startsWith('/')) || cmd)}: ${err.killed ? 'killed after its time limit' : `exit code ${err.code}`}\n${(stderr || stdout || '').trim().slice(-2000)}`))
      else resolve(stdout)
    })
  })
}

async function pgReady (info) {
  const { Client } = require('pg')
  const c = new Client({ ...info, connectionTimeoutMillis: 2000 })
  c.on('error', () => {})
  try {
    await c.connect()
    const r = await c.query('SHOW server_version')
    return r.rows[0].server_version
  } catch {
    return null
  } finally {
    c.end().catch(() => {})
  }
}

function removeDir (d) {
  try { fs.rmSync(d, { recursive: true, force: true }) } catch {}
}

/**
 * Starts a throwaway cluster. Options: `settings` (extra `-c` settings,
 * { name: value }), `maxConnections` (default 100).
 */
async function startPostgres (options = {}) {
  require('pg') // fail early if the client is missing
  const bin = postgresBin()
  const root = typeof process.getuid === 'function' && process.getuid() === 0
  const user = root ? 'postgres' : null
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `shared-futex-pg-${process.pid}-`))
  let server = null
  let stopped = false
  const cluster = {
    dir,
    info: null,
    connectionString: null,
    version: null,
    get child () { return server && server.child },
    get exit () { return server ? server.exit : { code: null, signal: null } },
    async restart () {
      if (server !== null) await server.stop()
      await launch(cluster.info.port)
    },
    async stop () {
      if (stopped) return
      stopped = true
      if (server !== null) await server.stop()
      live.delete(cluster)
      removeDir(dir)
    },
    kill () {
      if (server !== null) server.kill()
      if (!stopped) {
        stopped = true
        live.delete(cluster)
        // The server may take a moment to die; try now, and once it has.
        removeDir(dir)
        if (server !== null && server.exit === null) server.exited.then(() => removeDir(dir))
      }
    }
  }
  live.add(cluster)
  const settings = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: dir,
    fsync: 'off',
    synchronous_commit: 'off',
    full_page_writes: 'off',
    dynamic_shared_memory_type: 'mmap', // its segments in the data directory, not /dev/shm
    max_connections: String(options.maxConnections || 100),
    shared_buffers: '16MB',
    logging_collector: 'off',
    ...(options.settings || {})
  }
  const data = path.join(dir, 'data')

  async function launch (port) {
    const args = ['-D', data, '-p', String(port)]
    for (const [k, v] of Object.entries(settings)) args.push('-c', `${k}=${v}`)
    const [cmd, cargs] = asServerUser(path.join(bin, 'postgres'), args, user)
    // SIGINT: PostgreSQL's fast shutdown.
    server = serverProcess(cmd, cargs, { stopSignal: 'SIGINT', cwd: dir })
    const info = { host: '127.0.0.1', port, user: 'postgres', database: 'postgres' }
    const deadline = Date.now() + 30000
    let version = null
    while (version === null && server.exit === null && Date.now() < deadline) {
      version = await pgReady(info)
      if (version === null) await sleep(100)
    }
    if (version === null) {
      const why = `postgres did not start on port ${port}: ${server.tail() || 'no output'}`
      await server.stop()
      throw new Error(why)
    }
    cluster.info = info
    cluster.connectionString = `postgres://postgres@127.0.0.1:${port}/postgres`
    cluster.version = `PostgreSQL ${version}`
  }

  try {
    if (root) {
      let uid, gid
      try {
        uid = Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }))
        gid = Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }))
      } catch {
        throw new Error('running as root and there is no `postgres` user to run PostgreSQL as (PostgreSQL refuses root)')
      }
      fs.chownSync(dir, uid, gid)
    }
    const [icmd, iargs] = asServerUser(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync',
      '--no-instructions', '--locale=C', '-E', 'UTF8'], user)
    await run(icmd, iargs, { cwd: dir })
    let lastError = null
    for (let attempt = 0; attempt < 3 && cluster.info === null; attempt++) {
      try {
        await launch(await freePort())
      } catch (e) {
        lastError = e
      }
    }
    if (cluster.info === null) throw lastError
    return cluster
  } catch (e) {
    await cluster.stop()
    throw e
  }
}

/** Why PostgreSQL cannot be started here (no binaries, no `pg`), or null. */
function unavailable () {
  try {
    require.resolve('pg')
  } catch {
    return 'the `pg` package is not installed'
  }
  try {
    postgresBin()
  } catch (e) {
    return e.message
  }
  return null
}

module.exports = { startPostgres, postgresBin, unavailable, freePort, which, asServerUser, serverProcess }
