// `import { PostgresLockManager } from 'shared-futex/web-locks/postgres'`: the
// same module instance as the CommonJS one.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./web-locks-postgres.js')
export const { PostgresLockManager, PostgresLockError } = cjs
export default cjs
