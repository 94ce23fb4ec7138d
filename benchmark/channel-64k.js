'use strict'
// One of scenario 12's 64 KiB cases on its own, for a profiler:
//   node benchmark/channel-64k.js <main|worker> <channel|clone|transfer> [ring bytes] [messages]
// A worker sends `messages` (default 20000) Uint8Arrays of 64 KiB to the
// main thread (`for await`, or 'message' events) or to another worker
// (blocking iteration, or 'message' events): a 'bytes' Channel with the
// given ring (default 1 MiB), or postMessage by structured clone, or with
// a fresh ArrayBuffer transferred per message (at most 1024 in flight, as
// in benchmark/lib/channel-flow.js). Prints { where, impl, ring, n, rate }.
// E.g. perf record -e cpu-clock -g node --perf-basic-prof benchmark/channel-64k.js main channel
const { Worker, isMainThread, workerData, parentPort, MessageChannel } = require('worker_threads')
const { performance } = require('perf_hooks')
const { Channel } = require('..')

const SIZE = 65536
const WINDOW = 1024

function consumePort (port, flow, n) {
  let got = 0
  return new Promise((resolve) => port.on('message', () => {
    got++
    if (got % 64 === 0) {
      Atomics.store(flow, 1, got)
      Atomics.notify(flow, 1)
    }
    if (got === n) {
      port.close()
      resolve(got)
    }
  }))
}

async function main () {
  const [where = 'main', impl = 'channel', ringArg, nArg] = process.argv.slice(2)
  const ring = Number(ringArg || (1 << 20))
  const n = Number(nArg || 20000)
  const ch = impl === 'channel' ? new Channel({ bytes: ring, codec: 'bytes' }) : null
  const { port1, port2 } = new MessageChannel()
  const flow = new Int32Array(new SharedArrayBuffer(8))
  const data = { impl, n, flow, handle: ch ? ch.handle : undefined }
  const producer = new Worker(__filename, { workerData: { ...data, role: 'produce', port: port1 }, transferList: [port1] })
  const produced = new Promise((resolve) => producer.once('exit', resolve))
  const t0 = performance.now()
  let got = 0
  if (where === 'main') {
    if (ch) {
      for await (const m of ch) got += m.length === SIZE ? 1 : 0
    } else {
      got = await consumePort(port2, flow, n)
    }
  } else {
    const consumer = new Worker(__filename, { workerData: { ...data, role: 'consume', port: port2 }, transferList: [port2] })
    got = await new Promise((resolve) => consumer.once('message', resolve))
  }
  const ms = performance.now() - t0
  await produced
  console.log(JSON.stringify({ where, impl, ring: ch ? ring : null, n: got, rate: Math.round(got / ms * 1000) }))
}

function worker () {
  const d = workerData
  const ch = d.handle ? new Channel(d.handle) : null
  if (d.role === 'produce') {
    const m = new Uint8Array(SIZE).fill(7)
    if (ch) {
      for (let i = 0; i < d.n; i++) ch.send(m)
      ch.close()
      return
    }
    for (let i = 0; i < d.n; i++) {
      if (d.impl === 'transfer') {
        const t = new Uint8Array(SIZE)
        d.port.postMessage(t, [t.buffer])
      } else {
        d.port.postMessage(m)
      }
      while (i + 1 - Atomics.load(d.flow, 1) >= WINDOW) Atomics.wait(d.flow, 1, Atomics.load(d.flow, 1), 50)
    }
    return
  }
  if (ch) {
    let got = 0
    for (const m of ch) got += m.length === SIZE ? 1 : 0
    parentPort.postMessage(got)
  } else {
    consumePort(d.port, d.flow, d.n).then((got) => parentPort.postMessage(got))
  }
}

if (isMainThread) main().catch((e) => { console.error(e); process.exitCode = 1 })
else worker()
