'use strict'
// Busy processes for the loaded cases of scenario 12: one `node` per core
// spinning in a loop, so that every CPU has more runnable threads than it
// can run. Each stops by itself after `ms` (should this process die first)
// and is killed by `stop`. Their CPU time is added to the measurement
// children's (lib/child.js), so that lib/machine.js counts them as the
// benchmark's load, not as other processes'.
const fs = require('fs')
const os = require('os')
const { spawn } = require('child_process')
const { addChildrenCpu } = require('./child')

// Starts `n` spinners (default: one per core) that run for at most `ms`;
// resolves once each is spinning.
async function startSpinners (ms, n = os.cpus().length) {
  const code = `process.stdout.write('.'); const end = Date.now() + ${Math.ceil(ms)}; while (Date.now() < end);`
  const children = []
  try {
    for (let i = 0; i < n; i++) {
      const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'ignore'] })
      children.push(child)
      await new Promise((resolve, reject) => {
        child.once('error', reject)
        child.once('exit', () => reject(new Error('a spinner exited before it started')))
        child.stdout.once('data', resolve)
      })
      child.removeAllListeners('exit')
    }
  } catch (e) {
    await stopSpinners(children)
    throw e
  }
  return children
}

// CPU time (ms) a child has used so far (every thread), from /proc (Linux;
// in 10 ms ticks); 0 elsewhere. Scenario 13 reads its partner process's.
function cpuMsOf (pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10 // utime, stime in USER_HZ (100)
  } catch {
    return 0
  }
}

// Kills the spinners (SIGKILL); resolves once they have exited.
async function stopSpinners (children) {
  await Promise.all(children.map((child) => {
    if (child.exitCode !== null || child.signalCode !== null) return null
    addChildrenCpu(cpuMsOf(child.pid))
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    return exited
  }))
}

module.exports = { startSpinners, stopSpinners, cpuMsOf }
