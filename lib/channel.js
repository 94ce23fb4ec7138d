'use strict'
// Channel: a multi-producer, multi-consumer message queue between threads,
// a ring buffer in one SharedArrayBuffer (docs/channel.md).
//
// Layout of the buffer (bytes):
//
//   0    AsyncLock SEND (8)    senders take turns under it
//   64   AsyncLock RECV (8)    receivers take turns under it
//   128  STATE (8, 8-aligned)  two int32 halves, and the 64-bit word every
//                              waiter sleeps on:
//          lo   WRITE | CLOSED (bit 30) | RW (bit 31: receivers may sleep)
//          hi   READ  |                   SW (bit 31: senders may sleep)
//          hi also has GONE (bit 30): closed because a side has no member
//          left (set with CLOSED, in the same step)
//   136  int32 header: MAGIC, CAPACITY, CODEC, NEED, FLAGS, GONE_SIDE
//   192  members: 64 int32 slots of senders, then 64 of receivers, each
//        0 or a member thread's id + 1 (a receiver's with BUSY, FLUSHER)
//   704  the ring: CAPACITY bytes (a multiple of 4)
//
// WRITE and READ are positions in [0, 2·CAPACITY): the byte at position p is
// ring[p mod CAPACITY], and WRITE − READ (mod 2·CAPACITY) is the number of
// bytes in use, so a full ring and an empty one differ. A message is a frame:
// its length (uint32 in the platform's byte order: every side runs on the
// same machine) at a 4-aligned position, then its bytes, padded to a
// multiple of 4. The length never wraps (4-aligned in a ring whose size is a
// multiple of 4); the bytes may.
//
// Only senders move WRITE (one at a time, under SEND), only receivers move
// READ (under RECV): a sender and a receiver never wait for each other's
// lock. Each commits with one step that also makes the wake-up it owes:
//   send   copy the frame in after WRITE, then move WRITE past it: one
//          compareExchange of lo that expects RW clear (nobody can be
//          asleep for it), or, RW set, one native call that makes the same
//          change and wakes every sleeper of STATE
//   recv   copy the frame out at READ, then move READ past it: the same on
//          hi with SW, waking the senders only once the room it leaves fits
//          the smallest message a sleeping sender waits to send (NEED)
//   close  set CLOSED and wake every sleeper: one native call
// A waiter sets its bit with a compareExchange, lets its lock go and sleeps
// while STATE holds what it saw. So a thread stopped anywhere has either not
// made a change or made it with its wake-up; a woken waiter owes nobody
// anything (everyone was woken). A thread that dies holding SEND or RECV
// mid-copy has committed nothing: a half-written frame lies beyond WRITE and
// is overwritten, a half-read one is still at READ; the next locker is told
// (OWNER_DIED) and checks the indices (`recover`).
const fs = require('fs')
const v8 = require('v8')
const { types } = require('util')
const { performance } = require('perf_hooks')
const binding = require('./native')
const { Atomics, checkCanBlock } = require('./host')
const { AsyncLock, internal: lockInternal } = require('./lock')
const regionLock = require('./region-lock')
const futex = require('./futex')
const {
  ACQUIRED, OWNER_DIED, ChannelClosedError, ChannelDisconnectedError, ChannelTimeoutError, SharedRegionError, abortError
} = require('./errors')
const { show, timeoutOf, asyncOptions, deadlineOf, timeLeft } = require('./options')
const { itemBytes, writeItem, readItem } = require('./wire')

const {
  cancelAsync, threadEnds, waitWatching, enqueueWatchingAsync, isThreadAlive, lockCompeteAsync, isRegionBuffer,
  regionEnds
} = futex.internal
const { viewOf, WORD, ME, PROTOCOL } = lockInternal
const { acquire } = require('./acquire')

// Each lock on a cache line of its own (64 bytes), and STATE with the
// read-mostly header on a third: a producer and a consumer each keep their
// lock's line, and share only STATE's.
const SEND_AT = 0
const RECV_AT = 64
const STATE_AT = 128
const LO = STATE_AT / 4 // int32 index of lo (hi: LO + 1)
const HI = LO + 1
const BIG = STATE_AT / 8 // BigInt64 index of STATE
const H_MAGIC = 34
const H_CAPACITY = 35
const H_CODEC = 36
// The frame size of the smallest message a sender that went to sleep waits
// to send (0: none); set before the sender sets SW, cleared by the receive
// that wakes the senders. A stale one (its sender gone) costs one wake-up.
const H_NEED = 37
// Which sides ever had a member, and which had more than the slots hold.
const H_FLAGS = 38
// The side whose last member left or ended, when that closed the channel
// (set just before the step that sets GONE; read only once GONE is seen).
const H_GONE_SIDE = 39
const SLOTS = 64 // members of a side that are followed
const MEMBERS = 48 // int32 index of the first sender slot (byte 192)
const DATA_AT = 192 + 2 * SLOTS * 4
// 'CHN2': the layout with members. A buffer of the layout before (no
// members, the ring at byte 192) has another MAGIC and is refused.
const MAGIC = 0x324e4843

const POS = 0x3fffffff // WRITE / READ
const CLOSED = 0x40000000 // in lo
const GONE = 0x40000000 // in hi
const SLEEPERS = 0x80000000 | 0 // RW in lo, SW in hi
// lo and hi as the low and high halves of STATE's 64-bit value (every
// target of the addon is little-endian; the other order is handled too).
const LITTLE = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1
const loOf = (v) => Number(BigInt.asIntN(32, LITTLE ? v : v >> 32n))
const hiOf = (v) => Number(BigInt.asIntN(32, LITTLE ? v >> 32n : v))
const join64 = (lo, hi) => LITTLE
  ? BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo >>> 0))
  : BigInt.asIntN(64, (BigInt(lo) << 32n) | BigInt(hi >>> 0))

const MIN_BYTES = 8
const MAX_BYTES = 0x20000000 // 2·CAPACITY fits in POS
const DEFAULT_BYTES = 65536
const LENGTH = 4 // bytes of a frame's length

// Spinning before sleeping (docs/channel.md, "Spinning"). A wake-up costs
// the waker a system call and the sleeper a trip through the scheduler (tens
// of microseconds where cross-CPU interrupts are slow), against well under
// a microsecond for a small message: a thread that must wait first looks at
// STATE for up to SPIN_MS, and a thread that finds its side's lock taken
// tries again for up to LOCK_SPIN_MS before it queues. A blocking call
// always spins (its thread has nothing else to do). An async call spins on
// its thread's event loop, so each channel object stops doing that in a
// direction after SPIN_MISSES fruitless spins in a row, and then tries one
// spin of RETRY_SPIN_MS in SPIN_RETRY waits to see whether it pays again
// (longer than the partner's wake-up: two threads that both sleep in a
// ping-pong only start spinning again if one of them outlasts the other's
// wake-up).
const SPIN_MS = 0.05
const RETRY_SPIN_MS = 0.2
const LOCK_SPIN_MS = 0.02
const SPIN_MISSES = 4
const SPIN_RETRY = 8

// A codec's number in the header. 'v8' is V8_ITEMS: values that are items
// of lib/wire.js (undefined, null, booleans, numbers, strings) go as items,
// everything else through v8.serialize (whose output begins with 0xFF, which
// no item does). V8 is the 'v8' of releases without items: a channel with
// it in its header (made by such a release, in this process) gets no items
// from this one, and such a release refuses a V8_ITEMS channel with "its
// header does not match" instead of misreading an item.
const CODECS = ['v8', 'bytes', 'string', 'v8']
const V8 = 0
const V8_ITEMS = 3
const BYTES = 1
const STRING = 2

// What the steps answer when they must wait.
const WAIT = Symbol('wait')
// What tryRecv answers when no message is ready.
const EMPTY = Symbol('Channel.EMPTY')

const STATE = Symbol('Channel state')

const pad = (n) => (n + 3) & ~3
const frameBytes = (n) => LENGTH + pad(n)

// --- arguments ---------------------------------------------------------------

