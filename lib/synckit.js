'use strict'
// `shared-futex/synckit`: synckit's createSyncFn / runAsWorker (its
// signature, options, environment variables and TypeScript runners) on top
// of createSyncFn / serveSync (lib/sync-call.js). See docs/synckit.md.
const fs = require('fs')
const path = require('path')
const { fileURLToPath, pathToFileURL, URL } = require('url')
const { internal } = require('./sync-call')
const { SyncCallTimeoutError } = require('./errors')
const { show } = require('./options')

const TsRunner = Object.freeze({
  Node: 'node',
  Bun: 'bun',
  TsNode: 'ts-node',
  EsbuildRegister: 'esbuild-register',
  EsbuildRunner: 'esbuild-runner',
  OXC: 'oxc',
  SWC: 'swc',
  TSX: 'tsx'
})
const RUNNERS = Object.keys(TsRunner).map((k) => TsRunner[k])

// The package each runner needs, looked for from the current directory
// (where Node resolves a worker's --require / --import / --loader).
const PACKAGES = {
  'ts-node': 'ts-node',
  'esbuild-register': 'esbuild-register',
  'esbuild-runner': 'esbuild-runner',
  oxc: '@oxc-node/core',
  swc: '@swc-node/register',
  tsx: 'tsx'
}

const DEFAULT_GLOBAL_SHIMS_PRESET = [
  { moduleName: 'node-fetch', globalName: 'fetch' },
  { moduleName: 'node:perf_hooks', globalName: 'performance', named: 'performance' }
]

const OPTIONS = ['timeout', 'execArgv', 'tsRunner', 'transferList', 'globalShims']

// Versions compared as synckit compares them (its exported helpers):
// 1, 0 or -1 as `version1` is above, equal to or below `version2`.
function compareVersion (version1, version2) {
  if (typeof version1 !== 'string') throw new TypeError(`compareVersion: version1 must be a string (e.g. '20.6'), got ${show(version1)}`)
  if (typeof version2 !== 'string') throw new TypeError(`compareVersion: version2 must be a string (e.g. '20.6'), got ${show(version2)}`)
  const a = version1.split('.').map(Number.parseFloat)
  const b = version2.split('.').map(Number.parseFloat)
  for (let k = 0; k < Math.max(a.length, b.length); k++) {
    const x = a[k] || 0
    const y = b[k] || 0
    if (x !== y) return x > y ? 1 : -1
  }
  return 0
}
// This Node's version against `version`.
function compareNodeVersion (version) {
  if (typeof version !== 'string') throw new TypeError(`compareNodeVersion: version must be a string (e.g. '20.6'), got ${show(version)}`)
  return compareVersion(process.versions.node, version)
}
const STRIP_TYPES_NODE_VERSION = '22.6'
const TRANSFORM_TYPES_NODE_VERSION = '22.7'
const DEFAULT_TYPES_NODE_VERSION = '23.6'
const STRIP_TYPES_FLAG = '--experimental-strip-types'
const TRANSFORM_TYPES_FLAG = '--experimental-transform-types'
const NO_STRIP_TYPES_FLAG = '--no-experimental-strip-types'
const IMPORT_FLAG_SUPPORTED = compareNodeVersion('20.6') >= 0
const MODULE_REGISTER_SUPPORTED = compareNodeVersion('18.19') >= 0
const MTS_SUPPORTED = compareNodeVersion('20.8') >= 0
const TS_ESM_PARTIAL_SUPPORTED = compareNodeVersion('16') >= 0 && compareNodeVersion('18.19') < 0

// The environment, read once as the module loads (as synckit does).
const env = process.env
const ENV = {
  timeout: env.SYNCKIT_TIMEOUT,
  execArgv: env.SYNCKIT_EXEC_ARGV,
  tsRunner: env.SYNCKIT_TS_RUNNER,
  globalShims: env.SYNCKIT_GLOBAL_SHIMS
}
const NODE_OPTIONS = (env.NODE_OPTIONS || '').split(/\s+/)
const hasFlag = (flag) => NODE_OPTIONS.includes(flag) || process.argv.includes(flag) || process.execArgv.includes(flag)

const DEFAULT_TIMEOUT = ENV.timeout ? +ENV.timeout : undefined
const DEFAULT_EXEC_ARGV = (ENV.execArgv || '').split(',')
const DEFAULT_TS_RUNNER = ENV.tsRunner || undefined
const DEFAULT_GLOBAL_SHIMS = ENV.globalShims === '1' || ENV.globalShims === 'true'

