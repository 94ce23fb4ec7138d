'use strict'
// Channel over a shared region's memory: one channel for every thread of
// every process that maps the region, robust to a sender or receiver killed
// with SIGKILL at any instruction. Real processes (fixtures/region-channel-*.js),
// each with a hard timeout, synchronising on the region's memory.
const assert = require('assert')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn } = require('child_process')
const { test, describe } = require('./harness')
const { until, stressRounds } = require('./util')
const { kind } = require('./subject')
const { SharedRegion, Channel, ChannelClosedError, SharedRegionError, notify } = require('..')
const L = require('./fixtures/region-channel-layout')

const FIXTURE = path.join(__dirname, 'fixtures', 'region-channel-child.js')
const CLUSTER = path.join(__dirname, 'fixtures', 'region-channel-cluster.js')
const HARD_TIMEOUT = 30000

const unsupported = (() => { try { SharedRegion.open(`probe-${process.pid}`, { create: false }) } catch (e) { return e.code === 'ERR_REGION_UNSUPPORTED' ? e.message : false } return false })()
const skip = kind !== 'module' ? { skip: 'regions are the module\'s' } : unsupported ? { skip: `regions are not supported here: ${unsupported}` } : {}

let n = 0
function fresh () {
  const name = `ch${process.pid}-${++n}`
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes: L.BYTES })
  return {
    name,
    region,
    w: new Int32Array(region.buffer, 0, L.WORDS),
    counts: new Int32Array(region.buffer, L.COUNTS_AT, L.COUNTS)
  }
}

// A child process with a hard timeout; resolves with its exit (and output).
function child (args, script = FIXTURE) {
  const proc = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  proc.stdout.on('data', (d) => { stdout += d })
  const timer = setTimeout(() => proc.kill('SIGKILL'), HARD_TIMEOUT)
  proc.exited = new Promise((resolve) => proc.on('close', (code, signal) => { clearTimeout(timer); proc.done = true; resolve({ code, signal, stdout }) }))
  return proc
}

const ok = { code: 0, signal: null }
const exits = async (kids) => (await Promise.all(kids.map((k) => k.exited))).map(({ code, signal }) => ({ code, signal }))

function go (w) {
  Atomics.store(w, L.GO, 1)
  notify(w, L.GO)
}

