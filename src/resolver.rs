//! Delivering async outcomes to the JavaScript thread that owns the waiter.
//!
//! # Implementation details
//!
//! Each thread (N-API env) that uses `waitAsync` gets exactly one
//! [`Resolver`]: one threadsafe function plus a batch of finished waiters.
//! [`Owner::complete`] (called by a notifier or the timer thread) appends the
//! waiter to the batch and, only if the batch was empty, calls the threadsafe
//! function. When the JS thread runs the call, it takes the whole batch and
//! hands it to the JS `deliver` callback as one `Uint32Array` (a batch of one,
//! the usual wake-up of an idle loop, as a plain number), which settles the
//! promises (`lib/futex.js`). A notify-all of 100k waiters thus costs one
//! wake-up of the owning thread and one call into JS, not 100k.
//!
//! Nothing native refers to a waiter's promise: the promise, the function
//! that settles it and the typed array it waits on live in the JS thread's
//! heap, in a slot named by the waiter's [`Token`]. When the thread ends, its
//! isolate takes all of them with it; a native handle (a `napi_deferred`)
//! would outlive it, since N-API can only free one by settling it, and a
//! thread that is being stopped can no longer settle anything.
//!
//! Lifetime: the threadsafe function is released by the env cleanup hook (or
//! finalized by Node), and every call to it happens under `tsfn`'s read lock
//! after checking it is still there, so a notify racing with a worker's exit
//! never touches a freed threadsafe function. The cleanup hook also marks the
//! resolver dead, removes its waiters from the table, and closes the batch:
//! a dead thread's waiters are neither woken nor counted, and a wake-up that
//! reached the batch but can no longer be delivered goes to the next waiter
//! of its address.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

use futex_core::{AsyncOutcome, Key, Owner};
use napi::{sys, Result};
use parking_lot::{Mutex, RwLock};

use crate::{check, TABLE, TIMER};

/// Completions waiting in batches for their thread, over all threads (diagnostics).
pub static UNDELIVERED: AtomicUsize = AtomicUsize::new(0);
/// Resolvers not yet dropped, over all threads (diagnostics).
pub static RESOLVERS: AtomicUsize = AtomicUsize::new(0);

/// What the table knows an async waiter by: its slot in the JS thread's
/// table of promises (`lib/futex.js`), and three flags.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Token(pub u64);

impl Token {
    const KEEP_ALIVE: u64 = 1;
    const TIMED: u64 = 2;
    const SLICED: u64 = 1 << 63;

    pub fn new(slot: u32, keep_alive: bool, timed: bool) -> Token {
        Token(
            ((slot as u64) << 2) | if timed { Self::TIMED } else { 0 } | if keep_alive { Self::KEEP_ALIVE } else { 0 },
        )
    }
    pub fn slot(self) -> u32 {
        (self.0 >> 2) as u32
    }
    /// The waiter keeps its thread's event loop alive while pending.
    pub fn keep_alive(self) -> bool {
        self.0 & Self::KEEP_ALIVE != 0
    }
    /// The waiter has an entry in the timer.
    pub fn timed(self) -> bool {
        self.0 & Self::TIMED != 0
    }
    /// The same waiter, whose timer entry is a lock's safety slice rather
    /// than its deadline: when it fires, the waiter looks again ('ok').
    pub fn sliced(self) -> Token {
        Token(self.0 | Self::SLICED)
    }
    pub fn is_sliced(self) -> bool {
        self.0 & Self::SLICED != 0
    }
}

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
    /// Finished waiters not yet delivered: address, token, outcome.
    /// Invariant: empty once `closed`.
    batch: Vec<(Key, Token, AsyncOutcome)>,
    /// A call of the threadsafe function is queued and has not run yet.
    scheduled: bool,
    /// Set by the cleanup hook: the thread will run no more JavaScript, so
    /// completions are not batched any more but passed on.
    closed: bool,
    /// The env the function was created on; only used on `js_thread`.
    env: sys::napi_env,
    /// Pending waiters of this thread that keep its event loop alive.
    keep_alive: usize,
    /// A batch decided on the JS thread itself (a same-thread notify) is
    /// waiting for delivery: like a task posted by V8, it must run even if
    /// nothing else keeps the loop alive.
    delivering: bool,
    /// Whether the function is currently ref'd (uv handles are ref'd or not,
    /// not counted), i.e. `keep_alive > 0 || delivering` as last applied.
    refed: bool,
}

