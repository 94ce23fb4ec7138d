'use strict'
// The errors and status values of the lock module. Every error has a stable
// `code` to compare against (the classes are also exported, for instanceof).
//
//   class               code                 when
//   LockTimeoutError    ERR_LOCK_TIMEOUT     a timeout passed before the lock / permit was acquired
//   AbortError          ABORT_ERR            the AbortSignal fired first (`cause` is signal.reason)
//   LockOwnershipError  ERR_LOCK_NOT_OWNER   unlock / Condition.wait by a thread that does not hold the lock
//   DeadlockError       ERR_LOCK_DEADLOCK    a blocking lock() by a thread that already holds the lock
//   BarrierBrokenError  ERR_BARRIER_BROKEN   a Barrier's generation was broken (a party timed out or aborted, or reset())
//   NegativeCounterError ERR_NEGATIVE_COUNTER a WaitGroup.add / done that would take the counter below zero
//   ChannelClosedError  ERR_CHANNEL_CLOSED   a send on a closed Channel, or a receive on a closed and drained one
//   ChannelDisconnectedError ERR_CHANNEL_DISCONNECTED  a ChannelClosedError: the channel closed itself because every receiver (or every sender) is gone
//   ChannelTimeoutError ERR_CHANNEL_TIMEOUT  a Channel send / receive whose timeout passed first
//   SyncCallTimeoutError ERR_SYNC_CALL_TIMEOUT a synchronous call (createSyncFn) whose timeout passed first
//   SyncWorkerError     ERR_SYNC_WORKER      the worker behind a synchronous call failed to start, threw, or ended
//   AtomicsUnavailableError ERR_NO_ATOMICS   a call that needs Atomics, in a runtime without it (lib/host.js)
//   SharedRegionError   ERR_REGION_*         a shared region that cannot be opened or used (lib/region.js lists the codes)
//
// AbortError has the name and code of Node's own AbortError, so code that
// checks `err.name === 'AbortError'` treats it like any aborted Node API.

const E_TIMEOUT = 'ERR_LOCK_TIMEOUT'
const E_ABORTED = 'ABORT_ERR'
const E_NOT_OWNER = 'ERR_LOCK_NOT_OWNER'
const E_DEADLOCK = 'ERR_LOCK_DEADLOCK'
const E_BARRIER_BROKEN = 'ERR_BARRIER_BROKEN'
const E_NEGATIVE_COUNTER = 'ERR_NEGATIVE_COUNTER'
const E_CHANNEL_CLOSED = 'ERR_CHANNEL_CLOSED'
const E_CHANNEL_TIMEOUT = 'ERR_CHANNEL_TIMEOUT'
const E_CHANNEL_DISCONNECTED = 'ERR_CHANNEL_DISCONNECTED'
const E_SYNC_CALL_TIMEOUT = 'ERR_SYNC_CALL_TIMEOUT'
const E_SYNC_WORKER = 'ERR_SYNC_WORKER'
const E_NO_ATOMICS = 'ERR_NO_ATOMICS'

// Acquisition outcomes. OWNER_DIED means: acquired, but the previous owner's
// thread ended while holding the lock (POSIX robust mutexes' EOWNERDEAD), so
// the state the lock protects may be half-updated.
const ACQUIRED = 'acquired'
const OWNER_DIED = 'owner-died'

// Error subclasses without class fields (the package supports Node 12).
function define (name, code, defaultMessage) {
  class E extends Error {
    constructor (message, options) {
      super(message || defaultMessage)
      if (options && 'cause' in options) {
        Object.defineProperty(this, 'cause', { value: options.cause, writable: true, configurable: true })
      }
    }
  }
  Object.defineProperty(E, 'name', { value: name })
  Object.defineProperty(E.prototype, 'name', { value: name, writable: true, configurable: true })
  Object.defineProperty(E.prototype, 'code', { value: code, writable: true, configurable: true })
  return E
}

const LockTimeoutError = define('LockTimeoutError', E_TIMEOUT, 'The timeout passed before the lock was acquired')
const AbortError = define('AbortError', E_ABORTED, 'The operation was aborted')
const LockOwnershipError = define('LockOwnershipError', E_NOT_OWNER, 'The lock is not held by this thread')
const DeadlockError = define('DeadlockError', E_DEADLOCK, 'This thread already holds the lock')
const BarrierBrokenError = define('BarrierBrokenError', E_BARRIER_BROKEN, 'The barrier is broken: a party timed out or aborted, or it was reset')
const NegativeCounterError = define('NegativeCounterError', E_NEGATIVE_COUNTER, 'The counter would go below zero')
const ChannelClosedError = define('ChannelClosedError', E_CHANNEL_CLOSED, 'The channel is closed')
// A ChannelClosedError (iteration ends on it, code that catches the closed
// case catches it) with its own name and code.
class ChannelDisconnectedError extends ChannelClosedError {}
Object.defineProperty(ChannelDisconnectedError, 'name', { value: 'ChannelDisconnectedError' })
Object.defineProperty(ChannelDisconnectedError.prototype, 'name', { value: 'ChannelDisconnectedError', writable: true, configurable: true })
Object.defineProperty(ChannelDisconnectedError.prototype, 'code', { value: E_CHANNEL_DISCONNECTED, writable: true, configurable: true })
const ChannelTimeoutError = define('ChannelTimeoutError', E_CHANNEL_TIMEOUT, 'The timeout passed first')
const SyncCallTimeoutError = define('SyncCallTimeoutError', E_SYNC_CALL_TIMEOUT, 'The synchronous call did not return within its timeout')
const SyncWorkerError = define('SyncWorkerError', E_SYNC_WORKER, 'The worker behind the synchronous call is gone')
const AtomicsUnavailableError = define('AtomicsUnavailableError', E_NO_ATOMICS, 'This runtime has no Atomics')

// One class for every failure of a shared region; `code` tells which.
class SharedRegionError extends Error {
  constructor (code, message) {
    super(message)
    Object.defineProperty(this, 'code', { value: code, writable: true, configurable: true, enumerable: true })
  }
}
Object.defineProperty(SharedRegionError.prototype, 'name', { value: 'SharedRegionError', writable: true, configurable: true })

function abortError (signal) {
  return new AbortError(undefined, { cause: signal.reason })
}

module.exports = {
  LockTimeoutError,
  AbortError,
  LockOwnershipError,
  DeadlockError,
  BarrierBrokenError,
  NegativeCounterError,
  ChannelClosedError,
  ChannelDisconnectedError,
  ChannelTimeoutError,
  SyncCallTimeoutError,
  SyncWorkerError,
  AtomicsUnavailableError,
  SharedRegionError,
  abortError,
  E_TIMEOUT,
  E_ABORTED,
  E_NOT_OWNER,
  E_DEADLOCK,
  E_BARRIER_BROKEN,
  E_NEGATIVE_COUNTER,
  E_CHANNEL_CLOSED,
  E_CHANNEL_TIMEOUT,
  E_CHANNEL_DISCONNECTED,
  E_SYNC_CALL_TIMEOUT,
  E_SYNC_WORKER,
  E_NO_ATOMICS,
  ACQUIRED,
  OWNER_DIED
}
