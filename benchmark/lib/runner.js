'use strict'
// Runs every case of a scenario: one discarded warm-up measurement per
// implementation, then `rounds` rounds in which each implementation is
// measured once, in an order that rotates from round to round (A B, B A, ...)
// so that neither side always runs first, warmer, or later in the process.
// A case may name implementations this Node cannot run
// (`implMissing(impl, opts)` → reason or null): they are left out of its
// rounds and listed with the reason, as are the comparisons that need them.

const { summary } = require('./stats')
const { compare } = require('./compare')

function rotate (xs, r) {
  const k = r % xs.length
  return xs.slice(k).concat(xs.slice(0, k))
}

async function attempt (c, impl, opts, errors) {
  try {
    return await c.measure(impl, opts)
  } catch (e) {
    errors.push(`${c.id} ${impl}: ${e && e.message ? e.message.split('\n')[0] : e}`)
    return null
  }
}

// Returns { id, label, metrics, results: { impl: { metric: summary + samples } }, errors }.
async function runCase (c, opts, progress) {
  const errors = []
  const samples = {}
  for (const impl of c.impls) {
    samples[impl] = {}
    for (const m of c.metrics) samples[impl][m.name] = []
  }
  for (const impl of c.impls) await attempt(c, impl, opts, errors) // warm-up, discarded
  for (let r = 0; r < opts.rounds; r++) {
    for (const impl of rotate(c.impls, r)) {
      const got = await attempt(c, impl, opts, errors)
      for (const m of c.metrics) samples[impl][m.name].push(got ? got[m.name] : NaN)
    }
    if (progress) progress(c, r + 1)
  }
  const results = {}
  for (const impl of c.impls) {
    results[impl] = {}
    for (const m of c.metrics) {
      const s = samples[impl][m.name]
      results[impl][m.name] = { ...summary(s), samples: s }
    }
  }
  return { id: c.id, label: c.label, impls: c.impls, metrics: c.metrics, results, errors, skippedImpls: [] }
}

async function runAvailable (c, opts, progress) {
  const skippedImpls = []
  const impls = []
  for (const impl of c.impls) {
    const reason = c.implMissing ? await c.implMissing(impl, opts) : null
    if (reason) skippedImpls.push({ impl, reason })
    else impls.push(impl)
  }
  const record = await runCase({ ...c, impls }, opts, progress)
  record.skippedImpls = skippedImpls
  return record
}

// Runs a scenario module; returns its JSON-ready record with comparisons.
async function runScenario (s, opts, progress) {
  const cases = []
  const skippedCases = []
  const skip = s.available ? await s.available(opts) : null
  if (skip) return { id: s.id, title: s.title, skipped: skip, cases: [], skippedCases, comparisons: [] }
  for (const c of s.cases) {
    if (opts.only && !opts.only(s, c)) continue
    const reason = c.available ? await c.available(opts) : null
    if (reason) skippedCases.push({ id: c.id, label: c.label, reason })
    else cases.push(await runAvailable(c, opts, progress))
  }
  const comparisons = []
  for (const cmp of s.comparisons) {
    const c = cases.find((x) => x.id === cmp.case)
    if (!c || !c.impls.includes(cmp.ours) || (cmp.base != null && !c.impls.includes(cmp.base))) continue
    const metric = c.metrics.find((m) => m.name === cmp.metric)
    comparisons.push(compare(cmp, metric, c.results))
  }
  return { id: s.id, title: s.title, cases, skippedCases, comparisons }
}

module.exports = { runScenario, rotate }
