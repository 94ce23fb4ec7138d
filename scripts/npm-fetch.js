'use strict'
// Packages fetched from the npm registry into a prefix of their own, outside
// the project's dependency tree: old Node binaries for the version matrix,
// foreign Node, Bun and Deno binaries for the platform checks. Each prefix
// gets a package.json of its own so that npm does not treat the project as
// its root. `force` installs a package whose os/cpu fields do not match this
// machine (an arm64 or Windows Node fetched to run under emulation).
const { spawn } = require('child_process')
const fs = require('fs')
const path = require('path')

function install (prefix, specs, { force = false } = {}) {
  fs.mkdirSync(prefix, { recursive: true })
  const manifest = path.join(prefix, 'package.json')
  if (!fs.existsSync(manifest)) fs.writeFileSync(manifest, '{ "private": true }\n')
  const args = ['install', '--no-save', '--no-package-lock', '--no-audit', '--no-fund',
    '--loglevel=error', '--prefix', prefix].concat(force ? ['--force'] : [], specs)
  return new Promise((resolve, reject) => {
    const child = spawn('npm', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    child.on('error', reject)
    child.on('exit', (code) => {
      if (code === 0) resolve()
      else reject(new Error(`npm ${args.join(' ')} exited with ${code}\n${output}`))
    })
  })
}

// Where package `name` lands inside `prefix`.
function packageDir (prefix, name) {
  return path.join(prefix, 'node_modules', ...name.split('/'))
}

module.exports = { install, packageDir }
