//! N-API entry points of the reader-writer lock protocol
//! (`futex_core::rwlock`): the contended paths of `lib/rwlock.js`. The
//! uncontended read lock / unlock and write lock / unlock never come here.
//!
//! The lock is the four words `ta[index]` … `ta[index + 3]` of an
//! `Int32Array`. Owner ids are `threadId + 1`, as JavaScript writes them.
//! Result codes are those of src/lock.rs.

use std::time::{Duration, Instant};

use futex_core::lock::{Acquired, OwnerState};
use futex_core::RawRwLock;
use napi::{Env, Error, Result, Status, Unknown};
use napi_derive::napi;

use crate::lock::{code, owner_state, word, HELD};
use crate::resolver::Token;
use crate::{deadline, js_alive, queued, this_resolver, SLICE, TABLE};

/// The protocol of every reader-writer lock in the process. An unlock hands
/// the lock over (phase-fair) once a waiter has waited 1 ms, as AsyncLock's
/// does; younger waiters are woken to compete. Owner death is pushed
/// (`thread_ended` in src/lib.rs).
static RWLOCK: RawRwLock<fn(u32) -> OwnerState> = RawRwLock::new(owner_state, Duration::from_millis(1));

/// The protocol, with its work at threads' ends registered (on first use):
/// a thread's registered readers are forgotten before the wait table acts
/// on its end, and every lock it held with waiters is released after.
fn rw() -> &'static RawRwLock<fn(u32) -> OwnerState> {
    static HOOKED: std::sync::Once = std::sync::Once::new();
    HOOKED.call_once(|| {
        crate::on_thread_end(crate::ThreadEnd::Before, |id| RWLOCK.forget_readers(id + 1));
        crate::on_thread_end(crate::ThreadEnd::After, |id| RWLOCK.recover(&crate::TABLE, id + 1));
    });
    &RWLOCK
}

/// The address of the lock at `ta[index]`, checking that its four words are
/// in the array.
///
/// # Safety
/// `env` and `ta` are live handles of the current call.
unsafe fn lock_at(env: &Env, ta: &Unknown, index: f64) -> Result<usize> {
    // SAFETY: the caller's duty; both lookups check the index against the array.
    unsafe {
        word(env, ta, index + 3.0).map_err(|_| {
            Error::new(Status::InvalidArg, "a reader-writer lock is four Int32Array elements".to_owned())
        })?;
        word(env, ta, index)
    }
}

/// Codes of an async step: 0 acquired now, -1 acquired from a dead writer,
/// else `seq · 2 + 1` for a waiter queued on `ta[index + 1]` (a writer that
/// waits for the readers) and `seq · 2` for one queued on `ta[index]`.
fn step(
    key: usize,
    owner: &crate::resolver::Resolver,
    r: std::result::Result<futex_core::Ticket, Acquired>,
    at: Option<Instant>,
) -> Result<f64> {
    match r {
        Ok(ticket) => {
            let seq = queued(owner, ticket, at);
            Ok(seq * 2.0 + if ticket.key == key { 0.0 } else { 1.0 })
        }
        Err(Acquired::OwnerDied) => Ok(-1.0),
        Err(_) => Ok(0.0),
    }
}

/// Blocks until thread `me` holds a read lock of the lock at `ta[index]`,
/// or `timeout` ms pass: 0 acquired, 1 acquired after a writer died, 2
/// timed out, 3 `me` holds the write lock (blocking would never end).
#[napi(js_name = "rwReadWait")]
pub fn rw_read_wait(env: Env, ta: Unknown, index: f64, me: u32, timeout: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    let raw_env = env.raw();
    // SAFETY: the array argument keeps the words alive during this blocking call.
    let r = unsafe { rw().read(&TABLE, key, me, deadline(timeout), SLICE, || !js_alive(raw_env)) };
    Ok(code(r))
}

/// One step of an async read acquisition: 0 / -1 (held now), or (see
/// `step`) the sequence number of a waiter queued in `slot`, whose promise settles
/// 'handoff' / 'owner-died' (held) or 'timed-out'. The JS layer keeps `ta`
/// alive while it is queued.
#[napi(js_name = "rwReadWaitAsync")]
pub fn rw_read_wait_async(env: Env, ta: Unknown, index: f64, me: u32, timeout: f64, slot: u32) -> Result<f64> {
    let owner = this_resolver(slot)?;
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    let at = deadline(timeout);
    let token = || Token::new(slot, true, at.is_some()).0;
    // SAFETY: as above, and the JS layer keeps the words alive while queued.
    let r = unsafe { rw().read_async(&TABLE, key, me, owner.clone(), token) };
    step(key, &owner, r, at)
}

