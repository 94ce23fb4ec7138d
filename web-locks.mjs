// `import { locks } from 'shared-futex/web-locks'`: the same module instance
// as the CommonJS one.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./web-locks.js')
export const { locks, LockManager, Lock, setKeepAlive } = cjs
export default cjs
