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

/// Queues an async waiter on `ta[index]` for this thread. Returns 0 if the
/// value differs ('not-equal'), otherwise the waiter's token, later passed to
/// the `settle` callback given to `initAsync`. The caller (JS) keeps `ta`
/// alive until the token is settled or cancelled.
#[napi(js_name = "waitAsync")]
pub fn wait_async(env: Env, ta: Unknown, index: f64, value: Unknown, timeout: f64) -> Result<f64> {
    let raw_env = env.raw();
    let owner = resolver::current()
        .ok_or_else(|| Error::new(Status::GenericFailure, "initAsync was not called on this thread".to_owned()))?;
    // SAFETY: handles of this call; the JS layer keeps the array (and so its
    // buffer) alive until this waiter is settled, cancelled, or removed with
    // its thread.
    let (cell, expected) = unsafe {
        let cell = Cell::resolve(raw_env, ta.raw(), index)?;
        (cell, cell.expected(raw_env, value.raw())?)
    };
    // SAFETY: the buffer is alive during the call.
    let validate = || unsafe { cell.holds(expected) };
    let Some(ticket) = TABLE.wait_async(cell.key(), validate, owner) else {
        return Ok(0.0);
    };
    if let Some(at) = deadline(timeout) {
        TIMER.schedule(at, ticket);
    }
    Ok(ticket.seq as f64)
}

/// Takes a queued async waiter back out (abort). True if it was still queued;
/// then no outcome will ever be delivered for it.
#[napi(js_name = "cancelAsync")]
pub fn cancel_async(env: Env, ta: Unknown, index: f64, token: f64) -> Result<bool> {
    // SAFETY: handles of this call; only the address is used afterwards.
    let cell = unsafe { Cell::resolve(env.raw(), ta.raw(), index)? };
    Ok(TABLE.cancel(Ticket { key: cell.key(), seq: token as u64 }))
}

/// Creates this thread's resolver (its one threadsafe function) around
/// `settle(tokens: Float64Array)`. Idempotent.
#[napi(js_name = "initAsync")]
pub fn init_async(env: Env, settle: Unknown) -> Result<()> {
    // SAFETY: handles of this call on this thread.
    unsafe { resolver::init(env.raw(), settle.raw()) }
}

/// Whether this thread's pending async waiters keep the event loop alive.
#[napi(js_name = "setRef")]
pub fn set_ref(env: Env, keep_alive: bool) -> Result<()> {
    // SAFETY: the env of this call, on this thread.
    unsafe { resolver::set_ref(env.raw(), keep_alive) }
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
