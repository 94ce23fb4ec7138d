//! N-API entry points of the events (`futex_core::event`): each makes its
//! change and its wake-up in one call, so that a thread stopped between two
//! JavaScript steps cannot leave one without the other. Nobody waiting,
//! none of them is called: the JavaScript fast paths are one
//! compare-exchange each. (`compareExchangeNotify` and `countToZero`,
//! which the Barrier and the WaitGroup call, are in `raw.rs`.)

use futex_core::condvar::Waited;
use futex_core::{event, RawAutoEvent};
use napi::{Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;

use crate::cell::Cell;
use crate::resolver::Token;
use crate::{deadline, js_alive, queued, this_resolver, SLICE, TABLE};

/// The protocol of every auto-reset event in the process.
pub(crate) static AUTO_EVENT: RawAutoEvent = RawAutoEvent;

/// Result codes shared with `lib/event.js`.
const SIGNALLED: u32 = 0;
const TIMED_OUT: u32 = 1;

/// The word `ta[index]` of an `Int32Array`: its address.
///
/// # Safety
/// `env` and `ta` are live handles of the current call.
unsafe fn word32(env: &Env, ta: &Unknown, index: f64, what: &str) -> Result<usize> {
    // SAFETY: the caller's duty; the address is only used during the call
    // (or while the JS layer keeps the array of a queued waiter alive).
    match unsafe { Cell::resolve(env.raw(), ta.raw(), index)? } {
        c @ Cell::I32(_) => Ok(c.key()),
        Cell::I64(_) => Err(Error::new(Status::InvalidArg, format!("{what} is an Int32Array element"))),
    }
}

/// `ManualResetEvent.set` for a word whose "a waiter may be asleep" bit
/// was seen: sets the event if it is not set and wakes every waiter of
/// `ta[index]`. Returns whether this call set it.
#[napi(js_name = "manualEventSet")]
pub fn manual_event_set(env: Env, ta: Unknown, index: f64) -> Result<bool> {
    // SAFETY: handles of this call.
    let key = unsafe { word32(&env, &ta, index, "an event word")? };
    // SAFETY: the array argument keeps the word alive during the call.
    Ok(unsafe { event::manual_set(&TABLE, key) })
}

/// `AutoResetEvent.set` for a word with waiters queued: hands the signal
/// to the oldest, or stores it if nobody is queued any more. Returns
/// whether a waiter was released.
#[napi(js_name = "autoEventSet")]
pub fn auto_event_set(env: Env, ta: Unknown, index: f64) -> Result<bool> {
    // SAFETY: handles of this call.
    let key = unsafe { word32(&env, &ta, index, "an event word")? };
    // SAFETY: the array argument keeps the word alive during the call.
    Ok(unsafe { AUTO_EVENT.set(&TABLE, key) })
}

/// Blocks until the caller takes a signal of the auto-reset event
/// `ta[index]`, or `timeout` ms pass. Returns 0 signalled, 1 timed out.
#[napi(js_name = "autoEventWait")]
pub fn auto_event_wait(env: Env, ta: Unknown, index: f64, timeout: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word32(&env, &ta, index, "an event word")? };
    let raw_env = env.raw();
    // SAFETY: the array argument keeps the word alive during this blocking call.
    let r = unsafe { AUTO_EVENT.wait(&TABLE, key, deadline(timeout), SLICE, || !js_alive(raw_env)) };
    // A stopping thread returns to no JavaScript: nobody sees an interruption.
    Ok(if r == Waited::Ok { SIGNALLED } else { TIMED_OUT })
}

/// One step of an async wait on the auto-reset event `ta[index]`: takes the
/// signal now (returns 0), or queues an async waiter in `slot` of this
/// thread's table and returns its sequence number. Its promise then settles
/// with 'handoff' (a set handed it the signal) or 'timed-out'. The JS layer
/// keeps `ta` alive while the waiter is queued.
#[napi(js_name = "autoEventWaitAsync")]
pub fn auto_event_wait_async(env: Env, ta: Unknown, index: f64, timeout: f64, slot: u32) -> Result<f64> {
    let owner = this_resolver(slot)?;
    // SAFETY: handles of this call.
    let key = unsafe { word32(&env, &ta, index, "an event word")? };
    let at = deadline(timeout);
    let token = || Token::new(slot, true, at.is_some()).0;
    // SAFETY: the array argument keeps the word alive during the call, and
    // the JS layer keeps it alive while the waiter is queued.
    match unsafe { AUTO_EVENT.wait_async(&TABLE, key, owner.clone(), token) } {
        Some(ticket) => Ok(queued(&owner, ticket, at)),
        None => Ok(0.0),
    }
}
