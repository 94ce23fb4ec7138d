'use strict'
// synckit's own test suite against shared-futex/synckit, and against the
// real synckit of the same version, side by side, on Node 20, 24 and 26.
//
//   npm run test:synckit-suite [-- <synckit checkout or bare git dir>] [--node 20,24,26|own] [--reliability] [--only synckit|shared-futex]
//   SYNCKIT_REPO=<dir> npm run test:synckit-suite
//
// Without a repository it fetches synckit's own at COMMIT (one commit,
// `git fetch --depth 1`, at most FETCH_MS) from GIT_URL (or
// $SYNCKIT_GIT_URL, a mirror) into .runtimes/synckit.git (gitignored),
// once; where that fails (no network, no GitHub) it says so in one line and
// exits 0. The suite runs under each Node of --node (default: this one, 24
// and 26; the others from the npm registry into .node-versions/, as
// scripts/node-versions.js fetches them; one that cannot be had is named
// and left out), each in a process of its own with its bin directory first
// on PATH; exits 1 if a counted test fails under any of them.
//
// From the repository, it takes `test/` at COMMIT (synckit's newest
// release in it) into a temporary directory laid out as synckit's own
// checkout is: a package named synckit whose entry points (lib/index.js,
// lib/index.cjs: what the tests and their workers import, by name or by
// path) re-export the implementation under test, linked as
// node_modules/synckit (synckit's `"synckit": "link:."`). Nothing else of
// the tests is changed. It runs them with synckit's runner (jest with
// ts-jest, --experimental-vm-modules) once with the real synckit (the
// devDependency synckit-<version>) and once with shared-futex/synckit,
// prints each run's summary and a table of each test's outcome on both.
// The yarn PnP fixture runs with @yarnpkg/cli-dist (YARN_VERSION) on PATH
// as `yarn` (the fixture's own .yarn/releases file does the work), the Bun
// fixture with Bun from the npm registry (scripts/runtimes.js); both are
// fetched into .runtimes/ (gitignored).
//
// Not counted (the issue's exclusions): tests of synckit's internal helpers
// (common, helpers, utils) and tests that mock receiveMessageOnPort or
// Atomics.wait. Every other test that passes on synckit must pass on
// shared-futex/synckit: exits 1 if one does not. Without a repository it
// says why and exits 0 (see above). --reliability sets CI=1, which runs synckit's
// reliability test (a million calls); without it that test is skipped on both.
const { spawn, execFileSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { pathToFileURL } = require('url')

const ROOT = path.join(__dirname, '..')
// v0.11.13, synckit's newest release in the snapshot this was written against.
const COMMIT = '05d6be39b683bec69059cd88c6f4548a02bd0fd2'
const TAG = 'v0.11.13'
const GIT_URL = 'https://github.com/un-ts/synckit.git'
const FETCH_MS = 120 * 1000
const MAJORS = [24, 26] // besides this Node's
const YARN_VERSION = '4.18.1'
// Per test file: a synchronous call that never returns (synckit 0.11 waits
// for ever on a worker that failed to start) cannot be ended by jest's own
// timeouts, so each file runs in a jest of its own, killed after this long.
const FILE_LIMIT_MS = 3 * 60 * 1000

// The issue's exclusions, by test file and by test name.
const EXCLUDED_FILES = {
  'test/common.spec.ts': "synckit's internal helpers (common)",
  'test/helpers.spec.ts': "synckit's internal helpers (helpers)",
  'test/utils.spec.ts': "synckit's internal helpers (utils)"
}
const MOCKS = 'mocks receiveMessageOnPort / Atomics.wait'
const EXCLUDED_TESTS = {
  'handling of outdated message from worker': MOCKS,
  'propagation of undefined timeout': MOCKS,
  'reduction of waiting time': MOCKS,
  'unexpected message from worker': MOCKS
}

function parseArgs (argv) {
  const opts = { repo: process.env.SYNCKIT_REPO || null, reliability: false, only: null, node: null, here: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--reliability') opts.reliability = true
    else if (a === '--only') opts.only = argv[++i]
    else if (a === '--node') opts.node = argv[++i]
    else if (a === '--here') opts.here = true // one run, under this Node (the parent's child)
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`)
    else opts.repo = a
  }
  if (opts.only !== null && !['synckit', 'shared-futex'].includes(opts.only)) throw new Error(`--only takes synckit or shared-futex, got ${opts.only}`)
  const own = Number(process.versions.node.split('.')[0])
  if (opts.node === null || opts.node === undefined) {
    opts.majors = [own].concat(MAJORS.filter((m) => m !== own))
  } else {
    opts.majors = [...new Set(String(opts.node).split(',').map((m) => m.trim() === 'own' ? own : Number(m)))]
    if (opts.majors.some((m) => !Number.isInteger(m) || m < 1)) throw new Error(`--node takes majors separated by commas (or own), got ${opts.node}`)
  }
  return opts
}

const hasCommit = (repo) => {
  try {
    git(repo, ['cat-file', '-e', `${COMMIT}^{commit}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

// synckit's repository at COMMIT in .runtimes/synckit.git, fetched once:
// { dir } or { error } (why it could not be had).
function fetchRepo () {
  const url = process.env.SYNCKIT_GIT_URL || GIT_URL
  const dir = path.join(ROOT, '.runtimes', 'synckit.git')
  if (fs.existsSync(path.join(dir, 'HEAD')) && hasCommit(dir)) return { dir }
  fs.mkdirSync(dir, { recursive: true })
  if (!fs.existsSync(path.join(dir, 'HEAD'))) execFileSync('git', ['init', '--bare', '-q', dir])
  const env = Object.assign({}, process.env, { GIT_TERMINAL_PROMPT: '0' })
  let why = ''
  // The commit itself (GitHub serves any commit), else the release's tag.
  for (const refspec of [COMMIT, `+refs/tags/${TAG}:refs/tags/${TAG}`]) {
    try {
      execFileSync('git', ['--git-dir', dir, 'fetch', '-q', '--depth', '1', url, refspec], { env, timeout: FETCH_MS, killSignal: 'SIGKILL', stdio: ['ignore', 'ignore', 'pipe'] })
      if (hasCommit(dir)) return { dir }
      why = `${url} has no commit ${COMMIT}`
    } catch (e) {
      why = e.signal ? `git fetch ${url} took more than ${FETCH_MS / 1000} s` : String(e.stderr || e.message).trim().split('\n').pop()
    }
  }
  return { error: why }
}

// git arguments that read `repo`: a checkout (with .git) or a bare git dir.
function gitOf (repo) {
  if (fs.existsSync(path.join(repo, '.git'))) return ['-C', repo]
  return ['--git-dir', repo]
}

function git (repo, args, options) {
  return execFileSync('git', gitOf(repo).concat(args), Object.assign({ maxBuffer: 256 * 1024 * 1024 }, options))
}

// synckit's package.json at COMMIT: its version, and the runner it uses.
function upstreamPackage (repo) {
  return JSON.parse(git(repo, ['show', `${COMMIT}:package.json`]).toString())
}

function extract (repo, dir) {
  fs.mkdirSync(dir, { recursive: true })
  const tar = git(repo, ['archive', '--format=tar', COMMIT, 'test'])
  execFileSync('tar', ['-x', '-C', dir], { input: tar })
}

// The implementation under test, as synckit's entry points.
function entries (impl, realDir) {
  if (impl === 'shared-futex') {
    return {
      cjs: `module.exports = require(${JSON.stringify(path.join(ROOT, 'synckit.js'))})\n`,
      esm: `export * from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'synckit.mjs')).href)}\n`
    }
  }
  return {
    cjs: `module.exports = require(${JSON.stringify(path.join(realDir, 'lib', 'index.cjs'))})\n`,
    esm: `export * from ${JSON.stringify(pathToFileURL(path.join(realDir, 'lib', 'index.js')).href)}\n`
  }
}

// synckit's jest configuration (package.json "jest") with the package
// import mapped onto lib/index.cjs in place of src/index.ts, without
// coverage, and ts-jest without type checking (the tests' types are
// synckit's source's, which is not here).
const JEST = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    '^synckit$': '<rootDir>/lib/index.cjs'
  },
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { useESM: true, diagnostics: false }]
  }
}

