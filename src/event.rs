//! N-API entry points of the events (`futex_core::event`) and of the state
//! changes that owe a wake-up (`futex_core::wake`): each makes its change
//! and its wake-up in one call, so that a thread stopped between two
//! JavaScript steps cannot leave one without the other. Nobody waiting,
//! none of them is called: the JavaScript fast paths are one
//! compare-exchange each.

use futex_core::condvar::Waited;
use futex_core::{event, wake, RawAutoEvent};
use napi::{sys, Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;

use crate::cell::{Cell, Expected};
use crate::resolver::Token;
use crate::{check, deadline, js_alive, queued, this_resolver, SLICE, TABLE};

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

fn count_of(count: f64) -> usize {
    if count >= usize::MAX as f64 {
        usize::MAX
    } else {
        count.max(0.0) as usize
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

/// `Atomics.compareExchange(ta, index, expected, replacement)` and, if it
/// took, a wake-up of up to `count` waiters of `ta[index]`, in one call;
/// `ta` an `Int32Array` or `BigInt64Array`, `expected` and `replacement`
/// numbers (ToInt32'd) or BigInts as its elements. Returns the value found.
#[napi(js_name = "compareExchangeNotify")]
pub fn compare_exchange_notify<'env>(
    env: &'env Env,
    ta: Unknown,
    index: f64,
    expected: Unknown,
    replacement: Unknown,
    count: f64,
) -> Result<Unknown<'env>> {
    let raw_env = env.raw();
    // SAFETY: handles of this call; the array argument keeps the word alive
    // during the call, which is as long as the cell is used.
    unsafe {
        let cell = Cell::resolve(raw_env, ta.raw(), index)?;
        let mut value = std::ptr::null_mut();
        match (cell.expected(raw_env, expected.raw())?, cell.expected(raw_env, replacement.raw())?) {
            (Expected::I32(e), Expected::I32(n)) => {
                let old = wake::compare_exchange_notify_u32(&TABLE, cell.key(), e as u32, n as u32, count_of(count));
                check(sys::napi_create_int32(raw_env, old as i32, &mut value), "napi_create_int32")?;
            }
            (Expected::I64(e), Expected::I64(n)) => {
                let old = wake::compare_exchange_notify_u64(&TABLE, cell.key(), e as u64, n as u64, count_of(count));
                check(sys::napi_create_bigint_int64(raw_env, old as i64, &mut value), "napi_create_bigint_int64")?;
            }
            _ => unreachable!("both are read as the cell's element type"),
        }
        Ok(Unknown::from_raw_unchecked(raw_env, value))
    }
}

/// A WaitGroup's counter `ta[countIndex]` reaching zero: compare-exchange
/// `expected → 0` and, if it took, one more on the epoch `ta[epochIndex]`
/// and a wake-up of every waiter of the epoch, in one call. Returns the
/// counter found.
#[napi(js_name = "countToZero")]
pub fn count_to_zero(env: Env, ta: Unknown, count_index: f64, epoch_index: f64, expected: i32) -> Result<i32> {
    // SAFETY: handles of this call.
    let count = unsafe { word32(&env, &ta, count_index, "a counter")? };
    // SAFETY: as above.
    let epoch = unsafe { word32(&env, &ta, epoch_index, "an epoch")? };
    // SAFETY: the array argument keeps both words alive during the call.
    Ok(unsafe { wake::count_to_zero(&TABLE, count, epoch, expected as u32) } as i32)
}
