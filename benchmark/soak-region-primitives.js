'use strict'
// Soak: processes killed with SIGKILL at random points of Semaphore and
// RwLock loops over a shared region, for thousands of rounds. It drives
// the child of __test__/region-primitives.test.js
// (__test__/fixtures/region-primitives-child.js: a main thread and two
// workers per process), as that test's random-kill tests do: two survivors
// run throughout; in each round a victim joins, runs a few turns, and is
// killed at a random moment. It checks:
//
// - every round: the survivors go on (the turns move), and nobody ever saw
//   more holders than permits, or a writer beside anyone (the fixture's
//   seats, which a dead process's pid leaves free);
// - every --cycle rounds (and at the end), with every process stopped: the
//   semaphore's permits are all back (a fresh acquirer gets all of them and
//   no more), the RwLock has no reader left and gives its write lock; then
//   the region is unlinked and no file of it is left in /dev/shm.
//
//   node benchmark/soak-region-primitives.js [--rounds 2000] [--cycle 100]
//                                            [--only semaphore|rwlock]
//
// Prints the rounds done per primitive, failures, rounds per second; exits
// 1 on any failure.
const fs = require('fs')
const path = require('path')
const { options } = require('./lib/args')
const { performance } = require('perf_hooks')
const { until, startChild, regionsUnsupported } = require('../__test__/util')

const ROOT = path.join(__dirname, '..')
const FIXTURE = path.join(ROOT, '__test__', 'fixtures', 'region-primitives-child.js')
const { SharedRegion, Semaphore, RwLock, ACQUIRED, OWNER_DIED } = require(ROOT)
const SHM = '/dev/shm'
const { AT, ERRORS, TURNS, PERMITS, WANTED } = require('../__test__/fixtures/region-primitives-layout')
const HARD_TIMEOUT = 600000

function parse (argv) {
  return options(argv, {
    rounds: { int: true, min: 1, default: 2000 },
    cycle: { int: true, min: 1, default: 100 },
    only: { list: ['semaphore', 'rwlock'], default: null }
  })
}

// One cycle of `rounds` rounds on a fresh region; failures as strings.
async function cycle (kind, rounds, n) {
  const name = `soak-prim-${process.pid}-${n}`
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes: 512 })
  const w = new Int32Array(region.buffer)
  const failures = []
  const role = kind === 'semaphore' ? 'sem-loop' : 'rw-loop'
  if (kind === 'semaphore') {
    new Semaphore(region.buffer, AT.Semaphore, 2) // eslint-disable-line no-new
    Atomics.store(w, PERMITS, 2)
    Atomics.store(w, WANTED, 1)
  }
  const survivors = [0, 1].map((k) => startChild(FIXTURE, [role, name, '-1', String(k)], HARD_TIMEOUT))
  for (let r = 0; r < rounds; r++) {
    const victim = startChild(FIXTURE, [role, name, '-1', String(2 + (r % 14))], HARD_TIMEOUT)
    const start = Atomics.load(w, TURNS)
    const runs = 5 + Math.floor(Math.random() * 60)
    try {
      await until(() => Atomics.load(w, TURNS) > start + runs, 'the victim and survivors to run', 30000)
    } catch (e) {
      failures.push(`${kind} round ${r}: ${e.message} (turns ${Atomics.load(w, TURNS)})`)
    }
    victim.kill('SIGKILL')
    await victim.exited
    const after = Atomics.load(w, TURNS)
    try {
      await until(() => Atomics.load(w, TURNS) > after + 10, 'the survivors to go on', 30000)
    } catch (e) {
      failures.push(`${kind} round ${r}: after the kill, ${e.message}`)
    }
  }
  for (const s of survivors) s.kill('SIGKILL')
  await Promise.all(survivors.map((s) => s.exited))
  if (Atomics.load(w, ERRORS) !== 0) failures.push(`${kind}: exclusion broken ${Atomics.load(w, ERRORS)} times`)
  if (kind === 'semaphore') {
    const sem = new Semaphore(region.buffer, AT.Semaphore)
    let all = false
    try {
      sem.acquire({ permits: 2, timeout: 5000 })
      all = true
    } catch (e) {
      failures.push(`semaphore: the permits did not come back (${sem.value} free)`)
    }
    if (all) {
      if (sem.tryAcquire(1)) failures.push('semaphore: a permit counted twice')
      sem.release(2)
    }
  } else {
    const rw = new RwLock(region.buffer, AT.RwLock)
    let status = null
    try {
      status = rw.write(5000)
    } catch (e) {
      failures.push(`rwlock: the write lock did not come (${e.message})`)
    }
    if (status === ACQUIRED || status === OWNER_DIED) {
      if (rw.readers !== 0) failures.push(`rwlock: ${rw.readers} readers left`)
      rw.writeUnlock()
    }
  }
  region.close()
  SharedRegion.unlink(name)
  const left = fs.readdirSync(SHM).filter((f) => f.includes(name))
  if (left.length !== 0) failures.push(`${kind}: files left in ${SHM}: ${left.join(', ')}`)
  return failures
}

async function main () {
  const args = parse(process.argv.slice(2))
  const why = regionsUnsupported()
  if (why) {
    console.log(`skipped: shared regions are not supported here (${why})`)
    return
  }
  const kinds = args.only || ['semaphore', 'rwlock']
  const failures = []
  const started = performance.now()
  let done = 0
  for (const kind of kinds) {
    for (let n = 0; n * args.cycle < args.rounds; n++) {
      const rounds = Math.min(args.cycle, args.rounds - n * args.cycle)
      failures.push(...await cycle(kind, rounds, n))
      done += rounds
      const seconds = (performance.now() - started) / 1000
      console.log(`  ${kind}: ${(n * args.cycle) + rounds} rounds, ${failures.length} failed, ${(done / seconds).toFixed(1)} rounds/s`)
    }
  }
  for (const f of failures) console.log(`FAILED ${f}`)
  console.log(`${done} rounds (${kinds.join(', ')}), ${failures.length} failures, ${((performance.now() - started) / 1000).toFixed(1)} s`)
  if (failures.length !== 0) process.exitCode = 1
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
