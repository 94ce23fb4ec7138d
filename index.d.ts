// Types of `shared-futex`: the futex core (wait / notify / waitAsync /
// setKeepAlive) and the synchronisation primitives built on it (AsyncLock,
// Condition, Semaphore, Barrier, WaitGroup, ManualResetEvent,
// AutoResetEvent, Once, RwLock), with their errors; Channel and the
// synchronous calls built on them (createSyncFn / serveSync). Hand-written; the generated
// binding's types are in binding.d.ts and are not part of the public API.

// `Symbol.dispose` for TypeScript libs older than ESNext's disposable (as
// @types/node also declares it); identical to the lib's where both exist.
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol
  }
}

/** A typed array `wait`, `notify` and `waitAsync` accept. */
export type WaitableArray = Int32Array | BigInt64Array

/**
 * Blocks the calling thread while `typedArray[index]` holds `value`, until a
 * `notify` on that location wakes it or `timeout` ms pass. Exactly the
 * semantics of `Atomics.wait` (ES2024): returns `'not-equal'` at once if the
 * value differs, else `'ok'` (notified) or `'timed-out'`. `timeout`:
 * `undefined`, `NaN` and `Infinity` wait forever. Allowed where
 * `Atomics.wait` is: in workers and on Node's main thread (where it blocks
 * the event loop, as `Atomics.wait` does). Waiters of one location, blocking
 * or async, from every thread, form one FIFO queue: the module's own, which
 * a native `Atomics.notify` does not reach (nor does this `notify` reach a
 * native `Atomics.wait`). A worker blocked here still obeys `terminate()`.
 *
 * @throws {TypeError} not an `Int32Array`/`BigInt64Array` on a `SharedArrayBuffer`, or a value of the wrong kind;
 *   or, once the arguments are converted, where the host forbids blocking on this thread (V8's own
 *   `Atomics.wait` TypeError, whatever the value and timeout; `waitAsync` still works there)
 * @throws {RangeError} `index` out of range
 */
export function wait (typedArray: Int32Array, index: number, value: number, timeout?: number): 'ok' | 'not-equal' | 'timed-out'
export function wait (typedArray: BigInt64Array, index: number, value: bigint, timeout?: number): 'ok' | 'not-equal' | 'timed-out'

/**
 * Wakes up to `count` waiters (default: all) of `typedArray[index]`, oldest
 * first, blocking and async alike, in any thread. Returns how many woke. On a
 * non-shared array returns 0. The semantics of `Atomics.notify`.
 */
export function notify (typedArray: WaitableArray, index: number, count?: number): number

/** What `waitAsync` returns. */
export type WaitAsyncResult =
  | { async: false; value: 'not-equal' | 'timed-out' }
  | { async: true; value: Promise<'ok' | 'timed-out'> }

/**
 * Waits without blocking: `{ async: false, value: 'not-equal' }` if the value
 * differs, `{ async: false, value: 'timed-out' }` for a zero timeout, else
 * `{ async: true, value }` with a promise of `'ok'` or `'timed-out'` (never
 * rejected). The semantics of `Atomics.waitAsync`. Like the native one, a
 * pending waiter does not keep the process alive unless `setKeepAlive(true)`
 * was called on this thread before it was created.
 */
export function waitAsync (typedArray: Int32Array, index: number, value: number, timeout?: number): WaitAsyncResult
export function waitAsync (typedArray: BigInt64Array, index: number, value: bigint, timeout?: number): WaitAsyncResult

/**
 * Sets whether the `waitAsync` waiters this thread creates from now on keep
 * the event loop alive until they settle. Returns the previous setting
 * (initially `false`). The primitives below (locks, condition, semaphore,
 * barrier, wait group, events, once) always keep it alive while one of their
 * async waits is pending, whatever this setting.
 */
export function setKeepAlive (enabled: boolean): boolean

// --- errors and status values ---------------------------------------------

/** `'acquired'`: the lock was taken normally. */
export const ACQUIRED: 'acquired'
/**
 * `'owner-died'`: the lock was taken, but its previous owner's thread ended
 * while holding it (like POSIX `EOWNERDEAD`): the data it protects may be
 * half-updated. Repair it before relying on it.
 */
export const OWNER_DIED: 'owner-died'
/** How an acquisition went. */
export type LockStatus = typeof ACQUIRED | typeof OWNER_DIED

/** `code` of LockTimeoutError. */
export const E_TIMEOUT: 'ERR_LOCK_TIMEOUT'
/** `code` of AbortError (Node's own AbortError uses the same). */
export const E_ABORTED: 'ABORT_ERR'
/** `code` of LockOwnershipError. */
export const E_NOT_OWNER: 'ERR_LOCK_NOT_OWNER'
/** `code` of DeadlockError. */
export const E_DEADLOCK: 'ERR_LOCK_DEADLOCK'
/** `code` of BarrierBrokenError. */
export const E_BARRIER_BROKEN: 'ERR_BARRIER_BROKEN'
/** `code` of NegativeCounterError. */
export const E_NEGATIVE_COUNTER: 'ERR_NEGATIVE_COUNTER'
/** `code` of ChannelClosedError. */
export const E_CHANNEL_CLOSED: 'ERR_CHANNEL_CLOSED'
/** `code` of ChannelTimeoutError. */
export const E_CHANNEL_TIMEOUT: 'ERR_CHANNEL_TIMEOUT'
/** `code` of ChannelDisconnectedError. */
export const E_CHANNEL_DISCONNECTED: 'ERR_CHANNEL_DISCONNECTED'
/** `code` of SyncCallTimeoutError. */
export const E_SYNC_CALL_TIMEOUT: 'ERR_SYNC_CALL_TIMEOUT'
/** `code` of SyncWorkerError. */
export const E_SYNC_WORKER: 'ERR_SYNC_WORKER'
/** `code` of AtomicsUnavailableError. */
export const E_NO_ATOMICS: 'ERR_NO_ATOMICS'

