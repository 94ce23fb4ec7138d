'use strict'
// The worker function of scenario 11's synchronous call: an async add.
const { serveSync } = require('../..')

serveSync(async (a, b) => a + b)
