'use strict'
// Channel: a multi-producer, multi-consumer message queue between threads,
// a ring buffer in one SharedArrayBuffer (docs/channel.md).
//
// Layout of the buffer (bytes):
//
//   0    AsyncLock (8)              every read or write of the indices below
//   8    Condition NOT_EMPTY (8)    receivers wait here for a message
//   16   Condition NOT_FULL (8)     senders wait here for space
//   24   int32 header: MAGIC, CAPACITY, CODEC, CLOSED, WRITE, READ, NEED
//   64   the ring: CAPACITY bytes (a multiple of 4)
//
// WRITE and READ are positions in [0, 2·CAPACITY): the byte at position p is
// ring[p mod CAPACITY], and WRITE − READ (mod 2·CAPACITY) is the number of
// bytes in use, so a full ring and an empty one differ. A message is a frame:
// its length (uint32 in the platform's byte order: every side runs on the
// same machine) at a 4-aligned position, then its bytes, padded to a
// multiple of 4. The length never wraps (4-aligned in a ring whose size is a
// multiple of 4); the bytes may.
//
// Every step happens under the lock, and each commits with one store:
//   send   copy the frame in after WRITE, then store WRITE past it
//   recv   copy the frame out at READ, then store READ past it
// A thread that dies mid-copy has committed nothing: a half-written frame
// lies beyond WRITE and is overwritten by the next sender; a half-read one is
// still at READ and goes to the next receiver. The next locker is told
// (OWNER_DIED) and checks the header and the chain of frames (`recover`).
//
// Waking: each send wakes one receiver (it adds one message); a receive
// that makes room for the smallest message a sleeping sender waits to send
// (NEED) wakes every sender; close() wakes everyone. Every wake-up is made
// under the lock, before the store that commits the change it announces: a
// thread stopped between the two holds the lock, and whoever it woke takes
// the lock over from it (OWNER_DIED) and looks. A receiver woken by a send
// keeps that wake-up on its thread's record until it has taken a message,
// so that its thread's end passes it on. No waiter needs to look again on a
// timer (docs/channel.md, "Why nobody sleeps through a death").
const v8 = require('v8')
const { types } = require('util')
const { Atomics, checkCanBlock } = require('./host')
const { AsyncLock } = require('./lock')
const { Condition, internal: conditionInternal } = require('./condition')
const {
  OWNER_DIED, DeadlockError, ChannelClosedError, ChannelTimeoutError, abortError
} = require('./errors')
const { show, timeoutOf, asyncOptions, deadlineOf, timeLeft } = require('./options')

const { waitKeeping, waitAsyncKeeping, done, DIED, KEPT } = conditionInternal

const NOT_EMPTY_AT = 8
const NOT_FULL_AT = 16
const H_MAGIC = 6
const H_CAPACITY = 7
const H_CODEC = 8
const H_CLOSED = 9
const H_WRITE = 10
const H_READ = 11
// The frame size of the smallest message a sender that went to sleep waits
// to send (0: none); set under the lock before sleeping, cleared by the
// receive that wakes them. A stale one (its sender gone) costs one notify.
const H_NEED = 12
const DATA_AT = 64
const MAGIC = 0x4e414843 // 'CHAN'

const MIN_BYTES = 8
const MAX_BYTES = 0x40000000 // 2·CAPACITY stays below 2^31
const DEFAULT_BYTES = 65536
const LENGTH = 4 // bytes of a frame's length

const CODECS = ['v8', 'bytes', 'string']
const V8 = 0
const BYTES = 1
const STRING = 2

// What the loops' steps answer when they must wait.
const WAIT = Symbol('wait')
// What tryRecv answers when no message is ready.
const EMPTY = Symbol('Channel.EMPTY')

const STATE = Symbol('Channel state')

const pad = (n) => (n + 3) & ~3
const frameBytes = (n) => LENGTH + pad(n)

// --- arguments ---------------------------------------------------------------

function isHandle (arg) {
  return arg !== null && typeof arg === 'object' && 'buffer' in arg
}

function bytesOption (bytes) {
  if (bytes === undefined) return DEFAULT_BYTES
  if (typeof bytes !== 'number') throw new TypeError(`Channel: bytes must be a number, got ${show(bytes)}`)
  if (!Number.isInteger(bytes) || bytes < MIN_BYTES || bytes > MAX_BYTES) {
    throw new RangeError(`Channel: bytes must be an integer from ${MIN_BYTES} to ${MAX_BYTES}, got ${bytes}`)
  }
  return pad(bytes)
}

