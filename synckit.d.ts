// Types of `shared-futex/synckit`: synckit's createSyncFn / runAsWorker
// (same names, options, environment variables, TypeScript runners) over
// shared-futex's synchronous calls. See docs/synckit.md.
import type { FileURL, SyncFn } from './index'

export type AnyFn<R = any, T extends any[] = any[]> = (...args: T) => R

/** synckit's type of the function createSyncFn returns. */
export type Syncify<T extends AnyFn> = (...args: Parameters<T>) => Awaited<ReturnType<T>>

export type ValueOf<T> = T[keyof T]

export declare const TsRunner: {
  readonly Node: 'node'
  readonly Bun: 'bun'
  readonly TsNode: 'ts-node'
  readonly EsbuildRegister: 'esbuild-register'
  readonly EsbuildRunner: 'esbuild-runner'
  readonly OXC: 'oxc'
  readonly SWC: 'swc'
  readonly TSX: 'tsx'
}
export type TsRunner = ValueOf<typeof TsRunner>

export interface GlobalShim {
  moduleName: string
  /** `undefined` means side effect only */
  globalName?: string
  /** `undefined` or '': the default export; `null`: the namespace; else that named export. */
  named?: string | null
  /** Unless `false`, the global is set only where it is missing. */
  conditional?: boolean
}

export interface SynckitOptions {
  /** The worker's execArgv (default: SYNCKIT_EXEC_ARGV, split on commas; else none). */
  execArgv?: string[]
  /** Modules imported into globals before the worker's module (true: DEFAULT_GLOBAL_SHIMS_PRESET). Node 20.6+. */
  globalShims?: GlobalShim[] | boolean
  /** Each call throws SyncCallTimeoutError after this many ms (default: SYNCKIT_TIMEOUT, else no limit). */
  timeout?: number
  /** Transferred with the worker's start, as synckit does. */
  transferList?: any[]
  /** The runner of a .ts / .mts / .cts worker (default: SYNCKIT_TS_RUNNER, else 'node' on Node 22.6+, else 'ts-node' where installed). */
  tsRunner?: TsRunner
}

/**
 * One function per path (a later call with the same path returns it,
 * whatever its options): calls `runAsWorker`'s handler in the worker at
 * `workerPath` (absolute path or file: URL; ./worker and ./worker.js are
 * tried as worker.ts first, then worker.js) synchronously.
 * @throws {TypeError} a relative path, an unknown option, a bad option value
 * @throws {Error} the TypeScript runner is not installed or cannot run here
 * @throws {SyncWorkerError} Node refuses to construct the worker (an execArgv flag, transferList): its `cause`
 */
export function createSyncFn<T extends AnyFn> (workerPath: string | FileURL, timeoutOrOptions?: SynckitOptions | number): SyncFn<T> & Syncify<T>

/** In a worker of createSyncFn's: answer its calls with `fn`, each as it comes (as synckit: a call does not wait for the one before). Elsewhere: does nothing. */
export function runAsWorker<T extends AnyFn<Promise<R> | R>, R = ReturnType<T>> (fn: T): void

/** synckit's version comparison: 1, 0 or -1 as `version1` is above, equal to or below `version2`. */
export function compareVersion (version1: string, version2: string): 1 | 0 | -1
/** This Node's version compared with `version` (`compareVersion(process.versions.node, version)`). */
export function compareNodeVersion (version: string): 1 | 0 | -1

export declare const DEFAULT_GLOBAL_SHIMS_PRESET: GlobalShim[]
export declare const DEFAULT_TIMEOUT: number | undefined
export declare const DEFAULT_EXEC_ARGV: string[]
export declare const DEFAULT_TS_RUNNER: TsRunner | undefined
export declare const DEFAULT_GLOBAL_SHIMS: boolean
export declare const STRIP_TYPES_NODE_VERSION: string
export declare const TRANSFORM_TYPES_NODE_VERSION: string
export declare const DEFAULT_TYPES_NODE_VERSION: string
export declare const STRIP_TYPES_FLAG: string
export declare const TRANSFORM_TYPES_FLAG: string
export declare const NO_STRIP_TYPES_FLAG: string
export declare const IMPORT_FLAG_SUPPORTED: boolean
export declare const MODULE_REGISTER_SUPPORTED: boolean
export declare const MTS_SUPPORTED: boolean
export declare const TS_ESM_PARTIAL_SUPPORTED: boolean