// Module resolution for ts-jest and for TypeScript workers run by ts-node
// (Node 20: ts-node is the default runner there); type checks off for both.
const TSCONFIG = {
  compilerOptions: {
    rootDir: '.',
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    isolatedModules: true,
    esModuleInterop: true,
    skipLibCheck: true,
    strict: false
  },
  'ts-node': { transpileOnly: true }
}

function stage (repo, dir, impl, realDir, version) {
  extract(repo, dir)
  fs.mkdirSync(path.join(dir, 'lib'))
  const e = entries(impl, realDir)
  fs.writeFileSync(path.join(dir, 'lib', 'index.cjs'), e.cjs)
  fs.writeFileSync(path.join(dir, 'lib', 'index.js'), e.esm)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({
    name: 'synckit',
    version,
    private: true,
    type: 'module',
    main: './lib/index.cjs',
    exports: { import: './lib/index.js', require: './lib/index.cjs' },
    jest: JEST
  }, null, 2) + '\n')
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2) + '\n')
  // The dev tools from this repository's node_modules; synckit itself is
  // this directory, as in synckit's checkout.
  const modules = path.join(dir, 'node_modules')
  fs.mkdirSync(modules)
  for (const name of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
    if (name.startsWith('.') || name === 'synckit' || name.startsWith('synckit-')) continue
    fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(modules, name), 'junction')
  }
  fs.symlinkSync('..', path.join(modules, 'synckit'), 'junction')
}

