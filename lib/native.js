'use strict'
// The compiled addon, through the loader napi-rs generates (binding.js). When
// no binary loads, the loader's own error says little ("Cannot find native
// binding"); this one names the platform, what was tried and what to do.
const path = require('path')

function loadError (cause) {
  const { host, publishedPackages } = require('./platform')
  const h = host()
  const published = publishedPackages()
  const shipped = published.map((name) => name.slice('shared-futex-'.length))
  const tried = [
    `the source build ${path.basename(h.localFile)} in the package directory`,
    `the prebuilt package ${h.packageName}` +
      (published.length > 0 && !published.includes(h.packageName) ? ' (not published for this platform)' : '')
  ]
  const lines = [
    `shared-futex: no native binary for ${h.suffix} ` +
      `(${h.description}, Node ${process.version}).`,
    `Tried: ${tried.join('; ')}.`,
    'To fix it, either:',
    shipped.length > 0
      ? `- on a platform with a prebuilt binary (${shipped.join(', ')}), reinstall with optional dependencies ` +
        'enabled (not --omit=optional or --no-optional; a lockfile made on another platform can also ' +
        'leave it out: remove node_modules and package-lock.json, then npm install), or'
      : '- install a release of shared-futex from the npm registry, which ships prebuilt binaries, or',
    '- install a Rust toolchain (https://rustup.rs, Rust 1.88 or newer) and build from source: ' +
      'npm rebuild shared-futex --build-from-source'
  ]
  const error = new Error(lines.join('\n'))
  error.code = 'ERR_SHARED_FUTEX_NO_BINARY'
  error.cause = cause
  return error
}

const addon = require('./addon-file')

// The .node file binding.js loaded (a WebAssembly fallback has none).
function fileOf () {
  const loader = require.cache[require.resolve('../binding.js')]
  const child = loader === undefined ? undefined : loader.children.find((m) => /\.node$/.test(m.id))
  return child === undefined ? null : child.id
}

let binding = null
if (addon.file !== null) {
  try {
    binding = require(addon.file)
  } catch {
    addon.file = null
  }
}
if (binding === null) {
  try {
    binding = require('../binding.js')
  } catch (e) {
    throw loadError(e)
  }
  addon.file = fileOf()
}
module.exports = binding
