//! Delivering async outcomes to the JavaScript thread that owns the waiter.
//!
//! # Implementation details
//!
//! Each thread (N-API env) that uses `waitAsync` gets exactly one
//! [`Resolver`]: one threadsafe function plus a batch of finished tokens.
//! [`Owner::complete`] (called by a notifier or the timer thread) appends the
//! token to the batch and, only if the batch was empty, calls the threadsafe
//! function. When the JS thread runs the call, it takes the whole batch and
//! settles each waiter's promise (see `promises.rs`). A notify-all of 100k
//! waiters thus costs one wake-up of the owning thread, not 100k. When the
//! thread has no pending waiter left, the JS `idle` callback is called, so
//! that JS can let go of the typed arrays it kept alive for them.
//!
//! Lifetime: the threadsafe function is released by the env cleanup hook (or
//! finalized by Node), and every call to it happens under `inner`'s lock after
//! checking it is still there, so a notify racing with a worker's exit never
//! touches a freed threadsafe function. The cleanup hook also marks the
//! resolver dead and removes its waiters from the table: a dead thread's
//! waiters are neither woken nor counted.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

use futex_core::{AsyncOutcome, Owner};
use napi::{sys, Error, Result, Status};
use parking_lot::{Mutex, RwLock};

use crate::{promises, TABLE};

pub struct Resolver {
    /// Cleared by the env cleanup hook, before the thread's waiters are removed.
    alive: AtomicBool,
    /// The JS thread this resolver delivers to.
    js_thread: ThreadId,
    /// The threadsafe function; null once released or finalized. Calls hold
    /// the read lock, and it is nulled under the write lock before Node frees
    /// it. A lock of its own, so that the woken JS thread (which takes
    /// `inner`) never waits for a notifier's `uv_async_send`.
    tsfn: RwLock<Tsfn>,
    inner: Mutex<Inner>,
}

#[derive(Clone, Copy)]
struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: N-API allows calling a threadsafe function from any thread; the
// handle's lifetime is guarded by the `RwLock` around it.
unsafe impl Send for Tsfn {}
unsafe impl Sync for Tsfn {}

struct Inner {
    /// Finished waiters not yet delivered.
    batch: Vec<(u64, AsyncOutcome)>,
    /// A call of the threadsafe function is queued and has not run yet.
    scheduled: bool,
    /// The env the function was created on; only used on `js_thread`.
    env: sys::napi_env,
    /// The user asked pending waiters to keep the event loop alive.
    keep_alive: bool,
    /// A batch decided on the JS thread itself (a same-thread notify) is
    /// waiting for delivery: like a task posted by V8, it must run even if
    /// nothing else keeps the loop alive.
    delivering: bool,
    /// Whether the function is currently ref'd (uv handles are ref'd or not,
    /// not counted), i.e. `keep_alive || delivering` as last applied.
    refed: bool,
}

impl Inner {
    /// Refs or unrefs the function to match `keep_alive || delivering`.
    /// Must run on the JS thread (libuv handles are not thread-safe).
    fn apply_ref(&mut self, tsfn: &RwLock<Tsfn>) {
        let want = self.keep_alive || self.delivering;
        let tsfn = tsfn.read();
        if want == self.refed || tsfn.0.is_null() {
            return;
        }
        // SAFETY: on the JS thread that created the open function, with its env.
        let status = unsafe {
            if want {
                sys::napi_ref_threadsafe_function(self.env, tsfn.0)
            } else {
                sys::napi_unref_threadsafe_function(self.env, tsfn.0)
            }
        };
        if status == sys::Status::napi_ok {
            self.refed = want;
        }
    }
}

// SAFETY: `env` is only used on the JS thread (`apply_ref`).
unsafe impl Send for Inner {}

