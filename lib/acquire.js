'use strict'
// The async acquisition shared by the primitives whose protocol lives in
// the addon (AsyncLock, Semaphore, and AutoResetEvent's signal): one step
// per outcome of a queued waiter, and the runExclusive shape around it.
//
// A primitive describes its protocol `p`:
//
//   p.index             the word's index in `ta`
//   p.now(ta, opts)     the fast path: true if it took what it asks for (and
//                       the signal has not fired)
//   p.park(ta, waited, remaining)
//                       one native step: a status (held now: ACQUIRED or
//                       OWNER_DIED) or { token, promise, at } (queued; `at`:
//                       [array, index] of the word it sleeps on, if not
//                       ta[p.index])
//   p.release(ta)       gives back what was acquired
//   p.passOn(ta)        a wake-up to compete ('ok') that will not be used:
//                       hand it on
//   p.leave(ta)         (optional) the acquisition ends without holding it
//                       (timed out, aborted): undo what park left behind
//   p.info(status)      what runExclusive's fn receives; p.ok: p.info(ACQUIRED)
//   p.missing           'not acquired' / 'no permit': for the timeout message
//
// Outcomes of a queued waiter: 'handoff' / 'owner-died' (it holds what it
// asked for), 'ok' (look again), 'timed-out', 'cancelled' (taken back out
// of the queue by the abort: it consumed nothing).
const { runHeld } = require('./held')
const { cancelAsync } = require('./futex').internal
const { now, asyncOptions, callbackOf } = require('./options')
const { ACQUIRED, OWNER_DIED, LockTimeoutError, abortError } = require('./errors')

// Resolves with ACQUIRED or OWNER_DIED; rejects with LockTimeoutError or
// AbortError, in which case nothing is held and nothing is queued. Something
// handed over while the abort was under way is given back (p.release), except
// a dead owner's lock taken over: that is always reported (the caller holds
// the lock and is told, once).
//
// A step that throws rejects with what it threw, and leaves nothing queued
// or held: a native step throws before it queues, and a give-back that
// throws found nothing of ours to give (this thread's own unlock() released
// what was handed to us: ownership is per thread).
function acquire (p, ta, opts, what) {
  const signal = opts.signal
  if (signal !== undefined && signal.aborted) return Promise.reject(abortError(signal))
  const timeout = opts.timeout
  const start = now()
  const aborted = () => signal !== undefined && signal.aborted
  return new Promise((resolve, reject) => {
    let queued = null // the token of our queued waiter
    let at = null // where it sleeps, if not ta[p.index]
    const onAbort = () => {
      if (queued === null) return
      const cancelled = at === null ? cancelAsync(ta, p.index, queued) : cancelAsync(at[0], at[1], queued)
      if (cancelled) queued = null // it settles 'cancelled'
    }
    const finish = (settle, value) => {
      if (signal !== undefined) signal.removeEventListener('abort', onAbort)
      settle(value)
    }
    const got = (status) => {
      if (status === OWNER_DIED || !aborted()) return finish(resolve, status)
      p.release(ta) // handed to us while we were being aborted: pass it on
      finish(reject, abortError(signal))
    }
    const step = (outcome) => {
      try {
        advance(outcome)
      } catch (e) {
        queued = null
        // What park left behind goes too (a place in a line).
        if (p.leave !== undefined) {
          try {
            p.leave(ta)
          } catch {}
        }
        finish(reject, e)
      }
    }
    const advance = (outcome) => {
      queued = null
      if (outcome === 'handoff') return got(ACQUIRED)
      if (outcome === 'owner-died') return got(OWNER_DIED)
      const remaining = start + timeout - now()
      if (outcome === 'cancelled' || outcome === 'timed-out' || remaining <= 0 || aborted()) {
        if (outcome === 'ok') p.passOn(ta)
        if (p.leave !== undefined) p.leave(ta)
        return finish(reject, aborted() ? abortError(signal) : new LockTimeoutError(`${what}: ${p.missing} within ${timeout} ms`))
      }
      const q = p.park(ta, now() - start, remaining)
      if (typeof q === 'string') return got(q)
      queued = q.token
      at = q.at === undefined ? null : q.at
      q.promise.then(step)
    }
    if (signal !== undefined) signal.addEventListener('abort', onAbort)
    step(null)
  })
}

// acquireAsync: the fast path, else the steps above.
function acquireAsync (p, ta, opts, what) {
  return p.now(ta, opts) ? Promise.resolve(ACQUIRED) : acquire(p, ta, opts, what)
}

const RESOLVED = Promise.resolve()

// runExclusive: fn(p.info(status)) runs in the same turn the acquisition
// succeeds, so a synchronous fn holds it only while it runs, and never
// synchronously inside the call; it is released however fn ends. `deferred`:
// the acquisition itself starts one microtask after the call (AsyncLock),
// else at once (Semaphore, which takes a free permit in the call).
function exclusive (p, ta, fn, options, what, deferred) {
  let opts
  try {
    callbackOf(what, fn)
    opts = asyncOptions(what, options)
  } catch (e) {
    return Promise.reject(e)
  }
  if (deferred) {
    return RESOLVED.then(() => p.now(ta, opts)
      ? runHeld(fn, p.ok, p.release, ta)
      : acquire(p, ta, opts, what).then((status) => runHeld(fn, p.info(status), p.release, ta)))
  }
  if (p.now(ta, opts)) return RESOLVED.then(() => runHeld(fn, p.ok, p.release, ta))
  return acquire(p, ta, opts, what).then((status) => runHeld(fn, p.info(status), p.release, ta))
}

module.exports = { acquire, acquireAsync, exclusive }
