'use strict'
// Timeouts at scale: n (default 100 000) `waitAsync` with finite timeouts on
// one thread, for two or more builds of the addon side by side, each
// measurement in a fresh process, builds interleaved in an order that
// rotates from round to round; the figures are the medians of the rounds
// (min–max alongside).
//
//   node benchmark/timer-100k.js --binary heap=old.node [--binary tokio=new.node] [--rounds 5] [--n 100000]
//
// Without --binary it measures the package's own build, alone. Each build is
// loaded through NAPI_RS_NATIVE_LIBRARY_PATH; the JavaScript layer is this
// checkout's for all of them.
//
// Two measurements per build and round:
//
// notify: n waiters with a 60 s timeout, all settled early by one
//   notify-all. Figures: time to create them (first large batch, and again
//   once the JIT is warm), the same creation without a timeout for
//   reference, RSS growth per waiter (first large batch, after two full
//   GCs), time from the notify until every promise settled, time from the
//   notify until the timer holds no entry any more (diagnostics'
//   timerEntries), RSS left per waiter after that, and the process's CPU
//   time for the warm pass (every thread, the timer's included).
// timeout: n waiters whose deadlines are spread over 50–200 ms after a
//   common start (in a scrambled order), all left to time out. The start
//   lies past the end of the creation loop (three times the time a first
//   pass of n took), so every deadline falls after the thread is free again.
//   Figures: time to create them, the time from the first deadline until
//   all were delivered (polled every millisecond), how late every 100th
//   settled (the time its promise's reaction ran minus its deadline), RSS
//   growth per waiter at its peak, and the process's CPU time from the
//   first creation until all were delivered. Then the same with 1,000
//   waiters, each with a reaction: the timer's own precision, when
//   delivering does not keep the thread busy.
//
// A measurement, not a test: nothing fails on timing. Every waiter's
// outcome is checked ('ok' or 'timed-out' as expected, none lost).
const path = require('path')
const { execFile } = require('child_process')
const { performance } = require('perf_hooks')

const ROOT = path.join(__dirname, '..')

// ---------------------------------------------------------------- child