impl Owner for Resolver {
    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn complete(&self, token: u64, outcome: AsyncOutcome) {
        let first = {
            let mut inner = self.inner.lock();
            inner.batch.push((token, outcome));
            !std::mem::replace(&mut inner.scheduled, true)
        };
        if !first {
            return; // the call that will deliver the batch is already queued
        }
        let called = {
            let tsfn = self.tsfn.read();
            // SAFETY: non-null under the read lock, so neither released nor
            // finalized (both null it under the write lock before it is freed).
            !tsfn.0.is_null()
                && unsafe {
                    sys::napi_call_threadsafe_function(
                        tsfn.0,
                        ptr::null_mut(),
                        sys::ThreadsafeFunctionCallMode::nonblocking,
                    )
                } == sys::Status::napi_ok
        };
        // A failed call means the function is closing with its thread: the
        // batch is never delivered, and nobody is left to deliver it to.
        if called && std::thread::current().id() == self.js_thread {
            let mut inner = self.inner.lock();
            inner.delivering = true;
            inner.apply_ref(&self.tsfn);
        }
    }
}

impl Resolver {
    /// Sets whether the thread's event loop is kept alive on behalf of pending
    /// waiters. Must be called on the JS thread, inside an N-API call.
    pub fn set_keep_alive(&self, on: bool) {
        let mut inner = self.inner.lock();
        inner.keep_alive = on;
        inner.apply_ref(&self.tsfn);
    }
}

thread_local! {
    /// This thread's resolver, created by the first `waitAsync`.
    static CURRENT: std::cell::RefCell<Option<Arc<Resolver>>> = const { std::cell::RefCell::new(None) };
}

/// This thread's resolver, if `init` ran on it.
pub fn current() -> Option<Arc<Resolver>> {
    CURRENT.with(|c| c.borrow().clone())
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::GenericFailure, format!("{what} failed ({status})")))
    }
}

/// Creates this thread's resolver; `idle` is called when the thread's last
/// pending waiter settles.
///
/// # Safety
/// `env` and `idle` must be live handles of the current N-API call on this thread.
pub unsafe fn init(env: sys::napi_env, idle: sys::napi_value) -> Result<()> {
    if current().is_some() {
        return Ok(());
    }
    let resolver = Arc::new(Resolver {
        alive: AtomicBool::new(true),
        js_thread: std::thread::current().id(),
        tsfn: RwLock::new(Tsfn(ptr::null_mut())),
        inner: Mutex::new(Inner {
            batch: Vec::new(),
            scheduled: false,
            env,
            keep_alive: false,
            delivering: false,
            refed: true,
        }),
    });
    let mut name = ptr::null_mut();
    let label = "shared-futex";
    // SAFETY: live env; `label` is valid UTF-8 of the given length.
    check(
        unsafe { sys::napi_create_string_utf8(env, label.as_ptr().cast(), label.len() as isize, &mut name) },
        "napi_create_string_utf8",
    )?;
    // The threadsafe function holds one strong count, returned in `finalize`.
    let held = Arc::into_raw(resolver.clone()) as *mut c_void;
    let mut tsfn = ptr::null_mut();
    // SAFETY: live env and function handle; `held` stays valid until
    // `finalize` takes it back; `call_js` and `finalize` match N-API's types.
    let status = unsafe {
        sys::napi_create_threadsafe_function(
            env,
            idle,
            ptr::null_mut(),
            name,
            0,
            1,
            held,
            Some(finalize),
            held,
            Some(call_js),
            &mut tsfn,
        )
    };
    if status != sys::Status::napi_ok {
        // SAFETY: creation failed, so N-API will never call `finalize` with it.
        drop(unsafe { Arc::from_raw(held as *const Resolver) });
        return check(status, "napi_create_threadsafe_function");
    }
    // Pending waiters do not keep the event loop alive unless asked (`promises::create`).
    *resolver.tsfn.write() = Tsfn(tsfn);
    resolver.inner.lock().apply_ref(&resolver.tsfn);
    let hook_arg = Arc::into_raw(resolver.clone()) as *mut c_void;
    // SAFETY: `cleanup` takes back `hook_arg`'s strong count exactly once.
    check(unsafe { sys::napi_add_env_cleanup_hook(env, Some(cleanup), hook_arg) }, "napi_add_env_cleanup_hook")?;
    CURRENT.with(|c| *c.borrow_mut() = Some(resolver));
    Ok(())
}