impl Inner {
    /// Refs or unrefs the function to match `keep_alive > 0 || delivering`.
    /// Must run on the JS thread (libuv handles are not thread-safe).
    fn apply_ref(&mut self, tsfn: &RwLock<Tsfn>) {
        let want = self.keep_alive > 0 || self.delivering;
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

/// A wake-up that reached a thread which can no longer act on it goes to the
/// next waiter of its address: the notify that counted it still wakes someone,
/// and a protocol's token (a lock handed over) is passed on by the protocol.
fn pass_on(key: Key, outcome: AsyncOutcome) {
    match outcome {
        AsyncOutcome::Ok => {
            TABLE.notify(key, 1);
        }
        AsyncOutcome::Unparked(token, protocol) => protocol.lost(&TABLE, key, token),
        AsyncOutcome::TimedOut => {}
    }
}

impl Owner for Resolver {
    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn complete(&self, key: Key, token: u64, outcome: AsyncOutcome) {
        let token = Token(token);
        if outcome != AsyncOutcome::TimedOut && token.timed() {
            // Settled before its deadline: its timer entry has nothing left to do.
            TIMER.forget(1);
        }
        let (first, marked) = {
            let mut inner = self.inner.lock();
            if inner.closed {
                drop(inner);
                return pass_on(key, outcome);
            }
            inner.batch.push((key, token, outcome));
            UNDELIVERED.fetch_add(1, Ordering::Relaxed);
            (!std::mem::replace(&mut inner.scheduled, true), inner.delivering)
        };
        let called = !first || {
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
        // batch is never delivered, and the cleanup hook passes it on. A
        // completion decided on the JS thread itself must be delivered even if
        // nothing else keeps the loop alive, also when the call that delivers
        // it was queued earlier by another thread (the timer's, say), which
        // could not ref this thread's loop. (Marked once per delivery: the
        // JS thread's notify of 10k of its own waiters marks it once.)
        if called && !marked && std::thread::current().id() == self.js_thread {
            let mut inner = self.inner.lock();
            inner.delivering = true;
            inner.apply_ref(&self.tsfn);
        }
    }
}

impl Resolver {
    /// A waiter of this thread was queued. Must be called on the JS thread,
    /// inside an N-API call.
    pub fn queued(&self, token: Token) {
        if token.keep_alive() {
            let mut inner = self.inner.lock();
            inner.keep_alive += 1;
            inner.apply_ref(&self.tsfn);
        }
    }

    /// A waiter of this thread left the queue without an outcome (cancelled).
    /// Must be called on the JS thread, inside an N-API call.
    pub fn cancelled(&self, token: Token) {
        if token.timed() {
            TIMER.forget(1);
        }
        if token.keep_alive() {
            let mut inner = self.inner.lock();
            inner.keep_alive -= 1;
            inner.apply_ref(&self.tsfn);
        }
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        UNDELIVERED.fetch_sub(inner.batch.len(), Ordering::Relaxed);
        RESOLVERS.fetch_sub(1, Ordering::Relaxed);
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

/// Creates this thread's resolver; `deliver(list)` is called on this thread
/// with each batch of outcomes, `slot << 2 | outcome_code` each: a number
/// for a batch of one, else a `Uint32Array`.
///
/// # Safety
/// `env` and `deliver` must be live handles of the current N-API call on this thread.
pub unsafe fn init(env: sys::napi_env, deliver: sys::napi_value) -> Result<()> {
    if current().is_some() {
        return Ok(());
    }
    RESOLVERS.fetch_add(1, Ordering::Relaxed);
    let resolver = Arc::new(Resolver {
        alive: AtomicBool::new(true),
        js_thread: std::thread::current().id(),
        tsfn: RwLock::new(Tsfn(ptr::null_mut())),
        inner: Mutex::new(Inner {
            batch: Vec::new(),
            scheduled: false,
            closed: false,
            env,
            keep_alive: 0,
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
            deliver,
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
    // Pending waiters do not keep the event loop alive unless asked (`queued`).
    *resolver.tsfn.write() = Tsfn(tsfn);
    resolver.inner.lock().apply_ref(&resolver.tsfn);
    let hook_arg = Arc::into_raw(resolver.clone()) as *mut c_void;
    // SAFETY: `cleanup` takes back `hook_arg`'s strong count exactly once.
    check(unsafe { sys::napi_add_env_cleanup_hook(env, Some(cleanup), hook_arg) }, "napi_add_env_cleanup_hook")?;
    CURRENT.with(|c| *c.borrow_mut() = Some(resolver));
    Ok(())
}

/// An outcome as `lib/futex.js` receives it: 0 'ok', 1 'timed-out', and
/// for a waiter of a lock or semaphore word 2 'handoff' and 3 'owner-died'
/// (the lock or permit is held). A lock waiter's safety slice that ran out
/// is an 'ok': look again.
fn outcome_code(token: Token, outcome: AsyncOutcome) -> u32 {
    match outcome {
        AsyncOutcome::Ok => 0,
        AsyncOutcome::TimedOut => u32::from(!token.is_sliced()),
        AsyncOutcome::Unparked(token, _) => match futex_core::lock::kind(token) {
            futex_core::lock::TOKEN_HANDOFF => 2,
            futex_core::lock::TOKEN_OWNER_DIED => 3,
            _ => 0,
        },
    }
}

/// Runs on the owning JS thread: hands the whole batch to `deliver`.
unsafe extern "C" fn call_js(env: sys::napi_env, deliver: sys::napi_value, context: *mut c_void, _data: *mut c_void) {
    // A null env means Node is draining the queue of a closing function. It
    // does so *after* `finalize` released `context`: touch nothing.
    if env.is_null() || deliver.is_null() {
        return;
    }
    // SAFETY: with a live env the function is open, so `finalize` has not
    // run and `context` (its strong count of the resolver) is valid.
    let resolver = unsafe { &*(context as *const Resolver) };
    let batch = {
        let mut inner = resolver.inner.lock();
        inner.scheduled = false;
        inner.delivering = false;
        let batch = std::mem::take(&mut inner.batch);
        inner.keep_alive -= batch.iter().filter(|(_, token, _)| token.keep_alive()).count();
        inner.apply_ref(&resolver.tsfn);
        batch
    };
    UNDELIVERED.fetch_sub(batch.len(), Ordering::Relaxed);
    if batch.is_empty() {
        return;
    }
    let entry = |&(_, token, outcome): &(Key, Token, AsyncOutcome)| (token.slot() << 2) | outcome_code(token, outcome);
    // SAFETY: env is this thread's live env during the callback; `data` is
    // the array buffer's memory of `batch.len()` u32s, written before the
    // buffer is handed to JS. Handles live in the callback's scope.
    unsafe {
        let mut list = ptr::null_mut();
        if let [one] = batch.as_slice() {
            // The usual wake-up of an idle loop: a plain number.
            sys::napi_create_uint32(env, entry(one), &mut list);
        } else {
            let mut data: *mut c_void = ptr::null_mut();
            let mut buffer = ptr::null_mut();
            if sys::napi_create_arraybuffer(env, batch.len() * 4, &mut data, &mut buffer) == sys::Status::napi_ok {
                let slots = std::slice::from_raw_parts_mut(data as *mut u32, batch.len());
                for (slot, outcome) in slots.iter_mut().zip(&batch) {
                    *slot = entry(outcome);
                }
                sys::napi_create_typedarray(env, sys::TypedarrayType::uint32_array, batch.len(), buffer, 0, &mut list);
            }
        }
        let mut undefined = ptr::null_mut();
        sys::napi_get_undefined(env, &mut undefined);
        // An exception thrown by `deliver` is reported by Node as uncaught.
        let status = if list.is_null() {
            sys::Status::napi_generic_failure
        } else {
            sys::napi_call_function(env, undefined, deliver, 1, &list, ptr::null_mut())
        };
        let mut threw = false;
        if status != sys::Status::napi_ok
            && sys::napi_is_exception_pending(env, &mut threw) == sys::Status::napi_ok
            && !threw
        {
            // `deliver` did not run: the env is going away (a terminated
            // worker can no longer run JavaScript). Its cleanup hook passes
            // on nothing for these (they left the batch), so do it here.
            for &(key, _, outcome) in &batch {
                pass_on(key, outcome);
            }
        }
    }
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
    // ...then they leave the queues (their deadlines need not fire)...
    let owner: Arc<dyn Owner> = resolver.clone();
    let mut timed = 0;
    TABLE.remove_owner(&owner, |token| timed += usize::from(Token(token).timed()));
    TIMER.forget(timed);
    // ...wake-ups this thread took but will never see go on to the next
    // waiter, as do later ones (from notifiers that saw it alive)...
    let batch = {
        let mut inner = resolver.inner.lock();
        inner.closed = true;
        std::mem::take(&mut inner.batch)
    };
    UNDELIVERED.fetch_sub(batch.len(), Ordering::Relaxed);
    for (key, _, outcome) in batch {
        pass_on(key, outcome);
    }
    // ...and no completion can reach the threadsafe function any more.
    let Tsfn(tsfn) = std::mem::replace(&mut *resolver.tsfn.write(), Tsfn(ptr::null_mut()));
    if !tsfn.is_null() {
        // SAFETY: the function is still open (non-null under the lock) and
        // this is the one release of its one thread count.
        unsafe { sys::napi_release_threadsafe_function(tsfn, sys::ThreadsafeFunctionReleaseMode::abort) };
    }
    let _ = CURRENT.try_with(|c| c.borrow_mut().take());
}