/** The timeout passed before the lock or permit was acquired. Nothing is held, nothing stays queued. */
export class LockTimeoutError extends Error {
  readonly name: 'LockTimeoutError'
  readonly code: 'ERR_LOCK_TIMEOUT'
}

/** The AbortSignal fired first; `cause` is `signal.reason`. Nothing is held, nothing stays queued. */
export class AbortError extends Error {
  readonly name: 'AbortError'
  readonly code: 'ABORT_ERR'
  readonly cause?: unknown
}

/**
 * `unlock()` (or `Condition.wait`, `RwLock.writeUnlock`, `readUnlock`,
 * `downgrade`) by a thread that does not hold the lock. The message names
 * the holder.
 */
export class LockOwnershipError extends Error {
  readonly name: 'LockOwnershipError'
  readonly code: 'ERR_LOCK_NOT_OWNER'
}

/**
 * A blocking `lock()` by a thread that already holds the lock (or a blocking
 * `RwLock.read` / `write` by the thread holding its write lock, or `write`
 * by a thread holding a read lock in one of its slots, or a Web Locks
 * `requestSync` behind its own thread or closing a cycle of blocked
 * threads), which would never return.
 */
export class DeadlockError extends Error {
  readonly name: 'DeadlockError'
  readonly code: 'ERR_LOCK_DEADLOCK'
  /**
   * Web Locks' `requestSync` only, when blocking would have closed a cycle
   * of threads blocked in `requestSync`: each `{ clientId, name }` waits for
   * `name` on a lock or request of the next one's thread, and the last on
   * this thread's (this thread first).
   */
  readonly cycle?: ReadonlyArray<{ readonly clientId: string, readonly name: string }>
}

/**
 * A Barrier's generation was broken: a party timed out or aborted, or
 * `reset()` was called while parties waited. Every later `wait` throws it
 * too, until `reset()`.
 */
export class BarrierBrokenError extends Error {
  readonly name: 'BarrierBrokenError'
  readonly code: 'ERR_BARRIER_BROKEN'
}

/** A WaitGroup's counter would have gone below zero; it is left unchanged. */
export class NegativeCounterError extends Error {
  readonly name: 'NegativeCounterError'
  readonly code: 'ERR_NEGATIVE_COUNTER'
}

/** A send on a closed Channel, or a receive on a closed one with nothing left in it. */
export class ChannelClosedError extends Error {
  readonly name: 'ChannelClosedError' | 'ChannelDisconnectedError'
  readonly code: 'ERR_CHANNEL_CLOSED' | 'ERR_CHANNEL_DISCONNECTED'
}

/**
 * A ChannelClosedError: the channel closed itself because every receiver
 * (sends fail) or every sender (receivers drain, then see the end) is gone:
 * ended, or left (docs/channel.md, "Senders and receivers").
 */
export class ChannelDisconnectedError extends ChannelClosedError {
  readonly name: 'ChannelDisconnectedError'
  readonly code: 'ERR_CHANNEL_DISCONNECTED'
}

/** A Channel send / receive whose timeout passed first: nothing was sent or taken. */
export class ChannelTimeoutError extends Error {
  readonly name: 'ChannelTimeoutError'
  readonly code: 'ERR_CHANNEL_TIMEOUT'
}

/** A synchronous call that did not return within its timeout; its late answer is dropped. */
export class SyncCallTimeoutError extends Error {
  readonly name: 'SyncCallTimeoutError'
  readonly code: 'ERR_SYNC_CALL_TIMEOUT'
}

/**
 * The worker behind a synchronous call failed to start (its module could not
 * be loaded, threw while loading, or never called serveSync), threw outside a
 * call, or ended (process.exit, terminated). The message says which; `cause`
 * is the worker's error where it reported one. Every later call throws it too.
 */
export class SyncWorkerError extends Error {
  readonly name: 'SyncWorkerError'
  readonly code: 'ERR_SYNC_WORKER'
  readonly cause?: unknown
  /**
   * Why: 'start' (failed to start, the Worker could not be constructed too),
   * 'uncaught' (threw outside a call), 'exit' (exited or ended), 'closed' (a
   * call after `close()`), 'preload' (a synchronous call refused in a preload
   * of a createSyncFn worker, before its module loaded).
   */
  readonly reason: 'start' | 'uncaught' | 'exit' | 'closed' | 'preload'
}

/**
 * The runtime has no `Atomics` global (`node --no-harmony-atomics`): thrown
 * by the constructor of every primitive, which all need it. `wait`,
 * `notify` and `waitAsync` work without it.
 */
export class AtomicsUnavailableError extends Error {
  readonly name: 'AtomicsUnavailableError'
  readonly code: 'ERR_NO_ATOMICS'
}

// --- shared regions (across processes) --------------------------------------
//
// docs/region.md. Linux, Node 16 and later.

/** Why a shared region could not be opened or used. */
export type SharedRegionErrorCode =
  | 'ERR_REGION_NOT_FOUND'
  | 'ERR_REGION_MISMATCH'
  | 'ERR_REGION_VERSION'
  | 'ERR_REGION_ACCESS'
  | 'ERR_REGION_NO_SPACE'
  | 'ERR_REGION_FULL'
  | 'ERR_REGION_UNSUPPORTED'
  | 'ERR_REGION_OPEN'
  | 'ERR_REGION_CLOSED'

export class SharedRegionError extends Error {
  readonly name: 'SharedRegionError'
  readonly code: SharedRegionErrorCode
}

export interface SharedRegionOptions {
  /** Size of the region's buffer in bytes (a multiple of 8, at most 1 GiB): created with it if absent, checked if present. Without it the region must exist. */
  bytes?: number
  /** Create the region if absent (default true; needs `bytes`). */
  create?: boolean
  /** File mode of a region this call creates (default 0o600; ignored on Windows). */
  mode?: number
  /** Directory of the region's file (default '/dev/shm'; on macOS '/tmp'; on Windows os.tmpdir()). */
  directory?: string
  /** Process slots: how many processes can have it open at once (default 256). */
  processes?: number
  /** Waiter records: how many waiters of every process can be queued at once (default 4096). */
  waiters?: number
}

