'use strict'
// Channel (lib/channel.js): framing and codecs, wrap-around at every offset,
// bad input, exactly-once delivery under contention across workers and the
// main thread, close, timeouts and aborts. Thread death is in
// channel-death.test.js (child processes).
const assert = require('assert')
const v8 = require('v8')
const path = require('path')
const { Worker } = require('worker_threads')
const { test, describe } = require('./harness')
const { until, inbox, runChild, transcript } = require('./util')
const { Channel, ChannelClosedError, ChannelTimeoutError, AbortError } = require('..')
const { internal } = require('../lib/channel')
const { internal: futex } = require('../lib/futex')
const { makeMessage, check } = require('./fixtures/channel-util')

const WORKER = path.join(__dirname, 'fixtures', 'channel-worker.js')
const HAS_ABORT = typeof AbortController === 'function'

function startWorker (data) {
  const worker = new Worker(WORKER, { workerData: data })
  return { worker, box: inbox(worker, `the ${data.role} worker`) }
}

// How many threads sleep on the channel's STATE (receivers and senders alike).
const sleepers = (ch, at) => futex.queueLength(new Int32Array(ch.handle.buffer, 0, 48), at / 4)

const bytesOf = (n, seed) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255)

describe('Channel: messages and codecs', () => {
  test('v8 (the default) carries what v8.serialize does, in order', () => {
    const ch = new Channel({ bytes: 1024 })
    const values = [1, 'two', { three: [3n, new Map([[1, 2]])] }, undefined, null, new Uint8Array([4]), new Date(5)]
    for (const v of values) ch.send(v)
    for (const v of values) assert.deepStrictEqual(ch.recv(), v)
    assert.strictEqual(ch.tryRecv(), Channel.EMPTY)
    assert.strictEqual(ch.codec, 'v8')
  })

  test('v8: undefined, null, booleans, numbers and strings (sent without v8.serialize) arrive as structured clone makes them', async () => {
    const clone = (v) => v8.deserialize(v8.serialize(v))
    const values = [
      undefined, null, true, false, 0, -0, 1, -1.5, NaN, Infinity, -Infinity, 2 ** 53, 2 ** -1074,
      '', 'a', 'é\u00ff latin-1', 'ſ two-byte', '😀 astral', '\ud800 lone high', 'lone low \udfff',
      'x'.repeat(5000), '€'.repeat(3000)
    ]
    const ch = new Channel({ bytes: 1 << 14 })
    for (const v of values) ch.send(v)
    for (const v of values) {
      const got = ch.recv()
      assert.ok(Object.is(got, clone(v)), `${String(v).slice(0, 20)}: got ${String(got).slice(0, 20)}`)
    }
    // Through another view of the channel, and the async path.
    const other = new Channel(ch.handle)
    for (const v of values) ch.send(v)
    for (const v of values) assert.ok(Object.is(await other.recvAsync(), clone(v)))
  })

  test('v8: a channel whose header names the codec of releases without items gets v8.serialize output only', () => {
    const ch = new Channel({ bytes: 64 })
    new Int32Array(ch.handle.buffer)[36] = 0 // the header's codec, as those releases write it
    const old = new Channel(ch.handle)
    assert.strictEqual(old.codec, 'v8')
    old.send(42)
    assert.strictEqual(new Uint8Array(ch.handle.buffer, 704 + 4, 1)[0], 0xff)
    assert.strictEqual(old.recv(), 42)
  })

  test('bytes: any ArrayBufferView, copied; received as a fresh Uint8Array', () => {
    const ch = new Channel({ bytes: 256, codec: 'bytes' })
    const src = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])
    ch.send(new DataView(src.buffer, 2, 3))
    ch.send(new Uint16Array([0x0102]))
    ch.send(src.subarray(0, 0))
    src[2] = 99 // the channel holds a copy
    assert.deepStrictEqual(ch.recv(), new Uint8Array([3, 4, 5]))
    assert.deepStrictEqual(ch.recv(), new Uint8Array(new Uint16Array([0x0102]).buffer))
    const empty = ch.recv()
    assert.ok(empty instanceof Uint8Array && empty.length === 0)
  })

  test('bytes: a view is copied by its own size, whatever its class or own properties say, also across the ring\'s end', () => {
    // A ring of 48 bytes; each round moves the positions on by 68 bytes, so
    // the messages start at every multiple of 4 and some wrap.
    const ch = new Channel({ bytes: 48, codec: 'bytes' })
    class Liar extends Uint8Array {
      get length () { return 1 }
      get byteLength () { return 1 }
      get buffer () { return new ArrayBuffer(1) }
      get byteOffset () { return 0 }
      subarray () { return new Uint8Array(40) }
      static get [Symbol.species] () { return Uint8Array }
    }
    const owned = bytesOf(12, 5)
    Object.defineProperty(owned, 'length', { value: 1 })
    Object.defineProperty(owned, 'byteLength', { value: 40 })
    for (let round = 0; round < 12; round++) {
      const lie = Liar.from(bytesOf(12, round))
      assert.strictEqual(ch.trySend(bytesOf(32, round)), true)
      assert.deepStrictEqual(ch.tryRecv(), bytesOf(32, round))
      assert.strictEqual(ch.trySend(lie), true)
      assert.strictEqual(ch.trySend(owned), true)
      assert.deepStrictEqual(ch.tryRecv(), bytesOf(12, round))
      assert.deepStrictEqual(ch.tryRecv(), bytesOf(12, 5))
      assert.strictEqual(ch.tryRecv(), Channel.EMPTY)
    }
  })

  test('string: UTF-8, any code points, empty strings', () => {
    const ch = new Channel({ bytes: 256, codec: 'string' })
    const values = ['', 'a', 'héllo wörld', '日本語', '😀 ok', '\u0000']
    for (const v of values) ch.send(v)
    for (const v of values) assert.strictEqual(ch.recv(), v)
  })

  test('a handle opens the same channel (also for its codec and capacity)', () => {
    const a = new Channel({ bytes: 100, codec: 'string' })
    const b = new Channel(a.handle)
    assert.strictEqual(b.codec, 'string')
    assert.strictEqual(b.capacity, 100)
    a.send('x')
    assert.strictEqual(b.recv(), 'x')
    b.close()
    assert.strictEqual(a.closed, true)
  })

  test('wrap-around: every message length at every ring offset, every codec', () => {
    // 'bytes' and 'string': the indices are moved by empty messages (4-byte
    // frames) through every offset of a 64-byte ring.
    const cap = 64
    for (let offset = 0; offset < cap; offset += 4) {
      for (let n = 0; n <= cap - 4; n++) {
        const bytes = new Channel({ bytes: cap, codec: 'bytes' })
        const strings = new Channel({ bytes: cap, codec: 'string' })
        for (let k = 0; k < offset; k += 4) {
          bytes.send(new Uint8Array(0))
          bytes.recv()
          strings.send('')
          strings.recv()
        }
        const b = bytesOf(n, offset)
        bytes.send(b)
        assert.deepStrictEqual(bytes.recv(), b, `bytes, offset ${offset}, length ${n}`)
        // n UTF-8 bytes, two-byte characters across the end of the ring.
        const str = 'a'.repeat(n & 1) + 'é'.repeat(n >> 1)
        strings.send(str)
        assert.strictEqual(strings.recv(), str, `string, offset ${offset}, length ${n}`)
        assert.strictEqual(strings.tryRecv(), Channel.EMPTY)
      }
    }
    // 'v8': undefined takes 1 byte (an item), an 8-byte frame; in a 68-byte
    // ring, k of them move the indices to 8k mod 68, every offset. Each
    // offset gets an object (v8.serialize) and strings (items) of every size.
    const ring = 68
    for (let k = 0; k < ring / 4; k++) {
      for (let n = 0; n <= ring - 4 - 8; n++) {
        const ch = new Channel({ bytes: ring })
        for (let i = 0; i < k; i++) {
          ch.send(undefined)
          ch.recv()
        }
        const v = { s: 'é'.repeat(n >> 1) + 'a'.repeat(n & 1) }
        ch.send(v)
        assert.deepStrictEqual(ch.recv(), v, `v8, offset ${(8 * k) % ring}, string of ${n} bytes`)
        for (const str of ['é'.repeat(n).slice(0, ring - 13), 'ſ'.repeat(n >> 1).slice(0, (ring - 13) >> 1)]) {
          ch.send(str)
          assert.strictEqual(ch.recv(), str, `v8, an item: ${str.length} characters after offset ${(8 * k) % ring}`)
          ch.send(-0)
          assert.ok(Object.is(ch.recv(), -0))
        }
      }
    }
  })

  test('a message as large as the ring fits; one byte more is a RangeError, nothing sent', () => {
    const ch = new Channel({ bytes: 64, codec: 'bytes' })
    ch.send(bytesOf(60, 1))
    assert.deepStrictEqual(ch.recv(), bytesOf(60, 1))
    assert.throws(() => ch.send(new Uint8Array(61)), (e) => e instanceof RangeError && /61 bytes/.test(e.message))
    assert.throws(() => ch.trySend(new Uint8Array(61)), RangeError)
    assert.strictEqual(ch.tryRecv(), Channel.EMPTY)
    return assert.rejects(ch.sendAsync(new Uint8Array(61)), RangeError)
  })
})

