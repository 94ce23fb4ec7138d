'use strict'
// The package's `install` script. It needs nothing but Node and, for a
// source build, the user's own `cargo`: a project that installs the package
// never gets our devDependencies.
//
// 1. A prebuilt binary: npm installed the platform package
//    `shared-futex-<suffix>` (an optional dependency) and it loads. Done.
// 2. Otherwise, or with `--build-from-source` (npm_config_build_from_source),
//    build the shipped Rust sources with cargo into
//    `shared-futex.<suffix>.node`, the file the loader tries first.
// 3. With neither, fail with one message that says why and what to do. The
//    install fails rather than leaving a package that throws at its first
//    `require`, so the problem shows when installing, not in production.
//
// An install for another platform (`npm install --os=... --cpu=...
// --libc=...`, e.g. to assemble a container image) builds nothing: only the
// target's prebuilt package can serve there.
const { spawn, spawnSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { NAME, ROOT, host } = require('../lib/platform')

const log = (line) => console.log(`${NAME}: ${line}`)

function truthy (value) {
  return value !== undefined && value !== '' && value !== 'false' && value !== '0'
}

// npm passes `--build-from-source` (also `--build-from-source=shared-futex`,
// the form that names packages) to scripts as npm_config_build_from_source.
function fromSourceRequested () {
  const v = process.env.npm_config_build_from_source
  if (!truthy(v)) return false
  return v === 'true' || v.split(',').map((s) => s.trim()).includes(NAME)
}

// The platform npm installs for, when told another one than this machine's.
function foreignTarget (h) {
  const wanted = {
    platform: process.env.npm_config_os,
    arch: process.env.npm_config_cpu,
    libc: process.env.npm_config_libc === 'glibc' ? 'gnu' : process.env.npm_config_libc
  }
  const differs = (key) => truthy(wanted[key]) && wanted[key] !== h[key] && !(key === 'libc' && h.libc === null)
  return ['platform', 'arch', 'libc'].some(differs) ? wanted : null
}

function prebuiltLoads (h) {
  let dir
  try {
    dir = path.dirname(require.resolve(`${h.packageName}/package.json`, { paths: [ROOT] }))
  } catch (e) {
    return false
  }
  try {
    require(require.resolve(h.packageName, { paths: [ROOT] }))
    return true
  } catch (e) {
    log(`the prebuilt package ${h.packageName} (${dir}) is installed but does not load here:`)
    log(`  ${String(e && e.message).split('\n')[0]}`)
    return false
  }
}

function cargoVersion (cargo) {
  const r = spawnSync(cargo, ['--version'], { encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim() : null
}

function noCargoMessage (h) {
  return [
    `no prebuilt binary for ${h.suffix} (${h.description}) is installed, and cargo was not found to build one.`,
    `Tried: the package ${h.packageName} (not installed: npm installs it only where it is published, ` +
      'and not with --omit=optional or --no-optional), and `cargo` on PATH (or $CARGO).',
    'To fix it, either:',
    '- install on a platform with prebuilt binaries (see the README: Linux x64/arm64 glibc and musl, ' +
      'Windows x64, macOS x64/arm64), with optional dependencies enabled, or',
    '- install a Rust toolchain (https://rustup.rs, Rust 1.88 or newer) and run `npm rebuild shared-futex`.'
  ].join('\n')
}

// The cdylib cargo wrote, from its JSON messages.
function artifactOf (stdout) {
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue
    const msg = JSON.parse(line)
    if (msg.reason !== 'compiler-artifact' || !msg.target.kind.includes('cdylib')) continue
    const lib = msg.filenames.find((f) => /\.(so|dylib|dll)$/.test(f))
    if (lib) return lib
  }
  return null
}

function buildFromSource (h, cargo) {
  // A build inside node_modules goes to a temporary target directory that is
  // removed afterwards (it holds hundreds of MB); a checkout of the repository
  // keeps ./target for incremental builds; CARGO_TARGET_DIR always wins.
  const dependency = ROOT.split(path.sep).includes('node_modules')
  const ownTarget = !process.env.CARGO_TARGET_DIR && dependency
  const targetDir = process.env.CARGO_TARGET_DIR ||
    (ownTarget ? fs.mkdtempSync(path.join(os.tmpdir(), `${NAME}-build-`)) : path.join(ROOT, 'target'))
  const args = ['build', '--release', '--locked', '--lib', '-p', NAME,
    '--message-format=json-render-diagnostics', '--target-dir', targetDir]
  log(`building ${path.basename(h.localFile)} from source with ${cargoVersion(cargo)}`)
  const started = Date.now()
  return new Promise((resolve, reject) => {
    // Diagnostics and progress go to stderr as cargo prints them; stdout
    // carries the JSON messages that name the artifact.
    const child = spawn(cargo, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      try {
        if (code !== 0) {
          throw new Error(`cargo ${args.join(' ')} failed (${signal || `exit code ${code}`}); ` +
            'the Rust toolchain must be 1.88 or newer (rustup update)')
        }
        const lib = artifactOf(stdout)
        if (!lib) throw new Error('cargo reported no cdylib artifact')
        fs.copyFileSync(lib, h.localFile)
        log(`built ${path.basename(h.localFile)} in ${((Date.now() - started) / 1000).toFixed(0)} s`)
        resolve()
      } catch (e) {
        reject(e)
      } finally {
        // fs.rmSync is Node 14.14+; rmdirSync's recursive form serves Node 12.
        if (ownTarget) (fs.rmSync || fs.rmdirSync)(targetDir, { recursive: true, force: true })
      }
    })
  })
}

async function main () {
  const h = host()
  const foreign = foreignTarget(h)
  if (foreign) {
    log(`installing for ${[foreign.platform, foreign.arch, foreign.libc].filter(truthy).join('/')} ` +
      `on ${h.suffix}: nothing is built here; that platform needs its prebuilt package`)
    return
  }
  const fromSource = fromSourceRequested()
  if (!fromSource && prebuiltLoads(h)) return
  const cargo = process.env.CARGO || 'cargo'
  if (!cargoVersion(cargo)) {
    if (fromSource) throw new Error(`--build-from-source needs cargo, and \`${cargo} --version\` did not run.\n${noCargoMessage(h)}`)
    throw new Error(noCargoMessage(h))
  }
  await buildFromSource(h, cargo)
}

main().catch((e) => {
  console.error(`${NAME}: ${e.message}`)
  process.exitCode = 1
})
