// Types of `shared-futex/web-locks/polyfill`. Importing the module installs
// this package's Web Locks as `navigator.locks` (creating `navigator` where
// Node has none, before Node 21), `worker_threads.locks`, and the
// `LockManager` and `Lock` globals, each only where missing.

export interface InstallOptions {
  /** Replace Node's own Web Locks (Node 24.5+) in this thread too. Default `false`. */
  force?: boolean
}

/** Installs where missing (or always, with `force`); whether `navigator.locks` is this package's afterwards. */
export declare function install (options?: InstallOptions): boolean

/** Whether `navigator.locks` is this package's manager in this thread. */
export declare function isInstalled (): boolean
