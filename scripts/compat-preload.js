'use strict'
// Preloaded into Node 12 by the version matrix (see test-compat.js):
// `require('test')` gets the ES2019 copy of the test runner, and inside that
// copy `node:`-prefixed requires of built-ins (Node 14.18+) lose the prefix.
// Everything else resolves as usual, so the suite itself gets no help.
const Module = require('module')
const path = require('path')

const COMPAT = path.join(__dirname, '..', '.node-versions', 'compat', 'node_modules', 'test')
const resolve = Module._resolveFilename

Module._resolveFilename = function (request, parent, isMain, options) {
  if (request === 'test' || request.startsWith('test/')) {
    request = COMPAT + request.slice(4)
  } else if (request.startsWith('node:') && parent && parent.filename &&
             parent.filename.startsWith(COMPAT + path.sep)) {
    request = request.slice(5)
  }
  return resolve.call(this, request, parent, isMain, options)
}
