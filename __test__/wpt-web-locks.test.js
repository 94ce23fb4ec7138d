'use strict'
// scripts/wpt-web-locks.js, the harness that runs the web-platform-tests for
// Web Locks, checked on this repository's own files in the WPT's style
// (fixtures/wpt-web-locks/; the WPT files are not part of the repository):
// right results for the threads' manager and a region's, subtests failing for
// a deliberately wrong manager, and the harness's own outcomes (failures, a
// timeout, a harness error) where they are known in advance. Where a copy of
// the WPT is at hand (WPT_DIR), its twelve files run against the threads'
// manager too: 70 of 70.
const assert = require('assert')
const fs = require('fs')
const path = require('path')
const { execFile } = require('child_process')
const { test, describe } = require('./harness')

const SCRIPT = path.join(__dirname, '..', 'scripts', 'wpt-web-locks.js')
const FIXTURES = path.join(__dirname, 'fixtures', 'wpt-web-locks')
const NODE_MAJOR = Number(process.versions.node.split('.')[0])
// The WPT files and this harness use AbortController, abort reasons and a global DOMException.
const skip = !fs.existsSync(SCRIPT)
  ? { skip: 'scripts/wpt-web-locks.js is not here (a package without the repository\'s scripts)' }
  : NODE_MAJOR < 18 ? { skip: `the harness needs Node 18+ (AbortSignal reasons, DOMException), this is ${process.versions.node}` } : {}

function run (args, timeoutMs = 120000) {
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, '--json', ...args], { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const line = stdout.trim().split('\n').pop()
      let report = null
      try { report = JSON.parse(line) } catch {}
      resolve({ code: err ? err.code : 0, report, stdout, stderr })
    })
  })
}

const statuses = (file) => Object.fromEntries(file.results.map((r) => [r.name, r.status]))
const show = (r) => `exit ${r.code}\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-2000)}`

describe('scripts/wpt-web-locks.js', skip, () => {
  test("this repository's WPT-style files pass against the threads' manager, the worker another client", { timeout: 120000 }, async () => {
    const r = await run(['--wpt', FIXTURES, '--files', 'rules,worker'])
    assert.ok(r.report, show(r))
    assert.strictEqual(r.code, 0, show(r))
    assert.strictEqual(r.report.total, 8, show(r))
    assert.strictEqual(r.report.passed, 8, show(r))
    assert.strictEqual(r.report.harnessErrors, 0, show(r))
  })

  test("and against a region's manager (Linux)", { timeout: 120000, skip: process.platform !== 'linux' && 'regions: Linux' }, async () => {
    const r = await run(['--wpt', FIXTURES, '--files', 'rules,worker', '--manager', 'region'])
    assert.ok(r.report, show(r))
    assert.strictEqual(r.report.passed, 8, show(r))
    assert.strictEqual(r.code, 0, show(r))
  })

  test('a deliberately wrong manager fails subtests: the harness is not vacuous', { timeout: 120000 }, async () => {
    const r = await run(['--wpt', FIXTURES, '--files', 'rules,worker', '--manager', 'wrong', '--timeout', '5000'])
    assert.ok(r.report, show(r))
    assert.strictEqual(r.code, 1, show(r))
    const [rules, worker] = r.report.files
    const s = statuses(rules)
    for (const name of ['ifAvailable gets null while the name is held', 'bad requests reject as the spec says', 'steal: the holder rejects with an AbortError']) {
      assert.notStrictEqual(s[name], 'PASS', `${name}\n${show(r)}`)
    }
    assert.notStrictEqual(worker.results[0].status, 'PASS', show(r))
    assert.ok(r.report.passed <= r.report.total - 4, show(r))
  })

  test("the harness's outcomes: failed assertions, unreached_func, a timeout, the subtests after it, an unhandled rejection", { timeout: 60000 }, async () => {
    const r = await run(['--wpt', FIXTURES, '--files', 'harness', '--timeout', '3000'])
    assert.ok(r.report, show(r))
    assert.strictEqual(r.code, 1, show(r))
    const [file] = r.report.files
    for (const [name, status] of Object.entries(statuses(file))) {
      assert.strictEqual(status, name.split(':')[0], `${name}\n${show(r)}`)
    }
    assert.strictEqual(file.results.length, 9, show(r))
    assert.strictEqual(file.harness.status, 'ERROR', show(r))
    assert.match(file.harness.message, /nobody handles this/)
  })

  test('without the WPT files (no --wpt, nothing cached, no network) it says so in one line and exits 0', { timeout: 200000, skip: !process.env.WPT_OFFLINE_CHECK && 'set WPT_OFFLINE_CHECK=1 where GitHub is unreachable' }, async () => {
    const r = await new Promise((resolve) => {
      execFile(process.execPath, [SCRIPT], { timeout: 190000, env: { ...process.env, WPT_DIR: '', WPT_CACHE: path.join(require('os').tmpdir(), `wpt-empty-${process.pid}`) } }, (err, stdout) => resolve({ code: err ? err.code : 0, stdout }))
    })
    assert.strictEqual(r.code, 0)
    assert.match(r.stdout, /^wpt-web-locks: skipped, no web-platform-tests here: .+\n$/)
  })

  test('the WPT files themselves (WPT_DIR), against the threads\' manager: 70 of 70', { timeout: 180000, skip: !process.env.WPT_DIR && 'WPT_DIR is not set (a copy of the WPT repository or of its web-locks/ folder)' }, async () => {
    const r = await run(['--wpt', process.env.WPT_DIR])
    assert.ok(r.report, show(r))
    assert.strictEqual(r.report.total, 70, show(r))
    assert.strictEqual(r.report.passed, 70, show(r))
  })
})