function codecOption (codec) {
  if (codec === undefined) return V8
  const i = CODECS.indexOf(codec)
  if (i < 0) throw new TypeError(`Channel: codec must be 'v8', 'bytes' or 'string', got ${show(codec)}`)
  return i
}

// The header of an existing channel's buffer, checked.
function attach (handle) {
  if ('bytes' in handle || 'codec' in handle) {
    throw new TypeError('Channel: pass either options ({ bytes, codec }) or a handle ({ buffer }), not both')
  }
  const buffer = handle.buffer
  if (!types.isSharedArrayBuffer(buffer)) {
    throw new TypeError(`Channel: handle.buffer must be the SharedArrayBuffer of a Channel's handle, got ${show(buffer)}`)
  }
  if (buffer.byteLength < DATA_AT + MIN_BYTES) throw new TypeError('Channel: handle.buffer is not a Channel\'s buffer (too small)')
  const header = new Int32Array(buffer, 0, DATA_AT / 4)
  const capacity = Atomics.load(header, H_CAPACITY)
  const codec = Atomics.load(header, H_CODEC)
  if (Atomics.load(header, H_MAGIC) !== MAGIC || capacity % 4 !== 0 || capacity < MIN_BYTES ||
      DATA_AT + capacity !== buffer.byteLength || codec < 0 || codec >= CODECS.length) {
    throw new TypeError('Channel: handle.buffer is not a Channel\'s buffer (its header does not match)')
  }
  return { buffer, header, capacity, codec }
}

function create (options) {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new TypeError(`Channel: expected options ({ bytes, codec }) or a Channel's handle, got ${show(options)}`)
  }
  const opts = options || {}
  const capacity = bytesOption(opts.bytes)
  const codec = codecOption(opts.codec)
  const buffer = new SharedArrayBuffer(DATA_AT + capacity)
  const header = new Int32Array(buffer, 0, DATA_AT / 4)
  header[H_CAPACITY] = capacity
  header[H_CODEC] = codec
  Atomics.store(header, H_MAGIC, MAGIC)
  return { buffer, header, capacity, codec }
}

function optionsOf (what, options) {
  if (options === undefined || options === null) return Infinity
  if (typeof options !== 'object') throw new TypeError(`${what}: options must be an object, got ${show(options)}`)
  return timeoutOf(what, options.timeout)
}

// --- encoding ----------------------------------------------------------------
// encode(value) → what `put` copies: a Uint8Array, or for 'string' the
// string itself (written straight into the ring where it does not wrap).

function encode (s, value, what) {
  let bytes
  if (s.codec === STRING) {
    if (typeof value !== 'string') throw new TypeError(`${what}: this channel carries strings ('string' codec), got ${show(value)}`)
    bytes = Buffer.byteLength(value, 'utf8')
  } else if (s.codec === BYTES) {
    if (!ArrayBuffer.isView(value)) {
      throw new TypeError(`${what}: this channel carries bytes ('bytes' codec): expected an ArrayBufferView, got ${show(value)}`)
    }
    value = new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
    bytes = value.byteLength
  } else {
    value = v8.serialize(value)
    bytes = value.byteLength
  }
  if (frameBytes(bytes) > s.capacity) {
    throw new RangeError(`${what}: a message of ${bytes} bytes does not fit in the channel's ${s.capacity}-byte ring (at most ${s.capacity - LENGTH})`)
  }
  return { value, bytes }
}

// --- the ring, under the lock --------------------------------------------------

const inUse = (s, w, r) => (w >= r ? w - r : w - r + 2 * s.capacity)
const offsetOf = (s, p) => (p >= s.capacity ? p - s.capacity : p)
const advance = (s, p, n) => (p + n >= 2 * s.capacity ? p + n - 2 * s.capacity : p + n)

// Copies `src` (a Uint8Array) into the ring at offset `at`, wrapping.
function copyIn (s, at, src) {
  const first = Math.min(src.byteLength, s.capacity - at)
  s.u8.set(first === src.byteLength ? src : src.subarray(0, first), at)
  if (first < src.byteLength) s.u8.set(src.subarray(first), 0)
}

// Copies `n` bytes at offset `at` out of the ring into a fresh Buffer.
function copyOut (s, at, n) {
  const out = Buffer.allocUnsafe(n)
  const first = Math.min(n, s.capacity - at)
  out.set(s.u8.subarray(at, at + first), 0)
  if (first < n) out.set(s.u8.subarray(0, n - first), first)
  return out
}