/// A read lock now: 0, 1 (after a writer died), or 2 (a live writer holds or waits).
#[napi(js_name = "rwReadTry")]
pub fn rw_read_try(env: Env, ta: Unknown, index: f64, me: u32) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    // SAFETY: the array argument keeps the words alive during the call.
    Ok(unsafe { rw().try_read(&TABLE, key, me) }.map_or(HELD, code))
}

/// The contended read unlock by `me`: `released` if JS emptied its slot,
/// else a registered read lock is taken back; wakes a writer that waits for
/// the readers. False if `me` held no read lock.
#[napi(js_name = "rwReadRelease")]
pub fn rw_read_release(env: Env, ta: Unknown, index: f64, me: u32, released: bool) -> Result<bool> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    // SAFETY: as above.
    Ok(unsafe { rw().read_unlock(&TABLE, key, me, released) })
}

/// Blocks until `me` holds the write lock (`pending`: its fast path took
/// the writer's place and only the readers are in the way). Codes as
/// `rwReadWait`, 3: `me` holds the writer's place already.
#[napi(js_name = "rwWriteWait")]
pub fn rw_write_wait(env: Env, ta: Unknown, index: f64, me: u32, pending: bool, timeout: f64) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    let raw_env = env.raw();
    // SAFETY: as in rwReadWait.
    let r = unsafe { rw().write(&TABLE, key, me, pending, deadline(timeout), SLICE, || !js_alive(raw_env)) };
    Ok(code(r))
}

/// One step of an async write acquisition: 0 / -1 (held now), or (see
/// `step`) the sequence number of a waiter queued in `slot` (on
/// `ta[index]`, or on `ta[index + 1]` while it waits for the readers), whose promise settles
/// 'handoff' / 'owner-died' (held), 'ok' (the writer's place is ours: step
/// again with `pending`) or 'timed-out'.
#[napi(js_name = "rwWriteWaitAsync")]
pub fn rw_write_wait_async(
    env: Env,
    ta: Unknown,
    index: f64,
    me: u32,
    pending: bool,
    timeout: f64,
    slot: u32,
) -> Result<f64> {
    let owner = this_resolver(slot)?;
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    let at = deadline(timeout);
    let token = || Token::new(slot, true, at.is_some()).0;
    // SAFETY: as in rwReadWaitAsync.
    let r = unsafe { rw().write_async(&TABLE, key, me, pending, owner.clone(), token) };
    step(key, &owner, r, at)
}

/// The write lock now: 0, 1 (from a dead writer), or 2.
#[napi(js_name = "rwWriteTry")]
pub fn rw_write_try(env: Env, ta: Unknown, index: f64, me: u32) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    // SAFETY: as above.
    Ok(unsafe { rw().try_write(&TABLE, key, me) }.map_or(HELD, code))
}

/// The contended write unlock by `me` (also: giving the writer's place up):
/// hands the read lock to every queued reader and the writer's place to the
/// oldest queued writer. False if `me` does not have the writer's place.
#[napi(js_name = "rwWriteRelease")]
pub fn rw_write_release(env: Env, ta: Unknown, index: f64, me: u32) -> Result<bool> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    // SAFETY: as above.
    Ok(unsafe { rw().write_unlock(&TABLE, key, me) })
}

/// Write lock → read lock for `me`, atomically. False if `me` does not hold
/// the write lock.
#[napi(js_name = "rwDowngrade")]
pub fn rw_downgrade(env: Env, ta: Unknown, index: f64, me: u32) -> Result<bool> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    // SAFETY: as above.
    Ok(unsafe { rw().downgrade(&TABLE, key, me) })
}

/// Readers registered past the slots of the lock at `ta[index]`; with `me`,
/// only the read locks that `me` holds there (deadlock checks, diagnostics).
#[napi(js_name = "rwOverflowReaders")]
pub fn rw_overflow_readers(env: Env, ta: Unknown, index: f64, me: Option<u32>) -> Result<u32> {
    // SAFETY: handles of this call.
    let key = unsafe { lock_at(&env, &ta, index)? };
    Ok(match me {
        Some(me) => rw().overflow_reads_of(key, me),
        None => rw().overflow_readers(key),
    } as u32)
}
