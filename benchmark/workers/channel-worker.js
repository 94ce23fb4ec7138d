'use strict'
// A worker of scenarios 11 and 12 (benchmark/scenarios/channel.js,
// channel-large.js). workerData:
//   impl ('channel' | 'postMessage' | 'ringbuf.js'), role ('produce' | 'consume' | 'echo'),
//   size (bytes of a message), handle / back (Channel handles), port / backPort
//   (MessagePorts), rb (ringbuf.js's SharedArrayBuffer), flow (Int32Array:
//   STOP, ACK), transfer (postMessage transfers a fresh buffer per
//   message), ms, ctl.
const { workerData, parentPort } = require('worker_threads')
const { Channel } = require('../..')
const { arrive, startTime } = require('../lib/threads')
const { produce, consumeBlocking, consumePort, consumeRingbuf } = require('../lib/channel-flow')

const d = workerData
arrive(d.ctl)
const from = startTime(d.ctl)

const ringbuf = () => {
  const { RingBuffer } = require('ringbuf.js')
  return new RingBuffer(d.rb, Uint8Array)
}

if (d.role === 'produce') {
  produce(d, d.impl === 'channel' ? new Channel(d.handle) : d.impl === 'ringbuf.js' ? ringbuf() : d.port)
} else if (d.role === 'consume') {
  if (d.impl === 'channel') parentPort.postMessage(consumeBlocking(d, new Channel(d.handle), from))
  else if (d.impl === 'ringbuf.js') parentPort.postMessage(consumeRingbuf(d, ringbuf(), from))
  else consumePort(d, d.port, from).then((r) => parentPort.postMessage(r))
} else if (d.impl === 'channel') {
  // echo: answers every request until the channel is closed.
  const requests = new Channel(d.handle)
  const answers = new Channel(d.back)
  for (const m of requests) answers.send(m)
  answers.close()
} else {
  d.port.on('message', (m) => {
    if (m === null) d.port.close()
    else d.port.postMessage(m)
  })
}
