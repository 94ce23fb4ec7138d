'use strict'
// Helpers shared by the test files and the fixtures. Everything that waits
// for another thread polls an observable condition with a deadline; nothing
// sleeps a fixed time "to let things settle".
const fs = require('fs')
const path = require('path')
const { spawn } = require('child_process')
const { Worker } = require('worker_threads')

const now = () => Number(process.hrtime.bigint()) / 1e6 // monotonic, ms

const tick = () => new Promise((resolve) => setTimeout(resolve, 1))

// Resolves once predicate() is truthy (with its value); rejects when it
// throws or after timeoutMs, naming `what`.
async function until (predicate, what, timeoutMs) {
  const deadline = now() + (timeoutMs || 20000)
  for (;;) {
    const value = predicate()
    if (value) return value
    if (now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await tick()
  }
}

// The OS thread id of the calling thread, or 0 where /proc/thread-self does
// not exist (non-Linux): then untilBlocked() is unavailable.
function currentTid () {
  try {
    return Number(fs.readlinkSync('/proc/thread-self').split('/').pop())
  } catch (e) {
    return 0
  }
}

const canObserveBlocking = currentTid() !== 0

function threadState (tid) {
  let stat
  try {
    stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
  } catch (e) {
    throw new Error(`thread ${tid} is gone (it returned from its wait and exited?)`)
  }
  // "tid (comm) S ...": comm may hold spaces and parentheses.
  return stat.charAt(stat.lastIndexOf(')') + 2)
}

// Resolves once thread `tid` has been sleeping (state S) in every sample
// for 25 ms in a row. Used after the thread announced that its next call
// is a blocking wait: no wait/notify API can tell "queued" without waking,
// but a thread that announced "I call wait now" and then sleeps for 25 ms
// is in that wait (a GC pause in a tiny worker heap is far shorter, and the
// module's ≤100 ms liveness slices only wake it for microseconds).
async function untilBlocked (tid, what, timeoutMs) {
  if (!tid) throw new Error('untilBlocked needs /proc/thread-self (Linux)')
  let since = -1
  await until(() => {
    if (threadState(tid) !== 'S') {
      since = -1
      return false
    }
    if (since < 0) since = now()
    return now() - since >= 25
  }, `${what} to block`, timeoutMs)
}

// Shared typed arrays with given contents.
function sharedI32 (values) {
  const ta = new Int32Array(new SharedArrayBuffer(4 * values.length))
  values.forEach((v, i) => { ta[i] = v })
  return ta
}
function sharedI64 (values) {
  const ta = new BigInt64Array(new SharedArrayBuffer(8 * values.length))
  values.forEach((v, i) => { ta[i] = v })
  return ta
}

// A view descriptor that survives postMessage, and its inverse.
function describeView (ta) {
  return { sab: ta.buffer, type: ta.constructor.name, byteOffset: ta.byteOffset, length: ta.length }
}
function makeView (d) {
  const Ctor = d.type === 'BigInt64Array' ? BigInt64Array : Int32Array
  return new Ctor(d.sab, d.byteOffset, d.length)
}

// A worker's messages, read by type: next(type) resolves with the oldest
// unread message of that type, and rejects if the worker fails or exits
// first, or after timeoutMs. `exit` resolves with the exit code.
function inbox (worker, name) {
  const messages = []
  let failure = null
  let exitCode = null
  worker.on('message', (m) => messages.push(m))
  worker.on('error', (e) => { failure = e })
  const exit = new Promise((resolve) => worker.on('exit', (code) => {
    exitCode = code
    resolve(code)
  }))
  return {
    has: (type) => messages.some((m) => m.type === type),
    next (type, timeoutMs) {
      return until(() => {
        const i = messages.findIndex((m) => m.type === type)
        if (i >= 0) return messages.splice(i, 1)
        if (failure) throw failure
        if (exitCode !== null) throw new Error(`${name} exited with ${exitCode} before sending "${type}"`)
        return null
      }, `"${type}" from ${name}`, timeoutMs).then((found) => found[0])
    },
    exit,
    exitCode: () => exitCode,
    failure: () => failure
  }
}

// Starts __test__/fixtures/thread-worker.js in `role` and collects what it
// posts (see inbox).
function startWorker (role, data) {
  const worker = new Worker(path.join(__dirname, 'fixtures', 'thread-worker.js'), {
    workerData: Object.assign({ role }, data)
  })
  const box = inbox(worker, `the ${role} worker`)
  return {
    worker,
    tid: () => box.next('tid').then((m) => m.tid),
    next: box.next,
    exited: () => box.exitCode() !== null,
    // Resolves with the exit code once the worker has exited.
    whenExited: (timeoutMs) => until(() => box.exitCode() !== null, `the ${role} worker to exit`, timeoutMs)
      .then(() => box.exitCode()),
    terminate: () => worker.terminate()
  }
}

// --- child processes --------------------------------------------------------

// Collects the output of a started child (`child.stdout` and `child.stderr`
// are pipes) and kills it with SIGKILL after `timeoutMs`. Resolves with
// { code, signal, stdout, stderr, timedOut, result } once it is gone, where
// result is the JSON of the last `RESULT ` line printed, if any. An 'error'
// of the child rejects, or with `errorsToStderr` is added to stderr.
function capture (child, timeoutMs, errorsToStderr) {
  return new Promise((resolve, reject) => {
    let stdout = ''
    let stderr = ''
    let timedOut = false
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, timeoutMs)
    child.on('error', (e) => {
      if (errorsToStderr) {
        stderr += String(e && e.stack)
        return
      }
      clearTimeout(timer)
      reject(e)
    })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      const lines = stdout.split('\n').filter((l) => l.startsWith('RESULT '))
      const result = lines.length ? JSON.parse(lines[lines.length - 1].slice(7)) : undefined
      resolve({ code, signal, stdout, stderr, timedOut, result })
    })
  })
}

