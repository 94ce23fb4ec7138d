'use strict'
// Runs one measurement in a fresh Node process and returns the JSON object
// it prints as its last line of output. The child is killed if it overruns.
// Children add their own CPU time to their result line (`ownCpuMs`), which is
// summed here so that lib/machine.js does not count it as another process's.

const { execFile } = require('child_process')

let childrenCpuMs = 0

function runChild (node, args, { timeoutMs = 60000, cwd } = {}) {
  return new Promise((resolve, reject) => {
    execFile(node, args, { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 << 20, cwd }, (err, stdout, stderr) => {
      if (err) {
        const why = err.killed ? `killed after ${timeoutMs} ms` : `exit code ${err.code}`
        reject(new Error(`${args.join(' ')}: ${why}\n${stderr.trim()}`))
        return
      }
      const lines = stdout.trim().split('\n')
      let result
      try {
        result = JSON.parse(lines[lines.length - 1])
      } catch (e) {
        reject(new Error(`${args.join(' ')}: no result line\n${stdout}\n${stderr}`))
        return
      }
      if (typeof result.ownCpuMs === 'number') childrenCpuMs += result.ownCpuMs
      resolve(result)
    })
  })
}

// CPU time (ms) used so far by the children that reported it.
function childrenCpu () {
  return childrenCpuMs
}

// Adds the CPU time (ms) of a child that did not report it itself (the
// spinners of lib/spinners.js).
function addChildrenCpu (ms) {
  childrenCpuMs += ms
}

// For a child's result line: its own CPU time so far, in ms.
function ownCpuMs () {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

// In a contender forked with an IPC channel (`spec`: { id, lib, limitMs }):
// an uncaught error or rejection is sent to the parent as { error } and
// ends the process (code 2); the parent going away ends it (code 4), and
// so does overrunning spec.limitMs (code 3, with a line on stderr).
// Returns the failing function, for errors the contender catches itself.
function guardContender (spec, who) {
  function fail (why) {
    const message = `process ${spec.id} (${spec.lib}): ${why && why.stack ? why.stack : why}`
    if (process.connected) process.send({ error: message }, () => process.exit(2))
    else process.exit(2)
    setTimeout(() => process.exit(2), 2000).unref()
  }
  process.on('disconnect', () => process.exit(4))
  process.on('uncaughtException', fail)
  process.on('unhandledRejection', fail)
  setTimeout(() => {
    process.stderr.write(`${who} ${spec.id} (${spec.lib}): still running after ${spec.limitMs} ms\n`)
    process.exit(3)
  }, spec.limitMs).unref()
  return fail
}

module.exports = { runChild, childrenCpu, addChildrenCpu, ownCpuMs, guardContender }
