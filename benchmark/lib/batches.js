'use strict'
// One tinybench measurement of a task that runs `batch` operations per call:
// the median time of a call divided by `batch`, in nanoseconds per operation.
// Used by the scenarios that time one short operation on one thread (5, 8).

let tinybench
async function nsPerOp (name, fn, batch, { warmMs, ms }) {
  if (!tinybench) tinybench = await import('tinybench')
  const b = new tinybench.Bench({ name, time: ms, warmupTime: warmMs, iterations: 20, warmupIterations: 20 })
  b.add(name, fn)
  await b.run()
  const r = b.tasks[0].result
  if (!r || !r.latency) throw new Error(`tinybench: ${name} did not complete (${r && r.state})`)
  return (r.latency.p50 * 1e6) / batch
}

module.exports = { nsPerOp }
