#!/usr/bin/env node
'use strict'
// The web-platform-tests for Web Locks (`web-locks/*.any.js`, the twelve files
// that apply outside a browser: 70 subtests) against a LockManager of this
// package, under a small harness compatible with testharness.js for what
// those files use (docs/web-locks.md, "Conformance: the web-platform-tests").
//
//   node scripts/wpt-web-locks.js [--manager threads|region|postgres|wrong]
//                                 [--wpt <dir>] [--files a,b] [--timeout ms]
//                                 [--pg-url <url>] [--json]
//
//   --manager threads   require('shared-futex/web-locks').locks (the default)
//             region    SharedRegion.open(<a fresh name>).locks (Linux, Node 16+)
//             postgres  a PostgresLockManager per thread (the worker of
//                       query.https.any.js is another client), in a namespace
//                       of its own per file, on the throwaway cluster of
//                       scripts/pg-cluster.js (or --pg-url / WPT_PG_URL)
//             wrong     a deliberately wrong manager (grants everything at
//                       once, ignores modes, signals and steal): subtests
//                       must fail, or the harness checks nothing
//   --wpt <dir>         a copy of the WPT repository (or of its web-locks/
//                       folder); else WPT_DIR; else the pinned commit below,
//                       fetched once with git (a sparse, blob-less clone of
//                       web-locks/ only) into $WPT_CACHE or the temporary
//                       directory. Where none can be had, one line says so
//                       and the script exits 0.
//   --files             only these files (names without .https.any.js)
//   --timeout           each file's harness timeout (default 30000 ms); the
//                       file's process is killed 15 s after it
//   --json              the results as one JSON object on stdout
//
// Each file runs in a Node process of its own: `self` is the global object,
// `location` the URL of the test's page, `navigator.locks` the manager under
// test, `new Worker(url)` runs a WPT worker script in a worker_threads worker
// with a manager of its own thread (the same manager for threads, the same
// region for region, another client for postgres). Exit code: 0 when every
// subtest passed and no file had a harness error, 1 otherwise, 0 when skipped.
// The WPT files are not part of this repository.
const fs = require('fs')
const os = require('os')
const path = require('path')
const vm = require('vm')
const util = require('util')
const { spawn, execFile } = require('child_process')

const ROOT = path.join(__dirname, '..')
const WPT_REPO = 'https://github.com/web-platform-tests/wpt'
const WPT_COMMIT = '16ef4f8a0ecd9ce82d5546fca2ca54dc262a8500'
const FILES = ['acquire', 'held', 'ifAvailable', 'lock-attributes', 'mode-exclusive', 'mode-mixed', 'mode-shared',
  'query-empty', 'query', 'resource-names', 'signal', 'steal'].map((f) => `${f}.https.any.js`)
const MANAGERS = ['threads', 'region', 'postgres', 'wrong']

// --- managers ---------------------------------------------------------------------
// The manager of this thread: `ctx` is what the parent process passed down
// (a region's name, a PostgreSQL URL and namespace).
function makeManager (kind, ctx) {
  switch (kind) {
    case 'threads':
      return require(path.join(ROOT, 'web-locks')).locks
    case 'region': {
      const { SharedRegion } = require(ROOT)
      return SharedRegion.open(ctx.region, { bytes: 64 }).locks
    }
    case 'postgres': {
      const { PostgresLockManager } = require(path.join(ROOT, 'web-locks-postgres'))
      return new PostgresLockManager({ connectionString: ctx.pgUrl, namespace: ctx.namespace })
    }
    case 'wrong':
      return wrongManager()
  }
  throw new Error(`unknown manager ${kind}`)
}

// A manager that is wrong on purpose: every request is granted on the next
// turn, whatever is held (no exclusion, no queue, no ifAvailable, signal or
// steal), its argument checks are loose and query() lists only what is held.
function wrongManager () {
  const held = []
  return {
    request (name, options, callback) {
      if (typeof options === 'function') { callback = options; options = {} }
      if (typeof callback !== 'function') return Promise.reject(new TypeError('callback'))
      const mode = options && options.mode === 'shared' ? 'shared' : 'exclusive'
      return new Promise((resolve) => setImmediate(resolve)).then(async () => {
        const entry = { name: String(name), mode, clientId: 'wrong' }
        held.push(entry)
        try {
          return await callback({ name: String(name), mode })
        } finally {
          held.splice(held.indexOf(entry), 1)
        }
      })
    },
    async query () {
      return { held: held.slice(), pending: [] }
    }
  }
}

