'use strict'
// Jest runs every test file of this project in one worker thread
// (--runInBand: the main thread), each with its own module registry.
module.exports = { testEnvironment: 'node', testTimeout: 5000 }
