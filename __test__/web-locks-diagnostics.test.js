'use strict'
// The Web Locks API (shared-futex/web-locks) publishes the diagnostics_channel
// events of Node's own navigator.locks (Node 24.15+): `locks.request.start`,
// `locks.request.grant`, `locks.request.miss` and `locks.request.end`, plain
// channels, with the same payloads and at the same moments of a request.
const assert = require('assert')
const { test, describe } = require('./harness')
const { locks } = require('../web-locks')

const T = { timeout: 10000 }
const HAS_ABORT = typeof AbortController === 'function'
let dc = null
try {
  dc = require('diagnostics_channel')
} catch {}
const HAS_DC = dc !== null && typeof dc.channel === 'function'
const KINDS = ['start', 'grant', 'miss', 'end']

let unique = 0
const uniqueName = () => `web-locks-dc-test-${++unique}`

function deferred () {
  let resolve
  const promise = new Promise((r) => { resolve = r })
  return { promise, resolve }
}

// Records the events of the four channels whose name is in `names`, in order:
// [kind, message]. Returns { events, stop }.
function record (names) {
  const events = []
  const handlers = KINDS.map((kind) => {
    const channel = dc.channel(`locks.request.${kind}`)
    const handler = (message, channelName) => {
      assert.strictEqual(channelName, `locks.request.${kind}`)
      if (names.includes(message.name)) events.push([kind, message])
    }
    channel.subscribe(handler)
    return () => channel.unsubscribe(handler)
  })
  return { events, stop: () => handlers.forEach((h) => h()) }
}

const kinds = (events) => events.map(([kind]) => kind)

