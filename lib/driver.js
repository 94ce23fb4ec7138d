'use strict'
// Runs a waiting procedure either blocking or asynchronously.
//
// A procedure is a generator over one Int32Array `ta`. It yields wait
// requests `{ index, value, timeout }` and receives the outcome of each:
//
//   'ok'         notified: this waiter consumed a wake-up
//   'not-equal'  ta[index] was no longer `value` when the wait began
//   'timed-out'  `timeout` ms passed (timeout is always finite and > 0 or Infinity)
//   'cancelled'  (async only) the AbortSignal fired and the waiter was taken
//                back out of the queue before anyone woke it
//
// and finally returns its result.
//
// The same procedure code serves the blocking and the promise-based API of
// Barrier, WaitGroup and ManualResetEvent: only the driver differs.
// (AutoResetEvent waits through its protocol in the addon and lib/acquire.js.)
//
// Cancellation contract (tokio's): when the signal fires, `ctx.cancelled`
// becomes true and the driver tries to take the queued waiter back out. If it
// was still queued the procedure gets 'cancelled' and owes nobody anything.
// If a notify got there first (cancelAsync returned false), the waiter's
// promise settles 'ok' and the procedure receives it with `ctx.cancelled` set:
// it consumed a wake-up meant for someone, and must pass it on (or use it and
// then release what it got). The driver keeps serving the procedure's waits
// after cancellation, so a procedure can finish a handoff it cannot refuse.
//
// A wait that cannot be queued (the native call throws) is treated as an
// abort: nothing was queued, the procedure gets 'cancelled' with
// `ctx.cancelled` set and leaves as an aborted one does (giving back an
// arrival or a registration it made), and the promise rejects with what the
// call threw. A second failure ends the procedure where it is (its `finally`
// blocks run). A procedure that throws rejects the promise with that.
//
// Over a shared region's memory (lib/region.js) a wait is *watching*: a
// process killed between a change and its wake-up (the change and the
// wake-up are one native call, but a SIGKILL can fall between its two
// halves) would otherwise leave the sleepers asleep. The region's count of
// ends is read before each step of the procedure (which looks at the state
// and yields the wait), and the end of a thread or process wakes the
// sleeper (src/region.rs, where each such sleep also lasts a slice at
// most). A wake-up that is not a notify reaches the procedure as 'ok',
// 'not-equal' or 'timed-out', which it takes, as always, for "look again":
// every procedure re-reads the state and its own deadline.
const futex = require('./futex')

const { wait } = futex
const { enqueueAsync, enqueueWatchingAsync, waitWatching, regionEnds, cancelAsync, inRegion } = futex.internal

function runBlocking (ta, gen) {
  if (inRegion(ta)) return runBlockingInRegion(ta, gen)
  let step = gen.next()
  while (!step.done) {
    const w = step.value
    step = gen.next(wait(ta, w.index, w.value, w.timeout))
  }
  return step.value
}

function runBlockingInRegion (ta, gen) {
  let ends = regionEnds(ta)
  let step = gen.next()
  while (!step.done) {
    const w = step.value
    const r = waitWatching(ta, w.index, w.value, ends, w.timeout)
    ends = regionEnds(ta)
    step = gen.next(r)
  }
  return step.value
}

// Async waiters keep the event loop alive (keepAlive = true): a pending
// acquisition is pending work.
function runAsync (ta, gen, ctx, signal) {
  const region = inRegion(ta)
  return new Promise((resolve, reject) => {
    let current = null // the queued waiter: { index, token, resume }
    const onAbort = () => {
      ctx.cancelled = true
      const c = current
      if (c !== null && cancelAsync(ta, c.index, c.token)) {
        // It left the queue having consumed nothing. (The core also settles
        // its promise with 'cancelled'; resume runs once either way.)
        Promise.resolve('cancelled').then(c.resume)
      }
    }
    const finish = () => {
      if (signal !== undefined) signal.removeEventListener('abort', onAbort)
    }
    if (signal !== undefined) {
      signal.addEventListener('abort', onAbort)
      // Aborted already, or (a guarded signal, lib/options.js) its
      // addEventListener threw: the procedure leaves before it queues.
      if (signal.aborted) ctx.cancelled = true
    }
    let failure = null // { error } once a wait could not be queued
    advance(undefined)

    function advance (result) {
      let step
      try {
        let ends = region ? regionEnds(ta) : 0
        step = gen.next(result)
        while (!step.done) {
          const w = step.value
          let q
          try {
            q = region
              ? enqueueWatchingAsync(ta, w.index, w.value, ends, w.timeout, true)
              : enqueueAsync(ta, w.index, w.value, w.timeout, true)
          } catch (e) {
            if (failure !== null) {
              gen.return(undefined)
              break
            }
            failure = { error: e }
            ctx.cancelled = true
            if (region) ends = regionEnds(ta)
            step = gen.next('cancelled')
            continue
          }
          if (q === 'not-equal') {
            if (region) ends = regionEnds(ta)
            step = gen.next('not-equal')
            continue
          }
          let settled = false
          const resume = (r) => {
            if (settled) return
            settled = true
            current = null
            advance(r)
          }
          current = { index: w.index, token: q.token, resume }
          q.promise.then(resume)
          return
        }
      } catch (e) {
        finish()
        reject(failure !== null ? failure.error : e)
        return
      }
      finish()
      if (failure !== null) reject(failure.error)
      else resolve(step.value)
    }
  })
}

module.exports = { runBlocking, runAsync }
