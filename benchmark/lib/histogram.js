'use strict'
// A histogram of durations in nanoseconds, cheap enough to record every lock
// acquisition of scenario 6 (a few million per second) without keeping them:
// one bucket per nanosecond below 64 ns, then 32 buckets per power of two
// (each at most 1/32 = 3 % wide) up to 2^31 ns (2.1 s; longer ones count
// there). Percentiles come out within the width of one bucket.
//
// A histogram is a plain Float64Array, so it crosses threads in a message
// and histograms of several threads add up.

const LINEAR = 64
const SUB_BITS = 5
const SUB = 1 << SUB_BITS
const MAX = 2147483647
const SIZE = LINEAR + (31 - 6) * SUB

function histogram () {
  return new Float64Array(SIZE)
}

function bucket (ns) {
  const v = ns >= MAX ? MAX : ns > 0 ? ns | 0 : 0
  if (v < LINEAR) return v
  const e = 31 - Math.clz32(v) // 6..30
  return LINEAR + (e - 6) * SUB + ((v >>> (e - SUB_BITS)) & (SUB - 1))
}

function record (h, ns) {
  h[bucket(ns)]++
}

// [low, high) of bucket i, in ns.
function range (i) {
  if (i < LINEAR) return [i, i + 1]
  const k = i - LINEAR
  const width = 2 ** ((k >> SUB_BITS) + 6 - SUB_BITS)
  const low = (SUB + (k & (SUB - 1))) * width
  return [low, low + width]
}

function add (into, h) {
  for (let i = 0; i < SIZE; i++) into[i] += h[i]
  return into
}

function count (h) {
  let n = 0
  for (let i = 0; i < SIZE; i++) n += h[i]
  return n
}

// The q-quantile (0 < q < 1) in ns: the middle of the bucket holding the
// ceil(q × n)-th smallest duration; NaN if empty.
function quantile (h, q) {
  const n = count(h)
  if (n === 0) return NaN
  const rank = Math.max(1, Math.ceil(q * n))
  let seen = 0
  for (let i = 0; i < SIZE; i++) {
    seen += h[i]
    if (seen >= rank) {
      const [low, high] = range(i)
      return (low + high) / 2
    }
  }
  return NaN
}

module.exports = { histogram, record, add, count, quantile, bucket, range, SIZE }