/** The Web Locks of a shared region: navigator.locks' methods, for every process of the region. */
export interface SharedLockManager {
  request<T> (name: string, callback: (lock: import('./web-locks').Lock) => T | PromiseLike<T>): Promise<Awaited<T>>
  request<T> (name: string, options: import('./web-locks').LockOptions & { ifAvailable: true }, callback: (lock: import('./web-locks').Lock | null) => T | PromiseLike<T>): Promise<Awaited<T>>
  request<T> (name: string, options: import('./web-locks').LockOptions, callback: (lock: import('./web-locks').Lock) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** Held locks and pending requests of every process of the region (clientId `<pid>-thread-<threadId>`). */
  query (): Promise<import('./web-locks').LockManagerSnapshot>
  /** Not in the standard: blocks until granted, runs fn, releases (DeadlockError behind this thread's own lock or request). */
  requestSync<T> (name: string, callback: (lock: import('./web-locks').Lock) => T): T
  requestSync<T> (name: string, options: Omit<import('./web-locks').LockOptions, 'signal'> & { ifAvailable: true }, callback: (lock: import('./web-locks').Lock | null) => T): T
  requestSync<T> (name: string, options: Omit<import('./web-locks').LockOptions, 'signal'>, callback: (lock: import('./web-locks').Lock) => T): T
}

/**
 * A named shared mapping opened by every process of the machine. `wait`,
 * `notify` and `waitAsync` on its buffer work across processes.
 */
export class SharedRegion {
  private constructor()
  /** Opens `name`, creating it with `options.bytes` if it does not exist. */
  static open(name: string, options?: SharedRegionOptions): SharedRegion
  /** Removes the name; mappings stay usable. False if there was none. */
  static unlink(name: string, options?: { directory?: string }): boolean
  /** A SharedArrayBuffer on Node 24.16+ and 26.1+, else an ArrayBuffer. */
  readonly buffer: SharedArrayBuffer | ArrayBuffer
  readonly name: string
  readonly path: string
  readonly bytes: number
  /** This process's slot in the region. */
  readonly slot: number
  /**
   * Web Locks for every process that maps the region (`request`, `query`,
   * with the W3C semantics; names up to 240 UTF-16 code units). Its table
   * is a region of its own beside this one, made on first use.
   */
  readonly locks: SharedLockManager
  /** This handle lets its buffer go; the mapping goes with the last buffer over it. */
  close(): void
}

// --- locks -----------------------------------------------------------------
//
// Every blocking method below (`lock`, `Condition.wait`, `acquire`, `read`,
// `write`, the `wait` of Barrier, WaitGroup and the events, and `Once.run`
// when it would have to wait) throws a TypeError where the host forbids
// blocking on the thread, as V8's `Atomics.wait` does there ("AsyncLock.lock
// cannot be called in this context"); the `…Async` methods work there.

/**
 * What the `signal` option needs of an AbortSignal (declared structurally,
 * so the types work without the DOM lib or @types/node).
 */
export interface AbortSignalLike {
  readonly aborted: boolean
  readonly reason?: unknown
  addEventListener (type: 'abort', listener: () => void): void
  removeEventListener (type: 'abort', listener: () => void): void
}

/** Options of the async acquisitions. */
export interface AcquireOptions {
  /** Give up after this many ms with a LockTimeoutError (≥ 0; default: forever; 0: try once). */
  timeout?: number
  /** Give up when it fires, with an AbortError. */
  signal?: AbortSignalLike
}

/**
 * Releases what an async acquisition got. Calling it again does nothing, so
 * it is safe in `finally` blocks; `[Symbol.dispose]` is the same function, so
 * `using release = await lock.lockAsync()` works.
 */
export interface Release {
  (): void
  [Symbol.dispose] (): void
}

/** The release function of an AsyncLock acquisition. */
export interface LockRelease extends Release {
  /** The previous owner died holding the lock (see OWNER_DIED). */
  readonly ownerDied: boolean
}

/** What runExclusive / executeLocked pass to their callback. */
export interface LockInfo {
  /** The previous owner died holding the lock (see OWNER_DIED). */
  ownerDied: boolean
}

/**
 * A mutex in 8 bytes of a SharedArrayBuffer, shared by the main thread and
 * every worker: build a copy in another thread with
 * `new AsyncLock(lock.buffer, lock.byteOffset)` (send both through
 * postMessage or workerData); all copies are the same lock.
 *
 * Ownership is per thread: the thread that acquired the lock is its owner
 * and only it may unlock. Uncontended lock and unlock are one
 * compareExchange each, in JavaScript. A waiter that has waited over 1 ms
 * gets the lock handed to it directly by the next unlock. When the owner's
 * thread ends while holding the lock, the oldest waiter is handed it at once
 * (or the next acquirer takes it over) and is told (OWNER_DIED / `ownerDied`),
 * exactly once: also when an abort of that acquisition came too late.
 */
export class AsyncLock {
  /** Bytes one lock takes in a buffer (8). */
  static readonly BYTES: number
  static readonly ACQUIRED: 'acquired'
  static readonly OWNER_DIED: 'owner-died'

  /**
   * @param buffer where the lock lives (a fresh one if omitted); its bytes
   *   must start zeroed (unlocked) the first time
   * @param byteOffset a multiple of 4, with 8 bytes room (default 0)
   *   (a shared region's `buffer`: the lock of every process that maps it)
   * @throws {TypeError} not a SharedArrayBuffer (or a SharedRegion's buffer), or a non-number offset
   * @throws {RangeError} an unaligned, negative or out-of-range offset
   */
  constructor (buffer?: SharedArrayBuffer | ArrayBuffer, byteOffset?: number)

