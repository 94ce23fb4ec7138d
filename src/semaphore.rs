//! N-API entry points of the semaphore protocol (`futex_core::semaphore`):
//! the contended paths of `lib/semaphore.js`. The uncontended acquire and
//! release never come here: they are one compare-exchange each in JavaScript.

use std::time::{Duration, Instant};

use futex_core::semaphore::Taken;
use futex_core::RawSemaphore;
use napi::{Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;

use crate::cell::Cell;
use crate::resolver::Token;
use crate::{deadline, js_alive, queued, this_resolver, SLICE, TABLE};

/// The protocol of every semaphore word in the process: an acquirer that
/// has waited 1 ms is handed the next permit released, as the lock does.
pub(crate) static SEMAPHORE: RawSemaphore = RawSemaphore { fair_after: Duration::from_millis(1) };

/// Result codes shared with `lib/semaphore.js`.
const ACQUIRED: u32 = 0;
const TIMED_OUT: u32 = 1;

/// The semaphore word `ta[index]`: its address. Only an `Int32Array` element is one.
///
/// # Safety
/// `env` and `ta` are live handles of the current call.
unsafe fn word(env: &Env, ta: &Unknown, index: f64) -> Result<usize> {
    // SAFETY: the caller's duty; the address is only used during the call
    // (or while the JS layer keeps the array of a queued waiter alive).
    match unsafe { Cell::resolve(env.raw(), ta.raw(), index)? } {
        c @ Cell::I32(_) => Ok(c.key()),
        Cell::I64(_) => Err(Error::new(Status::InvalidArg, "a semaphore word is an Int32Array element".to_owned())),
    }
}

/// Blocks until the caller holds a permit of the semaphore word
/// `ta[index]`, or `timeout` ms pass. Returns 0 acquired, 1 timed out.
#[napi(js_name = "semaphoreWait")]
pub fn semaphore_wait(env: Env, ta: Unknown, index: f64, timeout: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let raw_env = env.raw();
    // SAFETY: the array argument keeps the word alive during this blocking call.
    let r = unsafe { SEMAPHORE.acquire(&TABLE, key, deadline(timeout), SLICE, || !js_alive(raw_env)) };
    // A stopping thread returns to no JavaScript: nobody sees an interruption.
    Ok(if r == Taken::Acquired { ACQUIRED } else { TIMED_OUT })
}

/// One step of an async acquisition whose caller has waited `waited` ms so
/// far: takes a permit of the semaphore word `ta[index]` now (returns 0), or
/// queues an async waiter in `slot` of this thread's table and returns its
/// sequence number. Its promise then settles with 'handoff' (a release
/// handed it a permit), 'ok' (a permit was released: try again) or
/// 'timed-out'. The JS layer keeps `ta` alive while the waiter is queued.
#[napi(js_name = "semaphoreWaitAsync")]
pub fn semaphore_wait_async(env: Env, ta: Unknown, index: f64, waited: f64, timeout: f64, slot: u32) -> Result<f64> {
    let owner = this_resolver(slot)?;
    let since =
        Instant::now().checked_sub(Duration::from_secs_f64(waited.max(0.0) / 1000.0)).unwrap_or_else(Instant::now);
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let at = deadline(timeout);
    let token = || Token::new(slot, true, at.is_some()).0;
    // SAFETY: the array argument keeps the word alive during the call, and
    // the JS layer keeps it alive while the waiter is queued.
    match unsafe { SEMAPHORE.acquire_async(&TABLE, key, since, owner.clone(), token) } {
        Some(ticket) => Ok(queued(&owner, ticket, at)),
        None => Ok(0.0),
    }
}

/// The contended release of `n` permits of the semaphore word `ta[index]`:
/// each goes to the oldest queued acquirer (handed over if it has waited
/// 1 ms, else added to the word for it to compete), the rest to the word. Returns
/// how many did not fit under the maximum count (0 normally).
#[napi(js_name = "semaphoreRelease")]
pub fn semaphore_release(env: Env, ta: Unknown, index: f64, n: u32) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    // SAFETY: the array argument keeps the word alive during the call.
    Ok(unsafe { SEMAPHORE.release(&TABLE, key, n) })
}
