'use strict'
// Messages between two processes: shared-futex's Channel in a SharedRegion
// against a Unix domain socket, side by side in one run. A producer process
// sends 16-byte messages as fast as it can, a consumer process takes them
// one by one (benchmark/children/channel-process.js).
//
//   node benchmark/channel-processes.js [--ms 1000] [--warmup 250] [--rounds 3]
//        [--loads idle,busy] [--only channel,channel-async,unix-socket] [--json file]
//   npm run bench:channel-processes
//
// Implementations (`--only`):
//   channel        Channel over a region, 'bytes' codec, 64 KiB ring:
//                  blocking send / blocking recv
//   channel-async  the same channel: `await sendAsync` / `for await`
//   unix-socket    `net` over a Unix domain socket, each message with a
//                  4-byte length in front, written one socket.write per
//                  message (waiting for 'drain'), cut out of each 'data'
//                  chunk: what an application that frames its messages does
//
// Figure: messages/s the consumer took over --ms after --warmup. Each
// implementation is measured --rounds times, rounds interleaved, and the
// table shows medians (and the range). Everything runs on the idle machine
// and again with one busy process per core spinning beside it
// (lib/spinners.js). Every child exits by itself after a limit and is killed
// if it does not; regions and socket files are removed at the end.
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn } = require('child_process')
const { SharedRegion } = require('..')
const { figure } = require('./lib/format')
const { machine, describe } = require('./lib/machine')
const { startSpinners, stopSpinners } = require('./lib/spinners')

const CHILD = path.join(__dirname, 'children', 'channel-process.js')
const IMPLS = {
  channel: 'Channel in a SharedRegion, blocking send / recv',
  'channel-async': 'Channel in a SharedRegion, await sendAsync / for await',
  'unix-socket': 'Unix domain socket (net), length-prefixed, one write per message'
}

function parse (argv) {
  const args = { ms: 1000, warmup: 250, rounds: 3, loads: ['idle', 'busy'], only: Object.keys(IMPLS), json: null }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--ms') args.ms = Number(next())
    else if (a === '--warmup') args.warmup = Number(next())
    else if (a === '--rounds') args.rounds = Number(next())
    else if (a === '--loads') args.loads = next().split(',')
    else if (a === '--only') args.only = next().split(',')
    else if (a === '--json') args.json = next()
    else throw new Error(`unknown argument ${a}`)
  }
  for (const x of args.only) if (!IMPLS[x]) throw new Error(`unknown implementation ${x} (known: ${Object.keys(IMPLS).join(', ')})`)
  for (const l of args.loads) if (l !== 'idle' && l !== 'busy') throw new Error(`unknown load ${l} (idle, busy)`)
  if (!(args.ms > 0) || !(args.warmup >= 0) || !(args.rounds >= 1)) throw new Error('bad --ms, --warmup or --rounds')
  return args
}

const live = new Set()
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'channel-processes-'))
let regions = 0
function cleanup () {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
  for (let i = 1; i <= regions; i++) SharedRegion.unlink(`bench-channel-${process.pid}-${i}`)
  fs.rmSync(dir, { recursive: true, force: true })
}
process.on('exit', cleanup)
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130))

function start (args, limitMs) {
  const child = spawn(process.execPath, [CHILD, ...args, String(limitMs)], { stdio: ['ignore', 'pipe', 'inherit'] })
  live.add(child)
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  const timer = setTimeout(() => child.kill('SIGKILL'), limitMs + 5000)
  child.ended = new Promise((resolve) => child.on('close', (code, signal) => {
    clearTimeout(timer)
    live.delete(child)
    resolve({ code, signal, out })
  }))
  child.line = (text) => new Promise((resolve, reject) => {
    const look = () => { if (out.includes(text)) resolve() }
    child.stdout.on('data', look)
    child.ended.then(() => reject(new Error(`the ${args[1]} exited before "${text}": ${out}`)))
    look()
  })
  return child
}

// One measurement: messages/s.
async function measure (impl, opts) {
  let where
  if (impl === 'unix-socket') {
    where = path.join(dir, `s${++regions}.sock`)
  } else {
    where = `bench-channel-${process.pid}-${++regions}`
    SharedRegion.unlink(where)
  }
  const limit = opts.warmup + opts.ms + 10000
  const common = [where, String(opts.warmup), String(opts.ms)]
  const consumer = start([impl, 'consumer', ...common], limit)
  await consumer.line('ready')
  const producer = start([impl, 'producer', ...common], limit)
  const r = await consumer.ended
  const p = await Promise.race([producer.ended, new Promise((resolve) => setTimeout(resolve, 3000))])
  if (p === undefined) producer.kill('SIGKILL')
  if (impl !== 'unix-socket') SharedRegion.unlink(where)
  if (r.code !== 0) throw new Error(`${impl}: the consumer exited with ${r.code} ${r.signal}: ${r.out}`)
  return JSON.parse(r.out.split('\n').find((l) => l.startsWith('{'))).rate
}

const median = (xs) => {
  const s = xs.slice().sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

async function main () {
  const opts = parse(process.argv.slice(2))
  console.log('Messages between two processes: Channel in a SharedRegion vs a Unix domain socket')
  console.log(describe(machine()))
  console.log(`16-byte messages, ${opts.rounds} rounds of ${opts.ms} ms after ${opts.warmup} ms of warm-up, medians (range)\n`)
  const results = {}
  for (const load of opts.loads) {
    results[load] = {}
    for (const impl of opts.only) results[load][impl] = []
    for (let round = 0; round < opts.rounds; round++) {
      for (const impl of opts.only) {
        const spinners = load === 'busy' ? await startSpinners(opts.warmup + opts.ms + 5000) : []
        try {
          results[load][impl].push(await measure(impl, opts))
        } finally {
          await stopSpinners(spinners)
        }
      }
    }
    for (const impl of opts.only) {
      const xs = results[load][impl]
      console.log(`${load.padEnd(5)} ${IMPLS[impl].padEnd(66)} ${figure(median(xs), '/s').padStart(9)}  (${figure(Math.min(...xs), '/s')} – ${figure(Math.max(...xs), '/s')})`)
    }
    if (results[load]['unix-socket'] !== undefined) {
      const base = median(results[load]['unix-socket'])
      for (const impl of opts.only) {
        if (impl === 'unix-socket') continue
        console.log(`${load.padEnd(5)} ${(IMPLS[impl] + ' ÷ Unix socket').padEnd(66)} ${(median(results[load][impl]) / base).toFixed(2).padStart(8)}×  (target ≥ 5×)`)
      }
    }
    console.log('')
  }
  if (opts.json !== null) fs.writeFileSync(opts.json, JSON.stringify({ machine: machine(), opts, results }, null, 2))
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
