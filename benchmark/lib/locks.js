'use strict'
// The locks under test, by name, usable in any thread:
//   'ours':     shared-futex's AsyncLock (lib/lock.js);
//   'blog':     the blog post's AsyncLock over native Atomics (baselines/);
//   'semaphore': shared-futex's Semaphore with one permit (lib/semaphore.js),
//               acquire / release as lock / unlock, runExclusive as
//               executeLocked; 'semaphore-futex': the same over the previous
//               Semaphore (baselines/semaphore-futex.js). Their buffer must
//               start with one permit (lockBuffer(1));
//   'weblocks': Web Locks (worker_threads.locks, Node 24.5+), an exclusive
//               request on a name; async only (executeLocked, no lock());
//   'ours-weblocks': the same over shared-futex/web-locks (any Node);
//   'ours-requestsync': the same name, with shared-futex/web-locks'
//               blocking requestSync as executeSync (async: request);
//   'wake-ring': not a lock, the bound of a FIFO one across threads
//               (lib/wake-ring.js); async only.
// All are built from (sab, byteOffset), so every thread gets the same lock:
// Web Locks' name is a number that lockBuffer() writes into the buffer.

const { ROOT } = require('./impl')
const { BlogAsyncLock } = require('../baselines/blog-lock')

// Why shared-futex's lock cannot be measured yet, or null.
function oursMissing () {
  try {
    const { AsyncLock } = require(ROOT)
    return typeof AsyncLock === 'function' ? null : 'shared-futex does not export AsyncLock'
  } catch (e) {
    return `cannot load shared-futex: ${e.message}`
  }
}

// The running Node's Web Locks manager, or null.
function webLocks () {
  let locks
  try {
    locks = require('worker_threads').locks
  } catch {}
  return locks && typeof locks.request === 'function' ? locks : null
}

// Why Web Locks cannot be measured on this Node, or null.
function webLocksMissing () {
  return webLocks() ? null : `Node ${process.version} has no Web Locks (worker_threads.locks, Node 24.5+; try --node 24)`
}

// Web Locks behind the interface the scenarios use.
class WebLock {
  constructor (name, locks) {
    this.name = name
    this.locks = locks || webLocks()
  }

  executeLocked (fn) {
    return this.locks.request(this.name, fn)
  }

  executeSync (fn) {
    return this.locks.requestSync(this.name, fn)
  }
}

// A semaphore behind the interface the scenarios use.
class SemaphoreLock {
  constructor (sem) {
    this.sem = sem
  }

  lock () { this.sem.acquire() }
  unlock () { this.sem.release() }
  executeLocked (fn) { return this.sem.runExclusive(fn) }
}

const NAME_INDEX = 8 // Int32 index: byte 32, outside the 8 bytes of a lock word

function makeLock (name, sab, byteOffset) {
  if (name === 'blog') return new BlogAsyncLock(sab, byteOffset)
  if (name === 'ours') return new (require(ROOT).AsyncLock)(sab, byteOffset)
  if (name === 'semaphore') return new SemaphoreLock(new (require(ROOT).Semaphore)(sab, byteOffset))
  if (name === 'semaphore-futex') return new SemaphoreLock(new (require('../baselines/semaphore-futex').FutexSemaphore)(sab, byteOffset))
  if (name === 'weblocks') return new WebLock(`shared-futex-bench-${new Int32Array(sab)[NAME_INDEX]}`)
  if (name === 'ours-weblocks' || name === 'ours-requestsync') {
    return new WebLock(`shared-futex-bench-${new Int32Array(sab)[NAME_INDEX]}`, require(`${ROOT}/web-locks`).locks)
  }
  if (name === 'wake-ring') return new (require('./wake-ring').WakeRing)(sab)
  throw new Error(`unknown lock ${name}`)
}

// Room for one lock of either kind (shared-futex's may use 8 bytes), on its
// own cache line, and a fresh name for Web Locks; `word` in the first cell
// (a semaphore's permits).
let made = 0
function lockBuffer (word = 0) {
  const sab = new SharedArrayBuffer(256) // the first 64 bytes; wake-ring uses the rest
  new Int32Array(sab)[NAME_INDEX] = ++made
  new Int32Array(sab)[0] = word
  return sab
}

// The floor every uncontended lock is measured against: `batch` bare
// compareExchange pairs (lock 0 → 1, unlock 1 → 0) on a word of its own.
function casPairs (batch) {
  const word = new Int32Array(lockBuffer())
  return () => {
    for (let i = 0; i < batch; i++) {
      Atomics.compareExchange(word, 0, 0, 1)
      Atomics.compareExchange(word, 0, 1, 0)
    }
  }
}

module.exports = { oursMissing, webLocksMissing, makeLock, lockBuffer, casPairs }
