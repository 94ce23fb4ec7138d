'use strict'
// The polyfill's installation: what `require('shared-futex/polyfill')` and
// `import 'shared-futex/polyfill'` do to Atomics and worker_threads, the
// property shape of what they install, install({ force: true }), uninstall(),
// and the typings. Installation changes globals, so every case runs in a
// fresh child process (fixtures/polyfill-install.js) with a hard timeout.
//
// Modes (fixtures/polyfill-helpers.js): 'auto' everywhere, 'force' where the
// running Node has a native Atomics.waitAsync (16+).
const assert = require('assert')
const path = require('path')
const { test } = require('./harness')
const { runChild, transcript, modes, FIXTURES, ROOT } = require('./fixtures/polyfill-helpers')
const { typeErrors } = require('./util')

const NATIVE = typeof Atomics.waitAsync === 'function'
const MAJOR = Number(process.versions.node.split('.')[0])

async function fixture (args, opts) {
  const r = await runChild(args, opts)
  assert.ok(r.code === 0 && r.result !== undefined, transcript(r))
  return r
}

// The shape of a built-in Atomics method: a writable, configurable,
// non-enumerable function that is not a constructor.
const method = (name, length, same) => ({
  writable: true,
  enumerable: false,
  configurable: true,
  type: 'function',
  name,
  length,
  new: 'TypeError',
  same
})

for (const mode of modes()) {
  const t = (name, fn) => test(`polyfill installation (${mode}): ${name}`, fn)
  // Whether this mode installs: where waitAsync is missing, or when forced.
  const installs = mode === 'force' || !NATIVE
  let run
  const result = async () => {
    if (!run) run = fixture([path.join(FIXTURES, 'polyfill-install.js'), mode])
    return (await run).result
  }

  t('the package exports map serves polyfill.js with install, uninstall, isInstalled', async () => {
    const r = await result()
    assert.strictEqual(r.sameModule, true)
    assert.deepStrictEqual(r.exports, ['install', 'isInstalled', 'uninstall'])
  })

  t(installs ? 'installs Atomics.wait, notify and waitAsync with the built-ins\' shape'
    : 'leaves the native Atomics alone', async () => {
    const r = await result()
    assert.strictEqual(r.nativeWaitAsync, NATIVE)
    assert.strictEqual(r.installed, installs)
    if (mode === 'force') assert.strictEqual(r.forceResult, true)
    assert.strictEqual(r.featureDetected, true, 'typeof Atomics.waitAsync === "function"')
    assert.deepStrictEqual(r.after, {
      wait: method('wait', 4, !installs),
      notify: method('notify', 3, !installs),
      // `same` is null where there was no waitAsync before.
      waitAsync: method('waitAsync', 4, NATIVE ? !installs : null)
    })
    assert.strictEqual(r.installAgain, installs, 'install() again reports the same state')
  })

  t(installs ? 'wraps worker_threads.Worker in a subclass of the same name'
    : 'leaves worker_threads.Worker alone', async () => {
    const r = await result()
    assert.strictEqual(r.workerWrapped, installs)
    assert.strictEqual(r.workerName, 'Worker')
    assert.strictEqual(r.workerSubclass, true)
  })

  t('Atomics calls give the spec\'s results and errors', async () => {
    const r = await result()
    assert.deepStrictEqual(r.calls, {
      notEqual: { async: false, value: 'not-equal' },
      timedOut: { async: false, value: 'timed-out' },
      waitNotEqual: 'not-equal',
      waitTimedOut: 'timed-out',
      async: true,
      notifyNonShared: 0,
      notifyZero: 0,
      notifyOne: 1,
      notifyNone: 0
    })
    assert.strictEqual(r.asyncValue, 'ok')
    assert.deepStrictEqual(r.errors, {
      waitAsyncNonShared: 'TypeError',
      waitAsyncFloat: 'TypeError',
      waitAsyncIndex: 'RangeError',
      waitAsyncBigValue: 'TypeError',
      notifyIndex: 'RangeError',
      notifyBigCount: 'TypeError'
    })
  })

  t('uninstall() restores Atomics and worker_threads.Worker exactly', async () => {
    const r = await result()
    assert.strictEqual(r.uninstall, installs)
    assert.strictEqual(r.uninstallAgain, false)
    assert.strictEqual(r.installedAfterUninstall, false)
    const restored = {
      wait: method('wait', 4, true),
      notify: method('notify', 3, true),
      waitAsync: NATIVE ? method('waitAsync', 4, true) : null
    }
    assert.deepStrictEqual(r.restored, restored)
    assert.strictEqual(r.waitAsyncPresentAfter, NATIVE)
    assert.strictEqual(r.workerRestored, true)
    assert.strictEqual(r.reinstall, installs, 'installs again after uninstall')
    assert.strictEqual(r.reinstalled, installs)
    assert.deepStrictEqual(r.restoredTwice, restored)
  })
}

