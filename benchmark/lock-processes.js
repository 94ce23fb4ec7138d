'use strict'
// One lock for several processes: shared-futex's AsyncLock over a
// SharedRegion against what Node applications use for that today, side by
// side in one run, N processes (default 4) contending for one lock.
//
//   node benchmark/lock-processes.js [--seconds 2] [--warmup 0.5] [--rounds 3]
//        [--processes 4] [--loads idle,busy] [--only lib,lib] [--json file]
//   npm run bench:processes
//
// Libraries (`--only` takes these names):
//   shared-futex         AsyncLock over a region: in every process's main
//                        thread, lock() (blocking); critical section; unlock()
//   shared-futex-async   the same lock, `await lock.runExclusive(fn)` in a loop
//   proper-lockfile      lock(file) / release() (a directory made with mkdir),
//                        retrying every 1 ms for ever
//   redis-semaphore      its Mutex (SET NX PX, then a Lua release) over
//                        ioredis, against a redis-server this script starts;
//                        its default retry interval (10 ms)
//   redis-semaphore-1ms  the same with retryInterval: 1
//   pg-advisory          `SELECT pg_advisory_lock(k)` / `pg_advisory_unlock(k)`
//                        with `pg`, one connection per process, against a
//                        PostgreSQL cluster this script makes (initdb)
//
// Every process runs benchmark/children/lock-contender.js: the critical
// section is the same for all (a non-atomic `+ 1` of a counter in a
// SharedRegion used as plain shared memory, and a look that nobody else is
// inside); only the lock differs. After the run the counter must equal the
// number of acquisitions of all processes: a lost increment means two
// processes held the lock at once (checked for every library).
//
// Figures, over `--seconds` after `--warmup` (all processes start together):
//   acquisitions/s   of all processes together
//   p99 wait         from asking for the lock to holding it, all processes'
//                    acquisitions pooled (lib/histogram.js: within 3 %)
//   Jain's index     of the processes' acquisition counts (1: equal shares,
//                    1/N: one process got them all)
// Each library is measured `--rounds` times, rounds interleaved; the table
// shows medians (and the range of acquisitions/s). Everything is done on the
// idle machine and again with one busy process per core spinning for the
// whole measurement (lib/spinners.js, as scenarios 12 and 13 of run.js).
//
// Servers: redis-server (Debian's `redis-server` package) on 127.0.0.1, a
// free port, a temporary directory, no persistence; PostgreSQL (scripts/pg-cluster.js): initdb into a
// temporary directory, then `postgres` itself on 127.0.0.1 and a free port
// (fsync off; unix socket in the temporary directory). Both run as children
// of this process under `setpriv --pdeathsig KILL` (so they die with it, even
// if it is SIGKILLed; `pg_ctl start` would daemonize the server away from
// that). As root, initdb and postgres run as the `postgres` user (PostgreSQL
// refuses root), through setpriv (or runuser where setpriv is missing). A
// server that cannot start makes its libraries fail, not the run.
//
// Robustness: every child has a hard limit (it exits by itself, and is
// SIGKILLed 5 s later); every wait of this script is bounded; servers,
// children and spinners are stopped, temporary directories removed and
// regions unlinked at the end, on an error, on SIGINT/SIGTERM and past the
// global --timeout (default 20 min). A library that fails is shown as failed
// in the table with its reason.

const fs = require('fs')
const os = require('os')
const net = require('net')
const path = require('path')
const { options } = require('./lib/args')
const { fork, execFileSync } = require('child_process')
const { ROOT } = require('./lib/impl')
const { histogram, add, quantile } = require('./lib/histogram')
const { summary } = require('./lib/stats')
const { figure, ratio } = require('./lib/format')
const { machine, describe, cpuClock } = require('./lib/machine')
const { startSpinners, stopSpinners } = require('./lib/spinners')
const { addChildrenCpu } = require('./lib/child')
const pgCluster = require('../scripts/pg-cluster')

const CHILD = path.join(__dirname, 'children', 'lock-contender.js')
const REGION_BYTES = 64

function versionOf (pkg) {
  try {
    return require(`${pkg}/package.json`).version
  } catch {
    return '(not installed)'
  }
}

