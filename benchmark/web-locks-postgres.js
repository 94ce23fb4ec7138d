'use strict'
// Locks for a fleet, side by side in one run: shared-futex's
// PostgresLockManager against `advisory-lock` on the same PostgreSQL server,
// and `redlock` and `redis-semaphore` on a redis-server, with N processes
// (default 4) contending on one name and on 100 names (each acquisition
// takes one at random).
//
//   node benchmark/web-locks-postgres.js [--seconds 3] [--warmup 0.5]
//        [--rounds 1] [--processes 4] [--names 1,100] [--only lib,lib] [--json file]
//   npm run bench:web-locks-postgres
//
// Libraries: shared-futex (PostgresLockManager, request(name, fn)),
// advisory-lock (withLock: a new connection per acquisition, as it does),
// redlock (its defaults: retries every 200 ± 100 ms, here for ever) and
// redis-semaphore (Mutex, its default retry every 10 ms) over ioredis. The
// critical section is the same for all (benchmark/children/
// web-locks-postgres-contender.js): a check in shared memory that nobody
// else is inside the name's section, and one turn of the event loop.
//
// Figures over `--seconds` after `--warmup`: grants/s of all processes, p99
// of the wait (ask → holding, all processes pooled), Jain's fairness index
// over the processes' grant counts (1: equal shares; 1/N: one got all),
// and overlaps (two holders of one name at once: must be 0).
//
// Servers: a throwaway PostgreSQL cluster (scripts/pg-cluster.js) and a
// redis-server (Debian's `redis-server`), both on 127.0.0.1 and free ports,
// children of this process, stopped at the end (also on SIGINT/SIGTERM). A
// server that cannot start makes its libraries fail, not the run.
const fs = require('fs')
const os = require('os')
const net = require('net')
const path = require('path')
const { options } = require('./lib/args')
const { fork, execFileSync } = require('child_process')
const pgCluster = require('../scripts/pg-cluster')

const CHILD = path.join(__dirname, 'children', 'web-locks-postgres-contender.js')
const ROOT = path.join(__dirname, '..')

const versionOf = (pkg) => { try { return require(`${pkg}/package.json`).version } catch { return '(not installed)' } }
const LIBS = {
  'shared-futex': { label: 'shared-futex PostgresLockManager', server: 'pg' },
  'advisory-lock': { label: `advisory-lock ${versionOf('advisory-lock')}`, server: 'pg' },
  redlock: { label: `redlock ${versionOf('redlock')} (retry 200 ± 100 ms)`, server: 'redis' },
  'redis-semaphore': { label: `redis-semaphore ${versionOf('redis-semaphore')} Mutex (retry 10 ms)`, server: 'redis' }
}

function parse (argv) {
  return options(argv, {
    seconds: { min: 0.001, default: 3 },
    warmup: { min: 0, default: 0.5 },
    rounds: { int: true, min: 1, default: 1 },
    processes: { int: true, min: 2, default: 4 },
    names: { list: true, numbers: true, int: true, min: 1, default: [1, 100] },
    only: { list: Object.keys(LIBS), default: Object.keys(LIBS) },
    json: { string: true, default: null }
  })
}

const stops = [] // what to stop at the end
const children = new Set()

async function startRedis () {
  const bin = pgCluster.which('redis-server')
  if (!bin) throw new Error('no redis-server on PATH (Debian: apt-get install -y redis-server)')
  const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).split(/\s+/).find((w) => w.startsWith('v='))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `shared-futex-redis-${process.pid}-`))
  const port = await pgCluster.freePort()
  const [cmd, args] = pgCluster.asServerUser(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--dir', dir, '--daemonize', 'no', '--logfile', '', '--protected-mode', 'yes'], null)
  const server = pgCluster.serverProcess(cmd, args, { stopSignal: 'SIGTERM', cwd: dir })
  const stop = async () => { await server.stop(); fs.rmSync(dir, { recursive: true, force: true }) }
  stops.push(stop)
  const ping = () => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    const done = (ok) => { s.destroy(); resolve(ok) }
    s.setTimeout(1000, () => done(false))
    s.on('error', () => done(false))
    s.on('connect', () => s.write('PING\r\n'))
    s.on('data', (d) => done(String(d).startsWith('+PONG')))
  })
  const deadline = Date.now() + 20000
  while (server.exit === null && Date.now() < deadline) {
    if (await ping()) return { info: { host: '127.0.0.1', port }, version: `redis-server ${version ? version.slice(2) : '?'}` }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`redis-server did not start: ${server.tail() || 'no output'}`)
}

async function cleanup () {
  for (const c of children) c.kill('SIGKILL')
  await Promise.all(stops.splice(0).map((s) => s().catch(() => {})))
}

function jain (xs) {
  const sum = xs.reduce((a, b) => a + b, 0)
  const sq = xs.reduce((a, b) => a + b * b, 0)
  return sq === 0 ? NaN : (sum * sum) / (xs.length * sq)
}

function startChild (spec) {
  const child = fork(CHILD, [JSON.stringify(spec)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  children.add(child)
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => { children.delete(child); resolve({ code, signal }) }))
  const message = (key) => new Promise((resolve, reject) => {
    child.on('message', (m) => {
      if (m && m.error) reject(new Error(m.error))
      if (m && m[key]) resolve(m[key])
    })
    exited.then((e) => reject(new Error(`process ${spec.id} exited (${e.code}, ${e.signal}) before sending ${key}`)))
  })
  const ready = message('ready')
  const result = message('result')
  ready.catch(() => {})
  result.catch(() => {})
  return { child, ready, result, exited }
}

