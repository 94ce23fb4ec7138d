'use strict'
// Preloaded (`--require`) into workers created while the polyfill is
// installed: installs it on the worker's own Atomics before its code runs.
require('./polyfill').install()