const LIBS = {
  'shared-futex': { label: 'shared-futex AsyncLock, lock()/unlock() (blocking)', region: true },
  'shared-futex-async': { label: 'shared-futex AsyncLock, await runExclusive(fn)', region: true },
  'proper-lockfile': { label: `proper-lockfile ${versionOf('proper-lockfile')}, retry every 1 ms` },
  'redis-semaphore': { label: `redis-semaphore ${versionOf('redis-semaphore')} Mutex, default retry (10 ms)`, server: 'redis', options: {} },
  'redis-semaphore-1ms': { label: `redis-semaphore ${versionOf('redis-semaphore')} Mutex, retryInterval 1 ms`, server: 'redis', options: { retryInterval: 1 } },
  'pg-advisory': { label: `pg ${versionOf('pg')}, pg_advisory_lock / unlock`, server: 'pg' }
}

function parse (argv) {
  return options(argv, {
    seconds: { min: 0.001, default: 2 },
    warmup: { min: 0, default: 0.5 },
    rounds: { int: true, min: 1, default: 3 },
    processes: { int: true, min: 2, default: 4 },
    loads: { list: ['idle', 'busy'], default: ['idle', 'busy'] },
    only: { list: Object.keys(LIBS), default: Object.keys(LIBS) },
    json: { string: true, default: null },
    timeout: { min: 1, default: 1200 }
  })
}

// --- cleanup -------------------------------------------------------------------
// Everything started or made is registered here; `cleanup()` undoes it all
// (also from a signal handler or the watchdog), and `cleanupSync()` does what
// can be done synchronously when the process exits anyway.
const live = {
  children: new Set(), // ChildProcess
  regions: new Set(), // names
  dirs: new Set(), // temporary directories
  servers: new Set() // { stop(), kill() }
}

function killAllSync () {
  for (const c of live.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
  for (const s of live.servers) s.kill()
}

function cleanupSync () {
  killAllSync()
  unlinkRegions()
  for (const d of live.dirs) {
    try { fs.rmSync(d, { recursive: true, force: true }) } catch {}
  }
  live.dirs.clear()
}

function unlinkRegions () {
  if (live.regions.size === 0) return
  try {
    const { SharedRegion } = require(ROOT)
    for (const name of live.regions) {
      try { SharedRegion.unlink(name) } catch {}
    }
  } catch {}
  live.regions.clear()
}

let cleaning = null
function cleanup () {
  if (cleaning) return cleaning
  cleaning = (async () => {
    for (const c of live.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    await Promise.all([...live.servers].map((s) => s.stop().catch(() => s.kill())))
    live.servers.clear()
    cleanupSync()
  })()
  return cleaning
}

function onSignal (signal) {
  process.stderr.write(`\n${signal}: stopping everything\n`)
  cleanup().finally(() => process.exit(130))
}

// --- small helpers -------------------------------------------------------------
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function withTimeout (promise, ms, what) {
  let timer
  return Promise.race([
    promise,
    new Promise((resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms) })
  ]).finally(() => clearTimeout(timer))
}

// Temporary directories are named shared-futex-<what>-<pid>-XXXXXX and
// regions lock-processes-<pid>-<n>, so that what a run killed with SIGKILL
// left behind is recognised (its pid is gone) and removed by the next run.
const STALE_DIR = /^shared-futex-(?:redis|pg|lockfile)-(\d+)-[A-Za-z0-9]{6}$/
const STALE_REGION = /^shared-futex\.lock-processes-(\d+)-\d+$/

function alive (pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

function sweepStale () {
  const removed = []
  try {
    for (const f of fs.readdirSync(os.tmpdir())) {
      const m = STALE_DIR.exec(f)
      if (m && Number(m[1]) !== process.pid && !alive(Number(m[1]))) {
        try {
          fs.rmSync(path.join(os.tmpdir(), f), { recursive: true, force: true })
          removed.push(f)
        } catch {}
      }
    }
  } catch {}
  try {
    const { SharedRegion } = require(ROOT)
    for (const f of fs.readdirSync('/dev/shm')) {
      const m = STALE_REGION.exec(f)
      if (m && Number(m[1]) !== process.pid && !alive(Number(m[1]))) {
        try {
          SharedRegion.unlink(f.slice('shared-futex.'.length))
          removed.push(f)
        } catch {}
      }
    }
  } catch {}
  return removed
}

function tempDir (what) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `shared-futex-${what}-${process.pid}-`))
  live.dirs.add(d)
  return d
}

function removeDir (d) {
  try { fs.rmSync(d, { recursive: true, force: true }) } catch {}
  live.dirs.delete(d)
}