test('import \'shared-futex/polyfill\' installs it (ES module entry, same instance)', async () => {
  const code = [
    "import polyfill, { install, uninstall, isInstalled } from 'shared-futex/polyfill'",
    "import { createRequire } from 'module'",
    'const cjs = createRequire(process.cwd() + "/package.json")("shared-futex/polyfill")',
    'console.log("RESULT " + JSON.stringify({',
    '  type: typeof Atomics.waitAsync,',
    '  installed: isInstalled(),',
    '  same: polyfill === cjs && install === cjs.install && uninstall === cjs.uninstall',
    '}))'
  ].join('\n')
  const r = await fixture(['--input-type=module', '-e', code])
  assert.deepStrictEqual(r.result, { type: 'function', installed: !NATIVE, same: true })
})

test('`node --require shared-futex/polyfill` installs it before the program runs', async () => {
  const code = 'console.log("RESULT " + JSON.stringify({ type: typeof Atomics.waitAsync, ' +
    'installed: require("shared-futex/polyfill").isInstalled() }))'
  const r = await fixture(['--require', 'shared-futex/polyfill', '-e', code])
  assert.deepStrictEqual(r.result, { type: 'function', installed: !NATIVE })
})

// The typings compile against a TypeScript lib without ES2024's waitAsync
// (the global declaration is the polyfill's) and with it (they merge).
test('polyfill.d.ts type-checks with and without ES2024 lib', { skip: MAJOR < 16 && 'TypeScript 6 needs Node 16+' }, () => {
  const ts = require(require.resolve('typescript', { paths: [ROOT] }))
  const source = [
    "import { install, uninstall, isInstalled, InstallOptions } from 'shared-futex/polyfill'",
    'const options: InstallOptions = { force: true, workers: false }',
    'const installed: boolean = install(options) && isInstalled() && uninstall()',
    'const i32 = new Int32Array(new SharedArrayBuffer(8))',
    'const r = Atomics.waitAsync(i32, 0, 0, 10)',
    "const v: Promise<'ok' | 'timed-out'> | 'not-equal' | 'timed-out' = r.value",
    'const b = Atomics.waitAsync(new BigInt64Array(new SharedArrayBuffer(8)), 0, BigInt(0))',
    'export { installed, v, b }'
  ].join('\n')
  for (const lib of [['lib.es2020.d.ts'], ['lib.es2024.d.ts']]) {
    const file = path.join(ROOT, '__test__', 'polyfill-types-check.ts')
    const options = {
      noEmit: true,
      strict: true,
      lib,
      types: [],
      target: ts.ScriptTarget.ES2020,
      module: ts.ModuleKind.Node16,
      moduleResolution: ts.ModuleResolutionKind.Node16
    }
    assert.deepStrictEqual(typeErrors(ts, file, source, options), [], `with ${lib}`)
  }
})
