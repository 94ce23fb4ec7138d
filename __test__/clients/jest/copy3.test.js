'use strict'
require('../shared')({ test, expect }, require('../../..'))