// --- testharness.js, what the Web Locks files use -----------------------------------
class AssertionError extends Error {}
Object.defineProperty(AssertionError.prototype, 'name', { value: 'AssertionError' })

const fmt = (v) => typeof v === 'string' ? JSON.stringify(v) : util.inspect(v, { depth: 2, breakLength: Infinity })
function assert (ok, fn, description, message) {
  if (ok) return
  throw new AssertionError(`${fn}: ${description ? `${description} ` : ''}${message}`)
}
// testharness.js's same_value: NaN equals NaN, +0 and -0 differ.
function sameValue (x, y) {
  if (y !== y) return x !== x // eslint-disable-line no-self-compare
  if (x === 0 && y === 0) return 1 / x === 1 / y
  return x === y
}

const harness = {
  assert_true: (actual, d) => assert(actual === true, 'assert_true', d, `expected true got ${fmt(actual)}`),
  assert_false: (actual, d) => assert(actual === false, 'assert_false', d, `expected false got ${fmt(actual)}`),
  assert_equals (actual, expected, d) {
    assert(typeof actual === typeof expected, 'assert_equals', d, `expected (${typeof expected}) ${fmt(expected)} but got (${typeof actual}) ${fmt(actual)}`)
    assert(sameValue(actual, expected), 'assert_equals', d, `expected ${fmt(expected)} but got ${fmt(actual)}`)
  },
  assert_not_equals: (actual, expected, d) => assert(!sameValue(actual, expected), 'assert_not_equals', d, `got disallowed value ${fmt(actual)}`),
  assert_array_equals (actual, expected, d) {
    assert(typeof actual === 'object' && actual !== null && 'length' in actual, 'assert_array_equals', d, `value is ${fmt(actual)}, expected array`)
    assert(actual.length === expected.length, 'assert_array_equals', d, `lengths differ, expected array ${fmt(expected)} length ${expected.length}, got ${fmt(actual)} length ${actual.length}`)
    for (let i = 0; i < actual.length; i++) {
      assert(Object.prototype.hasOwnProperty.call(actual, i) === Object.prototype.hasOwnProperty.call(expected, i), 'assert_array_equals', d, `expected property ${i} to be ${Object.prototype.hasOwnProperty.call(expected, i)} but was ${Object.prototype.hasOwnProperty.call(actual, i)}`)
      assert(sameValue(expected[i], actual[i]), 'assert_array_equals', d, `expected property ${i} to be ${fmt(expected[i])} but got ${fmt(actual[i])} (expected array ${fmt(expected)} got ${fmt(actual)})`)
    }
  },
  assert_own_property: (object, name, d) => assert(object !== null && object !== undefined && Object.prototype.hasOwnProperty.call(object, name), 'assert_own_property', d, `expected property ${fmt(name)} missing`),
  assert_unreached: (d) => assert(false, 'assert_unreached', d, 'Reached unreachable code'),
  promise_rejects_js (test, constructor, promise, description) {
    return promise.then(test.unreached_func(`Should have rejected: ${description}`), (e) => {
      assert(typeof e === 'object' && e !== null, 'promise_rejects_js', description, `${fmt(e)} is not an object`)
      let proto = constructor
      while (proto && !(typeof proto === 'function' && proto.name === 'Error')) proto = Object.getPrototypeOf(proto)
      assert(proto != null, 'promise_rejects_js', description, 'Object passed as the constructor is not an Error constructor')
      assert(e.constructor === constructor && e.name === constructor.name, 'promise_rejects_js', description,
        `expected ${constructor.name} but got ${e.constructor && e.constructor.name} (name ${fmt(e.name)}): ${fmt(e.message)}`)
    })
  },
  promise_rejects_dom (test, type, promiseOrConstructor, descriptionOrPromise, maybeDescription) {
    let constructor = globalThis.DOMException
    let promise = promiseOrConstructor
    let description = descriptionOrPromise
    if (typeof promiseOrConstructor === 'function') {
      constructor = promiseOrConstructor
      promise = descriptionOrPromise
      description = maybeDescription
    }
    return promise.then(test.unreached_func(`Should have rejected: ${description}`), (e) => {
      const codes = { IndexSizeError: 1, HierarchyRequestError: 3, WrongDocumentError: 4, InvalidCharacterError: 5, NoModificationAllowedError: 7, NotFoundError: 8, NotSupportedError: 9, InvalidStateError: 11, SyntaxError: 12, InvalidModificationError: 13, NamespaceError: 14, InvalidAccessError: 15, TypeMismatchError: 17, SecurityError: 18, NetworkError: 19, AbortError: 20, URLMismatchError: 21, QuotaExceededError: 22, TimeoutError: 23, InvalidNodeTypeError: 24, DataCloneError: 25 }
      assert(typeof e === 'object' && e !== null, 'promise_rejects_dom', description, `${fmt(e)} is not an object`)
      assert(e.name === type, 'promise_rejects_dom', description, `expected name ${fmt(type)} but got ${fmt(e && e.name)} (${fmt(e && e.message)})`)
      assert(e.code === (codes[type] || 0), 'promise_rejects_dom', description, `expected code ${codes[type] || 0} but got ${fmt(e.code)}`)
      assert(e.constructor === constructor, 'promise_rejects_dom', description, `expected a DOMException of this realm, got ${e.constructor && e.constructor.name}`)
    })
  },
  promise_rejects_exactly (test, exception, promise, description) {
    return promise.then(test.unreached_func(`Should have rejected: ${description}`), (e) => {
      assert(sameValue(e, exception), 'promise_rejects_exactly', description, `expected ${fmt(exception)} but got ${fmt(e)}`)
    })
  }
}