describe('Channel: bad input', () => {
  test('options and handles', () => {
    assert.throws(() => new Channel(5), TypeError)
    assert.throws(() => new Channel(null), TypeError)
    assert.throws(() => new Channel({ bytes: '64' }), TypeError)
    assert.throws(() => new Channel({ bytes: 4 }), RangeError)
    assert.throws(() => new Channel({ bytes: 2 ** 31 }), RangeError)
    assert.throws(() => new Channel({ bytes: 64.5 }), RangeError)
    assert.throws(() => new Channel({ codec: 'json' }), (e) => e instanceof TypeError && /codec/.test(e.message))
    assert.throws(() => new Channel({ buffer: new ArrayBuffer(128) }), TypeError)
    assert.throws(() => new Channel({ buffer: new SharedArrayBuffer(128) }), (e) => e instanceof TypeError && /not a Channel/.test(e.message))
    assert.throws(() => new Channel({ buffer: new SharedArrayBuffer(8) }), TypeError)
    const ch = new Channel({ bytes: 64 })
    assert.throws(() => new Channel({ buffer: ch.handle.buffer.slice(0, 100) }), TypeError)
    assert.throws(() => new Channel({ buffer: ch.handle.buffer, codec: 'string' }), /not both/)
  })

  test('values of the wrong kind for the codec, and options', async () => {
    const bytes = new Channel({ codec: 'bytes' })
    const strings = new Channel({ codec: 'string' })
    const v8 = new Channel()
    assert.throws(() => bytes.send('text'), TypeError)
    assert.throws(() => bytes.send([1, 2]), TypeError)
    assert.throws(() => bytes.send(new ArrayBuffer(2)), TypeError)
    assert.throws(() => strings.send(5), TypeError)
    assert.throws(() => v8.send(() => {}), /could not be cloned/)
    assert.throws(() => v8.send(1, 5), TypeError)
    assert.throws(() => v8.send(1, { timeout: -1 }), RangeError)
    assert.throws(() => v8.recv({ timeout: 'x' }), TypeError)
    await assert.rejects(v8.recvAsync({ signal: {} }), TypeError)
    await assert.rejects(strings.sendAsync(5), TypeError)
    // Nothing was sent by any of these.
    for (const c of [bytes, strings, v8]) assert.strictEqual(c.tryRecv(), Channel.EMPTY)
  })
})