const isFile = (file) => {
  try {
    return fs.statSync(file).isFile()
  } catch {
    return false
  }
}

// Whether package `name` resolves from the current directory.
function isPkgAvailable (name) {
  if (name.startsWith('node:')) return true
  try {
    require.resolve(name, { paths: [process.cwd()] })
    return true
  } catch (e) {
    // Installed, but its exports have no `require` entry for the root.
    return e.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED'
  }
}

// The type of the nearest package.json above `file` says ES modules.
function packageIsModule (file) {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const pkg = path.join(dir, 'package.json')
    if (isFile(pkg)) {
      try {
        return JSON.parse(fs.readFileSync(pkg, 'utf8')).type === 'module'
      } catch {
        return false
      }
    }
    if (path.dirname(dir) === dir) return false
  }
}

// The worker's file as synckit picks it: outside node_modules, a path
// without an extension or with .js / .mjs / .cjs is tried with .ts then .js
// (.mts then .mjs, .cts then .cjs) first.
function resolveFile (workerPath) {
  const ext = path.extname(workerPath)
  if (/([/\\])node_modules\1/.test(workerPath) || !(ext === '' || /^\.[cm]?js$/.test(ext))) return workerPath
  const base = ext === '' ? workerPath : workerPath.slice(0, -ext.length)
  const extensions = ext === '.cjs' ? ['.cts', '.cjs'] : ext === '.mjs' ? ['.mts', '.mjs'] : ['.ts', '.js']
  for (const e of extensions) {
    if (isFile(base + e)) return base + e
  }
  return workerPath
}

const hasRequire = (argv) => argv.includes('--require') || argv.includes('-r')
const hasLoader = (argv) => argv.includes('--loader') || argv.includes('--experimental-loader')