// One subtest.
class Test {
  constructor (name, props) {
    this.name = name
    this.properties = props || {}
    this.phase = 'init' // init, started, result, complete
    this.status = null // PASS, FAIL, TIMEOUT, NOTRUN
    this.message = null
    this.cleanups = []
    this.onComplete = null
  }

  step (func, thisObj, ...args) {
    if (this.phase === 'result' || this.phase === 'complete') return undefined
    try {
      return func.apply(thisObj === undefined ? this : thisObj, args)
    } catch (e) {
      this.fail(e)
      return undefined
    }
  }

  step_func (func, thisObj) {
    const test = this
    return function (...args) { return test.step(func, thisObj === undefined ? this : thisObj, ...args) }
  }

  step_func_done (func, thisObj) {
    const test = this
    return function (...args) {
      if (func) test.step(func, thisObj === undefined ? this : thisObj, ...args)
      test.done()
    }
  }

  unreached_func (description) {
    return this.step_func(() => harness.assert_unreached(description))
  }

  step_timeout (func, ms, ...args) {
    const test = this
    return setTimeout(this.step_func(function () { return func.apply(test, args) }), ms)
  }

  add_cleanup (func) { this.cleanups.push(func) }

  fail (e) {
    if (this.phase === 'result' || this.phase === 'complete') return
    this.status = 'FAIL'
    this.message = String(typeof e === 'object' && e !== null ? e.message : e)
    this.done()
  }

  // The result is in: the cleanups run (promises awaited, as testharness.js does), then the next test.
  done () {
    if (this.phase === 'complete' || this.finishing) return
    this.finishing = true
    if (this.status === null) this.status = 'PASS'
    this.phase = 'result'
    const waits = []
    for (const f of this.cleanups) {
      try {
        const r = f()
        if (r && typeof r.then === 'function') waits.push(r)
      } catch (e) {
        harnessError(`a cleanup of "${this.name}" threw: ${e && e.message}`)
      }
    }
    Promise.all(waits).then(() => {}, (e) => harnessError(`a cleanup of "${this.name}" rejected: ${e && e.message}`)).then(() => {
      this.phase = 'complete'
      if (this.onComplete) this.onComplete()
    })
  }
}

