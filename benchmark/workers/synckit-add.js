'use strict'
// The worker function of scenario 11's synchronous call, served by synckit
// (the same async add as sync-add.js).
const { runAsWorker } = require('synckit')

runAsWorker(async (a, b) => a + b)
