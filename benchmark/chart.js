'use strict'
// Renders a run's JSON as an SVG chart, written by hand (no dependencies, no
// external renderer): one row per comparison, the ratio of medians as a bar
// on a log scale around 1×, the per-round range as a whisker, the project's
// target as a tick, and the absolute medians beside it.
//
//   node benchmark/chart.js [results/full.json] [out.svg]

const fs = require('fs')
const path = require('path')
const { figure, ratio, comparisonTarget } = require('./lib/format')
const { describe } = require('./lib/machine')

const W = 1120
const LEFT = 400 // row labels
const PLOT = 440 // width of the log axis
const ROW = 26
const TOP = 112
const LABEL_CHARS = 58 // longer row labels are cut (they would run into the plot)

const COLOR = { met: '#2e8b57', missed: '#d2691e', none: '#5b7fa6' }

function esc (s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

function cut (s, n) {
  const chars = [...s]
  return chars.length > n ? chars.slice(0, n - 1).join('') + '…' : s
}

function text (x, y, s, attrs = '') {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${esc(s)}</text>`
}

// Every comparison of the run, with what the chart needs to draw it.
function rows (run) {
  const out = []
  for (const s of run.scenarios) {
    if (s.skipped) {
      out.push({ skipped: `${s.id}. ${s.title}: skipped (${s.skipped})` })
      continue
    }
    for (const k of s.skippedCases || []) {
      if (k.reason !== 'not in --quick') out.push({ skipped: `${s.id}. ${s.title}: ${k.label}: skipped (${k.reason})` })
    }
    for (const c of s.cases) {
      for (const k of c.skippedImpls || []) out.push({ skipped: `${s.id}. ${s.title}: ${c.label}: ${k.impl} skipped (${k.reason})` })
    }
    for (const x of s.comparisons) {
      const c = s.cases.find((k) => k.id === x.case)
      const m = c.metrics.find((k) => k.name === x.metric)
      if (x.form === 'value') {
        // An absolute target: no ratio to draw, the figure against its target.
        out.push({
          label: `${s.id}. ${s.title}: ${c.label}`,
          sub: `${m.label}, ${x.ours}`,
          x,
          absolute: `${figure(x.value, m.unit)} (rounds ${figure(x.min, m.unit)}–${figure(x.max, m.unit)}; target ${comparisonTarget(x, m.unit)})${x.met == null ? '' : x.met ? ' ✓' : ' ✗'}`
        })
        continue
      }
      out.push({
        label: `${s.id}. ${s.title}: ${c.label}`,
        sub: `${m.label}, vs ${x.base}`,
        x,
        ours: figure(c.results[x.ours][m.name].median, m.unit),
        base: figure(c.results[x.base][m.name].median, m.unit),
        baseName: x.base
      })
    }
  }
  return out
}

// Log-scale bounds covering every value, whisker and target, at 1-2-5 steps.
function bounds (list) {
  let lo = 0.5
  let hi = 2
  for (const r of list) {
    if (!r.x) continue
    for (const v of [r.x.advantage, r.x.advantageMin, r.x.advantageMax, r.x.advantageTarget]) {
      if (Number.isFinite(v) && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v) }
    }
  }
  const steps = []
  for (let e = -4; e <= 4; e++) for (const m of [1, 2, 5]) steps.push(m * 10 ** e)
  lo = steps.filter((s) => s <= lo).pop()
  hi = steps.find((s) => s >= hi)
  return { lo, hi, ticks: steps.filter((s) => s >= lo && s <= hi) }
}

function render (run) {
  const list = rows(run)
  const { lo, hi, ticks } = bounds(list)
  const X = (v) => LEFT + (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo)) * PLOT
  const clamp = (v) => Math.min(hi, Math.max(lo, v))
  const H = TOP + list.length * ROW + 64
  const out = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif" font-size="12">`)
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`)
  out.push(text(16, 26, 'shared-futex against its baselines: ratio of medians (> 1× = shared-futex better)', 'font-size="16" font-weight="bold"'))
  out.push(text(16, 46, describe(run.machine), 'fill="#444"'))
  const o = run.options
  const m = run.machine
  const loadNote = m.othersCpuShare == null ? '' : `, other processes used ${Math.round(m.othersCpuShare * 100)}% of the CPUs`
  out.push(text(16, 64, `${run.date.slice(0, 16).replace('T', ' ')} UTC, ${o.mode} run: ${o.rounds} interleaved rounds of ${o.ms} ms per figure${loadNote}.`, 'fill="#444"'))
  out.push(text(16, 82, 'Bar: ratio of the medians; whisker: range of the per-round ratios; red tick: the target.', 'fill="#444"'))
  // Axis: grid lines and labels.
  for (const t of ticks) {
    const x = X(t)
    out.push(`<line x1="${x.toFixed(1)}" y1="${TOP - 8}" x2="${x.toFixed(1)}" y2="${TOP + list.length * ROW}" stroke="${t === 1 ? '#000' : '#ddd'}" stroke-width="${t === 1 ? 1.2 : 1}"/>`)
    out.push(text(x, TOP - 12, `${t}×`, 'text-anchor="middle" fill="#666" font-size="11"'))
  }
  out.push(text(LEFT + PLOT + 16, TOP - 12, 'medians: shared-futex / baseline', 'fill="#666" font-size="11"'))
  list.forEach((r, i) => {
    const y = TOP + i * ROW
    const mid = y + ROW / 2
    if (i % 2 === 0) out.push(`<rect x="8" y="${y}" width="${W - 16}" height="${ROW}" fill="#f6f8fa"/>`)
    if (r.skipped) {
      out.push(text(16, mid + 4, r.skipped, 'fill="#888" font-style="italic"'))
      return
    }
    const x = r.x
    out.push(text(16, mid - 1, cut(r.label, LABEL_CHARS), 'font-weight="600"'))
    out.push(text(16, mid + 10, r.sub, 'fill="#666" font-size="10"'))
    if (r.absolute) {
      const color = x.met == null ? COLOR.none : x.met ? COLOR.met : COLOR.missed
      out.push(text(X(1) + 4, mid + 4, r.absolute, `font-size="11" font-weight="bold" fill="${color}"`))
      return
    }
    if (Number.isFinite(x.advantage) && x.advantage > 0) {
      const a = X(1)
      const b = X(clamp(x.advantage))
      const color = x.met == null ? COLOR.none : x.met ? COLOR.met : COLOR.missed
      out.push(`<rect x="${Math.min(a, b).toFixed(1)}" y="${(mid - 6).toFixed(1)}" width="${Math.max(1, Math.abs(b - a)).toFixed(1)}" height="12" fill="${color}"/>`)
      if (Number.isFinite(x.advantageMin) && Number.isFinite(x.advantageMax)) {
        const w0 = X(clamp(x.advantageMin))
        const w1 = X(clamp(x.advantageMax))
        out.push(`<line x1="${w0.toFixed(1)}" y1="${mid}" x2="${w1.toFixed(1)}" y2="${mid}" stroke="#222" stroke-width="1"/>`)
        for (const w of [w0, w1]) out.push(`<line x1="${w.toFixed(1)}" y1="${mid - 4}" x2="${w.toFixed(1)}" y2="${mid + 4}" stroke="#222"/>`)
      }
      if (x.advantageTarget != null) {
        const t = X(clamp(x.advantageTarget))
        out.push(`<line x1="${t.toFixed(1)}" y1="${mid - 10}" x2="${t.toFixed(1)}" y2="${mid + 10}" stroke="#b00" stroke-width="2"/>`)
      }
      const label = `${ratio(x.advantage)}${x.target == null ? '' : x.met ? ' ✓' : ' ✗'}`
      const right = x.advantage >= 1
      out.push(text(right ? Math.max(b, a) + 4 : Math.min(a, b) - 4, mid - 7, label, `font-size="10" font-weight="bold" text-anchor="${right ? 'start' : 'end'}" fill="${color}"`))
    } else {
      out.push(text(X(1) + 4, mid + 4, 'n/a', 'fill="#888"'))
    }
    out.push(text(LEFT + PLOT + 16, mid + 4, `${r.ours} / ${r.base}`, 'fill="#333" font-size="11"'))
  })
  const foot = TOP + list.length * ROW + 22
  out.push(`<rect x="16" y="${foot - 9}" width="10" height="10" fill="${COLOR.met}"/>`)
  out.push(text(30, foot, 'target met', 'font-size="11"'))
  out.push(`<rect x="110" y="${foot - 9}" width="10" height="10" fill="${COLOR.missed}"/>`)
  out.push(text(124, foot, 'target missed', 'font-size="11"'))
  out.push(`<rect x="220" y="${foot - 9}" width="10" height="10" fill="${COLOR.none}"/>`)
  out.push(text(234, foot, 'no target', 'font-size="11"'))
  out.push(text(320, foot, 'Ratios: rates ours ÷ baseline; times and sizes baseline ÷ ours. Generated by benchmark/chart.js from the run\'s JSON.', 'font-size="11" fill="#666"'))
  out.push('</svg>')
  return out.join('\n') + '\n'
}

if (require.main === module) {
  const input = path.resolve(process.argv[2] || path.join(__dirname, 'results', 'full.json'))
  const output = path.resolve(process.argv[3] || input.replace(/\.json$/, '') + '.svg')
  fs.writeFileSync(output, render(JSON.parse(fs.readFileSync(input, 'utf8'))))
  console.log(path.relative(process.cwd(), output))
}

module.exports = { render }
