'use strict'
// The ECMAScript semantics of wait / notify / waitAsync, table-driven. Every case is a function of
// an implementation A = { wait, notify, waitAsync } and runs twice: through
// the module under test and, where this Node has the reference (V8 with
// Atomics.waitAsync, Node 16+), through native Atomics. The module's outcome
// must equal the native one, and both must equal the table's expectation
// (a native/table mismatch is a bug in this table). An outcome records the
// result or the error class, whether the error was thrown synchronously,
// and the order in which argument conversions ran (`log`). Nothing here
// blocks for more than a millisecond: equal values are only waited on with
// a timeout ≤ 1 ms, or asynchronously and then notified.
const assert = require('assert')
const vm = require('vm')
const { MessageChannel } = require('worker_threads')
const { test, describe } = require('./harness')
const subject = require('./subject')
const { sharedI32, sharedI64 } = require('./util')

const native = typeof Atomics.waitAsync === 'function'
  ? { wait: Atomics.wait, notify: Atomics.notify, waitAsync: Atomics.waitAsync }
  : null

class Sentinel extends Error {}

function errorName (e) {
  for (const C of [TypeError, RangeError, SyntaxError, Sentinel]) {
    if (e instanceof Object && e.constructor === C) return C.name
  }
  return `unexpected ${e instanceof Object ? e.constructor.name : typeof e}: ${e && e.message}`
}

// Pending waitAsync promises do not keep the event loop alive (as native,
// nodejs/node#44729), so every case holds it open itself while it runs.
async function outcome (run, A) {
  const hold = setInterval(() => {}, 1000)
  try {
    return await outcomeOf(run, A)
  } finally {
    clearInterval(hold)
  }
}

async function outcomeOf (run, A) {
  const log = []
  let result
  try {
    result = run(A, log)
  } catch (e) {
    return { throws: errorName(e), log }
  }
  try {
    return { value: await result, log }
  } catch (e) {
    return { rejects: errorName(e), log }
  }
}

// A waitAsync result as data: { async, value } with the promise settled.
// A result of another shape is reported as such.
function described (r) {
  if (r === null || typeof r !== 'object' || Object.getPrototypeOf(r) !== Object.prototype ||
      Object.keys(r).join() !== 'async,value') {
    return { badShape: r === null || typeof r !== 'object' ? String(r) : Object.keys(r).join() }
  }
  if (r.async !== true) return { async: r.async, value: r.value }
  if (!(r.value instanceof Promise)) return { async: true, value: 'not a Promise' }
  return r.value.then((value) => ({ async: true, value }))
}

// An argument whose conversion is logged (and may be made to throw).
function logged (log, name, value) {
  return {
    valueOf () {
      log.push(name)
      if (value instanceof Sentinel) throw value
      return value
    }
  }
}

const is = (value, log) => ({ value, log: log || [] })
const throws = (name, log) => ({ throws: name, log: log || [] })

const groups = new Map()
function add (group, name, run, expect) {
  if (!groups.has(group)) groups.set(group, [])
  groups.get(group).push({ name, run, expect })
}

// wait(...) and waitAsync(...) on the same arguments, when the outcome is
// immediate: waitAsync reports it as { async: false, value }.
function waitBoth (group, name, args, expect) {
  add(group, `wait(${name})`, (A, log) => A.wait(...args(log)), expect)
  const asyncExpect = 'value' in expect ? is({ async: false, value: expect.value }, expect.log) : expect
  add(group, `waitAsync(${name})`, (A, log) => described(A.waitAsync(...args(log))), asyncExpect)
}
function all3 (group, name, args, expect) {
  waitBoth(group, name, args, expect)
  add(group, `notify(${name})`, (A, log) => A.notify(...args(log).slice(0, 3)), expect)
}

