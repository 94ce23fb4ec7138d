// ESM entry: the same module instance as the CommonJS one.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./index.js')
export const { wait, notify, waitAsync, setKeepAlive } = cjs
export default cjs
