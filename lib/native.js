'use strict'
// The compiled addon, through the loader napi-rs generates (binding.js).
module.exports = require('../binding.js')
