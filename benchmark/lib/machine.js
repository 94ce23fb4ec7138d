'use strict'
// Where a run happened: shown in the table, the JSON and the chart.

const os = require('os')
const { execFileSync } = require('child_process')
const { ROOT } = require('./impl')

function git (args) {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return null
  }
}

function machine () {
  const cpus = os.cpus()
  const commit = git(['rev-parse', '--short', 'HEAD'])
  const dirty = git(['status', '--porcelain', '--untracked-files=no', '--', 'src', 'crates', 'lib', 'index.js'])
  return {
    cpu: cpus.length ? cpus[0].model.trim() : 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    v8: process.versions.v8,
    commit: commit ? commit + (dirty ? ' (modified)' : '') : null
  }
}

function describe (m) {
  return `${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}, Node ${m.node}` +
    (m.commit ? `, commit ${m.commit}` : '')
}

module.exports = { machine, describe }