// Runs a fixture (or `node <args>`) in a child process with a hard timeout.
// Resolves as capture() does.
function runChild (args, opts) {
  const options = opts || {}
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: options.cwd || path.join(__dirname, '..'),
      env: Object.assign({}, process.env, options.env || {}),
      stdio: ['ignore', 'pipe', 'pipe']
    })
    resolve(capture(child, options.timeoutMs || 60000))
  })
}

// Starts `node file ...args` with this process's output, killed with
// SIGKILL after `timeoutMs` if it is still running then. The child's
// `exited` resolves with { code, signal } once it has exited.
function startChild (file, args, timeoutMs) {
  const proc = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'inherit', 'inherit'] })
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs)
  proc.exited = new Promise((resolve) => proc.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal }) }))
  return proc
}

// --- shared regions ---------------------------------------------------------

// Why shared regions cannot be used in this run, or false where they can:
// SharedRegion.open refuses with ERR_REGION_UNSUPPORTED, before it looks for
// any file, where the platform or the runtime cannot share a region. Asked
// once, on the first call (it loads the package).
let regionProbe
function regionsUnsupported () {
  if (regionProbe === undefined) {
    regionProbe = false
    try {
      require('..').SharedRegion.open(`probe-${process.pid}`, { create: false })
    } catch (e) {
      if (e.code === 'ERR_REGION_UNSUPPORTED') regionProbe = e.message
    }
  }
  return regionProbe
}

// A new region for one test, `<prefix><pid>-<n>` (unlinked first, then
// created with `bytes`): { name, region, w }, w an Int32Array over it.
let regions = 0
// Unlinked when the process exits, also after a failed assertion (unlinking
// twice is fine).
const made = []
function freshRegion (prefix, bytes) {
  const { SharedRegion } = require('..')
  const name = `${prefix}${process.pid}-${++regions}`
  SharedRegion.unlink(name)
  const region = SharedRegion.open(name, { bytes })
  if (made.length === 0) process.on('exit', () => { for (const n of made) SharedRegion.unlink(n) })
  made.push(name)
  return { name, region, w: new Int32Array(region.buffer) }
}

