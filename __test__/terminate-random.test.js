'use strict'
// A thread stopped at a random point of any state-changing operation of any
// primitive leaves no waiter asleep that should be awake, and nothing lost
// or counted twice (docs/robustness.md).
//
// Each scenario runs in its own child process with a hard timeout, one after
// the other (fixtures/terminate-random.js: what a round does, and why most
// rounds stop the victim with a vm timeout rather than a new worker's
// terminate()). The sleepers wait without a timeout; a deadline that only a
// stranded sleeper reaches counts it. Every round draws its own random
// points from the seed, printed with any failure; repeat a run with
//   node __test__/fixtures/terminate-random.js <scenario> <interruptions> <terminations> <seed>
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, stressRounds } = require('./util')
const { kind } = require('./subject')

const FIXTURE = path.join(__dirname, 'fixtures', 'terminate-random.js')
const HARD_TIMEOUT = 120000

// [scenario, rounds stopped by a vm timeout, rounds stopped by terminate()]
const SCENARIOS = [
  ['manual', 'ManualResetEvent set / reset', 300, 6],
  ['auto-set', 'AutoResetEvent set / reset', 300, 6],
  ['auto-wait', 'AutoResetEvent wait (timeouts, aborts) against set', 300, 6],
  ['wg', 'WaitGroup add / done', 300, 6],
  ['barrier', 'Barrier wait (the last arrival, a timeout that breaks it) / reset', 1000, 6],
  ['condition', 'Condition notifyOne / notifyAll', 300, 6],
  ['mutex-shape', 'Atomics.Condition.notify(cv, 2) under Atomics.Mutex', 300, 6],
  ['lock', 'AsyncLock lock / unlock / tryLock / lockAsync / runExclusive', 200, 6],
  ['semaphore', 'Semaphore acquire / release / tryAcquire / acquireAsync / runExclusive', 200, 6],
  ['rwlock', 'RwLock read / write / try / async forms (terminated only: see the fixture)', 0, 12],
  ['once', 'Once run / runAsync (stopped inside fn or around it)', 0, 10]
]

const moduleOnly = kind === 'module' ? {} : { skip: 'the primitives are the module\'s' }

describe('a thread stopped at a random point strands nobody (child processes)', moduleOnly, () => {
  const totals = { rounds: 0, stranded: 0 }
  for (const [name, what, fullInterruptions, fullTerminations] of SCENARIOS) {
    const interruptions = stressRounds(fullInterruptions)
    const terminations = stressRounds(fullTerminations)
    test(`${what}`, { timeout: HARD_TIMEOUT + 10000 }, async (t) => {
      const seed = Math.floor(Math.random() * 1e9)
      const r = await runChild([FIXTURE, name, String(interruptions), String(terminations), String(seed)], { timeoutMs: HARD_TIMEOUT })
      assert.ok(!r.timedOut && r.code === 0 && r.result, `seed ${seed}: ${transcript(r)}`)
      const res = r.result
      const rounds = res.rounds.interrupt + res.rounds.terminate
      totals.rounds += rounds
      totals.stranded += res.stranded
      const line = `${name}: ${rounds} rounds (${res.rounds.interrupt} interrupted, ${res.rounds.terminate} terminated), ` +
        `${res.stranded} stranded, ${res.violated} violations, ${res.ms} ms, seed ${seed}; ` +
        `so far ${totals.rounds} rounds, ${totals.stranded} stranded`
      if (typeof t.diagnostic === 'function') t.diagnostic(line)
      assert.deepStrictEqual(res.errors, [], `seed ${seed}: errors in the child\n${transcript(r)}`)
      assert.deepStrictEqual({ stranded: res.strandedRounds, violations: res.violations }, { stranded: [], violations: [] },
        `seed ${seed}: ${line}`)
      assert.deepStrictEqual(res.rounds, { interrupt: interruptions, terminate: terminations }, 'every round ran')
    })
  }
})
