'use strict'
// The script of the worker behind createSyncFn (lib/sync-call.js): loads
// the caller's module, whose serveSync(fn) starts answering requests.
// lib/sync-preload.js, loaded first, reports when it cannot serve.
const { workerData } = require('worker_threads')
const { pathToFileURL } = require('url')
const { setUp, report, serving } = require('./sync-preload')
const { internal } = require('./sync-call')

setUp()
// From here, a synchronous call of this thread is the module's, not a
// preload's (lib/sync-call.js refuses those).
globalThis[internal.MODULE_LOADING] = true

// A file whose extension Node's ES module loader does not know (a .ts
// file, where a require hook such as tsx's or ts-node/register is preloaded
// and module hooks do not reach a worker's import(), Node < 22): required.
const load = () => import(pathToFileURL(workerData.file).href).catch((e) => {
  if (e === null || typeof e !== 'object' || e.code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw e
  require(workerData.file)
})

load().then(() => {
  if (!serving()) {
    report('start', new Error(`${workerData.file} did not call serveSync while loading`))
    process.exit(1)
  }
}, (e) => {
  report('start', e)
  process.exit(1)
})
