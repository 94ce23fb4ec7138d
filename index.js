'use strict'
const futex = require('./lib/futex')
const { AsyncLock } = require('./lib/lock')
const { Condition } = require('./lib/condition')
const { Semaphore } = require('./lib/semaphore')
const { RwLock } = require('./lib/rwlock')
const errors = require('./lib/errors')

module.exports = {
  wait: futex.wait,
  notify: futex.notify,
  waitAsync: futex.waitAsync,
  setKeepAlive: futex.setKeepAlive,
  AsyncLock,
  Condition,
  Semaphore,
  RwLock,
  LockTimeoutError: errors.LockTimeoutError,
  AbortError: errors.AbortError,
  LockOwnershipError: errors.LockOwnershipError,
  DeadlockError: errors.DeadlockError,
  ACQUIRED: errors.ACQUIRED,
  OWNER_DIED: errors.OWNER_DIED,
  E_TIMEOUT: errors.E_TIMEOUT,
  E_ABORTED: errors.E_ABORTED,
  E_NOT_OWNER: errors.E_NOT_OWNER,
  E_DEADLOCK: errors.E_DEADLOCK
}
