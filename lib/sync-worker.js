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

import(pathToFileURL(workerData.file).href).then(() => {
  if (!serving()) {
    report('start', new Error(`${workerData.file} did not call serveSync while loading`))
    process.exit(1)
  }
}, (e) => {
  report('start', e)
  process.exit(1)
})
