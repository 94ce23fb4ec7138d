// ESM entry: the same module instance as the CommonJS one.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./index.js')
export const { wait, notify, waitAsync, setKeepAlive } = cjs
export const { AsyncLock, Condition, Semaphore, Barrier, WaitGroup, ManualResetEvent, AutoResetEvent, Once, RwLock } = cjs
export const { LockTimeoutError, AbortError, LockOwnershipError, DeadlockError, BarrierBrokenError, NegativeCounterError, AtomicsUnavailableError } = cjs
export const { ACQUIRED, OWNER_DIED, E_TIMEOUT, E_ABORTED, E_NOT_OWNER, E_DEADLOCK, E_BARRIER_BROKEN, E_NEGATIVE_COUNTER, E_NO_ATOMICS } = cjs
export default cjs
