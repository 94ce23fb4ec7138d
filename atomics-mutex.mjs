// `import { Mutex, Condition } from 'shared-futex/atomics-mutex'`: the same
// module instance as the CommonJS one.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./atomics-mutex.js')
export const { Mutex, Condition, UnlockToken } = cjs
export default cjs
