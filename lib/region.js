'use strict'
// SharedRegion: a named shared mapping that every process of the machine can
// open, whose memory `wait`, `notify` and `waitAsync` work on across
// processes (docs/region.md).
//
//   const region = SharedRegion.open('my-app', { bytes: 1 << 16 })
//   const words = new Int32Array(region.buffer)
//   wait(words, 0, 0)            // in one process (a worker: it blocks)
//   Atomics.store(words, 0, 1); notify(words, 0)   // in another
//
// The file is `[control block][your bytes]`; `region.buffer` covers only
// your bytes. The control block holds the processes' slots and the shared
// wait queues (crates/futex-core/src/shared.rs); the addon maps the file
// once per process (src/region.rs), whatever the number of `open`s and
// threads, and unmaps it when no buffer over it is left.
//
// Errors: SharedRegionError, by `code`:
//   ERR_REGION_NOT_FOUND    no region of that name, and no `bytes` to create it
//   ERR_REGION_MISMATCH     it exists with another size or layout than asked for
//   ERR_REGION_VERSION      it was made by another version of the package
//   ERR_REGION_ACCESS       the file's permissions refuse this process
//   ERR_REGION_NO_SPACE     the file system (/dev/shm; macOS: /tmp; Windows: the temporary
//                           directory's) has no room for it
//   ERR_REGION_FULL         every process slot is taken by a live process, or
//                           (at a wait) every waiter record is in use
//   ERR_REGION_UNSUPPORTED  this platform or runtime cannot share it, or the
//                           call does not work on region memory yet
//   ERR_REGION_OPEN         any other failure of the operating system
//   ERR_REGION_CLOSED       `buffer` of a region this handle closed
// Bad arguments are TypeErrors and RangeErrors.
const path = require('path')
const binding = require('./native')
const { regionBuffers, regionError } = require('./futex').internal
const { show } = require('./options')
const { SharedRegionError } = require('./errors')
const { SharedLockManager, MANAGER, BYTES: LOCKS_BYTES } = require('./region-locks')
const { holdsFileOf } = require('./region-holds')
const { version } = require('../package.json')

const BUILD = `shared-futex ${version}`
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$/
// Linux: tmpfs, memory only. macOS and Windows have no memory-only file
// system for this: /tmp on macOS (the same for every user and session,
// where $TMPDIR is not), the temporary directory on Windows
// (docs/region.md, "Platforms").
const DEFAULT_DIRECTORY = { win32: require('os').tmpdir(), darwin: '/tmp' }[process.platform] || '/dev/shm'
// 1 GiB: an offset travels in 30 bits (src/region.rs, `deliver`).
const MAX_BYTES = 0x40000000
// Whether this runtime's Atomics work on memory that is not shared (V8 9+,
// Node 16+): where a region's buffer can only be an ArrayBuffer, they must.
const atomicsOnPlainMemory = (() => {
  try {
    Atomics.load(new Int32Array(new ArrayBuffer(4)), 0)
    return true
  } catch {
    return false
  }
})()
const OPTIONS = new Set(['bytes', 'create', 'mode', 'directory', 'processes', 'waiters'])

// The file of a region's Web Locks table (lib/region-locks.js), beside it.
const locksFileOf = (file) => path.join(path.dirname(file), path.basename(file).replace(/^shared-futex\./, 'shared-futex-locks.'))

function fileOf (what, name, directory) {
  if (typeof name !== 'string') throw new TypeError(`${what}: name must be a string, got ${show(name)}`)
  if (!NAME.test(name)) {
    throw new TypeError(`${what}: name must be 1 to 200 of A-Z a-z 0-9 _ . - (not starting with . or -), got ${JSON.stringify(name)}`)
  }
  // Windows drops a file name's trailing dots: `a.` would be the file of `a`.
  if (process.platform === 'win32' && name.endsWith('.')) {
    throw new TypeError(`${what}: on Windows a name must not end with . (file names lose it there), got ${JSON.stringify(name)}`)
  }
  if (directory === undefined) directory = DEFAULT_DIRECTORY
  if (typeof directory !== 'string' || directory === '') {
    throw new TypeError(`${what}: directory must be a non-empty string, got ${show(directory)}`)
  }
  return path.join(path.resolve(directory), `shared-futex.${name}`)
}