// A send step: WAIT (after noting the room it needs in NEED), or true once
// the message is committed.
function put (s, msg) {
  const h = s.header
  if (Atomics.load(h, H_CLOSED) !== 0) throw new ChannelClosedError('Channel: send on a closed channel')
  const w = Atomics.load(h, H_WRITE)
  const size = frameBytes(msg.bytes)
  if (s.capacity - inUse(s, w, Atomics.load(h, H_READ)) < size) {
    const need = Atomics.load(h, H_NEED)
    if (need === 0 || size < need) Atomics.store(h, H_NEED, size)
    return WAIT
  }
  // The wake-up the message owes, before its commit: stopped in between,
  // this thread holds the lock, and the woken receiver takes it over.
  s.notEmpty.notifyOne()
  const at = offsetOf(s, w)
  s.u32[at >> 2] = msg.bytes
  const body = at + LENGTH === s.capacity ? 0 : at + LENGTH
  if (typeof msg.value !== 'string') {
    copyIn(s, body, msg.value)
  } else if (body + msg.bytes <= s.capacity) {
    s.buf.write(msg.value, body, msg.bytes, 'utf8')
  } else {
    copyIn(s, body, Buffer.from(msg.value, 'utf8'))
  }
  Atomics.store(h, H_WRITE, advance(s, w, size)) // the commit
  return true
}

// A receive step: WAIT, or the message as copied out (a Buffer, or for
// 'string' the decoded string). Throws ChannelClosedError once closed and empty.
function take (s) {
  const r = Atomics.load(s.header, H_READ)
  if (r === Atomics.load(s.header, H_WRITE)) {
    if (Atomics.load(s.header, H_CLOSED) !== 0) throw new ChannelClosedError('Channel: closed, and every message was received')
    return WAIT
  }
  const at = offsetOf(s, r)
  const n = s.u32[at >> 2]
  const body = at + LENGTH === s.capacity ? 0 : at + LENGTH
  const next = advance(s, r, frameBytes(n))
  // Senders that sleep for room this receive makes are woken before its
  // commit (as a send wakes a receiver), then NEED is cleared: stopped
  // before the clear, they were woken; after it, they were too, and note
  // their need again if they must sleep again.
  const need = Atomics.load(s.header, H_NEED)
  if (need !== 0 && s.capacity - inUse(s, Atomics.load(s.header, H_WRITE), next) >= need) {
    s.notFull.notifyAll()
    Atomics.store(s.header, H_NEED, 0)
  }
  const out = s.codec === STRING && body + n <= s.capacity
    ? s.buf.toString('utf8', body, body + n)
    : copyOut(s, body, n)
  Atomics.store(s.header, H_READ, next) // the commit
  return out
}

function decode (s, out) {
  if (s.codec === V8) return v8.deserialize(out)
  if (s.codec === STRING) return typeof out === 'string' ? out : out.toString('utf8')
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
}

// After taking the lock from a thread that died holding it: every commit is
// one store, so the indices are consistent; check them and the chain of
// frames from READ to WRITE, and wake everyone (the dead thread may have
// committed without notifying).
function recover (s) {
  const h = s.header
  const w = Atomics.load(h, H_WRITE)
  const r = Atomics.load(h, H_READ)
  let ok = Atomics.load(h, H_MAGIC) === MAGIC && Atomics.load(h, H_CAPACITY) === s.capacity &&
    w >= 0 && w < 2 * s.capacity && r >= 0 && r < 2 * s.capacity && w % 4 === 0 && r % 4 === 0
  for (let p = r, left = ok ? inUse(s, w, r) : 0; ok && left > 0;) {
    const size = frameBytes(s.u32[offsetOf(s, p) >> 2])
    ok = size <= left
    left -= size
    p = advance(s, p, size)
  }
  if (!ok) {
    const e = new Error('Channel: the ring\'s indices are inconsistent (was the buffer written to from outside the Channel?)')
    e.code = 'ERR_CHANNEL_CORRUPT'
    throw e
  }
  s.notEmpty.notifyAll()
  s.notFull.notifyAll()
}

// --- waiting -------------------------------------------------------------------

function lockBlocking (s) {
  if (s.lock.lock() === OWNER_DIED) recover(s)
}