describe('Channel: large frames (copied by the addon)', () => {
  test('messages of 4 KiB and more, across the ring\'s end at many offsets, arrive intact and own their memory', () => {
    const ch = new Channel({ bytes: 20000, codec: 'bytes' })
    const big = new Channel({ bytes: 1 << 16 })
    for (let round = 0; round < 40; round++) {
      const n = 4096 + ((round * 977) % 6000)
      const msg = bytesOf(n, round)
      ch.send(msg)
      msg.fill(0) // the ring holds a copy
      const got = ch.recv()
      assert.strictEqual(got.length, n)
      assert.deepStrictEqual(got, bytesOf(n, round))
      assert.strictEqual(got.buffer.byteLength, n, 'a buffer of its own')
      assert.ok(!(got.buffer instanceof SharedArrayBuffer))
      const value = { round, text: 'x'.repeat(n) } // a 'v8' message through v8.serialize
      big.send(value)
      assert.deepStrictEqual(big.recv(), value)
    }
  })
})

describe('Channel: the handle', () => {
  test('a buffer, a view or an unknown option is a TypeError that says what to pass, never a new unconnected ring', () => {
    const ch = new Channel({ bytes: 64 })
    const say = (e) => e instanceof TypeError && /handle/.test(e.message)
    assert.throws(() => new Channel(ch.handle.buffer), say)
    assert.throws(() => new Channel(new SharedArrayBuffer(1024)), say)
    assert.throws(() => new Channel(new ArrayBuffer(1024)), say)
    assert.throws(() => new Channel(new DataView(new ArrayBuffer(8))), TypeError)
    assert.throws(() => new Channel({ size: 1024 }), (e) => say(e) && /"size"/.test(e.message))
    assert.throws(() => new Channel({ bytes: 64, handle: 1 }), TypeError)
  })

  test('the Channel itself, and a copy of it made by structured clone (workerData, postMessage), are the same channel', async () => {
    const ch = new Channel({ bytes: 256 })
    new Channel(ch).send('from the object')
    assert.strictEqual(ch.recv(), 'from the object')
    assert.deepStrictEqual(Object.keys(ch), ['handle'], 'what structured clone keeps: own enumerable properties')
    const w = new Worker(`
      const { workerData } = require('worker_threads')
      const { Channel } = require(${JSON.stringify(path.join(__dirname, '..'))})
      new Channel(workerData).send('from the worker')
    `, { eval: true, workerData: ch })
    const exited = new Promise((resolve) => w.on('exit', resolve))
    assert.strictEqual(await ch.recvAsync({ timeout: 20000 }), 'from the worker')
    await exited
  })
})