// --- one file, in a process of its own (--run-file) ---------------------------------
const tests = []
let allowUncaught = false
let harnessStatus = null
function harnessError (message) {
  if (harnessStatus === null) harnessStatus = { status: 'ERROR', message }
}

function installGlobals (manager, kind, ctx, pageUrl) {
  globalThis.self = globalThis
  Object.defineProperty(globalThis, 'location', { value: new URL(pageUrl), configurable: true, writable: true })
  Object.defineProperty(globalThis, 'navigator', { value: { locks: manager }, configurable: true, writable: true })
  const listeners = new Map()
  globalThis.addEventListener = (type, fn) => { if (!listeners.has(type)) listeners.set(type, new Set()); listeners.get(type).add(fn) }
  globalThis.removeEventListener = (type, fn) => { if (listeners.has(type)) listeners.get(type).delete(fn) }
  return listeners
}

function installHarness (testDir, kind, ctx) {
  Object.assign(globalThis, harness)
  globalThis.AssertionError = AssertionError
  globalThis.setup = (props, more) => {
    if (typeof props === 'function') props = more || {}
    if (props && props.allow_uncaught_exception) allowUncaught = true
  }
  globalThis.done = () => {}
  globalThis.promise_test = (func, name, props) => { tests.push({ kind: 'promise', func, test: new Test(name, props) }) }
  globalThis.test = (func, name, props) => { tests.push({ kind: 'sync', func, test: new Test(name, props) }) }
  globalThis.async_test = (func, name, props) => {
    if (typeof func === 'string') { props = name; name = func; func = null }
    const entry = { kind: 'async', func, test: new Test(name, props) }
    tests.push(entry)
    return entry.test
  }
  // new Worker(url): the WPT worker script in a worker_threads worker.
  const { Worker: ThreadWorker } = require('worker_threads')
  globalThis.Worker = class Worker {
    constructor (url) {
      const script = path.resolve(testDir, String(url))
      this._listeners = new Map()
      this.onmessage = null
      this.onerror = null
      this._thread = new ThreadWorker(__filename, { workerData: { wptWorker: script, kind, ctx } })
      this._thread.on('message', (data) => this._dispatch('message', { data, target: this }))
      this._thread.on('error', (e) => this._dispatch('error', { message: e && e.message, error: e, target: this }))
    }

    _dispatch (type, event) {
      const own = this[`on${type}`]
      if (typeof own === 'function') own.call(this, event)
      for (const fn of [...(this._listeners.get(type) || [])]) fn.call(this, event)
    }

    postMessage (data) { this._thread.postMessage(data) }
    addEventListener (type, fn) { if (!this._listeners.has(type)) this._listeners.set(type, new Set()); this._listeners.get(type).add(fn) }
    removeEventListener (type, fn) { if (this._listeners.has(type)) this._listeners.get(type).delete(fn) }
    terminate () { this._thread.terminate() }
  }
}

function runEntry (entry) {
  const t = entry.test
  return new Promise((resolve) => {
    t.onComplete = resolve
    t.phase = 'started'
    if (entry.kind === 'sync') {
      t.step(entry.func, t, t)
      t.done()
      return
    }
    if (entry.kind === 'async') {
      if (entry.func) t.step(entry.func, t, t)
      return
    }
    const promise = t.step(entry.func, t, t)
    t.step(() => {
      assert(!!promise, 'promise_test', null, "test body must return a 'thenable' object (received no value)")
      assert(typeof promise.then === 'function', 'promise_test', null, "test body must return a 'thenable' object")
    })
    Promise.resolve(promise)
      .catch(t.step_func((value) => {
        if (value instanceof AssertionError) throw value
        assert(false, 'promise_test', null, `Unhandled rejection with value: ${fmt(value)}`)
      }))
      .then(() => t.done())
  })
}

