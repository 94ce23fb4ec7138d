'use strict'
// Every ```js block of README.md runs as printed, as a user would run it:
// each block is a file named by its first line (`// lock.js`, `// wait.mjs`),
// written into a temporary directory whose node_modules/shared-futex is a
// link to this checkout, and run with `node <file>` in a child process with a
// hard timeout. A block that another block of its section names (a worker's
// `'./lock-worker.js'`) is written beside it and runs as its worker; every
// other block is run itself. Each run must exit by itself with code 0,
// nothing on stderr, and print exactly the lines its blocks' comments
// announce (`// prints: 20000`), in any order across threads. A ```js block
// with no file name, or one that nothing runs, fails the test: an example
// that is not meant to run must not be a ```js block. A first line that says
// `runs on Linux, Node 16+` (either part alone too) is skipped elsewhere,
// with that reason.
const assert = require('assert')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript, removeDir } = require('./util')

const ROOT = path.join(__dirname, '..')
const README = path.join(ROOT, 'README.md')

// The ```js blocks of `text`: { section, name, code, line }.
function jsBlocks (text) {
  const headings = [...text.matchAll(/^## (.+)$/gm)].map((m) => ({ at: m.index, title: m[1] }))
  const blocks = []
  for (const m of text.matchAll(/^```js[ \t]*\n([\s\S]*?)^```[ \t]*$/gm)) {
    const heading = headings.filter((h) => h.at < m.index).pop()
    const first = /^\/\/ ([\w.-]+\.(?:js|mjs|cjs))\b/.exec(m[1])
    blocks.push({
      section: heading ? heading.title : '(before the first section)',
      name: first ? first[1] : null,
      code: m[1],
      line: text.slice(0, m.index).split('\n').length
    })
  }
  return blocks
}

// The lines a block says it prints: the text after `prints:` in a comment.
function announced (code) {
  const lines = []
  for (const l of code.split('\n')) {
    const m = /\/\/.*?\bprints: (.*\S)\s*$/.exec(l)
    if (m) lines.push(m[1])
  }
  return lines
}

// Whether `code` names the file `name` as a module path: './name'.
function names (code, name) {
  return code.includes(`'./${name}'`) || code.includes(`"./${name}"`)
}

// The runs: one per block that no other block of its section names, with
// the blocks it names (and those they name) as its companions.
function runs (blocks) {
  const result = []
  const sections = [...new Set(blocks.map((b) => b.section))]
  for (const section of sections) {
    const own = blocks.filter((b) => b.section === section)
    const entries = own.filter((b) => !own.some((o) => o !== b && names(o.code, b.name)))
    for (const entry of entries) {
      const group = [entry]
      for (let i = 0; i < group.length; i++) {
        for (const b of own) if (!group.includes(b) && names(group[i].code, b.name)) group.push(b)
      }
      result.push({ section, entry, files: group })
    }
  }
  return result
}

// Why a block cannot run here ("runs on Linux, Node 16+" in its first
// line), or false.
function cannotRunHere (code) {
  const first = code.split('\n')[0]
  const m = /\bruns on ([^:]*)$/.exec(first)
  if (m === null) return false
  for (const need of m[1].split(',').map((s) => s.trim())) {
    const node = /^Node (\d+)\+$/.exec(need)
    if (node !== null && Number(process.versions.node.split('.')[0]) < Number(node[1])) return `needs ${need}`
    if (need === 'Linux' && process.platform !== 'linux') return 'needs Linux'
  }
  return false
}

async function runBlocks (files, entry) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-readme-'))
  try {
    fs.mkdirSync(path.join(dir, 'node_modules'))
    // What `npm install shared-futex` gives: the package under node_modules.
    fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'shared-futex'), 'junction')
    for (const f of files) fs.writeFileSync(path.join(dir, f.name), f.code)
    return await runChild([entry.name], { cwd: dir, timeoutMs: 30000 })
  } finally {
    removeDir(dir)
  }
}

describe('README.md: every js block runs as printed', () => {
  const blocks = jsBlocks(fs.readFileSync(README, 'utf8'))
  const planned = runs(blocks)

  test('the README has js blocks, each a named file, each run (as itself or as a worker)', () => {
    assert.ok(blocks.length > 0, 'no ```js block found')
    for (const b of blocks) {
      assert.ok(b.name, `README.md:${b.line} (${b.section}): a js block must start with its file name, e.g. "// main.js"`)
    }
    for (const section of new Set(blocks.map((b) => b.section))) {
      const own = blocks.filter((b) => b.section === section).map((b) => b.name)
      assert.strictEqual(new Set(own).size, own.length, `${section}: two blocks name the same file`)
    }
    for (const b of blocks) {
      assert.ok(planned.some((r) => r.files.includes(b)), `README.md:${b.line} (${b.section}): ${b.name} is not run`)
    }
    for (const r of planned) {
      const expected = r.files.flatMap((f) => announced(f.code))
      assert.ok(expected.length > 0, `${r.section}: ${r.entry.name} announces nothing it prints ("// prints: …")`)
    }
  })

  for (const r of planned) {
    const others = r.files.slice(1).map((f) => f.name)
    const title = `${r.section}: node ${r.entry.name}${others.length ? ` (with ${others.join(', ')})` : ''} exits by itself and prints what its comments say`
    test(title, { timeout: 60000, skip: cannotRunHere(r.entry.code) }, async () => {
      assert.ok(r.entry.name, `README.md:${r.entry.line}: a js block without a file name`)
      const expected = r.files.flatMap((f) => announced(f.code))
      const result = await runBlocks(r.files, r.entry)
      assert.strictEqual(result.code, 0, transcript(result))
      assert.strictEqual(result.stderr, '', transcript(result))
      const printed = result.stdout.split('\n').filter((l) => l !== '')
      assert.deepStrictEqual(printed.slice().sort(), expected.slice().sort(), transcript(result))
    })
  }
})
