'use strict'
// A Channel's producer, consumer or closer terminated at a random point
// strands no waiter (none of which has a timeout, and none of which looks
// again on a timer) and loses or doubles no message (docs/channel.md, "Why
// nobody sleeps through a death").
//
// Each scenario runs in its own child process with a hard timeout
// (fixtures/channel-terminate.js: what a round does). Every round draws its
// random points from the seed, printed with any failure; repeat a run with
//   node __test__/fixtures/channel-terminate.js <scenario> <rounds> <seed>
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, stressRounds } = require('./util')
const { kind } = require('./subject')

const FIXTURE = path.join(__dirname, 'fixtures', 'channel-terminate.js')
const HARD_TIMEOUT = 120000

const SCENARIOS = [
  ['producer', 'a sender terminated at a random point, receivers asleep', 40],
  ['consumer', 'a receiver terminated at a random point among receivers', 40],
  ['sender-sleepers', 'a receiver terminated at a random point, senders asleep on a small ring', 40],
  ['close', 'close() terminated at a random point, receivers and senders asleep', 40],
  ['woken-receiver', 'the receiver a send woke, terminated before, while or after it takes the message', 80]
]

const moduleOnly = kind === 'module' ? {} : { skip: 'the Channel is the module\'s' }

describe('Channel: a thread terminated at a random point strands nobody (child processes)', moduleOnly, () => {
  for (const [name, what, full] of SCENARIOS) {
    const rounds = stressRounds(full)
    test(what, { timeout: HARD_TIMEOUT + 10000 }, async (t) => {
      const seed = Math.floor(Math.random() * 1e9)
      const r = await runChild([FIXTURE, name, String(rounds), String(seed)], { timeoutMs: HARD_TIMEOUT })
      assert.ok(!r.timedOut && r.code === 0 && r.result, `seed ${seed}: ${transcript(r)}`)
      const res = r.result
      if (typeof t.diagnostic === 'function') t.diagnostic(`${name}: ${res.rounds} rounds, ${res.stranded} stranded, ${res.ms} ms, seed ${seed}`)
      assert.deepStrictEqual(res.errors, [], `seed ${seed}: errors in the child\n${transcript(r)}`)
      assert.deepStrictEqual({ stranded: res.strandedRounds, violations: res.violations }, { stranded: [], violations: [] }, `seed ${seed}`)
    })
  }
})