async function child (mode, n) {
  const { waitAsync, notify, internal } = require(path.join(ROOT, 'lib', 'futex'))
  const cells = new Int32Array(new SharedArrayBuffer(64))
  const hold = setInterval(() => {}, 1000)
  const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000 }
  const rss = () => { global.gc(); global.gc(); return process.memoryUsage().rss }
  const turn = () => new Promise((resolve) => setImmediate(resolve))
  const entries = () => internal.diagnostics().timerEntries
  async function drained (what) {
    const until = Date.now() + 30000
    while (entries() > 0) {
      if (Date.now() > until) throw new Error(`${what}: ${entries()} timer entries left after 30 s`)
      await turn()
    }
  }

  // Creates `count` waiters on cells[0] with `timeout`, notifies them all;
  // resolves with { createMs, settleMs, releaseMs }.
  async function notifyPass (count, timeout, memory) {
    const promises = new Array(count)
    const before = memory ? rss() : 0
    const t0 = performance.now()
    for (let i = 0; i < count; i++) promises[i] = waitAsync(cells, 0, 0, timeout).value
    const t1 = performance.now()
    const after = memory ? rss() : 0
    const all = Promise.all(promises)
    const t2 = performance.now()
    const woken = notify(cells, 0)
    const results = await all
    const t3 = performance.now()
    await drained('notify')
    const t4 = performance.now()
    if (woken !== count || results.some((r) => r !== 'ok')) throw new Error(`woke ${woken} of ${count}`)
    const out = { createMs: t1 - t0, settleMs: t3 - t2, releaseMs: t4 - t2 }
    if (memory) {
      out.rssPerWaiter = (after - before) / count
      out.rssLeftPerWaiter = (rss() - before) / count
    }
    return out
  }

  // Creates `count` waiters whose deadlines are spread over [lo, lo + span)
  // ms after `wait` ms from the start of the loop (in a scrambled order) and
  // lets them all time out. `wait` is to outlast the creation loop, so that
  // the lateness is the timer's and the delivery's, not the time the loop
  // kept the thread.
  // Every `every`-th waiter gets a reaction that notes how late it settled
  // (one each would make the reactions the thing measured).
  async function timeoutPass (count, wait, lo, span, every) {
    const late = []
    const promises = new Array(count)
    const before = rss()
    const c0 = cpu()
    const t0 = performance.now()
    const base = t0 + wait
    let first = Infinity
    for (let i = 0; i < count; i++) {
      const deadline = base + lo + span * ((i * 0.6180339887498949) % 1)
      if (deadline < first) first = deadline
      const r = waitAsync(cells, 1, 0, deadline - performance.now())
      if (!r.async) throw new Error(`waiter ${i} settled at once (${r.value}, after ${(performance.now() - t0).toFixed(0)} ms): its deadline passed while the loop was still creating`)
      promises[i] = r.value
      if (i % every === 0) promises[i].then(() => late.push(performance.now() - deadline))
    }
    const t1 = performance.now()
    const peak = process.memoryUsage().rss
    // Settled = delivered: nothing queued, nothing waiting for delivery.
    let d = internal.diagnostics()
    while (d.queuedAsync > 0 || d.undelivered > 0) {
      await new Promise((resolve) => setTimeout(resolve, 1))
      d = internal.diagnostics()
    }
    const t2 = performance.now()
    const c1 = cpu()
    const results = await Promise.all(promises)
    if (results.some((r) => r !== 'timed-out')) throw new Error('a waiter did not time out')
    if (first < t1) throw new Error(`a deadline passed ${(t1 - first).toFixed(1)} ms before the creation loop ended`)
    await drained('timeout')
    late.sort((a, b) => a - b)
    const q = (p) => late[Math.min(late.length - 1, Math.floor(p * late.length))]
    return {
      createMs: t1 - t0,
      totalMs: t2 - (base + lo),
      lateMedianMs: q(0.5),
      lateP99Ms: q(0.99),
      lateMaxMs: late[late.length - 1],
      earliestMs: late[0],
      rssPeakPerWaiter: (peak - before) / count,
      cpuMs: c1 - c0
    }
  }

  let out
  if (mode === 'notify') {
    // Warm-up: the thread's resolver, the timer thread, the JIT.
    for (let i = 0; i < 5; i++) await notifyPass(2000, 60000, false)
    const cold = await notifyPass(n, 60000, true)
    await notifyPass(n, Infinity, false)
    const untimed = await notifyPass(n, Infinity, false)
    const c0 = cpu()
    const warm = await notifyPass(n, 60000, false)
    const c1 = cpu()
    out = {
      createColdMs: cold.createMs,
      createMs: warm.createMs,
      createUntimedMs: untimed.createMs,
      settleMs: warm.settleMs,
      releaseMs: warm.releaseMs,
      rssPerWaiter: cold.rssPerWaiter,
      rssLeftPerWaiter: cold.rssLeftPerWaiter,
      cpuMs: c1 - c0
    }
  } else {
    await timeoutPass(2000, 500, 1, 5, 1)
    // How long creating n takes here.
    const t0 = performance.now()
    await notifyPass(n, 60000, false)
    const creation = performance.now() - t0
    const many = await timeoutPass(n, 3 * creation + 50, 50, 150, 100)
    // The timer's own precision: few enough waiters that delivering them
    // never keeps the thread busy.
    const few = await timeoutPass(1000, 20, 50, 150, 1)
    out = Object.assign(many, {
      fewLateMedianMs: few.lateMedianMs,
      fewLateP99Ms: few.lateP99Ms,
      fewLateMaxMs: few.lateMaxMs,
      fewEarliestMs: few.earliestMs
    })
  }
  clearInterval(hold)
  out.ownCpuMs = cpu()
  process.stdout.write(JSON.stringify(out) + '\n')
}

// --------------------------------------------------------------- parent

function parse (argv) {
  const args = { binaries: [], rounds: 5, n: 100000 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--binary') {
      const [name, file] = argv[++i].split('=')
      args.binaries.push({ name, file: path.resolve(file) })
    } else if (a === '--rounds') args.rounds = Number(argv[++i])
    else if (a === '--n') args.n = Number(argv[++i])
    else throw new Error(`unknown argument ${a}`)
  }
  return args
}

let childrenCpuMs = 0

// Share of the machine's CPUs that other processes used between two
// readings of /proc/stat (Linux; null elsewhere).
function busy () {
  try {
    const f = require('fs').readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
    return { at: Date.now(), busy: (f.reduce((a, b) => a + b, 0) - f[3] - (f[4] || 0)) * 10, own: childrenCpuMs }
  } catch {
    return null
  }
}
function othersShare (a, b) {
  if (!a || !b) return null
  const others = (b.busy - a.busy) - (b.own - a.own)
  return Math.max(0, others / ((b.at - a.at) * require('os').cpus().length))
}

