'use strict'
// Ratios of "ours" against a baseline, in the form the project's targets use.
//
// A comparison { metric, ours, base, ratio?, op?, target? } reads
//   ratio 'ours/base' or 'base/ours' (default: whichever is > 1 when ours is
//   better: ours/base for throughput, base/ours for times and sizes),
//   op '>=' (default) or '<=', and the target value (or null: no target).
// The headline ratio is taken between the two medians; the per-round ratios
// (rounds are paired: both ran in the same round, back to back) give its spread.
// `advantage` restates every ratio as "> 1 means ours is better", for the chart.
//
// A comparison without `base` holds one implementation's own figure to an
// absolute target instead ({ metric, ours, op?, target }, e.g. a fairness
// index ≥ 0.95): form 'value', value = its median, min–max = its rounds'.

const { summary } = require('./stats')

function absolute (cmp, metric, results) {
  const ours = results[cmp.ours][metric.name]
  const op = cmp.op || '>='
  const target = cmp.target == null ? null : cmp.target
  const value = ours.median
  return {
    case: cmp.case,
    metric: metric.name,
    ours: cmp.ours,
    base: null,
    label: cmp.label || null,
    form: 'value',
    op,
    target,
    value,
    perRound: ours.samples,
    min: ours.min,
    max: ours.max,
    met: target == null || !Number.isFinite(value) ? null : op === '>=' ? value >= target : value <= target,
    advantage: null,
    advantageMin: null,
    advantageMax: null,
    advantageTarget: null
  }
}

function compare (cmp, metric, results) {
  if (cmp.base == null) return absolute(cmp, metric, results)
  const form = cmp.ratio || (metric.better === 'higher' ? 'ours/base' : 'base/ours')
  const op = cmp.op || '>='
  const ours = results[cmp.ours][metric.name]
  const base = results[cmp.base][metric.name]
  const divide = (o, b) => (form === 'ours/base' ? o / b : b / o)
  const value = divide(ours.median, base.median)
  const perRound = ours.samples.map((o, i) => divide(o, base.samples[i]))
  const spread = summary(perRound)
  // Is `form` already "bigger is better for ours"?
  const aligned = (form === 'ours/base') === (metric.better === 'higher')
  const flip = (x) => (aligned ? x : 1 / x)
  const target = cmp.target == null ? null : cmp.target
  return {
    case: cmp.case,
    metric: metric.name,
    ours: cmp.ours,
    base: cmp.base,
    label: cmp.label || null,
    form,
    op,
    target,
    value,
    perRound,
    min: spread.min,
    max: spread.max,
    met: target == null || !Number.isFinite(value) ? null : op === '>=' ? value >= target : value <= target,
    advantage: flip(value),
    advantageMin: Math.min(flip(spread.min), flip(spread.max)),
    advantageMax: Math.max(flip(spread.min), flip(spread.max)),
    advantageTarget: target == null ? null : flip(target)
  }
}

module.exports = { compare }
