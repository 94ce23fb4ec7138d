'use strict'
// `require('shared-futex/web-locks/polyfill')`: installs this package's Web
// Locks as `navigator.locks` (and `worker_threads.locks`, `LockManager`,
// `Lock`) where the running Node has none. See docs/web-locks.md.
const polyfill = require('./lib/web-locks-polyfill')

polyfill.install()

module.exports = { install: polyfill.install, isInstalled: polyfill.isInstalled }