// What the constructor was given: a handle ({ buffer }), a Channel or a
// copy of one made by structured clone (postMessage, workerData: its own
// `handle` property, the only one a clone keeps), or options.
function handleOf (arg) {
  if (arg === null || typeof arg !== 'object') return null
  if ('buffer' in arg) return arg
  const own = Object.getOwnPropertyDescriptor(arg, 'handle')
  if (own !== undefined && 'value' in own && own.value !== null && typeof own.value === 'object' && 'buffer' in own.value) {
    return own.value
  }
  return null
}

const OPTIONS = ['bytes', 'codec']
const PASS = 'pass options ({ bytes, codec }) for a new channel, or a Channel\'s handle (new Channel(ch.handle), or the Channel itself) for the same channel'

function bytesOption (bytes) {
  if (bytes === undefined) return DEFAULT_BYTES
  if (typeof bytes !== 'number') throw new TypeError(`Channel: bytes must be a number, got ${show(bytes)}`)
  if (!Number.isInteger(bytes) || bytes < MIN_BYTES || bytes > MAX_BYTES) {
    throw new RangeError(`Channel: bytes must be an integer from ${MIN_BYTES} to ${MAX_BYTES}, got ${bytes}`)
  }
  return pad(bytes)
}

function codecOption (codec) {
  if (codec === undefined) return V8_ITEMS
  const i = CODECS.indexOf(codec)
  if (i === V8) return V8_ITEMS
  if (i < 0) throw new TypeError(`Channel: codec must be 'v8', 'bytes' or 'string', got ${show(codec)}`)
  return i
}

// The header of an existing channel's buffer, checked.
function attach (handle) {
  if (isRegionMemory(handle.buffer, handle.byteOffset)) return placeInRegion(handle)
  if (handle !== null && typeof handle === 'object' && ('bytes' in handle || 'codec' in handle)) {
    throw new TypeError('Channel: pass either options ({ bytes, codec }) or a handle ({ buffer }), not both')
  }
  if (handle.byteOffset !== undefined && handle.byteOffset !== 0) {
    throw new TypeError('Channel: a byteOffset places a channel in a shared region\'s memory; a channel of one process has its SharedArrayBuffer to itself')
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
  return { buffer, at: 0, region: false, header, capacity, codec }
}

function create (options) {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new TypeError(`Channel: expected options ({ bytes, codec }) or a Channel's handle, got ${show(options)}`)
  }
  const opts = options || {}
  // A buffer or a view is not a channel: a new, unconnected ring made from
  // it would silently lose every message sent to the one meant.
  if (types.isAnyArrayBuffer(opts) || ArrayBuffer.isView(opts)) {
    throw new TypeError(`Channel: got ${show(opts)}, not a channel's handle: ${PASS}`)
  }
  for (const key of Object.keys(opts)) {
    if (!OPTIONS.includes(key)) throw new TypeError(`Channel: unknown option ${show(key)}: ${PASS}`)
  }
  const capacity = bytesOption(opts.bytes)
  const codec = codecOption(opts.codec)
  const buffer = new SharedArrayBuffer(DATA_AT + capacity)
  const header = new Int32Array(buffer, 0, DATA_AT / 4)
  header[H_CAPACITY] = capacity
  header[H_CODEC] = codec
  Atomics.store(header, H_MAGIC, MAGIC)
  return { buffer, at: 0, region: false, header, capacity, codec }
}

// --- a channel in a shared region's memory -------------------------------------
// `new Channel({ buffer: region.buffer, byteOffset, bytes, codec })`, the same
// call in every process: the first to come initialises the header, the
// others attach (and are refused if they ask for another ring). Without
// bytes and codec it only attaches. The channel takes DATA_AT + bytes
// bytes from byteOffset (a multiple of 8: STATE is a 64-bit word).
//
// The first to come is decided by one compareExchange of MAGIC, 0 → −owner
// (an owner id of the region is below 2^30, so that never reads as MAGIC);
// it writes the header, then stores MAGIC and wakes whoever waits for it.
// One that finds −owner waits for MAGIC in slices, and takes the
// initialisation over if that owner died (SIGKILL mid-way): writing the
// header again is harmless, since nobody has attached yet.

const REGION_KEYS = ['buffer', 'byteOffset', 'bytes', 'codec']

// Whether `buffer` is a shared region's memory (at byteOffset): the buffer
// a region opened here, or a SharedArrayBuffer over one (Node 24.16+,
// which a worker may have been posted).
function isRegionMemory (buffer, byteOffset) {
  if (isRegionBuffer(buffer)) return true
  if (!types.isSharedArrayBuffer(buffer)) return false
  const at = typeof byteOffset === 'number' && Number.isInteger(byteOffset) && byteOffset >= 0 && byteOffset + 8 <= buffer.byteLength ? byteOffset : 0
  return buffer.byteLength >= at + 8 && binding.inRegion(new Int32Array(buffer, at, 2))
}

function placeInRegion (handle) {
  for (const key of Object.keys(handle)) {
    if (!REGION_KEYS.includes(key)) throw new TypeError(`Channel: unknown option ${show(key)} for a channel in a shared region (${REGION_KEYS.join(', ')})`)
  }
  const buffer = handle.buffer
  const at = handle.byteOffset === undefined ? 0 : handle.byteOffset
  if (typeof at !== 'number') throw new TypeError(`Channel: byteOffset must be a number, got ${show(at)}`)
  if (!Number.isInteger(at) || at < 0 || at % 8 !== 0) {
    throw new RangeError(`Channel: byteOffset must be a non-negative multiple of 8, got ${at}`)
  }
  const creating = handle.bytes !== undefined || handle.codec !== undefined
  const capacity = creating ? bytesOption(handle.bytes) : 0
  const codec = creating ? codecOption(handle.codec) : 0
  const span = DATA_AT + (creating ? capacity : MIN_BYTES)
  if (at + span > buffer.byteLength) {
    throw new RangeError(`Channel: a channel of ${span} bytes (${DATA_AT} of header, then the ring) at byteOffset ${at} does not fit in the region's ${buffer.byteLength} bytes`)
  }
  const header = new Int32Array(buffer, at, DATA_AT / 4)
  const me = regionLock.ownerIn(header)
  for (;;) {
    const magic = Atomics.load(header, H_MAGIC)
    if (magic === MAGIC) break
    if (magic === 0) {
      if (!creating) throw new TypeError(`Channel: there is no channel at byteOffset ${at} of the region yet: pass { bytes, codec } to make one there`)
      if (Atomics.compareExchange(header, H_MAGIC, 0, -me) === 0) initialise(header, capacity, codec, me)
      continue
    }
    if (magic > 0 || -magic >= 0x40000000) {
      throw new TypeError(`Channel: the memory at byteOffset ${at} of the region is not a Channel (its header does not match)`)
    }
    if (-magic === me || !binding.regionOwnerAlive(header, -magic)) {
      // Its initialiser died midway (or was this thread, stopped by an exception).
      if (Atomics.compareExchange(header, H_MAGIC, magic, -me) === magic) initialise(header, capacity, codec, me)
      continue
    }
    futex.wait(header, H_MAGIC, magic, SLICE)
  }
  const found = Atomics.load(header, H_CAPACITY)
  const foundCodec = Atomics.load(header, H_CODEC)
  if (found % 4 !== 0 || found < MIN_BYTES || found > MAX_BYTES || foundCodec < 0 || foundCodec >= CODECS.length) {
    throw new TypeError(`Channel: the memory at byteOffset ${at} of the region is not a Channel (its header does not match)`)
  }
  if (at + DATA_AT + found > buffer.byteLength) {
    throw new RangeError(`Channel: the channel at byteOffset ${at} has a ring of ${found} bytes, which does not fit in this region's ${buffer.byteLength} bytes`)
  }
  if (creating && (found !== capacity || foundCodec !== codec)) {
    throw new SharedRegionError('ERR_REGION_MISMATCH', `Channel: the channel at byteOffset ${at} of the region was made with bytes ${found} and codec ${show(CODECS[foundCodec])}, not bytes ${capacity} and codec ${show(CODECS[codec])}`)
  }
  return { buffer, at, region: true, header, capacity: found, codec: foundCodec }
}

