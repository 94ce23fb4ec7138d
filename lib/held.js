'use strict'
// What every primitive does with something a caller holds (a lock, a
// permit): give it an idempotent, disposable release function, or run a
// callback and release however the callback ends. Shared by AsyncLock and
// Semaphore (and whatever is built like them).
const { DISPOSE } = require('./options')

// A release function for `release(target)`: runs it once, however often it
// is called; `Symbol.dispose`-able, so `using` works.
function releaser (release, target) {
  let released = false
  const releaseIt = () => {
    if (released) return
    released = true
    release(target)
  }
  releaseIt[DISPOSE] = releaseIt
  return releaseIt
}

// Runs fn(arg) while something is held, then release(target): at once if fn
// returns a plain value or throws, when it settles if it returns a thenable.
// Resolves or rejects as fn does.
function runHeld (fn, arg, release, target) {
  let result
  try {
    result = fn(arg)
  } catch (e) {
    release(target)
    throw e
  }
  if (result === null || (typeof result !== 'object' && typeof result !== 'function') || typeof result.then !== 'function') {
    release(target)
    return result
  }
  return Promise.resolve(result).then(
    (value) => { release(target); return value },
    (e) => { release(target); throw e }
  )
}

module.exports = { releaser, runHeld }
