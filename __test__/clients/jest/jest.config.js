'use strict'
// Jest runs every test file of this project in one worker thread
// (--runInBand: the main thread), each with its own module registry. No
// path is ignored: the project may sit inside an installed package (in a
// node_modules), which Jest skips by default.
module.exports = { testEnvironment: 'node', testTimeout: 5000, testPathIgnorePatterns: [], haste: { retainAllFiles: true } }