function run (binary, mode, n) {
  return new Promise((resolve, reject) => {
    const env = Object.assign({}, process.env)
    if (binary.file) env.NAPI_RS_NATIVE_LIBRARY_PATH = binary.file
    else delete env.NAPI_RS_NATIVE_LIBRARY_PATH
    execFile(process.execPath, ['--expose-gc', __filename, '--child', mode, String(n)],
      { env, timeout: 120000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
        if (err) return reject(new Error(`${binary.name} ${mode}: ${err.killed ? 'killed after 120 s' : err.message}\n${stderr}`))
        const lines = stdout.trim().split('\n')
        const out = JSON.parse(lines[lines.length - 1])
        childrenCpuMs += out.ownCpuMs
        resolve(out)
      })
  })
}

const FIGURES = {
  notify: [
    ['createColdMs', 'create n (first batch)', 'ms'],
    ['createMs', 'create n (warm)', 'ms'],
    ['createUntimedMs', 'create n without timeout (warm, reference)', 'ms'],
    ['settleMs', 'notify-all until all settled', 'ms'],
    ['releaseMs', 'notify-all until the timer holds no entry', 'ms'],
    ['rssPerWaiter', 'RSS per pending waiter', 'B'],
    ['rssLeftPerWaiter', 'RSS left per waiter once all released', 'B'],
    ['cpuMs', 'process CPU, warm create + settle + release', 'ms']
  ],
  timeout: [
    ['createMs', 'create n, deadlines over 50–200 ms', 'ms'],
    ['totalMs', 'first deadline until all settled', 'ms'],
    ['lateMedianMs', 'lateness (every 100th), median', 'ms'],
    ['lateP99Ms', 'lateness (every 100th), 99th percentile', 'ms'],
    ['lateMaxMs', 'lateness (every 100th), max', 'ms'],
    ['rssPeakPerWaiter', 'RSS per pending waiter', 'B'],
    ['cpuMs', 'process CPU, create until all settled', 'ms'],
    ['fewLateMedianMs', '1,000 waiters over 50–200 ms: lateness, median', 'ms'],
    ['fewLateP99Ms', '1,000 waiters: lateness, 99th percentile', 'ms'],
    ['fewLateMaxMs', '1,000 waiters: lateness, max', 'ms'],
    ['fewEarliestMs', '1,000 waiters: lateness, min (< 0 would be early)', 'ms']
  ]
}

function fmt (x, unit) {
  if (!Number.isFinite(x)) return '–'
  return unit === 'B' ? `${Math.round(x)} B` : `${x < 10 ? x.toFixed(2) : x.toFixed(1)} ms`
}

async function main () {
  const { summary } = require('./lib/stats')
  const { machine, describe } = require('./lib/machine')
  const args = parse(process.argv.slice(2))
  if (args.binaries.length === 0) args.binaries.push({ name: 'this build', file: null })
  console.log(describe(machine()))
  console.log(`n = ${args.n}, ${args.rounds} rounds; builds: ` +
    args.binaries.map((b) => `${b.name} (${b.file ? path.relative(process.cwd(), b.file) || b.file : 'package build'})`).join(', '))
  const samples = {}
  const start = busy()
  for (let r = 0; r < args.rounds; r++) {
    for (const mode of Object.keys(FIGURES)) {
      const order = args.binaries.map((_, i) => args.binaries[(i + r) % args.binaries.length])
      for (const b of order) {
        const out = await run(b, mode, args.n)
        for (const [key] of FIGURES[mode]) {
          const id = `${mode}.${key}.${b.name}`
          ;(samples[id] = samples[id] || []).push(out[key])
        }
      }
    }
    process.stderr.write(`round ${r + 1}/${args.rounds} done\n`)
  }
  const share = othersShare(start, busy())
  if (share !== null) console.log(`Other processes used ${Math.round(share * 100)} % of the CPUs during the run.`)
  const names = args.binaries.map((b) => b.name)
  const head = ['measurement', 'figure', ...names]
  if (names.length === 2) head.push(`${names[1]} ÷ ${names[0]}`)
  console.log(`\n| ${head.join(' | ')} |\n| ${head.map(() => '---').join(' | ')} |`)
  for (const [mode, figures] of Object.entries(FIGURES)) {
    for (const [key, label, unit] of figures) {
      const s = names.map((name) => summary(samples[`${mode}.${key}.${name}`]))
      const cells = s.map((x) => `${fmt(x.median, unit)} (${fmt(x.min, unit)} – ${fmt(x.max, unit)})`)
      if (names.length === 2) cells.push(`${(s[1].median / s[0].median).toFixed(2)}×`)
      console.log(`| ${mode} | ${label} | ${cells.join(' | ')} |`)
    }
  }
}

if (process.argv[2] === '--child') {
  child(process.argv[3], Number(process.argv[4])).catch((e) => { console.error(e); process.exit(1) })
} else {
  main().catch((e) => { console.error(e); process.exitCode = 1 })
}