// Writes a fresh header (this thread won MAGIC: it holds −me), then MAGIC.
function initialise (header, capacity, codec, me) {
  for (let i = 0; i < DATA_AT / 4; i++) if (i !== H_MAGIC) Atomics.store(header, i, 0)
  Atomics.store(header, H_CAPACITY, capacity)
  Atomics.store(header, H_CODEC, codec)
  if (Atomics.compareExchange(header, H_MAGIC, -me, MAGIC) === -me) futex.notify(header, H_MAGIC)
}

function maxOption (what, max) {
  if (typeof max !== 'number') throw new TypeError(`${what}: max must be a number, got ${show(max)}`)
  if (!(max >= 1) || (max !== Infinity && !Number.isInteger(max))) {
    throw new RangeError(`${what}: max must be an integer of at least 1 (or Infinity), got ${max}`)
  }
  return max
}

function optionsOf (what, options) {
  if (options === undefined || options === null) return Infinity
  if (typeof options !== 'object') throw new TypeError(`${what}: options must be an object, got ${show(options)}`)
  return timeoutOf(what, options.timeout)
}

// --- encoding ----------------------------------------------------------------
// encode(value) → what `put` copies: a Uint8Array, or for 'string' the
// string itself (written straight into the ring where it does not wrap).

// A view's bytes, read through the intrinsic getters, which read the view's
// own slots: a subclass or an own property that says otherwise cannot make
// a send copy more (or other) bytes than it reserved in the ring.
const TYPED_ARRAY = Object.getPrototypeOf(Uint8Array.prototype)
const getter = (proto, key) => Object.getOwnPropertyDescriptor(proto, key).get
const kindOf = getter(TYPED_ARRAY, Symbol.toStringTag) // undefined for a DataView
const bytesOfView = getter(TYPED_ARRAY, 'byteLength')
const bufferOfView = getter(TYPED_ARRAY, 'buffer')
const offsetOfView = getter(TYPED_ARRAY, 'byteOffset')

// A Uint8Array over the view's bytes as they are now: a view of fixed
// length, also of a length-tracking view (of a resizable ArrayBuffer or a
// growable SharedArrayBuffer), so that a buffer grown meanwhile cannot make
// the copy longer than the space reserved for it.
function asBytes (value) {
  const kind = kindOf.call(value)
  if (kind !== undefined) return new Uint8Array(bufferOfView.call(value), offsetOfView.call(value), bytesOfView.call(value))
  const dv = DataView.prototype
  return new Uint8Array(getter(dv, 'buffer').call(value), getter(dv, 'byteOffset').call(value), getter(dv, 'byteLength').call(value))
}

function encode (s, value, what) {
  let bytes
  if (s.codec === STRING) {
    if (typeof value !== 'string') throw new TypeError(`${what}: this channel carries strings ('string' codec), got ${show(value)}`)
    bytes = Buffer.byteLength(value, 'utf8')
  } else if (s.codec === BYTES) {
    if (!ArrayBuffer.isView(value)) {
      throw new TypeError(`${what}: this channel carries bytes ('bytes' codec): expected an ArrayBufferView, got ${show(value)}`)
    }
    value = asBytes(value)
    bytes = bytesOfView.call(value)
    if (frameBytes(bytes) <= s.capacity) return { value, bytes, user: true }
  } else {
    const n = s.codec === V8_ITEMS ? itemBytes(value) : -1
    if (n < 0) {
      value = v8.serialize(value)
    } else {
      const item = Buffer.allocUnsafe(n)
      writeItem(item, 0, value, n)
      value = item
    }
    bytes = value.length
  }
  if (frameBytes(bytes) > s.capacity) {
    throw new RangeError(`${what}: a message of ${bytes} bytes does not fit in the channel's ${s.capacity}-byte ring (at most ${s.capacity - LENGTH})`)
  }
  return { value, bytes }
}

// A message that will be copied into the ring later (an async send that
// must wait): the caller's bytes copied now.
function own (msg) {
  if (msg.user !== true) return msg
  const copy = new Uint8Array(msg.bytes)
  copy.set(msg.value)
  return { value: copy, bytes: msg.bytes }
}

// What a flush passes to `put`: it waits as a sender of a message the size
// of the whole ring would (room for it: the ring is empty).
const flushMessage = (s) => ({ flush: true, bytes: s.capacity - LENGTH, busy: -1 })

const ROLES = { receiver: [0], sender: [1], both: [0, 1] }
function sidesOf (what, role) {
  if (typeof role !== 'string' || !Object.prototype.hasOwnProperty.call(ROLES, role)) {
    throw new TypeError(`${what}: role must be 'sender', 'receiver' or 'both', got ${show(role)}`)
  }
  return ROLES[role]
}

// --- the ring, each side under its own lock -------------------------------------

const inUse = (s, w, r) => (w >= r ? w - r : w - r + 2 * s.capacity)
const offsetOf = (s, p) => (p >= s.capacity ? p - s.capacity : p)
const advance = (s, p, n) => (p + n >= 2 * s.capacity ? p + n - 2 * s.capacity : p + n)

// Copies `src` (a Uint8Array of `n` bytes) into the ring at offset `at`,
// wrapping.
function copyIn (s, at, src, n) {
  const first = s.capacity - at
  if (n >= NATIVE_COPY) {
    binding.copyBytes(s.u8, at, src, 0, n <= first ? n : first)
    if (n > first) binding.copyBytes(s.u8, 0, src, first, n - first)
    return
  }
  if (n <= first) {
    s.u8.set(src, at)
    return
  }
  const buffer = bufferOfView.call(src)
  const offset = offsetOfView.call(src)
  s.u8.set(new Uint8Array(buffer, offset, first), at)
  s.u8.set(new Uint8Array(buffer, offset + first, n - first), 0)
}

// From this size on, a frame is copied into and out of the ring by the
// addon's memmove (binding.copyBytes), into an uninitialised buffer: V8
// copies to and from shared memory in small atomic pieces, about half as
// fast, and zero-fills what `slice` allocates.
const NATIVE_COPY = 4096

// Copies `n` bytes at offset `at` out of the ring into a fresh Uint8Array:
// up to 64 bytes (kept in V8's heap) and from 4 KiB on (Buffer's pool's
// limit) a slice; in between, from Buffer's pool, which allocates those
// sizes several times faster.
function copyOut (s, at, n) {
  if (n >= NATIVE_COPY) {
    const out = Buffer.allocUnsafeSlow(n)
    const view = new Uint8Array(out.buffer, out.byteOffset, n)
    const first = s.capacity - at
    binding.copyBytes(view, 0, s.u8, at, n <= first ? n : first)
    if (n > first) binding.copyBytes(view, first, s.u8, 0, n - first)
    return view
  }
  if (at + n <= s.capacity) {
    if (n <= 64 || n >= 4096) return s.u8.slice(at, at + n)
    const out = Buffer.allocUnsafe(n)
    s.buf.copy(out, 0, at, at + n)
    return new Uint8Array(out.buffer, out.byteOffset, n)
  }
  const out = new Uint8Array(n)
  const first = s.capacity - at
  out.set(s.u8.subarray(at, s.capacity), 0)
  out.set(s.u8.subarray(0, n - first), first)
  return out
}

// Moves WRITE to `next` (under SEND): one compareExchange if no receiver
// may sleep, else one native call that also wakes every sleeper. `lo` is
// the value of lo the step read (tried first, then read again while it
// changes). False if the channel was closed meanwhile (nothing committed).
function commitWrite (s, next, lo) {
  const st = s.st
  for (;; lo = Atomics.load(st, LO)) {
    if ((lo & CLOSED) !== 0) return false
    if ((lo & SLEEPERS) === 0) {
      if (Atomics.compareExchange(st, LO, lo, next) === lo) return true
      continue
    }
    const old = Atomics.load(s.big, BIG)
    if (loOf(old) !== lo) continue
    if (binding.compareExchangeNotify(s.big, BIG, old, join64(next, hiOf(old)), Infinity) === old) return true
  }
}

