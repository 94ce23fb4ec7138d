//! N-API entry points of the condition variable protocol
//! (`futex_core::condvar`): the sleeping and the waking of
//! `lib/condition.js`. A notify with nobody queued never comes here: its
//! fetch-add in JavaScript sees the waiters bit clear.

use futex_core::condvar::Waited;
use futex_core::RawCondvar;
use napi::{Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;

use crate::cell::Cell;
use crate::resolver::Token;
use crate::{deadline, js_alive, queued, this_resolver, SLICE, TABLE};

/// The protocol of every condition word in the process.
pub(crate) static CONDVAR: RawCondvar = RawCondvar;

/// Result codes shared with `lib/condition.js`.
const OK: u32 = 0;
const TIMED_OUT: u32 = 1;

/// The condition word `ta[index]`: its address. Only an `Int32Array` element is one.
///
/// # Safety
/// `env` and `ta` are live handles of the current call.
unsafe fn word(env: &Env, ta: &Unknown, index: f64) -> Result<usize> {
    // SAFETY: the caller's duty; the address is only used during the call
    // (or while the JS layer keeps the array of a queued waiter alive).
    match unsafe { Cell::resolve(env.raw(), ta.raw(), index)? } {
        c @ Cell::I32(_) => Ok(c.key()),
        Cell::I64(_) => Err(Error::new(Status::InvalidArg, "a condition word is an Int32Array element".to_owned())),
    }
}

/// Blocks while the condition word `ta[index]` holds the sequence `seen`
/// (as read, with or without the waiters bit), until notified or `timeout`
/// ms pass. Returns 0 (notified, or the sequence had moved on) or 1 (timed out).
#[napi(js_name = "conditionWait")]
pub fn condition_wait(env: Env, ta: Unknown, index: f64, seen: i32, timeout: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let raw_env = env.raw();
    // SAFETY: the array argument keeps the word alive during this blocking call.
    let r = unsafe { CONDVAR.wait(&TABLE, key, seen as u32, deadline(timeout), SLICE, || !js_alive(raw_env)) };
    // A stopping thread returns to no JavaScript: nobody sees an interruption.
    Ok(if r == Waited::Ok { OK } else { TIMED_OUT })
}

/// Queues an async waiter in `slot` of this thread's table if the condition
/// word `ta[index]` still holds the sequence `seen`, and returns its sequence
/// number (0: the sequence moved on, nothing is queued). Its promise then
/// settles with 'ok' (notified) or 'timed-out'. The JS layer keeps `ta`
/// alive while the waiter is queued.
#[napi(js_name = "conditionWaitAsync")]
pub fn condition_wait_async(env: Env, ta: Unknown, index: f64, seen: i32, timeout: f64, slot: u32) -> Result<f64> {
    let owner = this_resolver(slot)?;
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let at = deadline(timeout);
    let token = || Token::new(slot, true, at.is_some()).0;
    // SAFETY: the array argument keeps the word alive during the call, and
    // the JS layer keeps it alive while the waiter is queued.
    match unsafe { CONDVAR.wait_async(&TABLE, key, seen as u32, owner.clone(), token) } {
        Some(ticket) => Ok(queued(&owner, ticket, at)),
        None => Ok(0.0),
    }
}

/// Wakes up to `count` waiters of the condition word `ta[index]` (whose
/// sequence the caller bumped, seeing the waiters bit). Returns how many woke.
#[napi(js_name = "conditionNotify")]
pub fn condition_notify(env: Env, ta: Unknown, index: f64, count: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let count = if count >= usize::MAX as f64 { usize::MAX } else { count.max(0.0) as usize };
    // SAFETY: the array argument keeps the word alive during the call.
    Ok(unsafe { CONDVAR.notify(&TABLE, key, count) } as u32)
}
