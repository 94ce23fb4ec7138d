'use strict'
// Command-line options of the benchmark and soak scripts, by Node's own
// `util.parseArgs`, checked and converted by a spec per option:
//
//   options(process.argv.slice(2), {
//     rounds: { int: true, min: 1, default: 3000 },  // a whole number
//     seconds: { min: 0, default: null },            // any number
//     only: { list: ['a', 'b'], default: ['a', 'b'] }, // comma-separated, from these
//     loads: { list: true, default: [] },            // comma-separated, any
//     json: { string: true, default: null }
//   })
//
// An unknown option, a missing value or a value out of range throws an
// Error that names the option and what it takes.
const { parseArgs } = require('util')

function convert (name, raw, spec) {
  if (spec.string) return raw
  if (spec.list) {
    const items = raw.split(',').filter((x) => x !== '')
    const known = Array.isArray(spec.list) ? spec.list : null
    for (const x of items) {
      if (known && !known.includes(x)) throw new Error(`--${name}: unknown ${x} (known: ${known.join(', ')})`)
    }
    return spec.numbers ? items.map((x) => number(name, x, spec)) : items
  }
  return number(name, raw, spec)
}

function number (name, raw, spec) {
  const v = Number(raw)
  if (raw === '' || !Number.isFinite(v)) throw new Error(`--${name} takes a number, got ${JSON.stringify(raw)}`)
  if (spec.int && !Number.isInteger(v)) throw new Error(`--${name} takes a whole number, got ${raw}`)
  if (spec.min !== undefined && v < spec.min) throw new Error(`--${name} takes a number of ${spec.min} or more, got ${raw}`)
  return v
}

function options (argv, specs) {
  const config = {}
  for (const name of Object.keys(specs)) config[name] = { type: 'string' }
  let values
  try {
    values = parseArgs({ args: argv, options: config, strict: true, allowPositionals: false }).values
  } catch (e) {
    throw new Error(`${e.message} (options: ${Object.keys(specs).map((n) => `--${n}`).join(', ')})`)
  }
  const out = {}
  for (const [name, spec] of Object.entries(specs)) {
    out[name] = values[name] === undefined ? spec.default : convert(name, values[name], spec)
  }
  return out
}

module.exports = { options }
