import { test, expect } from 'vitest'
import scenarios from '../shared.js'
// The package under test: this checkout, or where the test runner says it is.
const root = process.env.SHARED_FUTEX_ROOT
const futex = root ? (await import(/* @vite-ignore */ `${root}/index.js`)).default : (await import('../../../index.js')).default
scenarios({ test, expect }, futex)