describe('Channel: a message is what it was at the call', () => {
  const growable = (() => {
    try {
      return new SharedArrayBuffer(8, { maxByteLength: 64 }).growable === true
    } catch {
      return false
    }
  })()
  const skip = growable ? {} : { skip: 'no growable SharedArrayBuffer in this Node' }

  test('sendAsync on a full ring: a length-tracking view grown and overwritten meanwhile sends its bytes and length of the call', skip, async () => {
    const ch = new Channel({ bytes: 64, codec: 'bytes' })
    while (ch.trySend(new Uint8Array(8)));
    const src = new SharedArrayBuffer(4, { maxByteLength: 4096 })
    const view = new Uint8Array(src) // tracks the buffer's length
    view.set([1, 2, 3, 4])
    const sent = ch.sendAsync(view)
    src.grow(4096)
    view.fill(9)
    const queued = []
    while (queued.length < 5) queued.push(ch.recv())
    await sent
    let last
    while ((last = ch.tryRecv()) !== Channel.EMPTY) queued.push(last)
    assert.deepStrictEqual(Array.from(queued[queued.length - 1]), [1, 2, 3, 4])
    assert.ok(queued.slice(0, -1).every((m) => m.length === 8 && m.every((b) => b === 0)), 'the queued messages are intact')
  })

  test('a blocking send of a length-tracking view while another thread grows its buffer copies the length of the call, and nothing past its reservation', skip, async () => {
    const ch = new Channel({ bytes: 64, codec: 'bytes' })
    while (ch.trySend(Uint8Array.of(7, 7, 7, 7)));
    const src = new SharedArrayBuffer(4, { maxByteLength: 4096 })
    const view = new Uint8Array(src)
    view.set([1, 2, 3, 4])
    const w = new Worker(`
      const { workerData: d } = require('worker_threads')
      const { Channel } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const st = new Int32Array(d.handle.buffer, 0, 48)
      while ((Atomics.load(st, 33) & 0x80000000) === 0); // the sender's sleepers bit: it waits for room
      d.src.grow(4096)
      new Uint8Array(d.src).fill(9, 4)
      const ch = new Channel(d.handle)
      for (;;) {
        const m = ch.recv()
        if (m.length !== 4) throw new Error('a message of ' + m.length + ' bytes')
        if (m[0] === 1) break
      }
    `, { eval: true, workerData: { handle: ch.handle, src } })
    const exited = new Promise((resolve, reject) => { w.on('exit', resolve); w.on('error', reject) })
    ch.send(view) // blocks until the worker makes room
    await exited
    assert.strictEqual(ch.tryRecv(), Channel.EMPTY)
  })
})

describe('Channel: an async call is never handed a side\'s lock', () => {
  test('a sendAsync queued for the senders\' lock, while its thread blocks on another channel, does not hold up the thread it waits for', { timeout: 30000 }, async () => {
    const ch = new Channel({ bytes: 1024 })
    const other = new Channel({ bytes: 1024 })
    const ctl = new Int32Array(new SharedArrayBuffer(8))
    const w = new Worker(`
      const { workerData: d } = require('worker_threads')
      const root = ${JSON.stringify(path.join(__dirname, '..'))}
      const { Channel, AsyncLock } = require(root)
      const { internal } = require(root + '/lib/futex')
      const ctl = new Int32Array(d.ctl)
      const ch = new Channel(d.ch)
      const other = new Channel(d.other)
      const send = new AsyncLock(d.ch.buffer, 0) // the senders' lock (layout: lib/channel.js)
      send.lock()
      Atomics.store(ctl, 0, 1)
      Atomics.notify(ctl, 0)
      Atomics.wait(ctl, 1, 0) // the main thread's sendAsync is queued for the lock
      const start = Date.now()
      while (Date.now() - start < 5); // past the lock's fairness threshold (1 ms)
      send.unlock()
      ch.send('from the worker') // needs the senders' lock again
      other.send('done')
    `, { eval: true, workerData: { ch: ch.handle, other: other.handle, ctl: ctl.buffer } })
    const exited = new Promise((resolve) => w.on('exit', resolve))
    Atomics.wait(ctl, 0, 0)
    const sent = ch.sendAsync('from the main thread')
    assert.strictEqual(futex.queueLength(new Int32Array(ch.handle.buffer, 0, 2), 0), 1, 'queued for the lock')
    Atomics.store(ctl, 1, 1)
    Atomics.notify(ctl, 1)
    assert.strictEqual(other.recv({ timeout: 10000 }), 'done')
    await sent
    assert.deepStrictEqual([ch.recv(), ch.recv()].sort(), ['from the main thread', 'from the worker'])
    await exited
  })
})

