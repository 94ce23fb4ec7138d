'use strict'
// A barrier built on postMessage: the baseline of scenario 10 for the main
// thread's side. The main thread is the hub: a generation completes when it
// has arrived itself and has an 'arrive' message from every worker; it then
// posts 'go' to each. A worker posts 'arrive' and awaits 'go'. Everything is
// asynchronous (a worker cannot block on a message port without shared
// memory), each worker has its own MessageChannel, and nothing is shared.

const { MessageChannel } = require('worker_threads')

// Main thread side, over one port per worker.
class HubBarrier {
  constructor (ports) {
    this.ports = ports
    this.arrived = 0
    this.wake = null
    for (const port of ports) {
      port.on('message', () => {
        this.arrived++
        if (this.arrived === ports.length && this.wake !== null) this.release()
      })
    }
  }

  release () {
    this.arrived = 0
    const wake = this.wake
    this.wake = null
    for (const port of this.ports) port.postMessage(0)
    wake(true)
  }

  // Resolves once every worker has arrived at this generation (true: the hub
  // is the one that completes it).
  waitAsync () {
    return new Promise((resolve) => {
      this.wake = resolve
      if (this.arrived === this.ports.length) this.release()
    })
  }

  close () {
    for (const port of this.ports) port.close()
  }
}

// Worker side, over its end of the channel.
class SpokeBarrier {
  constructor (port) {
    this.port = port
    this.wake = null
    port.on('message', () => {
      const wake = this.wake
      this.wake = null
      wake(false)
    })
  }

  waitAsync () {
    return new Promise((resolve) => {
      this.wake = resolve
      this.port.postMessage(0)
    })
  }

  close () {
    this.port.close()
  }
}

// n channels: the hub's ends and the workers' ends (to transfer).
function channels (n) {
  const hub = []
  const spokes = []
  for (let i = 0; i < n; i++) {
    const { port1, port2 } = new MessageChannel()
    hub.push(port1)
    spokes.push(port2)
  }
  return { hub, spokes }
}

module.exports = { HubBarrier, SpokeBarrier, channels }
