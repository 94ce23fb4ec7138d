'use strict'
// The package under test: this checkout, or where the test runner says it is.
require('../shared')({ test, expect }, require(process.env.SHARED_FUTEX_ROOT || '../../..'))