let serial = 0
async function measure (lib, names, args, servers) {
  const def = LIBS[lib]
  const server = servers[def.server]
  if (server.error) throw new Error(`${def.server === 'pg' ? 'PostgreSQL' : 'Redis'} is not running: ${server.error}`)
  const { SharedRegion } = require(ROOT)
  const region = `wlpg-bench-${process.pid}-${++serial}`
  SharedRegion.unlink(region)
  const r = SharedRegion.open(region, { bytes: 8 * Math.ceil(names / 2) })
  const limitMs = (args.warmup + args.seconds) * 1000 + 60000
  const kids = []
  try {
    for (let id = 0; id < args.processes; id++) {
      kids.push(startChild({ lib, id, names, pg: servers.pg.connectionString, redis: servers.redis.info, region, limitMs }))
    }
    await Promise.all(kids.map((k) => k.ready))
    const { performance } = require('perf_hooks')
    const from = performance.timeOrigin + performance.now() + args.warmup * 1000 + 300
    const to = from + args.seconds * 1000
    for (const k of kids) k.child.send({ go: { from, to } })
    const results = await Promise.all(kids.map((k) => k.result))
    const counts = results.map((x) => x.count)
    const waits = results.flatMap((x) => x.waits).sort((a, b) => a - b)
    const total = counts.reduce((a, b) => a + b, 0)
    return {
      rate: total / args.seconds,
      p50: waits.length ? waits[Math.floor(waits.length * 0.5)] : NaN,
      p99: waits.length ? waits[Math.min(waits.length - 1, Math.floor(waits.length * 0.99))] : NaN,
      jain: jain(counts),
      counts,
      overlaps: results.reduce((a, x) => a + x.overlaps, 0)
    }
  } finally {
    for (const k of kids) k.child.kill('SIGKILL')
    await Promise.all(kids.map((k) => k.exited))
    r.close()
    SharedRegion.unlink(region)
  }
}

const fmtRate = (x) => x >= 1000 ? `${(x / 1000).toFixed(2)}k/s` : `${x.toFixed(0)}/s`
const fmtMs = (x) => x >= 100 ? `${x.toFixed(0)} ms` : x >= 1 ? `${x.toFixed(1)} ms` : `${(x * 1000).toFixed(0)} µs`

async function main () {
  const args = parse(process.argv.slice(2))
  const onSignal = () => cleanup().finally(() => process.exit(130))
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  const log = (s) => process.stderr.write(s)
  const servers = { pg: { error: 'not started' }, redis: { error: 'not started' } }
  const need = new Set(args.only.map((l) => LIBS[l].server))
  if (need.has('pg')) {
    try {
      const cluster = await pgCluster.startPostgres({ maxConnections: 200 })
      stops.push(() => cluster.stop())
      servers.pg = cluster
    } catch (e) { servers.pg = { error: e.message } }
    log(`postgres: ${servers.pg.error || `${servers.pg.version} on port ${servers.pg.info.port}`}\n`)
  }
  if (need.has('redis')) {
    try { servers.redis = await startRedis() } catch (e) { servers.redis = { error: e.message } }
    log(`redis: ${servers.redis.error || `${servers.redis.version} on port ${servers.redis.info.port}`}\n`)
  }
  const results = {}
  try {
    for (const names of args.names) {
      results[names] = {}
      for (const lib of args.only) {
        const rounds = []
        for (let round = 0; round < args.rounds; round++) {
          log(`${names} name(s), ${lib}, round ${round + 1}: `)
          try {
            const m = await measure(lib, names, args, servers)
            rounds.push(m)
            log(`${fmtRate(m.rate)}, p99 ${fmtMs(m.p99)}, Jain ${m.jain.toFixed(3)}, counts ${m.counts.join('/')}, overlaps ${m.overlaps}\n`)
          } catch (e) {
            rounds.push({ error: e.message })
            log(`FAILED: ${e.message}\n`)
          }
        }
        results[names][lib] = rounds
      }
    }
  } finally {
    await cleanup()
  }
  const median = (xs) => { const s = xs.slice().sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)] }
  const out = [`${os.cpus().length} CPUs (${os.cpus()[0].model}), load average ${os.loadavg()[0].toFixed(1)} at the end; ${args.processes} processes, ${args.warmup} s warm-up + ${args.seconds} s, median of ${args.rounds} round(s)`]
  for (const names of args.names) {
    out.push('', `### ${names} name${names === 1 ? '' : 's'}`, '', '| library | grants/s | p50 wait | p99 wait | Jain\'s index | overlaps |', '| --- | ---: | ---: | ---: | ---: | ---: |')
    for (const lib of args.only) {
      const ok = results[names][lib].filter((r) => !r.error)
      if (ok.length === 0) {
        out.push(`| ${LIBS[lib].label} | failed: ${results[names][lib][0].error.split('\n')[0].slice(0, 120).replace(/\|/g, '\\|')} | | | | |`)
        continue
      }
      out.push(`| ${LIBS[lib].label} | ${fmtRate(median(ok.map((r) => r.rate)))} | ${fmtMs(median(ok.map((r) => r.p50)))} | ${fmtMs(median(ok.map((r) => r.p99)))} | ${median(ok.map((r) => r.jain)).toFixed(3)} | ${ok.reduce((a, r) => a + r.overlaps, 0)} |`)
    }
  }
  process.stdout.write(out.join('\n') + '\n')
  if (args.json) fs.writeFileSync(args.json, JSON.stringify({ args, results }, null, 2) + '\n')
  const overlapped = Object.values(results).some((byLib) => Object.values(byLib).some((rs) => rs.some((r) => r.overlaps)))
  if (overlapped) process.exitCode = 1
}

main().catch(async (e) => {
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`)
  await cleanup()
  process.exitCode = 2
})
