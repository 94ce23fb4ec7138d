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
    case 'us': return value >= 1000 ? `${(value / 1000).toPrecision(3)} ms` : `${value.toPrecision(3)} µs`
    case 'ns': return value >= 1000 ? `${(value / 1000).toPrecision(3)} µs` : `${value.toPrecision(3)} ns`
    case 'B': return value >= 10240 ? `${(value / 1024).toFixed(0)} KiB` : `${value.toFixed(0)} B`
    default: return `${value.toPrecision(3)} ${unit}`
  }
}

function ratio (x) {
  if (!Number.isFinite(x)) return 'n/a'
  return x >= 100 ? `${x.toFixed(0)}×` : x >= 10 ? `${x.toFixed(1)}×` : `${x.toFixed(2)}×`
}

module.exports = { figure, ratio }