  /** The buffer given (over a shared region on Node before 24.16: an ArrayBuffer). */
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Whether some thread holds the lock now (a snapshot). */
  readonly isLocked: boolean

  /**
   * Blocks until the lock is acquired (workers; also Node's main thread).
   * @param timeout ms (≥ 0, default forever)
   * @returns ACQUIRED, or OWNER_DIED when the previous owner died holding it
   * @throws {DeadlockError} this thread already holds the lock, or an async
   *   acquisition of this thread is queued for it
   * @throws {LockTimeoutError} not acquired within `timeout`
   */
  lock (timeout?: number): LockStatus

  /** Acquires if free (or held by a dead thread) without waiting; `false` if held. */
  tryLock (): LockStatus | false

  /**
   * Releases the lock held by this thread, waking a waiter only if one may
   * be waiting.
   * @throws {LockOwnershipError} this thread does not hold the lock
   */
  unlock (): void

  /**
   * Acquires without blocking the thread. Resolves with the release
   * function; rejects with LockTimeoutError or AbortError, leaving nothing
   * held or queued. The pending acquisition keeps the process alive. Another
   * async task of the thread that holds the lock waits like anyone else.
   */
  lockAsync (options?: AcquireOptions): Promise<LockRelease>

  /**
   * Runs `fn` holding the lock and resolves with its result (awaited if it is
   * a promise); releases the lock however `fn` ends. `fn` never runs inside
   * the call: the lock is asked for one microtask later, and `fn` runs in the
   * turn it is taken.
   */
  runExclusive<T> (fn: (info: LockInfo) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T>

  /** The V8 blog's executeLocked: the same as runExclusive. */
  executeLocked<T> (fn: (info: LockInfo) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T>
}

/**
 * A condition variable for an AsyncLock, in 8 bytes of a SharedArrayBuffer
 * (rebuild copies with `new Condition(cond.buffer, cond.byteOffset)`).
 * `wait` may return without a notification: wait in a loop on your
 * predicate. It always returns holding the lock again.
 */
export class Condition {
  /** Bytes one condition takes in a buffer (8). */
  static readonly BYTES: number

  /** @param byteOffset a multiple of 4, with 8 bytes room (default 0) */
  constructor (buffer?: SharedArrayBuffer | ArrayBuffer, byteOffset?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number

  /**
   * Blocking: releases `lock` (held by this thread), sleeps until notified or
   * `timeout` ms pass, takes `lock` back.
   * @returns `'ok'`, `'timed-out'`, or `'owner-died'` if taking the lock back
   *   found its previous owner dead
   * @throws {LockOwnershipError} this thread does not hold `lock`
   */
  wait (lock: AsyncLock, timeout?: number): 'ok' | 'timed-out' | 'owner-died'

  /**
   * Like wait, without blocking; settles only once the lock is held again,
   * also when it rejects with AbortError. If the relock took the lock over
   * from a dead owner it resolves 'owner-died' even when the signal fired:
   * the death is reported exactly once, here.
   */
  waitAsync (lock: AsyncLock, options?: AcquireOptions): Promise<'ok' | 'timed-out' | 'owner-died'>

  /** Wakes the oldest waiter; returns how many woke (0 or 1). */
  notifyOne (): number

  /** Wakes every waiter; returns how many woke. */
  notifyAll (): number
}

/**
 * How many permits one acquisition takes at once: an integer from 1 to
 * 2^30 − 1 (default 1). Anything else is a RangeError, a non-number a
 * TypeError.
 */
export interface PermitsOption {
  permits?: number
}

/**
 * A counting semaphore in 8 bytes of a SharedArrayBuffer. An acquisition
 * takes one permit or several at once, all or none. Queued acquisitions are
 * served in order (a large one is never passed by smaller ones behind it);
 * newcomers and tryAcquire may take free permits past them only while the
 * oldest has waited less than 1 ms (docs/lock.md, "Weighted acquisitions").
 * Permits have no owner: any thread may release, and permits of a thread
 * that dies are not given back.
 */
export class Semaphore {
  /** Bytes one semaphore takes in a buffer (8). */
  static readonly BYTES: number

  /** A semaphore with `permits` permits in a fresh buffer. */
  constructor (permits: number)
  /**
   * A semaphore at `byteOffset` of `buffer`. Pass `permits` only where it is
   * created; copies rebuilt in other threads attach to the same count.
   */
  constructor (buffer: SharedArrayBuffer | ArrayBuffer, byteOffset?: number, permits?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Permits free now (a snapshot; permits set aside for a queued acquirer are not free). */
  readonly value: number

  /**
   * Blocks until one permit is taken. The number is a timeout in ms, not a
   * count: for several permits pass `{ permits }`.
   * @throws {LockTimeoutError} none within `timeout` ms
   * @throws {DeadlockError} an acquireAsync of this thread is queued ahead
   */
  acquire (timeout?: number): void
  /**
   * Blocks until `permits` (default 1) are taken at once.
   * @throws {LockTimeoutError} not all of them within `timeout` ms (none is taken)
   * @throws {DeadlockError} an acquireAsync of this thread is queued ahead
   */
  acquire (options: PermitsOption & { timeout?: number }): void

  /** Takes `permits` (default 1) at once if they are free now; never some of them. */
  tryAcquire (permits?: number): boolean

  /**
   * Gives back `permits` (default 1; 0 to 2^31 − 1): the oldest acquirers
   * queued are served first, in order, as far as the permits cover them.
   * @throws {RangeError} the count would exceed 2^31 − 1
   */
  release (permits?: number): void

  /**
   * Takes `permits` (default 1) at once; resolves with a function that gives
   * exactly those back (idempotent, `Symbol.dispose`). Rejects with
   * LockTimeoutError or AbortError, having taken nothing.
   */
  acquireAsync (options?: PermitsOption & AcquireOptions): Promise<Release>

  /** Runs `fn` holding `permits` (default 1); resolves with its result; always gives them back. */
  runExclusive<T> (fn: () => T | PromiseLike<T>, options?: PermitsOption & AcquireOptions): Promise<T>
}

/** The release function of an RwLock read acquisition. */
export interface ReadRelease extends Release {
  /** A writer died holding the lock before this acquisition (see OWNER_DIED). */
  readonly ownerDied: boolean
}

/** The release function of an RwLock write acquisition. */
export interface WriteRelease extends Release {
  /** The previous writer died holding the lock (see OWNER_DIED). */
  readonly ownerDied: boolean
  /**
   * Turns the write lock into a read lock atomically (no writer gets in
   * between; queued readers come in with it) and returns the read lock's
   * release function. This function then does nothing.
   * @throws {LockOwnershipError} already released or downgraded
   */
  downgrade (): ReadRelease
}

/**
 * A robust, phase-fair reader-writer lock in 16 bytes of a
 * SharedArrayBuffer, shared by the main thread and every worker (rebuild
 * copies with `new RwLock(lock.buffer, lock.byteOffset)`).
 *
 * Many readers or one writer. Uncontended read lock + unlock and write
 * lock + unlock run in JavaScript (two compareExchanges and a load, and two
 * compareExchanges). Policy (phase-fair): a reader that arrives while a
 * writer holds or waits queues behind it, and once a waiter has waited
 * 1 ms a writer's unlock lets every queued reader in before the next
 * writer: neither side starves the other.
 *
 * Ownership is per thread. A writer that dies holding the lock is
 * recovered, and the next acquisition told OWNER_DIED once. A reader that
 * dies holding a read lock does not block writers: three readers at a time
 * are tracked in the lock's own memory, and readers past them are
 * registered in the addon, so every reader's death is recovered.
 */
export class RwLock {
  /** Bytes one lock takes in a buffer (16). */
  static readonly BYTES: number
  static readonly ACQUIRED: 'acquired'
  static readonly OWNER_DIED: 'owner-died'

  /**
   * @param buffer where the lock lives (a fresh one if omitted); its bytes
   *   must start zeroed the first time
   * @param byteOffset a multiple of 4, with 16 bytes room (default 0)
   * @throws {TypeError} not a SharedArrayBuffer (or a SharedRegion's buffer), or a non-number offset
   * @throws {RangeError} an unaligned, negative or out-of-range offset
   */
  constructor (buffer?: SharedArrayBuffer | ArrayBuffer, byteOffset?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Whether a thread holds the write lock or waits for the readers to leave with the writer's place (a snapshot). */
  readonly isWriteLocked: boolean
  /** How many read locks live threads hold (a snapshot; a thread that ended holding one no longer counts). */
  readonly readers: number

  /**
   * Blocks until a read lock is held.
   * @returns ACQUIRED, or OWNER_DIED when a writer died holding the lock before
   * @throws {DeadlockError} this thread holds the write lock, or has its own
   *   readAsync / writeAsync of this lock queued
   * @throws {LockTimeoutError} not acquired within `timeout` ms
   */
  read (timeout?: number): LockStatus
  /** A read lock if one can be had without waiting; `false` otherwise. */
  tryRead (): LockStatus | false
  /**
   * Releases a read lock of this thread.
   * @throws {LockOwnershipError} this thread holds no read lock
   */
  readUnlock (): void

  /**
   * Blocks until the write lock is held.
   * @returns ACQUIRED, or OWNER_DIED when the previous writer died holding it
   * @throws {DeadlockError} this thread holds the write lock or a read lock,
   *   or has its own readAsync / writeAsync of this lock queued
   * @throws {LockTimeoutError} not acquired within `timeout` ms
   */
  write (timeout?: number): LockStatus
  /** The write lock if free now (or held by a dead thread); `false` otherwise. */
  tryWrite (): LockStatus | false
  /**
   * Releases the write lock held by this thread.
   * @throws {LockOwnershipError} this thread does not hold it
   */
  writeUnlock (): void
  /**
   * Write lock → read lock, atomically: no writer gets in between, queued
   * readers come in too. Release with readUnlock().
   * @throws {LockOwnershipError} this thread does not hold the write lock
   */
  downgrade (): void

  /** A read lock without blocking the thread; rejects with LockTimeoutError or AbortError, leaving nothing held or queued. */
  readAsync (options?: AcquireOptions): Promise<ReadRelease>
  /** The write lock without blocking the thread; rejects with LockTimeoutError or AbortError, leaving nothing held or queued. */
  writeAsync (options?: AcquireOptions): Promise<WriteRelease>
  /** Runs `fn` holding a read lock; resolves with its result; releases however `fn` ends. */
  runRead<T> (fn: (info: LockInfo) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T>
  /** Runs `fn` holding the write lock; resolves with its result; releases however `fn` ends. */
  runWrite<T> (fn: (info: LockInfo) => T | PromiseLike<T>, options?: AcquireOptions): Promise<T>
}

/** Options of the async waits of Barrier, WaitGroup and the events. */
export interface WaitOptions {
  /** Give up after this many ms (≥ 0; default: forever). */
  timeout?: number
  /** Give up when it fires, with an AbortError. */
  signal?: AbortSignalLike
}

/**
 * A reusable barrier for `parties` threads or async calls, in 16 bytes of a
 * SharedArrayBuffer (byteOffset a multiple of 8). Each generation opens when
 * `parties` parties have called `wait`/`waitAsync`; the last one to arrive
 * gets `true`, the others `false`. A party that times out (LockTimeoutError)
 * or aborts (AbortError) breaks its generation: every other party of it, and
 * every later `wait`, gets BarrierBrokenError until `reset()`. A generation
 * has exactly one outcome: complete, or broken.
 *
 * A party whose thread dies while it waits counts as arrived: its generation
 * completes when the others arrive; the next one misses it, and the others
 * wait until their own timeout breaks it or `reset()`.
 */
export class Barrier {
  /** Bytes one barrier takes in a buffer (16). */
  static readonly BYTES: number

  /**
   * A barrier for `parties` (1 … 2^30) in a fresh buffer.
   * @throws {TypeError} not a number
   * @throws {RangeError} not an integer from 1 to 2^30
   */
  constructor (parties: number)
  /**
   * A barrier at `byteOffset` (a multiple of 8) of `buffer`. Pass `parties`
   * only where it is created; copies rebuilt in other threads read it.
   * @throws {RangeError} no `parties`, and none (or an out-of-range count) stored at that offset
   */
  constructor (buffer: SharedArrayBuffer | ArrayBuffer, byteOffset?: number, parties?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Parties per generation. */
  readonly parties: number
  /** Parties waiting in the current generation now (a snapshot). */
  readonly waiting: number
  /** Whether the barrier is broken (until `reset()`). */
  readonly isBroken: boolean

  /**
   * Blocks until the generation completes.
   * @returns true for the party that arrived last, false for the others
   * @throws {LockTimeoutError} not complete within `timeout` ms (it broke the barrier)
   * @throws {BarrierBrokenError} the barrier is or got broken
   */
  wait (timeout?: number): boolean

  /**
   * Like wait, without blocking. Rejects with LockTimeoutError, AbortError
   * (both break the barrier; an already aborted signal arrives nowhere) or
   * BarrierBrokenError.
   */
  waitAsync (options?: WaitOptions): Promise<boolean>

  /**
   * Repairs a broken barrier; if parties are waiting, breaks their
   * generation first (they get BarrierBrokenError). A new generation starts.
   */
  reset (): void
}

/**
 * Go's sync.WaitGroup (a countdown latch that may count up again), in 12
 * bytes of a SharedArrayBuffer. `wait` returns true once the counter is
 * zero; a waiter asleep when it reaches zero is released even if the counter
 * goes up again before the waiter runs.
 */
export class WaitGroup {
  /** Bytes one wait group takes in a buffer (12). */
  static readonly BYTES: number

  /** A wait group counting from `count` (default 0) in a fresh buffer. */
  constructor (count?: number)
  /** A wait group at `byteOffset` of `buffer`; pass `count` only where it is created. */
  constructor (buffer: SharedArrayBuffer | ArrayBuffer, byteOffset?: number, count?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** The counter now (a snapshot). */
  readonly count: number

  /**
   * Adds `n` (an integer; may be negative). Reaching zero wakes every waiter.
   * @throws {NegativeCounterError} the counter would go below zero (it is unchanged)
   * @throws {RangeError} it would exceed 2^31 − 1 (unchanged), or `n` is not an integer
   */
  add (n: number): void

  /** `add(-1)`. */
  done (): void

  /** Blocks until the counter is zero: true; false after `timeout` ms. */
  wait (timeout?: number): boolean

  /** Like wait, without blocking: resolves true / false; rejects with AbortError. */
  waitAsync (options?: WaitOptions): Promise<boolean>
}

/**
 * An event that stays set until reset, in 8 bytes of a SharedArrayBuffer:
 * `set()` releases every waiter, and every wait returns at once while it is
 * set. A waiter asleep when `set()` is called is released even if `reset()`
 * follows at once.
 */
export class ManualResetEvent {
  /** Bytes one event takes in a buffer (8). */
  static readonly BYTES: number

  /** An event in a fresh buffer, set if `initiallySet`. */
  constructor (initiallySet?: boolean)
  /** An event at `byteOffset` of `buffer`; pass `initiallySet` only where it is created. */
  constructor (buffer: SharedArrayBuffer | ArrayBuffer, byteOffset?: number, initiallySet?: boolean)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Whether the event is set (a snapshot). */
  readonly isSet: boolean

  /** Sets the event and wakes every waiter. */
  set (): void
  /** Clears the event. */
  reset (): void
  /** Blocks until the event is set: true; false after `timeout` ms. */
  wait (timeout?: number): boolean
  /** Like wait, without blocking: resolves true / false; rejects with AbortError. */
  waitAsync (options?: WaitOptions): Promise<boolean>
}

/**
 * An event that releases one waiter per `set()`, in 4 bytes of a
 * SharedArrayBuffer. With nobody waiting, the event stays set until one wait
 * consumes it; setting a set event does nothing. N sets with N waiters
 * waiting release exactly N. A waiter that times out, aborts or whose thread
 * ends after a set was handed to it passes the set on.
 */
export class AutoResetEvent {
  /** Bytes one event takes in a buffer (4). */
  static readonly BYTES: number

  /** An event in a fresh buffer, set if `initiallySet`. */
  constructor (initiallySet?: boolean)
  /** An event at `byteOffset` of `buffer`; pass `initiallySet` only where it is created. */
  constructor (buffer: SharedArrayBuffer | ArrayBuffer, byteOffset?: number, initiallySet?: boolean)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Whether the event is set: a wait now would consume it (a snapshot). */
  readonly isSet: boolean

  /** Releases one waiter, or leaves the event set if nobody waits. */
  set (): void
  /** Clears the event if it is set (sets already handed to waiters stay theirs). */
  reset (): void
  /** Blocks until released by a set: true; false after `timeout` ms. */
  wait (timeout?: number): boolean
  /** Like wait, without blocking: resolves true / false; rejects with AbortError. */
  waitAsync (options?: WaitOptions): Promise<boolean>
}

/** What `Once.run` / `Once.runAsync` pass to `fn`. */
export interface OnceInfo {
  /**
   * A previous run of `fn` was cut short by its thread ending inside it:
   * what it did may be half-done.
   */
  readonly ownerDied: boolean
}

/**
 * One-time initialisation shared by every thread, in 12 bytes of a
 * SharedArrayBuffer (an AsyncLock and a state word; rebuild copies with
 * `new Once(once.buffer, once.byteOffset)`). Exactly one thread runs `fn`;
 * the others wait for it. If `fn` throws (or its promise rejects) or its
 * thread dies inside it, the Once stays not done and the next caller runs
 * `fn` again. Once done, a call is one `Atomics.load`.
 */
export class Once {
  /** Bytes one Once takes in a buffer (12). */
  static readonly BYTES: number

  /**
   * @param buffer a fresh one if omitted; its bytes must start zeroed
   * @param byteOffset a multiple of 4, with 12 bytes room (default 0)
   * @throws {TypeError} not a SharedArrayBuffer (or a SharedRegion's buffer), or a non-number offset
   * @throws {RangeError} an unaligned, negative or out-of-range offset
   */
  constructor (buffer?: SharedArrayBuffer | ArrayBuffer, byteOffset?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  /** Whether `fn` has run to completion (once true, always true). */
  readonly isDone: boolean

  /**
   * Blocking (workers; also Node's main thread). Runs `fn` unless done,
   * waiting while another thread runs it.
   * @returns `true` if this call ran `fn` to completion, `false` if it was done
   * @throws whatever `fn` throws (the Once stays not done)
   * @throws {TypeError} `fn` returned a promise (use runAsync); not done
   * @throws {DeadlockError} called from inside its own `fn`, or while this
   *   thread's runAsync of it is running `fn` or waiting for another thread's
   * @throws {LockTimeoutError} another thread's `fn` did not finish within `timeout` ms
   */
  run (fn: (info: OnceInfo) => void, timeout?: number): boolean

  /**
   * Without blocking. `fn` may return a promise: the Once is done when it
   * fulfils. Resolves `true` if this call ran `fn` to completion, `false` if
   * it was done; rejects with `fn`'s error, or with LockTimeoutError /
   * AbortError when `timeout` / `signal` end the wait for another thread's
   * `fn` (nothing is left held or queued). On a done Once it resolves
   * `false` whatever the signal, without looking at it (nothing to wait for).
   * A call from inside its own `fn` before `fn`'s first `await` rejects with
   * DeadlockError; one awaited after it waits for itself forever.
   */
  runAsync (fn: (info: OnceInfo) => unknown, options?: AcquireOptions): Promise<boolean>
}

// --- channels and synchronous calls ------------------------------------------

/** How a Channel encodes its messages. */
export type ChannelCodec = 'v8' | 'bytes' | 'string'

/** What `Channel.prototype.handle` is: pass it to another thread (postMessage, workerData). */
export interface ChannelHandle {
  readonly buffer: SharedArrayBuffer
}

/**
 * A channel in a shared region's memory (docs/channel.md, "Across
 * processes"): every process makes the same call; the first initialises the
 * ring there, the others attach (ERR_REGION_MISMATCH if `bytes` or `codec`
 * differ). Without `bytes` and `codec` it only attaches. It takes 704 +
 * `bytes` bytes from `byteOffset` (a multiple of 8). A region channel's
 * `handle` is this shape, with `byteOffset`.
 */
export interface ChannelInRegion<C extends ChannelCodec = ChannelCodec> {
  /** `region.buffer` (an ArrayBuffer before Node 24.16, a SharedArrayBuffer after). */
  readonly buffer: SharedArrayBuffer | ArrayBuffer
  readonly byteOffset?: number
  bytes?: number
  codec?: C
}

/** Options of a new Channel. */
export interface ChannelOptions<C extends ChannelCodec = ChannelCodec> {
  /** Bytes of the ring, 8 … 2^29 (rounded up to a multiple of 4; default 65536). A message takes its length + 4, padded to a multiple of 4. */
  bytes?: number
  /** 'v8' (default): any value v8.serialize accepts (undefined, null, booleans, numbers and strings sent without it, as structured clone gives them); 'bytes': ArrayBufferViews, received as Uint8Array; 'string': strings, as UTF-8. */
  codec?: C
}

/** Options of the blocking send / recv. */
export interface ChannelWaitOptions {
  /** Give up after this many ms with ChannelTimeoutError (≥ 0; default: forever; 0: do not wait for room or a message). */
  timeout?: number
}

/** What a Channel of a codec accepts. */
export type ChannelInput<C extends ChannelCodec, T> = C extends 'bytes' ? ArrayBufferView : C extends 'string' ? string : T

/** What a Channel of a codec delivers. */
export type ChannelOutput<C extends ChannelCodec, T> = C extends 'bytes' ? Uint8Array : C extends 'string' ? string : T

/**
 * A multi-producer, multi-consumer queue of messages between threads: a
 * ring in a SharedArrayBuffer. Each message is delivered exactly once, in
 * the order each producer sent (docs/channel.md). A full ring makes senders
 * wait; `close()` wakes every waiter, and receivers drain what is left. A
 * thread terminated in the middle of a send or a receive never corrupts the
 * ring nor blocks the others: its half-written message is dropped, its
 * half-read one goes to the next receiver.
 *
 * The blocking methods are for workers (Node's main thread allows them too);
 * on one thread, do not call them while an async call of the same channel is
 * pending there (they may throw DeadlockError instead of waiting for it).
 *
 * `T` is the message type of a 'v8' channel (`Channel<Job>`).
 */
export class Channel<T = unknown, C extends ChannelCodec = 'v8'> {
  /** What `tryRecv` returns when no message is ready. */
  static readonly EMPTY: unique symbol

  constructor (options?: ChannelOptions<C>)
  /**
   * The same channel, from its `handle`, the Channel itself, or a copy of it
   * made by structured clone (workerData, postMessage). A buffer, a view or
   * an unknown option is a TypeError.
   */
  constructor (handle: ChannelHandle | ChannelInRegion<C> | Channel<T, C> | { readonly handle: ChannelHandle })

  readonly handle: ChannelHandle
  /** Bytes of the ring. */
  readonly capacity: number
  readonly codec: C
  readonly closed: boolean

  /**
   * Blocking: sends once there is room.
   * @throws {ChannelClosedError} closed (before or while waiting)
   * @throws {ChannelTimeoutError}
   * @throws {RangeError} the message does not fit in the ring
   * @throws {TypeError} not a value of the channel's codec
   */
  send (value: ChannelInput<C, T>, options?: ChannelWaitOptions): void
  /**
   * Blocking: the next message.
   * @throws {ChannelClosedError} closed and drained
   * @throws {ChannelTimeoutError}
   */
  recv (options?: ChannelWaitOptions): ChannelOutput<C, T>
  /** Without blocking; rejects as `send` throws, or with AbortError. */
  sendAsync (value: ChannelInput<C, T>, options?: AcquireOptions): Promise<void>
  /** Without blocking; rejects as `recv` throws, or with AbortError. Nothing is taken unless it resolves. */
  recvAsync (options?: AcquireOptions): Promise<ChannelOutput<C, T>>
  /**
   * Blocking while empty, then every message there up to `max` (an integer
   * ≥ 1, or Infinity), taken at once, in order: 1 … max messages.
   * @throws {TypeError | RangeError} a bad `max`
   * @throws {ChannelClosedError} closed and drained
   * @throws {ChannelTimeoutError}
   */
  recvMany (max: number, options?: ChannelWaitOptions): Array<ChannelOutput<C, T>>
  /** `recvMany` without blocking; rejects as it throws, or with AbortError. Nothing is taken unless it resolves. */
  recvManyAsync (max: number, options?: AcquireOptions): Promise<Array<ChannelOutput<C, T>>>
  /**
   * Sends if there is room now (and no other thread is copying at this
   * instant): true if sent, false if not.
   * @throws {ChannelClosedError}
   */
  trySend (value: ChannelInput<C, T>): boolean
  /**
   * A message if one can be taken now, else `Channel.EMPTY`.
   * @throws {ChannelClosedError} closed and drained
   */
  tryRecv (): ChannelOutput<C, T> | typeof Channel.EMPTY
  /**
   * Blocking: returns once every message in the ring has been taken and
   * every receiver that took some has asked for more (or left, or ended):
   * what a sender calls before its process exits.
   * @throws {ChannelDisconnectedError} messages are left and every receiver is gone
   * @throws {ChannelTimeoutError}
   */
  flushSync (options?: ChannelWaitOptions): void
  /** `flushSync` without blocking; rejects as it throws, or with AbortError. */
  flush (options?: AcquireOptions): Promise<void>
  /**
   * Makes this thread a sender, a receiver or both now, as its first send
   * or receive would (a thread is one until it leaves or ends). Returns this.
   */
  join (role: 'sender' | 'receiver' | 'both'): this
  /**
   * This thread stops being a sender / receiver / both (default). The last
   * sender or receiver to go, by leaving or by its thread's end, closes the
   * channel (ChannelDisconnectedError).
   */
  leave (role?: 'sender' | 'receiver' | 'both'): void
  /** Closes for every thread; wakes every waiter. Idempotent. */
  close (): void
  /** Blocking iteration; ends once closed and drained. */
  [Symbol.iterator] (): Iterator<ChannelOutput<C, T>, void>
  /** Async iteration; ends once closed and drained. */
  [Symbol.asyncIterator] (): AsyncIterator<ChannelOutput<C, T>, void>
}

/** A WHATWG URL with the file: protocol (declared structurally, so the types need no DOM lib). */
export interface FileURL {
  readonly href: string
  readonly protocol: string
}

/** Options of createSyncFn. */
export interface SyncFnOptions {
  /** Each call throws SyncCallTimeoutError after this many ms (default: no limit). */
  timeout?: number
  /**
   * Bytes of each of the two rings (requests and answers; default 1 MiB). Arguments and results
   * of any size cross: those larger than a quarter of the ring (at most 256 KiB) go over a
   * MessagePort of the worker instead.
   */
  bytes?: number
  /**
   * Options of the Worker (execArgv, env, resourceLimits, …), except workerData and eval.
   * Without execArgv the worker gets the parent's without its preloads (--require, --import,
   * --loader); a preload the worker needs goes in execArgv here.
   */
  workerOptions?: object
  /**
   * Workers behind the function (1 … 64, default 1), all started at the first
   * call; each call is served by an idle one (one held by a call that timed
   * out does not hold up the next calls). Any of them failing fails the
   * function, as one worker's failure does.
   */
  workers?: number
}

/**
 * A function that calls, synchronously, the handler the module at
 * `workerPath` (absolute path or file: URL) passes to `serveSync` in a
 * worker of its own, started at the first call. Arguments and result arrive
 * as structured clone makes them (v8.serialize, or where each is undefined,
 * null, a boolean, a number or a string, a plain list of them). Errors are rethrown with their class (a stand-in
 * subclass of Error of the same name for classes the caller does not have),
 * message, the worker's stack, `cause` and other serializable properties; an
 * AggregateError with its `errors` (each rebuilt), a DOMException as a
 * DOMException (name, message, code) where the global exists.
 * @throws {SyncCallTimeoutError} the answer did not come within `timeout`
 * @throws {SyncWorkerError} the worker failed to start, threw outside a call, or ended
 */
export function createSyncFn<F extends (...args: any[]) => any> (workerPath: string | FileURL, options?: SyncFnOptions): SyncFn<F>

/**
 * The function createSyncFn returns. Its workers end when it is closed, or
 * when it is garbage-collected (where FinalizationRegistry exists: Node
 * 14.6+); until then they stay (unref'd: they do not keep the process
 * alive). `[Symbol.asyncDispose]` (where the symbol exists) is `close`, and
 * `[Symbol.dispose]` starts it.
 */
export interface SyncFn<F extends (...args: any[]) => any> {
  (...args: Parameters<F>): Awaited<ReturnType<F>>
  /**
   * Terminates the workers; resolves once all have exited. Every later call
   * throws SyncWorkerError with `reason` 'closed'. Calling it again returns
   * the same promise.
   */
  close(): Promise<void>
}

/** In a worker started by createSyncFn: answer its calls with `fn` (which may be async), one at a time. */
export function serveSync<F extends (...args: any[]) => any> (fn: F): void
