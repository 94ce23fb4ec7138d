'use strict'
// The `test` package (node:test for old Node) is written for Node 14+: it
// uses `?.`, `??`, private methods and `node:`-prefixed requires, which Node
// 12 cannot parse or resolve. For Node 12 the matrix runs a copy of it
// compiled down to ES2019 with TypeScript's transpiler (already installed as
// a dependency of @napi-rs/cli), made once into .node-versions/compat/, and
// preloads compat-preload.js, which points `require('test')` at that copy.
const fs = require('fs')
const path = require('path')
const { CACHE } = require('./node-versions')

const ROOT = path.join(__dirname, '..')
const COMPAT = path.join(CACHE, 'compat', 'node_modules', 'test')
const PRELOAD = path.join(__dirname, 'compat-preload.js')

function files (dir, out) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') files(file, out)
    } else {
      out.push(file)
    }
  }
  return out
}

// The package's fallback for a Node without timers/promises ignores the
// options of setTimeout(ms, value, { ref, signal }), so every per-test
// `timeout` became a ref'd timer that nothing cancels: Node 12 then waited
// out the longest one (a minute) after the last test. This fallback honours
// both options, as timers/promises does.
const TIMERS_PROMISES = `'use strict'
try {
  module.exports = require('timers/promises')
} catch (e) {
  const abortError = () => Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' })
  const setTimeoutPromise = (ms, value, options) => new Promise((resolve, reject) => {
    const signal = options && options.signal
    if (signal && signal.aborted) return reject(abortError())
    const onAbort = () => {
      clearTimeout(timer)
      reject(abortError())
    }
    const timer = setTimeout(() => {
      if (signal) signal.removeEventListener('abort', onAbort)
      resolve(value)
    }, ms)
    if (options && options.ref === false) timer.unref()
    if (signal) signal.addEventListener('abort', onAbort, { once: true })
  })
  module.exports = { setTimeout: setTimeoutPromise }
}
`

// Bumped when what prepare() makes changes.
const COMPAT_REVISION = 2

// Makes the ES2019 copy of the installed `test` package unless it is there
// already for the same versions. Returns the --require for Node 12.
function prepare () {
  const source = path.dirname(require.resolve('test/package.json', { paths: [ROOT] }))
  let ts
  try {
    ts = require(require.resolve('typescript', { paths: [ROOT] }))
  } catch (e) {
    throw new Error('Node 12 needs the typescript package (a dependency of @napi-rs/cli) to compile the test runner: run npm install')
  }
  const stamp = `test@${require(path.join(source, 'package.json')).version} typescript@${ts.version} r${COMPAT_REVISION}\n`
  const stampFile = path.join(COMPAT, '.compat-stamp')
  if (fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stamp) return PRELOAD
  fs.rmSync(COMPAT, { recursive: true, force: true })
  for (const file of files(source, [])) {
    const target = path.join(COMPAT, path.relative(source, file))
    fs.mkdirSync(path.dirname(target), { recursive: true })
    let text = fs.readFileSync(file, 'utf8')
    if (file.endsWith('.js')) {
      const shebang = text.startsWith('#!') ? text.slice(0, text.indexOf('\n') + 1) : ''
      text = shebang + ts.transpileModule(text.slice(shebang.length), {
        fileName: file,
        compilerOptions: { target: ts.ScriptTarget.ES2019, module: ts.ModuleKind.CommonJS, allowJs: true }
      }).outputText
    }
    fs.writeFileSync(target, text)
  }
  const timers = path.join(COMPAT, 'lib', 'timers', 'promises.js')
  if (!fs.existsSync(timers)) throw new Error(`the test package no longer has ${timers}: check test-compat.js`)
  fs.writeFileSync(timers, TIMERS_PROMISES)
  fs.writeFileSync(stampFile, stamp)
  return PRELOAD
}

module.exports = { prepare, COMPAT }
