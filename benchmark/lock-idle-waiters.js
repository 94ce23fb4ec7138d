'use strict'
// CPU spent by idle lock waiters: a worker holds an AsyncLock and never lets
// go; the main thread queues --waiters lockAsync (default 200) and then does
// nothing for --seconds (default 5). Printed: the process's CPU time over
// that window as a share of one CPU, and how many times a waiter woke and
// queued again (calls of the addon's lockWaitAsync): none, since nobody polls
// the owner.
//
//   node benchmark/lock-idle-waiters.js [--waiters 200] [--seconds 5]
//
// Report only: the figure depends on the machine and its load.
const path = require('path')
const { Worker } = require('worker_threads')

const ROOT = path.join(__dirname, '..')

function parse (argv) {
  const args = { waiters: 200, seconds: 5 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--waiters') args.waiters = Number(argv[++i])
    else if (a === '--seconds') args.seconds = Number(argv[++i])
    else throw new Error(`unknown argument ${a}`)
  }
  return args
}

async function main () {
  const args = parse(process.argv.slice(2))
  const { AsyncLock } = require(ROOT)
  let looks = 0
  const binding = require(path.join(ROOT, 'lib', 'native'))
  const counted = typeof binding.lockWaitAsync === 'function'
  if (counted) {
    const lockWaitAsync = binding.lockWaitAsync
    binding.lockWaitAsync = function () {
      looks++
      return lockWaitAsync.apply(this, arguments)
    }
  }

  const lock = new AsyncLock()
  const holder = new Worker(`
    const { workerData, parentPort } = require('worker_threads')
    const { AsyncLock } = require(${JSON.stringify(ROOT)})
    new AsyncLock(workerData).lock()
    parentPort.postMessage('locked')
    setInterval(() => {}, 1 << 30)
  `, { eval: true, workerData: lock.buffer })
  await new Promise((resolve) => holder.once('message', resolve))

  const aborts = []
  const pending = []
  for (let i = 0; i < args.waiters; i++) {
    const ac = new AbortController()
    aborts.push(ac)
    pending.push(lock.lockAsync({ signal: ac.signal }).catch(() => {}))
  }
  // Let every waiter settle into its sleep.
  await new Promise((resolve) => setTimeout(resolve, 200))

  const looksBefore = looks
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  await new Promise((resolve) => setTimeout(resolve, args.seconds * 1000))
  const cpu = process.cpuUsage(cpu0)
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
  const share = (cpu.user + cpu.system) / 1000 / wallMs
  const looked = counted ? String(looks - looksBefore) : 'not counted'
  console.log(`${args.waiters} idle lockAsync waiters, ${(wallMs / 1000).toFixed(1)} s: ` +
    `${(share * 100).toFixed(2)} % of one CPU (process total), waiters woke ${looked} times`)

  for (const ac of aborts) ac.abort()
  await Promise.all(pending)
  await holder.terminate()
}

main().catch((e) => { console.error(e); process.exitCode = 1 })
