'use strict'
// The two sides of scenario 11's throughput cases, for a Channel and for a
// MessagePort. A producer sends until the consumer raises STOP; a consumer
// counts the messages that arrive in the measured window [from, from + ms]
// (looking at the clock every CHECK messages), then raises STOP and drains.
// A MessagePort has no back-pressure: its producer keeps at most WINDOW
// messages in flight, by the ACK count the consumer publishes every ACK_EVERY
// messages (a Channel's ring does that by itself).
// d.transfer (scenario 12): the MessagePort producer transfers a fresh
// ArrayBuffer per message instead of posting one for structured clone.
const { now } = require('./threads')

const STOP = 0
const ACK = 1
const CHECK = 64
const ACK_EVERY = 64
const WINDOW = 1024

// d.size: bytes of a Uint8Array message, or 'number' (messages are the
// numbers 0, 1, 2, …: a 'v8' Channel, or postMessage of a number).
function message (size) {
  return size === 'number' ? 0 : new Uint8Array(size).fill(7)
}

function produce (d, sink) {
  const m = message(d.size)
  const flow = d.flow
  if (d.impl === 'channel') {
    if (d.size === 'number') {
      for (let k = 0; Atomics.load(flow, STOP) === 0; k++) sink.send(k)
    } else {
      while (Atomics.load(flow, STOP) === 0) sink.send(m)
    }
    sink.close()
    return
  }
  if (d.impl === 'ringbuf.js') {
    // No waiting in ringbuf.js: a full ring is polled until it has room.
    while (Atomics.load(flow, STOP) === 0) {
      if (sink.available_write() >= m.length) sink.push(m)
    }
    return
  }
  let sent = 0
  while (Atomics.load(flow, STOP) === 0) {
    if (d.transfer === true) {
      // A fresh buffer each time, handed over: what a sender that no longer
      // needs its bytes does instead of letting them be cloned.
      const t = new Uint8Array(d.size)
      sink.postMessage(t, [t.buffer])
    } else {
      sink.postMessage(d.size === 'number' ? sent : m)
    }
    sent++
    for (;;) {
      const acked = Atomics.load(flow, ACK)
      if (sent - acked < WINDOW || Atomics.load(flow, STOP) !== 0) break
      Atomics.wait(flow, ACK, acked, 50)
    }
  }
  sink.postMessage(null)
}

// Counting: returns { count, elapsedMs } of the window.
function counter (d, from) {
  const to = from + d.ms
  let n = 0
  let n0 = -1
  let t0 = 0
  let result = null
  return {
    // false once the window is over (STOP raised)
    tick () {
      n++
      if (n % CHECK !== 0 || result !== null) return true
      const t = now()
      if (n0 < 0) {
        if (t >= from) { n0 = n; t0 = t }
      } else if (t >= to) {
        result = { count: n - n0, elapsedMs: t - t0 }
        Atomics.store(d.flow, STOP, 1)
        Atomics.notify(d.flow, ACK)
      }
      return true
    },
    result: () => result,
    n: () => n
  }
}

function consumeBlocking (d, ch, from) {
  const c = counter(d, from)
  for (const m of ch) { c.tick(m) } // eslint-disable-line no-unused-vars
  return c.result()
}

async function consumeAsync (d, ch, from) {
  const c = counter(d, from)
  for await (const m of ch) { c.tick(m) } // eslint-disable-line no-unused-vars
  return c.result()
}

// The same in batches: recvManyAsync of up to 256 messages.
async function consumeAsyncBatches (d, ch, from) {
  const c = counter(d, from)
  for (;;) {
    let batch
    try {
      batch = await ch.recvManyAsync(256)
    } catch (e) {
      if (e.code === 'ERR_CHANNEL_CLOSED') break
      throw e
    }
    for (let k = 0; k < batch.length; k++) c.tick(batch[k])
  }
  return c.result()
}

// ringbuf.js carries bytes without boundaries: a message is its d.size
// bytes, popped into one reused buffer (how ringbuf.js is meant to be used;
// a Channel hands out a fresh Uint8Array per message). An empty ring is
// polled.
function consumeRingbuf (d, rb, from) {
  const c = counter(d, from)
  const m = new Uint8Array(d.size)
  while (c.result() === null) {
    if (rb.available_read() >= d.size) {
      rb.pop(m)
      c.tick()
    }
  }
  return c.result()
}

function consumePort (d, port, from) {
  const c = counter(d, from)
  return new Promise((resolve) => {
    port.on('message', (m) => {
      if (m === null) {
        port.close()
        resolve(c.result())
        return
      }
      c.tick()
      if (c.n() % ACK_EVERY === 0) {
        Atomics.store(d.flow, ACK, c.n())
        Atomics.notify(d.flow, ACK)
      }
    })
  })
}

module.exports = { produce, consumeBlocking, consumeAsync, consumeAsyncBatches, consumePort, consumeRingbuf, STOP, ACK }
