'use strict'
// Preloaded (`--require`) into workers created while the polyfill is
// installed with { force: true }: replaces even a native Atomics.waitAsync,
// so the worker shares the module's queue with the thread that created it.
require('./polyfill').install({ force: true })