async function runFile (file, kind, ctx, timeoutMs) {
  const testDir = path.dirname(file)
  const page = `https://web-platform.test:8444/web-locks/${path.basename(file).replace(/\.js$/, '.html')}`
  const manager = makeManager(kind, ctx)
  installGlobals(manager, kind, ctx, page)
  installHarness(testDir, kind, ctx)
  const out = (tag, o) => process.stdout.write(`${tag} ${JSON.stringify(o)}\n`)
  process.on('unhandledRejection', (e) => { if (!allowUncaught) harnessError(`Unhandled rejection: ${e && e.message !== undefined ? e.message : fmt(e)}`) })
  process.on('uncaughtException', (e) => { if (!allowUncaught) harnessError(`Uncaught exception: ${e && e.message}`) })
  const source = fs.readFileSync(file, 'utf8')
  const scripts = []
  for (const m of source.matchAll(/^\/\/ META: script=(.+)$/gm)) scripts.push(path.resolve(testDir, m[1].trim()))
  try {
    for (const s of scripts) vm.runInThisContext(fs.readFileSync(s, 'utf8'), { filename: s })
    vm.runInThisContext(source, { filename: file })
  } catch (e) {
    harnessError(`the file did not load: ${e && e.stack}`)
  }
  let timedOut = false
  // Not unref()ed: a test whose promise never settles waits for it (the loop may be empty otherwise).
  const deadline = new Promise((resolve) => setTimeout(() => { timedOut = true; resolve() }, timeoutMs))
  let i = 0
  for (; i < tests.length && !timedOut; i++) {
    const entry = tests[i]
    await Promise.race([runEntry(entry), deadline])
    if (timedOut) {
      entry.test.status = 'TIMEOUT'
      entry.test.message = entry.test.message || `the file's harness timeout (${timeoutMs} ms) passed during this test`
      harnessStatus = harnessStatus || { status: 'TIMEOUT', message: `the file did not finish within ${timeoutMs} ms` }
    }
    out('WPT', { name: entry.test.name, status: entry.test.status, message: entry.test.message })
  }
  for (; i < tests.length; i++) out('WPT', { name: tests[i].test.name, status: 'NOTRUN', message: null })
  out('WPT-HARNESS', harnessStatus || { status: 'OK', message: null })
  process.exit(0)
}

// --- inside new Worker(url) -------------------------------------------------------------
function runWorker ({ wptWorker, kind, ctx }) {
  const { parentPort } = require('worker_threads')
  const manager = makeManager(kind, ctx)
  globalThis.self = globalThis
  Object.defineProperty(globalThis, 'navigator', { value: { locks: manager }, configurable: true, writable: true })
  const listeners = new Map()
  globalThis.postMessage = (data) => parentPort.postMessage(data)
  globalThis.addEventListener = (type, fn) => {
    if (type !== 'message') return // 'connect' is a shared worker's
    const wrapped = (data) => fn.call(globalThis, { data, target: globalThis })
    listeners.set(fn, wrapped)
    parentPort.on('message', wrapped)
  }
  globalThis.removeEventListener = (type, fn) => {
    if (listeners.has(fn)) parentPort.off('message', listeners.get(fn))
  }
  vm.runInThisContext(fs.readFileSync(wptWorker, 'utf8'), { filename: wptWorker })
}