describe('Channel: flush', () => {
  test('flushSync returns once every message is taken and its receiver has asked for more', { timeout: 60000 }, async () => {
    const ch = new Channel({ bytes: 4096, codec: 'string' })
    const done = new Int32Array(new SharedArrayBuffer(4))
    const w = new Worker(`
      const { workerData: d } = require('worker_threads')
      const { Channel } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const ch = new Channel(d.handle)
      const done = new Int32Array(d.done)
      for (;;) {
        const msgs = ch.recvMany(16)
        let x = 0
        for (let i = 0; i < 2000; i++) x += i // some work per batch
        Atomics.add(done, 0, msgs.length + (x & 0))
      }
    `, { eval: true, workerData: { handle: ch.handle, done: done.buffer } })
    w.on('error', () => {})
    for (let i = 0; i < 5000; i++) ch.send(`line ${i}`)
    ch.flushSync({ timeout: 30000 })
    assert.strictEqual(Atomics.load(done, 0), 5000)
    ch.send('more')
    await ch.flush({ timeout: 30000 })
    assert.strictEqual(Atomics.load(done, 0), 5001)
    await w.terminate()
  })

  test('flush with messages left and every receiver gone throws ChannelDisconnectedError; it times out as sends do; bad options', async () => {
    const ch = new Channel({ bytes: 64 })
    ch.send(1)
    assert.throws(() => ch.flushSync({ timeout: 0 }), ChannelTimeoutError)
    await assert.rejects(ch.flush({ timeout: 0 }), ChannelTimeoutError)
    assert.throws(() => ch.flushSync({ timeout: -1 }), RangeError)
    await assert.rejects(ch.flush(5), TypeError)
    const w = new Worker(`
      const { workerData } = require('worker_threads')
      const { Channel } = require(${JSON.stringify(path.join(__dirname, '..'))})
      new Channel(workerData).join('receiver')
    `, { eval: true, workerData: ch.handle })
    await new Promise((resolve) => w.on('exit', resolve))
    assert.throws(() => ch.flushSync(), (e) => e.name === 'ChannelDisconnectedError')
    assert.strictEqual(new Channel({ bytes: 64 }).flushSync(), undefined, 'an empty channel flushes at once')
  })
})

