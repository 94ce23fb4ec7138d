// `import { createSyncFn, runAsWorker } from 'shared-futex/synckit'`: the
// same module instance as the CommonJS one.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./synckit.js')
export const {
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
} = cjs
export default cjs
