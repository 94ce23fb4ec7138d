'use strict'
// `shared-futex/synckit` (lib/synckit.js) against synckit's documented
// behaviour: one function per path, extension resolution, a number as the
// timeout, the SYNCKIT_* environment variables, TypeScript runners, errors,
// and the ES module entry. Each scenario runs in a child process
// (fixtures/synckit/child.js) with a hard timeout.
const assert = require('assert')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, typeErrors } = require('./util')

const HARD_TIMEOUT = 20000
const T = { timeout: HARD_TIMEOUT + 5000 }
const ROOT = path.join(__dirname, '..')
const DIR = path.join(__dirname, 'fixtures', 'synckit')
const CHILD = path.join(DIR, 'child.js')
const [MAJOR, MINOR] = process.versions.node.split('.').map(Number)
const atLeast = (major, minor) => MAJOR > major || (MAJOR === major && MINOR >= minor)
// tsx 4 runs on Node 18+.
const HAS_TSX = MAJOR >= 18
// No SYNCKIT_* of the environment this suite runs in leaks into a scenario.
const CLEAN = { SYNCKIT_TIMEOUT: '', SYNCKIT_EXEC_ARGV: '', SYNCKIT_TS_RUNNER: '', SYNCKIT_GLOBAL_SHIMS: '' }

async function scenario (name, env, nodeArgs) {
  const r = await runChild((nodeArgs || []).concat([CHILD, name]), { timeoutMs: HARD_TIMEOUT, env: Object.assign({}, CLEAN, env || {}) })
  assert.ok(!r.timedOut, `hung: killed after ${HARD_TIMEOUT} ms\n${transcript(r)}`)
  assert.strictEqual(r.code, 0, transcript(r))
  assert.ok(r.result !== undefined, transcript(r))
  return r.result
}

// synckit's rules are about where a worker file lives: no extension lookup
// for a path inside node_modules, and Node strips no types there. Run from an
// installed copy of the package (the release test), these scenarios would
// test that rule, not the module: they run from the checkout.
const INSTALLED = __dirname.split(path.sep).includes('node_modules')

