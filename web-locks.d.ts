// Types of `shared-futex/web-locks`: the W3C Web Locks API
// (https://w3c.github.io/web-locks/) with one lock manager per process,
// shared by every thread. See docs/web-locks.md.

export type LockMode = 'exclusive' | 'shared'

export interface LockOptions {
  /** Default 'exclusive'. */
  mode?: LockMode
  /** Grant only if available now; otherwise the callback gets `null`. */
  ifAvailable?: boolean
  /** Release the held locks of this name (their requests reject with an AbortError) and take it. */
  steal?: boolean
  /** Aborting it while the request is pending removes the request; its promise rejects with the reason. */
  signal?: AbortSignal
}

export interface LockInfo {
  name: string
  mode: LockMode
  /** `thread-<threadId>` of the thread that holds or asked (`thread-0`: the main thread). */
  clientId: string
}

export interface LockManagerSnapshot {
  held: LockInfo[]
  pending: LockInfo[]
}

export type LockGrantedCallback<T> = (lock: Lock | null) => T | PromiseLike<T>

export declare class Lock {
  private constructor ()
  readonly name: string
  readonly mode: LockMode
}

export declare class LockManager {
  private constructor ()
  /**
   * Asks for the lock `name`; `callback` runs once it is granted (with `null`
   * when `ifAvailable` found it unavailable). The lock is held until the
   * callback's result settles; the returned promise settles as that result.
   */
  request<T> (name: string, callback: (lock: Lock) => T | PromiseLike<T>): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions & { ifAvailable: true }, callback: (lock: Lock | null) => T | PromiseLike<T>): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions, callback: (lock: Lock) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** Held locks and pending requests of every thread of the process. */
  query (): Promise<LockManagerSnapshot>
  /**
   * Not in the standard: blocks this thread until the lock is granted, runs
   * `callback` (with `null` when `ifAvailable` found it unavailable),
   * releases the lock when it returns or throws, and returns its result.
   * No `signal`. Throws a `DeadlockError` (code `ERR_LOCK_DEADLOCK`) instead
   * of blocking for ever behind a lock or request of this thread, or where
   * it would close a cycle of threads blocked in `requestSync` (its `cycle`
   * names them), and an
   * `AbortError` `DOMException` after the callback if the lock was stolen.
   * A call stopped by a `vm` timeout keeps its lock until this thread's
   * event loop turns.
   */
  requestSync<T> (name: string, callback: (lock: Lock) => T): T
  requestSync<T> (name: string, options: Omit<LockOptions, 'signal'> & { ifAvailable: true }, callback: (lock: Lock | null) => T): T
  requestSync<T> (name: string, options: Omit<LockOptions, 'signal'>, callback: (lock: Lock) => T): T
}

/** The process's lock manager. */
export declare const locks: LockManager

/**
 * Not in the standard: whether pending requests made from now on by this
 * thread keep its event loop alive (default `true`). Returns the previous setting.
 */
export declare function setKeepAlive (enabled: boolean): boolean
