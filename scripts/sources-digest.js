'use strict'
// A digest of everything that goes into the native binary: the Rust sources
// of both crates and the Cargo files. scripts/build-targets.js records it for
// each binary it builds; the package test refuses binaries whose digest is
// not the current one, so a stale artifacts/ is never published as if it had
// been built from this tree.
const crypto = require('crypto')
const fs = require('fs')
const path = require('path')

const ROOT = path.join(__dirname, '..')
const INPUTS = ['Cargo.toml', 'Cargo.lock', 'build.rs', 'src', 'crates/futex-core/Cargo.toml', 'crates/futex-core/src']

function files (rel) {
  const abs = path.join(ROOT, rel)
  if (!fs.statSync(abs).isDirectory()) return [rel]
  return fs.readdirSync(abs).sort().flatMap((name) => files(path.posix.join(rel, name)))
}

function sourcesDigest () {
  const hash = crypto.createHash('sha256')
  for (const rel of INPUTS.flatMap(files)) {
    hash.update(`${rel}\0`)
    hash.update(fs.readFileSync(path.join(ROOT, rel)))
    hash.update('\0')
  }
  return hash.digest('hex')
}

module.exports = { sourcesDigest }
