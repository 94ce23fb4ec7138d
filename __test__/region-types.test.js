'use strict'
// index.d.ts for shared regions, checked by TypeScript the way a user's
// code is: a correct use compiles, a wrong option and a wrong type do not.
const assert = require('assert')
const path = require('path')
const { test, describe } = require('./harness')
const { typeErrors } = require('./util')

const ROOT = path.join(__dirname, '..')
const MAJOR = Number(process.versions.node.split('.')[0])

describe('SharedRegion types (index.d.ts)', () => {
  test('a user of SharedRegion type-checks; a wrong option and a wrong use do not', { skip: MAJOR < 16 && 'TypeScript 6 needs Node 16+' }, () => {
    const ts = require(require.resolve('typescript', { paths: [ROOT] }))
    const check = (source) => {
      const file = path.join(ROOT, '__test__', 'region-types-check.ts')
      const options = { noEmit: true, strict: true, lib: ['lib.es2022.d.ts'], types: ['node'], target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }
      return typeErrors(ts, file, source, options)
    }
    const user = [
      "import { SharedRegion, SharedRegionError, wait, notify, waitAsync, type SharedRegionOptions, type SharedRegionErrorCode } from 'shared-futex'",
      "import { AsyncLock, Condition, Semaphore, RwLock, Barrier, WaitGroup, ManualResetEvent, AutoResetEvent, Once, Channel } from 'shared-futex'",
      "const options: SharedRegionOptions = { bytes: 4096, create: true, mode: 0o600, directory: '/dev/shm', processes: 8, waiters: 64 }",
      "const region = SharedRegion.open('types', options)",
      'const words = new Int32Array(region.buffer)',
      "const r: 'ok' | 'not-equal' | 'timed-out' = wait(words, 0, 0, 10)",
      'const n: number = notify(words, 0)',
      'const a = waitAsync(words, 0, 0)',
      'const slot: number = region.slot',
      'const gone: boolean = SharedRegion.unlink(region.name, { directory: "/dev/shm" })',
      "const held: Promise<number> = region.locks.request('migrate', { mode: 'shared' }, async (lock) => lock.name.length)",
      "const maybe: Promise<boolean> = region.locks.request('cron', { ifAvailable: true }, (lock) => lock !== null)",
      'const snapshot = region.locks.query().then((s) => s.held.map((h) => h.clientId))',
      'region.close()',
      "try { SharedRegion.open('x') } catch (e) { if (e instanceof SharedRegionError) { const c: SharedRegionErrorCode = e.code; void c } }",
      // Every primitive is made over a region's buffer (an ArrayBuffer before Node 24.16).
      'const b = region.buffer',
      'const lock = new AsyncLock(b, 0); const cond = new Condition(b, 8); const sem = new Semaphore(b, 16, 2)',
      'const rw = new RwLock(b, 32); const bar = new Barrier(b, 48, 2); const wg = new WaitGroup(b, 64)',
      'const ev = new ManualResetEvent(b, 80); const auto = new AutoResetEvent(b, 88); const once = new Once(b, 96)',
      'const ch = new Channel({ buffer: b, byteOffset: 1024, bytes: 1024 })',
      'export { r, n, a, slot, gone, held, maybe, snapshot, lock, cond, sem, rw, bar, wg, ev, auto, once, ch }'
    ].join('\n')
    assert.deepStrictEqual(check(user), [])
    assert.strictEqual(check("import { SharedRegion } from 'shared-futex'\nSharedRegion.open('x', { size: 5 })").length, 1)
    assert.strictEqual(check("import { SharedRegion } from 'shared-futex'\nnew SharedRegion()").length, 1)
    assert.strictEqual(check("import { SharedRegion } from 'shared-futex'\nconst b: SharedArrayBuffer = SharedRegion.open('x').buffer").length, 1)
  })
})
