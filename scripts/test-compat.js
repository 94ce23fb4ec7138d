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
  const stamp = `test@${require(path.join(source, 'package.json')).version} typescript@${ts.version}\n`
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
  fs.writeFileSync(stampFile, stamp)
  return PRELOAD
}

module.exports = { prepare, COMPAT }
