import { test, expect } from 'vitest'
import futex from '../../../index.js'
import scenarios from '../shared.js'
scenarios({ test, expect }, futex)
