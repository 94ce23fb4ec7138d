'use strict'
// `require('shared-futex/atomics-mutex')`: the shape of the shared-structs
// proposal's Atomics.Mutex, Atomics.Mutex.UnlockToken and Atomics.Condition
// (and of V8's --harmony-struct forms) over this package's AsyncLock and
// Condition. See the README, "Atomics.Mutex shape".
const { Mutex, Condition, UnlockToken } = require('./lib/atomics-mutex')

module.exports = { Mutex, Condition, UnlockToken }