// The execArgv of `file`'s worker: `execArgv` with what its TypeScript
// runner needs (synckit's flags for each).
function runnerArgv (file, execArgv, tsRunner) {
  if (!/\.[cm]?ts$/.test(file)) return execArgv
  const ext = path.extname(file)
  const esm = ext === '.mts' || (ext !== '.cts' && packageIsModule(file))
  const strip = execArgv.indexOf(STRIP_TYPES_FLAG)
  const transform = execArgv.indexOf(TRANSFORM_TYPES_FLAG)
  const noStrip = execArgv.indexOf(NO_STRIP_TYPES_FLAG)
  // As synckit: where Node has process.features.typescript (22.10+), it
  // says whether --no-experimental-strip-types of the process holds.
  const noStripTypes = noStrip > strip || noStrip > transform ||
    (strip === -1 && transform === -1 && hasFlag(NO_STRIP_TYPES_FLAG) &&
      (compareNodeVersion('22.10') >= 0
        ? process.features.typescript === false
        : !hasFlag(STRIP_TYPES_FLAG) && !hasFlag(TRANSFORM_TYPES_FLAG)))
  let runner = tsRunner
  if (runner === undefined) {
    if (process.versions.bun) runner = 'bun'
    else if (!noStripTypes && compareNodeVersion(STRIP_TYPES_NODE_VERSION) >= 0) runner = 'node'
    else if (isPkgAvailable('ts-node')) runner = 'ts-node'
    else throw new Error(`createSyncFn(${file}): no TypeScript runner: this Node (${process.version}) cannot strip types (22.6+) and ts-node is not installed; pass tsRunner (${RUNNERS.join(', ')})`)
  }
  if (runner !== 'node' && runner !== 'bun' && !isPkgAvailable(PACKAGES[runner])) {
    throw new Error(`createSyncFn(${file}): tsRunner '${runner}' needs the package ${PACKAGES[runner]}, which does not resolve from ${process.cwd()} (npm install --save-dev ${PACKAGES[runner]})`)
  }
  const unsupported = ['esbuild-register', 'esbuild-runner']
    .concat(TS_ESM_PARTIAL_SUPPORTED ? ['oxc', 'swc'] : [])
    .concat(!esm || TS_ESM_PARTIAL_SUPPORTED ? [] : ['tsx'])
  if (ext !== '.ts' && unsupported.includes(runner)) {
    throw new Error(`createSyncFn(${file}): ${runner} is not supported for ${ext} files yet${!esm || TS_ESM_PARTIAL_SUPPORTED ? ": try tsRunner 'tsx'" : MTS_SUPPORTED ? ": try tsRunner 'oxc' or 'swc'" : ''}`)
  }
  switch (runner) {
    case 'bun':
      if (!process.versions.bun) throw new Error(`createSyncFn(${file}): tsRunner 'bun' runs only under Bun`)
      return execArgv
    case 'node':
      if (compareNodeVersion(STRIP_TYPES_NODE_VERSION) < 0) {
        throw new Error(`createSyncFn(${file}): tsRunner 'node': type stripping is not supported in this node version (${process.version}; it needs Node ${STRIP_TYPES_NODE_VERSION}+)`)
      }
      if (noStripTypes) throw new Error(`createSyncFn(${file}): tsRunner 'node': type stripping is disabled explicitly (${NO_STRIP_TYPES_FLAG})`)
      if (compareNodeVersion(DEFAULT_TYPES_NODE_VERSION) >= 0) return execArgv
      if (compareNodeVersion(TRANSFORM_TYPES_NODE_VERSION) >= 0) {
        return execArgv.includes(TRANSFORM_TYPES_FLAG) ? execArgv : [TRANSFORM_TYPES_FLAG].concat(execArgv)
      }
      return execArgv.includes(STRIP_TYPES_FLAG) ? execArgv : [STRIP_TYPES_FLAG].concat(execArgv)
    case 'ts-node':
      if (esm) return execArgv.includes('--loader') ? execArgv : ['--loader', 'ts-node/esm'].concat(execArgv)
      return hasRequire(execArgv) ? execArgv : ['-r', 'ts-node/register'].concat(execArgv)
    case 'esbuild-register':
      if (esm) return hasLoader(execArgv) ? execArgv : ['--loader', 'esbuild-register/loader'].concat(execArgv)
      return hasRequire(execArgv) ? execArgv : ['-r', 'esbuild-register'].concat(execArgv)
    case 'esbuild-runner':
      return hasRequire(execArgv) ? execArgv : ['-r', 'esbuild-runner/register'].concat(execArgv)
    case 'oxc':
      return execArgv.includes('--import') ? execArgv : ['--import', '@oxc-node/core/register'].concat(execArgv)
    case 'swc':
      if (esm) {
        if (IMPORT_FLAG_SUPPORTED) return execArgv.includes('--import') ? execArgv : ['--import', '@swc-node/register/esm-register'].concat(execArgv)
        return hasLoader(execArgv) ? execArgv : ['--loader', '@swc-node/register/esm'].concat(execArgv)
      }
      return hasRequire(execArgv) ? execArgv : ['-r', '@swc-node/register'].concat(execArgv)
    case 'tsx':
      if (IMPORT_FLAG_SUPPORTED) return execArgv.includes('--import') ? execArgv : ['--import', 'tsx'].concat(execArgv)
      return execArgv.includes('--loader') ? execArgv : ['--loader', 'tsx'].concat(execArgv)
  }
  /* istanbul ignore next */
  throw new Error(`unknown tsRunner ${runner}`)
}

// Under Yarn Plug'n'Play: the execArgv of a worker with its runtime
// (--require .pnp.cjs) and ES module loader (.pnp.loader.mjs, where it
// exists), as synckit adds them, unless NODE_OPTIONS (which workers
// inherit) or execArgv already has them.
function pnpArgv (execArgv) {
  if (!process.versions.pnp) return execArgv
  let api = null
  for (const from of [undefined, { paths: [process.cwd()] }]) {
    try {
      api = require.resolve('pnpapi', from)
      break
    } catch {}
  }
  if (api === null || execArgv.includes(api) ||
    NODE_OPTIONS.some((o, k) => (o === '-r' || o === '--require') && NODE_OPTIONS[k + 1] === api)) return execArgv
  const loader = path.resolve(api, '../.pnp.loader.mjs')
  return (isFile(loader) ? ['--loader', pathToFileURL(loader).href] : []).concat(['-r', api], execArgv)
}

