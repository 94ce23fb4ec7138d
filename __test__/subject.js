'use strict'
// The implementation under test, as seen by every test file and fixture.
//
//   (default)                        the package root, `require('..')`
//   SHARED_FUTEX_UNDER_TEST=native   V8's own Atomics on both sides (Node 16+)
//
// The native mode runs the whole suite against the reference implementation:
// a test that fails there is a bug in the test, not in the module. Workers and
// child processes inherit the variable, so both sides of every wait/notify pair
// always use the same implementation (the module's queue is not V8's).
const mode = process.env.SHARED_FUTEX_UNDER_TEST || 'module'

function nativeSubject () {
  if (typeof Atomics.waitAsync !== 'function') {
    throw new Error('SHARED_FUTEX_UNDER_TEST=native needs Atomics.waitAsync (Node 16+)')
  }
  // V8 has no switch for "pending waitAsync keeps the loop alive"; emulate
  // the module's setKeepAlive with one ref'd timer held while such waiters
  // are pending. Arrow functions: `new` throws, name and length match.
  let keepAlive = false
  let held = 0
  let timer = null
  const release = () => {
    if (--held === 0) clearInterval(timer)
  }
  const waitAsync = (typedArray, index, value, timeout) => {
    const result = Atomics.waitAsync(typedArray, index, value, timeout)
    if (keepAlive && result.async) {
      if (held++ === 0) timer = setInterval(() => {}, 1 << 30)
      result.value.then(release, release)
    }
    return result
  }
  const setKeepAlive = (enabled) => {
    const previous = keepAlive
    keepAlive = enabled === true
    return previous
  }
  return { wait: Atomics.wait, notify: Atomics.notify, waitAsync, setKeepAlive }
}

let impl
if (mode === 'native') impl = nativeSubject()
else if (mode === 'module') impl = require('..')
else throw new Error(`SHARED_FUTEX_UNDER_TEST must be "native" or unset, not ${JSON.stringify(mode)}`)

module.exports = {
  kind: mode,
  wait: impl.wait,
  notify: impl.notify,
  waitAsync: impl.waitAsync,
  setKeepAlive: impl.setKeepAlive
}