// Runs step(s) under the lock until it answers something other than WAIT,
// sleeping on `cond` in between. A receiver (cond NOT_EMPTY) keeps a send's
// wake-up on its thread's record until it has taken a message, or found
// none to take; given up (an error) it goes to the next sleeper.
function blocking (s, what, timeout, cond, step, arg) {
  const deadline = deadlineOf(timeout)
  const keep = cond === s.notEmpty
  let kept = false
  let result
  lockBlocking(s)
  try {
    for (;;) {
      result = step(s, arg)
      if (result !== WAIT) break
      if (kept) {
        kept = false
        done(cond, false) // nothing to take: the message went to another receiver
      }
      const left = timeLeft(deadline)
      if (left <= 0) throw new ChannelTimeoutError(`${what}: timed out after ${timeout} ms`)
      if (keep) {
        const r = waitKeeping(cond, s.lock, left)
        kept = (r & KEPT) !== 0
        if ((r & DIED) !== 0) recover(s)
      } else if (cond.wait(s.lock, left) === OWNER_DIED) {
        recover(s)
      }
    }
  } catch (e) {
    if (kept) {
      kept = false
      done(cond, true)
    }
    throw e
  } finally {
    s.lock.unlock()
  }
  if (kept) done(cond, false)
  return result
}

async function nonBlocking (s, what, opts, cond, step, arg) {
  const signal = opts.signal
  if (signal !== undefined && signal.aborted) throw abortError(signal)
  const deadline = deadlineOf(opts.timeout)
  const lockOptions = signal === undefined ? undefined : { signal }
  const release = await s.lock.lockAsync(lockOptions)
  const keep = cond === s.notEmpty
  let kept = false
  let result
  try {
    if (release.ownerDied) recover(s)
    for (;;) {
      result = step(s, arg)
      if (result !== WAIT) break
      if (kept) {
        kept = false
        done(cond, false)
      }
      const left = timeLeft(deadline)
      if (left <= 0) throw new ChannelTimeoutError(`${what}: timed out after ${opts.timeout} ms`)
      if (signal !== undefined && signal.aborted) throw abortError(signal)
      // Rejects with AbortError only once the lock is held again.
      const wait = { timeout: left, signal }
      if (keep) {
        const r = await waitAsyncKeeping(cond, s.lock, wait)
        kept = (r & KEPT) !== 0
        if ((r & DIED) !== 0) recover(s)
      } else if (await cond.waitAsync(s.lock, wait) === OWNER_DIED) {
        recover(s)
      }
    }
  } catch (e) {
    if (kept) {
      kept = false
      done(cond, true)
    }
    throw e
  } finally {
    release()
  }
  if (kept) done(cond, false)
  return result
}

// A try step: tryLock (no waiting for another thread's copy either), one step.
function attempt (s, step, arg) {
  const status = s.lock.tryLock()
  if (status === false) return WAIT
  let result
  try {
    if (status === OWNER_DIED) recover(s)
    result = step(s, arg)
  } finally {
    s.lock.unlock()
  }
  return result
}

// --- the class -----------------------------------------------------------------

class Channel {
  /**
   * @param {{ bytes?: number, codec?: 'v8' | 'bytes' | 'string' } | { buffer: SharedArrayBuffer }} [options]
   *   a new channel, or another thread's view of one (its `handle`)
   */
  constructor (options) {
    const base = isHandle(options) ? attach(options) : create(options)
    const buffer = base.buffer
    this[STATE] = {
      buffer,
      header: base.header,
      capacity: base.capacity,
      codec: base.codec,
      lock: new AsyncLock(buffer, 0),
      notEmpty: new Condition(buffer, NOT_EMPTY_AT),
      notFull: new Condition(buffer, NOT_FULL_AT),
      u8: new Uint8Array(buffer, DATA_AT, base.capacity),
      u32: new Uint32Array(buffer, DATA_AT, base.capacity / 4),
      buf: Buffer.from(buffer, DATA_AT, base.capacity)
    }
  }

  /** What another thread passes to `new Channel(handle)` (postMessage / workerData). */
  get handle () { return { buffer: this[STATE].buffer } }
  /** Bytes of the ring (a message takes 4 more, padded to a multiple of 4). */
  get capacity () { return this[STATE].capacity }
  get codec () { return CODECS[this[STATE].codec] }
  get closed () { return Atomics.load(this[STATE].header, H_CLOSED) !== 0 }