// `yarn` and `bun` for the fixtures, in a bin directory put first on PATH.
async function tools (bin, log) {
  const { ensure } = require('./runtimes')
  const { install, packageDir } = require('./npm-fetch')
  fs.mkdirSync(bin, { recursive: true })
  const found = {}
  try {
    const bun = await ensure('bun', log)
    fs.symlinkSync(bun, path.join(bin, 'bun'))
    found.bun = execFileSync(bun, ['--version']).toString().trim()
  } catch (e) {
    found.bunError = e.message.split('\n')[0]
  }
  try {
    const prefix = path.join(ROOT, '.runtimes', 'yarn')
    const cli = packageDir(prefix, '@yarnpkg/cli-dist')
    const manifest = path.join(cli, 'package.json')
    if (!fs.existsSync(manifest) || JSON.parse(fs.readFileSync(manifest, 'utf8')).version !== YARN_VERSION) {
      log(`fetching @yarnpkg/cli-dist@${YARN_VERSION}`)
      await install(prefix, [`@yarnpkg/cli-dist@${YARN_VERSION}`])
    }
    fs.writeFileSync(path.join(bin, 'yarn'), `#!/bin/sh\nexec node ${JSON.stringify(path.join(cli, 'bin', 'yarn.js'))} "$@"\n`, { mode: 0o755 })
    found.yarn = YARN_VERSION
  } catch (e) {
    found.yarnError = e.message.split('\n')[0]
  }
  return found
}

function runJest (dir, file, bin, reliability) {
  const jest = path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js')
  const out = path.join(dir, `jest-results-${file.replace(/\W/g, '_')}.json`)
  const env = Object.assign({}, process.env, {
    PATH: bin + path.delimiter + process.env.PATH,
    CI: reliability ? '1' : '',
    FORCE_COLOR: '0',
    SYNCKIT_TIMEOUT: '',
    SYNCKIT_EXEC_ARGV: '',
    SYNCKIT_TS_RUNNER: '',
    SYNCKIT_GLOBAL_SHIMS: ''
  })
  for (const key of ['SYNCKIT_TIMEOUT', 'SYNCKIT_EXEC_ARGV', 'SYNCKIT_TS_RUNNER', 'SYNCKIT_GLOBAL_SHIMS', 'NODE_OPTIONS']) delete env[key]
  const args = ['--experimental-vm-modules', jest, '--ci', '--json', '--outputFile', out, '--rootDir', dir, '--runTestsByPath', file]
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), FILE_LIMIT_MS)
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      let results = null
      try {
        results = JSON.parse(fs.readFileSync(out, 'utf8'))
      } catch {}
      resolve({ code, signal, output, results })
    })
  })
}

// The test files of the extracted suite, relative to `dir`.
function testFiles (dir) {
  const found = []
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = path.posix.join(rel, e.name)
      if (e.isDirectory()) walk(r)
      else if (/\.spec\.[cm]?[jt]s$/.test(e.name)) found.push(r)
    }
  }
  walk('test')
  return found.sort()
}

