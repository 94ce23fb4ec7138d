'use strict'
// The locks under test, by name, usable in any thread:
//   'ours': shared-futex's AsyncLock (lib/lock.js);
//   'blog': the blog post's AsyncLock over native Atomics (baselines/).
// Both are built from (sab, byteOffset), so every thread gets the same lock.

const { ROOT } = require('./impl')
const { BlogAsyncLock } = require('../baselines/blog-lock')

// Why shared-futex's lock cannot be measured yet, or null.
function oursMissing () {
  try {
    const { AsyncLock } = require(ROOT)
    return typeof AsyncLock === 'function' ? null : 'shared-futex does not export AsyncLock'
  } catch (e) {
    return `cannot load shared-futex: ${e.message}`
  }
}

function makeLock (name, sab, byteOffset) {
  if (name === 'blog') return new BlogAsyncLock(sab, byteOffset)
  if (name === 'ours') return new (require(ROOT).AsyncLock)(sab, byteOffset)
  throw new Error(`unknown lock ${name}`)
}

// Room for one lock of either kind (shared-futex's may use 8 bytes), on its
// own cache line.
function lockBuffer () {
  return new SharedArrayBuffer(64)
}

module.exports = { oursMissing, makeLock, lockBuffer }
