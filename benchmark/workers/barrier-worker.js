'use strict'
// One party of scenario 10 in a worker. workerData: impl ('ours' | 'native'
// | 'postmessage'), parties, sab + byteOffset (the barrier's memory), port
// (postmessage: this worker's end of its channel) or ports (postmessage, the
// hub worker: its ends of every other worker's channel), stop (see
// lib/generations.js), ms, ctl. Posts { count, elapsedMs } when done.

const { workerData, parentPort } = require('worker_threads')
const { ROOT } = require('../lib/impl')
const { arrive, startTime } = require('../lib/threads')
const { generationsSync, generationsAsync } = require('../lib/generations')
const { AtomicsBarrier } = require('../baselines/atomics-barrier')
const { HubBarrier, SpokeBarrier } = require('../baselines/postmessage-barrier')

const { impl, parties, sab, byteOffset, port, ports, stop, ms, ctl } = workerData

async function main () {
  arrive(ctl)
  const from = startTime(ctl)
  if (impl === 'postmessage') {
    const b = ports ? new HubBarrier(ports) : new SpokeBarrier(port)
    const r = await generationsAsync(() => b.waitAsync(), stop, from, from + ms)
    b.close()
    return r
  }
  const b = impl === 'native'
    ? new AtomicsBarrier(parties, sab, byteOffset)
    : new (require(ROOT).Barrier)(sab, byteOffset)
  return generationsSync(() => b.wait(), stop, from, from + ms)
}

main().then((r) => parentPort.postMessage(r))
