//! Delivering async outcomes to the JavaScript thread that owns the waiter.
//!
//! # Implementation details
//!
//! Each copy of the JavaScript layer that uses `waitAsync` gets one
//! [`Resolver`] on its thread: one threadsafe function plus a batch of
//! finished waiters. A thread usually has one copy; Jest's module registry
//! per test file, Vitest's VM contexts and hot reloaders evaluate the layer
//! again in the same thread while the addon stays loaded once, and each such
//! copy has promises of its own, so results go to the copy that queued the
//! waiter: the slot a copy names its waiters by carries its index in the
//! thread's list of copies ([`COPY_SHIFT`]).
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
//!
//! Some wake-ups are not over when they are delivered: a condition
//! variable's woken `Condition.waitAsync` still has to retake its lock, in
//! later steps of its thread (`lib/condition.js`). A waiter whose token asks
//! for it ([`Token::follow_up`]) is kept on record from the delivery until
//! JavaScript reports the follow-up done (`relocked`), with the protocol it
//! was unparked by ([`Inner::relocking`]); [`close`] (the copy or its thread
//! going away) hands what is still recorded to that protocol
//! (`Protocol::follow_up_lost`), so a thread stopped between its wake-up and
//! the end of its relock does not take the wake-up with it.
//!
//! This layer knows no particular primitive: what a primitive needs done
//! when a copy closes, it registers on the copy's resolver
//! ([`Resolver::on_close`]).

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

use futex_core::{AsyncOutcome, Key, Owner, Protocol};
use napi::{sys, Result};
use parking_lot::{Mutex, RwLock};

use crate::{check, TABLE, TIMER};

/// Completions waiting in batches for their thread, over all threads (diagnostics).
pub static UNDELIVERED: AtomicUsize = AtomicUsize::new(0);
/// Resolvers not yet dropped, over all threads (diagnostics).
pub static RESOLVERS: AtomicUsize = AtomicUsize::new(0);
/// Condition wake-ups delivered whose relock is not done yet, over all
/// threads (diagnostics).
pub static RELOCKING: AtomicUsize = AtomicUsize::new(0);

/// Slots a copy of the JavaScript layer names its waiters by: the copy's
/// index in its thread's list of copies above this many bits, the waiter's
/// place in that copy's table of promises below them.
pub const COPY_SHIFT: u32 = 22;
/// Copies of the JavaScript layer alive at once on one thread.
pub const MAX_COPIES: usize = 1 << (32 - COPY_SHIFT);
const LOCAL: u32 = (1 << COPY_SHIFT) - 1;

/// What the table knows an async waiter by: its slot (its copy of the JS
/// layer and its place in that copy's table of promises, `lib/futex.js`),
/// and three flags.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Token(pub u64);

impl Token {
    const KEEP_ALIVE: u64 = 1;
    const TIMED: u64 = 2;
    const WEB_EVENT: u64 = 1 << 61;
    const FOLLOW_UP: u64 = 1 << 62;
    const SLICED: u64 = 1 << 63;

