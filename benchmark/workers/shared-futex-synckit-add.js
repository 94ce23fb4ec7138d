'use strict'
// synckit-add.js served by shared-futex/synckit: the same async add, the
// same runAsWorker.
const { runAsWorker } = require('../../synckit')

runAsWorker(async (a, b) => a + b)