describe('Channel: exactly once under contention', () => {
  test('4 producers × 4 consumers (workers blocking and async, the main thread async; some taking batches): every message once, in order per producer, intact', { timeout: 60000 }, async () => {
    const max = 700
    const count = 1500
    const ch = new Channel({ bytes: 4096, codec: 'bytes' })
    const producers = [
      startWorker({ role: 'produce', handle: ch.handle, p: 1, count, max, mode: 'blocking' }),
      startWorker({ role: 'produce', handle: ch.handle, p: 2, count, max, mode: 'async' }),
      startWorker({ role: 'produce', handle: ch.handle, p: 3, count, max, mode: 'blocking' })
    ]
    const consumers = [
      startWorker({ role: 'consume', handle: ch.handle, max, mode: 'blocking' }),
      startWorker({ role: 'consume', handle: ch.handle, max, mode: 'async' }),
      startWorker({ role: 'consume', handle: ch.handle, max, mode: 'many' })
    ]
    // The main thread: producer 0 (async) and consumer (two async loops,
    // one of them taking batches).
    const mainPairs = []
    const last = new Map()
    const got = (m) => {
      const { p, seq } = check(m, max)
      if (last.has(p) && last.get(p) >= seq) throw new Error(`main: producer ${p}: ${seq} after ${last.get(p)}`)
      last.set(p, seq)
      mainPairs.push(p, seq)
    }
    const consumeLoop = async () => {
      for await (const m of ch) got(m)
    }
    const batchLoop = async () => {
      for (;;) {
        let batch
        try {
          batch = await ch.recvManyAsync(6)
        } catch (e) {
          if (e instanceof ChannelClosedError) return
          throw e
        }
        assert.ok(batch.length >= 1 && batch.length <= 6, `a batch of ${batch.length}`)
        batch.forEach(got)
      }
    }
    const loops = [consumeLoop(), batchLoop()]
    for (let seq = 0; seq < count; seq++) await ch.sendAsync(makeMessage(0, seq, max))
    for (const { box } of producers) assert.strictEqual((await box.next('done', 50000)).sent, count)
    ch.close()
    await Promise.all(loops)
    const all = [mainPairs]
    for (const { box } of consumers) all.push((await box.next('result', 50000)).pairs)
    const seen = new Map()
    for (const pairs of all) {
      for (let i = 0; i < pairs.length; i += 2) {
        const key = pairs[i] * count + pairs[i + 1]
        assert.ok(!seen.has(key), `message ${pairs[i]}/${pairs[i + 1]} delivered twice`)
        seen.set(key, true)
      }
    }
    assert.strictEqual(seen.size, 4 * count)
    // Every consumer took part (the ring is small, the load even enough).
    assert.ok(all.every((pairs) => pairs.length > 0), all.map((p) => p.length / 2).join(' '))
  })
})