describe('Channel in a shared region', skip, () => {
  test('4 sender processes × (main + worker), 2 receiver processes × (main + worker): every message received exactly once', { timeout: 60000 }, async () => {
    const { name, region, w, counts } = fresh()
    const N = 3000
    const senders = [0, 1, 2, 3].map((p) => child(['send', name, String(p), String(N)]))
    const receivers = [0, 1].map((p) => child(['recv', name, String(p), String(N)]))
    // Every thread a member before anyone sends: the senders' side is gone
    // only once all of them are.
    await until(() => Atomics.load(w, L.READY) === 12, 'every thread to join')
    go(w)
    assert.deepStrictEqual(await exits(senders), senders.map(() => ok))
    // The last sender gone closes the channel: the receivers drain and end.
    assert.deepStrictEqual(await exits(receivers), receivers.map(() => ok))
    assert.strictEqual(Atomics.load(w, L.CORRUPT), 0)
    const wrong = []
    for (let id = 0; id < 8 * N; id++) if (counts[id] !== 1) wrong.push([id, counts[id]])
    assert.deepStrictEqual(wrong.slice(0, 10), [], `${wrong.length} values not received exactly once`)
    const ch = new Channel({ buffer: region.buffer, byteOffset: L.CHANNEL_AT })
    assert.strictEqual(ch.closed, true)
    assert.throws(() => ch.tryRecv(), { code: 'ERR_CHANNEL_DISCONNECTED' })
    SharedRegion.unlink(name)
  })

  test('close() in one process wakes receivers and senders blocked in others (blocking and async)', { timeout: 60000 }, async () => {
    for (const role of ['blocked', 'full']) {
      const { name, region, w } = fresh()
      const ch = new Channel({ buffer: region.buffer, byteOffset: L.CHANNEL_AT, bytes: L.RING })
      const kid = child([role, name])
      await until(() => Atomics.load(w, L.READY) === 2, 'both threads to join')
      // Both are going to sleep once their side's sleepers bit is set.
      const lo = new Int32Array(region.buffer, L.CHANNEL_AT + 128, 2)
      const bit = role === 'blocked' ? 0 : 1
      await until(() => (Atomics.load(lo, bit) & 0x80000000) !== 0, `the ${role} child's waiters to sleep`)
      ch.close()
      assert.deepStrictEqual(await exits([kid]), [ok])
      const at = role === 'blocked' ? L.RESULT : L.RESULT + 2
      assert.deepStrictEqual([Atomics.load(w, at), Atomics.load(w, at + 1)], [L.CLOSED, L.CLOSED], role)
      SharedRegion.unlink(name)
    }
  })

  test('another size, another codec, or no channel: errors in the attaching process', { timeout: 60000 }, async () => {
    const { name, region } = fresh()
    const ch = new Channel({ buffer: region.buffer, byteOffset: L.CHANNEL_AT, bytes: L.RING })
    const kid = child(['mismatch', name])
    const r = await kid.exited
    assert.strictEqual(r.code, 0)
    assert.deepStrictEqual(JSON.parse(r.stdout), {
      bytes: 'SharedRegionError ERR_REGION_MISMATCH',
      codec: 'SharedRegionError ERR_REGION_MISMATCH',
      empty: 'TypeError',
      same: 'none'
    })
    assert.strictEqual(ch.closed, true, 'the child\'s close() is this channel\'s')
    // And here: options it refuses before touching the memory.
    assert.throws(() => new Channel({ buffer: region.buffer, byteOffset: 4, bytes: 64 }), RangeError)
    assert.throws(() => new Channel({ buffer: region.buffer, byteOffset: L.BYTES - 512, bytes: 1024 }), RangeError)
    assert.throws(() => new Channel({ buffer: region.buffer, byteOffset: 0, bytes: 64, other: 1 }), TypeError)
    assert.throws(() => new Channel({ buffer: region.buffer, byteOffset: L.CHANNEL_AT, bytes: L.RING, codec: 'bytes' }),
      (e) => e instanceof SharedRegionError && e.code === 'ERR_REGION_MISMATCH')
    // Not a channel: the control words (READY … ) are no header.
    new Int32Array(region.buffer, 8192, 64).fill(7)
    assert.throws(() => new Channel({ buffer: region.buffer, byteOffset: 8192, bytes: 64 }), TypeError)
    SharedRegion.unlink(name)
  })

  test('the same channel at once from several processes: one initialises, all attach', { timeout: 60000 }, async () => {
    const { name, region, w, counts } = fresh()
    const N = 200
    // Nobody has made the channel: each sender and receiver process
    // constructs it with the same options, at the same time.
    const kids = [child(['send', name, '0', String(N)]), child(['send', name, '1', String(N)]), child(['recv', name, '0', String(N)])]
    await until(() => Atomics.load(w, L.READY) === 6, 'every thread to join')
    go(w)
    assert.deepStrictEqual(await exits(kids), kids.map(() => ok))
    let total = 0
    for (let id = 0; id < 4 * N; id++) total += counts[id] === 1 ? 1 : 0
    assert.strictEqual(total, 4 * N)
    assert.ok(region)
    SharedRegion.unlink(name)
  })

  test('senders and receivers killed with SIGKILL at random points: no message lost, doubled or torn, nobody stranded', { timeout: 120000 }, async () => {
    const rounds = stressRounds(10)
    const SENDERS = 3
    const RECEIVERS = 2
    let received = 0
    for (let round = 0; round < rounds; round++) {
      const { name, region, w, counts } = fresh()
      const senders = []
      for (let s = 0; s < SENDERS; s++) senders.push(child(['churn-send', name, String(s), (s + round) % 2 ? 'async' : 'blocking']))
      const receivers = []
      for (let r = 0; r < RECEIVERS; r++) receivers.push(child(['churn-recv', name, String(r), (r + round) % 2 ? 'async' : 'blocking']))
      const all = senders.concat(receivers)
      await until(() => Atomics.load(w, L.READY) === all.length, 'every process to join')
      go(w)
      // One or two victims, each killed once the messages flow, at a random
      // point of whatever it is doing.
      const victims = new Set([all[Math.floor(Math.random() * all.length)]])
      if (round % 2 === 1) victims.add(all[Math.floor(Math.random() * all.length)])
      for (const victim of victims) {
        const sent = () => { let t = 0; for (let s = 0; s < SENDERS; s++) t += Atomics.load(w, L.COMMITTED + s); return t }
        const before = sent()
        await until(() => sent() > before + 300 || senders.every((k) => k.done), 'messages to flow')
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20))
        victim.kill('SIGKILL')
        await victim.exited
      }
      // The survivors go on: stop the senders; the last one gone closes
      // the channel, and the receivers drain and end. Nobody may hang.
      Atomics.store(w, L.STOP, 1)
      const ends = await exits(all.filter((k) => !victims.has(k)))
      assert.deepStrictEqual(ends, ends.map(() => ok), `round ${round}: the survivors end by themselves`)
      // What no receiver was left to take is still in the ring.
      const ch = new Channel({ buffer: region.buffer, byteOffset: L.CHANNEL_AT })
      for (;;) {
        let m
        try {
          m = ch.tryRecv()
        } catch (e) {
          if (e instanceof ChannelClosedError) break
          throw e
        }
        if (m === Channel.EMPTY) break
        const id = L.check(m)
        if (id < 0) Atomics.add(w, L.CORRUPT, 1)
        else Atomics.add(counts, id, 1)
      }
      assert.strictEqual(Atomics.load(w, L.CORRUPT), 0, `round ${round}: torn or mixed-up messages`)
      let lost = 0
      for (let s = 0; s < SENDERS; s++) {
        const committed = Atomics.load(w, L.COMMITTED + s)
        for (let i = 0; i < L.MAX_N; i++) {
          const c = counts[s * L.MAX_N + i]
          received += c
          if (i < committed) {
            assert.ok(c <= 1, `round ${round}: message ${s}:${i} received ${c} times`)
            if (c === 0) lost++
          } else if (i === committed) {
            // Its send may have been killed before or after its commit.
            assert.ok(c <= 1, `round ${round}: message ${s}:${i} (in flight) received ${c} times`)
          } else {
            assert.strictEqual(c, 0, `round ${round}: message ${s}:${i} was never sent, received ${c} times`)
          }
        }
      }
      // Only a receiver killed after its commit takes a message with it.
      const killedHere = receivers.filter((k) => victims.has(k)).length
      assert.ok(lost <= killedHere, `round ${round}: ${lost} committed messages lost, ${killedHere} receivers killed`)
      region.close()
      SharedRegion.unlink(name)
    }
    assert.ok(received > 0)
  })

  test('a cluster app: workers log with pino into the region channel, the primary writes every line', { timeout: 60000 }, async () => {
    const name = `chc${process.pid}`
    SharedRegion.unlink(name)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'region-channel-'))
    const file = path.join(dir, 'app.log')
    const WORKERS = 4
    const LINES = 2000
    try {
      const app = child([name, file, String(WORKERS), String(LINES)], CLUSTER)
      const r = await app.exited
      assert.strictEqual(r.code, 0, r.stdout)
      const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
      assert.strictEqual(lines.length, WORKERS * LINES)
      const seen = new Set()
      for (const entry of lines) {
        assert.strictEqual(entry.msg, `line ${entry.n} of worker ${entry.worker}`)
        assert.strictEqual(entry.level, entry.n % 100 === 99 ? 40 : 30)
        seen.add(`${entry.worker}:${entry.n}`)
      }
      assert.strictEqual(seen.size, WORKERS * LINES, 'every line once')
      // Each worker's lines in the order it logged them.
      const last = new Map()
      for (const entry of lines) {
        assert.ok(!last.has(entry.worker) || last.get(entry.worker) < entry.n)
        last.set(entry.worker, entry.n)
      }
    } finally {
      SharedRegion.unlink(name)
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
