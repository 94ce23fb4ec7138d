'use strict'
// The guide's runnable examples (docs/guide.md, the README's sections in
// full) — each pair of `// main.js` and `// worker.js` blocks — run as a user would run them, in a child process
// with a hard timeout, with `require('shared-futex')` (and its subpaths)
// pointing at this checkout. Each must exit by itself, cleanly, printing
// what the guide says it prints. README.md's own blocks: readme-blocks.test.js.
const assert = require('assert')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, removeDir } = require('./util')

const ROOT = path.join(__dirname, '..')
const README = fs.readFileSync(path.join(ROOT, 'docs', 'guide.md'), 'utf8')

// What each example prints (its comments say so), by the section it is in.
const EXPECTED = {
  'AsyncLock, Condition, Semaphore': [/^30000$/m],
  RwLock: [/^300$/m],
  Barrier: [/^100 steps, all three in step$/m],
  WaitGroup: [/^every job done$/m],
  Events: [/^ready$/m],
  Once: [/^main thread filled the table: true$/m, /^(1046529\n){3}/m],
  'Atomics.Mutex shape': [/^the worker wrote 42$/m],
  'Channel and synchronous calls': [/^sum 500500$/m]
}

// The README's main.js / worker.js pairs, with the section each is in.
function examples () {
  const found = []
  let section = null
  let main = null
  const fence = /^```js\n([\s\S]*?)^```$/gm
  const headings = [...README.matchAll(/^## (.+)$/gm)].map((m) => ({ at: m.index, title: m[1] }))
  for (const m of README.matchAll(fence)) {
    const code = m[1]
    const heading = headings.filter((h) => h.at < m.index).pop()
    if (code.startsWith('// main.js')) {
      main = code
      section = heading.title
    } else if (code.startsWith('// worker.js') && main !== null && heading.title === section) {
      found.push({ section, main, worker: code })
      main = null
    }
  }
  return found
}

// `require('shared-futex')` and `require('shared-futex/x')` → this checkout.
function localised (code) {
  return code.replace(/require\('shared-futex(\/[a-z-]+)?'\)/g, (_, sub) =>
    `require(${JSON.stringify(path.join(ROOT, sub ? sub.slice(1) : ''))})`)
}

describe('docs/guide.md examples run as written', () => {
  const found = examples()
  test('every runnable example is checked, and every check has its example', () => {
    assert.deepStrictEqual(found.map((e) => e.section).sort(), Object.keys(EXPECTED).sort())
  })
  for (const e of found) {
    test(`${e.section}: main.js + worker.js exit by themselves and print what the README says`, { timeout: 60000 }, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-readme-'))
      try {
        fs.writeFileSync(path.join(dir, 'main.js'), localised(e.main))
        fs.writeFileSync(path.join(dir, 'worker.js'), localised(e.worker))
        const r = await runChild(['main.js'], { cwd: dir, timeoutMs: 30000 })
        assert.strictEqual(r.code, 0, transcript(r))
        assert.strictEqual(r.stderr, '', transcript(r))
        for (const expected of EXPECTED[e.section] || []) assert.match(r.stdout, expected, transcript(r))
      } finally {
        removeDir(dir)
      }
    })
  }
})