// Moves READ to `next` (under RECV), waking the senders if one may sleep and
// the room left fits NEED; otherwise SW stays as it is. `hi` as the step
// read it (tried first).
//
// A sender stores its NEED before it reads the STATE it sleeps on. So when
// the commit that keeps SW took, NEED is read again: a smaller NEED stored
// since then belongs to a sender that may have read STATE before that commit
// and be asleep on it with room now; then the commit goes round again and
// wakes (the same READ, with SW cleared).
function commitRead (s, next, hi) {
  const st = s.st
  const h = s.header
  for (;; hi = Atomics.load(st, HI)) {
    const target = next | (hi & GONE)
    if ((hi & SLEEPERS) === 0) {
      if (Atomics.compareExchange(st, HI, hi, target) === hi) return
      continue
    }
    const need = Atomics.load(h, H_NEED)
    if (need !== 0 && s.capacity - inUse(s, Atomics.load(st, LO) & POS, next) < need) {
      if (Atomics.compareExchange(st, HI, hi, target | SLEEPERS) !== hi) continue
      if (Atomics.load(h, H_NEED) === need) return
      continue
    }
    // Cleared first: stopped before the call, the next receive finds SW
    // with NEED 0 and wakes them.
    Atomics.store(h, H_NEED, 0)
    const old = Atomics.load(s.big, BIG)
    if (hiOf(old) !== hi) continue
    if (binding.compareExchangeNotify(s.big, BIG, old, join64(loOf(old), target), Infinity) === old) return
  }
}

// A send step (SEND held): WAIT, or true once the message is committed.
function put (s, msg) {
  if (msg.flush === true) return flushed(s, msg)
  const read = Atomics.load(s.st, HI) & POS
  checkReceivers(s, read)
  const lo = Atomics.load(s.st, LO)
  if ((lo & CLOSED) !== 0) throw closedError(s, 'Channel: send on a closed channel')
  const w = lo & POS
  const size = frameBytes(msg.bytes)
  if (s.capacity - inUse(s, w, read) < size) return WAIT
  const at = offsetOf(s, w)
  s.u32[at >> 2] = msg.bytes
  const body = at + LENGTH === s.capacity ? 0 : at + LENGTH
  if (typeof msg.value !== 'string') {
    copyIn(s, body, msg.value, msg.bytes)
  } else if (body + msg.bytes <= s.capacity) {
    s.buf.write(msg.value, body, msg.bytes, 'utf8')
  } else {
    copyIn(s, body, Buffer.from(msg.value, 'utf8'), msg.bytes)
  }
  if (!commitWrite(s, advance(s, w, size), lo)) throw closedError(s, 'Channel: send on a closed channel')
  return true
}

// A flush's step (SEND held): true once the ring is empty and every
// receiver that took from it has asked for more (or is gone). Otherwise
// WAIT: for room for the whole ring (so the receive that empties it wakes
// this waiter: NEED), or, with the ring empty, on the slot of a receiver
// not back yet (msg.busy). Throws ChannelDisconnectedError if messages are
// left that no receiver is left to take.
function flushed (s, msg) {
  const lo = Atomics.load(s.st, LO)
  const hi = Atomics.load(s.st, HI)
  msg.busy = -1
  if ((lo & POS) !== (hi & POS)) {
    const gone = (hi & GONE) !== 0 ? Atomics.load(s.header, H_GONE_SIDE) - 1 === RECV : (lo & CLOSED) !== 0 && sideGone(s, RECV)
    if (gone) {
      throw new ChannelDisconnectedError(`Channel.flush: ${inUse(s, lo & POS, hi & POS)} bytes of messages are left, and every receiver of the channel is gone (ended, or left)`)
    }
    return WAIT
  }
  const base = slotBase(RECV)
  for (let i = 0; i < SLOTS; i++) {
    const v = Atomics.load(s.st, base + i)
    if ((v & BUSY) !== 0 && (v & ID) !== s.me && alive(s, v & ID)) {
      msg.busy = base + i
      return WAIT
    }
  }
  return true
}

// A receive step (RECV held): WAIT, or the message as copied out (a
// Uint8Array, or for 'string' the decoded string). Throws
// ChannelClosedError once closed and empty.
function take (s) {
  const hi = Atomics.load(s.st, HI)
  const r = hi & POS
  const lo = Atomics.load(s.st, LO)
  if (r === (lo & POS)) {
    markIdle(s)
    // CLOSED is set with no commit after it: read with WRITE in one load.
    if ((lo & CLOSED) !== 0) throw closedError(s, 'Channel: closed, and every message was received')
    return WAIT
  }
  markBusy(s)
  const at = offsetOf(s, r)
  const n = s.u32[at >> 2]
  const out = frameAt(s, at, n)
  commitRead(s, advance(s, r, frameBytes(n)), hi)
  return out
}

// A receive step for up to `max` messages (RECV held): WAIT, or an array
// of 1 … max messages as `take` copies them out, all taken with one commit.
function takeMany (s, max) {
  const hi = Atomics.load(s.st, HI)
  let r = hi & POS
  const lo = Atomics.load(s.st, LO)
  const w = lo & POS
  if (r === w) {
    markIdle(s)
    if ((lo & CLOSED) !== 0) throw closedError(s, 'Channel: closed, and every message was received')
    return WAIT
  }
  markBusy(s)
  const out = []
  do {
    const at = offsetOf(s, r)
    const n = s.u32[at >> 2]
    out.push(frameAt(s, at, n))
    r = advance(s, r, frameBytes(n))
  } while (r !== w && out.length < max)
  commitRead(s, r, hi)
  return out
}

// The message of the frame at offset `at` (its length `n`), copied out; a
// string, or an item, that does not wrap is read in place.
function frameAt (s, at, n) {
  const body = at + LENGTH === s.capacity ? 0 : at + LENGTH
  const whole = body + n <= s.capacity
  if (s.codec === STRING && whole) return s.buf.toString('utf8', body, body + n)
  if (s.codec === V8_ITEMS && whole && s.u8[body] !== 0xff) return itemAt(s.buf, body)
  return copyOut(s, body, n)
}

const box = [undefined] // what readItem reads into
function itemAt (buf, at) {
  readItem(buf, at, box, 0)
  const value = box[0]
  box[0] = undefined
  return value
}

// What a receive returns, from what `take` copied out: for the 'v8' codecs
// an item `take` read in place is the value already (never a Uint8Array).
function decode (s, out) {
  if (s.codec === V8_ITEMS || s.codec === V8) {
    if (!(out instanceof Uint8Array)) return out
    if (out[0] === 0xff) return v8.deserialize(out)
    return itemAt(Buffer.from(out.buffer, out.byteOffset, out.length), 0) // an item that wrapped
  }
  if (s.codec === STRING) return typeof out === 'string' ? out : Buffer.from(out.buffer, out.byteOffset, out.byteLength).toString('utf8')
  return out
}

// Decodes each message of what takeMany took, in place. (Only a 'v8'
// message can fail to decode, one v8.deserialize refuses, which no send's
// v8.serialize output is; it would throw as for recv, the batch with it.)
function decodeAll (s, out) {
  for (let k = 0; k < out.length; k++) out[k] = decode(s, out[k])
  return out
}

// After taking a side's lock from a thread that died holding it: every
// commit is one step, so the indices are those of the last complete step;
// check that they are in range (a failure means something else wrote into
// the buffer). Nobody is owed a wake-up.
function recover (s) {
  const h = s.header
  const w = Atomics.load(s.st, LO) & POS
  const r = Atomics.load(s.st, HI) & POS
  const ok = Atomics.load(h, H_MAGIC) === MAGIC && Atomics.load(h, H_CAPACITY) === s.capacity &&
    w < 2 * s.capacity && r < 2 * s.capacity && w % 4 === 0 && r % 4 === 0
  if (!ok) {
    const e = new Error('Channel: the ring\'s indices are inconsistent (was the buffer written to from outside the Channel?)')
    e.code = 'ERR_CHANNEL_CORRUPT'
    throw e
  }
}

