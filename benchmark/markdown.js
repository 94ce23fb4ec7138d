'use strict'
// A run's results as Markdown (for docs/benchmarks.md):
//   node benchmark/markdown.js [results/full.json]      print them
//   node benchmark/markdown.js --update docs/benchmarks.md
//     rewrite the blocks between <!-- bench:NAME --> and <!-- /bench:NAME -->
//     with results/NAME.json (e.g. bench:full, bench:full-one-cpu)

const fs = require('fs')
const path = require('path')
const { figure, comparisonForm, comparisonValue, comparisonTarget } = require('./lib/format')
const { describe } = require('./lib/machine')

function row (cells) {
  return `| ${cells.join(' | ')} |`
}

// Which targets the run met and missed, in one paragraph.
function verdict (run) {
  const met = []
  const missed = []
  for (const s of run.scenarios) {
    for (const x of s.comparisons) {
      if (x.met == null) continue
      const c = s.cases.find((k) => k.id === x.case)
      const metric = c.metrics.find((k) => k.name === x.metric)
      const vs = x.form === 'value' ? ` (${x.ours})` : x.base === 'blog' || x.base === 'native' ? '' : ` (vs ${x.base})`
      const what = `${s.id}. ${c.label}, ${metric.label}${vs}: ${comparisonValue(x, x.value, metric.unit)} (target ${comparisonTarget(x, metric.unit)})`
      ;(x.met ? met : missed).push(what)
    }
  }
  return `Targets met (${met.length}): ${met.join('; ') || 'none'}.\n\nMissed (${missed.length}): ${missed.join('; ') || 'none'}.`
}

function render (run) {
  const out = []
  const m = run.machine
  out.push(`Machine: ${describe(m)}; addon ${m.addon ? m.addon.sha256 : 'unknown'}.`)
  const others = m.othersCpuShare == null ? '' : ` Other processes used ${Math.round(m.othersCpuShare * 100)}% of the CPUs during the run.`
  out.push(`Run: ${run.date.slice(0, 16).replace('T', ' ')} UTC, ${run.options.mode}, ${run.options.rounds} rounds of ${run.options.ms} ms per figure, ${run.durationS} s in all.${others}`)
  out.push('')
  out.push(verdict(run))
  out.push('')
  out.push('Ratios (between the medians; "rounds" is the range of the per-round ratios):')
  out.push('')
  out.push(row(['scenario', 'case', 'figure', 'ratio', 'value', 'rounds', 'target', 'met']))
  out.push(row(['---', '---', '---', '---', '---:', '---', '---', '---']))
  for (const s of run.scenarios) {
    for (const x of s.comparisons) {
      const c = s.cases.find((k) => k.id === x.case)
      const metric = c.metrics.find((k) => k.name === x.metric)
      out.push(row([`${s.id}. ${s.title}`, c.label, metric.label, comparisonForm(x), `**${comparisonValue(x, x.value, metric.unit)}**`,
        `${comparisonValue(x, x.min, metric.unit)}–${comparisonValue(x, x.max, metric.unit)}`, comparisonTarget(x, metric.unit), x.met == null ? '' : x.met ? 'yes' : 'no']))
    }
  }
  out.push('')
  out.push('<details><summary>Absolute figures (median, and min–max of the rounds)</summary>')
  out.push('')
  out.push(row(['scenario', 'case', 'figure', 'implementation', 'median', 'min–max']))
  out.push(row(['---', '---', '---', '---', '---:', '---']))
  for (const s of run.scenarios) {
    if (s.skipped) out.push(row([`${s.id}. ${s.title}`, `skipped: ${s.skipped}`, '', '', '', '']))
    for (const k of s.skippedCases || []) out.push(row([`${s.id}. ${s.title}`, k.label, `skipped: ${k.reason}`, '', '', '']))
    for (const c of s.cases) {
      for (const k of c.skippedImpls || []) out.push(row([`${s.id}. ${s.title}`, c.label, `${k.impl} skipped: ${k.reason}`, '', '', '']))
      for (const metric of c.metrics) {
        for (const impl of c.impls) {
          const r = c.results[impl][metric.name]
          out.push(row([`${s.id}. ${s.title}`, c.label, metric.label, impl, figure(r.median, metric.unit), `${figure(r.min, metric.unit)} – ${figure(r.max, metric.unit)}`]))
        }
      }
    }
  }
  out.push('')
  out.push('</details>')
  return out.join('\n') + '\n'
}

// Replaces every <!-- bench:NAME --> … <!-- /bench:NAME --> block of `file`.
function update (file) {
  const text = fs.readFileSync(file, 'utf8')
  const next = text.replace(/<!-- bench:([\w-]+) -->[\s\S]*?<!-- \/bench:\1 -->/g, (_, name) => {
    const run = JSON.parse(fs.readFileSync(path.join(__dirname, 'results', `${name}.json`), 'utf8'))
    return `<!-- bench:${name} -->\n${render(run)}<!-- /bench:${name} -->`
  })
  fs.writeFileSync(file, next)
}

if (require.main === module) {
  if (process.argv[2] === '--update') {
    update(path.resolve(process.argv[3]))
  } else {
    const input = path.resolve(process.argv[2] || path.join(__dirname, 'results', 'full.json'))
    process.stdout.write(render(JSON.parse(fs.readFileSync(input, 'utf8'))))
  }
}

module.exports = { render, verdict, update }
