'use strict'
// A real program on a cross-process Semaphore (fixtures/region-semaphore-pg.js):
// a `cluster` app of 4 workers, 12 jobs at once in each, against a real
// PostgreSQL server (scripts/pg-cluster.js starts a throwaway one) with `pg`,
// capped at 3 connections from the whole machine by one Semaphore in a
// SharedRegion. PostgreSQL itself, sampled meanwhile, must never see more.
// Skipped, with the reason, where regions, PostgreSQL or `pg` are absent.
const assert = require('assert')
const path = require('path')
const { test, describe, before, after } = require('./harness')
const { runChild, transcript, regionsUnsupported, postgresUnavailable, PG_CLUSTER } = require('./util')

const FIXTURE = path.join(__dirname, 'fixtures', 'region-semaphore-pg.js')
const why = postgresUnavailable() || regionsUnsupported()
const skip = why ? { skip: `cannot run here: ${why}` } : {}

describe('a cluster app capped at 3 PostgreSQL connections by a region Semaphore', skip, () => {
  let cluster = null
  before(async () => {
    cluster = await require(PG_CLUSTER).startPostgres()
  })
  after(async () => {
    if (cluster !== null) await cluster.stop()
  })

  test('48 jobs of 4 processes all run, and PostgreSQL never sees more than 3 of their connections', { timeout: 90000 }, async () => {
    const r = await runChild([FIXTURE], {
      timeoutMs: 60000,
      env: { SEM_PG_REGION: `sem-pg-${process.pid}`, SEM_PG_URL: cluster.connectionString }
    })
    assert.ok(!r.timedOut, `hung\n${transcript(r)}`)
    assert.strictEqual(r.code, 0, transcript(r))
    const { jobs, expected, maxSeen, samples, maxInside, limit, permits, codes } = r.result
    console.log(`# ${jobs} jobs; PostgreSQL sampled ${samples} times, at most ${maxSeen} connections of the app at once; at most ${maxInside} jobs inside`)
    assert.deepStrictEqual(codes, [0, 0, 0, 0], transcript(r))
    assert.strictEqual(jobs, expected, 'every job ran')
    assert.ok(samples > 0, 'PostgreSQL was sampled')
    assert.ok(maxSeen >= 1 && maxSeen <= limit, `PostgreSQL saw ${maxSeen} of the app's connections at once (cap ${limit})`)
    assert.ok(maxInside >= 1 && maxInside <= limit, `${maxInside} jobs held a permit at once (cap ${limit})`)
    assert.strictEqual(permits, limit, 'every permit came back')
  })
})