// --- members: who sends, who receives ---------------------------------------------
// A thread becomes a sender of a channel at its first send (or join), a
// receiver at its first receive; it stays one until it leaves or ends. Each
// side has SLOTS slots of member thread ids (+ 1). A side that had members
// and has none left (each slot empty or naming an ended thread) closes the
// channel: GONE and CLOSED in one step, waking every waiter. Senders then
// fail with ChannelDisconnectedError; receivers take what is left, then see
// the end. Who notices: a waiter, which sleeps watching (any thread's end
// wakes it, and it looks at the other side before it sleeps again), a
// sender before each send (when some thread ended since it last looked),
// and a member that leaves. A side with more members than slots is never
// taken for gone (H_FLAGS' OVERFLOW): its members cannot all be followed.

const ID = 0x3fffffff
const BUSY = 0x40000000 // a receiver took messages and has not asked for more since
const FLUSHER = 0x80000000 | 0 // a flush may sleep on this receiver's slot
const JOINED = [1, 2] // H_FLAGS, by side (RECV, SEND)
const OVERFLOW = [4, 8]
const slotBase = (dir) => dir === SEND ? MEMBERS : MEMBERS + SLOTS
const SIDE_NAMES = ['receiver', 'sender']

// This thread's membership of a channel's sides, shared by every Channel
// object of its buffer in this copy of the module: [slot index or -1, …] by
// side (RECV, SEND; SLOTS: a member without a slot), then whether its
// receiver slot has BUSY (so that a stream of receives touches it only when
// the ring runs empty).
// (Channels in a region's memory are several per buffer: by byteOffset.)
const memberships = new WeakMap()
const IS_BUSY = 2
function membership (buffer, at) {
  let byOffset = memberships.get(buffer)
  if (byOffset === undefined) {
    byOffset = new Map()
    memberships.set(buffer, byOffset)
  }
  let m = byOffset.get(at)
  if (m === undefined) {
    m = [-1, -1, false]
    byOffset.set(at, m)
  }
  return m
}

const alive = (s, id) => id === s.me || s.x.alive(s, id)

// Makes this thread a member of side `dir` (RECV, SEND).
function join (s, dir) {
  const st = s.st
  const base = slotBase(dir)
  let slot = -1
  for (let i = 0; i < SLOTS && slot < 0; i++) {
    if ((Atomics.load(st, base + i) & ID) === s.me) slot = i // another copy of the module in this thread
  }
  for (let i = 0; i < SLOTS && slot < 0; i++) {
    const v = Atomics.load(st, base + i)
    if ((v === 0 || !alive(s, v & ID)) && Atomics.compareExchange(st, base + i, v, s.me) === v) slot = i
  }
  if (slot < 0) Atomics.or(s.header, H_FLAGS, OVERFLOW[dir])
  // After the slot: whoever sees the side joined sees this member.
  Atomics.or(s.header, H_FLAGS, JOINED[dir])
  s.member[dir] = slot < 0 ? SLOTS : slot
}

// Whether side `dir` had members and has none left.
function sideGone (s, dir) {
  const flags = Atomics.load(s.header, H_FLAGS)
  if ((flags & JOINED[dir]) === 0 || (flags & OVERFLOW[dir]) !== 0) return false
  const base = slotBase(dir)
  for (let i = 0; i < SLOTS; i++) {
    const id = Atomics.load(s.st, base + i) & ID
    if (id !== 0 && alive(s, id)) return false
  }
  return true
}

// Closes the channel because side `dir` is gone (unless it is closed
// already): GONE and CLOSED in one step, which wakes every waiter.
function disconnect (s, dir) {
  for (;;) {
    const old = Atomics.load(s.big, BIG)
    const lo = loOf(old)
    if ((lo & CLOSED) !== 0) return
    Atomics.store(s.header, H_GONE_SIDE, dir + 1)
    const next = join64((lo | CLOSED) & ~SLEEPERS, (hiOf(old) | GONE) & ~SLEEPERS)
    if (binding.compareExchangeNotify(s.big, BIG, old, next, Infinity) === old) return
  }
}

// Before a waiter of side `dir` sleeps: if the other side is gone, closes
// the channel and answers true (look again: the step then sees it closed).
// A flush is a sender's wait.
function lookAtPeers (s, dir) {
  const other = 1 - dir
  if ((Atomics.load(s.st, LO) & CLOSED) !== 0 || !sideGone(s, other)) return false
  disconnect(s, other)
  return true
}

// A send's check, cheap unless some thread ended since the last one. In a
// region (where a death is learnt only by asking) it looks at the
// receivers at most once per slice, and not while they are seen taking:
// `read`, READ as this send found it, moved since the previous send means
// that a receiver committed a take since then, so the side was not gone.
// A stream the receivers keep up with then reads no clock (a clock read
// costs as much as the rest of a send); a side that died is noticed at the
// first send after its last take that comes in a new slice.
function checkReceivers (s, read) {
  // (A branch rather than s.x.ends(): this runs on every send.)
  let ends
  if (s.x === THREADS) {
    ends = threadEnds()
  } else {
    const seen = s.seenRead
    s.seenRead = read
    if (read !== seen && seen !== -1) return
    ends = s.x.sliceNow()
  }
  if (ends === s.seenEnds) return
  s.seenEnds = ends
  if (sideGone(s, RECV)) disconnect(s, RECV)
}

// This thread stops being a member of side `dir`; the channel closes if
// that was its last one.
function leave (s, dir) {
  const slot = s.member[dir]
  if (slot < 0) return
  s.member[dir] = -1
  if (dir === RECV) s.member[IS_BUSY] = false
  if (slot < SLOTS) {
    const i = slotBase(dir) + slot
    const v = Atomics.load(s.st, i)
    if ((v & ID) === s.me) {
      if ((v & FLUSHER) !== 0) binding.compareExchangeNotify(s.st, i, v, 0, Infinity)
      else Atomics.compareExchange(s.st, i, v, 0)
    }
  }
  if (sideGone(s, dir)) disconnect(s, dir)
}

// The error of an operation on a closed channel.
function closedError (s, what) {
  if ((Atomics.load(s.st, HI) & GONE) === 0) return new ChannelClosedError(what)
  const side = Atomics.load(s.header, H_GONE_SIDE) - 1
  return new ChannelDisconnectedError(`${what}: every ${SIDE_NAMES[side]} of the channel is gone (ended, or left), so it closed`)
}

// A receiver marks its slot BUSY before it takes messages, and clears it
// when it asks for more and finds none (or the end): a flush waits for the
// ring to be empty and for every receiver that took from it to be back.
function markBusy (s) {
  const m = s.member
  if (m[IS_BUSY] || m[RECV] < 0 || m[RECV] >= SLOTS) return
  m[IS_BUSY] = true
  const i = slotBase(RECV) + m[RECV]
  const v = Atomics.load(s.st, i)
  if ((v & BUSY) === 0 && (v & ID) === s.me) Atomics.compareExchange(s.st, i, v, v | BUSY)
}
function markIdle (s) {
  const m = s.member
  if (!m[IS_BUSY]) return
  m[IS_BUSY] = false
  const i = slotBase(RECV) + m[RECV]
  for (;;) {
    const v = Atomics.load(s.st, i)
    if ((v & BUSY) === 0 || (v & ID) !== s.me) return
    // With FLUSHER set, a flush may sleep on the slot: clear and wake in one step.
    const done = (v & FLUSHER) === 0
      ? Atomics.compareExchange(s.st, i, v, s.me) === v
      : binding.compareExchangeNotify(s.st, i, v, s.me, Infinity) === v
    if (done) return
  }
}

// --- locks and sleeps ------------------------------------------------------------

const RECV = 0
const SEND = 1

