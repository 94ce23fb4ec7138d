'use strict'
// node benchmark/rwlock-threads.js [--workers 1,2,3,4] [--write-every 0] [--ms 1000] [--rounds 3]
//
// Scenario 9's loops on blocking workers only, for 1 to N of them: how
// RwLock's readers scale with the number of threads against AsyncLock (a
// mutex), and how often RwLock calls into the addon (readers past the three
// slots register there; writers and readers that must wait sleep there).
// --write-every 0 is reads only, 10 the 90 % mix of scenario 9.
// Prints, per worker count: operations/s of each lock (median of the
// rounds, interleaved), the ratio, and RwLock's addon calls per second.

const path = require('path')
const { withWorkers, go } = require('./lib/threads')
const { TABLE } = require('./lib/rw')
const { lockBuffer } = require('./lib/locks')
const { summary } = require('./lib/stats')

const WORKER = path.join(__dirname, 'workers', 'rwlock-worker.js')

function parse (argv) {
  const args = { workers: [1, 2, 3, 4], writeEvery: 0, ms: 1000, rounds: 3 }
  for (let i = 0; i < argv.length; i += 2) {
    const v = argv[i + 1]
    if (argv[i] === '--workers') args.workers = v.split(',').map(Number)
    else if (argv[i] === '--write-every') args.writeEvery = Number(v)
    else if (argv[i] === '--ms') args.ms = Number(v)
    else if (argv[i] === '--rounds') args.rounds = Number(v)
    else throw new Error(`unknown argument ${argv[i]}`)
  }
  return args
}

async function once (impl, workers, { writeEvery, ms }) {
  const lockSab = lockBuffer()
  const table = new Int32Array(new SharedArrayBuffer(4 * TABLE))
  const specs = []
  for (let i = 0; i < workers; i++) {
    specs.push({ file: WORKER, data: { impl, lockSab, table, writeEvery, ms, countCalls: impl === 'ours' } })
  }
  const { results } = await withWorkers(specs, async (ctl) => { go(ctl, 200) })
  const count = results.reduce((n, r) => n + r.count, 0)
  const writes = results.reduce((n, r) => n + r.writes, 0)
  if (table[0] !== writes) throw new Error(`lost writes: table ${table[0]}, writes ${writes}`)
  const calls = {}
  for (const r of results) for (const [k, n] of Object.entries(r.calls || {})) calls[k] = (calls[k] || 0) + n
  return { rate: count / (ms / 1000), calls }
}

const median = (xs) => summary(xs).median
const M = (x) => `${(x / 1e6).toFixed(2)}M/s`

async function main () {
  const args = parse(process.argv.slice(2))
  console.log(`RwLock and AsyncLock on blocking workers, ${args.writeEvery > 0 ? `a write every ${args.writeEvery} operations` : 'reads only'}, ${args.rounds} rounds of ${args.ms} ms`)
  for (const n of args.workers) {
    const rates = { ours: [], mutex: [] }
    const calls = []
    for (let r = 0; r < args.rounds; r++) {
      for (const impl of ['ours', 'mutex']) {
        const x = await once(impl, n, args)
        rates[impl].push(x.rate)
        if (impl === 'ours') calls.push(x.calls)
      }
    }
    const ours = median(rates.ours)
    const mutex = median(rates.mutex)
    const perSecond = {}
    for (const k of Object.keys(calls[0])) {
      const v = median(calls.map((c) => c[k])) / (args.ms / 1000)
      if (v > 0) perSecond[k] = Math.round(v)
    }
    console.log(`${n} worker${n > 1 ? 's' : ' '}  RwLock ${M(ours)}  AsyncLock ${M(mutex)}  ${(ours / mutex).toFixed(2)}×  RwLock's addon calls/s: ${JSON.stringify(perSecond)}`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
