// Types of `shared-futex/atomics-mutex`: the shape of the shared-structs
// proposal's `Atomics.Mutex`, `Atomics.Mutex.UnlockToken` and
// `Atomics.Condition` (tc39/proposal-structs, Stage 2), plus V8's
// `--harmony-struct` forms, over this package's AsyncLock and Condition.
// Unlike the proposal's shared structs, a Mutex or Condition lives in 8 bytes
// of a SharedArrayBuffer and is rebuilt in each thread from `buffer` /
// `byteOffset`.

declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol
  }
}

/** What V8's callback forms pass to their callback (not in V8: an extension). */
export interface LockedInfo {
  /**
   * The mutex was taken over from a thread that ended while holding it (or a
   * Condition wait inside the callback relocked it so): the data it guards
   * may be half-updated.
   */
  ownerDied: boolean
}

/** What V8's tryLock / lockWithTimeout / lockAsync return. */
export interface LockResult<T> {
  /** The callback's result; `undefined` when not acquired. */
  value: T | undefined
  /** Whether the mutex was acquired (and the callback run). */
  success: boolean
}

/**
 * The unlock capability a lock returns: an ordinary object of the thread
 * that locked. Reusable: pass an empty one to `Mutex.lock` /
 * `Mutex.lockIfAvailable`.
 */
export class UnlockToken {
  /** An empty token. */
  constructor ()
  /** Whether the token holds a mutex. */
  readonly locked: boolean
  /**
   * Not in the proposal: whether the acquisition this token made last took
   * the mutex over from a thread that ended while holding it (also set when
   * a Condition wait's relock did).
   */
  readonly ownerDied: boolean
  /** Unlocks the mutex the token holds and empties it: `true`; `false` if it was empty. */
  unlock (): boolean
  /** Like unlock, returning undefined: `using token = Mutex.lock(mutex)`. */
  [Symbol.dispose] (): void
}

/** A non-recursive mutex, shared by every thread through its SharedArrayBuffer. */
export class Mutex {
  /** Bytes one mutex takes in a buffer (8). */
  static readonly BYTES: number
  /** The UnlockToken class (the proposal's `Atomics.Mutex.UnlockToken`). */
  static readonly UnlockToken: typeof UnlockToken

  /**
   * `new Mutex()`: in a fresh SharedArrayBuffer. `new Mutex(buffer,
   * byteOffset)`: the mutex at that place (zeroed bytes the first time);
   * every Mutex built there, in any thread, is the same mutex.
   * @throws {TypeError} not a SharedArrayBuffer (or a SharedRegion's buffer), or a non-number offset
   * @throws {RangeError} an unaligned, negative or out-of-range offset
   */
  constructor (buffer?: SharedArrayBuffer | ArrayBuffer, byteOffset?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number

  /**
   * Blocks until the mutex is locked (also on Node's main thread). Returns
   * `unlockToken` (which must be empty) or a new token.
   * @throws {TypeError} not a Mutex; a locked token; this thread already
   *   holds the mutex (`code` `'ERR_LOCK_DEADLOCK'`); the host forbids
   *   blocking on this thread (as V8's: "Atomics.Mutex.lock cannot be called
   *   in this context"; so do lockWithTimeout, lockIfAvailable with a timeout
   *   other than 0, and Condition.wait / waitFor)
   */
  static lock (mutex: Mutex, unlockToken?: UnlockToken): UnlockToken
  /** V8's form: runs `callback` holding the mutex and returns its result. */
  static lock<T> (mutex: Mutex, callback: (info: LockedInfo) => T): T

  /**
   * Like lock, waiting at most `timeout` ms (≤ 0: not at all; `Infinity` or
   * `NaN`: forever). Returns `null` if the mutex was not acquired in time.
   * @throws {TypeError} as lock, and a `timeout` that is not a number
   */
  static lockIfAvailable (mutex: Mutex, timeout: number, unlockToken?: UnlockToken): UnlockToken | null

  /** V8's form: runs `callback` holding the mutex if it is free now. */
  static tryLock<T> (mutex: Mutex, callback: (info: LockedInfo) => T): LockResult<T>

  /** V8's form: runs `callback` holding the mutex, waiting at most `timeout` ms. */
  static lockWithTimeout<T> (mutex: Mutex, callback: (info: LockedInfo) => T, timeout: number): LockResult<T>

  /**
   * V8's form of the proposal's future `lockAsync`: without blocking, runs
   * `callback` holding the mutex (in a later microtask) and resolves once
   * its result has settled and the mutex is unlocked again; `success: false`
   * if `timeout` ms passed first. Rejects with the callback's error.
   * Argument errors throw, as V8's do.
   */
  static lockAsync<T> (mutex: Mutex, callback: (info: LockedInfo) => T | PromiseLike<T>, timeout?: number): Promise<LockResult<T>>

  /** V8's: whether `value` is a Mutex of this module. */
  static isMutex (value: unknown): value is Mutex
}

/** A condition variable for a Mutex, shared like it. */
export class Condition {
  /** Bytes one condition takes in a buffer (8). */
  static readonly BYTES: number

  /** `new Condition()` / `new Condition(buffer, byteOffset)`, like Mutex. */
  constructor (buffer?: SharedArrayBuffer | ArrayBuffer, byteOffset?: number)

  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number

  /**
   * Unlocks the token's mutex, blocks until notified, relocks. May also
   * return without a notify: wait in a loop on your predicate.
   * @throws {TypeError} not a Condition; an empty token
   */
  static wait (cv: Condition, unlockToken: UnlockToken): undefined
  /**
   * V8's form: the same on a mutex this thread holds, waiting at most
   * `timeout` ms: `false` if the time passed first, else `true`.
   */
  static wait (cv: Condition, mutex: Mutex, timeout?: number): boolean

  /**
   * Waits until notified (`true`) or `timeout` ms pass (`false`). With a
   * `predicate` (called holding the mutex, first before any wait), waits
   * until it returns truthy: returns its last value as a boolean.
   */
  static waitFor (cv: Condition, unlockToken: UnlockToken, timeout: number, predicate?: () => unknown): boolean

  /**
   * Wakes up to `count` waiters (default all; an integral number or
   * `Infinity`, else TypeError; ≤ 0 wakes none). Returns how many woke.
   */
  static notify (cv: Condition, count?: number): number

  /**
   * V8's form of the proposal's future `waitAsync`: with the mutex held by
   * this thread (in a `lockAsync` callback, or through a token), unlocks it,
   * waits without blocking until notified or `timeout` ms pass, relocks;
   * resolves `undefined` (as V8's) once the mutex is held again.
   */
  static waitAsync (cv: Condition, mutex: Mutex | UnlockToken, timeout?: number): Promise<undefined>

  /** V8's: whether `value` is a Condition of this module. */
  static isCondition (value: unknown): value is Condition
}