// The options of a describe() of region tests: skipped unless the module is
// under test (V8's Atomics do not wait across processes) and regions work.
function regionSkip () {
  if (require('./subject').kind !== 'module') return { skip: 'SharedRegion is the module\'s (V8\'s Atomics do not wait across processes)' }
  const why = regionsUnsupported()
  return why ? { skip: `shared regions are not supported here: ${why}` } : {}
}

// The rounds a random-termination stress test runs where it asks for `n`:
// n times SHARED_FUTEX_STRESS_SCALE (default 1, the full count, as `npm
// test` runs them; CI's other runs of the whole suite, on Node 14 and on the
// published binary, use 0.25), and at least one where n is not 0.
const STRESS_SCALE = (() => {
  const v = process.env.SHARED_FUTEX_STRESS_SCALE
  if (v === undefined || v === '') return 1
  const x = Number(v)
  if (!(x > 0) || !Number.isFinite(x)) throw new Error(`SHARED_FUTEX_STRESS_SCALE must be a number above 0, got ${JSON.stringify(v)}`)
  return x
})()
const stressRounds = (n) => n === 0 ? 0 : Math.max(1, Math.round(n * STRESS_SCALE))

// The text of a child's run, for assertion messages.
function transcript (r) {
  return `exit ${r.code} signal ${r.signal}${r.timedOut ? ' (killed by the hard timeout)' : ''}\n` +
    `--- stdout\n${r.stdout}--- stderr\n${r.stderr}`
}

// Removes a temporary directory and what is in it (fs.rmSync is Node 14.14+).
function removeDir (dir) {
  if (typeof fs.rmSync === 'function') fs.rmSync(dir, { recursive: true, force: true })
  else fs.rmdirSync(dir, { recursive: true })
}

// The type errors TypeScript (`ts`, the compiler module) finds in `source`,
// compiled as if it were the file `file` (which need not exist) with
// `options`: each as its flattened message.
function typeErrors (ts, file, source, options) {
  const host = ts.createCompilerHost(options)
  const readFile = host.readFile
  host.readFile = (name) => (name === file ? source : readFile.call(host, name))
  const fileExists = host.fileExists
  host.fileExists = (name) => name === file || fileExists.call(host, name)
  const getSourceFile = host.getSourceFile
  host.getSourceFile = (name, version) => name === file
    ? ts.createSourceFile(name, source, version)
    : getSourceFile.call(host, name, version)
  return ts.getPreEmitDiagnostics(ts.createProgram([file], options, host))
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
}

// --- PostgreSQL ---------------------------------------------------------------

// The throwaway cluster's helper (the repository's only: not beside an
// installed package).
const PG_CLUSTER = path.join(__dirname, '..', 'scripts', 'pg-cluster.js')

// Why a test against PostgreSQL cannot run here, or false where it can:
// `pg` 8 needs Node 16; the cluster helper is absent; PostgreSQL or `pg` is.
function postgresUnavailable () {
  if (Number(process.versions.node.split('.')[0]) < 16) return `pg 8 needs Node 16 or later, this is ${process.versions.node}`
  if (!fs.existsSync(PG_CLUSTER)) return 'scripts/pg-cluster.js is not here (a package without the repository\'s scripts)'
  return require(PG_CLUSTER).unavailable()
}

module.exports = {
  PG_CLUSTER,
  postgresUnavailable,
  typeErrors,
  removeDir,
  stressRounds,
  now,
  until,
  currentTid,
  canObserveBlocking,
  untilBlocked,
  sharedI32,
  sharedI64,
  describeView,
  makeView,
  inbox,
  startWorker,
  threadState,
  capture,
  runChild,
  startChild,
  regionsUnsupported,
  regionSkip,
  freshRegion,
  transcript
}
