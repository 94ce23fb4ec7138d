// Types of `shared-futex/web-locks/postgres`: the Web Locks API over
// PostgreSQL advisory locks, for every client of a namespace on any machine.
// See docs/web-locks-postgres.md. `pg` (8 or later) is a peer dependency.
import type { Lock, LockInfo, LockManagerSnapshot, LockOptions } from './web-locks'

/** The Lock a PostgresLockManager grants: with a fencing token and a signal. */
export interface PostgresLock extends Lock {
  /** Strictly increasing per name across every client of the cluster: a fencing token. */
  readonly token: number
  /** Fires (with an AbortError) when the session holding the lock is lost: stolen, connection dropped, server restarted. */
  readonly signal: AbortSignal
}

export interface PostgresLockManagerOptions {
  /** Keeps applications apart: names of different namespaces never share a lock. Default 'default'. */
  namespace?: string
  /** A pg.Pool to take connections from (instead of connection options). */
  pool?: unknown
  /** The application_name of this client's connections, and its clientId in query(). Default `<hostname>-<pid>-<n>`. */
  clientId?: string
  /** The table of names, keys and tokens (created if absent). Default 'shared_futex_locks'. */
  table?: string
  /** Whether to create the table if absent. Default true. */
  createTable?: boolean
  /** A held lock's connection is checked this often; no answer within as long: the lock is lost. 0: never. Default 5000. */
  heartbeatMs?: number
  /** Connections of the manager's own pool (held locks and waiting requests), default 32. */
  maxConnections?: number
  /** A waiting request whose connection is lost asks again on a new one for this long (ms), then rejects with ERR_PG_LOCKS_LOST. 0: at once. Default 30000. */
  reconnectMs?: number
  /** The `pg` module to use, instead of require('pg'). */
  pg?: unknown
  /** Anything else is an option of pg.Pool: connectionString, host, port, user, password, database, ssl, … */
  [pgOption: string]: unknown
}

export declare class PostgresLockError extends Error {
  private constructor ()
  readonly code: 'ERR_PG_MISSING' | 'ERR_PG_LOCKS_CONNECT' | 'ERR_PG_LOCKS_LOST' | 'ERR_PG_LOCKS_SERVER' | 'ERR_PG_LOCKS_CLOSED' | 'ERR_PG_LOCKS_NAMES' | 'ERR_PG_LOCKS_RUNTIME'
  readonly cause?: unknown
}

export declare class PostgresLockManager {
  constructor (options: PostgresLockManagerOptions)
  /** This client's id: the application_name of its connections. */
  readonly clientId: string
  request<T> (name: string, callback: (lock: PostgresLock) => T | PromiseLike<T>): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions & { ifAvailable: true }, callback: (lock: PostgresLock | null) => T | PromiseLike<T>): Promise<Awaited<T>>
  request<T> (name: string, options: LockOptions, callback: (lock: PostgresLock) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** Held locks and pending requests of every client of the namespace. */
  query (): Promise<LockManagerSnapshot>
  /** Cancels pending requests, ends held locks' sessions, ends the manager's own pool. */
  close (): Promise<void>
}

export type { LockInfo, LockManagerSnapshot, LockOptions }
