'use strict'
// shared-futex/synckit against synckit (npm), as a synckit user sees them:
//
//   npm run bench:synckit -- [--rounds 5] [--files 100] [--ms 2000]
//
// - eslint-plugin-prettier's calls: the plugin as installed (synckit 0.12
//   from npm) and switched to shared-futex/synckit
//   (__test__/fixtures/synckit-eslint/switch.js). `format calls/s`: the
//   plugin's own worker (worker.mjs, prettier.format) called through the
//   plugin's synckit with a one-line source, for --ms after a warm-up;
//   `lint files/s`: ESLint with the plugin on --files real files (one call
//   each), after one warm-up pass.
// - first call: from the start of a process to the first answer of an
//   async add (createSyncFn, the worker's start, the call), as
//   performance.now() measures it in that process (from its time origin).
// Each round runs each measurement in a fresh process per implementation,
// the order alternating between rounds; the figures are the medians of
// the rounds.
const { execFileSync } = require('child_process')
const path = require('path')
const { performance } = require('perf_hooks')

const ROOT = path.join(__dirname, '..')
const IMPLS = ['synckit', 'shared-futex/synckit']

function arg (name, fallback) {
  const k = process.argv.indexOf(`--${name}`)
  return k === -1 ? fallback : Number(process.argv[k + 1])
}

// --- in a child process ------------------------------------------------------

function firstCall (impl) {
  const synckit = impl === 'synckit' ? require('synckit') : require('../synckit')
  const worker = path.join(__dirname, 'workers', impl === 'synckit' ? 'synckit-add.js' : 'shared-futex-synckit-add.js')
  const add = synckit.createSyncFn(worker)
  if (add(1, 2) !== 3) throw new Error('wrong sum')
  return { firstMs: performance.now() }
}

async function eslint (impl, project, files, ms) {
  const { realFiles, linter } = require('../__test__/fixtures/synckit-eslint/switch')
  const plugin = impl === 'synckit' ? path.join(ROOT, 'node_modules', 'eslint-plugin-prettier') : path.join(project, 'node_modules', 'eslint-plugin-prettier')
  // The plugin's synckit and worker, as its rule calls them.
  const synckit = require(require.resolve('synckit', { paths: [plugin] }))
  const format = synckit.createSyncFn(path.join(plugin, 'worker.mjs'))
  const options = { filepath: path.join(ROOT, 'x.js'), onDiskFilepath: path.join(ROOT, 'x.js'), usePrettierrc: false, semi: false }
  const call = () => format('const a = 1;\n', options, {})
  if (call() !== 'const a = 1\n') throw new Error(`unexpected format: ${JSON.stringify(call())}`)
  let calls = 0
  const warm = performance.now() + ms / 4
  while (performance.now() < warm) call()
  const t0 = performance.now()
  while (performance.now() - t0 < ms) {
    call()
    calls++
  }
  const rate = calls / ((performance.now() - t0) / 1000)
  const list = realFiles(files)
  const lint = linter(plugin)
  await lint.lintFiles(list)
  const l0 = performance.now()
  await lint.lintFiles(list)
  return { formatRate: rate, lintRate: list.length / ((performance.now() - l0) / 1000) }
}

// --- the parent ----------------------------------------------------------------

function child (args) {
  const out = execFileSync(process.execPath, [__filename, '--child'].concat(args), { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 300000 })
  return JSON.parse(out.trim().split('\n').pop())
}

const version = (name) => JSON.parse(require('fs').readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version

const median = (xs) => {
  const s = xs.slice().sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

function main () {
  const rounds = arg('rounds', 5)
  const files = arg('files', 100)
  const ms = arg('ms', 2000)
  const { switchedProject } = require('../__test__/fixtures/synckit-eslint/switch')
  const project = switchedProject()
  const got = { synckit: [], 'shared-futex/synckit': [] }
  try {
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? IMPLS : IMPLS.slice().reverse()
      for (const impl of order) {
        const first = child(['first', impl])
        const lint = child(['eslint', impl, project.dir, String(files), String(ms)])
        got[impl].push(Object.assign({}, first, lint))
        process.stderr.write(`round ${r + 1}/${rounds} ${impl}: ${JSON.stringify(got[impl][r])}\n`)
      }
    }
  } finally {
    project.remove()
  }
  const m = (impl, key) => median(got[impl].map((x) => x[key]))
  const os = require('os')
  console.log(`Node ${process.version}, ${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(2)}; medians of ${rounds} rounds; synckit ${version('synckit')}, eslint-plugin-prettier ${version('eslint-plugin-prettier')}, prettier ${version('prettier')}\n`)
  console.log('| measure | synckit | shared-futex/synckit | ratio |')
  console.log('| --- | ---: | ---: | ---: |')
  const row = (label, key, digits, lowerIsBetter) => {
    const a = m('synckit', key)
    const b = m('shared-futex/synckit', key)
    console.log(`| ${label} | ${a.toFixed(digits)} | ${b.toFixed(digits)} | ${(lowerIsBetter ? a / b : b / a).toFixed(2)}× |`)
  }
  row('eslint-plugin-prettier format calls/s (one-line source)', 'formatRate', 0)
  row(`eslint-plugin-prettier lint files/s (${files} real files)`, 'lintRate', 1)
  row('first call: process start to first answer (ms)', 'firstMs', 1, true)
  console.log('\n(ratio: how many times better shared-futex/synckit is; below 1× it is worse)')
}

if (process.argv[2] === '--child') {
  const [what, impl, project, files, ms] = process.argv.slice(3)
  const run = what === 'first' ? Promise.resolve(firstCall(impl)) : eslint(impl, project, Number(files), Number(ms))
  run.then((r) => {
    console.log(JSON.stringify(r))
    process.exit(0) // synckit's worker is cached by path and stays
  }, (e) => {
    console.error(e)
    process.exit(1)
  })
} else {
  main()
}