// ---------------------------------------------------------------- type
{
  const G = 'typed array kind'
  const S = () => new SharedArrayBuffer(16)
  const bad = [
    ['Float64Array', () => new Float64Array(S())],
    ['Float32Array', () => new Float32Array(S())],
    ['Uint32Array', () => new Uint32Array(S())],
    ['Int16Array', () => new Int16Array(S())],
    ['Uint16Array', () => new Uint16Array(S())],
    ['Int8Array', () => new Int8Array(S())],
    ['Uint8Array', () => new Uint8Array(S())],
    ['Uint8ClampedArray', () => new Uint8ClampedArray(S())],
    ['BigUint64Array', () => new BigUint64Array(S())],
    ['DataView', () => new DataView(S())],
    ['SharedArrayBuffer', () => S()],
    ['plain object', () => ({ length: 4, 0: 0, 1: 0, 2: 0, 3: 0 })],
    ['Array', () => [0, 0, 0, 0]],
    ['undefined', () => undefined],
    ['null', () => null],
    ['number', () => 0],
    ['string', () => 'abcd']
  ]
  for (const [label, make] of bad) {
    // Rejected before any argument is converted: the logged index stays untouched.
    all3(G, `shared ${label}, …`, (log) => [make(), logged(log, 'index', 0), 0, 0], throws('TypeError'))
  }
  all3(G, 'no arguments', () => [], throws('TypeError'))
  all3(G, 'Proxy of a shared Int32Array, …', () => [new Proxy(sharedI32([0]), {}), 0, 0, 0], throws('TypeError'))
  // Accepted: subclasses, and typed arrays of another realm (vm context).
  class Sub extends Int32Array {}
  waitBoth(G, 'shared Int32Array subclass, 0, 1, 0', () => [new Sub(new SharedArrayBuffer(8)), 0, 1, 0], is('not-equal'))
  waitBoth(G, 'shared Int32Array subclass, 0, 0, 0', () => [new Sub(new SharedArrayBuffer(8)), 0, 0, 0], is('timed-out'))
  const otherRealm = (code) => vm.runInNewContext(code)
  waitBoth(G, 'shared Int32Array of another realm, 0, 0, 0',
    () => [otherRealm('new Int32Array(new SharedArrayBuffer(8))'), 0, 0, 0], is('timed-out'))
  waitBoth(G, 'shared BigInt64Array of another realm, 0, 1n, 0',
    () => [otherRealm('new BigInt64Array(new SharedArrayBuffer(8))'), 0, 1n, 0], is('not-equal'))
  waitBoth(G, 'non-shared Int32Array of another realm, 0, 0, 0',
    () => [otherRealm('new Int32Array(2)'), 0, 0, 0], throws('TypeError'))
  add(G, 'notify(non-shared Int32Array of another realm, 0)', (A) => A.notify(otherRealm('new Int32Array(2)'), 0), is(0))
  add(G, 'waitAsync on a subclass, notify through a plain view', (A) => {
    const ta = new Sub(new SharedArrayBuffer(8))
    const r = A.waitAsync(ta, 1, 0)
    return Promise.all([A.notify(new Int32Array(ta.buffer), 1), described(r)])
  }, is([1, { async: true, value: 'ok' }]))
  waitBoth(G, 'shared Int32Array, 0, 1, 0', () => [sharedI32([0]), 0, 1, 0], is('not-equal'))
  waitBoth(G, 'shared BigInt64Array, 0, 1n, 0', () => [sharedI64([0n]), 0, 1n, 0], is('not-equal'))
  add(G, 'notify(shared Int32Array, 0, 1)', (A) => A.notify(sharedI32([0]), 0, 1), is(0))
  add(G, 'notify(shared BigInt64Array, 0, 1)', (A) => A.notify(sharedI64([0n]), 0, 1), is(0))
}

