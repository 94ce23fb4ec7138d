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
  let thenable
  try {
    result = fn(arg)
    thenable = isThenable(result)
  } catch (e) {
    // fn threw, or reading its result's `then` did (a getter, a revoked
    // Proxy): as if fn had thrown.
    release(target)
    throw e
  }
  if (!thenable) {
    release(target)
    return result
  }
  return settled(result).then(
    (value) => { release(target); return value },
    (e) => { release(target); throw e }
  )
}

// Whether `x` is a thenable; reads `x.then` once, and may throw as that read does.
function isThenable (x) {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof x.then === 'function'
}

// A promise that settles as the thenable `x` does. Unlike Promise.resolve,
// which reads `x.constructor` of a promise in the call, it never throws: any
// throw of x's getters or of its `then` rejects it.
function settled (x) {
  return new Promise((resolve) => resolve(x))
}

module.exports = { releaser, runHeld, isThenable, settled }
