'use strict'
// SharedRegion (lib/region.js, src/region.rs, crates/futex-core/src/shared.rs,
// docs/region.md): a named mapping whose wait / notify / waitAsync work
// across processes. Everything here runs between real processes: this one,
// children started by child_process.fork, by cluster.fork and as plain `node`
// children (fixtures/region-child.js), each with a hard timeout. Nobody
// sleeps to synchronise: children mark what they did in the region's own
// words, and this process reads those and the queues' diagnostics
// (binding.regionInfo: `queued` counts the live waiters queued on an
// address, `recordsInUse` the waiter records every process holds).
//
// What is checked:
// - open / close / unlink, the buffer (a SharedArrayBuffer where Node can make
//   one over foreign memory, else an ArrayBuffer), one mapping and one slot
//   per process (also for its workers), every error code that a test can
//   provoke (NOT_FOUND, MISMATCH, VERSION, ACCESS even as root, NO_SPACE,
//   FULL, CLOSED, UNSUPPORTED), bad names and options;
// - the ECMAScript semantics across processes: a waiter of one process woken
//   by another's notify, exact counts, FIFO order per address, timeouts,
//   'not-equal', waitAsync promises, BigInt64Array, addresses kept apart,
//   blocking in a worker thread, SharedArrayBuffer and ArrayBuffer mixed;
// - robustness: a process killed with SIGKILL while waiting (blocked in a
//   worker, or with pending waitAsync) is not counted and its wake-up goes to
//   the next live waiter; process slots and waiter records of dead processes
//   are reused; and two randomized stresses (scaled by
//   SHARED_FUTEX_STRESS_SCALE): waiters killed at a random moment, and
//   processes killed at a random point of a wait / notify loop, after which
//   nobody is stuck, every count is exact and no record stays taken.
//
// Where regions do not work (not Linux; Node 12 and 14, whose Atomics
// refuse the ArrayBuffer they would get) the file checks that `open` says so
// with ERR_REGION_UNSUPPORTED, and skips the rest.
const assert = require('assert')
const cluster = require('cluster')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawn, fork } = require('child_process')
const { Worker } = require('worker_threads')
const { test, describe } = require('./harness')
const { until, removeDir, stressRounds, transcript, capture, regionsUnsupported, regionSkip, runChild } = require('./util')
const shared = require('..')
const binding = require('../lib/native')

const { SharedRegion, SharedRegionError, wait, notify, waitAsync } = shared
const ROOT = path.join(__dirname, '..')
const FIXTURE = path.join(__dirname, 'fixtures', 'region-child.js')
// Where regions live by default (lib/region.js).
const SHM = { win32: os.tmpdir(), darwin: '/tmp' }[process.platform] || '/dev/shm'
const HARD_TIMEOUT = 20000
const LONG = { timeout: 60000 }

const unsupported = regionsUnsupported()
const skip = regionSkip()

// Whether `unshare --pid` can make a pid namespace here (root, util-linux).
function unshareSkip () {
  const r = require('child_process').spawnSync('unshare', ['--pid', '--fork', '--kill-child', 'true'], { stdio: 'ignore' })
  return r.status === 0 ? false : 'unshare --pid is not available here'
}

// The watcher of deaths needs Linux 5.3 or later (pidfd_open).
function watcherSkip () {
  if (skip.skip) return skip.skip
  if (process.platform !== 'linux') return 'the watcher of deaths is Linux only'
  const [major, minor] = os.release().split('.').map(Number)
  return major > 5 || (major === 5 && minor >= 3) ? false : 'Linux before 5.3 has no pidfd'
}

// Node versions that must make a SharedArrayBuffer over a region (24.16+, 26.1+).
const [MAJOR, MINOR] = process.versions.node.split('.').map(Number)
const MUST_SHARE = MAJOR > 26 || (MAJOR === 26 && MINOR >= 1) || (MAJOR === 24 && MINOR >= 16)

let names = 0
const PREFIX = `t${process.pid}-`
const uniqueName = (what) => `${PREFIX}${++names}-${what}`
const fileOf = (name, directory) => path.join(directory || SHM, `shared-futex.${name}`)
const info = (ta, index) => binding.regionInfo(ta, index)

// Word indices of the bookkeeping (fixtures/region-child.js): the futex
// words the tests wait on are 0 to 63.
const ORDER = 100 // count, then the ids (+1) of woken waiters in order
const DONE = 200 // outcome codes by id (+ k)
const READY = 400 // "my next call is my wait" by id (+ k)
const SLOTS = 500 // slot + 1 by id
const RELEASE = 600 // hold: leave when not 0
const FINAL = 610 // loop: the last wait
const STOP = 620 // loop: stop when not 0
const TURNS = 630 // loop: turns by id
const CODE = { ok: 1, 'timed-out': 2, 'not-equal': 3, error: 9 }

// --- child processes --------------------------------------------------------

// Starts fixtures/region-child.js with `spec`: via 'spawn' (a plain node
// child, default), 'fork' (child_process.fork), 'cluster' (cluster.fork), or
// 'shell' (/bin/sh -c opts.shell, which ends in `exec node fixture spec`).
// Every child has a hard timeout. `exited` resolves with
// { code, signal, stdout, stderr, timedOut, result } once it is gone.
function launch (spec, opts) {
  const o = opts || {}
  const via = o.via || 'spawn'
  const json = JSON.stringify(spec)
  const env = Object.assign({}, process.env, o.env || {})
  let child
  if (via === 'fork') {
    child = fork(FIXTURE, [json], { silent: true, execArgv: [], env })
  } else if (via === 'cluster') {
    const setup = cluster.setupPrimary || cluster.setupMaster
    setup.call(cluster, { exec: FIXTURE, args: [], silent: true, execArgv: [] })
    child = cluster.fork(Object.assign({ SHARED_FUTEX_REGION_CHILD: json }, o.env || {})).process
  } else if (via === 'shell') {
    child = spawn('/bin/sh', ['-c', o.shell, process.execPath, FIXTURE, json], { stdio: ['ignore', 'pipe', 'pipe'], env })
  } else {
    child = spawn(process.execPath, [FIXTURE, json], { stdio: ['ignore', 'pipe', 'pipe'], env })
  }
  let done = false
  const exited = capture(child, o.timeoutMs || HARD_TIMEOUT, true).then((r) => {
    done = true
    return Object.assign(r, { via })
  })
  return { child, spec, via, exited, done: () => done, kill: (signal) => { if (!done) child.kill(signal || 'SIGKILL') } }
}

// A child's run that must have ended by itself, with exit code 0 and a result.
async function finished (h) {
  const r = await h.exited
  assert.ok(!r.timedOut && r.code === 0 && r.result, `${h.spec.role} child (${h.via}): ${transcript(r)}`)
  return r.result
}

// A child killed with SIGKILL (it must not have ended otherwise).
async function killed (h) {
  h.kill('SIGKILL')
  const r = await h.exited
  assert.strictEqual(r.signal, 'SIGKILL', `the victim died of SIGKILL: ${transcript(r)}`)
  return r
}

// Runs `fn` with a fresh region `name` opened here with `options` and a
// launcher whose children open it with the same options. Afterwards every
// child still running is killed and the name is unlinked.
async function withRegion (what, options, fn) {
  const name = uniqueName(what)
  const region = SharedRegion.open(name, options)
  const words = new Int32Array(region.buffer)
  const started = []
  const start = (spec, opts) => {
    const h = launch(Object.assign({ name, options }, spec), opts)
    started.push(h)
    return h
  }
  try {
    return await fn({ name, region, words, start })
  } finally {
    for (const h of started) h.kill('SIGKILL')
    await Promise.all(started.map((h) => h.exited))
    SharedRegion.unlink(name, options && options.directory !== undefined ? { directory: options.directory } : undefined)
  }
}

// Resolves once `ta[index]` has `n` live waiters queued (of any process).
const untilQueued = (ta, index, n, what) =>
  until(() => info(ta, index).queued === n, `${n} waiter(s) queued on [${index}]${what ? ` (${what})` : ''}`)

// Resolves once no process holds a waiter record of the region of `ta`.
const untilNoRecords = (ta) => until(() => info(ta, 0).recordsInUse === 0, 'every waiter record to be free')

