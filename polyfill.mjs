// `import 'shared-futex/polyfill'`: the same module instance as the CommonJS
// one, so importing it installs the polyfill too.
import { createRequire } from 'module'
const cjs = createRequire(import.meta.url)('./polyfill.js')
export const { install, uninstall, isInstalled } = cjs
export default cjs
