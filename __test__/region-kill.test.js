'use strict'
// Processes killed with SIGKILL at random points while they use a region:
// an AsyncLock, region.locks and wait / notify, all in one loop
// (fixtures/region-kill-child.js). Three processes run throughout; in each
// round a fourth joins, runs a random while, and is killed. After every
// kill the survivors go on (nobody stranded), exclusion is never broken
// (holder words), and at the end nothing is left held, pending or queued.
// Rounds scale with SHARED_FUTEX_STRESS_SCALE (`npm test` runs them all).
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { until, stressRounds, startChild, regionSkip } = require('./util')
const binding = require('../lib/native')
const { SharedRegion, notify } = require('..')

const FIXTURE = path.join(__dirname, 'fixtures', 'region-kill-child.js')
const skip = regionSkip()

const child = (name, role) => startChild(FIXTURE, [name, role || 'survivor'], 120000)

describe('processes killed at random points (SIGKILL) while using a region', skip, () => {
  test('survivors always go on; exclusion holds; nothing is left held or queued', { timeout: 300000 }, async () => {
    const name = `kill${process.pid}`
    SharedRegion.unlink(name)
    const region = SharedRegion.open(name, { bytes: 64 })
    const w = new Int32Array(region.buffer)
    const survivors = [0, 1, 2].map(() => child(name))
    const rounds = stressRounds(200)
    try {
      await until(() => Atomics.load(w, 5) > 50, 'the survivors to start', 30000)
      for (let round = 0; round < rounds; round++) {
        Atomics.store(w, 9, 0)
        const victim = child(name, 'victim')
        // Killed once it has done a few turns, at a random point of its loop.
        await until(() => Atomics.load(w, 9) >= 3, `round ${round}: the victim to join`, 30000)
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 10))
        victim.kill('SIGKILL')
        await victim.exited
        const after = Atomics.load(w, 5)
        await until(() => Atomics.load(w, 5) > after + 10, `round ${round}: the survivors to go on after the kill`, 30000)
        assert.strictEqual(Atomics.load(w, 4), 0, `round ${round}: exclusion was broken`)
      }
      Atomics.store(w, 6, 1)
      notify(w, 7)
      const ends = await Promise.all(survivors.map((s) => s.exited))
      assert.deepStrictEqual(ends, ends.map(() => ({ code: 0, signal: null })))
      assert.strictEqual(Atomics.load(w, 4), 0)
      assert.strictEqual(Atomics.load(w, 0), 0, 'the lock is free')
      assert.deepStrictEqual(await region.locks.query(), { held: [], pending: [] })
      assert.strictEqual(binding.regionInfo(w, 7).queued, 0, 'no waiter queued')
      // How often a kill landed inside the AsyncLock's critical section.
      console.log(`# ${rounds} kills; the next holder was told ownerDied ${Atomics.load(w, 8)} times`)
    } finally {
      for (const s of survivors) s.kill('SIGKILL')
      SharedRegion.unlink(name)
    }
  })
})