    pub fn new(slot: u32, keep_alive: bool, timed: bool) -> Token {
        Token(
            ((slot as u64) << 2) | if timed { Self::TIMED } else { 0 } | if keep_alive { Self::KEEP_ALIVE } else { 0 },
        )
    }
    pub fn slot(self) -> u32 {
        (self.0 >> 2) as u32
    }
    /// The waiter's place in its copy's table of promises.
    pub fn local_slot(self) -> u32 {
        self.slot() & LOCAL
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
    /// The same waiter, one whose unpark is not over when delivered (a
    /// condition variable's sleeper, which must relock): its thread keeps
    /// it on record until the follow-up is done (see the module docs).
    pub fn follow_up(self) -> Token {
        Token(self.0 | Self::FOLLOW_UP)
    }
    pub fn is_follow_up(self) -> bool {
        self.0 & Self::FOLLOW_UP != 0
    }
    /// A Web Locks event of the copy about a name slot (src/web_locks.rs)
    /// rather than a waiter: `slot` is the name's slot. Nothing queued it,
    /// so it is not counted as pending, and it keeps nothing alive.
    pub fn web_event(name_slot: u32) -> Token {
        Token(((name_slot as u64) << 2) | Self::WEB_EVENT)
    }
    pub fn is_web_event(self) -> bool {
        self.0 & Self::WEB_EVENT != 0
    }
}

/// Set in a delivered entry that is a Web Locks event, not a waiter's outcome.
const WEB_EVENT_ENTRY: u32 = 1 << 31;

pub struct Resolver {
    /// Cleared when the copy or its thread goes away ([`close`]), before
    /// its waiters are removed.
    alive: AtomicBool,
    /// Its index in the thread's list of copies.
    copy: u32,
    /// Its env cleanup hook is still registered (holding a strong count).
    /// Only touched on the JS thread.
    hooked: AtomicBool,
    /// Waiters of this copy woken by another thread whose completion has not
    /// returned yet (`Owner::deciding`): [`close`] waits for them.
    in_flight: AtomicUsize,
    /// The JS thread this resolver delivers to.
    js_thread: ThreadId,
    /// The copy's client number in the Web Locks manager's fast path, once
    /// it asked for one (0: none); given back when the resolver closes.
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
    /// Waiters of this copy queued or decided but not yet delivered.
    pending: usize,
    /// The copy's `deliver`: a reference that is strong while `pending > 0`
    /// (a pending waiter keeps its copy alive, as a pending timer keeps its
    /// callback) and weak otherwise, so that a copy nobody uses any more is
    /// collected and its resolver freed ([`copy_dropped`]). Null once deleted.
    deliver: sys::napi_ref,
    /// Wake-ups delivered to this copy whose follow-up is not done yet, by
    /// address: how many, and the protocol that unparked them. Entered when
    /// the batch that holds them is taken for delivery, left when JavaScript
    /// reports the follow-up done (or the wake-up given up and passed on);
    /// [`close`] hands the rest to their protocol.
    relocking: HashMap<Key, (u32, &'static dyn Protocol)>,
    /// What other modules need done when the copy closes ([`Resolver::on_close`]).
    closers: Vec<Box<dyn FnOnce() + Send>>,
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

impl Inner {
    /// Counts `n` more (or, negative, fewer) pending waiters, and makes the
    /// reference to `deliver` strong or weak to match. On the JS thread.
    fn add_pending(&mut self, n: isize) {
        let before = self.pending;
        self.pending = before.saturating_add_signed(n);
        if self.deliver.is_null() || (before == 0) == (self.pending == 0) {
            return;
        }
        let mut count = 0;
        // SAFETY: on the JS thread, with its env; the reference is live (non-null).
        unsafe {
            if before == 0 {
                sys::napi_reference_ref(self.env, self.deliver, &mut count);
            } else {
                sys::napi_reference_unref(self.env, self.deliver, &mut count);
            }
        }
    }

    /// Deletes the reference to `deliver`. On the JS thread, while its env is live.
    fn drop_deliver(&mut self) {
        let deliver = std::mem::replace(&mut self.deliver, ptr::null_mut());
        if !deliver.is_null() {
            // SAFETY: a reference of this env, deleted once (nulled above).
            unsafe { sys::napi_delete_reference(self.env, deliver) };
        }
    }
}

// SAFETY: `env` and `deliver` are only used on the JS thread.
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

    fn thread(&self) -> Option<ThreadId> {
        Some(self.js_thread)
    }

    fn deciding(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    fn decided(&self) {
        self.in_flight.fetch_sub(1, Ordering::Release);
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
    /// Runs `closer` when the copy closes (its thread ends, or it is
    /// collected): for what another module keeps for the copy. On the JS
    /// thread. A copy already closed runs it at once.
    pub(crate) fn on_close(&self, closer: Box<dyn FnOnce() + Send>) {
        let mut inner = self.inner.lock();
        if inner.closed {
            drop(inner);
            closer();
        } else {
            inner.closers.push(closer);
        }
    }

    /// The follow-up after a wake-up delivered on `key` (a condition
    /// sleeper's relock) is done (or
    /// the wake-up was given up): forget one of them. False if none was on
    /// record. Must be called on the JS thread.
    pub fn relocked(&self, key: Key) -> bool {
        let mut inner = self.inner.lock();
        let Some((n, _)) = inner.relocking.get_mut(&key) else { return false };
        *n -= 1;
        if *n == 0 {
            inner.relocking.remove(&key);
        }
        RELOCKING.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// A waiter of this thread was queued. Must be called on the JS thread,
    /// inside an N-API call.
    pub fn queued(&self, token: Token) {
        let mut inner = self.inner.lock();
        inner.add_pending(1);
        if token.keep_alive() {
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
        let mut inner = self.inner.lock();
        inner.add_pending(-1);
        if token.keep_alive() {
            inner.keep_alive -= 1;
            inner.apply_ref(&self.tsfn);
        }
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        UNDELIVERED.fetch_sub(inner.batch.len(), Ordering::Relaxed);
        RELOCKING.fetch_sub(inner.relocking.values().map(|&(n, _)| n as usize).sum(), Ordering::Relaxed);
        RESOLVERS.fetch_sub(1, Ordering::Relaxed);
    }
}

thread_local! {
    /// The resolvers of this thread's copies of the JavaScript layer, by
    /// index; a slot is free again once its copy is gone.
    static COPIES: std::cell::RefCell<Vec<Option<Arc<Resolver>>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The resolver of the copy of this thread that names its waiters with
/// `slot` (see [`COPY_SHIFT`]), if that copy called [`init`].
pub fn of_slot(slot: u32) -> Option<Arc<Resolver>> {
    let copy = (slot >> COPY_SHIFT) as usize;
    COPIES.with(|c| c.borrow().get(copy).cloned().flatten())
}

/// Creates the resolver of a copy of the JavaScript layer on this thread and
/// returns the copy's index; `deliver(list)` is called on this thread with
/// each batch of that copy's outcomes, `slot << 2 | outcome_code` each (the
/// slot within the copy; with bit 31 set, a Web Locks event about the name
/// slot `slot`, see [`Token::web_event`]): a number for a batch of one, else
/// a `Uint32Array`.
///
/// # Safety
/// `env` and `deliver` must be live handles of the current N-API call on this thread.
pub unsafe fn init(env: sys::napi_env, deliver: sys::napi_value) -> Result<u32> {
    let Some(copy) = COPIES.with(|c| {
        let c = c.borrow();
        c.iter().position(Option::is_none).or_else(|| (c.len() < MAX_COPIES).then_some(c.len()))
    }) else {
        return Err(napi::Error::new(
            napi::Status::GenericFailure,
            format!("more than {MAX_COPIES} copies of shared-futex are alive on this thread"),
        ));
    };
    let resolver = Arc::new(Resolver {
        alive: AtomicBool::new(true),
        copy: copy as u32,
        hooked: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
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
            pending: 0,
            deliver: ptr::null_mut(),
            relocking: HashMap::new(),
            closers: Vec::new(),
        }),
    });
    RESOLVERS.fetch_add(1, Ordering::Relaxed);
    let mut name = ptr::null_mut();
    let label = "shared-futex";
    // SAFETY: live env; `label` is valid UTF-8 of the given length.
    check(
        unsafe { sys::napi_create_string_utf8(env, label.as_ptr().cast(), label.len() as isize, &mut name) },
        "napi_create_string_utf8",
    )?;
    // A weak reference: nothing native keeps the copy alive while it has
    // nothing pending (`Inner::add_pending`).
    let mut deliver_ref = ptr::null_mut();
    // SAFETY: live env and function handle; out-pointer is a local.
    check(unsafe { sys::napi_create_reference(env, deliver, 0, &mut deliver_ref) }, "napi_create_reference")?;
    resolver.inner.lock().deliver = deliver_ref;
    // The threadsafe function holds one strong count, returned in `finalize`.
    // It holds no JavaScript function (`call_js` finds `deliver` through the
    // reference), so that it does not keep the copy alive.
    let held = Arc::into_raw(resolver.clone()) as *mut c_void;
    let mut tsfn = ptr::null_mut();
    // SAFETY: live env; `held` stays valid until `finalize` takes it back;
    // `call_js` and `finalize` match N-API's types.
    let status = unsafe {
        sys::napi_create_threadsafe_function(
            env,
            ptr::null_mut(),
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
        resolver.inner.lock().drop_deliver();
        // SAFETY: creation failed, so N-API will never call `finalize` with it.
        drop(unsafe { Arc::from_raw(held as *const Resolver) });
        return check(status, "napi_create_threadsafe_function").map(|_| 0);
    }
    // Pending waiters do not keep the event loop alive unless asked (`queued`).
    *resolver.tsfn.write() = Tsfn(tsfn);
    resolver.inner.lock().apply_ref(&resolver.tsfn);
    // Both the hook and the finalizer hold a strong count; each takes its
    // own back exactly once, and whichever runs first closes the resolver.
    let hook_arg = Arc::into_raw(resolver.clone()) as *mut c_void;
    // SAFETY: `cleanup` takes back `hook_arg`'s strong count exactly once.
    let status = unsafe { sys::napi_add_env_cleanup_hook(env, Some(cleanup), hook_arg) };
    if status != sys::Status::napi_ok {
        // SAFETY: the hook was not added: its count is ours to take back.
        drop(unsafe { Arc::from_raw(hook_arg as *const Resolver) });
        close(&resolver);
        return check(status, "napi_add_env_cleanup_hook").map(|_| 0);
    }
    resolver.hooked.store(true, Ordering::Relaxed);
    let finalizer_arg = Arc::into_raw(resolver.clone()) as *mut c_void;
    // SAFETY: `copy_dropped` takes back `finalizer_arg`'s strong count exactly
    // once (N-API calls a finalizer once: when `deliver` is collected, or when
    // the env is torn down).
    let status = unsafe {
        sys::napi_add_finalizer(env, deliver, finalizer_arg, Some(copy_dropped), ptr::null_mut(), ptr::null_mut())
    };
    if status != sys::Status::napi_ok {
        // SAFETY: the finalizer was not added: its count is ours to take back.
        drop(unsafe { Arc::from_raw(finalizer_arg as *const Resolver) });
    }
    COPIES.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() == copy {
            c.push(Some(resolver));
        } else {
            c[copy] = Some(resolver);
        }
    });
    Ok(copy as u32)
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

/// The protocol of a delivered outcome that needs a follow-up (a notify's wake-up of a condition
/// sleeper, which must relock before its wait is over.
fn needs_relock(token: Token, outcome: AsyncOutcome) -> Option<&'static dyn Protocol> {
    match outcome {
        AsyncOutcome::Unparked(_, protocol) if token.is_follow_up() => Some(protocol),
        _ => None,
    }
}

/// Runs on the owning JS thread: hands the whole batch to `deliver`.
unsafe extern "C" fn call_js(env: sys::napi_env, _js: sys::napi_value, context: *mut c_void, _data: *mut c_void) {
    // A null env means Node is draining the queue of a closing function. It
    // does so *after* `finalize` released `context`: touch nothing.
    if env.is_null() {
        return;
    }
    // SAFETY: with a live env the function is open, so `finalize` has not
    // run and `context` (its strong count of the resolver) is valid.
    let resolver = unsafe { &*(context as *const Resolver) };
    let mut deliver = ptr::null_mut();
    let batch = {
        let mut inner = resolver.inner.lock();
        inner.scheduled = false;
        inner.delivering = false;
        let batch = std::mem::take(&mut inner.batch);
        inner.keep_alive -= batch.iter().filter(|(_, token, _)| token.keep_alive()).count();
        inner.apply_ref(&resolver.tsfn);
        if !batch.is_empty() && !inner.deliver.is_null() {
            // SAFETY: a live reference of this env; out-pointer is a local.
            // Strong while waiters are pending, so `deliver` is there.
            unsafe { sys::napi_get_reference_value(env, inner.deliver, &mut deliver) };
        }
        inner.add_pending(-(batch.iter().filter(|(_, token, _)| !token.is_web_event()).count() as isize));
        if !deliver.is_null() {
            // Wake-ups with a follow-up go on record as they leave the batch
            // (under the same lock): `close` passes on one or the other.
            for &(key, token, outcome) in batch.iter() {
                if let Some(protocol) = needs_relock(token, outcome) {
                    inner.relocking.entry(key).or_insert((0, protocol)).0 += 1;
                    RELOCKING.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        batch
    };
    UNDELIVERED.fetch_sub(batch.len(), Ordering::Relaxed);
    if batch.is_empty() {
        return;
    }
    if deliver.is_null() {
        // The copy is gone (cannot happen while it has pending waiters, but
        // a wake-up must never vanish): pass the outcomes on.
        for &(key, _, outcome) in &batch {
            pass_on(key, outcome);
        }
        return;
    }
    let entry = |&(_, token, outcome): &(Key, Token, AsyncOutcome)| {
        let code = (token.local_slot() << 2) | outcome_code(token, outcome);
        if token.is_web_event() {
            WEB_EVENT_ENTRY | code
        } else {
            code
        }
    };
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
            // on nothing for these (they left the batch), so do it here,
            // except condition wake-ups: they are on record, and passed on
            // from there.
            for &(key, token, outcome) in &batch {
                if needs_relock(token, outcome).is_none() {
                    pass_on(key, outcome);
                }
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
    resolver.hooked.store(false, Ordering::Relaxed);
    close(&resolver);
}

/// The copy's `deliver` was collected (nothing pending kept it), or the env
/// is being torn down: the resolver is of no use any more.
unsafe extern "C" fn copy_dropped(env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the strong count registered with the finalizer, taken back once here.
    let resolver = unsafe { Arc::from_raw(data as *const Resolver) };
    close(&resolver);
    if resolver.hooked.swap(false, Ordering::Relaxed) {
        let arg = Arc::as_ptr(&resolver) as *mut c_void;
        // SAFETY: the hook registered with `arg` has not run (`hooked`), so
        // removing it is ours to do, and so is taking back its count.
        unsafe {
            sys::napi_remove_env_cleanup_hook(env, Some(cleanup), arg);
            drop(Arc::from_raw(arg as *const Resolver));
        }
    }
}

/// Closes a resolver for good (idempotent): its copy or its thread is gone.
/// On the JS thread.
fn close(resolver: &Arc<Resolver>) {
    // First: notifiers stop counting this copy's waiters...
    if !resolver.alive.swap(false, Ordering::AcqRel) {
        return;
    }
    // ...what other modules keep for the copy is let go (the Web Locks it
    // took on the fast path go to their manager)...
    let closers = std::mem::take(&mut resolver.inner.lock().closers);
    for closer in closers {
        closer();
    }
    // ...then they leave the queues (their deadlines need not fire)...
    let owner: Arc<dyn Owner> = resolver.clone();
    let mut timed = 0;
    TABLE.remove_owner(&owner, |token| timed += usize::from(Token(token).timed()));
    TIMER.forget(timed);
    // ...outcomes other threads decided before that (under bucket locks that
    // `remove_owner` took since) finish their completion while this thread's
    // memory is still there: one that finds the resolver closed passes its
    // wake-up on through the protocol, which may touch the word it was
    // queued on, and that word may live in a buffer only this thread keeps...
    while resolver.in_flight.load(Ordering::Acquire) != 0 {
        std::thread::yield_now();
    }
    // ...wake-ups this copy took but will never see go on to the next
    // waiter, as do later ones (from notifiers that saw it alive), and so do
    // condition wake-ups it saw but whose relock it never finished...
    let (batch, relocking) = {
        let mut inner = resolver.inner.lock();
        inner.closed = true;
        inner.drop_deliver();
        (std::mem::take(&mut inner.batch), std::mem::take(&mut inner.relocking))
    };
    UNDELIVERED.fetch_sub(batch.len(), Ordering::Relaxed);
    for (key, _, outcome) in batch {
        pass_on(key, outcome);
    }
    for (key, (n, protocol)) in relocking {
        RELOCKING.fetch_sub(n as usize, Ordering::Relaxed);
        // The word's memory may have no keeper left but this thread's heap:
        // a protocol writes it only while a queued sleeper keeps it alive.
        for _ in 0..n {
            protocol.follow_up_lost(&TABLE, key);
        }
    }
    // ...and no completion can reach the threadsafe function any more.
    let Tsfn(tsfn) = std::mem::replace(&mut *resolver.tsfn.write(), Tsfn(ptr::null_mut()));
    if !tsfn.is_null() {
        // SAFETY: the function is still open (non-null under the lock) and
        // this is the one release of its one thread count.
        unsafe { sys::napi_release_threadsafe_function(tsfn, sys::ThreadsafeFunctionReleaseMode::abort) };
    }
    let copy = resolver.copy as usize;
    let _ = COPIES.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            if c.get(copy).and_then(Option::as_ref).is_some_and(|r| Arc::ptr_eq(r, resolver)) {
                c[copy] = None;
            }
        }
    });
}