  /** Blocks while the ring is full. Throws ChannelClosedError, ChannelTimeoutError. */
  send (value, options) {
    const s = this[STATE]
    const timeout = optionsOf('Channel.send', options)
    const msg = encode(s, value, 'Channel.send')
    checkCanBlock('Channel.send')
    blocking(s, 'Channel.send', timeout, s.notFull, put, msg)
  }

  /** Blocks while the ring is empty. Throws ChannelClosedError once closed and drained. */
  recv (options) {
    const s = this[STATE]
    const timeout = optionsOf('Channel.recv', options)
    checkCanBlock('Channel.recv')
    const out = blocking(s, 'Channel.recv', timeout, s.notEmpty, take)
    return decode(s, out)
  }

  sendAsync (value, options) {
    const s = this[STATE]
    let opts, msg
    try {
      opts = asyncOptions('Channel.sendAsync', options)
      msg = encode(s, value, 'Channel.sendAsync')
    } catch (e) {
      return Promise.reject(e)
    }
    // First a try in this call: the lock is then held only for the copy, not
    // across an await (a thread that finds it held may go to sleep on it).
    if (opts.signal === undefined || !opts.signal.aborted) {
      let r
      try {
        r = attempt(s, put, msg)
      } catch (e) {
        return Promise.reject(e)
      }
      if (r !== WAIT) return Promise.resolve()
    }
    return nonBlocking(s, 'Channel.sendAsync', opts, s.notFull, put, msg).then(() => {})
  }

  recvAsync (options) {
    const s = this[STATE]
    let opts
    try {
      opts = asyncOptions('Channel.recvAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    if (opts.signal === undefined || !opts.signal.aborted) {
      try {
        const out = attempt(s, take)
        if (out !== WAIT) return Promise.resolve(decode(s, out))
      } catch (e) {
        return Promise.reject(e)
      }
    }
    return nonBlocking(s, 'Channel.recvAsync', opts, s.notEmpty, take).then((out) => decode(s, out))
  }

  /** Sends if there is room now: true if sent, false if not. Throws ChannelClosedError. */
  trySend (value) {
    const s = this[STATE]
    const msg = encode(s, value, 'Channel.trySend')
    return attempt(s, put, msg) !== WAIT
  }

  /** A message if one is ready now, else Channel.EMPTY. Throws ChannelClosedError once closed and drained. */
  tryRecv () {
    const s = this[STATE]
    const out = attempt(s, take)
    if (out === WAIT) return EMPTY
    return decode(s, out)
  }

  /**
   * Closes the channel for every thread: sends fail from now on, receivers
   * get what is left, then ChannelClosedError; every waiter wakes.
   * Idempotent.
   */
  close () {
    const s = this[STATE]
    let status
    try {
      status = s.lock.lock()
    } catch (e) {
      if (!(e instanceof DeadlockError)) throw e
      // An async call of this thread holds the lock or is about to be given
      // it, so this cannot take it: mark the channel closed and wake
      // everyone now, and once more when that call has let the lock go (a
      // waiter that read CLOSED before the store and had not yet gone to
      // sleep was holding the lock then).
      s.notEmpty.notifyAll()
      s.notFull.notifyAll()
      Atomics.store(s.header, H_CLOSED, 1)
      s.notEmpty.notifyAll()
      s.notFull.notifyAll()
      s.lock.lockAsync().then((release) => {
        release()
        s.notEmpty.notifyAll()
        s.notFull.notifyAll()
      }, () => {})
      return
    }
    try {
      if (status === OWNER_DIED) recover(s)
      // Under the lock, the wake-ups first and the store after them: a
      // waiter woken here looks only once the lock is free, and a thread
      // stopped between the two holds the lock, which its waiters take over.
      s.notEmpty.notifyAll()
      s.notFull.notifyAll()
      Atomics.store(s.header, H_CLOSED, 1)
    } finally {
      s.lock.unlock()
    }
  }

  /** Blocking iteration: ends once closed and drained. */
  * [Symbol.iterator] () {
    for (;;) {
      let value
      try {
        value = this.recv()
      } catch (e) {
        if (e instanceof ChannelClosedError) return
        throw e
      }
      yield value
    }
  }

  /** Async iteration: ends once closed and drained. */
  async * [Symbol.asyncIterator] () {
    for (;;) {
      let value
      try {
        value = await this.recvAsync()
      } catch (e) {
        if (e instanceof ChannelClosedError) return
        throw e
      }
      yield value
    }
  }
}

Channel.EMPTY = EMPTY

module.exports = { Channel, internal: { NOT_EMPTY_AT, NOT_FULL_AT, H_NEED } }