// A server process (scripts/pg-cluster.js), registered for cleanup() until
// it is stopped.
function serverProcess (cmd, args, opts) {
  const s = pgCluster.serverProcess(cmd, args, opts)
  const stop = s.stop
  s.stop = async () => {
    await stop()
    live.servers.delete(s)
  }
  live.servers.add(s)
  return s
}

// --- Redis -------------------------------------------------------------------------
function redisPing (port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    let got = ''
    const done = (ok) => { s.destroy(); resolve(ok) }
    s.setTimeout(1000, () => done(false))
    s.on('error', () => done(false))
    s.on('connect', () => s.write('PING\r\n'))
    s.on('data', (d) => {
      got += d
      if (got.includes('\r\n')) done(got.startsWith('+PONG'))
    })
  })
}

async function startRedis () {
  const bin = pgCluster.which('redis-server')
  if (!bin) throw new Error('no redis-server on PATH (Debian: apt-get install -y redis-server)')
  const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim().split(/\s+/).find((w) => w.startsWith('v='))
  let lastError = null
  for (let attempt = 0; attempt < 3; attempt++) {
    const dir = tempDir('redis')
    const port = await pgCluster.freePort()
    const [cmd, args] = pgCluster.asServerUser(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', dir, '--daemonize', 'no', '--logfile', '', '--protected-mode', 'yes'], null)
    const server = serverProcess(cmd, args, { stopSignal: 'SIGTERM', cwd: dir })
    const deadline = Date.now() + 20000
    let up = false
    while (!up && server.exit === null && Date.now() < deadline) {
      up = await redisPing(port)
      if (!up) await sleep(50)
    }
    if (up) {
      return {
        info: { host: '127.0.0.1', port },
        version: `redis-server ${version ? version.slice(2) : '?'}`,
        async stop () { await server.stop(); removeDir(dir) }
      }
    }
    lastError = `redis-server did not start on port ${port}: ${server.tail() || 'no output'}`
    await server.stop()
    removeDir(dir)
  }
  throw new Error(lastError)
}

// --- PostgreSQL ----------------------------------------------------------------------
// A throwaway cluster (scripts/pg-cluster.js), stopped by cleanup() with the
// other servers.
async function startPostgres () {
  const cluster = await pgCluster.startPostgres({ maxConnections: 30 })
  const s = {
    get child () { return cluster.child },
    get exit () { return cluster.exit },
    stop: () => cluster.stop(),
    kill: () => cluster.kill()
  }
  live.servers.add(s)
  return {
    info: cluster.info,
    version: cluster.version,
    async stop () { await cluster.stop(); live.servers.delete(s) }
  }
}

// --- how busy other processes kept the machine ------------------------------------
// CPU time (ms) of process `pid` (with its reaped children) and of its live
// children, from /proc: the servers' (postgres forks a backend per
// connection), which are part of the benchmark, not of "other processes".
function treeCpuMs (pid) {
  const fields = (p) => {
    const t = fs.readFileSync(`/proc/${p}/stat`, 'utf8')
    return t.slice(t.lastIndexOf(')') + 2).split(' ')
  }
  let ms = 0
  try {
    const f = fields(pid)
    ms += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10
    for (const p of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue
      try {
        const g = fields(p)
        if (Number(g[1]) === pid) ms += (Number(g[11]) + Number(g[12])) * 10
      } catch {}
    }
  } catch {}
  return ms
}

function serversCpuMs () {
  let ms = 0
  for (const s of live.servers) if (s.exit === null) ms += treeCpuMs(s.child.pid)
  return ms
}

// A reading for othersBetween: the machine's CPU time, ours (this process,
// the contenders, the spinners: lib/machine.js) and the servers'.
function reading () {
  return { ...cpuClock(), servers: serversCpuMs() / 1000 }
}

// Share (0..1) of all CPUs used by processes that are not this benchmark's.
function othersBetween (a, b) {
  if (a.busy == null || b.busy == null) return null
  const wall = (b.at - a.at) / 1000
  const others = (b.busy - a.busy) - (b.own - a.own) - (b.servers - a.servers)
  return Math.max(0, others / (wall * os.cpus().length))
}

// --- one measurement -------------------------------------------------------------------
let serial = 0

// Starts one contender; resolves its { ready, result } promises.
function startContender (spec, limitMs) {
  const child = fork(CHILD, [JSON.stringify(spec)], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
  live.children.add(child)
  let err = ''
  child.stderr.setEncoding('utf8').on('data', (d) => { err = (err + d).slice(-4000) })
  let exit = null
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    exit = { code, signal }
    live.children.delete(child)
    resolve(exit)
  }))
  const killer = setTimeout(() => child.kill('SIGKILL'), limitMs + 5000)
  exited.then(() => clearTimeout(killer))
  let errorMessage = null
  const why = () => errorMessage || `process ${spec.id} ${exit.signal ? `was killed (${exit.signal})` : `exited with code ${exit.code}`}${err.trim() ? `: ${err.trim()}` : ''}`
  const waitFor = (key) => new Promise((resolve, reject) => {
    child.on('message', (m) => {
      if (m && m.error) errorMessage = m.error
      if (m && m[key]) resolve(m[key])
    })
    child.once('error', reject)
    exited.then(() => setTimeout(() => reject(new Error(why())), 50))
  })
  const ready = waitFor('ready')
  const result = waitFor('result')
  ready.catch(() => {})
  result.catch(() => {})
  return {
    child,
    ready,
    result,
    exited,
    go (go) { if (child.connected) child.send({ go }) },
    async kill () {
      if (exit === null) {
        child.kill('SIGKILL')
        await exited
      }
    }
  }
}

