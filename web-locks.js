'use strict'
// `require('shared-futex/web-locks')`: the W3C Web Locks API (`locks`,
// `LockManager`, `Lock`) with one lock manager for the whole process, shared
// by every thread. See docs/web-locks.md.
const { locks, LockManager, Lock, setKeepAlive } = require('./lib/web-locks')

module.exports = { locks, LockManager, Lock, setKeepAlive }
