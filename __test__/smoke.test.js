'use strict'
const { test } = require('./harness')
const assert = require('assert')
const { wait, notify, waitAsync } = require('..')

test('the addon loads and a wait/notify round trip works on one thread', async () => {
  const i32 = new Int32Array(new SharedArrayBuffer(8))
  assert.strictEqual(wait(i32, 0, 1), 'not-equal')
  const r = waitAsync(i32, 0, 0)
  assert.strictEqual(r.async, true)
  assert.strictEqual(notify(i32, 0), 1)
  assert.strictEqual(await r.value, 'ok')
})