// ---------------------------------------------------------------- shared or not
{
  const G = 'shared or not'
  const plainI32 = () => new Int32Array(4)
  const plainI64 = () => new BigInt64Array(4)
  // The shared check comes right after the type check, before the index.
  waitBoth(G, 'non-shared Int32Array, …', (log) => [plainI32(), logged(log, 'index', 0), 0, 0], throws('TypeError'))
  waitBoth(G, 'non-shared BigInt64Array, 0, 0n, 0', () => [plainI64(), 0, 0n, 0], throws('TypeError'))
  waitBoth(G, 'non-shared Int32Array, -1 (bad index), 0, 0', () => [plainI32(), -1, 0, 0], throws('TypeError'))
  // notify validates index and count, then returns 0 for a non-shared buffer.
  add(G, 'notify(non-shared Int32Array, 0, 1)', (A) => A.notify(plainI32(), 0, 1), is(0))
  add(G, 'notify(non-shared Int32Array, 0)', (A) => A.notify(plainI32(), 0), is(0))
  add(G, 'notify(non-shared BigInt64Array, 3, 1)', (A) => A.notify(plainI64(), 3, 1), is(0))
  add(G, 'notify(non-shared, index, count) converts both',
    (A, log) => A.notify(plainI32(), logged(log, 'index', 0), logged(log, 'count', 1)), is(0, ['index', 'count']))
  add(G, 'notify(non-shared Int32Array, 4 (= length))', (A) => A.notify(plainI32(), 4), throws('RangeError'))
  add(G, 'notify(non-shared Int32Array, -1)', (A) => A.notify(plainI32(), -1), throws('RangeError'))
  add(G, 'notify(non-shared Int32Array, 0, 1n)', (A) => A.notify(plainI32(), 0, 1n), throws('TypeError'))
  add(G, 'notify(non-shared Float64Array, 0)', (A) => A.notify(new Float64Array(4), 0), throws('TypeError'))
  // A detached buffer fails the typed-array validation (TypeError), shared or not aside.
  const detached = () => {
    const ab = new ArrayBuffer(16)
    const ta = new Int32Array(ab)
    const { port1, port2 } = new MessageChannel()
    port1.postMessage(ab, [ab])
    port1.close()
    port2.close()
    return ta
  }
  add(G, 'notify(detached Int32Array, 0)', (A) => A.notify(detached(), 0), throws('TypeError'))
  waitBoth(G, 'detached Int32Array, 0, 0, 0', () => [detached(), 0, 0, 0], throws('TypeError'))
}

// ---------------------------------------------------------------- index
{
  const G = 'index (ToIndex)'
  const fresh = () => sharedI32([10, 11, 12, 13]) // element k holds 10 + k
  const valid = [
    ["'1'", () => '1', 1],
    ['1.5', () => 1.5, 1],
    ['1.9999', () => 1.9999, 1],
    ['3.99', () => 3.99, 3],
    ['NaN', () => NaN, 0],
    ['undefined', () => undefined, 0],
    ['null', () => null, 0],
    ['false', () => false, 0],
    ['true', () => true, 1],
    ["' 2 '", () => ' 2 ', 2],
    ["'0x3'", () => '0x3', 3],
    ["'1e0'", () => '1e0', 1],
    ['-0', () => -0, 0],
    ['-0.9', () => -0.9, 0],
    ["'abc'", () => 'abc', 0],
    ['[]', () => [], 0],
    ['[2]', () => [2], 2],
    ['{}', () => ({}), 0],
    ['{ valueOf: 3 }', () => ({ valueOf: () => 3 }), 3],
    ["{ toString: '2' }", () => ({ toString: () => '2' }), 2]
  ]
  for (const [label, idx, k] of valid) {
    // The element read is the one at k: equal value with timeout 0 → timed-out.
    waitBoth(G, `ta, ${label}, ${10 + k}, 0`, () => [fresh(), idx(), 10 + k, 0], is('timed-out'))
    // notify reaches the waiter at k: 1 woken, nothing left there afterwards.
    add(G, `notify(ta, ${label}, 1) wakes the waiter at ${k}`, (A) => {
      const ta = fresh()
      const r = A.waitAsync(ta, k, 10 + k)
      const woken = A.notify(ta, idx(), 1)
      const left = A.notify(ta, k)
      return Promise.all([woken, left, described(r)])
    }, is([1, 0, { async: true, value: 'ok' }]))
  }
  const invalid = [
    ['-1', () => -1, 'RangeError'],
    ['-1.5', () => -1.5, 'RangeError'],
    ['4 (= length)', () => 4, 'RangeError'],
    ['2**53 - 1', () => 2 ** 53 - 1, 'RangeError'],
    ['2**53', () => 2 ** 53, 'RangeError'],
    ['Infinity', () => Infinity, 'RangeError'],
    ['-Infinity', () => -Infinity, 'RangeError'],
    ["'-1'", () => '-1', 'RangeError'],
    ['Symbol()', () => Symbol('i'), 'TypeError'],
    ['1n', () => 1n, 'TypeError'],
    ['Object.create(null)', () => Object.create(null), 'TypeError'],
    ['throwing valueOf', () => ({ valueOf () { throw new Sentinel() } }), 'Sentinel']
  ]
  for (const [label, idx, error] of invalid) {
    all3(G, `ta, ${label}, 10, 0`, () => [fresh(), idx(), 10, 0], throws(error))
  }
  all3(G, 'zero-length Int32Array, 0, 0, 0', () => [new Int32Array(new SharedArrayBuffer(0)), 0, 0, 0], throws('RangeError'))
  all3(G, 'zero-length BigInt64Array, 0, 0n, 0', () => [new BigInt64Array(new SharedArrayBuffer(0)), 0, 0n, 0], throws('RangeError'))
  const offsetView = () => new Int32Array(fresh().buffer, 8, 2) // elements 2 and 3
  waitBoth(G, 'Int32Array(sab, 8, 2), 1, 13, 0', () => [offsetView(), 1, 13, 0], is('timed-out'))
  waitBoth(G, 'Int32Array(sab, 8, 2), 0, 10, 0', () => [offsetView(), 0, 10, 0], is('not-equal'))
  all3(G, 'Int32Array(sab, 8, 2), 2 (= length), 12, 0', () => [offsetView(), 2, 12, 0], throws('RangeError'))
}

