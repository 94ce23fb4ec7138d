'use strict'
// Scenario 8: the cost of one call that does not block, on one thread,
// nobody else around: what a producer's `notify` after every item, or a
// consumer's polling `wait` that usually answers 'not-equal', pays per call.
// Baseline: V8's Atomics. Figure: nanoseconds per call.
//
// Measured with tinybench: a task is a batch of BATCH calls; the round's
// figure is the median batch time / BATCH. Every (row, implementation) gets
// its own compiled function, so no call site sees another's type feedback.

const { futex } = require('../lib/impl')
const { nsPerOp } = require('../lib/batches')

const BATCH = 1000

async function bench (name, fn, opts) {
  return { ns: await nsPerOp(name, fn, BATCH, opts) }
}

function cells (big) {
  const sab = new SharedArrayBuffer(64)
  return big ? new BigInt64Array(sab) : new Int32Array(sab)
}

// Each row: the body of one call, over `f` (wait/notify/waitAsync), `ta`,
// and the expected value `v` that differs from ta[0] (which stays 0).
const ROWS = [
  { id: 'notify-i32', label: 'notify, nobody waiting (Int32Array)', big: false, body: 'f.notify(ta, 0, 1)' },
  { id: 'notify-i64', label: 'notify, nobody waiting (BigInt64Array)', big: true, body: 'f.notify(ta, 0, 1)' },
  { id: 'wait-ne-i32', label: "wait → 'not-equal' (Int32Array)", big: false, body: 'f.wait(ta, 0, v)' },
  { id: 'wait-ne-i64', label: "wait → 'not-equal' (BigInt64Array)", big: true, body: 'f.wait(ta, 0, v)' },
  { id: 'wait-t0', label: "wait, timeout 0 → 'timed-out'", big: false, body: 'f.wait(ta, 0, 0, 0)' },
  { id: 'async-ne-i32', label: "waitAsync → 'not-equal' (Int32Array)", big: false, body: 'f.waitAsync(ta, 0, v)' },
  { id: 'async-ne-i64', label: "waitAsync → 'not-equal' (BigInt64Array)", big: true, body: 'f.waitAsync(ta, 0, v)' },
  { id: 'async-t0', label: "waitAsync, timeout 0 → 'timed-out'", big: false, body: 'f.waitAsync(ta, 0, 0, 0)' },
  // One pending waitAsync queued and then woken by a notify of count 1: the
  // promise settles later, outside the measured batch.
  { id: 'wake-one', label: 'waitAsync + notify that wakes it', big: false, body: 'f.waitAsync(ta, 0, 0); f.notify(ta, 0, 1)' }
]

// One compiled task per (row, implementation): the source names both, so
// the compilation cache cannot hand one function to two of them.
function task (row, impl) {
  const ta = cells(row.big)
  const v = row.big ? 1n : 1
  const make = new Function('f', 'ta', 'v', 'BATCH', // eslint-disable-line no-new-func
    `// per-call ${row.id} ${impl}\nreturn function () { for (let i = 0; i < BATCH; i++) { ${row.body} } }`)
  return make(futex(impl), ta, v, BATCH)
}

const made = {}
function measurer (row) {
  return (impl, opts) => {
    const key = `${row.id} ${impl}`
    if (!made[key]) made[key] = task(row, impl)
    return bench(key, made[key], opts)
  }
}

const METRICS = [{ name: 'ns', label: 'time per call', unit: 'ns', better: 'lower' }]

const cases = ROWS.map((row) => ({
  id: `8-${row.id}`,
  label: row.label,
  impls: ['ours', 'native'],
  metrics: METRICS,
  measure: measurer(row)
}))

// Target: at most V8's time for every call that does not block; waking one
// waiter (queue + notify here) at most 1.5× V8's.
const comparisons = ROWS.map((row) => ({
  case: `8-${row.id}`,
  metric: 'ns',
  ours: 'ours',
  base: 'native',
  ratio: 'ours/base',
  op: '<=',
  target: row.id === 'wake-one' ? 1.5 : 1,
  label: 'time, ours ÷ V8'
}))

module.exports = {
  id: '8',
  title: 'Per-call cost, nothing blocks',
  available: () => (typeof Atomics.waitAsync === 'function' ? null : 'this Node has no Atomics.waitAsync'),
  cases,
  comparisons
}