// Into `map` (test file -> test name -> status): one jest run's results.
function outcomes (map, dir, results) {
  for (const file of results.testResults) {
    const rel = path.relative(dir, file.name).split(path.sep).join('/')
    const tests = new Map()
    for (const a of file.assertionResults) tests.set(a.fullName, a.status)
    if (file.assertionResults.length === 0) {
      // eslint-disable-next-line no-control-regex
      const why = (file.message || '').replace(/\u001b\[[0-9;]*m/g, '').split('\n').map((l) => l.trim()).find((l) => l && !l.startsWith('●'))
      tests.set('(the file)', file.status === 'passed' ? 'passed' : `failed: ${(why || 'no test ran').slice(0, 100)}`)
    }
    map.set(rel, tests)
  }
}

// jest's summary of a run of one file: its lines for each test, and the
// totals.
function summaryOf (output) {
  return output.split('\n').filter((l) => /^(PASS|FAIL) |^\s+[✓✕○] |^Tests: /.test(l)).join('\n')
}

function exclusionOf (file, test) {
  return EXCLUDED_FILES[file] || EXCLUDED_TESTS[test] || null
}

const mark = (s) => s === undefined ? 'not run' : s === 'passed' ? 'pass' : s === 'pending' ? 'skipped' : s.startsWith('failed: ') ? 'FAIL (' + s.slice(8) + ')' : s === 'failed' ? 'FAIL' : s

// The suite under `bin` (a process of its own): { code, summary }.
function runUnder (bin, repo, opts) {
  const args = [__filename, repo, '--here']
  if (opts.reliability) args.push('--reliability')
  if (opts.only) args.push('--only', opts.only)
  const env = Object.assign({}, process.env, { PATH: path.dirname(bin) + path.delimiter + process.env.PATH })
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
      process.stdout.write(d)
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      const m = /(\d+) of the (\d+) counted tests[^\n]*/.exec(out)
      resolve({ code: code === null ? 1 : code, summary: m ? m[0] : signal ? `killed (${signal})` : `exited ${code} without a summary` })
    })
  })
}

async function main () {
  const opts = parseArgs(process.argv.slice(2))
  if (opts.here) return runHere(opts)
  let repo = opts.repo
  if (repo === null) {
    const got = fetchRepo()
    if (got.error !== undefined) {
      console.log(`synckit suite: skipped: synckit's repository (${TAG}) could not be fetched: ${got.error}`)
      return 0
    }
    repo = got.dir
  } else if (!fs.existsSync(repo)) {
    console.log(`synckit suite: skipped: ${repo} does not exist`)
    return 0
  } else if (!hasCommit(repo)) {
    console.error(`synckit suite: ${repo} has no commit ${COMMIT} (synckit ${TAG}): fetch it (git fetch --tags)`)
    return 1
  }
  const { ensure } = require('./node-versions')
  const runs = []
  for (const major of opts.majors) {
    let bin
    try {
      bin = (await ensure([major], (line) => console.log(`  ${line}`)))[major].bin
    } catch (e) {
      runs.push({ major, summary: `not run: Node ${major} could not be had (${e.message.split('\n')[0]})`, code: 0 })
      continue
    }
    console.log(`\n=== Node ${major} (${bin})`)
    runs.push(Object.assign({ major }, await runUnder(bin, repo, opts)))
  }
  console.log('\nsynckit suite, by Node version:')
  for (const r of runs) console.log(`  Node ${r.major}: ${r.summary}${r.code !== 0 ? ' (FAILED)' : ''}`)
  return runs.some((r) => r.code !== 0) ? 1 : 0
}