// A waitAsync promise, awaited with the event loop held open: like V8's, a
// pending waiter does not keep a process alive, and the notify that settles
// it may come from another process while this one has nothing else to do.
function alive (promise) {
  const timer = setInterval(() => {}, 1000)
  return promise.then((v) => { clearInterval(timer); return v }, (e) => { clearInterval(timer); throw e })
}

const codesAt = (words, at, n) => Array.from(words.subarray(at, at + n))

function assertRegionError (fn, code, message) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof SharedRegionError, `a SharedRegionError, got ${e && e.stack}`)
    assert.ok(e instanceof Error)
    assert.strictEqual(e.name, 'SharedRegionError')
    assert.strictEqual(e.code, code, e.message)
    if (message) assert.match(e.message, message)
    return true
  })
}

// --- where regions are not supported ----------------------------------------

describe('SharedRegion where it is not supported', unsupported ? {} : { skip: 'regions are supported here' }, () => {
  test('open throws ERR_REGION_UNSUPPORTED, after checking its arguments, and creates no file', () => {
    const name = uniqueName('unsupported')
    assertRegionError(() => SharedRegion.open(name, { bytes: 64 }), 'ERR_REGION_UNSUPPORTED',
      binding.regionSupported() ? /Node 16 or later/ : /Linux and Windows only/)
    assert.strictEqual(fs.existsSync(fileOf(name)), false)
    assert.throws(() => SharedRegion.open('../x', { bytes: 64 }), TypeError)
    assert.throws(() => SharedRegion.open(name, { bytes: 12 }), RangeError)
    assert.throws(() => SharedRegion.open(name, { bites: 64 }), TypeError)
  })
})

// --- the API, in this process and against others ----------------------------