function jain (xs) {
  const sum = xs.reduce((a, b) => a + b, 0)
  const sq = xs.reduce((a, b) => a + b * b, 0)
  return sq === 0 ? NaN : (sum * sum) / (xs.length * sq)
}

async function measure (lib, busy, args, servers, lockDir) {
  const def = LIBS[lib]
  let server = null
  if (def.server) {
    server = servers[def.server]
    if (server.error) throw new Error(`${def.server === 'pg' ? 'PostgreSQL' : 'Redis'} is not running: ${server.error}`)
  }
  // The region holds shared-futex's lock and, for every library, the shared
  // counter of the exclusion check: without regions (the addon cannot load
  // here), the other libraries still run, unchecked.
  let SharedRegion = null
  try {
    SharedRegion = require(ROOT).SharedRegion
  } catch (e) {
    if (def.region) throw e
  }
  const name = `lock-processes-${process.pid}-${++serial}`
  const warmMs = args.warmup * 1000
  const ms = args.seconds * 1000
  const limitMs = warmMs + ms + 40000
  let region = null
  let spinners = null
  const contenders = []
  try {
    if (SharedRegion) {
      try {
        live.regions.add(name)
        region = SharedRegion.open(name, { bytes: REGION_BYTES })
      } catch (e) {
        live.regions.delete(name)
        if (def.region) throw e
        region = null // no shared counter: the exclusion check is skipped
      }
    }
    const cells = region ? new Int32Array(region.buffer) : null
    for (let id = 0; id < args.processes; id++) {
      contenders.push(startContender({
        lib,
        id,
        region: region ? name : null,
        redis: def.server === 'redis' ? server.info : null,
        pg: def.server === 'pg' ? server.info : null,
        options: def.options || null,
        file: path.join(lockDir, `lock-${serial}`),
        limitMs
      }, limitMs))
    }
    await withTimeout(Promise.all(contenders.map((c) => c.ready)), 30000, 'the contenders getting ready')
    if (region) {
      SharedRegion.unlink(name) // every process has it mapped
      live.regions.delete(name)
    }
    if (busy) {
      spinners = await startSpinners(limitMs)
      for (const c of spinners) live.children.add(c)
    }
    // All start at once: the go message reaches each within a millisecond or
    // so, well inside the warm-up.
    const { performance } = require('perf_hooks')
    const from = performance.timeOrigin + performance.now() + warmMs + 20
    const to = from + ms
    for (const c of contenders) c.go({ from, to })
    const results = await withTimeout(Promise.all(contenders.map((c) => c.result)), warmMs + ms + 30000, 'the contenders finishing')
    await withTimeout(Promise.all(contenders.map((c) => c.exited)), 10000, 'the contenders exiting')
    for (const r of results) addChildrenCpu(r.ownCpuMs)
    const counts = results.map((r) => r.count)
    const total = results.reduce((a, r) => a + r.total, 0)
    const hist = histogram()
    for (const r of results) add(hist, Float64Array.from(r.hist))
    const counted = counts.reduce((a, b) => a + b, 0)
    const counter = cells ? cells[2] : null
    const maxWaitMs = Math.max(...results.map((r) => r.maxWaitMs))
    // A bucket's middle can lie past the longest wait itself.
    const percentile = (q) => Math.min(quantile(hist, q) / 1000, maxWaitMs * 1000)
    return {
      rate: counted / (ms / 1000),
      p50Us: percentile(0.5),
      p99Us: percentile(0.99),
      p999Us: percentile(0.999),
      maxWaitMs,
      jain: jain(counts),
      counts,
      total,
      counter,
      lost: counter === null ? null : total - counter,
      overlaps: results.reduce((a, r) => a + r.overlaps, 0),
      ownerDied: results.reduce((a, r) => a + r.ownerDied, 0)
    }
  } finally {
    await Promise.all(contenders.map((c) => c.kill()))
    if (spinners) {
      await stopSpinners(spinners)
      for (const c of spinners) live.children.delete(c)
    }
    if (region) region.close()
    if (live.regions.has(name)) {
      try { SharedRegion.unlink(name) } catch {}
      live.regions.delete(name)
    }
  }
}