// --- the WPT files ------------------------------------------------------------------------------
function run (cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 180000, killSignal: 'SIGKILL', ...opts }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.slice(0, 2).join(' ')}: ${(stderr || err.message).trim().split('\n').pop()}`))
      else resolve(stdout)
    })
  })
}

// The web-locks/ folder of `dir` (the folder itself or a WPT checkout): the
// first of them with .any.js files, or null.
function webLocksDir (dir) {
  for (const d of [path.join(dir, 'web-locks'), dir]) {
    try {
      if (fs.readdirSync(d).some((f) => f.endsWith('.any.js'))) return path.resolve(d)
    } catch {}
  }
  return null
}

// The pinned commit's web-locks/, fetched once into a cache: { dir } or { why }.
async function wptFiles (given) {
  if (given) {
    const d = webLocksDir(given)
    return d ? { dir: d, source: given } : { why: `no .any.js files in ${given} or ${path.join(given, 'web-locks')}` }
  }
  if (process.env.WPT_DIR) {
    const d = webLocksDir(process.env.WPT_DIR)
    if (d) return { dir: d, source: `WPT_DIR=${process.env.WPT_DIR}` }
  }
  const cache = path.join(process.env.WPT_CACHE || os.tmpdir(), `shared-futex-wpt-${WPT_COMMIT.slice(0, 12)}`)
  let d = fs.existsSync(path.join(cache, 'web-locks', 'acquire.https.any.js')) ? path.join(cache, 'web-locks') : null
  if (d) return { dir: d, source: `${WPT_REPO} at ${WPT_COMMIT} (cached in ${cache})` }
  const partial = `${cache}.${process.pid}`
  try {
    fs.rmSync(partial, { recursive: true, force: true })
    await run('git', ['init', '-q', partial])
    await run('git', ['-C', partial, 'remote', 'add', 'origin', WPT_REPO])
    await run('git', ['-C', partial, 'sparse-checkout', 'set', '--no-cone', '/web-locks/'])
    await run('git', ['-C', partial, 'fetch', '-q', '--depth', '1', '--filter=blob:none', 'origin', WPT_COMMIT])
    await run('git', ['-C', partial, 'checkout', '-q', 'FETCH_HEAD'])
    if (!fs.existsSync(path.join(partial, 'web-locks', 'acquire.https.any.js'))) throw new Error('the checkout has no web-locks/acquire.https.any.js')
    try { fs.renameSync(partial, cache) } catch { fs.rmSync(partial, { recursive: true, force: true }) } // another run cached it first
    d = path.join(cache, 'web-locks')
    return { dir: d, source: `${WPT_REPO} at ${WPT_COMMIT} (fetched into ${cache})` }
  } catch (e) {
    fs.rmSync(partial, { recursive: true, force: true })
    return { why: `cannot fetch ${WPT_REPO} at ${WPT_COMMIT} (${e.message})` }
  }
}

// --- the parent: every file in a process of its own --------------------------------------------
function parseArgs (argv) {
  const o = { manager: 'threads', wpt: null, files: null, timeout: 30000, pgUrl: process.env.WPT_PG_URL || null, json: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--manager') o.manager = value()
    else if (a === '--wpt') o.wpt = value()
    else if (a === '--files') o.files = value().split(',').map((f) => f.endsWith('.js') ? f : `${f}.https.any.js`)
    else if (a === '--timeout') o.timeout = Number(value())
    else if (a === '--pg-url') o.pgUrl = value()
    else if (a === '--json') o.json = true
    else if (a === '--help' || a === '-h') {
      process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(2, 38).map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n')
      process.exit(0)
    } else throw new Error(`unknown argument ${a}`)
  }
  if (!MANAGERS.includes(o.manager)) throw new Error(`--manager must be one of ${MANAGERS.join(', ')}`)
  if (!(o.timeout > 0)) throw new Error('--timeout must be a positive number of milliseconds')
  return o
}

function runChildFile (file, kind, ctx, timeoutMs) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [__filename, '--run-file', file, kind, JSON.stringify(ctx), String(timeoutMs)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d) => {
      stderr = (stderr + d).slice(-4000)
      if (process.env.WPT_VERBOSE) process.stderr.write(d)
    })
    let killed = false
    const timer = setTimeout(() => { killed = true; child.kill('SIGKILL') }, timeoutMs + 15000)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      const results = []
      let harnessResult = null
      for (const line of stdout.split('\n')) {
        if (line.startsWith('WPT ')) results.push(JSON.parse(line.slice(4)))
        else if (line.startsWith('WPT-HARNESS ')) harnessResult = JSON.parse(line.slice(12))
      }
      if (harnessResult === null) {
        harnessResult = { status: 'CRASH', message: killed ? `killed after ${timeoutMs + 15000} ms` : `exit ${code}${signal ? ` (${signal})` : ''}: ${stderr.trim().split('\n').slice(-5).join(' | ')}` }
      }
      resolve({ results, harness: harnessResult })
    })
  })
}

async function main () {
  const o = parseArgs(process.argv.slice(2))
  const got = await wptFiles(o.wpt)
  if (!got.dir) {
    console.log(`wpt-web-locks: skipped, no web-platform-tests here: ${got.why}`)
    return 0
  }
  const ctx = {}
  let cluster = null
  let regionName = null
  if (o.manager === 'region') {
    const NODE_MAJOR = Number(process.versions.node.split('.')[0])
    if (process.platform !== 'linux' || NODE_MAJOR < 16) {
      console.log(`wpt-web-locks: skipped, a region's locks need Linux and Node 16+ (${process.platform}, ${process.versions.node})`)
      return 0
    }
  }
  if (o.manager === 'postgres') {
    if (o.pgUrl) {
      ctx.pgUrl = o.pgUrl
    } else {
      const pgCluster = require('./pg-cluster')
      const why = pgCluster.unavailable()
      if (why) {
        console.log(`wpt-web-locks: skipped, no PostgreSQL here: ${why}`)
        return 0
      }
      cluster = await pgCluster.startPostgres()
      ctx.pgUrl = cluster.connectionString
    }
  }
  const files = (o.files || FILES)
  const report = { manager: o.manager, source: got.source, node: process.versions.node, files: [], passed: 0, total: 0, harnessErrors: 0 }
  try {
    for (const name of files) {
      const file = path.join(got.dir, name)
      if (!fs.existsSync(file)) {
        report.files.push({ file: name, results: [], harness: { status: 'MISSING', message: `${file} is not there` } })
        report.harnessErrors++
        continue
      }
      const fileCtx = { ...ctx }
      if (o.manager === 'region') {
        regionName = `wpt-${process.pid}-${name.replace(/\W/g, '-')}`.slice(0, 60)
        fileCtx.region = regionName
        const { SharedRegion } = require(ROOT)
        SharedRegion.unlink(regionName)
      }
      if (o.manager === 'postgres') fileCtx.namespace = `wpt-${process.pid}-${name}`
      const r = await runChildFile(file, o.manager, fileCtx, o.timeout)
      if (o.manager === 'region') require(ROOT).SharedRegion.unlink(regionName)
      const passed = r.results.filter((x) => x.status === 'PASS').length
      report.files.push({ file: name, passed, total: r.results.length, results: r.results, harness: r.harness })
      report.passed += passed
      report.total += r.results.length
      if (r.harness.status !== 'OK') report.harnessErrors++
      if (!o.json) {
        const h = r.harness.status === 'OK' ? '' : `  harness ${r.harness.status}: ${r.harness.message}`
        console.log(`${name.padEnd(30)} ${passed}/${r.results.length}${h}`)
        for (const x of r.results) if (x.status !== 'PASS') console.log(`  ${x.status} ${x.name}: ${x.message}`)
      }
    }
  } finally {
    if (cluster !== null) await cluster.stop()
  }
  if (o.json) console.log(JSON.stringify(report))
  else console.log(`${o.manager}: ${report.passed} of ${report.total} subtests pass, ${files.length} files, ${report.harnessErrors} with a harness error (Node ${process.versions.node}; ${got.source})`)
  return report.passed === report.total && report.harnessErrors === 0 ? 0 : 1
}

const { isMainThread, workerData } = require('worker_threads')
if (!isMainThread && workerData && workerData.wptWorker) {
  runWorker(workerData)
} else if (process.argv[2] === '--run-file') {
  const [file, kind, ctx, timeout] = process.argv.slice(3)
  runFile(file, kind, JSON.parse(ctx), Number(timeout)).catch((e) => {
    process.stdout.write(`WPT-HARNESS ${JSON.stringify({ status: 'ERROR', message: String(e && e.stack) })}\n`)
    process.exit(0)
  })
} else if (require.main === module) {
  main().then((code) => { process.exitCode = code }, (e) => {
    console.error(`wpt-web-locks: ${e && e.message}`)
    process.exitCode = 2
  })
}

module.exports = { FILES, WPT_COMMIT, wptFiles }
