'use strict'
// Runs one measurement in a fresh Node process and returns the JSON object
// it prints as its last line of output. The child is killed if it overruns.

const { execFile } = require('child_process')

function runChild (node, args, { timeoutMs = 60000, cwd } = {}) {
  return new Promise((resolve, reject) => {
    execFile(node, args, { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 << 20, cwd }, (err, stdout, stderr) => {
      if (err) {
        const why = err.killed ? `killed after ${timeoutMs} ms` : `exit code ${err.code}`
        reject(new Error(`${args.join(' ')}: ${why}\n${stderr.trim()}`))
        return
      }
      const lines = stdout.trim().split('\n')
      try {
        resolve(JSON.parse(lines[lines.length - 1]))
      } catch (e) {
        reject(new Error(`${args.join(' ')}: no result line\n${stdout}\n${stderr}`))
      }
    })
  })
}

module.exports = { runChild }