function integerOption (what, options, key, min, max, fallback) {
  const value = options[key]
  if (value === undefined) return fallback
  if (typeof value !== 'number') throw new TypeError(`${what}: ${key} must be a number, got ${show(value)}`)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${what}: ${key} must be an integer from ${min} to ${max}, got ${value}`)
  }
  return value
}

// The addon's errors arrive as "ERR_REGION_…: message".
function rethrow (error) {
  throw regionError(error)
}

const STATE = Symbol('SharedRegion state')

class SharedRegion {
  constructor () {
    throw new TypeError('SharedRegion: use SharedRegion.open(name, options)')
  }

  // Opens the region `name`, creating it with `bytes` bytes if it does not
  // exist (and `create` is not false). Without `bytes`, it must exist.
  static open (name, options) {
    const what = 'SharedRegion.open'
    if (options === undefined) options = {}
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`${what}: options must be an object, got ${show(options)}`)
    }
    for (const key of Object.keys(options)) {
      if (!OPTIONS.has(key)) throw new TypeError(`${what}: unknown option ${JSON.stringify(key)} (known: ${[...OPTIONS].join(', ')})`)
    }
    const file = fileOf(what, name, options.directory)
    const bytes = integerOption(what, options, 'bytes', 4, MAX_BYTES, 0)
    if (bytes % 8 !== 0) throw new RangeError(`${what}: bytes must be a multiple of 8, got ${bytes}`)
    const create = options.create === undefined ? true : options.create
    if (typeof create !== 'boolean') throw new TypeError(`${what}: create must be a boolean, got ${show(create)}`)
    const mode = integerOption(what, options, 'mode', 0, 0o777, 0o600)
    // 0: not given (256 and 4096 for a new region; an existing one's own).
    const processes = integerOption(what, options, 'processes', 1, 4096, 0)
    const waiters = integerOption(what, options, 'waiters', 1, 1 << 24, 0)
    if (!binding.regionSupported()) {
      throw new SharedRegionError('ERR_REGION_UNSUPPORTED', `shared regions are not implemented on ${process.platform} yet (Linux and Windows only)`)
    }
    if (!binding.regionMakesShared() && !atomicsOnPlainMemory) {
      throw new SharedRegionError('ERR_REGION_UNSUPPORTED', `Node ${process.versions.node} can neither make a SharedArrayBuffer over a region nor use Atomics on an ArrayBuffer: shared regions need Node 16 or later`)
    }
    let opened
    try {
      opened = binding.regionOpen(file, bytes, create && bytes !== 0, mode, BUILD, processes, waiters)
    } catch (error) {
      rethrow(error)
    }
    const [buffer, slot] = opened
    if (!(buffer instanceof SharedArrayBuffer)) regionBuffers.add(buffer)
    const region = Object.create(SharedRegion.prototype)
    region[STATE] = { name, file, buffer, slot, mode, closed: false, locks: null }
    return region
  }

  // Removes the region's name: processes that have it mapped keep using it;
  // the next `open` of the name makes a new one. False if there was none.
  static unlink (name, options) {
    const what = 'SharedRegion.unlink'
    if (options === undefined) options = {}
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`${what}: options must be an object, got ${show(options)}`)
    }
    for (const key of Object.keys(options)) {
      if (key !== 'directory') throw new TypeError(`${what}: unknown option ${JSON.stringify(key)} (known: directory)`)
    }
    const file = fileOf(what, name, options.directory)
    try {
      binding.regionUnlink(locksFileOf(file))
      binding.regionUnlink(holdsFileOf(file))
      return binding.regionUnlink(file)
    } catch (error) {
      rethrow(error)
    }
  }

  // The region's bytes: a SharedArrayBuffer where Node can make one over
  // foreign memory (24.16+ and 26.1+), else an ArrayBuffer (every Atomics
  // operation works on it, and this package's wait/notify/waitAsync; it
  // cannot be posted to a worker: open the region there instead).
  get buffer () {
    const state = this[STATE]
    if (state.closed) throw new SharedRegionError('ERR_REGION_CLOSED', `SharedRegion ${JSON.stringify(state.name)}: closed`)
    return state.buffer
  }

  // Web Locks for every process that maps the region: a LockManager with
  // navigator.locks' request and query (lib/region-locks.js). Its table is
  // a region of its own beside this one, made on first use.
  get locks () {
    const state = this[STATE]
    if (state.closed) throw new SharedRegionError('ERR_REGION_CLOSED', `SharedRegion ${JSON.stringify(state.name)}: closed`)
    if (state.locks === null) {
      let opened
      try {
        opened = binding.regionOpen(locksFileOf(state.file), LOCKS_BYTES, true, state.mode, BUILD, 0, 0)
      } catch (error) {
        rethrow(error)
      }
      const buffer = opened[0]
      if (!(buffer instanceof SharedArrayBuffer)) regionBuffers.add(buffer)
      state.locks = new SharedLockManager(MANAGER, buffer)
    }
    return state.locks
  }

  get name () { return this[STATE].name }
  get path () { return this[STATE].file }
  get bytes () { return this[STATE].buffer.byteLength }
  // This process's slot in the region (0 to processes - 1).
  get slot () { return this[STATE].slot }

  // This handle lets its buffer go. The mapping itself goes when no buffer
  // over it is left in the process (views you still hold keep it usable).
  close () {
    const state = this[STATE]
    state.closed = true
    state.buffer = { byteLength: 0 }
  }
}

module.exports = { SharedRegion }