describe('SharedRegion: open, close, unlink, errors', skip, () => {
  test('open creates the file and maps it zeroed: buffer, name, path, bytes, slot', () => {
    const name = uniqueName('open')
    const file = fileOf(name)
    assert.strictEqual(fs.existsSync(file), false)
    try {
      const region = SharedRegion.open(name, { bytes: 4096 })
      assert.ok(region instanceof SharedRegion)
      assert.strictEqual(region.name, name)
      assert.strictEqual(region.path, file)
      assert.strictEqual(region.bytes, 4096)
      assert.ok(Number.isInteger(region.slot) && region.slot >= 0 && region.slot < 256, `slot ${region.slot}`)
      const buffer = region.buffer
      assert.strictEqual(region.buffer, buffer, 'the same buffer every time')
      assert.strictEqual(buffer.byteLength, 4096)
      assert.strictEqual(buffer instanceof SharedArrayBuffer, binding.regionMakesShared(),
        'a SharedArrayBuffer exactly where the addon can make one')
      if (!(buffer instanceof SharedArrayBuffer)) assert.ok(buffer instanceof ArrayBuffer)
      if (MUST_SHARE) assert.ok(buffer instanceof SharedArrayBuffer, `Node ${process.version} makes a SharedArrayBuffer`)
      const words = new Int32Array(buffer)
      assert.ok(words.every((w) => w === 0), 'a new region is zeroed')
      assert.strictEqual(Atomics.add(words, 5, 3), 0)
      assert.strictEqual(Atomics.compareExchange(words, 5, 3, 9), 3)
      assert.strictEqual(Atomics.exchange(words, 5, 1), 9)
      assert.strictEqual(Atomics.load(words, 5), 1)
      const big = new BigInt64Array(buffer)
      Atomics.store(big, 10, -(2n ** 40n))
      assert.strictEqual(Atomics.load(big, 10), -(2n ** 40n))
      const st = fs.statSync(file)
      assert.ok(st.isFile() && st.size > 4096, `the file holds a control block and the bytes (${st.size})`)
      assert.strictEqual(st.mode & 0o777, 0o600, 'mode 0o600 by default')
      assert.strictEqual(info(words, 0).slot, region.slot)
      assert.strictEqual(binding.regionInfo(new Int32Array(new SharedArrayBuffer(8)), 0), null, 'other memory is no region')
    } finally {
      assert.strictEqual(SharedRegion.unlink(name), true)
    }
    assert.strictEqual(fs.existsSync(file), false)
  })

  test('a second open in the same process shares the mapping and the slot; without bytes it takes the size of the file', () => {
    const name = uniqueName('twice')
    try {
      const a = SharedRegion.open(name, { bytes: 256 })
      const b = SharedRegion.open(name)
      const c = SharedRegion.open(name, { bytes: 256, create: false })
      assert.strictEqual(b.bytes, 256)
      assert.deepStrictEqual([b.slot, c.slot], [a.slot, a.slot])
      const [wa, wb, wc] = [a, b, c].map((r) => new Int32Array(r.buffer))
      Atomics.store(wa, 7, 42)
      assert.deepStrictEqual([Atomics.load(wb, 7), Atomics.load(wc, 7)], [42, 42], 'one memory')
      assert.strictEqual(info(wb, 0).slot, a.slot)
    } finally {
      SharedRegion.unlink(name)
    }
  })

  test('close: buffer throws ERR_REGION_CLOSED; other handles and views made before stay usable; close twice is fine', () => {
    const name = uniqueName('close')
    try {
      const a = SharedRegion.open(name, { bytes: 64 })
      const b = SharedRegion.open(name, { bytes: 64 })
      const view = new Int32Array(a.buffer)
      a.close()
      a.close()
      assertRegionError(() => a.buffer, 'ERR_REGION_CLOSED', new RegExp(name))
      assert.strictEqual(a.name, name)
      assert.strictEqual(a.path, fileOf(name))
      Atomics.store(view, 1, 5)
      assert.strictEqual(Atomics.load(new Int32Array(b.buffer), 1), 5)
      assert.strictEqual(wait(view, 1, 5, 1), 'timed-out', 'a view made before close still waits')
    } finally {
      SharedRegion.unlink(name)
    }
  })

  test('a missing region without bytes, or with create: false, is ERR_REGION_NOT_FOUND and no file is made', () => {
    const name = uniqueName('missing')
    assertRegionError(() => SharedRegion.open(name), 'ERR_REGION_NOT_FOUND', new RegExp(name))
    assertRegionError(() => SharedRegion.open(name, {}), 'ERR_REGION_NOT_FOUND')
    assertRegionError(() => SharedRegion.open(name, { bytes: 64, create: false }), 'ERR_REGION_NOT_FOUND')
    assert.strictEqual(fs.existsSync(fileOf(name)), false)
    assert.strictEqual(SharedRegion.unlink(name), false)
  })

  test('unlink removes the name: open mappings stay usable, the next open makes a new region', () => {
    const name = uniqueName('unlink')
    const old = SharedRegion.open(name, { bytes: 64 })
    const oldWords = new Int32Array(old.buffer)
    Atomics.store(oldWords, 0, 42)
    assert.strictEqual(SharedRegion.unlink(name), true)
    assert.strictEqual(SharedRegion.unlink(name), false)
    assert.strictEqual(fs.existsSync(fileOf(name)), false)
    assertRegionError(() => SharedRegion.open(name), 'ERR_REGION_NOT_FOUND')
    try {
      const fresh = SharedRegion.open(name, { bytes: 128 })
      assert.strictEqual(fresh.bytes, 128, 'another region: its own size')
      assert.strictEqual(Atomics.load(new Int32Array(fresh.buffer), 0), 0, 'a new region is zeroed')
      assert.strictEqual(Atomics.load(oldWords, 0), 42, 'the old mapping lives on')
      assert.strictEqual(wait(oldWords, 0, 42, 1), 'timed-out')
      assert.strictEqual(notify(oldWords, 0), 0)
    } finally {
      assert.strictEqual(SharedRegion.unlink(name), true)
    }
  })

  test('bad names are TypeErrors for open and unlink; a name of 200 characters is fine', () => {
    const bad = ['', '../x', 'a/b', '/abs', 'x'.repeat(201), 'x'.repeat(300), '.hidden', '-x', 'a b', 'a\0b', 'é', 42, null, undefined, {}, Symbol('x')]
    for (const name of bad) {
      assert.throws(() => SharedRegion.open(name, { bytes: 64 }), TypeError, `open(${String(name)})`)
      assert.throws(() => SharedRegion.unlink(name), TypeError, `unlink(${String(name)})`)
    }
    for (const name of bad.filter((n) => typeof n === 'string' && n !== '' && !n.includes('/') && !n.includes('\0'))) {
      assert.strictEqual(fs.existsSync(fileOf(name)), false, `no file for ${name}`)
    }
    const long = `${PREFIX}${'x'.repeat(200 - PREFIX.length)}`
    assert.strictEqual(long.length, 200)
    try {
      assert.strictEqual(SharedRegion.open(long, { bytes: 64 }).name, long)
    } finally {
      assert.strictEqual(SharedRegion.unlink(long), true)
    }
  })

  test('bad options are TypeErrors or RangeErrors, unknown options TypeErrors, and nothing is created', () => {
    const name = uniqueName('options')
    const typeErrors = [null, 'x', 42, true,
      { bytes: '64' }, { bytes: 64n }, { bytes: null }, { bytes: 64, create: 'yes' }, { bytes: 64, create: 1 },
      { bytes: 64, mode: '600' }, { bytes: 64, directory: '' }, { bytes: 64, directory: 5 },
      { bytes: 64, processes: '2' }, { bytes: 64, waiters: null },
      { size: 64 }, { bytes: 64, Bytes: 64 }, { bytes: 64, dir: '/tmp' }]
    for (const options of typeErrors) {
      assert.throws(() => SharedRegion.open(name, options), TypeError, `open(name, ${show(options)})`)
    }
    const rangeErrors = [{ bytes: 0 }, { bytes: -8 }, { bytes: 4 }, { bytes: 12 }, { bytes: 1.5 }, { bytes: NaN }, { bytes: Infinity },
      { bytes: 2 ** 31 }, { bytes: 64, mode: -1 }, { bytes: 64, mode: 0o1000 }, { bytes: 64, mode: 0.5 },
      { bytes: 64, processes: 0 }, { bytes: 64, processes: 4097 }, { bytes: 64, processes: 1.5 },
      { bytes: 64, waiters: 0 }, { bytes: 64, waiters: 2 ** 24 + 1 }, { bytes: 64, waiters: -1 }]
    for (const options of rangeErrors) {
      assert.throws(() => SharedRegion.open(name, options), RangeError, `open(name, ${show(options)})`)
    }
    assert.strictEqual(fs.existsSync(fileOf(name)), false, 'no file for a refused call')
    for (const options of [null, 'x', 42, { directory: '' }, { directory: 5 }]) {
      assert.throws(() => SharedRegion.unlink(name, options), TypeError, `unlink(name, ${show(options)})`)
    }
    assert.throws(() => new SharedRegion(), TypeError)
    assert.throws(() => SharedRegion(), TypeError)
  })

  // lib/region.js checks the keys of open's options, not unlink's: a
  // misspelt `directory` unlinks the region of that name in /dev/shm.
  test('unlink: an unknown option is a TypeError, as for open', () => {
    const name = uniqueName('unlink-options')
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-region-'))
    try {
      SharedRegion.open(name, { bytes: 64 })
      assert.throws(() => SharedRegion.unlink(name, { directry: dir }), TypeError)
      assert.strictEqual(fs.existsSync(fileOf(name)), true, 'the region in /dev/shm is still there')
    } finally {
      SharedRegion.unlink(name)
      removeDir(dir)
    }
  })

  test('directory: the file lives there, another process opens it there, unlink takes the directory', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-region-'))
    try {
      await withRegion('directory', { bytes: 64, directory: dir }, async ({ name, region, words, start }) => {
        assert.strictEqual(region.path, fileOf(name, dir))
        assert.ok(fs.existsSync(fileOf(name, dir)))
        assert.strictEqual(fs.existsSync(fileOf(name)), false, 'nothing in /dev/shm')
        Atomics.store(words, 3, 1234)
        const r = await finished(start({ role: 'open', read: 3, write: [4, 5678] }, { via: 'fork' }))
        assert.strictEqual(r.read, 1234)
        assert.strictEqual(r.path, fileOf(name, dir))
        assert.strictEqual(Atomics.load(words, 4), 5678, 'one memory across the processes')
        assertRegionError(() => SharedRegion.open(name), 'ERR_REGION_NOT_FOUND', /\/dev\/shm/)
        assert.strictEqual(SharedRegion.unlink(name), false, 'not in /dev/shm')
      })
      assert.strictEqual(fs.readdirSync(dir).length, 0, 'unlinked from the directory')
    } finally {
      removeDir(dir)
    }
  })

  test('ERR_REGION_MISMATCH: another size (in this process or another), other slots or records, a file resized by something else', async () => {
    const name = uniqueName('mismatch')
    try {
      SharedRegion.open(name, { bytes: 64 })
      assertRegionError(() => SharedRegion.open(name, { bytes: 128 }), 'ERR_REGION_MISMATCH', /64/)
    } finally {
      SharedRegion.unlink(name)
    }
    // Made by another process (this one has nothing mapped): the header decides.
    const other = uniqueName('mismatch-layout')
    const layout = { bytes: 64, processes: 8, waiters: 64 }
    try {
      const made = await finished(launch({ role: 'open', name: other, options: layout }))
      assert.ok(made.opened, JSON.stringify(made))
      assertRegionError(() => SharedRegion.open(other, Object.assign({}, layout, { bytes: 128 })), 'ERR_REGION_MISMATCH')
      assertRegionError(() => SharedRegion.open(other, Object.assign({}, layout, { processes: 16 })), 'ERR_REGION_MISMATCH')
      assertRegionError(() => SharedRegion.open(other, Object.assign({}, layout, { waiters: 128 })), 'ERR_REGION_MISMATCH')
      // Grown by someone else (this process still has nothing mapped).
      const size = fs.statSync(fileOf(other)).size
      fs.truncateSync(fileOf(other), size + 4096)
      assertRegionError(() => SharedRegion.open(other, layout), 'ERR_REGION_MISMATCH', /changed by something else/)
      fs.truncateSync(fileOf(other), size)
      assert.strictEqual(SharedRegion.open(other, layout).bytes, 64, 'the right size again: it opens')
    } finally {
      SharedRegion.unlink(other)
    }
  })

  test('ERR_REGION_MISMATCH: a second open in the same process with other process slots or records', () => {
    const name = uniqueName('mismatch-here')
    try {
      SharedRegion.open(name, { bytes: 64, processes: 8, waiters: 64 })
      assertRegionError(() => SharedRegion.open(name, { bytes: 64, processes: 16, waiters: 64 }), 'ERR_REGION_MISMATCH')
      assertRegionError(() => SharedRegion.open(name, { bytes: 64, processes: 8, waiters: 128 }), 'ERR_REGION_MISMATCH')
      assert.strictEqual(SharedRegion.open(name, { bytes: 64, processes: 8, waiters: 64 }).bytes, 64)
    } finally {
      SharedRegion.unlink(name)
    }
  })

  test('ERR_REGION_VERSION: a region made by another version, and another version opening this one\'s', async () => {
    const name = uniqueName('version')
    const other = 'shared-futex 0.0.0-another'
    const { version } = require('../package.json')
    try {
      const made = await finished(launch({ role: 'open', name, file: fileOf(name), build: other, options: { bytes: 64 } }))
      assert.ok(made.opened, JSON.stringify(made))
      const message = new RegExp(`${other.replace(/\./g, '\\.')}[\\s\\S]*shared-futex ${version.replace(/\./g, '\\.')}`)
      assertRegionError(() => SharedRegion.open(name, { bytes: 64 }), 'ERR_REGION_VERSION', message)
      assertRegionError(() => SharedRegion.open(name), 'ERR_REGION_VERSION')
    } finally {
      SharedRegion.unlink(name)
    }
    await withRegion('version-mine', { bytes: 64 }, async ({ name }) => {
      const r = await finished(launch({ role: 'open', name, file: fileOf(name), build: other, options: { bytes: 64 } }))
      assert.strictEqual(r.error && r.error.message.split(':')[0], 'ERR_REGION_VERSION', JSON.stringify(r))
    })
  })

  test('ERR_REGION_ACCESS: a region whose mode refuses the process, and a directory it may not write (as root: a child that gives up root)', async () => {
    await withRegion('access', { bytes: 64, mode: 0o400 }, async ({ name }) => {
      assert.strictEqual(fs.statSync(fileOf(name)).mode & 0o777, 0o400, 'created with the mode asked for')
      const asRoot = typeof process.getuid === 'function' && process.getuid() === 0
      // As nobody, in sticky /dev/shm, root's file cannot be removed either.
      const r = await finished(launch({ role: 'open', name, options: { bytes: 64 }, dropPrivileges: true, unlink: asRoot }))
      assert.strictEqual(Boolean(r.dropped), asRoot)
      assert.ok(r.error, `refused: ${JSON.stringify(r)}`)
      assert.deepStrictEqual([r.error.name, r.error.code], ['SharedRegionError', 'ERR_REGION_ACCESS'], r.error.message)
      if (asRoot) assert.strictEqual(r.unlinkError && r.unlinkError.code, 'ERR_REGION_ACCESS', JSON.stringify(r))
      assert.ok(fs.existsSync(fileOf(name)))
    })
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-region-'))
    try {
      fs.chmodSync(dir, 0o500)
      const name = uniqueName('access-dir')
      const r = await finished(launch({ role: 'open', name, options: { bytes: 64, directory: dir }, dropPrivileges: true }))
      assert.strictEqual(r.error && r.error.code, 'ERR_REGION_ACCESS', JSON.stringify(r))
    } finally {
      fs.chmodSync(dir, 0o700)
      removeDir(dir)
    }
  })

  test('ERR_REGION_NO_SPACE: no room for the file (a file size limit), as an error and not a signal', { skip: fs.existsSync('/bin/sh') ? false : 'needs /bin/sh' }, async () => {
    const name = uniqueName('no-space')
    try {
      // 16 blocks of 512 bytes: far less than a control block.
      const h = launch({ role: 'open', name, options: { bytes: 64 } }, { via: 'shell', shell: 'ulimit -f 16 && exec "$0" "$@"' })
      const r = await finished(h)
      assert.strictEqual(r.error && r.error.code, 'ERR_REGION_NO_SPACE', JSON.stringify(r))
      assertRegionError(() => SharedRegion.open(name), 'ERR_REGION_NOT_FOUND', /not a region yet/)
      assert.strictEqual(SharedRegion.open(name, { bytes: 64 }).bytes, 64, 'made by the next open that has room')
    } finally {
      SharedRegion.unlink(name)
    }
  })

  test('a file whose creator died before its header was ready is not a region yet, and the next open with bytes lays it out', () => {
    const name = uniqueName('half-made')
    try {
      fs.writeFileSync(fileOf(name), Buffer.alloc(8192), { mode: 0o600 })
      assertRegionError(() => SharedRegion.open(name), 'ERR_REGION_NOT_FOUND', /not a region yet/)
      const region = SharedRegion.open(name, { bytes: 64 })
      assert.strictEqual(region.bytes, 64)
      const words = new Int32Array(region.buffer)
      assert.strictEqual(wait(words, 0, 0, 1), 'timed-out')
      assert.strictEqual(info(words, 0).recordsInUse, 0)
    } finally {
      SharedRegion.unlink(name)
    }
  })

  test('ERR_REGION_FULL: every process slot taken by a live process; a dead process\'s slot is taken again, more times than there are slots', LONG, async () => {
    await withRegion('slots', { bytes: 4096, processes: 2 }, async ({ region, words, start }) => {
      const holders = []
      let freeSlot = -1
      for (let i = 0; i < 6; i++) {
        const holder = start({ role: 'hold', id: i, slotOut: SLOTS, release: RELEASE + i }, { via: i % 2 ? 'spawn' : 'fork' })
        holders.push(holder)
        const slot = await until(() => Atomics.load(words, SLOTS + i), `holder ${i} to open`) - 1
        assert.notStrictEqual(slot, region.slot)
        if (freeSlot < 0) freeSlot = slot
        assert.strictEqual(slot, freeSlot, 'the one slot this process does not hold')
        if (i === 0 || i === 3) {
          const r = await finished(start({ role: 'open' }))
          assert.strictEqual(r.error && r.error.code, 'ERR_REGION_FULL', JSON.stringify(r))
        }
        // Every other holder is killed, the rest leave by themselves.
        if (i % 2 === 0) {
          await killed(holder)
        } else {
          Atomics.store(words, RELEASE + i, 1)
          notify(words, RELEASE + i)
          assert.deepStrictEqual(await finished(holder), { slot: freeSlot })
        }
      }
      await untilNoRecords(words)
    })
  })

  test('ERR_REGION_FULL at a wait: every waiter record in use (records are shared by the processes)', LONG, async () => {
    await withRegion('records', { bytes: 4096, waiters: 2 }, async ({ words, start }) => {
      const a = waitAsync(words, 0, 0)
      const b = waitAsync(words, 1, 0)
      assert.strictEqual(info(words, 0).recordsInUse, 2)
      assertRegionError(() => waitAsync(words, 2, 0), 'ERR_REGION_FULL', /waiters/)
      assertRegionError(() => wait(words, 2, 0, 10000), 'ERR_REGION_FULL')
      const r = await finished(start({ role: 'waiter', how: 'main', id: 0, done: DONE, waits: [{ index: 3, value: 0, timeout: 10000 }] }))
      assert.strictEqual(r.waits[0].outcome.code, 'ERR_REGION_FULL', JSON.stringify(r))
      assert.strictEqual(notify(words, 0), 1)
      assert.strictEqual(notify(words, 1), 1)
      assert.deepStrictEqual(await alive(Promise.all([a.value, b.value])), ['ok', 'ok'])
      await untilNoRecords(words)
      assert.strictEqual(wait(words, 2, 0, 1), 'timed-out', 'records free again')
    })
  })

  // Their behaviour across processes: region-lock.test.js,
  // region-primitives.test.js, region-channel.test.js.
  test('every primitive is made over region memory, at any offset', async () => {
    const { Mutex, Condition: AtomicsCondition } = require('../atomics-mutex')
    await withRegion('primitives', { bytes: 4096 }, async ({ region }) => {
      const buffer = region.buffer
      const make = {
        AsyncLock: (o) => new shared.AsyncLock(buffer, o),
        Condition: (o) => new shared.Condition(buffer, o),
        Semaphore: (o) => new shared.Semaphore(buffer, o, 1),
        RwLock: (o) => new shared.RwLock(buffer, o),
        Barrier: (o) => new shared.Barrier(buffer, o, 2),
        WaitGroup: (o) => new shared.WaitGroup(buffer, o, 0),
        ManualResetEvent: (o) => new shared.ManualResetEvent(buffer, o),
        AutoResetEvent: (o) => new shared.AutoResetEvent(buffer, o),
        Once: (o) => new shared.Once(buffer, o),
        'Atomics.Mutex': (o) => new Mutex(buffer, o),
        'Atomics.Condition': (o) => new AtomicsCondition(buffer, o)
      }
      for (const what of Object.keys(make)) {
        for (const offset of [0, 1024]) {
          assert.strictEqual(make[what](offset).byteOffset, offset, `${what} at ${offset}`)
        }
        new Uint8Array(buffer).fill(0)
      }
    })
  })
})

