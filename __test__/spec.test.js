'use strict'
// Where the current spec (ES2025) and the running V8 may disagree, the
// spec's answers: the suite's other files compare against native Atomics
// and would inherit its bugs. In SHARED_FUTEX_UNDER_TEST=native mode, a case
// the running V8 gets wrong is skipped with the reason (see README,
// "Differences from the natives").
const assert = require('assert')
const { MessageChannel } = require('worker_threads')
const { test, describe } = require('./harness')
const subject = require('./subject')
const { polyfilled } = require('../lib/polyfill').internal

const canGrow = typeof SharedArrayBuffer.prototype.grow === 'function'
const canResize = typeof ArrayBuffer.prototype.resize === 'function'

function outcome (f) {
  try {
    const r = f()
    return r !== null && typeof r === 'object' && 'async' in r ? `value ${r.value}` : `value ${r}`
  } catch (e) {
    return e.constructor.name
  }
}

// Whether V8's own Atomics give `expected` for this case.
function nativeAgrees (make, expected) {
  return outcome(() => make(Atomics)) === expected
}

function specCase (name, make, expected, opts) {
  const skip = (opts && opts.skip) ||
    (subject.kind === 'native' && !nativeAgrees(make, expected) ? 'the running V8 differs from the spec here' : false)
  test(name, skip ? { skip } : {}, () => {
    assert.strictEqual(outcome(() => make(subject)), expected)
  })
}

function detach (buffer) {
  const { port1, port2 } = new MessageChannel()
  port1.postMessage(null, [buffer])
  port1.close()
  port2.close()
}

describe('ValidateAtomicAccess reads the length before ToIndex (ES2025)', () => {
  const noGrow = canGrow ? {} : { skip: 'no growable SharedArrayBuffer in this Node' }
  for (const op of ['wait', 'waitAsync', 'notify']) {
    specCase(`${op}: an index whose valueOf grows the SharedArrayBuffer is checked against the old length (RangeError)`, (A) => {
      const sab = new SharedArrayBuffer(4, { maxByteLength: 64 })
      const ta = new Int32Array(sab) // length-tracking: 1 element, 16 after growing
      const index = { valueOf () { sab.grow(64); return 5 } }
      return op === 'notify' ? A.notify(ta, index, 1) : A[op](ta, index, 0, 0)
    }, 'RangeError', noGrow)
  }

  specCase('notify on a resizable ArrayBuffer shrunk to 0 inside valueOf returns 0', (A) => {
    const ab = new ArrayBuffer(4, { maxByteLength: 64 })
    const ta = new Int32Array(ab)
    return A.notify(ta, { valueOf () { ab.resize(0); return 0 } }, 1)
  }, 'value 0', canResize ? {} : { skip: 'no resizable ArrayBuffer in this Node' })

  specCase('notify on an ArrayBuffer detached inside valueOf returns 0', (A) => {
    const ab = new ArrayBuffer(8)
    const ta = new Int32Array(ab)
    return A.notify(ta, { valueOf () { detach(ab); return 0 } }, 1)
  }, 'value 0')

  specCase('notify on an ArrayBuffer detached inside count\'s valueOf returns 0', (A) => {
    const ab = new ArrayBuffer(8)
    const ta = new Int32Array(ab)
    return A.notify(ta, 0, { valueOf () { detach(ab); return 1 } })
  }, 'value 0')

  // ValidateIntegerTypedArray → ValidateTypedArray: an out-of-bounds view
  // is a TypeError before the index is looked at.
  for (const [what, make] of [
    ['a fixed-length view', (ab) => new Int32Array(ab, 8, 1)],
    ['a length-tracking view', (ab) => new Int32Array(ab, 8)]
  ]) {
    specCase(`notify on ${what} of a resizable ArrayBuffer shrunk below its offset: TypeError`, (A) => {
      const ab = new ArrayBuffer(16, { maxByteLength: 16 })
      const ta = make(ab)
      ab.resize(4)
      return A.notify(ta, 0, 1)
    }, 'TypeError', canResize ? {} : { skip: 'no resizable ArrayBuffer in this Node' })
  }
  specCase('notify on an empty view at the end of a resizable ArrayBuffer (in bounds) is a RangeError for index 0', (A) => {
    const ab = new ArrayBuffer(16, { maxByteLength: 16 })
    return A.notify(new Int32Array(ab, 16), 0, 1)
  }, 'RangeError', canResize ? {} : { skip: 'no resizable ArrayBuffer in this Node' })

  test('the polyfill\'s Atomics.notify answers the same', { skip: canGrow ? false : 'no growable SharedArrayBuffer in this Node' }, () => {
    const ab = new ArrayBuffer(8)
    const ta = new Int32Array(ab)
    assert.strictEqual(polyfilled.notify(ta, { valueOf () { detach(ab); return 0 } }, 1), 0)
    const sab = new SharedArrayBuffer(4, { maxByteLength: 64 })
    assert.throws(() => polyfilled.notify(new Int32Array(sab), { valueOf () { sab.grow(64); return 5 } }), RangeError)
  })
})

describe('no user code runs that the spec does not run', () => {
  // A handler that is itself a Proxy logs every trap V8 looks up on it.
  function watched (target, log) {
    return new Proxy(target, new Proxy({}, { get (_, trap) { log.push(String(trap)); return undefined } }))
  }
  for (const op of ['wait', 'waitAsync', 'notify']) {
    test(`${op}: a Proxy around a shared Int32Array sees no trap, also while the TypeError is composed`, () => {
      const log = []
      const ta = watched(new Int32Array(new SharedArrayBuffer(8)), log)
      assert.throws(() => (op === 'notify' ? subject.notify(ta, 0, 1) : subject[op](ta, 0, 0, 0)), TypeError)
      assert.deepStrictEqual(log, [])
    })
  }

  test('an object with a Symbol.toStringTag getter: the getter never runs', () => {
    let ran = 0
    const ta = { get [Symbol.toStringTag] () { ran++; return 'Int32Array' } }
    assert.throws(() => subject.wait(ta, 0, 0, 0), TypeError)
    assert.throws(() => subject.notify(ta, 0, 1), TypeError)
    assert.strictEqual(ran, 0)
  })
})
