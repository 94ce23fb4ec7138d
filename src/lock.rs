//! N-API entry points of the lock protocol (`futex_core::lock`): the
//! contended paths of `lib/lock.js`. The uncontended lock and unlock never
//! come here: they are one compare-exchange each in JavaScript.
//!
//! Owner ids are `threadId + 1`, as JavaScript writes them into the word.

use std::time::{Duration, Instant};

use futex_core::lock::{Acquired, OwnerState};
use futex_core::RawLock;
use napi::{Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;

use crate::cell::Cell;
use crate::resolver::Token;
use crate::{deadline, is_dead, is_live_here, js_alive, queued, this_resolver, SLICE, TABLE};

/// The protocol of every lock word in the process. A waiter that has waited
/// 1 ms is handed the lock by the next unlock; younger ones compete. Owner
/// death is pushed (`thread_ended` in src/lib.rs); the only waiters that look
/// again on their own are those of a lock held by a thread of another copy of
/// the addon, whose unlock cannot wake them: every 250 ms.
pub(crate) static LOCK: RawLock<fn(u32) -> OwnerState> =
    RawLock { owner: owner_state, fair_after: Duration::from_millis(1), safety_slice: Duration::from_millis(250) };

pub(crate) fn owner_state(owner: u32) -> OwnerState {
    let id = owner - 1;
    if is_dead(id) {
        OwnerState::Dead
    } else if is_live_here(id) {
        OwnerState::Ours
    } else {
        OwnerState::Foreign
    }
}

/// Result codes shared with `lib/lock.js`.
pub(crate) const ACQUIRED: u32 = 0;
pub(crate) const OWNER_DIED: u32 = 1;
pub(crate) const TIMED_OUT: u32 = 2;
pub(crate) const DEADLOCK: u32 = 3;
pub(crate) const HELD: u32 = 2;

pub(crate) fn code(r: Acquired) -> u32 {
    match r {
        Acquired::Acquired => ACQUIRED,
        Acquired::OwnerDied => OWNER_DIED,
        // A stopping thread returns to no JavaScript: nobody sees this one.
        Acquired::TimedOut | Acquired::Interrupted => TIMED_OUT,
        Acquired::Deadlock => DEADLOCK,
    }
}

/// The lock word `ta[index]`: its address. Only an `Int32Array` element is one.
///
/// # Safety
/// `env` and `ta` are live handles of the current call.
pub(crate) unsafe fn word(env: &Env, ta: &Unknown, index: f64) -> Result<usize> {
    // SAFETY: the caller's duty; the address is only used during the call
    // (or while the JS layer keeps the array of a queued waiter alive).
    match unsafe { Cell::resolve(env.raw(), ta.raw(), index)? } {
        c @ Cell::I32(_) => Ok(c.key()),
        Cell::I64(_) => Err(Error::new(Status::InvalidArg, "a lock word is an Int32Array element".to_owned())),
    }
}

/// Blocks until thread `me` (an owner id) holds the lock word `ta[index]`,
/// or `timeout` ms pass. Returns 0 acquired, 1 acquired from a dead owner,
/// 2 timed out, 3 held by `me` already (blocking would never end).
#[napi(js_name = "lockWait")]
pub fn lock_wait(env: Env, ta: Unknown, index: f64, me: u32, timeout: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let raw_env = env.raw();
    // SAFETY: the array argument keeps the word alive during this blocking call.
    let r = unsafe { LOCK.lock(&TABLE, key, me, Instant::now(), deadline(timeout), SLICE, || !js_alive(raw_env)) };
    Ok(code(r))
}

/// The owner's token of an async lock waiter in `slot` whose deadline is
/// `at`. Next to a holder from another copy of the addon (`foreign`), it
/// times out after the safety slice (JS then queues again, its own deadline
/// permitting): `at` is moved up to it, and the token says so.
fn async_token(slot: u32, at: &mut Option<Instant>, foreign: bool) -> u64 {
    let slice = Instant::now() + LOCK.safety_slice;
    let sliced = foreign && at.is_none_or(|d| slice < d);
    if sliced {
        *at = Some(slice);
    }
    let token = Token::new(slot, true, at.is_some());
    if sliced { token.sliced() } else { token }.0
}

/// One step of an async acquisition by thread `me`, whose caller has waited
/// `waited` ms so far: takes the lock word `ta[index]` now (returns 0, or -1
/// if it was taken from a dead owner), or queues an async waiter in `slot`
/// of this thread's table and returns its sequence number. Its promise then
/// settles with 'handoff' (the lock is held), 'owner-died' (held, from a
/// dead owner), 'ok' (released, or the safety slice next to a holder from
/// another copy of the addon ran out: try again) or 'timed-out'. The JS
/// layer keeps `ta` alive while the waiter is queued.
#[napi(js_name = "lockWaitAsync")]
pub fn lock_wait_async(
    env: Env,
    ta: Unknown,
    index: f64,
    me: u32,
    waited: f64,
    timeout: f64,
    slot: u32,
) -> Result<f64> {
    let owner = this_resolver(slot)?;
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let since =
        Instant::now().checked_sub(Duration::from_secs_f64(waited.max(0.0) / 1000.0)).unwrap_or_else(Instant::now);
    let mut at = deadline(timeout);
    let token = |foreign: bool| async_token(slot, &mut at, foreign);
    // SAFETY: the array argument keeps the word alive during the call, and
    // the JS layer keeps it alive while the waiter is queued.
    match unsafe { LOCK.lock_async(&TABLE, key, me, since, owner.clone(), token) } {
        Ok(ticket) => Ok(queued(&owner, ticket, at)),
        Err(Acquired::OwnerDied) => Ok(-1.0),
        Err(_) => Ok(0.0),
    }
}

/// One step of an async wait for the lock word `ta[index]` by thread `me`
/// that is never handed the lock, only woken to compete (a waiter whose
/// thread may block elsewhere meanwhile): takes it now (returns 0, or -1
/// from a dead owner), or queues an async waiter in `slot` and returns its
/// sequence number. Its promise settles with 'ok' (look again) or
/// 'timed-out'.
#[napi(js_name = "lockCompeteAsync")]
pub fn lock_compete_async(env: Env, ta: Unknown, index: f64, me: u32, timeout: f64, slot: u32) -> Result<f64> {
    let owner = this_resolver(slot)?;
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    let mut at = deadline(timeout);
    let token = |foreign: bool| async_token(slot, &mut at, foreign);
    // SAFETY: the array argument keeps the word alive during the call, and
    // the JS layer keeps it alive while the waiter is queued.
    match unsafe { LOCK.lock_async_competing(&TABLE, key, me, owner.clone(), token) } {
        Ok(ticket) => Ok(queued(&owner, ticket, at)),
        Err(Acquired::OwnerDied) => Ok(-1.0),
        Err(_) => Ok(0.0),
    }
}

/// Takes the lock word `ta[index]` for `me` if it is free or its owner's
/// thread ended: 0 acquired, 1 acquired from a dead owner, 2 held by a live thread.
#[napi(js_name = "lockTry")]
pub fn lock_try(env: Env, ta: Unknown, index: f64, me: u32) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    // SAFETY: the array argument keeps the word alive during the call.
    Ok(unsafe { LOCK.try_lock(&TABLE, key, me) }.map_or(HELD, code))
}

/// The contended unlock of the lock word `ta[index]` by `me`: hands the
/// lock to the oldest waiter if it has waited long enough, else releases it
/// and wakes that waiter. False if `me` does not hold it (nothing changed).
#[napi(js_name = "lockRelease")]
pub fn lock_release(env: Env, ta: Unknown, index: f64, me: u32) -> Result<bool> {
    // SAFETY: handles of this call.
    let key = unsafe { word(&env, &ta, index)? };
    // SAFETY: the array argument keeps the word alive during the call.
    Ok(unsafe { LOCK.unlock(&TABLE, key, me) })
}
