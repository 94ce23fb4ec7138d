//! N-API entry points of the semaphore protocol (`futex_core::semaphore`):
//! the contended paths of `lib/semaphore.js`. The uncontended acquire and
//! release never come here: they are one compare-exchange each in JavaScript.

use std::time::{Duration, Instant};

use futex_core::semaphore::{Taken, MAX_ACQUIRE};
use futex_core::RawSemaphore;
use napi::{Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;

use crate::cell::Cell;
use crate::resolver::Token;
use crate::{deadline, js_alive, queued, this_resolver, SLICE, TABLE};

/// The protocol of every semaphore in the process: an acquirer at the head
/// of the queue that has waited 1 ms is handed its permits as soon as they
/// are released, and has them reserved until then (docs/lock.md).
pub(crate) static SEMAPHORE: RawSemaphore = RawSemaphore { fair_after: Duration::from_millis(1) };

/// Result codes shared with `lib/semaphore.js`.
const ACQUIRED: u32 = 0;
const TIMED_OUT: u32 = 1;
const DEADLOCK: u32 = 2;

/// The semaphore at `ta[index]`: the address of its first word. Only an
/// `Int32Array` element with a second one after it is one.
///
/// # Safety
/// `env` and `ta` are live handles of the current call.
unsafe fn word(env: &Env, ta: &Unknown, index: f64) -> Result<usize> {
    // SAFETY: the caller's duty; the address is only used during the call
    // (or while the JS layer keeps the array of a queued waiter alive).
    match unsafe { Cell::resolve(env.raw(), ta.raw(), index)? } {
        c @ Cell::I32(_) => {
            // The second word (the reserved permits) is in the array too.
            // SAFETY: as above.
            unsafe { Cell::resolve(env.raw(), ta.raw(), index + 1.0)? };
            Ok(c.key())
        }
        Cell::I64(_) => Err(Error::new(Status::InvalidArg, "a semaphore word is an Int32Array element".to_owned())),
    }
}

/// The permits of one acquisition, checked again here (the JS layer checks
/// them first, with its own messages).
fn count(n: f64) -> Result<u32> {
    if n.fract() == 0.0 && (1.0..=f64::from(MAX_ACQUIRE)).contains(&n) {
        Ok(n as u32)
    } else {
        Err(Error::new(Status::InvalidArg, format!("an acquisition asks for 1 to {MAX_ACQUIRE} permits, not {n}")))
    }
}

/// Blocks until the caller holds `n` permits of the semaphore at
/// `ta[index]`, or `timeout` ms pass. Returns 0 acquired, 1 timed out.
#[napi(js_name = "semaphoreWait")]
pub fn semaphore_wait(env: Env, ta: Unknown, index: f64, n: f64, timeout: f64) -> Result<u32> {
    let n = count(n)?;
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let raw_env = env.raw();
    // SAFETY: the array argument keeps the words alive during this blocking call.
    let r = unsafe { SEMAPHORE.acquire(&TABLE, key, n, deadline(timeout), SLICE, || !js_alive(raw_env)) };
    // A stopping thread returns to no JavaScript: nobody sees an interruption.
    Ok(match r {
        Taken::Acquired => ACQUIRED,
        Taken::Deadlock => DEADLOCK,
        Taken::TimedOut | Taken::Interrupted => TIMED_OUT,
    })
}

/// One step of an async acquisition of `n` permits whose caller has waited
/// `waited` ms so far: takes them from the semaphore at `ta[index]` now
/// (returns 0), or queues an async waiter in `slot` of this thread's table
/// and returns its sequence number. Its promise then settles with 'handoff'
/// (a release handed it its permits), 'ok' (they were free: try again) or
/// 'timed-out'. The JS layer keeps `ta` alive while the waiter is queued.
#[napi(js_name = "semaphoreWaitAsync")]
pub fn semaphore_wait_async(
    env: Env,
    ta: Unknown,
    index: f64,
    n: f64,
    waited: f64,
    timeout: f64,
    slot: u32,
) -> Result<f64> {
    let n = count(n)?;
    let owner = this_resolver(slot)?;
    let since =
        Instant::now().checked_sub(Duration::from_secs_f64(waited.max(0.0) / 1000.0)).unwrap_or_else(Instant::now);
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let at = deadline(timeout);
    let token = || Token::new(slot, true, at.is_some()).0;
    // SAFETY: the array argument keeps the words alive during the call, and
    // the JS layer keeps them alive while the waiter is queued.
    match unsafe { SEMAPHORE.acquire_async(&TABLE, key, n, since, owner.clone(), token) } {
        Some(ticket) => Ok(queued(&owner, ticket, at)),
        None => Ok(0.0),
    }
}

/// The contended release of `n` permits of the semaphore at `ta[index]`
/// (0: only serve the acquirers the free and reserved permits cover): the
/// oldest acquirers are served in order while the permits cover them
/// (docs/lock.md). Returns how many did not fit under the maximum count
/// (0 normally).
#[napi(js_name = "semaphoreRelease")]
pub fn semaphore_release(env: Env, ta: Unknown, index: f64, n: u32) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    // SAFETY: the array argument keeps the words alive during the call.
    Ok(unsafe { SEMAPHORE.release(&TABLE, key, n) })
}