describe('Web Locks: diagnostics_channel events, as Node publishes them', { skip: !HAS_DC && 'no diagnostics_channel' }, () => {
  test('a granted request: start when asked, grant right before the callback, end right before the promise settles', T, async () => {
    const name = uniqueName()
    const { events, stop } = record([name])
    try {
      const p = locks.request(name, (lock) => {
        assert.deepStrictEqual(kinds(events), ['start', 'grant'])
        return 'done'
      })
      assert.deepStrictEqual(events, [['start', { name, mode: 'exclusive' }]])
      const seen = p.then((v) => { assert.deepStrictEqual(kinds(events), ['start', 'grant', 'end']); return v })
      assert.strictEqual(await seen, 'done')
      assert.deepStrictEqual(events, [
        ['start', { name, mode: 'exclusive' }],
        ['grant', { name, mode: 'exclusive' }],
        ['end', { name, mode: 'exclusive', ifAvailable: false, steal: false, error: undefined }]
      ])
      assert.deepStrictEqual(Object.keys(events[2][1]), ['name', 'mode', 'ifAvailable', 'steal', 'error'])
    } finally {
      stop()
    }
  })

  test('shared mode and a queued request: each request its own start, grant and end', T, async () => {
    const name = uniqueName()
    const { events, stop } = record([name])
    try {
      const hold = deferred()
      const got = deferred()
      const first = locks.request(name, () => { got.resolve(); return hold.promise })
      await got.promise
      const second = locks.request(name, { mode: 'shared' }, () => 2)
      assert.deepStrictEqual(kinds(events), ['start', 'grant', 'start'])
      hold.resolve(1)
      assert.deepStrictEqual(await Promise.all([first, second]), [1, 2])
      assert.deepStrictEqual(events, [
        ['start', { name, mode: 'exclusive' }],
        ['grant', { name, mode: 'exclusive' }],
        ['start', { name, mode: 'shared' }],
        ['grant', { name, mode: 'shared' }],
        ['end', { name, mode: 'exclusive', ifAvailable: false, steal: false, error: undefined }],
        ['end', { name, mode: 'shared', ifAvailable: false, steal: false, error: undefined }]
      ])
    } finally {
      stop()
    }
  })

  test('ifAvailable and not available: start, miss right before the callback gets null, end', T, async () => {
    const name = uniqueName()
    const hold = deferred()
    const got = deferred()
    const holder = locks.request(name, () => { got.resolve(); return hold.promise })
    await got.promise
    const { events, stop } = record([name])
    try {
      const r = await locks.request(name, { ifAvailable: true }, (lock) => {
        assert.deepStrictEqual(kinds(events), ['start', 'miss'])
        return lock
      })
      assert.strictEqual(r, null)
      assert.deepStrictEqual(events, [
        ['start', { name, mode: 'exclusive' }],
        ['miss', { name, mode: 'exclusive' }],
        ['end', { name, mode: 'exclusive', ifAvailable: true, steal: false, error: undefined }]
      ])
    } finally {
      stop()
      hold.resolve()
      await holder
    }
  })

  test("the callback's error is the end event's error", T, async () => {
    const name = uniqueName()
    const { events, stop } = record([name])
    try {
      const err = new Error('callback error')
      await assert.rejects(locks.request(name, async () => { throw err }), (e) => e === err)
      assert.deepStrictEqual(kinds(events), ['start', 'grant', 'end'])
      assert.strictEqual(events[2][1].error, err)
    } finally {
      stop()
    }
  })

  test('a stolen lock ends with an AbortError; the stealer ends with steal: true and no error', T, async () => {
    const name = uniqueName()
    const { events, stop } = record([name])
    try {
      const hold = deferred()
      const got = deferred()
      const original = locks.request(name, () => { got.resolve(); return hold.promise }).then(() => null, (e) => e)
      await got.promise
      await locks.request(name, { steal: true }, () => {})
      const e = await original
      assert.strictEqual(e.name, 'AbortError')
      hold.resolve()
      const ends = events.filter(([kind]) => kind === 'end').map(([, m]) => m)
      assert.strictEqual(ends.length, 2)
      const stolen = ends.find((m) => !m.steal)
      const stealer = ends.find((m) => m.steal)
      assert.strictEqual(stolen.error, e)
      assert.strictEqual(stealer.error, undefined)
      assert.deepStrictEqual(kinds(events).filter((k) => k !== 'end'), ['start', 'grant', 'start', 'grant'])
    } finally {
      stop()
    }
  })

  test('a subscriber that makes a request of its own from the start event: each promise settles as its own callback', T, async () => {
    const name = uniqueName()
    const inner = uniqueName()
    const channel = dc.channel('locks.request.start')
    let innerPromise = null
    const handler = (message) => {
      if (message.name === name && innerPromise === null) innerPromise = locks.request(inner, () => 'inner')
    }
    channel.subscribe(handler)
    try {
      const outer = locks.request(name, () => 'outer')
      assert.deepStrictEqual(await Promise.all([outer, innerPromise]), ['outer', 'inner'])
      const withOptions = locks.request(uniqueName(), { mode: 'shared' }, () => 'shared')
      assert.strictEqual(await withOptions, 'shared')
    } finally {
      channel.unsubscribe(handler)
    }
  })

  test('argument errors publish nothing', T, async () => {
    const name = '-reserved'
    const { events, stop } = record([name])
    try {
      await assert.rejects(locks.request(name, () => {}), { name: 'NotSupportedError' })
      assert.deepStrictEqual(events, [])
    } finally {
      stop()
    }
  })

  test('a pending request aborted by its signal: start, then end with the reason; no grant', { skip: !HAS_ABORT && 'no AbortController' }, async () => {
    const name = uniqueName()
    const hold = deferred()
    const got = deferred()
    const holder = locks.request(name, () => { got.resolve(); return hold.promise })
    await got.promise
    const { events, stop } = record([name])
    try {
      const c = new AbortController()
      const p = locks.request(name, { signal: c.signal }, () => {}).then(() => null, (e) => e)
      const reason = new Error('why')
      c.abort(reason)
      const e = await p
      assert.strictEqual(e.message, reason.message)
      assert.deepStrictEqual(kinds(events), ['start', 'end'])
      assert.strictEqual(events[1][1].error, e)
    } finally {
      stop()
      hold.resolve()
      await holder
    }
  })

  test('through the polyfill installed over any navigator.locks, the events are published too', T, async () => {
    const { install } = require('../web-locks-polyfill')
    assert.strictEqual(install({ force: true }), true)
    const name = uniqueName()
    const { events, stop } = record([name])
    try {
      await globalThis.navigator.locks.request(name, () => {})
      assert.deepStrictEqual(kinds(events), ['start', 'grant', 'end'])
    } finally {
      stop()
    }
  })
})