describe('SharedRegion: copies of the JavaScript layer in one thread', skip, () => {
  test('a hot reloader\'s new copy takes the buffer the old copy opened, and the old copy the new one\'s objects\' memory', async () => {
    const name = uniqueName('copies')
    const r = await runChild([path.join(__dirname, 'fixtures', 'region-copies.js'), name], { timeoutMs: 30000 })
    SharedRegion.unlink(name)
    assert.ok(r.code === 0 && r.result, transcript(r))
    assert.deepStrictEqual(r.result, {
      copies: true,
      semaphore: [true, false],
      semaphoreAfter: true,
      notify: 1,
      woken: 'ok',
      locked: true,
      channel: { hello: 'copies' },
      query: 0
    })
  })
})

// --- wait / notify / waitAsync across processes -----------------------------

describe('SharedRegion: wait, notify and waitAsync across processes', skip, () => {
  test('a child blocked in wait (child_process.fork) is woken by this process\'s notify, which counts it', async () => {
    await withRegion('fork-wait', { bytes: 4096 }, async ({ words, start }) => {
      const h = start({ role: 'waiter', how: 'main', id: 0, done: DONE, waits: [{ index: 0, value: 0 }] }, { via: 'fork' })
      await untilQueued(words, 0, 1)
      assert.strictEqual(info(words, 0).recordsInUse, 1)
      assert.strictEqual(notify(words, 0, 1), 1)
      const r = await finished(h)
      assert.strictEqual(r.waits[0].outcome, 'ok')
      assert.strictEqual(notify(words, 0), 0, 'nobody left')
      await untilNoRecords(words)
    })
  })

  test('waitAsync here is resolved by a plain node child\'s notify; its timeout, \'not-equal\' and timeout 0 answer here', async () => {
    await withRegion('async-here', { bytes: 4096 }, async ({ words, start }) => {
      const r = waitAsync(words, 0, 0)
      assert.strictEqual(r.async, true)
      const settled = alive(r.value)
      assert.deepStrictEqual([info(words, 0).queued, info(words, 0).pendingAsync], [1, 1])
      const n = await finished(start({ role: 'notify', index: 0, count: 5 }))
      assert.strictEqual(n.woken, 1)
      assert.strictEqual(await settled, 'ok')
      assert.strictEqual(info(words, 0).pendingAsync, 0)

      const t0 = Date.now()
      const timed = waitAsync(words, 1, 0, 60)
      assert.strictEqual(timed.async, true)
      assert.strictEqual(await alive(timed.value), 'timed-out')
      assert.ok(Date.now() - t0 >= 59, `after ${Date.now() - t0} ms`)
      assert.strictEqual(notify(words, 1), 0, 'a waiter that timed out is not counted')
      assert.deepStrictEqual(waitAsync(words, 1, 7), { async: false, value: 'not-equal' })
      assert.deepStrictEqual(waitAsync(words, 1, 0, 0), { async: false, value: 'timed-out' })
      await untilNoRecords(words)
    })
  })

  test('notify counts exactly the waiters it wakes, over processes blocked in their main thread, in a worker, or waiting async', LONG, async () => {
    await withRegion('counts', { bytes: 4096 }, async ({ words, start }) => {
      const kids = [
        start({ role: 'waiter', how: 'main', id: 0, done: DONE, waits: [{ index: 0, value: 0 }] }, { via: 'spawn' }),
        start({ role: 'waiter', how: 'worker', id: 1, done: DONE, waits: [{ index: 0, value: 0 }] }, { via: 'fork' }),
        start({ role: 'waiter', how: 'async', id: 2, done: DONE, waits: [{ index: 0, value: 0 }, { index: 0, value: 0 }, { index: 1, value: 0 }] }, { via: 'spawn' }),
        start({ role: 'waiter', how: 'worker', id: 5, done: DONE, waits: [{ index: 0, value: 0 }] }, { via: 'spawn' })
      ]
      await untilQueued(words, 0, 5)
      await untilQueued(words, 1, 1)
      const woken = () => codesAt(words, DONE, 6).filter((c) => c === CODE.ok).length
      assert.strictEqual(notify(words, 0, 1), 1)
      await until(() => woken() === 1, 'one woken')
      assert.strictEqual(notify(words, 0, 2), 2)
      await until(() => woken() === 3, 'three woken')
      assert.strictEqual(notify(words, 0, 0), 0)
      assert.strictEqual(notify(words, 2), 0, 'an address nobody waits on')
      assert.strictEqual(info(words, 0).queued, 2)
      assert.strictEqual(notify(words, 0), 2)
      assert.strictEqual(notify(words, 0), 0)
      assert.strictEqual(info(words, 1).queued, 1, 'the waiter of [1] was not touched')
      assert.strictEqual(notify(words, 1, Infinity), 1)
      for (const h of kids) {
        const r = await finished(h)
        assert.ok(r.waits.every((w) => w.outcome === 'ok'), JSON.stringify(r))
      }
      assert.deepStrictEqual(codesAt(words, DONE, 6), [1, 1, 1, 1, 1, 1], 'each waiter woken once')
      await untilNoRecords(words)
    })
  })

  test('FIFO per address across processes: cluster workers (blocking, in a worker, async) and this process, woken oldest first', LONG, async () => {
    await withRegion('fifo', { bytes: 4096 }, async ({ words, start }) => {
      const hows = ['main', 'worker', 'async', 'main', 'worker']
      const kids = []
      let here = null
      let queued = 0
      for (let i = 0; i < hows.length; i++) {
        kids.push(start({ role: 'waiter', how: hows[i], id: i, order: ORDER, done: DONE, waits: [{ index: 0, value: 0 }] }, { via: 'cluster' }))
        await untilQueued(words, 0, ++queued, `cluster worker ${i}`)
        if (i === 2) {
          // This process queues third from last.
          here = alive(waitAsync(words, 0, 0).value).then((v) => {
            const at = Atomics.add(words, ORDER, 1)
            Atomics.store(words, ORDER + 1 + at, 100)
            return v
          })
          await untilQueued(words, 0, ++queued, 'this process')
        }
      }
      const expected = [1, 2, 3, 100, 4, 5]
      for (let k = 0; k < expected.length; k++) {
        assert.strictEqual(notify(words, 0, 1), 1, `notify #${k + 1}`)
        // A woken waiter takes its place (ORDER + 1) before it writes its
        // code there: wait for the code, then check nobody else woke.
        await until(() => Atomics.load(words, ORDER + 1 + k) !== 0, `waiter #${k + 1} to wake`)
        assert.strictEqual(Atomics.load(words, ORDER + 1 + k), expected[k], `woken #${k + 1}: ${codesAt(words, ORDER + 1, k + 1)}`)
        assert.strictEqual(Atomics.load(words, ORDER), k + 1, `one waiter woken by notify #${k + 1}`)
      }
      assert.strictEqual(notify(words, 0), 0)
      assert.strictEqual(await here, 'ok')
      for (const h of kids) assert.strictEqual((await finished(h)).waits[0].outcome, 'ok')
      await untilNoRecords(words)
    })
  })

  test('timeouts and \'not-equal\' in another process: a blocking wait and a waitAsync time out, a changed value is not waited for', async () => {
    await withRegion('timeouts', { bytes: 4096 }, async ({ words, start }) => {
      Atomics.store(words, 2, 7)
      const blocking = start({ role: 'waiter', how: 'main', id: 0, waits: [{ index: 0, value: 0, timeout: 150 }, { index: 2, value: 0 }, { index: 2, value: 7, timeout: 30 }] })
      const pending = start({ role: 'waiter', how: 'async', id: 1, waits: [{ index: 1, value: 0, timeout: 150 }, { index: 2, value: 0, timeout: 1000 }] }, { via: 'fork' })
      const b = await finished(blocking)
      assert.deepStrictEqual(b.waits.map((w) => w.outcome), ['timed-out', 'not-equal', 'timed-out'])
      assert.ok(b.waits[0].ms >= 149, `timed out after ${b.waits[0].ms} ms`)
      const a = await finished(pending)
      assert.deepStrictEqual(a.waits.map((w) => w.outcome), ['timed-out', 'not-equal'])
      assert.ok(a.waits[0].ms >= 149, `timed out after ${a.waits[0].ms} ms`)
      assert.strictEqual(notify(words, 0), 0, 'waiters that timed out are not counted')
      assert.strictEqual(notify(words, 1), 0)
      await untilNoRecords(words)
    })
  })

  test('BigInt64Array: 64-bit values compared whole, waiters woken across processes', async () => {
    await withRegion('bigint', { bytes: 4096 }, async ({ region, start }) => {
      const big = new BigInt64Array(region.buffer)
      const value = 0x100000005n
      Atomics.store(big, 3, value)
      const h = start({ role: 'waiter', how: 'worker', type: 'i64', id: 0, waits: [{ index: 3, value: '5', timeout: 10000 }, { index: 3, value: String(value) }] })
      await untilQueued(big, 3, 1)
      assert.strictEqual(notify(big, 3), 1)
      assert.deepStrictEqual((await finished(h)).waits.map((w) => w.outcome), ['not-equal', 'ok'], 'the high word counts')
      const here = alive(waitAsync(big, 4, 0n).value)
      const n = await finished(start({ role: 'notify', type: 'i64', index: 4 }))
      assert.strictEqual(n.woken, 1)
      assert.strictEqual(await here, 'ok')
    })
  })

  test('waiters of two processes on many addresses: each notify wakes only the waiter of its address', LONG, async () => {
    await withRegion('addresses', { bytes: 4096 }, async ({ words, start }) => {
      const N = 32
      const evens = []
      const odds = []
      for (let i = 0; i < N; i += 2) evens.push({ index: i, value: 0 })
      for (let i = 1; i < N; i += 2) odds.push({ index: i, value: 0 })
      const a = start({ role: 'waiter', how: 'async', id: 0, done: DONE, waits: evens })
      const b = start({ role: 'waiter', how: 'async', id: 0, done: DONE + 50, waits: odds }, { via: 'fork' })
      await until(() => Array.from({ length: N }, (_, i) => info(words, i).queued).every((q) => q === 1), 'one waiter on every address')
      const order = Array.from({ length: N }, (_, i) => i).sort(() => Math.random() - 0.5)
      const codeOf = (i) => words[i % 2 === 0 ? DONE + i / 2 : DONE + 50 + (i - 1) / 2]
      const woken = () => codesAt(words, DONE, N / 2).concat(codesAt(words, DONE + 50, N / 2)).filter((c) => c !== 0).length
      for (let k = 0; k < N; k++) {
        const i = order[k]
        assert.strictEqual(notify(words, 40 + (i % 8)), 0, 'nobody waits there')
        assert.strictEqual(notify(words, i), 1, `notify [${i}]`)
        await until(() => codeOf(i) !== 0, `the waiter of [${i}]`)
        assert.strictEqual(codeOf(i), CODE.ok)
        assert.strictEqual(woken(), k + 1, `only the waiter of [${i}] woke (order ${order.slice(0, k + 1)})`)
      }
      await finished(a)
      await finished(b)
      await untilNoRecords(words)
    })
  })

  test('a worker thread of this process opening the same name shares the slot; its blocked wait is woken by another process', async () => {
    await withRegion('worker-here', { bytes: 4096 }, async ({ name, region, words, start }) => {
      const worker = new Worker(FIXTURE, { workerData: { name, options: { bytes: 4096 }, id: 0, ready: READY, done: DONE, waits: [{ index: 0, value: 0 }] } })
      const result = new Promise((resolve, reject) => {
        worker.on('message', resolve)
        worker.on('error', reject)
        worker.on('exit', (code) => reject(new Error(`worker exited with ${code}`)))
      })
      try {
        await until(() => Atomics.load(words, READY) === 1, 'the worker to open the region')
        await untilQueued(words, 0, 1, 'the worker')
        const n = await finished(start({ role: 'notify', index: 0 }))
        assert.strictEqual(n.woken, 1)
        assert.notStrictEqual(n.slot, region.slot, 'the other process has its own slot')
        const r = await result
        assert.strictEqual(r.slot, region.slot, 'one slot per process, whatever the thread')
        assert.strictEqual(r.waits[0].outcome, 'ok')
      } finally {
        await worker.terminate()
      }
    })
  })

  test('a burst of notifies from another process while this thread runs without a pause: more than its bell can queue, and every waiter is woken', async () => {
    await withRegion('burst', { bytes: 4096 }, async ({ words, start }) => {
      const N = 200
      const FLAG = 900
      const outcomes = []
      for (let i = 0; i < N; i++) {
        const r = waitAsync(words, i, 0)
        assert.strictEqual(r.async, true)
        outcomes.push(r.value)
      }
      const h = start({ role: 'notify', indices: Array.from({ length: N }, (_, i) => i), flag: FLAG })
      // This thread's loop looks at nothing (its bell included) until the
      // child has notified every waiter, one call each: the bell's queue
      // (10 datagrams by default on Linux) overflows, the sends that fail
      // ring the doorbell, and every waiter must still be woken once.
      const limit = Date.now() + HARD_TIMEOUT
      while (Atomics.load(words, FLAG) === 0 && Date.now() < limit);
      assert.strictEqual(Atomics.load(words, FLAG), 1, 'the child notified every waiter in time')
      const n = await finished(h)
      assert.strictEqual(n.woken, N)
      assert.deepStrictEqual(await alive(Promise.all(outcomes)), Array(N).fill('ok'))
      await untilNoRecords(words)
    })
  })

  for (const bells of [true, false]) {
    const how = bells ? 'through each thread\'s bell' : 'through the process\'s listener (SHARED_FUTEX_NO_BELLS)'
    test(`async waiters of another process's main thread and of workers coming and going are woken ${how}; nothing stays open after them, nor at the process's exit`, LONG, async () => {
      await withRegion(`bells-${bells}`, { bytes: 8192 }, async ({ name, words }) => {
        const WORKERS = 6
        const [STEP, ABANDONED, LAST] = [1000, 900, 901]
        const env = Object.assign({}, process.env)
        if (bells) delete env.SHARED_FUTEX_NO_BELLS
        else env.SHARED_FUTEX_NO_BELLS = '1'
        const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'region-bells.js'), name, String(WORKERS)], { env, stdio: ['ignore', 'pipe', 'pipe'] })
        const exited = capture(child, 40000)
        for (let k = 0; k <= WORKERS; k++) {
          await untilQueued(words, k, 1, k === 0 ? 'the main thread' : `worker ${k}`)
          assert.strictEqual(notify(words, k, 1), 1, `element ${k}`)
        }
        await until(() => Atomics.load(words, STEP) === 2, 'the workers to be done')
        assert.strictEqual(notify(words, ABANDONED, 1), 0, 'a terminated worker\'s waiter is gone')
        const r = await exited
        assert.deepStrictEqual([r.code, r.signal, r.timedOut], [0, null, false], r.stderr)
        assert.deepStrictEqual(r.result.outcomes, [...Array(WORKERS + 1).fill('ok'), 'queued'])
        if (r.result.fds[0] >= 0) assert.strictEqual(r.result.fds[1], r.result.fds[0], 'descriptors after the workers (their bells closed with them)')
        const { bells: got, rings } = r.result
        if (bells && process.platform === 'linux') {
          assert.ok(got.every((b) => b > 0), `a bell for every thread: ${got}`)
          assert.strictEqual(new Set(got).size, got.length, `a bell of its own for every thread: ${got}`)
          // (A notify that lands between a waiter's queueing and the end of
          // its waitAsync call is delivered there: its byte may stay unread.)
          assert.ok(rings > 0, `the bells rang ${rings} times`)
        } else {
          assert.ok(got.every((b) => b === 0), `no bells: ${got}`)
          assert.strictEqual(rings, 0)
        }
        assert.strictEqual(notify(words, LAST, 1), 0, 'the waiter pending at the exit is gone with its process')
        await untilNoRecords(words)
      })
    })
  }

  test('a SharedArrayBuffer over a region posted to a worker, and an ArrayBuffer over it in another process, work together', { skip: binding.regionMakesShared() ? false : 'the buffer is an ArrayBuffer here' }, async () => {
    await withRegion('mixed', { bytes: 4096 }, async ({ region, words, start }) => {
      assert.ok(region.buffer instanceof SharedArrayBuffer)
      const worker = new Worker(`
        const { parentPort, workerData } = require('worker_threads')
        const { wait } = require(workerData.root)
        parentPort.postMessage(wait(new Int32Array(workerData.buffer), 0, 0))
      `, { eval: true, workerData: { root: ROOT, buffer: region.buffer } })
      const outcome = new Promise((resolve, reject) => { worker.on('message', resolve); worker.on('error', reject) })
      try {
        await untilQueued(words, 0, 1, 'the worker')
        const plain = { SHARED_FUTEX_NO_EXTERNAL_SAB: '1' }
        const n = await finished(start({ role: 'notify', index: 0 }, { env: plain }))
        assert.deepStrictEqual([n.woken, n.shared], [1, false], 'an ArrayBuffer in that process')
        assert.strictEqual(await outcome, 'ok')
        const h = start({ role: 'waiter', how: 'main', id: 0, waits: [{ index: 1, value: 0 }] }, { env: plain })
        await untilQueued(words, 1, 1)
        assert.strictEqual(notify(words, 1), 1)
        assert.strictEqual((await finished(h)).waits[0].outcome, 'ok')
      } finally {
        await worker.terminate()
      }
    })
  })
})

