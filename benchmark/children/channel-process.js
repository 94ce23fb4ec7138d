'use strict'
// One side of benchmark/channel-processes.js: 16-byte messages from a
// producer process to a consumer process.
//
//   node channel-process.js <impl> <producer|consumer> <where> <warmupMs> <ms> <limitMs>
//
//   channel        a Channel in a SharedRegion named <where> ('bytes' codec):
//                  the producer's blocking send, the consumer's blocking recv
//   channel-async  the same channel: `await ch.sendAsync(m)` in a loop, and
//                  `for await (const m of ch)`
//   unix-socket    a Unix domain socket at the path <where> (`net`): each
//                  message length-prefixed (4 bytes), written with
//                  socket.write (waiting for 'drain' when it says so); the
//                  consumer cuts the frames out of each 'data' chunk
//
// The consumer prints "ready" once the producer may start, then counts the
// messages of <ms> ms after <warmupMs> ms from the first, prints
// {"rate": messages/s} and exits (closing the channel, which ends the
// producer). Each side exits by itself after <limitMs> ms whatever happens.
const net = require('net')
const { performance } = require('perf_hooks')

const [impl, role, where, warmupArg, msArg, limitArg] = process.argv.slice(2)
const warmupMs = Number(warmupArg)
const ms = Number(msArg)
setTimeout(() => process.exit(3), Number(limitArg)).unref()

const SIZE = 16
const RING = 1 << 16
const payload = new Uint8Array(SIZE).fill(7)

// Counting: the window starts warmupMs after the first message.
let count = 0
let start = -1
let first = -1
let counted = 0
function tick (n) {
  count += n
  if ((count & 1023) >= n && count > 1024) return false
  const t = performance.now()
  if (first < 0) first = t
  if (start < 0) {
    if (t - first >= warmupMs) {
      start = t
      counted = count
    }
    return false
  }
  if (t - start < ms) return false
  process.stdout.write(JSON.stringify({ rate: (count - counted) / ((t - start) / 1000) }) + '\n')
  return true
}

if (impl === 'channel' || impl === 'channel-async') {
  const { SharedRegion, Channel, ChannelClosedError } = require('../..')
  const region = SharedRegion.open(where, { bytes: RING + 1024 })
  const ch = new Channel({ buffer: region.buffer, byteOffset: 0, bytes: RING, codec: 'bytes' })
  const done = (e) => {
    if (!(e instanceof ChannelClosedError)) throw e
    process.exit(0)
  }
  if (role === 'consumer') {
    ch.join('receiver')
    console.log('ready')
    if (impl === 'channel') {
      for (;;) {
        if (ch.recv().length !== SIZE) throw new Error('bad message')
        if (tick(1)) break
      }
      ch.close()
      process.exit(0)
    } else {
      (async () => {
        for await (const m of ch) {
          if (m.length !== SIZE) throw new Error('bad message')
          if (tick(1)) break
        }
        ch.close()
        process.exit(0)
      })()
    }
  } else if (impl === 'channel') {
    ch.join('sender')
    try {
      for (;;) ch.send(payload)
    } catch (e) {
      done(e)
    }
  } else {
    ch.join('sender')
    ;(async () => {
      for (;;) await ch.sendAsync(payload)
    })().catch(done)
  }
} else if (impl === 'unix-socket') {
  if (role === 'consumer') {
    const server = net.createServer((socket) => {
      let rest = null
      socket.on('data', (chunk) => {
        let buf = rest === null ? chunk : Buffer.concat([rest, chunk])
        let at = 0
        let n = 0
        while (buf.length - at >= 4) {
          const length = buf.readUInt32LE(at)
          if (buf.length - at - 4 < length) break
          const message = buf.subarray(at + 4, at + 4 + length) // what a user hands on
          if (message.length !== SIZE) throw new Error('bad frame')
          at += 4 + length
          n++
        }
        rest = at === buf.length ? null : buf.subarray(at)
        buf = null
        if (n > 0 && tick(n)) {
          socket.destroy()
          server.close()
          process.exit(0)
        }
      })
    })
    server.listen(where, () => console.log('ready'))
  } else {
    const frame = Buffer.alloc(4 + SIZE)
    frame.writeUInt32LE(SIZE, 0)
    frame.set(payload, 4)
    const socket = net.connect(where)
    const pump = () => {
      while (socket.write(frame));
      socket.once('drain', pump)
    }
    socket.on('connect', pump)
    socket.on('error', () => process.exit(0))
    socket.on('close', () => process.exit(0))
  }
} else {
  throw new Error(`unknown impl ${impl}`)
}
