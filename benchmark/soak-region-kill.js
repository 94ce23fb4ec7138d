'use strict'
// Soak: processes killed with SIGKILL at random points while they use a
// shared region, for thousands of rounds. It drives the child of
// __test__/region-kill.test.js (__test__/fixtures/region-kill-child.js),
// whose loop takes an AsyncLock, a `region.locks` lock and a wait / notify
// hand-off of the region, as that test does: three survivors run
// throughout; in each round a victim joins, runs a few turns, and is killed
// at a random moment. After every round:
//
// - the victim died of the SIGKILL, and the survivors go on (10 turns more);
// - exclusion was never broken (the holder words, fixture word 4);
// - with the survivors parked between two turns (fixture words 10 and 11):
//   the lock word is free, nobody is inside a critical section, query()
//   shows nothing held or pending, and nobody is queued on the ping word.
//
// Every --cycle rounds (and at the end) the survivors are stopped, must exit
// with code 0, the region is unlinked, and no file of it may be left in
// /dev/shm; the next cycle opens a new region with new survivors.
//
//   node benchmark/soak-region-kill.js [--rounds 3000 | --seconds S]
//                                      [--seed N] [--cycle 200]
//
// Each round has its own seed (the first is --seed, default random), which
// sets when the victim is killed; a failed round is printed with it, and
// `--seed <it> --rounds 1` runs that round again. Prints the rounds done,
// the failures and the rounds per second; exits 1 on any failure.
const fs = require('fs')
const path = require('path')
const { options } = require('./lib/args')
const { performance } = require('perf_hooks')
const { until, startChild, regionsUnsupported } = require('../__test__/util')
const { generator } = require('../__test__/fixtures/stress')

const ROOT = path.join(__dirname, '..')
const FIXTURE = path.join(ROOT, '__test__', 'fixtures', 'region-kill-child.js')
const SHM = '/dev/shm'
const SURVIVORS = 3
// Fixture words (int32, see the fixture): the lock 0-1, holder words 2 and 3,
// violations 4, turns 5, stop 6, ping 7, ownerDied 8, the victim's turns 9,
// pause 10, parked 11.
const LOCK = 0
const VIOLATIONS = 4
const TURNS = 5
const STOP = 6
const PING = 7
const OWNER_DIED = 8
const VICTIM_TURNS = 9
const PAUSE = 10
const PARKED = 11