// One run of the suite, under this Node, from `opts.repo`.
async function runHere (opts) {
  if (opts.repo === null || !hasCommit(opts.repo)) throw new Error(`--here needs a repository with commit ${COMMIT}`)
  const upstream = upstreamPackage(opts.repo)
  const version = upstream.version
  const realName = `synckit-${version}`
  const realDir = path.join(ROOT, 'node_modules', realName)
  if (!fs.existsSync(path.join(realDir, 'package.json'))) {
    console.error(`synckit suite: the real synckit ${version} is not installed as ${realName} (npm install --save-dev --save-exact ${realName}@npm:synckit@${version})`)
    return 1
  }
  const log = (line) => console.log(`  ${line}`)
  console.log(`synckit suite: synckit ${TAG} (${COMMIT.slice(0, 12)}), its runner: jest (${upstream.devDependencies.jest}), here jest ${require('jest/package.json').version} + ts-jest ${require('ts-jest/package.json').version}; Node ${process.version}`)

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'synckit-suite-'))
  const bin = path.join(tmp, 'bin')
  const found = await tools(bin, log)
  console.log(`  fixtures: yarn ${found.yarn ? `@yarnpkg/cli-dist ${found.yarn} (the fixture's yarnPath runs)` : `unavailable: ${found.yarnError}`}; bun ${found.bun || `unavailable: ${found.bunError}`}`)

  const impls = opts.only ? [opts.only] : ['synckit', 'shared-futex']
  const runs = {}
  try {
    for (const impl of impls) {
      const dir = path.join(tmp, impl)
      stage(opts.repo, dir, impl, realDir, version)
      const tests = new Map()
      runs[impl] = { dir, tests }
      console.log(`\n== ${impl === 'synckit' ? `synckit ${version} (npm)` : 'shared-futex/synckit'}`)
      for (const file of testFiles(dir)) {
        const started = Date.now()
        const r = await runJest(dir, file, bin, opts.reliability)
        const seconds = ((Date.now() - started) / 1000).toFixed(1)
        if (r.results !== null) {
          outcomes(tests, dir, r.results)
          console.log(summaryOf(r.output) + `  (${seconds} s)`)
        } else {
          const why = r.signal ? `hung: killed after ${seconds} s` : `jest exited ${r.code} without results`
          tests.set(file, new Map([['(the file)', `failed: ${why}`]]))
          console.log(`${file}: ${why}\n${r.output.split('\n').slice(-15).join('\n')}`)
        }
      }
    }
  } finally {
    if (!process.env.SYNCKIT_SUITE_KEEP) fs.rmSync(tmp, { recursive: true, force: true })
    else console.log(`kept ${tmp}`)
  }

  // The table: every test either run saw.
  const rows = []
  const files = new Set()
  for (const impl of impls) for (const file of runs[impl].tests.keys()) files.add(file)
  for (const file of [...files].sort()) {
    const names = new Set()
    for (const impl of impls) for (const name of (runs[impl].tests.get(file) || new Map()).keys()) names.add(name)
    for (const name of names) {
      const status = {}
      for (const impl of impls) status[impl] = (runs[impl].tests.get(file) || new Map()).get(name)
      rows.push({ file, name, status, excluded: exclusionOf(file, name) })
    }
  }
  console.log('\n| test file | test | synckit | shared-futex/synckit | note |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const row of rows) {
    console.log(`| ${row.file.replace(/^test\//, '')} | ${row.name} | ${mark(row.status.synckit)} | ${mark(row.status['shared-futex'])} | ${row.excluded ? 'not counted: ' + row.excluded : ''} |`)
  }
  if (impls.length < 2) return 0
  const counted = rows.filter((r) => !r.excluded && r.status.synckit === 'passed')
  const missing = counted.filter((r) => r.status['shared-futex'] !== 'passed')
  const byFile = new Map()
  for (const row of rows.filter((r) => !r.excluded)) {
    const f = byFile.get(row.file) || { synckit: 0, here: 0, total: 0 }
    f.total++
    if (row.status.synckit === 'passed') f.synckit++
    if (row.status['shared-futex'] === 'passed') f.here++
    byFile.set(row.file, f)
  }
  console.log('\n| test file (counted tests) | tests | pass on synckit | pass on shared-futex/synckit |')
  console.log('| --- | ---: | ---: | ---: |')
  for (const [file, f] of byFile) console.log(`| ${file.replace(/^test\//, '')} | ${f.total} | ${f.synckit} | ${f.here} |`)
  console.log(`\n${counted.length - missing.length} of the ${counted.length} counted tests that pass on synckit pass on shared-futex/synckit` +
    (missing.length ? `; failing here: ${missing.map((r) => `${r.file} › ${r.name}`).join('; ')}` : ''))
  return missing.length === 0 ? 0 : 1
}

main().then((code) => { process.exitCode = code }, (e) => {
  console.error(e)
  process.exitCode = 1
})
