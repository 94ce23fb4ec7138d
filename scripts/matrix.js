'use strict'
// The version matrix: the whole test suite (__test__/*.test.js) on each
// supported Node major, with binaries from the npm registry (node-versions.js)
// and a runner that needs no `node --test` (run-suite.js).
//
//   npm run test:matrix                  Node 12, 14, 16, 18, 20, 22, 24
//   npm run test:matrix -- 14 20 24      some majors
//   npm run test:matrix -- 12 polyfill   only files whose name contains "polyfill"
//
// The polyfill's test files run their scenarios with { force: true } as well
// wherever the running Node has a native Atomics.waitAsync (16+).
// Ends with `N passed, N failed, N skipped` over all versions; exits 1 if any
// file failed.
const path = require('path')
const { VERSIONS, ensure } = require('./node-versions')
const { testFiles, runSuite, optionsFor } = require('./run-suite')

const log = (line) => console.log(line)

async function main () {
  const args = process.argv.slice(2)
  const majors = args.filter((a) => /^\d+$/.test(a)).map(Number)
  const filters = args.filter((a) => !/^\d+$/.test(a))
  if (majors.length === 0) majors.push(...Object.keys(VERSIONS).map(Number))
  const files = testFiles(filters)
  if (files.length === 0) throw new Error(`no test file matches ${filters.join(', ')}`)

  const started = Date.now()
  const nodes = await ensure(majors, log)
  const rows = []
  for (const major of majors) {
    const { bin, version } = nodes[major]
    log(`== Node ${version} (${path.relative(process.cwd(), bin) || bin}): ${files.length} files`)
    const t0 = Date.now()
    const { totals } = await runSuite(bin, files, optionsFor(major), (line) => log('  ' + line.replace(/\n/g, '\n  ')))
    rows.push({ version, totals, ms: Date.now() - t0 })
  }

  const sum = { passed: 0, failed: 0, skipped: 0 }
  log(`== matrix (${((Date.now() - started) / 1000).toFixed(0)} s)`)
  for (const { version, totals, ms } of rows) {
    sum.passed += totals.passed
    sum.failed += totals.failed
    sum.skipped += totals.skipped
    const failedFiles = totals.failedFiles.length ? ` [failed: ${totals.failedFiles.join(', ')}]` : ''
    log(`  Node ${version.padEnd(9)} ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped (${(ms / 1000).toFixed(0)} s)${failedFiles}`)
  }
  log(`matrix: ${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped`)
  return sum.failed === 0
}

main().then((ok) => { process.exitCode = ok ? 0 : 1 }, (e) => {
  console.error(e.stack || String(e))
  process.exitCode = 1
})
