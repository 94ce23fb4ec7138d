'use strict'
// `require('shared-futex/web-locks/postgres')`: the Web Locks API over
// PostgreSQL advisory locks, for every client of a namespace on any machine
// (`pg` is a peer dependency). See docs/web-locks-postgres.md.
const { PostgresLockManager, PostgresLockError } = require('./lib/web-locks-postgres')

module.exports = { PostgresLockManager, PostgresLockError }
