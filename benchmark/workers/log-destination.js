'use strict'
// The destination of scenario 12's log transport over thread-stream
// (benchmark/children/log-transport.js), the module thread-stream's worker
// loads: a stream that writes each chunk it is given (everything the
// main thread had written since the last) to workerData.file with one
// fs.writeSync, and closes the file at the end.
const fs = require('fs')
const { Writable } = require('stream')

module.exports = async function (opts) {
  const fd = fs.openSync(opts.file, 'w')
  return new Writable({
    decodeStrings: false,
    autoDestroy: true,
    write (chunk, encoding, cb) {
      fs.writeSync(fd, chunk)
      cb()
    },
    final (cb) {
      fs.closeSync(fd)
      cb()
    }
  })
}
