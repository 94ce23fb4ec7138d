// `import 'shared-futex/web-locks/polyfill'`: the same module instance as the
// CommonJS one (importing it installs).
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./web-locks-polyfill.js')
export const { install, isInstalled } = cjs
export default cjs