// --- robustness ----------------------------------------------------------------

describe('SharedRegion: processes killed with SIGKILL', skip, () => {
  test('a process killed while blocked in a worker is not counted: the wake-up goes to the next live waiter', async () => {
    await withRegion('kill-worker', { bytes: 4096 }, async ({ words, start }) => {
      const victim = start({ role: 'waiter', how: 'worker', id: 0, done: DONE, waits: [{ index: 0, value: 0 }] }, { via: 'fork' })
      await untilQueued(words, 0, 1, 'the victim')
      const survivor = start({ role: 'waiter', how: 'main', id: 1, done: DONE, waits: [{ index: 0, value: 0 }] })
      await untilQueued(words, 0, 2, 'the survivor')
      await killed(victim)
      assert.strictEqual(info(words, 0).queued, 1, 'the dead waiter is not counted as queued')
      assert.strictEqual(notify(words, 0, 1), 1)
      assert.strictEqual((await finished(survivor)).waits[0].outcome, 'ok')
      assert.strictEqual(notify(words, 0), 0)
      assert.deepStrictEqual(codesAt(words, DONE, 2), [0, CODE.ok])
      await untilNoRecords(words)
    })
  })

  test('a process killed with pending waitAsync promises is not counted on any of their addresses', async () => {
    await withRegion('kill-async', { bytes: 4096 }, async ({ words, start }) => {
      const victim = start({ role: 'waiter', how: 'async', id: 0, waits: [{ index: 0, value: 0 }, { index: 0, value: 0 }, { index: 1, value: 0 }, { index: 2, value: 0, timeout: 60000 }] })
      await untilQueued(words, 0, 2, 'the victim')
      await untilQueued(words, 2, 1, 'the victim')
      const survivor = start({ role: 'waiter', how: 'async', id: 1, done: DONE, waits: [{ index: 0, value: 0 }, { index: 1, value: 0 }] }, { via: 'fork' })
      await untilQueued(words, 0, 3, 'the survivor')
      await untilQueued(words, 1, 2, 'the survivor')
      assert.strictEqual(info(words, 0).recordsInUse, 6)
      await killed(victim)
      assert.deepStrictEqual([0, 1, 2].map((i) => info(words, i).queued), [1, 1, 0])
      assert.strictEqual(notify(words, 0, 1), 1)
      assert.strictEqual(notify(words, 1, 1), 1)
      assert.strictEqual(notify(words, 2), 0)
      assert.deepStrictEqual((await finished(survivor)).waits.map((w) => w.outcome), ['ok', 'ok'])
      assert.strictEqual(notify(words, 0), 0)
      await untilNoRecords(words)
    })
  })

  test('a wake-up given to a process that dies before taking it is counted (as for a thread that returned), and its record is taken back', LONG, async () => {
    // The victim is stopped (SIGSTOP) while queued, notified, then killed.
    for (const reuse of ['slot', 'search']) {
      await withRegion(`notified-dies-${reuse}`, { bytes: 4096, processes: 2, waiters: 8 }, async ({ region, words, start }) => {
        const victim = start({ role: 'waiter', how: 'main', id: 0, waits: [{ index: 0, value: 0 }] })
        await untilQueued(words, 0, 1, 'the victim')
        victim.kill('SIGSTOP')
        assert.strictEqual(notify(words, 0), 1, 'counted: it was queued when notified')
        await killed(victim)
        assert.strictEqual(info(words, 0).recordsInUse, 1, 'the dead process\'s notified record')
        if (reuse === 'slot') {
          // The next process takes the victim's slot (the only one free) and frees what it left.
          const r = await finished(start({ role: 'open' }))
          assert.notStrictEqual(r.opened.slot, region.slot)
          assert.strictEqual(info(words, 0).recordsInUse, 0)
        } else {
          // The searches for a free record take it back within one round of the records.
          for (let i = 0; i < 8; i++) assert.strictEqual(wait(words, 1, 0, 0.01), 'timed-out')
          assert.strictEqual(info(words, 0).recordsInUse, 0)
        }
        assert.strictEqual(notify(words, 0), 0)
      })
    }
  })

  // Linux 5.3+ (pidfd): each process's watcher of deaths follows the
  // others (src/region/watch.rs). A watching sleeper here, with nobody to
  // notify it, is woken by the death of another process of the region (or,
  // queueing after it, not queued at all): the count of ends moved. Without
  // the watcher nothing would move it, and the sleeper would only ever time
  // out (its slices) until the test's own timeout.
  test('a process killed with SIGKILL is learnt of at once: the count of ends moves and a watching sleeper here wakes', { skip: watcherSkip(), timeout: 60000 }, async () => {
    await withRegion('deaths', { bytes: 4096 }, async ({ words, start }) => {
      const { enqueueWatchingAsync, regionEnds } = require('../lib/futex').internal
      const holder = start({ role: 'hold', id: 0, slotOut: SLOTS, release: RELEASE })
      await until(() => Atomics.load(words, SLOTS), 'the other process to open the region')
      await until(() => info(words, 0).watched, 'this process\'s watcher to follow it')
      const ends = regionEnds(words)
      assert.strictEqual(info(words, 0).ends, ends)
      const first = enqueueWatchingAsync(words, 5, 0, ends, Infinity, true)
      assert.notStrictEqual(first, 'not-equal', 'nothing ended yet')
      await killed(holder)
      let outcome = await first.promise
      // A slice that ran out before the death (a slow machine): queue again
      // with the same count. Never a slice that ran out after it.
      while (outcome === 'timed-out') {
        assert.strictEqual(info(words, 0).ends, ends, 'the death came while it slept, and did not wake it')
        const q = enqueueWatchingAsync(words, 5, 0, ends, Infinity, true)
        outcome = q === 'not-equal' ? 'not-equal' : await q.promise
      }
      assert.ok(outcome === 'ok' || outcome === 'not-equal', outcome)
      assert.ok(info(words, 0).ends > ends, 'the death was counted')
      assert.strictEqual(words[5], 0, 'nobody notified: the death woke it')
    })
  })

  // A pidfd that has fired stays readable, and stays in the epoll set while
  // a child forked meanwhile (before its exec) still has it: a watcher that
  // only closed it counted the same death over and over, each time waking
  // every watching sleeper of the region.
  test('processes that come and go while this one spawns more: each is counted a few times, not a storm of ends', { skip: watcherSkip(), timeout: 120000 }, async () => {
    await withRegion('churn', { bytes: 4096 }, async ({ words, start }) => {
      assert.ok(info(words, 0).ends >= 0) // starts the watcher
      await until(() => info(words, 0).watched, 'this process\'s watcher to run')
      const ends = info(words, 0).ends
      const N = 24
      for (let i = 0; i < N; i++) {
        Atomics.store(words, SLOTS, 0)
        const h = start({ role: 'hold', id: 0, slotOut: SLOTS, release: RELEASE })
        await until(() => Atomics.load(words, SLOTS), `child ${i} to open the region`)
        await killed(h)
      }
      // Each: its slot claimed again (after the first) and its death, seen
      // by the pidfd or by a look at the slots.
      await until(() => info(words, 0).ends >= ends + N, 'every death to be counted')
      const counted = info(words, 0).ends - ends
      assert.ok(counted <= 3 * N, `${counted} ends counted for ${N} processes`)
    })
  })

  // A pid means a process only in its pid namespace: a process of another
  // one (a container sharing the region's directory; here `unshare --pid`)
  // cannot be followed, and the region is not taken for watched (its
  // sleepers use short slices). Taken at its word, its pid would have named
  // a process here (its pid there is 1: this namespace's init).
  test('a process of another pid namespace is not followed: the region is not watched while it lives', { skip: watcherSkip() || unshareSkip(), timeout: 60000 }, async () => {
    await withRegion('pid-namespace', { bytes: 4096 }, async ({ words, start }) => {
      assert.ok(info(words, 0).ends >= 0) // starts the watcher
      await until(() => info(words, 0).watched, 'this process\'s watcher to run')
      const foreign = start({ role: 'hold', id: 0, slotOut: SLOTS, release: RELEASE }, { via: 'shell', shell: 'exec unshare --pid --fork --kill-child "$0" "$@"' })
      await until(() => Atomics.load(words, SLOTS), 'the process of another pid namespace to open the region')
      await until(() => !info(words, 0).watched, 'the watcher to find a process it cannot follow')
      Atomics.store(words, RELEASE, 1)
      notify(words, RELEASE)
      const r = await foreign.exited
      assert.strictEqual(r.code, 0, transcript(r))
      await until(() => info(words, 0).watched, 'the region to be watched again once it is gone')
    })
  })

  test('the records of a process killed while waiting do not use up the region: others can still wait', async () => {
    await withRegion('dead-records', { bytes: 4096, waiters: 4 }, async ({ words, start }) => {
      const victim = start({ role: 'waiter', how: 'async', id: 0, waits: [0, 1, 2, 3].map(() => ({ index: 5, value: 0 })) })
      await untilQueued(words, 5, 4, 'the victim')
      await killed(victim)
      assert.strictEqual(info(words, 0).recordsInUse, 4)
      assert.strictEqual(wait(words, 0, 0, 1), 'timed-out', 'a wait here finds a record')
      const r = await finished(start({ role: 'waiter', how: 'main', id: 1, waits: [{ index: 1, value: 0, timeout: 1 }] }))
      assert.strictEqual(r.waits[0].outcome, 'timed-out', JSON.stringify(r))
    })
  })

  // Rounds of N waiter processes (blocking, blocking in a worker, or
  // async; spawned or forked) on one address; one of them is killed at a
  // random moment: before it opened the region, while it opens, just before
  // or just after it queued. Then the survivors are notified one by one:
  // every notify wakes exactly one of them, none is left, and every record
  // is free again. A region of 6 slots for 4 processes a round plus this
  // one: the slots of the dead and the gone are taken again all along.
  test('randomized: waiters killed with SIGKILL at a random moment; the survivors\' counts are exact and no record stays taken', { timeout: 120000 }, async (t) => {
    const rounds = stressRounds(20)
    const N = 4
    const waiters = 64
    const stats = { early: 0, queued: 0, sweeps: 0 }
    await withRegion('stress-waiters', { bytes: 4096, processes: 6, waiters }, async ({ words, name }) => {
      const options = { bytes: 4096, processes: 6, waiters }
      for (let round = 0; round < rounds; round++) {
        for (let i = ORDER; i < READY + N; i++) Atomics.store(words, i, 0)
        const hows = Array.from({ length: N }, () => ['main', 'worker', 'async'][Math.floor(Math.random() * 3)])
        const kids = hows.map((how, id) => launch({ role: 'waiter', name, options, how, id, ready: READY, done: DONE, waits: [{ index: 0, value: 0 }] },
          { via: Math.random() < 0.5 ? 'spawn' : 'fork' }))
        const v = Math.floor(Math.random() * N)
        const where = `round ${round}: ${hows.join(',')}, victim ${v}`
        try {
          // A random instant, not a synchronisation: when the victim dies.
          if (Math.random() < 0.5) {
            stats.early++
            await new Promise((resolve) => setTimeout(resolve, Math.random() * 150))
          } else {
            stats.queued++
            await until(() => Atomics.load(words, READY + v) === 1 || kids[v].done(), `${where}: the victim to reach its wait`)
            await new Promise((resolve) => setTimeout(resolve, Math.random() * 4))
          }
          await killed(kids[v])
          await untilQueued(words, 0, N - 1, `${where}: the survivors`)
          for (let k = 1; k < N; k++) {
            assert.strictEqual(notify(words, 0, 1), 1, `${where}: notify #${k}`)
            await until(() => codesAt(words, DONE, N).filter((c) => c === CODE.ok).length === k, `${where}: survivor #${k} to wake`)
          }
          assert.strictEqual(notify(words, 0), 0, `${where}: nobody left`)
          for (let id = 0; id < N; id++) {
            if (id === v) continue
            assert.strictEqual((await finished(kids[id])).waits[0].outcome, 'ok', where)
          }
          assert.strictEqual(words[DONE + v], 0, `${where}: the victim never woke`)
          await sweep(words, waiters, stats)
        } finally {
          for (const h of kids) h.kill('SIGKILL')
          await Promise.all(kids.map((h) => h.exited))
        }
      }
    })
    if (typeof t.diagnostic === 'function') t.diagnostic(`${rounds} rounds: ${stats.early} killed at a random instant, ${stats.queued} around their wait; ${stats.sweeps} needed the record search to free a record`)
  })

  // Rounds of 3 processes that wait (blocking and async, with short
  // timeouts) and notify at random on 8 addresses; one is killed when it
  // has run a random number of turns, anywhere: holding a bucket lock,
  // between taking a record and queueing it, notified and not yet awake...
  // The survivors must go on (a bucket lock the dead held is taken over),
  // then all wait without a time limit on one address, and one notify must
  // count exactly them.
  test('randomized: a process killed at a random point of a wait / notify loop leaves nobody stuck and nothing taken', { timeout: 120000 }, async (t) => {
    const rounds = stressRounds(8)
    const K = 3
    const waiters = 128
    const seen = []
    await withRegion('stress-loop', { bytes: 4096, processes: 6, waiters }, async ({ words, name }) => {
      const options = { bytes: 4096, processes: 6, waiters }
      const stats = { sweeps: 0 }
      for (let round = 0; round < rounds; round++) {
        Atomics.store(words, STOP, 0)
        for (let i = 0; i < K; i++) {
          Atomics.store(words, TURNS + i, 0)
          Atomics.store(words, TURNS + 8 + i, 0)
        }
        const seed = 1 + Math.floor(Math.random() * 0x7fffffff)
        const kids = Array.from({ length: K }, (_, id) =>
          launch({ role: 'loop', name, options, id, seed: seed + id, addresses: 0, count: 8, stop: STOP, turns: TURNS, final: FINAL }))
        const v = Math.floor(Math.random() * K)
        const target = 50 + Math.floor(Math.random() * 600)
        const where = `round ${round} (seed ${seed}): victim ${v} after ${target} turns`
        try {
          await until(() => Atomics.load(words, TURNS + v) >= target || kids[v].done(), `${where}: the victim's turns`)
          await killed(kids[v])
          const survivors = kids.filter((_, id) => id !== v)
          const base = survivors.map((h) => Atomics.load(words, TURNS + h.spec.id))
          await until(() => survivors.every((h, i) => Atomics.load(words, TURNS + h.spec.id) >= base[i] + 200),
            `${where}: the survivors to go on (turns ${survivors.map((h) => Atomics.load(words, TURNS + h.spec.id))}, from ${base})`)
          Atomics.store(words, STOP, 1)
          // Where each survivor is: 1 + its pending async waiters, -1 in its last wait (fixtures/region-child.js).
          const state = () => survivors.map((h) => Atomics.load(words, TURNS + 8 + h.spec.id)).join(', ')
          await until(() => info(words, FINAL).queued === K - 1 || survivors.some((h) => h.done()),
            `${where}: the survivors' last wait (states ${state()})`)
          assert.strictEqual(info(words, FINAL).queued, K - 1, `${where}: a survivor ended early (states ${state()})`)
          assert.strictEqual(notify(words, FINAL), K - 1, `${where}: exactly the survivors`)
          for (const h of survivors) {
            const r = await finished(h)
            assert.strictEqual(r.last, 'ok', where)
          }
          for (let a = 0; a < 8; a++) assert.strictEqual(notify(words, a), 0, `${where}: nobody left on [${a}]`)
          seen.push(Atomics.load(words, TURNS + v))
          await sweep(words, waiters, stats)
        } finally {
          for (const h of kids) h.kill('SIGKILL')
          await Promise.all(kids.map((h) => h.exited))
        }
      }
      if (typeof t.diagnostic === 'function') t.diagnostic(`${rounds} rounds, victims killed after ${seen.join(', ')} turns; ${stats.sweeps} needed the record search to free a record`)
    })
  })

  test('every region this file made is unlinked', () => {
    assert.deepStrictEqual(fs.readdirSync(SHM).filter((f) => f.startsWith(`shared-futex.${PREFIX}`)), [])
  })
})

// After a round: no record may stay taken. A dead process's queued records
// are freed by the notifies above; one it left claimed but not queued, or
// notified but not yet awake, by the searches for a free record (docs/region.md,
// "Robustness"): one wait per record passes every record once.
async function sweep (words, waiters, stats) {
  if (info(words, 0).recordsInUse !== 0) {
    stats.sweeps++
    for (let i = 0; i < waiters; i++) wait(words, 63, 0, 0.01)
  }
  assert.strictEqual(info(words, 0).recordsInUse, 0, 'every waiter record free')
}

function show (v) {
  if (typeof v === 'bigint') return `${v}n`
  try {
    return JSON.stringify(v, (k, x) => typeof x === 'bigint' ? `${x}n` : x)
  } catch (e) {
    return String(v)
  }
}