// --- the report ------------------------------------------------------------------------
function us (x) { return figure(x, 'us') }

function aggregate (rounds) {
  const ok = rounds.filter((r) => !r.error)
  const failed = rounds.filter((r) => r.error)
  if (ok.length === 0) return { failed: true, error: failed[0] ? failed[0].error : 'not run', rounds }
  const med = (key) => summary(ok.map((r) => r[key])).median
  return {
    failed: false,
    rounds,
    ok: ok.length,
    errors: failed.map((r) => r.error),
    rate: summary(ok.map((r) => r.rate)),
    p50Us: med('p50Us'),
    p99Us: summary(ok.map((r) => r.p99Us)),
    p999Us: med('p999Us'),
    jain: summary(ok.map((r) => r.jain)),
    maxWaitMs: Math.max(...ok.map((r) => r.maxWaitMs)),
    lost: ok.some((r) => r.lost === null) ? null : ok.reduce((a, r) => a + r.lost, 0),
    overlaps: ok.reduce((a, r) => a + r.overlaps, 0),
    ownerDied: ok.reduce((a, r) => a + r.ownerDied, 0),
    acquisitions: ok.reduce((a, r) => a + r.total, 0)
  }
}

function exclusion (a) {
  if (a.lost === null) return 'not checked'
  if (a.lost === 0 && a.overlaps === 0) return `ok (${a.acquisitions.toLocaleString('en-US')} = counter)`
  return `**FAILED**: ${a.lost} increments lost, ${a.overlaps} overlaps`
}

function table (load, aggs, args) {
  const lines = []
  lines.push(`| library | acquisitions/s (median, range) | p50 wait | p99 wait | p99.9 wait | longest wait | Jain's index | exclusion check |`)
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
  for (const [lib, a] of Object.entries(aggs)) {
    if (a.failed) {
      lines.push(`| ${LIBS[lib].label} | failed | | | | | | ${a.error.split('\n')[0].slice(0, 200).replace(/\|/g, '\\|')} |`)
      continue
    }
    const rate = `${figure(a.rate.median, '/s')} (${figure(a.rate.min, '/s')}–${figure(a.rate.max, '/s')})`
    const partial = a.ok < a.rounds.length ? ` (${a.rounds.length - a.ok} of ${a.rounds.length} rounds failed)` : ''
    lines.push(`| ${LIBS[lib].label}${partial} | ${rate} | ${us(a.p50Us)} | ${us(a.p99Us.median)} | ${us(a.p999Us)} | ${figure(a.maxWaitMs, 'ms')} | ${a.jain.median.toFixed(3)} | ${exclusion(a)}${a.ownerDied ? `, ${a.ownerDied} ownerDied` : ''} |`)
  }
  return lines.join('\n')
}

function ratios (aggs) {
  const ours = ['shared-futex', 'shared-futex-async'].filter((l) => aggs[l] && !aggs[l].failed)
  const bases = Object.keys(aggs).filter((l) => !l.startsWith('shared-futex'))
  const lines = []
  if (ours.length === 0 || bases.length === 0) return ''
  lines.push(`| acquisitions/s, ratio | ${ours.map((o) => o === 'shared-futex' ? 'blocking' : 'async').join(' | ')} | target |`)
  lines.push(`| --- | ${ours.map(() => '---:').join(' | ')} | --- |`)
  for (const b of bases) {
    const target = b.startsWith('proper-lockfile') ? '≥ 100×' : b.startsWith('redis') ? '≥ 10×' : ''
    const cells = ours.map((o) => aggs[b].failed ? 'n/a (failed)' : ratio(aggs[o].rate.median / aggs[b].rate.median))
    lines.push(`| shared-futex ÷ ${b} | ${cells.join(' | ')} | ${target} |`)
  }
  return lines.join('\n')
}

