//! N-API layer of shared-futex: typed array → key, and the calls the JS layer
//! (`lib/futex.js`) makes. Argument conversion with the ECMAScript rules and
//! the errors users see live in JS; this layer re-checks what memory safety
//! depends on and talks to the process-wide wait table.

use std::collections::HashSet;
use std::ffi::c_void;
use std::ptr;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use futex_core::{Ticket, Timer, WaitResult, WaitTable};
use napi::{sys, Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;
use parking_lot::Mutex;

mod cell;
mod promises;
mod resolver;

use cell::Cell;

/// Every waiter of the process, sync and async, from every thread.
pub(crate) static TABLE: LazyLock<WaitTable> = LazyLock::new(WaitTable::default);

/// Deadlines of async waiters with a finite timeout.
static TIMER: LazyLock<Timer<Ticket>> = LazyLock::new(|| {
    Timer::new(|ticket| {
        TABLE.timeout(ticket);
    })
});

/// A blocked `wait` checks this often whether its thread is being stopped.
const SLICE: Duration = Duration::from_millis(50);

/// Result codes shared with `lib/futex.js`.
const OK: u32 = 0;
const NOT_EQUAL: u32 = 1;
const TIMED_OUT: u32 = 2;

/// `now + ms`, or `None` for "forever" (infinite, NaN, or past `Instant`'s range).
fn deadline(ms: f64) -> Option<Instant> {
    if !ms.is_finite() {
        return None;
    }
    let ms = ms.max(0.0);
    Duration::try_from_secs_f64(ms / 1000.0).ok().and_then(|d| Instant::now().checked_add(d))
}

/// Whether this thread may still run JavaScript. Once `worker.terminate()` or
/// `process.exit()` has started, property access on the global fails.
fn js_alive(env: sys::napi_env) -> bool {
    // SAFETY: `env` is the live env of the N-API call this runs inside; the
    // property name is a NUL-terminated literal; out-pointers are locals.
    unsafe {
        let mut global = ptr::null_mut();
        let mut value = ptr::null_mut();
        sys::napi_get_global(env, &mut global) == sys::Status::napi_ok
            && sys::napi_get_named_property(env, global, c"Atomics".as_ptr(), &mut value) == sys::Status::napi_ok
    }
}

/// Blocking wait on `ta[index]`. Returns 0 'ok', 1 'not-equal', 2 'timed-out'.
#[napi(js_name = "wait")]
pub fn wait(env: Env, ta: Unknown, index: f64, value: Unknown, timeout: f64) -> Result<u32> {
    let raw_env = env.raw();
    // SAFETY: handles of this call; the array argument keeps its buffer alive
    // for the whole (blocking) call, which is as long as `cell` is used.
    let (cell, expected) = unsafe {
        let cell = Cell::resolve(raw_env, ta.raw(), index)?;
        (cell, cell.expected(raw_env, value.raw())?)
    };
    // SAFETY: as above, the buffer is alive during the call.
    let validate = || unsafe { cell.holds(expected) };
    let result = TABLE.wait(cell.key(), validate, deadline(timeout), SLICE, || !js_alive(raw_env));
    Ok(match result {
        WaitResult::Ok => OK,
        WaitResult::NotEqual => NOT_EQUAL,
        // The thread is stopping: nobody will see this result.
        WaitResult::TimedOut | WaitResult::Interrupted => TIMED_OUT,
    })
}

/// Wakes up to `count` waiters of `ta[index]` (`Infinity`: all); returns how many woke.
#[napi(js_name = "notify")]
pub fn notify(env: Env, ta: Unknown, index: f64, count: f64) -> Result<u32> {
    // SAFETY: handles of this call; only the address is used afterwards.
    let cell = unsafe { Cell::resolve(env.raw(), ta.raw(), index)? };
    let count = if count >= u32::MAX as f64 { usize::MAX } else { count.max(0.0) as usize };
    Ok(TABLE.notify(cell.key(), count) as u32)
}

thread_local! {
    /// This thread's most recent queued async waiter: its place in the queue
    /// and its slot in the thread's table of promises (see `lastWaiter`).
    static LAST_WAITER: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Queues an async waiter on `ta[index]` for this thread. Returns `null` if
/// the value differs ('not-equal'), otherwise the waiter's promise of 'ok' or
/// 'timed-out'. With `keepAlive`, the thread's event loop stays alive until
/// the promise settles. The caller (JS) keeps `ta` alive until this thread
/// has no pending waiter left (the `idle` callback given to `initAsync`).
#[napi(js_name = "waitAsync", ts_return_type = "Promise<'ok' | 'timed-out'> | null")]
pub fn wait_async<'env>(
    env: &'env Env,
    ta: Unknown,
    index: f64,
    value: Unknown,
    timeout: f64,
    keep_alive: bool,
) -> Result<Unknown<'env>> {
    let raw_env = env.raw();
    let owner = resolver::current()
        .ok_or_else(|| Error::new(Status::GenericFailure, "initAsync was not called on this thread".to_owned()))?;
    // SAFETY: handles of this call; memory is only read during this call.
    let (cell, expected) = unsafe {
        let cell = Cell::resolve(raw_env, ta.raw(), index)?;
        (cell, cell.expected(raw_env, value.raw())?)
    };
    // SAFETY: the array argument keeps the buffer alive during the call.
    let validate = || unsafe { cell.holds(expected) };
    let token = promises::reserve();
    let Some(ticket) = TABLE.wait_async(cell.key(), validate, owner.clone(), token) else {
        promises::release(token);
        let mut null = ptr::null_mut();
        // SAFETY: live env of this call.
        unsafe { sys::napi_get_null(raw_env, &mut null) };
        // SAFETY: `null` is a value of this env.
        return Ok(unsafe { Unknown::from_raw_unchecked(raw_env, null) });
    };
    // The waiter may already be decided by another thread, but its outcome
    // can only be delivered on this thread, after this call: recording the
    // promise now is in time.
    // SAFETY: live env of this call, on the resolver's thread.
    let promise = unsafe { promises::create(raw_env, token, keep_alive, &owner) };
    let promise = match promise {
        Ok(p) => p,
        Err(e) => {
            // Creating a promise only fails when the env is going away. If a
            // notifier took the waiter first, its delivery finds no promise
            // in the slot and is dropped; that one slot is not reused.
            if TABLE.cancel(ticket) {
                promises::release(token);
            }
            return Err(e);
        }
    };
    if let Some(at) = deadline(timeout) {
        TIMER.schedule(at, ticket);
    }
    LAST_WAITER.set((ticket.seq, token));
    // SAFETY: `promise` is a value of this env.
    Ok(unsafe { Unknown::from_raw_unchecked(raw_env, promise) })
}