describe('Channel: close', () => {
  test('close() wakes every blocked receiver and sender, in workers and on the main thread, at once', { timeout: 20000 }, async () => {
    const rx = new Channel({ bytes: 64 })
    const tx = new Channel({ bytes: 16, codec: 'bytes' })
    tx.send(new Uint8Array(12)) // full
    const workers = [
      startWorker({ role: 'once', op: 'recv', handle: rx.handle }),
      startWorker({ role: 'once', op: 'recv', handle: rx.handle }),
      startWorker({ role: 'once', op: 'send', value: new Uint8Array(4), handle: tx.handle })
    ]
    const mainRecv = assert.rejects(rx.recvAsync(), ChannelClosedError)
    const mainSend = assert.rejects(tx.sendAsync(new Uint8Array(4)), (e) => e instanceof ChannelClosedError && e.code === 'ERR_CHANNEL_CLOSED')
    await until(() => sleepers(rx, internal.STATE_AT) === 3 && sleepers(tx, internal.STATE_AT) === 2, 'every waiter asleep')
    rx.close()
    tx.close()
    for (const { box } of workers) {
      const o = await box.next('outcome', 10000)
      assert.strictEqual(o.error && o.error.code, 'ERR_CHANNEL_CLOSED', JSON.stringify(o))
    }
    await mainRecv
    await mainSend
  })

  test('a receive that frees room wakes the sender blocked on a full ring (no timed look-again)', { timeout: 20000 }, async () => {
    const ch = new Channel({ bytes: 64, codec: 'bytes' })
    ch.send(bytesOf(60, 1)) // full
    const sender = startWorker({ role: 'once', op: 'send', value: bytesOf(60, 2), handle: ch.handle })
    await until(() => sleepers(ch, internal.STATE_AT) === 1, 'the sender asleep')
    assert.deepStrictEqual(await ch.recvAsync(), bytesOf(60, 1))
    const o = await sender.box.next('outcome', 10000)
    assert.ok(!o.error, JSON.stringify(o))
    assert.deepStrictEqual(await ch.recvAsync(), bytesOf(60, 2))
  })

  test('recvMany / recvManyAsync: every message there, up to max, in order; wait while empty; then the end', { timeout: 20000 }, async () => {
    const ch = new Channel({ bytes: 256 })
    for (let i = 0; i < 10; i++) ch.send(i % 3 === 0 ? { i } : i)
    // Bad max: nothing is taken.
    assert.throws(() => ch.recvMany('3'), (e) => e instanceof TypeError && /max/.test(e.message))
    assert.throws(() => ch.recvMany(undefined), TypeError)
    for (const bad of [0, -1, 1.5, NaN]) {
      assert.throws(() => ch.recvMany(bad), (e) => e instanceof RangeError && /max/.test(e.message), String(bad))
      await assert.rejects(ch.recvManyAsync(bad), RangeError)
    }
    assert.deepStrictEqual(ch.recvMany(4), [{ i: 0 }, 1, 2, { i: 3 }])
    assert.deepStrictEqual(await ch.recvManyAsync(1), [4])
    assert.deepStrictEqual(ch.recvMany(Infinity), [5, { i: 6 }, 7, 8, { i: 9 }])
    // Empty: waits (timeout 0: does not), and takes what a worker sends.
    assert.throws(() => ch.recvMany(3, { timeout: 0 }), (e) => e instanceof ChannelTimeoutError)
    await assert.rejects(ch.recvManyAsync(3, { timeout: 0 }), (e) => e instanceof ChannelTimeoutError)
    const waiting = ch.recvManyAsync(3)
    const { worker, box } = startWorker({ role: 'sendValues', handle: ch.handle, values: ['a', 'b'] })
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    await box.next('done', 15000)
    const batch = await waiting
    assert.ok(batch.length >= 1 && batch.length <= 2 && batch[0] === 'a', JSON.stringify(batch))
    if (batch.length === 1) assert.deepStrictEqual(ch.recvMany(3), ['b'])
    await exited
    // Closed: what is left, then ChannelClosedError.
    ch.send('last')
    ch.close()
    assert.deepStrictEqual(ch.recvMany(3), ['last'])
    assert.throws(() => ch.recvMany(3), (e) => e instanceof ChannelClosedError)
    await assert.rejects(ch.recvManyAsync(3), (e) => e instanceof ChannelClosedError)
  })

  test('after close: sends fail, receivers drain what is left, then see the end', async () => {
    const ch = new Channel({ bytes: 256 })
    ch.send(1)
    ch.send(2)
    ch.send(3)
    ch.close()
    ch.close() // idempotent
    assert.throws(() => ch.send(4), ChannelClosedError)
    assert.throws(() => ch.trySend(4), ChannelClosedError)
    await assert.rejects(ch.sendAsync(4), ChannelClosedError)
    assert.strictEqual(ch.recv(), 1)
    assert.strictEqual(await ch.recvAsync(), 2)
    assert.deepStrictEqual([...ch], [3])
    assert.throws(() => ch.recv(), ChannelClosedError)
    assert.throws(() => ch.tryRecv(), ChannelClosedError)
    await assert.rejects(ch.recvAsync(), ChannelClosedError)
  })

  test('close racing with senders: every send that returned is received, every other one threw ChannelClosedError', { timeout: 30000 }, async () => {
    for (let round = 0; round < 5; round++) {
      const ch = new Channel({ bytes: 2048, codec: 'bytes' })
      const max = 200
      const producers = [1, 2, 3].map((p) => startWorker({ role: 'produce', handle: ch.handle, p, count: Infinity, max, mode: p === 2 ? 'async' : 'blocking' }))
      const consumer = startWorker({ role: 'consume', handle: ch.handle, max, mode: 'blocking' })
      let got = 0
      const mine = []
      for await (const m of ch) {
        const { p, seq } = check(m, max)
        mine.push(p, seq)
        if (++got === 50 * (round + 1)) ch.close()
      }
      const sent = new Map()
      for (const { box } of producers) {
        const done = await box.next('done', 20000)
        sent.set(producers.indexOf(producers.find((x) => x.box === box)) + 1, done.sent)
      }
      const pairs = mine.concat((await consumer.box.next('result', 20000)).pairs)
      const received = new Map()
      for (let i = 0; i < pairs.length; i += 2) {
        const set = received.get(pairs[i]) || new Set()
        assert.ok(!set.has(pairs[i + 1]), 'delivered twice')
        set.add(pairs[i + 1])
        received.set(pairs[i], set)
      }
      for (const [p, n] of sent) {
        const set = received.get(p) || new Set()
        assert.strictEqual(set.size, n, `producer ${p}: ${n} sends returned, ${set.size} received`)
      }
    }
  })
})