/// Runs on the owning JS thread: settles the whole batch.
unsafe extern "C" fn call_js(env: sys::napi_env, idle: sys::napi_value, context: *mut c_void, _data: *mut c_void) {
    // A null env means Node is draining the queue of a closing function. It
    // does so *after* `finalize` released `context`: touch nothing.
    if env.is_null() || idle.is_null() {
        return;
    }
    // SAFETY: with a live env the function is open, so `finalize` has not
    // run and `context` (its strong count of the resolver) is valid.
    let resolver = unsafe { &*(context as *const Resolver) };
    let batch = {
        let mut inner = resolver.inner.lock();
        inner.scheduled = false;
        inner.delivering = false;
        inner.apply_ref(&resolver.tsfn);
        std::mem::take(&mut inner.batch)
    };
    if batch.is_empty() {
        return;
    }
    // SAFETY: env is this thread's live env during the callback. Handle
    // scopes are opened and closed in pairs around each chunk, so a batch of
    // 100k waiters does not pile up 100k handles.
    unsafe {
        for chunk in batch.chunks(256) {
            let mut scope = ptr::null_mut();
            if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
                return;
            }
            let ok = outcome_string(env, "ok");
            let timed_out = outcome_string(env, "timed-out");
            for &(token, outcome) in chunk {
                let value = match outcome {
                    AsyncOutcome::Ok => ok,
                    AsyncOutcome::TimedOut => timed_out,
                };
                promises::settle(env, token, value, resolver);
            }
            sys::napi_close_handle_scope(env, scope);
        }
        if promises::is_empty() {
            let mut undefined = ptr::null_mut();
            sys::napi_get_undefined(env, &mut undefined);
            // An exception thrown by `idle` is reported by Node as uncaught.
            sys::napi_call_function(env, undefined, idle, 0, ptr::null(), ptr::null_mut());
        }
    }
}

/// A JS string for an outcome ('ok', 'timed-out', 'cancelled').
///
/// # Safety
/// `env` must be a live env inside an N-API call or callback.
pub unsafe fn outcome_string(env: sys::napi_env, text: &str) -> sys::napi_value {
    let mut value = ptr::null_mut();
    // SAFETY: live env (function contract); `text` is ASCII of the given length.
    unsafe { sys::napi_create_string_latin1(env, text.as_ptr().cast(), text.len() as isize, &mut value) };
    value
}

/// Node is done with the threadsafe function: never call it again.
unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the strong count handed to the function at creation;
    // N-API calls finalize exactly once.
    let resolver = unsafe { Arc::from_raw(data as *const Resolver) };
    *resolver.tsfn.write() = Tsfn(ptr::null_mut());
}

/// The thread's env is going away (worker exit, termination, process exit).
unsafe extern "C" fn cleanup(arg: *mut c_void) {
    // SAFETY: `arg` is the strong count registered with the hook, taken back once here.
    let resolver = unsafe { Arc::from_raw(arg as *const Resolver) };
    // First: notifiers stop counting this thread's waiters...
    resolver.alive.store(false, Ordering::Release);
    // ...then they leave the queues...
    let owner: Arc<dyn Owner> = resolver.clone();
    TABLE.remove_owner(&owner);
    // ...and no completion can reach the threadsafe function any more.
    let Tsfn(tsfn) = std::mem::replace(&mut *resolver.tsfn.write(), Tsfn(ptr::null_mut()));
    if !tsfn.is_null() {
        // SAFETY: the function is still open (non-null under the lock) and
        // this is the one release of its one thread count.
        unsafe { sys::napi_release_threadsafe_function(tsfn, sys::ThreadsafeFunctionReleaseMode::abort) };
    }
    let _ = CURRENT.try_with(|c| c.borrow_mut().take());
}
