// Types of `shared-futex/polyfill`. Importing the module installs
// `Atomics.waitAsync` where the running Node lacks it (Node 12–15), and adds
// its declaration to the global `Atomics` for TypeScript libs older than
// ES2024 (with ES2024 the overloads are identical and merge).

export interface InstallOptions {
  /**
   * Replace `Atomics.wait`, `Atomics.notify` and `Atomics.waitAsync` even
   * where the running Node has a native `Atomics.waitAsync` (Node 16+), for
   * this module's speed or event-loop behaviour. Workers created afterwards
   * install with `force` too. Default `false`.
   */
  force?: boolean
  /**
   * Make workers created from now on (through `worker_threads.Worker`)
   * install the polyfill before their own code runs, by adding a
   * `--require` of the preload to their `execArgv`. Default `true`.
   */
  workers?: boolean
}

/**
 * Installs the polyfill on this thread's `Atomics` where `Atomics.waitAsync`
 * is missing, or always with `{ force: true }`: `Atomics.wait`,
 * `Atomics.notify` and `Atomics.waitAsync` then share this module's wait
 * queue, and `Atomics.notify` also wakes native waiters of threads that did
 * not install it (never more than `count` in total). Returns whether the
 * polyfill is installed afterwards. Importing the module has already called
 * `install()` once.
 */
export function install (options?: InstallOptions): boolean

/**
 * Restores the `Atomics` properties and `worker_threads.Worker` that
 * `install` replaced. Waiters still queued through the polyfill can then only
 * be woken by this package's own `notify`. Returns whether it was installed.
 */
export function uninstall (): boolean

/** Whether the polyfill is installed on this thread. */
export function isInstalled (): boolean

declare global {
  interface Atomics {
    /**
     * Waits asynchronously on a shared memory location: `{ async: false,
     * value: 'not-equal' | 'timed-out' }` at once, or `{ async: true, value }`
     * with a promise of `'ok'` (notified) or `'timed-out'`.
     */
    waitAsync (typedArray: Int32Array, index: number, value: number, timeout?: number): { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> }
    waitAsync (typedArray: BigInt64Array, index: number, value: bigint, timeout?: number): { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> }
  }
}
