//! N-API entry points of the condition variable protocol
//! (`futex_core::condvar`): the sleeping and the waking of
//! `lib/condition.js`. A notify with nobody queued never comes here: its
//! fetch-add in JavaScript sees the waiters bit clear.

use futex_core::condvar::Waited;
use futex_core::lock::Acquired;
use futex_core::RawCondvar;
use napi::{Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;

use crate::cell::Cell;
use crate::lock::LOCK;
use crate::resolver::Token;
use crate::{deadline, js_alive, queued, this_resolver, SLICE, TABLE};

/// The protocol of every condition word in the process.
pub(crate) static CONDVAR: RawCondvar = RawCondvar;

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

/// Relock codes of `conditionWaitRelock`, shared with `lib/condition.js`
/// (times two, plus 1 if the sleep timed out).
const RELOCK_ACQUIRED: u32 = 0;
const RELOCK_OWNER_DIED: u32 = 1;
const RELOCK_INTERRUPTED: u32 = 2;
const RELOCK_DEADLOCK: u32 = 3;

/// `Condition.wait` after the caller released the lock word `lta[lindex]`:
/// blocks while the condition word `ta[index]` holds the sequence `seen`,
/// until notified or `timeout` ms pass, then retakes the lock for thread
/// `me` (an owner id), without deadline, in the same call. Returns
/// `relock · 2 + timed_out`, `relock` being 0 acquired, 1 acquired from a
/// dead owner, 2 interrupted (the thread is stopping: nothing is held, and
/// a wake-up it took went to the next sleeper), 3 the lock is held by `me`
/// already (the wake-up went on too).
///
/// One call, so that a thread stopped anywhere between its wake-up and the
/// end of its relock passes the wake-up on (`RawCondvar::wait_relock`):
/// with the relock as a second call, a stop inside it, or between the two,
/// lost the wake-up.
#[napi(js_name = "conditionWaitRelock")]
#[allow(clippy::too_many_arguments)]
pub fn condition_wait_relock(
    env: Env,
    ta: Unknown,
    index: f64,
    seen: i32,
    timeout: f64,
    lta: Unknown,
    lindex: f64,
    me: u32,
) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    // SAFETY: handles of this call.
    let lock_key = unsafe { crate::lock::word(&env, &lta, lindex)? };
    let raw_env = env.raw();
    // SAFETY: the array arguments keep both words alive during this blocking call.
    let (waited, got) = unsafe {
        CONDVAR
            .wait_relock(&TABLE, key, seen as u32, deadline(timeout), &LOCK, lock_key, me, SLICE, || !js_alive(raw_env))
    };
    let relock = match got {
        Acquired::Acquired => RELOCK_ACQUIRED,
        Acquired::OwnerDied => RELOCK_OWNER_DIED,
        Acquired::Deadlock => RELOCK_DEADLOCK,
        // A stopping thread returns to no JavaScript (a relock without
        // deadline never times out).
        Acquired::Interrupted | Acquired::TimedOut => RELOCK_INTERRUPTED,
    };
    Ok(relock * 2 + u32::from(waited == Waited::TimedOut))
}

/// Queues an async waiter in `slot` of this thread's table if the condition
/// word `ta[index]` still holds the sequence `seen`, and returns its sequence
/// number (0: the sequence moved on, nothing is queued). Its promise then
/// settles with 'ok' (notified) or 'timed-out'. The JS layer keeps `ta`
/// alive while the waiter is queued. A notify's wake-up stays on this
/// thread's record from its delivery until `conditionRelocked`.
#[napi(js_name = "conditionWaitAsync")]
pub fn condition_wait_async(env: Env, ta: Unknown, index: f64, seen: i32, timeout: f64, slot: u32) -> Result<f64> {
    let owner = this_resolver(slot)?;
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let at = deadline(timeout);
    let token = || Token::new(slot, true, at.is_some()).follow_up().0;
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

/// The async sleeper woken on the condition word `ta[index]` of the copy of
/// the JavaScript layer that names its waiters with `slot` (any slot of
/// it) is done with its wake-up: it relocked (`pass_on` false), or it gives
/// the wake-up up (`pass_on` true: aborted, or its relock failed), which
/// then wakes the next sleeper. Takes the wake-up off that copy's record
/// (see `resolver`). Returns whether one was on record.
#[napi(js_name = "conditionRelocked")]
pub fn condition_relocked(env: Env, ta: Unknown, index: f64, slot: u32, pass_on: bool) -> Result<bool> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let recorded = crate::resolver::of_slot(slot).is_some_and(|owner| owner.relocked(key));
    if pass_on {
        CONDVAR.pass_on(&TABLE, key);
    }
    Ok(recorded)
}

/// A whole notify of the condition word `ta[index]`, for a caller that
/// found the waiters bit set: bumps its sequence and wakes up to `count`
/// waiters, in one call (a thread stopped between a bump and its wake-up
/// would strand them). Returns how many woke.
#[napi(js_name = "conditionSignal")]
pub fn condition_signal(env: Env, ta: Unknown, index: f64, count: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let count = if count >= usize::MAX as f64 { usize::MAX } else { count.max(0.0) as usize };
    // SAFETY: the array argument keeps the word alive during the call.
    Ok(unsafe { CONDVAR.signal(&TABLE, key, count) } as u32)
}