// Takes a side's lock if it is free or freed within LOCK_SPIN_MS: no native call.
function spinLock (s, dir) {
  const lw = s.lockWords[dir]
  const mine = s.lockedByMe
  if (Atomics.compareExchange(lw, WORD, 0, mine) === 0) return true
  const end = performance.now() + LOCK_SPIN_MS
  for (;;) {
    for (let i = 0; i < 32; i++) {
      if (Atomics.load(lw, WORD) === 0 && Atomics.compareExchange(lw, WORD, 0, mine) === 0) return true
    }
    if (performance.now() >= end) return false
  }
}

function lockBlocking (s, dir) {
  if (spinLock(s, dir)) return
  if (s.locks[dir].lock() === OWNER_DIED) recover(s)
}

// Whether a receive / a send of `msg` would not wait now (read without the
// lock: the step under the lock decides).
const canTake = (s) => {
  const lo = Atomics.load(s.st, LO)
  return (lo & CLOSED) !== 0 || (lo & POS) !== (Atomics.load(s.st, HI) & POS)
}
const canPut = (s, msg) => {
  const lo = Atomics.load(s.st, LO)
  return (lo & CLOSED) !== 0 || s.capacity - inUse(s, lo & POS, Atomics.load(s.st, HI) & POS) >= frameBytes(msg.bytes)
}

// Looks at STATE until ready(s, arg) or SPIN_MS is spent; for an async
// call, only if spinning pays in that direction (s.misses[dir]: fruitless
// spins in a row).
function spin (s, dir, ready, arg, blocking) {
  if (machineBusy()) return false
  const misses = s.misses[dir]
  let budget = SPIN_MS
  if (misses >= SPIN_MISSES && !(blocking && s.blockingSpinsAlways)) {
    s.misses[dir] = misses + 1
    if ((misses - SPIN_MISSES) % SPIN_RETRY !== SPIN_RETRY - 1) return false
    budget = RETRY_SPIN_MS
  }
  const end = performance.now() + budget
  for (;;) {
    for (let k = 0; k < 32; k++) {
      if (ready(s, arg)) {
        s.misses[dir] = 0
        return true
      }
    }
    if (performance.now() >= end) {
      s.misses[dir] = misses + 1
      return false
    }
  }
}

// Whether every core has a runnable thread right now (Linux: the running
// count of /proc/loadavg, looked at once per BUSY_MS at most). Then a spin
// only takes a core from a thread that could make progress, maybe the very
// one being waited for, and a sleeper is what the scheduler favours when it
// is woken: on a busy machine the channel's waiters sleep at once. Elsewhere
// (no /proc/loadavg) the answer is false, and spins adapt as before.
const BUSY_MS = 50
let cores = 0 // counted at the first look (os.cpus() costs a fraction of a ms)
let busyUntil = -Infinity
let busy = false
let loadavg = true // false: not available here
function machineBusy () {
  const t = performance.now()
  if (t < busyUntil) return busy
  busyUntil = t + BUSY_MS
  if (cores === 0) cores = Math.max(1, require('os').cpus().length)
  busy = runnable() > cores
  return busy
}
// Opened, read and closed each time (every BUSY_MS at most): a descriptor
// kept open would stay with every copy of this module a test runner makes.
function runnable () {
  if (!loadavg) return 0
  try {
    // "0.20 0.18 0.12 3/80 11206": the fourth field's first number.
    const text = fs.readFileSync('/proc/loadavg', 'latin1')
    const slash = text.indexOf('/')
    const space = text.lastIndexOf(' ', slash)
    return slash > 0 ? Number(text.slice(space + 1, slash)) : 0
  } catch {
    loadavg = false
    return 0
  }
}

// With the side's lock held and the step answering WAIT: sets the side's
// sleepers bit (a sender first notes the room it needs in NEED) and returns
// the 64-bit STATE to sleep on, or null if STATE changed meanwhile (look
// again). The caller then lets the lock go and sleeps while STATE holds it.
// A flush whose ring is empty (msg.busy: the slot of a receiver not back
// yet) sleeps on that slot instead: { index, value }.
function prepareSleep (s, dir, msg) {
  const st = s.st
  if (dir === SEND && msg.flush === true && msg.busy >= 0) return prepareFlushSleep(s, msg.busy)
  const half = dir === RECV ? LO : HI
  if (dir === SEND) {
    const need = Atomics.load(s.header, H_NEED)
    const size = frameBytes(msg.bytes)
    if (need === 0 || size < need) Atomics.store(s.header, H_NEED, size)
  }
  const word = Atomics.load(st, half)
  if ((word & SLEEPERS) === 0 && Atomics.compareExchange(st, half, word, word | SLEEPERS) !== word) return null
  const v = Atomics.load(s.big, BIG)
  const lo = loOf(v)
  // Still nothing to take / no room, with the bit set: sleep on this value.
  // (A flush waits for the ring to empty also once it is closed.)
  if (dir === RECV) {
    if ((lo & SLEEPERS) === 0 || (lo & CLOSED) !== 0 || (lo & POS) !== (hiOf(v) & POS)) return null
  } else {
    const hi = hiOf(v)
    if ((hi & SLEEPERS) === 0 || ((lo & CLOSED) !== 0 && msg.flush !== true) ||
      s.capacity - inUse(s, lo & POS, hi & POS) >= frameBytes(msg.bytes)) return null
  }
  return v
}

// A flush's sleep on the slot st[i] of a receiver that took messages and is
// not back: FLUSHER set, so that the receiver's return wakes it.
function prepareFlushSleep (s, i) {
  const v = Atomics.load(s.st, i)
  if ((v & BUSY) === 0 || !alive(s, v & ID)) return null
  if ((v & FLUSHER) === 0 && Atomics.compareExchange(s.st, i, v, v | FLUSHER) !== v) return null
  return { index: i, value: v | FLUSHER }
}

// The sleep of a blocking waiter: on STATE (a BigInt) or a slot. Any
// thread's end wakes it, and it does not sleep if one ended after `ends`
// (in a region: a slice at most).
function sleepOn (s, v, ends, timeout) {
  if (typeof v === 'bigint') return s.x.sleep(s.big, BIG, v, ends, timeout)
  return s.x.sleep(s.st, v.index, v.value, ends, timeout)
}

// Runs step(s, arg) under the side's lock until it answers something other
// than WAIT, sleeping on STATE in between.
function blocking (s, what, timeout, dir, step, arg) {
  const deadline = deadlineOf(timeout)
  const lock = s.locks[dir]
  let spun = false
  lockBlocking(s, dir)
  let held = true
  try {
    for (;;) {
      const result = step(s, arg)
      if (result !== WAIT) return result
      const left = timeLeft(deadline)
      if (left <= 0) throw new ChannelTimeoutError(`${what}: timed out after ${timeout} ms`)
      if (!spun) {
        // The first time: let go of the lock and look for a while before
        // sleeping (then the step again: the state may have changed).
        spun = true
        held = false
        lock.unlock()
        spin(s, dir, dir === RECV ? canTake : canPut, arg, true)
        lockBlocking(s, dir)
        held = true
        continue
      }
      // Before a sleep: is the other side still there? (Read the count of
      // ended threads first: one that ends after the look wakes the sleep.)
      const ends = s.x.ends()
      if (lookAtPeers(s, dir)) continue
      const v = prepareSleep(s, dir, arg)
      if (v === null) continue
      held = false
      lock.unlock()
      sleepOn(s, v, ends, left)
      lockBlocking(s, dir)
      held = true
    }
  } finally {
    if (held) lock.unlock()
  }
}

// One async sleep on STATE (or a slot) while it holds `v`: resolves once
// woken, timed out, aborted, a thread ended, or it changed already.
function sleepAsync (s, v, ends, timeout, signal) {
  const ta = typeof v === 'bigint' ? s.big : s.st
  const index = typeof v === 'bigint' ? BIG : v.index
  const q = s.x.sleepAsync(ta, index, typeof v === 'bigint' ? v : v.value, ends, timeout)
  if (q === 'not-equal') return undefined
  if (signal === undefined) return q.promise
  const onAbort = () => cancelAsync(ta, index, q.token)
  signal.addEventListener('abort', onAbort)
  if (signal.aborted) onAbort()
  return q.promise.then((r) => {
    signal.removeEventListener('abort', onAbort)
    return r
  })
}

