'use strict'
// What a Channel knows of its ends (docs/channel.md, "Senders and
// receivers"): the last receiver gone, sends fail with
// ChannelDisconnectedError; the last sender gone, receivers take what is
// left and then see the end. A thread's end counts however it ends (an
// uncaught exception, process.exit, its script's end, terminate()), while
// the other side blocks, waits async, iterates, or comes later.
//
// Each case runs in a child process with a hard timeout
// (fixtures/channel-ends.js).
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')
const { kind } = require('./subject')
const { Channel, ChannelClosedError, ChannelDisconnectedError } = require('..')

const FIXTURE = path.join(__dirname, 'fixtures', 'channel-ends.js')
const HOWS = ['throw', 'exit', 'return', 'terminate']
const moduleOnly = kind === 'module' ? {} : { skip: 'the Channel is the module\'s' }

describe('Channel: the other side ends (child processes)', moduleOnly, () => {
  const cases = [
    ['receiver', 'blocking', 'a blocked send throws ChannelDisconnectedError when the last receiver ends'],
    ['receiver', 'async', 'a pending sendAsync rejects with ChannelDisconnectedError when the last receiver ends'],
    ['receiver', 'later', 'a send after the last receiver ended throws at once, with room in the ring'],
    ['sender', 'blocking', 'a blocked recv gets every message, then the end, when the last sender ends'],
    ['sender', 'async', 'a pending recvAsync gets every message, then the end, when the last sender ends'],
    ['sender', 'iterate', 'for await ends after every message when the last sender ends'],
    ['sender', 'later', 'a receiver that comes after the last sender ended gets every message, then the end']
  ]
  for (const [side, mode, what] of cases) {
    test(what, { timeout: 70000 }, async () => {
      const r = await runChild([FIXTURE, side, mode], { timeoutMs: 60000 })
      assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
      const expected = HOWS.map((how) => side === 'receiver'
        ? { how, error: 'ChannelDisconnectedError', code: 'ERR_CHANNEL_DISCONNECTED', closed: true, got: [] }
        : mode === 'iterate'
          ? { how, error: 'end of iteration', code: null, closed: true, got: [0, 1, 2, 3, 4] }
          : { how, error: 'ChannelDisconnectedError', code: 'ERR_CHANNEL_DISCONNECTED', closed: true, got: [0, 1, 2, 3, 4] })
      assert.deepStrictEqual(r.result, expected, transcript(r))
    })
  }
})

describe('Channel: join and leave', () => {
  test('the last sender to leave closes the channel: receivers take what is left, then see the end', () => {
    const ch = new Channel({ bytes: 64 })
    ch.send(1)
    ch.send(2)
    ch.leave('sender')
    assert.strictEqual(ch.closed, true)
    assert.strictEqual(ch.recv(), 1)
    assert.strictEqual(ch.recv(), 2)
    assert.throws(() => ch.recv(), (e) => e instanceof ChannelDisconnectedError && e instanceof ChannelClosedError &&
      e.code === 'ERR_CHANNEL_DISCONNECTED' && /every sender/.test(e.message))
    assert.deepStrictEqual([...ch], [])
  })

  test('the last receiver to leave closes the channel: sends throw ChannelDisconnectedError', async () => {
    const ch = new Channel({ bytes: 64 })
    ch.join('receiver')
    ch.send('a')
    ch.leave('receiver')
    assert.throws(() => ch.send('b'), (e) => e.name === 'ChannelDisconnectedError' && /every receiver/.test(e.message))
    assert.throws(() => ch.trySend('b'), ChannelDisconnectedError)
    await assert.rejects(ch.sendAsync('b'), ChannelDisconnectedError)
    assert.throws(() => ch.flushSync(), ChannelDisconnectedError)
  })

  test('a side nobody ever joined is not gone: sends wait for a receiver to come', () => {
    const ch = new Channel({ bytes: 64 })
    ch.send(1)
    ch.leave('receiver') // was never one
    assert.strictEqual(ch.closed, false)
    assert.strictEqual(ch.trySend(2), true)
  })

  test('a member that leaves while others of its side stay changes nothing; leave is idempotent', () => {
    const ch = new Channel({ bytes: 64 })
    const other = new Channel(ch.handle)
    ch.join('both')
    other.join('both') // the same thread: one membership
    other.leave()
    other.leave()
    assert.strictEqual(ch.closed, true, 'one thread, one membership: it left both sides')
  })

  test('join / leave take \'sender\', \'receiver\' or \'both\'; anything else is a TypeError', () => {
    const ch = new Channel()
    for (const bad of ['senders', 1, null, {}]) {
      assert.throws(() => ch.join(bad), TypeError)
      assert.throws(() => ch.leave(bad), TypeError)
    }
    assert.strictEqual(ch.join('both'), ch)
  })
})