describe('Channel: timeouts and aborts', () => {
  test('recv / send time out with ChannelTimeoutError; timeout 0 tries once', async () => {
    const ch = new Channel({ bytes: 16, codec: 'bytes' })
    assert.throws(() => ch.recv({ timeout: 0 }), (e) => e instanceof ChannelTimeoutError && e.code === 'ERR_CHANNEL_TIMEOUT')
    assert.throws(() => ch.recv({ timeout: 5 }), ChannelTimeoutError)
    await assert.rejects(ch.recvAsync({ timeout: 5 }), ChannelTimeoutError)
    ch.send(new Uint8Array(12))
    assert.strictEqual(ch.trySend(new Uint8Array(0)), false)
    assert.throws(() => ch.send(new Uint8Array(0), { timeout: 5 }), ChannelTimeoutError)
    await assert.rejects(ch.sendAsync(new Uint8Array(0), { timeout: 5 }), ChannelTimeoutError)
    // None of them left anything behind.
    assert.deepStrictEqual(ch.recv(), new Uint8Array(12))
    assert.strictEqual(ch.tryRecv(), Channel.EMPTY)
  })

  test('an aborted recvAsync rejects with AbortError (cause: the reason) and takes nothing', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const ch = new Channel()
    const ac = new AbortController()
    const p = ch.recvAsync({ signal: ac.signal })
    await until(() => sleepers(ch, internal.STATE_AT) === 1, 'the receiver asleep')
    ac.abort('stop')
    await assert.rejects(p, (e) => e instanceof AbortError && e.code === 'ABORT_ERR' && e.cause === 'stop')
    await assert.rejects(ch.recvAsync({ signal: ac.signal }), AbortError)
    ch.send('kept')
    assert.strictEqual(ch.recv(), 'kept')
  })

  test('receivers and senders that time out or abort at random neither lose nor duplicate a message', { timeout: 30000, skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const n = 3000
    const ch = new Channel({ bytes: 64 })
    // The main thread: a sender that retries every send that timed out or
    // was aborted, and receivers that do the same, racing with a worker
    // receiving with short timeouts.
    const received = []
    let sent = 0
    const sender = (async () => {
      for (let i = 0; i < n; i++) {
        for (;;) {
          const ac = new AbortController()
          const r = Math.random()
          if (r < 0.2) setImmediate(() => ac.abort())
          try {
            await ch.sendAsync(i, { timeout: r < 0.5 ? Math.random() * 2 : undefined, signal: ac.signal })
            sent++
            break
          } catch (e) {
            if (!(e instanceof ChannelTimeoutError) && !(e instanceof AbortError)) throw e
          }
        }
      }
    })()
    const receiver = async () => {
      for (;;) {
        const ac = new AbortController()
        const r = Math.random()
        if (r < 0.2) setImmediate(() => ac.abort())
        try {
          received.push(await ch.recvAsync({ timeout: r < 0.5 ? Math.random() * 2 : undefined, signal: ac.signal }))
        } catch (e) {
          if (e instanceof ChannelClosedError) return
          if (!(e instanceof ChannelTimeoutError) && !(e instanceof AbortError)) throw e
        }
      }
    }
    const receivers = [receiver(), receiver(), receiver()]
    // And a worker receiving with blocking calls that time out at random.
    const blocking = startWorker({ role: 'timeouts', handle: ch.handle })
    await sender
    assert.strictEqual(sent, n)
    ch.close()
    await Promise.all(receivers)
    const theirs = (await blocking.box.next('result', 20000)).values
    const all = received.concat(theirs)
    assert.strictEqual(all.length, n)
    assert.deepStrictEqual(all.sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i))
  })
})

describe('Channel: thread death (child processes)', () => {
  const HARD_TIMEOUT = 40000
  const FIXTURE = path.join(__dirname, 'fixtures', 'channel-death.js')
  async function run (name) {
    const r = await runChild([FIXTURE, name], { timeoutMs: HARD_TIMEOUT })
    assert.ok(!r.timedOut, `hung: killed after ${HARD_TIMEOUT} ms\n${transcript(r)}`)
    assert.strictEqual(r.code, 0, transcript(r))
    assert.ok(r.result, transcript(r))
    return r.result
  }

  test('producers terminated at random points mid-stream: no torn message, each one\'s messages a gap-free prefix, everyone else unaffected', { timeout: HARD_TIMEOUT + 5000 }, async () => {
    const r = await run('producer-dies')
    assert.deepStrictEqual(r.bad, [])
    assert.strictEqual(r.steady, 400)
    assert.ok(Object.keys(r.killed).length > 0, JSON.stringify(r))
  })

  test('a thread killed holding the lock with half a frame written past the write index: the half frame is never delivered, the ring goes on', { timeout: HARD_TIMEOUT + 5000 }, async () => {
    const r = await run('dies-mid-copy')
    assert.deepStrictEqual(r, { got: [1, 2, 3], empty: true, next: [4, 5], after: true })
  })

  test('consumers terminated at random points: no message twice, at most one lost per terminated consumer (the one it had taken), the rest drained', { timeout: HARD_TIMEOUT + 5000 }, async () => {
    const r = await run('consumer-dies')
    assert.strictEqual(r.twice, 0)
    assert.ok(r.missing <= r.killed, JSON.stringify(r))
  })
})