// ---------------------------------------------------------------- value
{
  const G = 'expected value (ToInt32 / ToBigInt64)'
  const i32 = [
    ['2**32 + 1 wraps to 1', 1, () => 2 ** 32 + 1, 'timed-out'],
    ['2**32 - 1 wraps to -1', -1, () => 2 ** 32 - 1, 'timed-out'],
    ['2**31 wraps to -(2**31)', -(2 ** 31), () => 2 ** 31, 'timed-out'],
    ['-(2**32) + 5 wraps to 5', 5, () => -(2 ** 32) + 5, 'timed-out'],
    ['2**32 + 6 is 6, not 5', 5, () => 2 ** 32 + 6, 'not-equal'],
    ["'5'", 5, () => '5', 'timed-out'],
    ["'6' against 5", 5, () => '6', 'not-equal'],
    ['5.9 truncates to 5', 5, () => 5.9, 'timed-out'],
    ['-5.9 truncates to -5', -5, () => -5.9, 'timed-out'],
    ['{ valueOf: 5 }', 5, () => ({ valueOf: () => 5 }), 'timed-out'],
    ['[5]', 5, () => [5], 'timed-out'],
    ['true', 1, () => true, 'timed-out'],
    ['NaN is 0', 0, () => NaN, 'timed-out'],
    ['NaN against 1', 1, () => NaN, 'not-equal'],
    ['undefined is 0', 0, () => undefined, 'timed-out'],
    ['null is 0', 0, () => null, 'timed-out'],
    ['Infinity is 0', 0, () => Infinity, 'timed-out'],
    ['-0 is 0', 0, () => -0, 'timed-out'],
    ["'x' is 0", 0, () => 'x', 'timed-out'],
    ['2**32 is 0', 0, () => 2 ** 32, 'timed-out'],
    ['0n', 0, () => 0n, throws('TypeError')],
    ['Symbol()', 0, () => Symbol('v'), throws('TypeError')],
    ['throwing valueOf', 0, () => ({ valueOf () { throw new Sentinel() } }), throws('Sentinel')]
  ]
  for (const [label, element, value, expect] of i32) {
    waitBoth(G, `Int32Array [${element}], 0, ${label}, 0`, () => [sharedI32([element]), 0, value(), 0],
      typeof expect === 'string' ? is(expect) : expect)
  }
  const i64 = [
    ['0n', 0n, () => 0n, 'timed-out'],
    ['0 (a Number)', 0n, () => 0, throws('TypeError')],
    ['1.5', 0n, () => 1.5, throws('TypeError')],
    ['undefined', 0n, () => undefined, throws('TypeError')],
    ['null', 0n, () => null, throws('TypeError')],
    ['Symbol()', 0n, () => Symbol('v'), throws('TypeError')],
    ["'abc'", 0n, () => 'abc', throws('SyntaxError')],
    ["'5'", 5n, () => '5', 'timed-out'],
    ["'-1'", -1n, () => '-1', 'timed-out'],
    ['true', 1n, () => true, 'timed-out'],
    ['false', 0n, () => false, 'timed-out'],
    ['{ valueOf: 5n }', 5n, () => ({ valueOf: () => 5n }), 'timed-out'],
    ['2n**64n - 1n wraps to -1n', -1n, () => 2n ** 64n - 1n, 'timed-out'],
    ['5n + 2n**64n wraps to 5n', 5n, () => 5n + 2n ** 64n, 'timed-out'],
    ['2n**63n wraps to -(2n**63n)', -(2n ** 63n), () => 2n ** 63n, 'timed-out'],
    ['2n**32n', 2n ** 32n, () => 2n ** 32n, 'timed-out'],
    ['0n against 2n**32n (same low word)', 2n ** 32n, () => 0n, 'not-equal'],
    ['2n**32n - 1n against -1n (same low word)', -1n, () => 2n ** 32n - 1n, 'not-equal'],
    ['7n against 2n**40n + 7n', 2n ** 40n + 7n, () => 7n, 'not-equal'],
    ['throwing valueOf', 0n, () => ({ valueOf () { throw new Sentinel() } }), throws('Sentinel')]
  ]
  for (const [label, element, value, expect] of i64) {
    waitBoth(G, `BigInt64Array [${element}n], 0, ${label}, 0`, () => [sharedI64([element]), 0, value(), 0],
      typeof expect === 'string' ? is(expect) : expect)
  }
}

