'use strict'
// The script of the worker behind createSyncFn (lib/sync-call.js): loads
// the caller's module, whose serveSync(fn) starts answering requests.
// lib/sync-preload.js, loaded first, reports when it cannot serve.
const fs = require('fs')
const path = require('path')
const { workerData } = require('worker_threads')
const { pathToFileURL } = require('url')
const { setUp, report, serving } = require('./sync-preload')
const { internal } = require('./sync-call')

setUp()
// From here, a synchronous call of this thread is the module's, not a
// preload's (lib/sync-call.js refuses those).
globalThis[internal.MODULE_LOADING] = true

// Whether `file` is CommonJS as Node reads it: a .cjs file, or a .js file
// whose nearest package.json does not say "type": "module".
function isCommonJS (file) {
  const ext = path.extname(file)
  if (ext === '.cjs') return true
  if (ext !== '.js') return false
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    let text
    try {
      text = fs.readFileSync(path.join(dir, 'package.json'), 'utf8')
    } catch {
      if (path.dirname(dir) === dir) return true
      continue
    }
    try {
      return JSON.parse(text).type !== 'module'
    } catch {
      return true // Node's require fails on it with its own message
    }
  }
}

// A CommonJS file is required, as a Worker started on it runs it: import()
// would start Node's ES module loader, some milliseconds of a first call.
// Anything else is imported; a file whose extension Node's ES module loader
// does not know (a .ts file, where a require hook such as tsx's or
// ts-node/register is preloaded and module hooks do not reach a worker's
// import(), Node < 22) is required.
const load = () => {
  const file = workerData.file
  // (A file Node finds to be an ES module, by its syntax, where require()
  // does not take one: imported.)
  if (isCommonJS(file)) {
    return new Promise((resolve) => resolve(require(file))).catch((e) => {
      if (e === null || typeof e !== 'object' || (e.code !== 'ERR_REQUIRE_ESM' && e.code !== 'ERR_REQUIRE_ASYNC_MODULE')) throw e
      return import(pathToFileURL(file).href)
    })
  }
  return import(pathToFileURL(file).href).catch((e) => {
    if (e === null || typeof e !== 'object' || e.code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw e
    require(file)
  })
}

load().then(() => {
  if (!serving()) {
    report('start', new Error(`${workerData.file} did not call serveSync while loading`))
    process.exit(1)
  }
}, (e) => {
  report('start', e)
  process.exit(1)
})
