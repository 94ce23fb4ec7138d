'use strict'
// `require('shared-futex/polyfill')`: installs Atomics.waitAsync (and routes
// this thread's Atomics.wait and Atomics.notify through the same queue) where
// Atomics.waitAsync is missing. See docs/polyfill.md.
const polyfill = require('./lib/polyfill')

polyfill.install()

module.exports = {
  install: polyfill.install,
  uninstall: polyfill.uninstall,
  isInstalled: polyfill.isInstalled
}