describe('shared-futex/synckit', INSTALLED ? { skip: 'its fixtures are inside node_modules here, where synckit\'s lookup rules differ' } : {}, () => {
  test('one function per path: the same path, its file: URL, other options all give the first function', T, async () => {
    const r = await scenario('cache')
    assert.deepStrictEqual(r, {
      same: true,
      url: true,
      urlString: true,
      otherOptions: true,
      other: true,
      answer: { what: 'hi', value: 1, file: path.join(DIR, 'worker.js') }
    })
  })

  test('a path without extension finds worker.js; worker.js next to a worker.ts runs the .ts (tsx)', { timeout: T.timeout, skip: !HAS_TSX && 'tsx needs Node 18+' }, async () => {
    const r = await scenario('extensions')
    assert.deepStrictEqual(r, { none: path.join(DIR, 'worker.js'), tsFirst: { norm: 5, ts: true } })
  })

  test('tsx runs a .ts worker that is an ES module ("type": "module")', { timeout: T.timeout, skip: !HAS_TSX && 'tsx needs Node 18+' }, async () => {
    const r = await scenario('tsEsm')
    assert.strictEqual(r.square, 81)
    // Loaded as an ES module where module hooks reach a worker's import()
    // (Node 22+); before, through tsx's require hook (docs/synckit.md).
    assert.strictEqual(r.esm, MAJOR >= 22)
  })

  test('a number is the timeout: SyncCallTimeoutError, and the late answer is not taken for the next calls', T, async () => {
    const r = await scenario('timeout')
    assert.strictEqual(r.late.timeout, true, JSON.stringify(r))
    assert.strictEqual(r.next, 7)
    assert.strictEqual(r.after, 8)
  })

  test('calls are served as they come: after a call that timed out and still runs, the next answers; its late answer is dropped', T, async () => {
    const r = await scenario('concurrent')
    assert.strictEqual(r.hung.class, 'SyncCallTimeoutError', JSON.stringify(r))
    assert.strictEqual(r.hung.code, 'ERR_SYNC_CALL_TIMEOUT')
    assert.match(r.hung.message, /^Internal error: Atomics\.wait\(\) failed: timed-out: /) // synckit's words
    assert.strictEqual(r.next, 7)
    assert.strictEqual(r.released, 'released')
    assert.strictEqual(r.after, 8)
  })

  test('SYNCKIT_TIMEOUT and SYNCKIT_EXEC_ARGV: the default timeout and execArgv', T, async () => {
    const r = await scenario('env', { SYNCKIT_TIMEOUT: '100', SYNCKIT_EXEC_ARGV: '--no-warnings,--no-deprecation' })
    assert.deepStrictEqual(r.argv, ['--no-warnings', '--no-deprecation'])
    assert.strictEqual(r.timeout.timeout, true, JSON.stringify(r))
    assert.deepStrictEqual(r.defaults, { DEFAULT_TIMEOUT: 100, DEFAULT_EXEC_ARGV: ['--no-warnings', '--no-deprecation'], DEFAULT_GLOBAL_SHIMS: false })
  })

  test('SYNCKIT_TS_RUNNER=tsx runs a .ts worker', { timeout: T.timeout, skip: !HAS_TSX && 'tsx needs Node 18+' }, async () => {
    assert.deepStrictEqual(await scenario('envTs', { SYNCKIT_TS_RUNNER: 'tsx' }), { norm: 10, ts: true })
  })

  test('a SYNCKIT_TS_RUNNER, SYNCKIT_TIMEOUT or SYNCKIT_GLOBAL_SHIMS that means nothing: a TypeError naming the variable', T, async () => {
    const runner = await scenario('envBadRunner', { SYNCKIT_TS_RUNNER: 'deno' })
    assert.strictEqual(runner.class, 'TypeError')
    assert.match(runner.message, /SYNCKIT_TS_RUNNER/)
    const timeout = await scenario('envBadTimeout', { SYNCKIT_TIMEOUT: 'soon' })
    assert.strictEqual(timeout.class, 'TypeError')
    assert.match(timeout.message, /SYNCKIT_TIMEOUT/)
    const shims = await scenario('envBadShims', { SYNCKIT_GLOBAL_SHIMS: 'yes' })
    assert.strictEqual(shims.class, 'TypeError')
    assert.match(shims.message, /SYNCKIT_GLOBAL_SHIMS/)
  })

  test('errors thrown by the handler keep their class, message and properties; the worker serves on', T, async () => {
    const r = await scenario('errors')
    assert.strictEqual(r.custom.class, 'CustomError')
    assert.strictEqual(r.custom.message, 'thrown: 5')
    assert.strictEqual(r.custom.code, 'E_CUSTOM')
    assert.strictEqual(r.custom.isError, true)
    assert.strictEqual(r.type.class, 'TypeError')
    assert.strictEqual(r.still, 1)
  })

  test('bad arguments: TypeErrors (an unknown option too); a runner not installed: an Error naming its package', T, async () => {
    const r = await scenario('arguments')
    for (const key of ['relative', 'notString', 'unknown', 'badTimeout', 'badRunner', 'badExecArgv', 'badShims', 'runAsWorkerNotFn', 'badSecond', 'badShimEntry', 'compareNotString', 'compareNodeNotString', 'cachedUnknown', 'badShimConditional']) {
      assert.strictEqual(r[key].class, 'TypeError', `${key}: ${JSON.stringify(r[key])}`)
    }
    assert.match(r.unknown.message, /unknown option "timout"/)
    // Checked also where the path already has its function (which is returned for any valid options).
    assert.match(r.cachedUnknown.message, /unknown option "timout"/)
    for (const key of ['badTransfer', 'badFlag']) {
      assert.strictEqual(r[key].class, 'SyncWorkerError', `${key}: ${JSON.stringify(r[key])}`)
      assert.strictEqual(r[key].reason, 'start')
    }
    assert.match(r.badFlag.message, /--no-such-flag/)
    assert.match(r.compareNotString.message, /compareVersion: version1 must be a string/)
    assert.match(r.compareNodeNotString.message, /compareNodeVersion: version must be a string/)
    // synckit's messages, which its users and tests match.
    assert.match(r.relative.message, /`workerPath` must be absolute/)
    assert.strictEqual(r.badRunner.message, 'Unknown ts runner: deno')
    assert.strictEqual(r.notInstalled.class, 'Error')
    assert.match(r.notInstalled.message, /needs the package esbuild-register/)
    assert.match(r.runnerNotInstalled.message, /needs the package esbuild-runner/)
    assert.deepStrictEqual(r.compare, [1, 0, -1, 0])
    assert.strictEqual(r.runAsWorkerMain, 'undefined') // outside a worker: nothing, as synckit
    assert.deepStrictEqual(r.TsRunner, {
      Node: 'node', Bun: 'bun', TsNode: 'ts-node', EsbuildRegister: 'esbuild-register', EsbuildRunner: 'esbuild-runner', OXC: 'oxc', SWC: 'swc', TSX: 'tsx'
    })
  })

  test('a fresh module registry between loading the module and createSyncFn (jest resetModules): calls longer than a wait slice return', T, async () => {
    const r = await scenario('freshRegistry')
    assert.deepStrictEqual(r, { slow: { returned: 300 }, next: { returned: 'x' } })
  })

  test("tsRunner 'node': Node's type stripping where it has it (22.6+), else an Error saying so", T, async () => {
    const r = await scenario('nodeRunner')
    if (atLeast(22, 6)) {
      assert.deepStrictEqual(r, { returned: { norm: 13, ts: true } })
      const off = await scenario('nodeRunner', {}, ['--no-experimental-strip-types'])
      assert.match(off.message, /type stripping is disabled/)
    } else {
      assert.strictEqual(r.class, 'Error')
      assert.match(r.message, /needs Node 22\.6\+/)
    }
  })

  test('a worker that throws while loading: SyncWorkerError at the first call and every later one (no hang)', T, async () => {
    const r = await scenario('startFailure')
    for (const e of [r.first, r.second]) {
      assert.strictEqual(e.class, 'SyncWorkerError', JSON.stringify(e))
      assert.strictEqual(e.reason, 'start')
      assert.match(e.message, /broken at load/)
    }
  })

  test('globalShims: named, namespace, and a module that is not installed (left out)', { timeout: T.timeout, skip: !atLeast(20, 6) && 'needs Node 20.6+' }, async () => {
    assert.deepStrictEqual(await scenario('shims'), { perf: 'object', os: 'object', missing: 'undefined' })
  })

  test("ES modules: import { createSyncFn, runAsWorker } from 'shared-futex/synckit', an .mjs worker", { timeout: T.timeout, skip: MAJOR < 14 && 'needs ES modules' }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-synckit-'))
    try {
      fs.mkdirSync(path.join(dir, 'node_modules'))
      fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'shared-futex'), 'junction')
      fs.writeFileSync(path.join(dir, 'worker.mjs'), [
        "import { runAsWorker } from 'shared-futex/synckit'",
        'runAsWorker(async (a, b) => a + b)'
      ].join('\n'))
      fs.writeFileSync(path.join(dir, 'main.mjs'), [
        "import { createSyncFn, TsRunner } from 'shared-futex/synckit'",
        "import cjs from 'shared-futex/synckit'",
        "const add = createSyncFn(new URL('./worker.mjs', import.meta.url))",
        "console.log('RESULT ' + JSON.stringify({ sum: add(2, 3), tsx: TsRunner.TSX, same: cjs.createSyncFn === createSyncFn }))"
      ].join('\n'))
      const r = await runChild(['main.mjs'], { cwd: dir, timeoutMs: HARD_TIMEOUT, env: CLEAN })
      assert.ok(!r.timedOut, transcript(r))
      assert.strictEqual(r.code, 0, transcript(r))
      assert.deepStrictEqual(r.result, { sum: 5, tsx: 'tsx', same: true })
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('a real user: @prettier/sync switched to shared-futex/synckit', () => {
  test('prettier.format made synchronous gives what prettier gives, file by file', { timeout: 60000, skip: MAJOR < 14 && 'prettier 3 needs Node 14+' }, async () => {
    const prettier = require('prettier')
    const { prettier: sync } = require('./fixtures/synckit/prettier-sync')
    const files = ['lib/synckit.js', 'synckit.d.ts', 'docs/synckit.md', 'package.json', '__test__/fixtures/synckit/ts/worker.ts']
    for (const file of files) {
      const source = fs.readFileSync(path.join(ROOT, file), 'utf8')
      const options = { filepath: file, semi: false, singleQuote: true }
      const expected = await prettier.format(source, options)
      const got = sync.format(source, options)
      assert.strictEqual(typeof got, 'string', file)
      assert.strictEqual(got, expected, file)
      assert.strictEqual(sync.check(got, options), true, file)
    }
    // A syntax error keeps its class name and prettier's loc property.
    assert.throws(() => sync.format('let = ;', { parser: 'babel' }), (e) => e.name === 'SyntaxError' && e.loc !== undefined && e.loc.start.line === 1)
  })
})

describe('synckit.d.ts', () => {
  // synckit's own names type-check against shared-futex/synckit; a wrong
  // use does not.
  test('type-checks a synckit user, and rejects a wrong option and a wrong argument', { skip: MAJOR < 16 && 'TypeScript 6 needs Node 16+' }, () => {
    const ts = require(require.resolve('typescript', { paths: [ROOT] }))
    const check = (source) => {
      const file = path.join(ROOT, '__test__', 'synckit-types-check.ts')
      const options = { noEmit: true, strict: true, lib: ['lib.es2022.d.ts'], types: ['node'], target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }
      return typeErrors(ts, file, source, options)
    }
    const user = [
      "import { createSyncFn, runAsWorker, TsRunner, DEFAULT_GLOBAL_SHIMS_PRESET, type SynckitOptions, type GlobalShim, type Syncify } from 'shared-futex/synckit'",
      "const shims: GlobalShim[] = [...DEFAULT_GLOBAL_SHIMS_PRESET, { moduleName: 'node:os', globalName: 'os', named: null }]",
      "const options: SynckitOptions = { timeout: 1000, execArgv: [], tsRunner: TsRunner.TSX, transferList: [], globalShims: shims }",
      "const add = createSyncFn<(a: number, b: number) => Promise<number>>('/abs/worker.js', options)",
      'const sum: number = add(1, 2)',
      "const same: Syncify<(s: string) => Promise<string>> = createSyncFn('/abs/other.js', 500)",
      'runAsWorker(async (a: number, b: number) => a + b)',
      'void add.close()',
      'export { sum, same }'
    ].join('\n')
    assert.deepStrictEqual(check(user), [])
    assert.strictEqual(check("import { createSyncFn } from 'shared-futex/synckit'\ncreateSyncFn('/abs/w.js', { timout: 5 })").length, 1)
    assert.strictEqual(check("import { createSyncFn } from 'shared-futex/synckit'\nconst f = createSyncFn<(a: number) => Promise<number>>('/abs/w.js')\nf('x')").length, 1)
  })
})
