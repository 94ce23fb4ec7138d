'use strict'
// Where a run happened: shown in the table, the JSON and the chart.

const os = require('os')
const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { execFileSync } = require('child_process')
const { ROOT } = require('./impl')
const { childrenCpu } = require('./child')

function git (args) {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return null
  }
}

// Which build of the addon ran: the commit says what the sources were, the
// binary's hash says whether it was rebuilt from them.
function addon () {
  const file = fs.readdirSync(ROOT).find((f) => f.endsWith('.node'))
  if (!file) return null
  const hash = crypto.createHash('sha256').update(fs.readFileSync(path.join(ROOT, file))).digest('hex')
  return { file, sha256: hash.slice(0, 16) }
}

// The 1-minute load average (which includes the benchmark's own threads).
function load () {
  return Math.round(os.loadavg()[0] * 100) / 100
}

// CPU time used by everything on the machine (from /proc/stat, Linux) and by
// this process and its measurement children, in seconds: two readings give
// how busy *other* processes kept the machine meanwhile. Null where
// /proc/stat does not exist.
function cpuClock () {
  let busy = null
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal ...: busy = all but idle and iowait
    busy = (fields.reduce((a, b) => a + b, 0) - fields[3] - (fields[4] || 0)) / 100 // USER_HZ is 100 on Linux
  } catch {}
  const own = process.cpuUsage()
  return { at: Date.now(), busy, own: (own.user + own.system) / 1e6 + childrenCpu() / 1000 }
}

// Share (0..1) of the machine's CPUs used by other processes between two readings.
function othersShare (a, b) {
  if (a.busy == null || b.busy == null) return null
  const wall = (b.at - a.at) / 1000
  if (wall <= 0) return null
  const others = (b.busy - a.busy) - (b.own - a.own)
  return Math.max(0, Math.round((others / (wall * os.cpus().length)) * 100) / 100)
}

// The CPUs this process may run on (Linux), e.g. "0" under `taskset -c 0`;
// null if unknown or all of them.
function cpusAllowed () {
  try {
    const m = /^Cpus_allowed_list:\s*(\S+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))
    if (!m) return null
    const all = os.cpus().length === 1 ? '0' : `0-${os.cpus().length - 1}`
    return m[1] === all ? null : m[1]
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
    commit: commit ? commit + (dirty ? ' (modified)' : '') : null,
    addon: addon(),
    cpusAllowed: cpusAllowed(),
    loadAtStart: load()
  }
}

function describe (m) {
  return `${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}, Node ${m.node}` +
    (m.commit ? `, commit ${m.commit}` : '') +
    (m.cpusAllowed ? `; every thread on CPU ${m.cpusAllowed} only` : '')
}

module.exports = { machine, describe, load, cpuClock, othersShare }