/// This thread's most recent queued async waiter, as `[seq, slot]`, for
/// `cancelAsync` (read right after `waitAsync` returned a promise).
#[napi(js_name = "lastWaiter")]
pub fn last_waiter() -> Vec<f64> {
    let (seq, slot) = LAST_WAITER.get();
    vec![seq as f64, slot as f64]
}

/// Takes a queued async waiter of this thread back out (abort): the one
/// `lastWaiter` described as `[seq, slot]`. True if it was still queued; its
/// promise then settles with 'cancelled' and it consumed no wake-up. False if
/// its outcome was already decided.
#[napi(js_name = "cancelAsync")]
pub fn cancel_async(env: Env, ta: Unknown, index: f64, seq: f64, slot: f64) -> Result<bool> {
    let raw_env = env.raw();
    let Some(owner) = resolver::current() else { return Ok(false) };
    // SAFETY: handles of this call; only the address is used afterwards.
    let cell = unsafe { Cell::resolve(raw_env, ta.raw(), index)? };
    // (key, seq) names exactly one waiter, whichever slot it was given.
    if !TABLE.cancel(Ticket { key: cell.key(), seq: seq as u64, token: slot as u64 }) {
        return Ok(false);
    }
    // SAFETY: live env of this call, on the resolver's thread.
    unsafe {
        let cancelled = resolver::outcome_string(raw_env, "cancelled");
        promises::settle(raw_env, slot as u64, cancelled, &owner);
    }
    Ok(true)
}

/// Creates this thread's resolver (its one threadsafe function) around
/// `idle()`, called whenever the thread's last pending waiter has settled.
/// Idempotent.
#[napi(js_name = "initAsync")]
pub fn init_async(env: Env, idle: Unknown) -> Result<()> {
    // SAFETY: handles of this call on this thread.
    unsafe { resolver::init(env.raw(), idle.raw()) }
}

/// Thread ids (`worker_threads.threadId`) of the threads that loaded this
/// module and have not been torn down.
static THREADS: LazyLock<Mutex<HashSet<u32>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

unsafe extern "C" fn unregister_thread(arg: *mut c_void) {
    THREADS.lock().remove(&(arg as usize as u32));
}

/// Records that thread `thread_id` is alive until its env is torn down.
#[napi(js_name = "registerThread")]
pub fn register_thread(env: Env, thread_id: u32) -> Result<()> {
    if THREADS.lock().insert(thread_id) {
        // SAFETY: the hook only reads its argument as an integer.
        let status = unsafe {
            sys::napi_add_env_cleanup_hook(env.raw(), Some(unregister_thread), thread_id as usize as *mut c_void)
        };
        if status != sys::Status::napi_ok {
            return Err(Error::new(Status::GenericFailure, "napi_add_env_cleanup_hook failed".to_owned()));
        }
    }
    Ok(())
}

/// Whether the thread `thread_id` registered and has not been torn down.
#[napi(js_name = "isThreadAlive")]
pub fn is_thread_alive(thread_id: u32) -> bool {
    THREADS.lock().contains(&thread_id)
}

/// Waiters currently queued on `ta[index]` (diagnostics and tests).
#[napi(js_name = "queueLength")]
pub fn queue_length(env: Env, ta: Unknown, index: f64) -> Result<u32> {
    // SAFETY: handles of this call; only the address is used afterwards.
    let cell = unsafe { Cell::resolve(env.raw(), ta.raw(), index)? };
    Ok(TABLE.len(cell.key()) as u32)
}
