'use strict'
// `require('shared-futex/synckit')`: a drop-in for synckit's createSyncFn /
// runAsWorker (its options, environment variables and TypeScript runners)
// over shared-futex's synchronous calls. See docs/synckit.md.
module.exports = require('./lib/synckit')
