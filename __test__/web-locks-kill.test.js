'use strict'
// Web Locks: a thread stopped at a random point strands nobody. A holder
// thread that ends releases its locks and the next request is granted; its
// pending requests vanish; a callback that throws releases; no two holders
// at once where the spec allows one (docs/web-locks.md, "Threads that end").
//
// Each scenario runs in its own child process with a hard timeout, one after
// the other (fixtures/web-locks-kill.js: what a round does; the victim's
// steps and the in-section check are in fixtures/web-locks-kill-steps.js).
// Its victim is stopped either by a vm timeout, in a worker that lives on
// (nothing gives back what it holds: the library must not leave a lock held
// or a request queued for ever because its own JavaScript was stopped
// between two steps), or by worker.terminate(). The sleepers wait without a
// timeout; a deadline that only a stranded round reaches counts it. Every
// round draws its own random points from the seed, printed with any
// failure; repeat a run with
//   node __test__/fixtures/web-locks-kill.js <scenario> <interruptions> <terminations> <seed>
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, stressRounds } = require('./util')
const { kind } = require('./subject')

const FIXTURE = path.join(__dirname, 'fixtures', 'web-locks-kill.js')
const HARD_TIMEOUT = 120000

// [scenario, vm-timeout rounds, terminate() rounds]. A requestSync stopped by
// a vm timeout keeps its lock until its thread's event loop turns (its sweep,
// lib/web-locks.js): the victim lets its loop run after each stop.
const SCENARIOS = [
  ['request', 500, 40],
  ['request-sync', 200, 40],
  ['steal', 200, 40],
  ['mixed', 200, 40]
]

const moduleOnly = kind === 'module' ? {} : { skip: 'Web Locks are the module\'s' }

async function run (t, name, interruptions, terminations) {
  const seed = Math.floor(Math.random() * 1e9)
  const r = await runChild([FIXTURE, name, String(interruptions), String(terminations), String(seed)], { timeoutMs: HARD_TIMEOUT })
  assert.ok(!r.timedOut && r.code === 0 && r.result, `seed ${seed}: ${transcript(r)}`)
  const res = r.result
  const rounds = res.rounds.interrupt + res.rounds.terminate
  const line = `${name}: ${rounds} rounds (${res.rounds.interrupt} interrupted, ${res.rounds.terminate} terminated), ` +
    `${res.stranded} stranded, ${res.overlaps} overlaps, ${res.unresolved} unresolved, ${res.ms} ms, seed ${seed}`
  if (typeof t.diagnostic === 'function') t.diagnostic(line)
  assert.deepStrictEqual(res.errors, [], `seed ${seed}: errors in the child\n${transcript(r)}`)
  assert.deepStrictEqual({ stranded: res.strandedRounds, violations: res.violations }, { stranded: [], violations: [] },
    `seed ${seed}: ${line}`)
  assert.deepStrictEqual(res.rounds, { interrupt: interruptions, terminate: terminations }, 'every round ran')
}

// request() stopped anywhere by a vm timeout, the thread living on: each of
// a worker's requests on a fresh name is granted at once, so every stop
// lands in a request being made (fixtures/web-locks-vm-requests.js).
const VM_REQUESTS = path.join(__dirname, 'fixtures', 'web-locks-vm-requests.js')
describe('Web Locks: a thread stopped at a random point strands nobody (child processes)', moduleOnly, () => {
  for (const mode of ['exclusive', 'shared', 'mixed']) {
    const stops = stressRounds(300)
    test(`request() stopped by a vm timeout, ${mode} requests granted at once: nothing left held or queued (${stops} stops)`, { timeout: HARD_TIMEOUT + 10000 }, async () => {
      const r = await runChild([VM_REQUESTS, mode, String(stops)], { timeoutMs: HARD_TIMEOUT })
      assert.ok(!r.timedOut && r.code === 0 && r.result, transcript(r))
      assert.ok(r.result.requests > r.result.rounds, `requests were made: ${JSON.stringify(r.result)}`)
      assert.strictEqual(r.result.stranded, 0, `rounds that left a lock or request: ${JSON.stringify(r.result)}`)
    })
  }

  for (const [name, interruptions, terminations] of SCENARIOS) {
    test(`${name}: the victim's worker terminated`, { timeout: HARD_TIMEOUT + 10000 }, (t) =>
      run(t, name, 0, stressRounds(terminations)))
    test(`${name}: the victim stopped by a vm timeout, living on`, { timeout: HARD_TIMEOUT + 10000 }, (t) =>
      run(t, name, stressRounds(interruptions), 0))
  }
})