// ---------------------------------------------------------------- timeout
{
  const G = 'timeout'
  const forever = [
    ['NaN', () => [NaN]],
    ['undefined', () => [undefined]],
    ['omitted', () => []],
    ['Infinity', () => [Infinity]],
    ["'abc'", () => ['abc']],
    ['{}', () => [{}]],
    ['{ valueOf: NaN }', () => [{ valueOf: () => NaN }]]
  ]
  for (const [label, t] of forever) {
    // A waiter that would sleep forever, with a value that differs: no sleep.
    waitBoth(G, `[0], 0, 1, ${label}`, () => [sharedI32([0]), 0, 1].concat(t()), is('not-equal'))
    // Asynchronously, with an equal value: pending until notified.
    add(G, `waitAsync([0], 0, 0, ${label}) is pending until notify`, (A) => {
      const ta = sharedI32([0])
      const r = A.waitAsync(ta, 0, 0, ...t())
      return Promise.all([A.notify(ta, 0), described(r)])
    }, is([1, { async: true, value: 'ok' }]))
  }
  const immediate = [
    ['0', () => 0],
    ['-0', () => -0],
    ['-1', () => -1],
    ['-1e300', () => -1e300],
    ['-Infinity', () => -Infinity],
    ['null', () => null],
    ['false', () => false],
    ["'0'", () => '0'],
    ["'-5'", () => '-5'],
    ["' '", () => ' '],
    ['[]', () => []],
    ['{ valueOf: -1 }', () => ({ valueOf: () => -1 })]
  ]
  for (const [label, t] of immediate) {
    waitBoth(G, `[0], 0, 0, ${label}`, () => [sharedI32([0]), 0, 0, t()], is('timed-out'))
  }
  const short = [['1', () => 1], ['0.5', () => 0.5], ['true', () => true], ["'2'", () => '2']]
  for (const [label, t] of short) {
    add(G, `wait([0], 0, 0, ${label}) times out on the main thread`, (A) => A.wait(sharedI32([0]), 0, 0, t()), is('timed-out'))
    add(G, `waitAsync([0], 0, 0, ${label}) is a pending promise, then times out`,
      (A) => described(A.waitAsync(sharedI32([0]), 0, 0, t())), is({ async: true, value: 'timed-out' }))
  }
  const invalid = [
    ['1n', () => 1n, 'TypeError'],
    ['Symbol()', () => Symbol('t'), 'TypeError'],
    ['Object.create(null)', () => Object.create(null), 'TypeError'],
    ['throwing valueOf', () => ({ valueOf () { throw new Sentinel() } }), 'Sentinel']
  ]
  for (const [label, t, error] of invalid) {
    // Converted before the comparison: throws even when the value differs.
    waitBoth(G, `[0], 0, 1, ${label}`, () => [sharedI32([0]), 0, 1, t()], throws(error))
  }
}

