'use strict'
// The plain-text tables `npm run bench` prints.

const { figure, comparisonForm, comparisonValue, comparisonTarget } = require('./format')

function pad (s, n) {
  s = String(s)
  const len = [...s].length
  return len >= n ? s : s + ' '.repeat(n - len)
}

function table (rows) {
  const widths = []
  for (const r of rows) r.forEach((c, i) => { widths[i] = Math.max(widths[i] || 0, [...String(c)].length) })
  return rows.map((r) => r.map((c, i) => pad(c, widths[i])).join('  ').trimEnd()).join('\n')
}

// Absolute figures: one row per case × metric × implementation.
function figures (scenarios) {
  const rows = [['scenario', 'case', 'figure', 'impl', 'median', 'min', 'max']]
  for (const s of scenarios) {
    if (s.skipped) {
      rows.push([`${s.id} ${s.title}`, `skipped: ${s.skipped}`, '', '', '', '', ''])
      continue
    }
    for (const k of s.skippedCases || []) rows.push([`${s.id} ${s.title}`, k.label, `skipped: ${k.reason}`, '', '', '', ''])
    for (const c of s.cases) {
      for (const k of c.skippedImpls || []) rows.push([`${s.id} ${s.title}`, c.label, `${k.impl} skipped: ${k.reason}`, '', '', '', ''])
      for (const m of c.metrics) {
        for (const impl of c.impls) {
          const r = c.results[impl][m.name]
          rows.push([`${s.id} ${s.title}`, c.label, m.label, impl, figure(r.median, m.unit), figure(r.min, m.unit), figure(r.max, m.unit)])
        }
      }
    }
  }
  return table(rows)
}

// Ratios against the baselines, with the project's targets.
function ratios (scenarios) {
  const rows = [['scenario', 'case', 'figure', 'ratio', 'value', 'rounds min–max', 'target', 'met']]
  for (const s of scenarios) {
    for (const x of s.comparisons) {
      const c = s.cases.find((k) => k.id === x.case)
      const m = c.metrics.find((k) => k.name === x.metric)
      rows.push([
        `${s.id} ${s.title}`, c.label, m.label, comparisonForm(x), comparisonValue(x, x.value, m.unit),
        `${comparisonValue(x, x.min, m.unit)}–${comparisonValue(x, x.max, m.unit)}`, comparisonTarget(x, m.unit, '—'),
        x.met == null ? '' : x.met ? 'yes' : 'no'
      ])
    }
  }
  return table(rows)
}

module.exports = { figures, ratios, table }
