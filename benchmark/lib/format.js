'use strict'
// Human-readable figures for the table and the chart.

function si (x) {
  const a = Math.abs(x)
  if (a >= 1e6) return `${(x / 1e6).toPrecision(3)}M`
  if (a >= 1e3) return `${(x / 1e3).toPrecision(3)}k`
  return x.toPrecision(3)
}

// `value` in `unit` ('/s', 'ms', 'us', 'ns', 'B').
function figure (value, unit) {
  if (!Number.isFinite(value)) return 'n/a'
  switch (unit) {
    case '/s': return `${si(value)}/s`
    case 'ms': return value >= 100 ? `${value.toFixed(0)} ms` : `${value.toPrecision(3)} ms`
    case 'us': if (value < 1) return `${(value * 1000).toPrecision(3)} ns`
      return value >= 1000 ? `${(value / 1000).toPrecision(3)} ms` : `${value.toPrecision(3)} µs`
    case 'ns': return value >= 1000 ? `${(value / 1000).toPrecision(3)} µs` : `${value.toPrecision(3)} ns`
    case 'B': return value >= 10240 ? `${(value / 1024).toFixed(0)} KiB` : `${value.toFixed(0)} B`
    case 'index': return value.toFixed(3)
    case 'count': return value.toFixed(0)
    default: return `${value.toPrecision(3)} ${unit}`
  }
}

function ratio (x) {
  if (!Number.isFinite(x)) return 'n/a'
  return x >= 100 ? `${x.toFixed(0)}×` : x >= 10 ? `${x.toFixed(1)}×` : `${x.toFixed(2)}×`
}

// A comparison (lib/compare.js) in words: what is divided by what (or, for
// an absolute target, whose figure), its value, and its target.
function comparisonForm (x) {
  if (x.form === 'value') return x.ours
  return x.form === 'ours/base' ? `${x.ours} ÷ ${x.base}` : `${x.base} ÷ ${x.ours}`
}

function comparisonValue (x, v, unit) {
  return x.form === 'value' ? figure(v, unit) : ratio(v)
}

function comparisonTarget (x, unit, none = '') {
  if (x.target == null) return none
  return `${x.op === '>=' ? '≥' : '≤'} ${x.form === 'value' ? figure(x.target, unit) : `${x.target}×`}`
}

module.exports = { figure, ratio, comparisonForm, comparisonValue, comparisonTarget }