// ---------------------------------------------------------------- notify count
{
  const G = 'notify count'
  // Three async waiters at [0]; notify(ta, 0, count); then wake the rest.
  const withThreeWaiters = (count) => (A) => {
    const ta = sharedI32([0, 0])
    const rs = [A.waitAsync(ta, 0, 0), A.waitAsync(ta, 0, 0), A.waitAsync(ta, 0, 0)]
    let woken
    let rest
    try {
      woken = A.notify(ta, 0, ...count())
    } finally {
      rest = A.notify(ta, 0) // leave no waiter behind, even when it threw
    }
    return Promise.all(rs.map(described)).then((settled) => [woken, rest].concat(settled.map((s) => s.value)))
  }
  const cases = [
    ['omitted', () => [], 3],
    ['undefined', () => [undefined], 3],
    ['Infinity', () => [Infinity], 3],
    ['2**53', () => [2 ** 53], 3],
    ['4', () => [4], 3],
    ['3', () => [3], 3],
    ['2', () => [2], 2],
    ['1', () => [1], 1],
    ['0', () => [0], 0],
    ['-1', () => [-1], 0],
    ['-Infinity', () => [-Infinity], 0],
    ['NaN', () => [NaN], 0],
    ['null', () => [null], 0],
    ['false', () => [false], 0],
    ['true', () => [true], 1],
    ['1.7', () => [1.7], 1],
    ['0.9', () => [0.9], 0],
    ['-0.5', () => [-0.5], 0],
    ["'2'", () => ['2'], 2],
    ["' 2 '", () => [' 2 '], 2],
    ["'abc'", () => ['abc'], 0],
    ['[1]', () => [[1]], 1],
    ['{ valueOf: 2 }', () => [{ valueOf: () => 2 }], 2]
  ]
  for (const [label, count, n] of cases) {
    add(G, `notify(ta, 0, ${label}) with 3 waiters wakes ${n}`, withThreeWaiters(count), is([n, 3 - n, 'ok', 'ok', 'ok']))
  }
  const invalid = [
    ['1n', () => [1n], 'TypeError'],
    ['Symbol()', () => [Symbol('c')], 'TypeError'],
    ['throwing valueOf', () => [{ valueOf () { throw new Sentinel() } }], 'Sentinel']
  ]
  for (const [label, count, name] of invalid) {
    add(G, `notify(ta, 0, ${label}) with 3 waiters throws`, withThreeWaiters(count), throws(name))
  }
  add(G, 'notify(ta, 0) without waiters', (A) => A.notify(sharedI32([0]), 0), is(0))
  add(G, 'notify(ta, 1) with waiters only at [0]', (A) => {
    const ta = sharedI32([0, 0])
    const r = A.waitAsync(ta, 0, 0)
    return Promise.all([A.notify(ta, 1), A.notify(ta, 0), described(r)])
  }, is([0, 1, { async: true, value: 'ok' }]))
  add(G, 'notify(other SAB, 0) with waiters at [0] of this one', (A) => {
    const ta = sharedI32([0])
    const r = A.waitAsync(ta, 0, 0)
    return Promise.all([A.notify(sharedI32([0]), 0), A.notify(ta, 0), described(r)])
  }, is([0, 1, { async: true, value: 'ok' }]))
}

// ---------------------------------------------------------------- check order
{
  const G = 'check order (type, index, value, timeout, then compare)'
  const ta = () => sharedI32([0])
  const S = new Sentinel()
  waitBoth(G, 'all converted, in order', (log) =>
    [ta(), logged(log, 'index', 0), logged(log, 'value', 1), logged(log, 'timeout', 0)],
  is('not-equal', ['index', 'value', 'timeout']))
  add(G, 'notify: index, then count', (A, log) =>
    A.notify(ta(), logged(log, 'index', 0), logged(log, 'count', 1)), is(0, ['index', 'count']))
  waitBoth(G, 'bad type before anything', (log) =>
    [new Float64Array(new SharedArrayBuffer(8)), logged(log, 'index', 0), logged(log, 'value', 0), logged(log, 'timeout', 0)],
  throws('TypeError'))
  waitBoth(G, 'bad index (RangeError) before bad value (TypeError)', (log) =>
    [ta(), logged(log, 'index', 99), 0n, 0], throws('RangeError', ['index']))
  waitBoth(G, 'throwing index before bad value', (log) =>
    [ta(), logged(log, 'index', S), 0n, 0], throws('Sentinel', ['index']))
  waitBoth(G, 'bad index before value and timeout conversion', (log) =>
    [ta(), -1, logged(log, 'value', 0), logged(log, 'timeout', 0)], throws('RangeError'))
  waitBoth(G, 'bad value (TypeError) before timeout conversion', (log) =>
    [ta(), logged(log, 'index', 0), 0n, logged(log, 'timeout', 0)], throws('TypeError', ['index']))
  waitBoth(G, 'throwing value before bad timeout', (log) =>
    [ta(), 0, logged(log, 'value', S), 1n], throws('Sentinel', ['value']))
  waitBoth(G, 'bad timeout before the comparison', (log) =>
    [ta(), logged(log, 'index', 0), logged(log, 'value', 1), 1n], throws('TypeError', ['index', 'value']))
  add(G, 'notify: bad index before count conversion', (A, log) =>
    A.notify(ta(), logged(log, 'index', 99), logged(log, 'count', 1)), throws('RangeError', ['index']))
  add(G, 'notify: throwing count after index', (A, log) =>
    A.notify(ta(), logged(log, 'index', 0), logged(log, 'count', S)), throws('Sentinel', ['index', 'count']))
  // The element is read after every conversion: conversions that store
  // into it decide the comparison.
  const storing = (view, v, log, name, result) => ({
    valueOf () {
      log.push(name)
      view[0] = v
      return result
    }
  })
  add(G, 'wait: value conversion stores the value compared', (A, log) => {
    const view = ta()
    return A.wait(view, 0, storing(view, 7, log, 'value', 7), 0)
  }, is('timed-out', ['value']))
  add(G, 'wait: timeout conversion stores the value compared', (A, log) => {
    const view = ta()
    return A.wait(view, 0, 7, storing(view, 7, log, 'timeout', 0))
  }, is('timed-out', ['timeout']))
  add(G, 'waitAsync: timeout conversion changes the element away from the value', (A, log) => {
    const view = ta()
    return described(A.waitAsync(view, 0, 0, storing(view, 1, log, 'timeout', 0)))
  }, is({ async: false, value: 'not-equal' }, ['timeout']))
  add(G, 'notify: index conversion runs before the count', (A, log) => {
    const view = ta()
    const r = A.waitAsync(view, 0, 0)
    const woken = A.notify(view, logged(log, 'index', 0), logged(log, 'count', 1))
    return Promise.all([woken, described(r)])
  }, is([1, { async: true, value: 'ok' }], ['index', 'count']))
}