// --- main ------------------------------------------------------------------------------
async function main () {
  const args = parse(process.argv.slice(2))
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  process.on('exit', cleanupSync)
  const watchdog = setTimeout(() => {
    process.stderr.write(`\nstill running after ${args.timeout} s (--timeout): stopping everything\n`)
    cleanup().finally(() => process.exit(2))
  }, args.timeout * 1000)
  watchdog.unref()

  const m = machine()
  const log = (s) => process.stderr.write(s)
  const stale = sweepStale()
  if (stale.length) log(`removed what an earlier run that was killed left: ${stale.join(', ')}\n`)
  log(`${describe(m)}\n`)
  log(`${args.processes} processes, ${args.warmup} s warm-up + ${args.seconds} s, ${args.rounds} round(s), loads: ${args.loads.join(', ')}\n`)

  const servers = {}
  const need = new Set(args.only.map((l) => LIBS[l].server).filter(Boolean))
  if (need.has('redis')) {
    try { servers.redis = await startRedis() } catch (e) { servers.redis = { error: e.message } }
    log(`redis: ${servers.redis.error || `${servers.redis.version} on port ${servers.redis.info.port}`}\n`)
  }
  if (need.has('pg')) {
    try { servers.pg = await startPostgres() } catch (e) { servers.pg = { error: e.message } }
    log(`postgres: ${servers.pg.error || `${servers.pg.version} on port ${servers.pg.info.port}`}\n`)
  }
  const lockDir = tempDir('lockfile')

  const results = {}
  const others = {}
  try {
    for (const load of args.loads) {
      const rounds = {}
      for (const lib of args.only) rounds[lib] = []
      const before = reading()
      for (let round = 0; round < args.rounds; round++) {
        for (const lib of args.only) {
          log(`${load} round ${round + 1}/${args.rounds} ${lib}: `)
          let r
          try {
            r = await measure(lib, load === 'busy', args, servers, lockDir)
            log(`${figure(r.rate, '/s')}, p99 ${us(r.p99Us)}, Jain ${r.jain.toFixed(3)}, counts ${r.counts.join('/')}` +
              `${r.lost === null ? '' : `, lost ${r.lost}`}${r.overlaps ? `, overlaps ${r.overlaps}` : ''}\n`)
          } catch (e) {
            r = { error: e.message }
            log(`FAILED: ${e.message}\n`)
          }
          rounds[lib].push(r)
        }
      }
      results[load] = {}
      for (const lib of args.only) results[load][lib] = aggregate(rounds[lib])
      others[load] = othersBetween(before, reading())
      if (others[load] !== null) log(`${load}: other processes used ${(others[load] * 100).toFixed(0)} % of the CPUs meanwhile\n`)
    }
  } finally {
    await cleanup()
  }

  const out = []
  out.push(`${describe(m)}`)
  out.push(`${args.processes} processes contending for one lock, ${args.warmup} s warm-up + ${args.seconds} s, median of ${args.rounds} round(s)`)
  const versions = [servers.redis, servers.pg].filter((s) => s && s.version).map((s) => s.version)
  if (versions.length) out.push(`servers: ${versions.join(', ')} (127.0.0.1)`)
  for (const load of args.loads) {
    out.push('')
    out.push(load === 'idle' ? '### Idle machine' : `### ${os.cpus().length} busy processes (one per core)`)
    out.push('')
    if (others[load] != null) out.push(`(other processes used ${(others[load] * 100).toFixed(0)} % of the CPUs during these rounds)\n`)
    out.push(table(load, results[load], args))
    const r = ratios(results[load])
    if (r) {
      out.push('')
      out.push(r)
    }
  }
  process.stdout.write(out.join('\n') + '\n')
  for (const load of args.loads) {
    for (const [lib, a] of Object.entries(results[load])) {
      for (const e of a.failed ? [a.error] : a.errors) process.stderr.write(`${load} ${lib} failed: ${e}\n`)
    }
  }
  if (args.json) {
    fs.writeFileSync(args.json, JSON.stringify({ machine: m, args, servers: versions, othersShare: others, results }, null, 2) + '\n')
  }
  const excl = Object.values(results).some((byLib) => Object.entries(byLib).some(([lib, a]) => lib.startsWith('shared-futex') && !a.failed && (a.lost || a.overlaps)))
  if (excl) process.exitCode = 1
}

main().catch(async (e) => {
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`)
  await cleanup()
  process.exitCode = 2
})