// A side's lock for an async call: the AsyncLock's protocol, except that
// its waiter is only ever woken to compete, never handed the lock. This
// thread may be blocked elsewhere when the lock comes free (in a receive of
// another channel, waiting for the very thread that needs this side next),
// and a lock handed to it would stay held until it runs again.
const COMPETING = Object.assign({}, PROTOCOL, {
  park (ta, waited, remaining) {
    const q = lockCompeteAsync(ta, WORD, ME, remaining)
    return q === 0 ? ACQUIRED : q === -1 ? OWNER_DIED : q
  }
})
const NO_LIMIT = { timeout: Infinity, signal: undefined }

// --- who is who, who lives, how to sleep: one strategy per channel ------------
// A channel of one process names its members by thread id, asks the addon's
// registry of ended threads whether they live, and sleeps watching (any
// thread's end wakes it): nobody looks again on a timer. A channel in a
// shared region's memory names them by owner id of the region (a thread of
// a process, with a generation: src/region.rs), asks the region whether
// that thread still lives (the kernel's record lock of its process, the
// generation of its thread slot), takes its side locks by the region's
// robust protocol (lib/region-lock.js), and sleeps watching the region's
// count of ends: a thread or process gone (its death learnt by the
// process's watcher of deaths where there is one, src/region/watch.rs)
// wakes it, and each sleep lasts a slice at most (src/region.rs), since a
// process killed inside the native call that commits and wakes may have
// made the change without the wake-up. Woken, the sleeper takes its lock,
// tries its step and looks at the other side again. A sender looks at the
// receivers at most once per SLICE ms of the clock (`sliceNow`), and not
// while it sees them take (`checkReceivers`).
const SLICE = 50

const THREADS = {
  me: ME,
  alive: (s, id) => isThreadAlive(id - 1),
  ends: threadEnds,
  sleep: waitWatching,
  sleepAsync: (ta, index, value, ends, timeout) => enqueueWatchingAsync(ta, index, value, ends, timeout, true),
  lockProtocol: COMPETING,
  lockView: (s, lock) => viewOf(lock, 'Channel')
}

function regionStrategy (header) {
  const me = regionLock.ownerIn(header)
  return {
    me,
    alive: (s, id) => binding.regionOwnerAlive(s.st, id),
    ends: () => regionEnds(header),
    sliceNow: () => Math.floor(performance.now() / SLICE),
    sleep: waitWatching,
    sleepAsync: (ta, index, value, ends, timeout) => enqueueWatchingAsync(ta, index, value, ends, timeout, true),
    // Woken waiters compete (and a starving one is kept the word for a
    // slice at most): never a lock handed to a thread blocked elsewhere
    // for longer than that.
    lockProtocol: regionLock.protocolFor(me),
    lockView: (s, lock) => new Int32Array(s.buffer, lock.byteOffset, 2)
  }
}

function lockSideAsync (s, dir, signal) {
  const ta = s.lockWords[dir]
  const opts = signal === undefined ? NO_LIMIT : { timeout: Infinity, signal }
  const p = s.x.lockProtocol
  if (p.now(ta, opts)) return Promise.resolve(ACQUIRED)
  return acquire(p, ta, opts, 'Channel')
}

async function nonBlocking (s, what, opts, dir, step, arg) {
  const signal = opts.signal
  if (signal !== undefined && signal.aborted) throw abortError(signal)
  const deadline = deadlineOf(opts.timeout)
  const lock = s.locks[dir]
  for (;;) {
    let v = null
    let ends = 0
    const status = await lockSideAsync(s, dir, signal)
    try {
      if (status === OWNER_DIED) recover(s)
      for (;;) {
        const result = step(s, arg)
        if (result !== WAIT) return result
        const left = timeLeft(deadline)
        if (left <= 0) throw new ChannelTimeoutError(`${what}: timed out after ${opts.timeout} ms`)
        if (signal !== undefined && signal.aborted) throw abortError(signal)
        ends = s.x.ends()
        if (lookAtPeers(s, dir)) continue
        v = prepareSleep(s, dir, arg)
        if (v !== null) break
      }
    } finally {
      lock.unlock()
    }
    // The lock is free while this waiter sleeps.
    const slept = sleepAsync(s, v, ends, timeLeft(deadline), signal)
    if (slept !== undefined) await slept
    if (signal !== undefined && signal.aborted) throw abortError(signal)
  }
}

// An async receive (step `take` or `takeMany` with `arg`; `finish` decodes
// what it took): first a try in this call and, if it must wait, a look for
// a while, so that the lock is held for the copy only, never across an
// await; then the waiting path.
function receiveAsync (s, what, opts, step, arg, finish) {
  if (opts.signal === undefined || !opts.signal.aborted) {
    try {
      let out = attempt(s, RECV, step, arg)
      if (out !== WAIT) return Promise.resolve(finish(s, out))
      if (opts.timeout !== 0 && spin(s, RECV, canTake) && (out = attempt(s, RECV, step, arg)) !== WAIT) {
        return Promise.resolve(finish(s, out))
      }
    } catch (e) {
      return Promise.reject(e)
    }
  }
  return nonBlocking(s, what, opts, RECV, step, arg).then((out) => finish(s, out))
}

// A try step: the side's lock without waiting for another thread's copy,
// one step.
function attempt (s, dir, step, arg) {
  const status = spinLock(s, dir) ? ACQUIRED : s.locks[dir].tryLock()
  if (status === false) return WAIT
  try {
    if (status === OWNER_DIED) recover(s)
    return step(s, arg)
  } finally {
    s.locks[dir].unlock()
  }
}

// --- the class -----------------------------------------------------------------

class Channel {
  /**
   * @param {{ bytes?: number, codec?: 'v8' | 'bytes' | 'string' } | { buffer: SharedArrayBuffer }} [options]
   *   a new channel, or another thread's view of one (its `handle`)
   */
  constructor (options) {
    const handle = handleOf(options)
    const base = handle !== null ? attach(handle) : create(options)
    const buffer = base.buffer
    const at = base.at
    const x = base.region ? regionStrategy(base.header) : THREADS
    const locks = [new AsyncLock(buffer, at + RECV_AT), new AsyncLock(buffer, at + SEND_AT)]
    const s = this[STATE] = {
      buffer,
      header: base.header,
      capacity: base.capacity,
      codec: base.codec,
      x, // the strategy: in-process or in a region
      me: x.me, // this thread's id in member slots
      lockedByMe: x.me * 2, // a side's lock word held by this thread, nobody queued
      locks,
      lockWords: null,
      st: new Int32Array(buffer, at, DATA_AT / 4),
      big: new BigInt64Array(buffer, at, DATA_AT / 8),
      u8: new Uint8Array(buffer, at + DATA_AT, base.capacity),
      u32: new Uint32Array(buffer, at + DATA_AT, base.capacity / 4),
      buf: Buffer.from(buffer, at + DATA_AT, base.capacity),
      misses: [0, 0], // per direction (RECV, SEND): see SPIN_MISSES
      blockingSpinsAlways: true, // or adapts, as an async call's spin does
      member: membership(buffer, at), // this thread's membership of each side
      seenEnds: -1, // x.ends() when a sender last checked the receivers
      seenRead: -1 // in a region: READ as the last send found it
    }
    s.lockWords = locks.map((l) => x.lockView(s, l))
    // What another thread passes to `new Channel(handle)`. An own,
    // enumerable property: a Channel posted whole (postMessage, workerData)
    // arrives as { handle }, which the constructor takes as the same channel.
    const own = base.region ? { buffer, byteOffset: at } : { buffer }
    Object.defineProperty(this, 'handle', { value: Object.freeze(own), enumerable: true })
  }

  /** Bytes of the ring (a message takes 4 more, padded to a multiple of 4). */
  get capacity () { return this[STATE].capacity }
  get codec () { return CODECS[this[STATE].codec] }
  get closed () { return (Atomics.load(this[STATE].st, LO) & CLOSED) !== 0 }

