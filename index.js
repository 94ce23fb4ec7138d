'use strict'
const futex = require('./lib/futex')

module.exports = {
  wait: futex.wait,
  notify: futex.notify,
  waitAsync: futex.waitAsync,
  setKeepAlive: futex.setKeepAlive
}
