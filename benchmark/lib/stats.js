'use strict'
// Order statistics of a handful of rounds. With 3 to 9 rounds per figure,
// the median is the headline and min–max is the honest spread (no standard
// deviation: round figures are not normally distributed).

function sorted (xs) {
  return xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
}

// Linear-interpolated quantile of an ascending array.
function quantile (asc, q) {
  if (asc.length === 0) return NaN
  const pos = (asc.length - 1) * q
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return asc[lo] + (asc[hi] - asc[lo]) * (pos - lo)
}

// { n, median, min, max, q1, q3 } of the finite samples.
function summary (samples) {
  const asc = sorted(samples)
  return {
    n: asc.length,
    median: quantile(asc, 0.5),
    min: asc.length ? asc[0] : NaN,
    max: asc.length ? asc[asc.length - 1] : NaN,
    q1: quantile(asc, 0.25),
    q3: quantile(asc, 0.75)
  }
}

module.exports = { summary, quantile }
