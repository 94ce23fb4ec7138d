'use strict'
// Runs test files one by one with a given Node binary and adds up their
// results. Works for every Node the matrix has: a node:test (or `test`
// package) file runs its tests when executed directly and ends with a TAP
// summary (`# pass N`, `# fail N`, ...), which is what is counted here. Old
// `node --test` is not needed.
//
// A file fails when it exits non-zero, is killed by the hard timeout, prints
// no summary, or reports failed or cancelled tests (the `test` package can
// exit 0 with failures on Node 14, so the exit code alone is not enough).
//
//   node scripts/run-suite.js [--node <binary>] [file ...]   (default: __test__/*.test.js)
const { spawn } = require('child_process')
const fs = require('fs')
const path = require('path')

const ROOT = path.join(__dirname, '..')
const FILE_TIMEOUT_MS = Number(process.env.MATRIX_FILE_TIMEOUT_MS) || 10 * 60 * 1000

function testFiles (filters) {
  const dir = path.join(ROOT, '__test__')
  return fs.readdirSync(dir)
    .filter((f) => f.endsWith('.test.js'))
    .filter((f) => !filters || filters.length === 0 || filters.some((s) => f.indexOf(s) >= 0))
    .sort()
    .map((f) => path.join(dir, f))
}

// The last value of each `# name N` (TAP) or `ℹ name N` (spec) summary line.
function summaryOf (output) {
  const counts = {}
  const re = /^(?:# |\u2139 )(tests|suites|pass|fail|cancelled|skipped|todo) (\d+)\s*$/gm
  let m
  while ((m = re.exec(output)) !== null) counts[m[1]] = Number(m[2])
  return counts.tests === undefined ? null : counts
}

// Runs one file; resolves with { file, code, signal, timedOut, ms, output, summary, ok }.
function runFile (bin, file, opts) {
  const args = (opts.execArgv || []).concat([file])
  const env = Object.assign({}, process.env, opts.env || {})
  // A file run directly reports for itself, not to an enclosing `node --test`.
  delete env.NODE_TEST_CONTEXT
  const started = Date.now()
  return new Promise((resolve) => {
    // Its own process group, so the timeout also ends what the file spawned.
    const child = spawn(bin, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    let timedOut = false
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    const timer = setTimeout(() => {
      timedOut = true
      try { process.kill(-child.pid, 'SIGKILL') } catch (e) {}
    }, opts.timeoutMs || FILE_TIMEOUT_MS)
    const finish = (code, signal) => {
      clearTimeout(timer)
      const summary = summaryOf(output)
      const ok = !timedOut && code === 0 && summary !== null &&
        (summary.fail || 0) === 0 && (summary.cancelled || 0) === 0
      resolve({ file, code, signal, timedOut, ms: Date.now() - started, output, summary, ok })
    }
    child.on('error', (e) => { output += String(e.stack || e); finish(null, null) })
    child.on('close', finish)
  })
}

// What one file adds to the totals: a file that failed without saying how
// many of its tests failed counts as one failure.
function countsOf (r) {
  const s = r.summary || {}
  const failed = (s.fail || 0) + (s.cancelled || 0)
  return {
    passed: s.pass || 0,
    failed: r.ok ? 0 : Math.max(failed, 1),
    skipped: (s.skipped || 0) + (s.todo || 0)
  }
}

function describeResult (r) {
  const c = countsOf(r)
  let why = ''
  if (r.timedOut) why = ', killed by the hard timeout'
  else if (r.summary === null) why = `, no test summary (exit ${r.code === null ? r.signal : r.code})`
  else if (!r.ok && c.failed > 0 && r.code !== 0) why = `, exit ${r.code === null ? r.signal : r.code}`
  return `${r.ok ? 'ok  ' : 'FAIL'} ${path.relative(ROOT, r.file)}: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped${why} (${(r.ms / 1000).toFixed(1)} s)`
}

// The end of a failed file's output, indented, for the log.
function tailOf (output, lines) {
  const all = output.replace(/\s+$/, '').split('\n')
  const shown = all.slice(-lines)
  const cut = all.length > shown.length ? [`    ... (${all.length - shown.length} lines above)`] : []
  return cut.concat(shown.map((l) => '    | ' + l)).join('\n')
}

// The TAP blocks of a file's failed tests (a `not ok` line that is no todo
// or skip, and its YAML block up to its `...`), each cut at `max` lines:
// the tail of a long file's output may hold only other tests' diagnostics.
function failuresOf (output, max) {
  const all = output.split('\n')
  const blocks = []
  for (let i = 0; i < all.length; i++) {
    const m = /^(\s*)not ok \d+ - (.*)$/.exec(all[i])
    if (!m || /#\s*(TODO|SKIP)\b/i.test(m[2])) continue
    const end = all.findIndex((l, k) => k > i && l === m[1] + '  ...')
    const block = all.slice(i, end < 0 ? i + max : Math.min(end + 1, i + max))
    blocks.push(block.map((l) => '    ! ' + l).join('\n'))
  }
  return blocks.join('\n')
}

// Runs every file in order; resolves with the totals and the results.
async function runSuite (bin, files, opts, log) {
  const totals = { passed: 0, failed: 0, skipped: 0, files: 0, failedFiles: [] }
  const results = []
  for (const file of files) {
    const r = await runFile(bin, file, opts)
    results.push(r)
    const c = countsOf(r)
    totals.passed += c.passed
    totals.failed += c.failed
    totals.skipped += c.skipped
    totals.files++
    if (!r.ok) totals.failedFiles.push(path.relative(ROOT, r.file))
    log(describeResult(r))
    if (!r.ok) {
      const failures = failuresOf(r.output, 60)
      if (failures) log(failures)
      log(tailOf(r.output, failures ? 60 : 150))
    }
  }
  return { totals, results }
}

// How test files are started on a given major: Node 12 gets the compiled
// test runner (test-compat.js); 18+ are asked for TAP, which newer versions
// no longer print by default.
function optionsFor (major) {
  if (major < 14) return { execArgv: ['--require', require('./test-compat').prepare()] }
  if (major >= 18) return { execArgv: ['--test-reporter=tap'] }
  return { execArgv: [] }
}

module.exports = { testFiles, runFile, runSuite, summaryOf, failuresOf, optionsFor }

if (require.main === module) {
  const argv = process.argv.slice(2)
  let bin = process.execPath
  const i = argv.indexOf('--node')
  if (i >= 0) {
    bin = argv[i + 1]
    argv.splice(i, 2)
  }
  const version = require('child_process').execFileSync(bin, ['--version'], { encoding: 'utf8' })
  const opts = optionsFor(Number(version.slice(1).split('.')[0]))
  runSuite(bin, testFiles(argv), opts, (line) => console.log(line)).then(({ totals }) => {
    console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
    process.exitCode = totals.failed > 0 ? 1 : 0
  })
}
