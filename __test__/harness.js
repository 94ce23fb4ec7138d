'use strict'
// Every test file takes its runner from here: `node:test` where the running
// Node has it (16.17+), the userland port published as `test` otherwise
// (the version matrix runs the same files on Node 12 and 14).
let runner
try {
  runner = require('node:test')
} catch {
  runner = require('test')
}
module.exports = runner