// A GlobalShim as an import statement and the assignment of its global.
function shimSource (shim) {
  let from = shim.moduleName
  if (path.isAbsolute(from)) {
    from = pathToFileURL(from).href
  } else if (!from.startsWith('node:')) {
    // A data: module resolves no bare name: the package's file, from here.
    try {
      from = pathToFileURL(require.resolve(from, { paths: [process.cwd()] })).href
    } catch (e) {
      throw new Error(`createSyncFn: globalShims: the module ${JSON.stringify(shim.moduleName)} does not resolve with require from ${process.cwd()}`, { cause: e })
    }
  }
  const name = shim.globalName
  if (!name) return `import ${JSON.stringify(from)};`
  const local = shim.named === null ? `* as ${name}` : shim.named && shim.named.trim() ? `{${shim.named}}` : name
  const value = shim.named && shim.named.trim() ? shim.named : name
  const assign = `globalThis.${name}=${value};`
  return `import ${local} from ${JSON.stringify(from)};` + (shim.conditional === false ? assign : `if(!globalThis.${name})${assign}`)
}

function checkShims (shims) {
  if (typeof shims === 'boolean') return shims ? DEFAULT_GLOBAL_SHIMS_PRESET : []
  if (!Array.isArray(shims)) throw new TypeError(`createSyncFn: globalShims must be a boolean or an array of { moduleName, globalName?, named?, conditional? }, got ${show(shims)}`)
  for (const s of shims) {
    if (s === null || typeof s !== 'object' || typeof s.moduleName !== 'string') {
      throw new TypeError(`createSyncFn: each of globalShims must be an object with a moduleName string, got ${show(s)}`)
    }
    if (s.globalName !== undefined && (typeof s.globalName !== 'string' || (s.globalName !== '' && !/^[A-Za-z_$][\w$]*$/.test(s.globalName)))) {
      throw new TypeError(`createSyncFn: globalShims: globalName must be an identifier, got ${show(s.globalName)}`)
    }
    if (s.named !== undefined && s.named !== null && typeof s.named !== 'string') {
      throw new TypeError(`createSyncFn: globalShims: named must be a string or null, got ${show(s.named)}`)
    }
    if (s.conditional !== undefined && typeof s.conditional !== 'boolean') {
      throw new TypeError(`createSyncFn: globalShims: conditional must be a boolean, got ${show(s.conditional)}`)
    }
  }
  return shims
}

function optionsOf (timeoutOrOptions) {
  const given = typeof timeoutOrOptions === 'number' ? { timeout: timeoutOrOptions } : timeoutOrOptions === undefined || timeoutOrOptions === null ? {} : timeoutOrOptions
  if (typeof given !== 'object') throw new TypeError(`createSyncFn: the second argument must be a timeout (a number) or an options object, got ${show(given)}`)
  for (const key of Object.keys(given)) {
    if (!OPTIONS.includes(key)) throw new TypeError(`createSyncFn: unknown option ${JSON.stringify(key)} (synckit's options: ${OPTIONS.join(', ')})`)
  }
  const pick = (key, fallback) => given[key] === undefined ? fallback : given[key]
  const timeout = pick('timeout', DEFAULT_TIMEOUT)
  if (given.timeout === undefined && timeout !== undefined && !(timeout >= 0)) {
    throw new TypeError(`createSyncFn: SYNCKIT_TIMEOUT must be a number of milliseconds, got ${JSON.stringify(ENV.timeout)}`)
  }
  if (timeout !== undefined && typeof timeout !== 'number') throw new TypeError(`createSyncFn: timeout must be a number of milliseconds, got ${show(timeout)}`)
  const execArgv = pick('execArgv', DEFAULT_EXEC_ARGV)
  if (!Array.isArray(execArgv) || !execArgv.every((a) => typeof a === 'string')) {
    throw new TypeError(`createSyncFn: execArgv must be an array of strings, got ${show(execArgv)}`)
  }
  const tsRunner = pick('tsRunner', DEFAULT_TS_RUNNER)
  // synckit's message (it checks only for a TypeScript worker), as a
  // TypeError, for any worker.
  if (tsRunner !== undefined && !RUNNERS.includes(tsRunner)) {
    throw new TypeError(`Unknown ts runner: ${String(tsRunner)}` + (given.tsRunner === undefined ? ` (SYNCKIT_TS_RUNNER; the runners: ${RUNNERS.join(', ')})` : ''))
  }
  const transferList = pick('transferList', [])
  if (!Array.isArray(transferList)) throw new TypeError(`createSyncFn: transferList must be an array, got ${show(transferList)}`)
  // synckit reads any other value as false: here a value that means
  // nothing is a TypeError, as for SYNCKIT_TIMEOUT.
  if (given.globalShims === undefined && ENV.globalShims !== undefined && !['', '0', '1', 'true', 'false'].includes(ENV.globalShims)) {
    throw new TypeError(`createSyncFn: SYNCKIT_GLOBAL_SHIMS must be 1 or true (the preset), or 0, false or empty, got ${JSON.stringify(ENV.globalShims)}`)
  }
  const globalShims = checkShims(pick('globalShims', DEFAULT_GLOBAL_SHIMS))
  return { timeout, execArgv: execArgv.filter((a) => a !== ''), tsRunner, transferList, globalShims }
}

