// ESM entry: the same module instance as the CommonJS one.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./index.js')
export const { wait, notify, waitAsync, setKeepAlive } = cjs
export const { AsyncLock, Condition, Semaphore, Barrier, WaitGroup, ManualResetEvent, AutoResetEvent, Once, RwLock, Channel, createSyncFn, serveSync, SharedRegion, SharedRegionError } = cjs
export const { LockTimeoutError, AbortError, LockOwnershipError, DeadlockError, BarrierBrokenError, NegativeCounterError, AtomicsUnavailableError } = cjs
export const { ChannelClosedError, ChannelDisconnectedError, ChannelTimeoutError, SyncCallTimeoutError, SyncWorkerError } = cjs
export const { ACQUIRED, OWNER_DIED, E_TIMEOUT, E_ABORTED, E_NOT_OWNER, E_DEADLOCK, E_BARRIER_BROKEN, E_NEGATIVE_COUNTER, E_NO_ATOMICS } = cjs
export const { E_CHANNEL_CLOSED, E_CHANNEL_TIMEOUT, E_CHANNEL_DISCONNECTED, E_SYNC_CALL_TIMEOUT, E_SYNC_WORKER } = cjs
export default cjs