// ---------------------------------------------------------------- views
{
  const G = 'views: BigInt64Array and byteOffset address the same memory'
  // One async waiter through `waitView` at `wi`; notify through `notifyView`
  // at `ni` (expected to reach it or not), then clean up through waitView.
  const pair = (make, wi, ni) => (A) => {
    const sab = new SharedArrayBuffer(32)
    const [waitView, notifyView] = make(sab)
    const r = A.waitAsync(waitView, wi, waitView[wi])
    const woken = A.notify(notifyView, ni)
    const left = A.notify(waitView, wi)
    return Promise.all([woken, left, described(r)])
  }
  const reached = is([1, 0, { async: true, value: 'ok' }])
  const missed = is([0, 1, { async: true, value: 'ok' }])
  add(G, 'waiter on Int32Array(sab, 8, 2)[0], notify Int32Array(sab)[2]',
    pair((sab) => [new Int32Array(sab, 8, 2), new Int32Array(sab)], 0, 2), reached)
  add(G, 'waiter on Int32Array(sab)[3], notify Int32Array(sab, 8, 2)[1]',
    pair((sab) => [new Int32Array(sab), new Int32Array(sab, 8, 2)], 3, 1), reached)
  add(G, 'waiter on Int32Array(sab, 8, 2)[0], notify Int32Array(sab)[0]',
    pair((sab) => [new Int32Array(sab, 8, 2), new Int32Array(sab)], 0, 0), missed)
  add(G, 'waiter on Int32Array(sab, 4)[0], notify Int32Array(sab, 8)[0]',
    pair((sab) => [new Int32Array(sab, 4), new Int32Array(sab, 8)], 0, 0), missed)
  add(G, 'waiter on BigInt64Array(sab, 8, 1)[0], notify BigInt64Array(sab)[1]',
    pair((sab) => [new BigInt64Array(sab, 8, 1), new BigInt64Array(sab)], 0, 1), reached)
  add(G, 'waiter on BigInt64Array(sab, 16)[0], notify BigInt64Array(sab, 8)[0]',
    pair((sab) => [new BigInt64Array(sab, 16), new BigInt64Array(sab, 8)], 0, 0), missed)
  add(G, 'waiter on Int32Array(sab, 8)[0], notify BigInt64Array(sab)[1] (same byte address)',
    pair((sab) => [new Int32Array(sab, 8), new BigInt64Array(sab)], 0, 1), reached)
  add(G, 'waiter on Int32Array(sab)[3], notify BigInt64Array(sab)[1] (bytes 12 and 8)',
    pair((sab) => [new Int32Array(sab), new BigInt64Array(sab)], 3, 1), missed)
  add(G, 'two Int32Array objects over one SAB',
    pair((sab) => [new Int32Array(sab), new Int32Array(sab)], 1, 1), reached)
  waitBoth(G, 'BigInt64Array(sab, 8, 1), 0, 5n, 0 reads element 1',
    () => [new BigInt64Array(sharedI64([1n, 5n]).buffer, 8, 1), 0, 5n, 0], is('timed-out'))
}

