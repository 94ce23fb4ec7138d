'use strict'
// The file of the addon this thread loaded (lib/native.js sets it), or that
// a worker of createSyncFn's is told to load: its caller's (posted with the
// rings, lib/sync-preload.js sets it before lib/native.js loads), so that the
// worker, whose first call waits for it to start, does not search for it
// again through binding.js.
module.exports = { file: null }
