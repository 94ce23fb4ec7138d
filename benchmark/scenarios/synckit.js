'use strict'
// Scenario 14: shared-futex/synckit, the drop-in for synckit, against
// synckit (npm) and against shared-futex's own createSyncFn, as a synckit
// user calls them.
//   small call   add(i, 1) of an async add (benchmark/workers/*add.js),
//                from the main thread. Figures: calls/s, and the CPU time
//                of the process (every thread) per call.
//   prettier     eslint-plugin-prettier's call: the plugin's own worker
//                (worker.mjs: prettier.format of a one-line source, with
//                the plugin's options) through the plugin's synckit; the
//                same worker file in a copy of the plugin whose `synckit`
//                is shared-futex/synckit (__test__/fixtures/synckit-eslint/
//                switch.js, as an npm `overrides` entry installs it); and
//                that file through shared-futex's createSyncFn (its
//                runAsWorker serves a createSyncFn's worker too).
//                Figures: calls/s and CPU per call.
//   first call   in a fresh process per measurement
//                (benchmark/children/synckit-first.js): from the process's
//                start to the first answer of the add: loading the
//                package, createSyncFn, the worker's start, the call.
//                Figures: the time, and the CPU time the process used
//                until then (less sensitive to other processes).
// synckit and shared-futex/synckit cache one function per worker path, so
// every measurement of a case after the first reuses its worker, as a
// program's later calls do.
// Targets: shared-futex/synckit's calls/s at least 0.9× createSyncFn's (the
// wrapper costs next to nothing), and its first call no slower than
// synckit's.

const fs = require('fs')
const path = require('path')
const { optional, rateOf } = require('../lib/sync-calls')
const { runChild } = require('../lib/child')

const ROOT = path.join(__dirname, '..', '..')
const WORKERS = path.join(__dirname, '..', 'workers')
const FIRST = path.join(__dirname, '..', 'children', 'synckit-first.js')
const IMPLS = ['shared-futex/synckit', 'synckit', 'createSyncFn']

const missingSynckit = (impl) => impl === 'synckit' && !optional('synckit') ? 'synckit is not installed (npm install)' : null

// One function per implementation and case, made once (synckit's are
// cached by path anyway).
const made = {}
function addOf (impl) {
  const key = `add ${impl}`
  if (!made[key]) {
    made[key] = impl === 'synckit'
      ? optional('synckit').createSyncFn(path.join(WORKERS, 'synckit-add.js'))
      : impl === 'shared-futex/synckit'
        ? require('../../synckit').createSyncFn(path.join(WORKERS, 'shared-futex-synckit-add.js'))
        : require('../..').createSyncFn(path.join(WORKERS, 'sync-add.js'))
  }
  return made[key]
}

// eslint-plugin-prettier as installed, and its switched copy (made once,
// removed as the process exits).
let project = null
function pluginOf (impl) {
  if (impl === 'synckit') return path.dirname(require.resolve('eslint-plugin-prettier/package.json', { paths: [ROOT] }))
  if (project === null) {
    project = require('../../__test__/fixtures/synckit-eslint/switch').switchedProject()
    process.once('exit', () => project.remove())
  }
  return project.plugin
}

function formatOf (impl) {
  const key = `format ${impl}`
  if (!made[key]) {
    const plugin = pluginOf(impl)
    const worker = path.join(plugin, 'worker.mjs')
    made[key] = impl === 'createSyncFn'
      ? require('../..').createSyncFn(worker)
      : require(require.resolve('synckit', { paths: [plugin] })).createSyncFn(worker)
  }
  return made[key]
}

async function smallCall (impl, opts) {
  const add = addOf(impl)
  return rateOf((i) => {
    if (add(i, 1) !== i + 1) throw new Error('wrong sum')
  }, opts)
}

const SOURCE = 'const a = 1;\n'
async function prettierCall (impl, opts) {
  const format = formatOf(impl)
  const file = path.join(ROOT, 'x.js')
  const options = { filepath: file, onDiskFilepath: file, usePrettierrc: false, semi: false }
  return rateOf(() => {
    if (format(SOURCE, options, {}) !== 'const a = 1\n') throw new Error('unexpected format')
  }, opts)
}

async function firstCall (impl) {
  const r = await runChild(process.execPath, [FIRST, impl], { timeoutMs: 60000, cwd: ROOT })
  return { firstMs: r.firstMs, cpuMs: r.cpuMs }
}

const RATE = [
  { name: 'rate', label: 'calls/s', unit: '/s', better: 'higher' },
  { name: 'cpuPerCall', label: 'CPU time per call (process)', unit: 'us', better: 'lower' }
]

const cases = [{
  id: '14-small',
  label: 'small call: an async add, main → worker',
  impls: IMPLS,
  metrics: RATE,
  implMissing: missingSynckit,
  measure: smallCall
}, {
  id: '14-prettier',
  label: "eslint-plugin-prettier's call: prettier.format of one line",
  impls: IMPLS,
  metrics: RATE,
  available: () => {
    const modules = path.join(ROOT, 'node_modules')
    return ['eslint-plugin-prettier/worker.mjs', 'prettier/package.json'].every((f) => fs.existsSync(path.join(modules, f)))
      ? null
      : 'eslint-plugin-prettier or prettier is not installed (npm install)'
  },
  implMissing: missingSynckit,
  measure: prettierCall
}, {
  id: '14-first',
  label: 'first call: process start to the first answer (fresh process)',
  impls: IMPLS,
  metrics: [
    { name: 'firstMs', label: 'time to the first answer', unit: 'ms', better: 'lower' },
    { name: 'cpuMs', label: 'CPU time until then (process)', unit: 'ms', better: 'lower' }
  ],
  implMissing: missingSynckit,
  measure: firstCall
}]

const comparisons = [
  { case: '14-small', metric: 'rate', ours: 'shared-futex/synckit', base: 'synckit', target: null },
  { case: '14-small', metric: 'rate', ours: 'shared-futex/synckit', base: 'createSyncFn', target: 0.9 },
  { case: '14-small', metric: 'cpuPerCall', ours: 'shared-futex/synckit', base: 'synckit', target: null },
  { case: '14-prettier', metric: 'rate', ours: 'shared-futex/synckit', base: 'synckit', target: null },
  { case: '14-prettier', metric: 'rate', ours: 'shared-futex/synckit', base: 'createSyncFn', target: 0.9 },
  { case: '14-prettier', metric: 'cpuPerCall', ours: 'shared-futex/synckit', base: 'synckit', target: null },
  { case: '14-first', metric: 'firstMs', ours: 'shared-futex/synckit', base: 'synckit', ratio: 'ours/base', op: '<=', target: 1 },
  { case: '14-first', metric: 'cpuMs', ours: 'shared-futex/synckit', base: 'synckit', ratio: 'ours/base', op: '<=', target: null },
  { case: '14-first', metric: 'firstMs', ours: 'createSyncFn', base: 'synckit', ratio: 'ours/base', op: '<=', target: null }
]

module.exports = { id: '14', title: 'synckit drop-in: shared-futex/synckit vs synckit vs createSyncFn', cases, comparisons }
