'use strict'
// A real user of synckit switched to shared-futex/synckit: eslint-plugin-prettier
// (which calls prettier's async format from its synchronous rule through
// synckit's createSyncFn) lints a few hundred real files, once as installed
// (synckit from npm) and once with shared-futex/synckit in synckit's place
// (fixtures/synckit-eslint/switch.js); the lint results are the same.
const assert = require('assert')
const fs = require('fs')
const path = require('path')
const { test } = require('./harness')
const { switchedProject, realFiles, linter, outcome, ROOT } = require('./fixtures/synckit-eslint/switch')

const [MAJOR, MINOR] = process.versions.node.split('.').map(Number)
// eslint 10: Node ^20.19.0 || ^22.13.0 || >=24
const ESLINT_RUNS = (MAJOR === 20 && MINOR >= 19) || (MAJOR === 22 && MINOR >= 13) || MAJOR >= 24
const FILES = 300
// The repository's devDependencies: absent beside an installed package.
const INSTALLED = ['eslint', 'eslint-plugin-prettier', 'synckit'].every((name) =>
  fs.existsSync(path.join(ROOT, 'node_modules', name, 'package.json')))
const skip = !ESLINT_RUNS
  ? 'eslint 10 needs Node ^20.19, ^22.13 or 24+'
  : !INSTALLED && 'eslint, eslint-plugin-prettier and synckit (devDependencies of the repository) are not installed here'

test('eslint-plugin-prettier with shared-futex/synckit in place of synckit: the same lint results on 300 real files', { timeout: 300000, skip }, async () => {
  const project = switchedProject()
  try {
    const files = realFiles(FILES)
    assert.strictEqual(files.length, FILES)
    const installed = path.join(ROOT, 'node_modules', 'eslint-plugin-prettier')
    const expected = outcome(await linter(installed).lintFiles(files))
    const real = path.join(ROOT, 'node_modules', 'synckit') + path.sep
    assert.ok(Object.keys(require.cache).some((f) => f.startsWith(real)), 'the installed plugin ran the real synckit')
    assert.ok(!(path.join(ROOT, 'lib', 'synckit.js') in require.cache), 'shared-futex/synckit not loaded yet')

    const got = outcome(await linter(project.plugin).lintFiles(files))
    assert.ok(path.join(ROOT, 'lib', 'synckit.js') in require.cache, 'the switched plugin ran shared-futex/synckit')
    assert.deepStrictEqual(got, expected)

    // prettier ran on most of them (a file that does not parse never gets
    // to the rule) and found something to say on many.
    const parsed = expected.filter((r) => !r.messages.some((m) => m.ruleId === null))
    assert.ok(parsed.length >= FILES * 0.9, `${parsed.length} of ${FILES} files parsed`)
    assert.ok(expected.filter((r) => r.messages.some((m) => m.ruleId === 'prettier/prettier')).length >= 50)
  } finally {
    project.remove()
  }
})