function parse (argv) {
  const args = options(argv, {
    rounds: { int: true, min: 0, default: 3000 },
    seconds: { min: 0, default: null },
    seed: { int: true, min: 0, default: null },
    cycle: { int: true, min: 1, default: 200 }
  })
  if (args.seconds !== null) args.rounds = Infinity
  if (args.seed === null) args.seed = Math.floor(Math.random() * 0x7fffffff)
  return args
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const filesOf = (name) => fs.readdirSync(SHM).filter((f) => f.startsWith('shared-futex') && f.endsWith(`.${name}`))

// One region and its survivors, for up to `rounds` rounds.
class Cycle {
  constructor (name) {
    const { SharedRegion } = require(ROOT)
    SharedRegion.unlink(name)
    this.name = name
    this.region = SharedRegion.open(name, { bytes: 64 })
    this.w = new Int32Array(this.region.buffer)
    this.survivors = []
    for (let i = 0; i < SURVIVORS; i++) this.survivors.push(startChild(FIXTURE, [name, 'survivor'], 3600 * 1000))
  }

  async start () {
    await until(() => Atomics.load(this.w, TURNS) > 50, 'the survivors to start', 30000)
  }

  // One victim, killed `delay` ms after its third turn; then the checks.
  async round (delay) {
    const { notify } = require(ROOT)
    const binding = require('../lib/native')
    const w = this.w
    Atomics.store(w, VICTIM_TURNS, 0)
    const victim = startChild(FIXTURE, [this.name, 'victim'], 60000)
    let end = null
    victim.exited.then((e) => { end = e })
    try {
      await until(() => Atomics.load(w, VICTIM_TURNS) >= 3 || end, 'the victim to join', 30000)
      if (end) throw new Error(`the victim ended before it was killed: ${JSON.stringify(end)}`)
      await sleep(delay)
    } finally {
      victim.kill('SIGKILL')
    }
    const { signal } = await victim.exited
    if (signal !== 'SIGKILL') throw new Error(`the victim ended before it was killed: ${JSON.stringify(await victim.exited)}`)
    const after = Atomics.load(w, TURNS)
    try {
      await until(() => Atomics.load(w, TURNS) > after + 10, 'the survivors to go on after the kill', 30000)
    } catch (e) {
      throw new Error(`${e.message} (${await this.state()})`)
    }
    if (Atomics.load(w, VIOLATIONS) !== 0) throw new Error(`exclusion was broken (${Atomics.load(w, VIOLATIONS)} violations)`)
    // The survivors between two turns: the dead victim must have left nothing.
    Atomics.store(w, PAUSE, 1)
    try {
      await until(() => Atomics.load(w, PARKED) === SURVIVORS, 'the survivors to park', 30000)
      const left = []
      if (Atomics.load(w, LOCK) !== 0) left.push(`the lock word is ${Atomics.load(w, LOCK)}`)
      if (Atomics.load(w, 2) !== 0 || Atomics.load(w, 3) !== 0) left.push(`inside: pids ${Atomics.load(w, 2)}, ${Atomics.load(w, 3)}`)
      const q = await this.region.locks.query()
      if (q.held.length || q.pending.length) left.push(`query(): ${JSON.stringify(q)}`)
      const queued = binding.regionInfo(w, PING).queued
      if (queued !== 0) left.push(`${queued} queued on the ping word`)
      if (left.length) throw new Error(`left held or queued: ${left.join('; ')}`)
    } finally {
      Atomics.store(w, PAUSE, 0)
      notify(w, PAUSE)
    }
    await until(() => Atomics.load(w, PARKED) === 0, 'the survivors to go on after the pause', 30000)
  }

  // What the region shows, for a failure's message.
  async state () {
    const w = this.w
    const q = await Promise.race([this.region.locks.query(), sleep(5000).then(() => 'no answer in 5 s')])
    return `turns ${Atomics.load(w, TURNS)}, lock word ${Atomics.load(w, LOCK)}, inside: pids ${Atomics.load(w, 2)}, ${Atomics.load(w, 3)}, ` +
      `ping word ${Atomics.load(w, PING)}, query(): ${JSON.stringify(q)}`
  }

  // Stops the survivors (they must end by themselves, with code 0), unlinks
  // the region, and checks that /dev/shm has nothing of it left.
  async finish () {
    const { SharedRegion, notify } = require(ROOT)
    Atomics.store(this.w, STOP, 1)
    notify(this.w, PING)
    const timer = setTimeout(() => this.kill(), 30000)
    const ends = await Promise.all(this.survivors.map((s) => s.exited))
    clearTimeout(timer)
    const ownerDied = Atomics.load(this.w, OWNER_DIED)
    this.region.close()
    SharedRegion.unlink(this.name)
    const failures = []
    const bad = ends.filter((e) => e.code !== 0 || e.signal !== null)
    if (bad.length) failures.push(`survivors did not end cleanly: ${JSON.stringify(ends)}`)
    const files = filesOf(this.name)
    if (files.length) failures.push(`left in ${SHM}: ${files.join(', ')}`)
    return { ownerDied, failures }
  }

  kill () {
    for (const s of this.survivors) s.kill('SIGKILL')
  }
}

async function main () {
  const args = parse(process.argv.slice(2))
  const why = regionsUnsupported()
  if (why) {
    console.log(`shared regions are not supported here: ${why}`)
    return 0
  }
  const started = performance.now()
  const deadline = args.seconds === null ? Infinity : started + args.seconds * 1000
  const failures = []
  let done = 0
  let ownerDied = 0
  let cycles = 0
  let lastReport = started
  const rate = () => done / ((performance.now() - started) / 1000)
  console.log(`soak:region-kill: ${args.seconds === null ? `${args.rounds} rounds` : `${args.seconds} s`}, first seed ${args.seed}, ${SURVIVORS} survivors, a new region every ${args.cycle} rounds`)
  while (done < args.rounds && performance.now() < deadline) {
    const cycle = new Cycle(`soak-kill-${process.pid}-${++cycles}`)
    let failed = null // the failure that ended this cycle early
    try {
      await cycle.start()
      for (let k = 0; k < args.cycle && done < args.rounds && performance.now() < deadline; k++) {
        const seed = (args.seed + done) >>> 0
        const round = done++
        try {
          await cycle.round(generator(seed)() * 10)
        } catch (e) {
          failed = { round, seed, what: e.message }
          failures.push(failed)
          console.log(`FAIL round ${round} (seed ${seed}): ${e.message}`)
          break // this region's state is unknown: a new cycle
        }
        if (performance.now() - lastReport > 10000) {
          lastReport = performance.now()
          console.log(`  ${done} rounds, ${failures.length} failed, ${rate().toFixed(1)} rounds/s`)
        }
      }
    } catch (e) {
      failed = { round: done, seed: (args.seed + done) >>> 0, what: `starting a cycle: ${e.message}` }
      failures.push(failed)
      console.log(`FAIL ${failed.what}`)
    } finally {
      const end = await cycle.finish().catch((e) => ({ ownerDied: 0, failures: [e.message] }))
      ownerDied += end.ownerDied
      for (const what of end.failures) {
        // After a failed round, what the cycle's end finds belongs to it.
        if (failed) failed.what += `; then ${what}`
        else failures.push({ round: done - 1, seed: (args.seed + done - 1) >>> 0, what })
        console.log(`FAIL after round ${done - 1}: ${what}`)
      }
      cycle.kill()
    }
  }
  const seconds = (performance.now() - started) / 1000
  console.log(`${done} rounds in ${seconds.toFixed(1)} s: ${rate().toFixed(2)} rounds/s; ${failures.length} failed; ` +
    `the next holder was told ownerDied ${ownerDied} times`)
  for (const f of failures) console.log(`  round ${f.round}: ${f.what} (again: node benchmark/soak-region-kill.js --seed ${f.seed} --rounds 1)`)
  return failures.length ? 1 : 0
}

main().then((code) => { process.exitCode = code }, (e) => {
  console.error(e)
  process.exitCode = 1
})
