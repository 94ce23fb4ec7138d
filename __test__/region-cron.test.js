'use strict'
// A real program on a cross-process AsyncLock: node-cron (4.6, from the npm
// registry) under `cluster`, four workers, one RunCoordinator on a shared
// region (fixtures/region-cron.js). Every tick runs in exactly one process,
// also after the worker running a job (and holding the lock) is killed
// with SIGKILL in the middle of it.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, regionsUnsupported } = require('./util')

const MAJOR = Number(process.versions.node.split('.')[0])
const FIXTURE = path.join(__dirname, 'fixtures', 'region-cron.js')
let supported = MAJOR >= 20 && !regionsUnsupported() // node-cron 4 needs Node 20
try {
  require.resolve('node-cron')
} catch {
  supported = false
}

describe('node-cron under cluster, coordinated by a region lock', supported ? {} : { skip: 'needs Linux, Node 20+ and node-cron' }, () => {
  test('each tick runs exactly once across 4 processes, also after a SIGKILL mid-job', { timeout: 60000 }, async () => {
    const r = await runChild([FIXTURE], { timeoutMs: 45000, env: { REGION_CRON_NAME: `cron-${process.pid}`, REGION_CRON_TICKS: '6' } })
    assert.ok(!r.timedOut, `hung\n${transcript(r)}`)
    assert.strictEqual(r.code, 0, transcript(r))
    const { ticks, killed, restarted, ownerDied } = r.result
    assert.ok(killed, `the job to kill never ran\n${transcript(r)}`)
    assert.strictEqual(restarted, 1)
    assert.ok(ticks.length >= 7, `${ticks.length} runs: ${ticks}`)
    for (let i = 1; i < ticks.length; i++) {
      assert.strictEqual(ticks[i] - ticks[i - 1], 1, `tick ${ticks[i - 1]} then ${ticks[i]}: each second must run exactly once (${ticks})`)
    }
    assert.ok(ownerDied >= 1, 'the next coordinator took the dead worker\'s lock over (ownerDied)')
  })
})
