'use strict'
const futex = require('./lib/futex')
const { AsyncLock } = require('./lib/lock')
const { Condition } = require('./lib/condition')
const { Semaphore } = require('./lib/semaphore')
const { Barrier } = require('./lib/barrier')
const { WaitGroup } = require('./lib/wait-group')
const { ManualResetEvent, AutoResetEvent } = require('./lib/event')
const { Once } = require('./lib/once')
const { RwLock } = require('./lib/rwlock')
const { Channel } = require('./lib/channel')
const { createSyncFn, serveSync } = require('./lib/sync-call')
const { SharedRegion } = require('./lib/region')
const errors = require('./lib/errors')

module.exports = {
  wait: futex.wait,
  notify: futex.notify,
  waitAsync: futex.waitAsync,
  setKeepAlive: futex.setKeepAlive,
  AsyncLock,
  Condition,
  Semaphore,
  Barrier,
  WaitGroup,
  ManualResetEvent,
  AutoResetEvent,
  Once,
  RwLock,
  Channel,
  createSyncFn,
  serveSync,
  SharedRegion,
  LockTimeoutError: errors.LockTimeoutError,
  AbortError: errors.AbortError,
  LockOwnershipError: errors.LockOwnershipError,
  DeadlockError: errors.DeadlockError,
  BarrierBrokenError: errors.BarrierBrokenError,
  NegativeCounterError: errors.NegativeCounterError,
  ChannelClosedError: errors.ChannelClosedError,
  ChannelDisconnectedError: errors.ChannelDisconnectedError,
  ChannelTimeoutError: errors.ChannelTimeoutError,
  SyncCallTimeoutError: errors.SyncCallTimeoutError,
  SyncWorkerError: errors.SyncWorkerError,
  AtomicsUnavailableError: errors.AtomicsUnavailableError,
  SharedRegionError: errors.SharedRegionError,
  ACQUIRED: errors.ACQUIRED,
  OWNER_DIED: errors.OWNER_DIED,
  E_TIMEOUT: errors.E_TIMEOUT,
  E_ABORTED: errors.E_ABORTED,
  E_NOT_OWNER: errors.E_NOT_OWNER,
  E_DEADLOCK: errors.E_DEADLOCK,
  E_BARRIER_BROKEN: errors.E_BARRIER_BROKEN,
  E_NEGATIVE_COUNTER: errors.E_NEGATIVE_COUNTER,
  E_CHANNEL_CLOSED: errors.E_CHANNEL_CLOSED,
  E_CHANNEL_TIMEOUT: errors.E_CHANNEL_TIMEOUT,
  E_CHANNEL_DISCONNECTED: errors.E_CHANNEL_DISCONNECTED,
  E_SYNC_CALL_TIMEOUT: errors.E_SYNC_CALL_TIMEOUT,
  E_SYNC_WORKER: errors.E_SYNC_WORKER,
  E_NO_ATOMICS: errors.E_NO_ATOMICS
}
