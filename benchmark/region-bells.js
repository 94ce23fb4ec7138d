'use strict'
// The async cross-process wake-up with and without bells, side by side:
//   node benchmark/region-bells.js [--rounds N] [--ms N] [--where busy,idle]
//
// Scenario 13's async ping-pongs (benchmark/scenarios/region-pingpong.js):
// this process's main thread `await`s waitAsync on a SharedRegion while a
// child process answers with a blocking wait / notify; against the same
// ping-pong within one process (main thread ↔ worker) and a Unix domain
// socket. The cross-process case is measured twice in each round: with
// bells (the waiting thread's event loop hears the notify directly, one
// hand-off) and with SHARED_FUTEX_NO_BELLS=1 (the process's doorbell
// thread, then the event loop: two hand-offs). Every measurement runs in a
// fresh process (the variable is read once per process), one after the
// other, in alternation, N rounds of each (default 10); `busy` (the
// default) with one spinning process per core from the first measurement
// to the last, `idle` without (scenario 13 measures both; bells were made
// for the busy machine).
//
// Prints each variant's round trip (median and every round) and the
// ratios of the medians. The figures are means over --ms of one round trip
// after a 300 ms warm-up.

const os = require('os')
const { execFileSync } = require('child_process')
const { options } = require('./lib/args')
const { summary } = require('./lib/stats')
const { startSpinners, stopSpinners } = require('./lib/spinners')

const VARIANTS = [
  { impl: 'in-process async', label: 'in-process async' },
  { impl: 'cross-process async', label: 'cross-process async, bells' },
  { impl: 'cross-process async', label: 'cross-process async, no bells', env: { SHARED_FUTEX_NO_BELLS: '1' } },
  { impl: 'unix socket', label: 'unix socket' }
]

async function one (impl, ms) {
  const { IMPLS } = require('./scenarios/region-pingpong')
  const r = await IMPLS[impl]({ warmMs: 300, ms })
  process.stdout.write(JSON.stringify(r) + '\n')
}

const median = (xs) => summary(xs).median

async function measure (busy, rounds, ms) {
  const spinners = busy ? await startSpinners(rounds * VARIANTS.length * (ms + 3000) + 60000) : null
  const rtt = VARIANTS.map(() => [])
  try {
    for (let i = 0; i < rounds; i++) {
      VARIANTS.forEach((v, k) => {
        const env = Object.assign({}, process.env, v.env || {})
        if (!v.env) delete env.SHARED_FUTEX_NO_BELLS
        const out = execFileSync(process.execPath, [__filename, '--one', v.impl, '--ms', String(ms)], { env, timeout: ms + 60000 })
        rtt[k].push(JSON.parse(String(out).trim().split('\n').pop()).rttUs)
      })
    }
  } finally {
    if (spinners) await stopSpinners(spinners)
  }
  const where = busy ? `one busy process per core (${os.cpus().length})` : 'idle machine'
  console.log(`round trip (µs), ${rounds} rounds of ${ms} ms, ${where}, Node ${process.version}`)
  VARIANTS.forEach((v, k) => {
    console.log(`  ${v.label.padEnd(32)} median ${median(rtt[k]).toFixed(1).padStart(6)}   rounds ${rtt[k].map((x) => x.toFixed(1)).join(' ')}`)
  })
  const m = rtt.map(median)
  console.log(`  cross-process async ÷ in-process async: bells ${(m[1] / m[0]).toFixed(2)}×, no bells ${(m[2] / m[0]).toFixed(2)}× (target ≤ 1.5×)`)
  console.log(`  round trips/s, cross-process async ÷ unix socket: bells ${(m[3] / m[1]).toFixed(2)}×, no bells ${(m[3] / m[2]).toFixed(2)}×`)
}

async function main () {
  const args = options(process.argv.slice(2), {
    rounds: { int: true, min: 1, default: 10 },
    ms: { int: true, min: 100, default: 1000 },
    where: { list: ['busy', 'idle'], default: ['busy'] },
    one: { string: true, default: null }
  })
  if (args.one) return one(args.one, args.ms)
  for (const where of args.where) await measure(where === 'busy', args.rounds, args.ms)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