let cache = null
const TIMED_OUT = 'Internal error: Atomics.wait() failed: timed-out'

/**
 * synckit's createSyncFn: a function that calls the `runAsWorker` handler of
 * the worker at `workerPath` synchronously; one per path.
 */
function createSyncFn (workerPath, timeoutOrOptions) {
  let file = workerPath
  if (file instanceof URL || (typeof file === 'string' && file.startsWith('file:'))) {
    file = fileURLToPath(file)
  } else if (typeof file !== 'string') {
    throw new TypeError(`createSyncFn: workerPath must be an absolute path or a file: URL, got ${show(workerPath)}`)
  }
  // Bad options throw also where the path has its function already.
  const opts = optionsOf(timeoutOrOptions)
  if (cache === null) cache = new Map()
  const cached = cache.get(file)
  if (cached !== undefined) return cached
  if (!path.isAbsolute(file)) {
    throw new TypeError(`createSyncFn: \`workerPath\` must be absolute (use require.resolve or new URL(…, import.meta.url)), got ${JSON.stringify(file)}`)
  }
  const target = resolveFile(file)
  let execArgv = pnpArgv(runnerArgv(target, opts.execArgv, opts.tsRunner))
  const shims = opts.globalShims.filter((s) => isPkgAvailable(s.moduleName))
  if (shims.length > 0) {
    if (!MODULE_REGISTER_SUPPORTED || !IMPORT_FLAG_SUPPORTED) {
      throw new Error(`createSyncFn: globalShims need Node 20.6+ (a worker's --import), this is ${process.version}`)
    }
    const source = shims.map(shimSource).join('')
    execArgv = ['--import', `data:text/javascript,${encodeURIComponent(source)}`].concat(execArgv)
  }
  // The worker starts now, as synckit's does (not at the first call).
  const call = internal.create(target, {
    timeout: opts.timeout,
    workerOptions: { execArgv, transferList: opts.transferList }
  }, true)
  // A timeout keeps its class (SyncCallTimeoutError, code
  // ERR_SYNC_CALL_TIMEOUT) and says it with synckit's words too, which
  // callers match.
  const fn = function syncFn (...args) {
    try {
      return call(...args)
    } catch (e) {
      if (e instanceof SyncCallTimeoutError) e.message = `${TIMED_OUT}: ${e.message}`
      throw e
    }
  }
  fn.close = call.close
  for (const key of [Symbol.asyncDispose, Symbol.dispose]) {
    if (typeof key === 'symbol') fn[key] = call[key]
  }
  cache.set(file, fn)
  return fn
}

/**
 * synckit's runAsWorker: in a worker of createSyncFn's, answers its calls
 * with `fn(...args)`, each as it comes (as synckit's worker: a call that
 * timed out and still runs does not hold up the next); elsewhere (a main
 * thread, another worker) does nothing, as synckit does.
 */
function runAsWorker (fn) {
  if (typeof fn !== 'function') throw new TypeError(`runAsWorker: expected a function, got ${show(fn)}`)
  const serve = globalThis[internal.SERVE]
  if (typeof serve !== 'function') return
  serve(fn, true)
}

module.exports = {
  createSyncFn,
  runAsWorker,
  compareVersion,
  compareNodeVersion,
  TsRunner,
  DEFAULT_GLOBAL_SHIMS_PRESET,
  DEFAULT_TIMEOUT,
  DEFAULT_EXEC_ARGV,
  DEFAULT_TS_RUNNER,
  DEFAULT_GLOBAL_SHIMS,
  STRIP_TYPES_NODE_VERSION,
  TRANSFORM_TYPES_NODE_VERSION,
  DEFAULT_TYPES_NODE_VERSION,
  STRIP_TYPES_FLAG,
  TRANSFORM_TYPES_FLAG,
  NO_STRIP_TYPES_FLAG,
  IMPORT_FLAG_SUPPORTED,
  MODULE_REGISTER_SUPPORTED,
  MTS_SUPPORTED,
  TS_ESM_PARTIAL_SUPPORTED
}