  /** Blocks while the ring is full. Throws ChannelClosedError, ChannelTimeoutError. */
  send (value, options) {
    const s = this[STATE]
    const timeout = optionsOf('Channel.send', options)
    const msg = encode(s, value, 'Channel.send')
    checkCanBlock('Channel.send')
    if (s.member[SEND] < 0) join(s, SEND)
    blocking(s, 'Channel.send', timeout, SEND, put, msg)
  }

  /** Blocks while the ring is empty. Throws ChannelClosedError once closed and drained. */
  recv (options) {
    const s = this[STATE]
    const timeout = optionsOf('Channel.recv', options)
    checkCanBlock('Channel.recv')
    if (s.member[RECV] < 0) join(s, RECV)
    return decode(s, blocking(s, 'Channel.recv', timeout, RECV, take))
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
    if (s.member[SEND] < 0) join(s, SEND)
    // First a try in this call (and, if it must wait, a look for a while):
    // the lock is then held only for the copy, not across an await.
    if (opts.signal === undefined || !opts.signal.aborted) {
      try {
        if (attempt(s, SEND, put, msg) !== WAIT) return Promise.resolve()
        if (opts.timeout !== 0 && spin(s, SEND, canPut, msg) && attempt(s, SEND, put, msg) !== WAIT) return Promise.resolve()
      } catch (e) {
        return Promise.reject(e)
      }
    }
    // It must wait: the message is what it is now, whatever the caller
    // does with its view meanwhile.
    return nonBlocking(s, 'Channel.sendAsync', opts, SEND, put, own(msg)).then(() => {})
  }

  recvAsync (options) {
    let opts
    try {
      opts = asyncOptions('Channel.recvAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const s = this[STATE]
    if (s.member[RECV] < 0) join(s, RECV)
    return receiveAsync(s, 'Channel.recvAsync', opts, take, undefined, decode)
  }

  /**
   * Blocks while the ring is empty, then takes every message there, up to
   * `max`, at once: an array of 1 … max messages, in the order of the ring.
   * Throws ChannelClosedError once closed and drained.
   */
  recvMany (max, options) {
    const s = this[STATE]
    const n = maxOption('Channel.recvMany', max)
    const timeout = optionsOf('Channel.recvMany', options)
    checkCanBlock('Channel.recvMany')
    if (s.member[RECV] < 0) join(s, RECV)
    return decodeAll(s, blocking(s, 'Channel.recvMany', timeout, RECV, takeMany, n))
  }

  recvManyAsync (max, options) {
    let opts, n
    try {
      n = maxOption('Channel.recvManyAsync', max)
      opts = asyncOptions('Channel.recvManyAsync', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const s = this[STATE]
    if (s.member[RECV] < 0) join(s, RECV)
    return receiveAsync(s, 'Channel.recvManyAsync', opts, takeMany, n, decodeAll)
  }

  /** Sends if there is room now: true if sent, false if not. Throws ChannelClosedError. */
  trySend (value) {
    const s = this[STATE]
    const msg = encode(s, value, 'Channel.trySend')
    if (s.member[SEND] < 0) join(s, SEND)
    return attempt(s, SEND, put, msg) !== WAIT
  }

  /** A message if one is ready now, else Channel.EMPTY. Throws ChannelClosedError once closed and drained. */
  tryRecv () {
    const s = this[STATE]
    if (s.member[RECV] < 0) join(s, RECV)
    const out = attempt(s, RECV, take)
    if (out === WAIT) return EMPTY
    return decode(s, out)
  }

  /**
   * Blocks until every message in the ring has been taken and every
   * receiver that took some has asked for more (or left, or ended): what a
   * sender calls before its process exits. Throws ChannelDisconnectedError
   * if messages are left that no receiver is left to take, and
   * ChannelTimeoutError.
   */
  flushSync (options) {
    const s = this[STATE]
    const timeout = optionsOf('Channel.flushSync', options)
    checkCanBlock('Channel.flushSync')
    blocking(s, 'Channel.flushSync', timeout, SEND, put, flushMessage(s))
  }

  /** flushSync without blocking: resolves once it would return. */
  flush (options) {
    const s = this[STATE]
    let opts
    try {
      opts = asyncOptions('Channel.flush', options)
    } catch (e) {
      return Promise.reject(e)
    }
    const msg = flushMessage(s)
    if (opts.signal === undefined || !opts.signal.aborted) {
      try {
        if (attempt(s, SEND, put, msg) !== WAIT) return Promise.resolve()
      } catch (e) {
        return Promise.reject(e)
      }
    }
    return nonBlocking(s, 'Channel.flush', opts, SEND, put, msg).then(() => {})
  }

  /**
   * Makes this thread a sender ('sender'), a receiver ('receiver') or both
   * of the channel now, as its first send or receive would. Returns this.
   */
  join (role) {
    const s = this[STATE]
    for (const dir of sidesOf('Channel.join', role)) if (s.member[dir] < 0) join(s, dir)
    return this
  }

  /**
   * This thread stops being a sender / receiver / both (default) of the
   * channel. The last sender or receiver to go (by leave, or by its thread
   * ending) closes the channel: ChannelDisconnectedError.
   */
  leave (role) {
    const s = this[STATE]
    for (const dir of sidesOf('Channel.leave', role === undefined ? 'both' : role)) leave(s, dir)
  }

  /**
   * Closes the channel for every thread: sends fail from now on, receivers
   * get what is left, then ChannelClosedError; every waiter wakes. One step
   * (it takes no lock). Idempotent.
   */
  close () {
    const s = this[STATE]
    for (;;) {
      const old = Atomics.load(s.big, BIG)
      const lo = loOf(old)
      if ((lo & CLOSED) !== 0) return
      const next = join64((lo | CLOSED) & ~SLEEPERS, hiOf(old) & ~SLEEPERS)
      if (binding.compareExchangeNotify(s.big, BIG, old, next, Infinity) === old) return
    }
  }

  /** Blocking iteration: ends once closed and drained. */
  [Symbol.iterator] () {
    const ch = this
    return {
      next () {
        try {
          return { value: ch.recv(), done: false }
        } catch (e) {
          if (e instanceof ChannelClosedError) return { value: undefined, done: true }
          throw e
        }
      },
      return () { return { value: undefined, done: true } },
      [Symbol.iterator] () { return this }
    }
  }

  /**
   * Async iteration: ends once closed and drained. Each step is one
   * recvAsync (a message that is there resolves at once), without an async
   * generator's extra turns.
   */
  [Symbol.asyncIterator] () {
    const ch = this
    const step = (value) => ({ value, done: false })
    const end = (e) => {
      if (e instanceof ChannelClosedError) return { value: undefined, done: true }
      throw e
    }
    const s = this[STATE]
    if (s.member[RECV] < 0) join(s, RECV)
    return {
      next () {
        // A message that is there now: one resolved promise.
        let out
        try {
          out = attempt(s, RECV, take)
          if (out !== WAIT) return Promise.resolve({ value: decode(s, out), done: false })
        } catch (e) {
          try {
            return Promise.resolve(end(e))
          } catch (error) {
            return Promise.reject(error)
          }
        }
        return ch.recvAsync().then(step, end)
      },
      return () { return Promise.resolve({ value: undefined, done: true }) },
      [Symbol.asyncIterator] () { return this }
    }
  }
}

Channel.EMPTY = EMPTY

// Makes this channel object's blocking calls adapt their spin as async
// calls do (createSyncFn's caller: the worker it waits for needs a CPU,
// which a spin that does not pay takes from it).
function adaptBlockingSpin (ch) {
  ch[STATE].blockingSpinsAlways = false
}

// For createSyncFn's worker, between calls: an async receiver's spin, as
// recvAsync makes it (and stops making it where it does not pay), without
// receiving. Whether a message (or the end) is there.
function spinRecv (ch) {
  const s = ch[STATE]
  return canTake(s) || spin(s, RECV, canTake)
}

module.exports = { Channel, internal: { STATE_AT, H_NEED, SEND_AT, RECV_AT, adaptBlockingSpin, spinRecv } }