// ---------------------------------------------------------------- run the tables
for (const [group, cases] of groups) {
  describe(group, () => {
    for (const c of cases) {
      test(c.name, async () => {
        const got = await outcome(c.run, subject)
        if (native) {
          const reference = await outcome(c.run, native)
          assert.deepStrictEqual(reference, c.expect, 'native Atomics disagrees with the table (a bug in the table)')
          assert.deepStrictEqual(got, reference, 'the module differs from native Atomics')
        }
        assert.deepStrictEqual(got, c.expect)
      })
    }
  })
}

// ---------------------------------------------------------------- function shape
describe('function shape', () => {
  const shapes = [['wait', 4], ['notify', 3], ['waitAsync', 4]]
  for (const [name, length] of shapes) {
    test(`${name}: name '${name}', length ${length}, like the native`, () => {
      const f = subject[name]
      assert.strictEqual(typeof f, 'function')
      assert.strictEqual(f.name, name)
      assert.strictEqual(f.length, length)
      if (typeof Atomics[name] === 'function') {
        assert.strictEqual(f.name, Atomics[name].name)
        assert.strictEqual(f.length, Atomics[name].length)
      }
    })
    test(`new ${name}(…) throws a TypeError before converting anything`, () => {
      const F = subject[name]
      const log = []
      const ta = sharedI32([0])
      assert.throws(() => new F(ta, logged(log, 'index', 0), logged(log, 'value', 1), 0), TypeError)
      assert.deepStrictEqual(log, [])
      if (typeof Atomics[name] === 'function') {
        const N = Atomics[name]
        assert.throws(() => new N(ta, logged(log, 'index', 0), logged(log, 'value', 1), 0), TypeError)
        assert.deepStrictEqual(log, [])
      }
    })
  }
  test('waitAsync results are plain { async, value } objects', async () => {
    const ta = sharedI32([0])
    for (const r of [subject.waitAsync(ta, 0, 1), subject.waitAsync(ta, 0, 0, 0)]) {
      assert.strictEqual(Object.getPrototypeOf(r), Object.prototype)
      assert.deepStrictEqual(Object.keys(r), ['async', 'value'])
      assert.strictEqual(r.async, false)
    }
    const pending = subject.waitAsync(ta, 0, 0)
    assert.deepStrictEqual(Object.keys(pending), ['async', 'value'])
    assert.strictEqual(pending.async, true)
    assert.ok(pending.value instanceof Promise, 'value is a native Promise')
    assert.strictEqual(subject.notify(ta, 0), 1)
    const hold = setInterval(() => {}, 1000)
    try {
      assert.strictEqual(await pending.value, 'ok')
    } finally {
      clearInterval(hold)
    }
  })
})

// ---------------------------------------------------------------- own queue
describe('setKeepAlive', () => {
  test('takes a boolean only (TypeError otherwise), and leaves the setting as it was', () => {
    const { setKeepAlive } = require('..')
    for (const v of ['false', 'true', 0, 1, null, undefined, {}, Symbol('x'), 1n]) {
      assert.throws(() => setKeepAlive(v), TypeError)
    }
    assert.strictEqual(setKeepAlive(false), false, 'still the default')
  })
})

describe("the module's queue is not V8's", () => {
  const skip = subject.kind === 'native' ? 'the subject is native Atomics'
    : native ? false : 'needs Atomics.waitAsync (Node 16+)'
  test('Atomics.notify does not wake the module\'s waiters, nor notify V8\'s', { skip }, async () => {
    const ta = sharedI32([0])
    const hold = setInterval(() => {}, 1000)
    try {
      const ours = subject.waitAsync(ta, 0, 0)
      assert.strictEqual(Atomics.notify(ta, 0), 0)
      const theirs = Atomics.waitAsync(ta, 0, 0)
      assert.strictEqual(subject.notify(ta, 0), 1)
      assert.strictEqual(Atomics.notify(ta, 0), 1)
      assert.deepStrictEqual(await Promise.all([ours.value, theirs.value]), ['ok', 'ok'])
    } finally {
      clearInterval(hold)
    }
  })
})
