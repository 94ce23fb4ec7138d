//! N-API layer of shared-futex: typed array → key, and the calls the JS layer
//! (`lib/futex.js`) makes. Argument conversion with the ECMAScript rules and
//! the errors users see live in JS; this layer re-checks what memory safety
//! depends on and talks to the process-wide wait table.

use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futex_core::{Ticket, Timer, WaitTable};
use napi::{sys, Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;
use parking_lot::Mutex;

mod cell;
pub mod condition;
pub mod event;
pub mod lock;
pub mod raw;
pub mod region;
mod resolver;
pub mod rwlock;
pub mod semaphore;
pub mod web_locks;

use cell::Cell;
use resolver::Token;

/// Every waiter of the process, sync and async, from every thread.
pub(crate) static TABLE: LazyLock<WaitTable> = LazyLock::new(WaitTable::default);

/// Deadlines of async waiters with a finite timeout. Entries of waiters
/// settled early are reported with `forget` and compacted away.
pub(crate) static TIMER: LazyLock<Timer<Ticket>> = LazyLock::new(|| {
    Timer::with_liveness(
        |ticket| {
            TABLE.timeout(ticket);
        },
        |ticket| TABLE.is_queued(ticket.key, ticket.seq),
    )
});

/// A blocked `wait` checks this often whether its thread is being stopped.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// Result codes shared with `lib/futex.js`.
pub(crate) const OK: u32 = 0;
pub(crate) const NOT_EQUAL: u32 = 1;
pub(crate) const TIMED_OUT: u32 = 2;

/// An N-API status as a `Result`: `what` names the call that failed.
pub(crate) fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::GenericFailure, format!("{what} failed ({status})")))
    }
}

/// `now + ms`, or `None` for "forever" (infinite, NaN, or past `Instant`'s range).
pub(crate) fn deadline(ms: f64) -> Option<Instant> {
    if !ms.is_finite() {
        return None;
    }
    let ms = ms.max(0.0);
    Duration::try_from_secs_f64(ms / 1000.0).ok().and_then(|d| Instant::now().checked_add(d))
}

/// Whether this thread may still run JavaScript. Once `worker.terminate()` or
/// `process.exit()` has started, Node's env can no longer call into
/// JavaScript, and every N-API call that could run JavaScript fails with
/// `napi_pending_exception` before doing anything (`NAPI_PREAMBLE` in Node's
/// `js_native_api_v8.cc`, checking `can_call_into_js()`).
///
/// The probe is one such call that runs no JavaScript, and so nothing a user
/// can intercept: `napi_has_own_property` on an empty object made here, with
/// a key made here. An own-property lookup on an ordinary object calls no
/// getter, no Proxy trap, and does not walk the prototype chain. (Reading a
/// property of the global, as an earlier probe did, ran a getter installed
/// there, and a throw from it ended the wait.)
///
/// The handles the probe creates live in a scope of its own: a `wait` that
/// blocks for a day probes about two million times inside one N-API call,
/// whose own scope would otherwise keep every one of them until it returns.
pub(crate) fn js_alive(env: sys::napi_env) -> bool {
    // SAFETY: `env` is the live env of the N-API call this runs inside; the
    // scope is closed on every path after being opened; the key is a
    // literal of 5 bytes; out-pointers are locals.
    unsafe {
        let mut scope = ptr::null_mut();
        if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
            return false;
        }
        let mut object = ptr::null_mut();
        let mut key = ptr::null_mut();
        let mut has = false;
        let alive = sys::napi_create_object(env, &mut object) == sys::Status::napi_ok
            && sys::napi_create_string_latin1(env, c"alive".as_ptr(), 5, &mut key) == sys::Status::napi_ok
            && sys::napi_has_own_property(env, object, key, &mut has) == sys::Status::napi_ok;
        sys::napi_close_handle_scope(env, scope);
        alive
    }
}

/// Runs the liveness probe of a blocked `wait` `probes` times, then calls
/// `then()` within the same N-API call (for tests: with V8's
/// `--check-handle-count`, a `gc()` there fails if the probes left handles
/// behind). Returns whether the thread may still run JavaScript.
#[napi(js_name = "probeAlive")]
pub fn probe_alive(env: Env, probes: u32, then: Unknown) -> Result<bool> {
    let raw_env = env.raw();
    let mut alive = true;
    for _ in 0..probes {
        alive &= js_alive(raw_env);
    }
    let mut undefined = ptr::null_mut();
    // SAFETY: live env and function handle of this call; out-pointers are locals.
    let status = unsafe {
        sys::napi_get_undefined(raw_env, &mut undefined);
        sys::napi_call_function(raw_env, undefined, then.raw(), 0, ptr::null(), ptr::null_mut())
    };
    if status != sys::Status::napi_ok {
        return Err(Error::new(Status::PendingException, "the callback threw".to_owned()));
    }
    Ok(alive)
}

/// The resolver of the copy of the JavaScript layer on this thread that
/// names its waiters with `slot` (set up by its `initAsync`).
pub(crate) fn this_resolver(slot: u32) -> Result<Arc<resolver::Resolver>> {
    resolver::of_slot(slot).ok_or_else(|| {
        Error::new(Status::GenericFailure, "initAsync was not called by this copy on this thread".to_owned())
    })
}

/// What follows queueing an async waiter of this thread: count it for the
/// keep-alive and give it its deadline. The waiter may already be decided by
/// another thread, but its outcome can only be delivered on this thread,
/// after the call returns. Returns its sequence number, as JS receives it.
pub(crate) fn queued(owner: &resolver::Resolver, ticket: Ticket, at: Option<Instant>) -> f64 {
    owner.queued(Token(ticket.token));
    if let Some(at) = at {
        TIMER.schedule(at, ticket);
    }
    ticket.seq as f64
}

/// Takes a queued async waiter of this thread back out (abort): the one
/// `waitAsync` queued on `ta[index]` with sequence number `seq`. True if it
/// was still queued: it consumed no wake-up and no outcome will be delivered
/// for it. False if its outcome was already decided.
#[napi(js_name = "cancelAsync")]
pub fn cancel_async(env: Env, ta: Unknown, index: f64, seq: f64) -> Result<bool> {
    // SAFETY: handles of this call; only the address is used afterwards.
    let cell = unsafe { Cell::resolve(env.raw(), ta.raw(), index)? };
    // (key, seq) names exactly one waiter, and its token names its copy.
    let taken = match region::find(cell.key()) {
        Some((region, _)) => region.cancel(seq as u64),
        None => TABLE.take(cell.key(), seq as u64),
    };
    match taken {
        Some(token) => {
            if let Some(owner) = resolver::of_slot(Token(token).slot()) {
                owner.cancelled(Token(token));
            }
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Creates the resolver (one threadsafe function) of a copy of the
/// JavaScript layer on this thread around its `deliver(list)`, called on
/// this thread with each batch of that copy's outcomes, `slot << 2 |
/// outcome` each (see `resolver::outcome_code`): a number for a batch of
/// one, else a `Uint32Array`. Returns the copy's index: the copy names its
/// waiters with slots `index · 2^22 + n`, `n < 2^22`. Each copy calls it
/// once; a copy that is collected frees its index.
#[napi(js_name = "initAsync")]
pub fn init_async(env: Env, deliver: Unknown) -> Result<u32> {
    // SAFETY: handles of this call on this thread.
    unsafe { resolver::init(env.raw(), deliver.raw()) }
}

/// Thread ids (`worker_threads.threadId`) of the threads whose env was torn
/// down, as sorted, disjoint, non-adjacent ranges `[start, end)`.
///
/// Deaths, not lives: a thread this copy of the addon never saw (it uses
/// another copy of the package, or none) must count as alive, or a lock it
/// holds would look abandoned. Node never reuses a thread id and hands them
/// out in increasing order, so the deaths of a pool's workers merge into a
/// few ranges: the registry grows with the threads still alive (and ids this
/// copy never saw), not with every thread that ever ran.
static DEAD: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());

/// Thread ids of the threads that loaded this copy of the addon and have not
/// ended (sorted). A lock held by a thread not in here and not dead belongs
/// to a thread of another copy: its unlock cannot wake our waiters.
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Whether thread `id` loaded this copy of the addon and has not ended.
pub(crate) fn is_live_here(id: u32) -> bool {
    LIVE.lock().binary_search(&id).is_ok()
}

fn record_death(id: u32) {
    {
        let mut live = LIVE.lock();
        if let Ok(i) = live.binary_search(&id) {
            live.remove(i);
        }
    }
    let mut dead = DEAD.lock();
    // The first range that ends at or after `id`.
    let i = dead.partition_point(|&(_, end)| end < id);
    if i < dead.len() && dead[i].0 <= id && id < dead[i].1 {
        return;
    }
    let joins_left = i < dead.len() && dead[i].1 == id;
    let joins_right =
        if joins_left { i + 1 < dead.len() && dead[i + 1].0 == id + 1 } else { i < dead.len() && dead[i].0 == id + 1 };
    match (joins_left, joins_right) {
        (true, true) => {
            dead[i].1 = dead[i + 1].1;
            dead.remove(i + 1);
        }
        (true, false) => dead[i].1 = id + 1,
        (false, true) => dead[i].0 = id,
        (false, false) => dead.insert(i, (id, id + 1)),
    }
}

pub(crate) fn is_dead(id: u32) -> bool {
    let dead = DEAD.lock();
    let i = dead.partition_point(|&(_, end)| end <= id);
    i < dead.len() && dead[i].0 <= id
}

/// When a primitive's work at a thread's end runs, relative to the wait
/// table's own (which hands every lock word that names the thread and has
/// waiters to its oldest waiter, and wakes the watching waiters).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadEnd {
    Before,
    After,
}

/// What primitives need done when a thread ends, each registered by its
/// primitive the first time it is used ([`on_thread_end`]): this layer
/// knows none of them.
static THREAD_END_HOOKS: Mutex<Vec<(ThreadEnd, fn(u32))>> = Mutex::new(Vec::new());

/// Registers `hook(threadId)` to run at every thread's end from now on, at
/// `when` (once per hook, however often it is registered). A primitive
/// registers before it can hold anything of a thread: its first use.
pub(crate) fn on_thread_end(when: ThreadEnd, hook: fn(u32)) {
    let mut hooks = THREAD_END_HOOKS.lock();
    if !hooks.iter().any(|&(w, h)| w == when && std::ptr::fn_addr_eq(h, hook)) {
        hooks.push((when, hook));
    }
}

/// A thread's env is torn down: record its death, then let the primitives
/// and the wait table act on it (a lock it held goes to its oldest waiter
/// (src/lock.rs), a reader-writer lock it held is released and its readers
/// forgotten, its Web Locks requests end...): owner death is pushed, nobody
/// has to poll for it. A locker that arrives later finds the death recorded
/// and takes the lock over itself.
unsafe extern "C" fn thread_ended(arg: *mut c_void) {
    let id = arg as usize as u32;
    record_death(id);
    // Counted after the death is recorded and before the watching waiters
    // are woken (`TABLE.thread_ended`): see `ENDS`.
    ENDS[0].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let hooks = THREAD_END_HOOKS.lock().clone();
    for &(_, hook) in hooks.iter().filter(|&&(when, _)| when == ThreadEnd::Before) {
        hook(id);
    }
    TABLE.thread_ended(id + 1);
    for &(_, hook) in hooks.iter().filter(|&&(when, _)| when == ThreadEnd::After) {
        hook(id);
    }
}

/// How many threads' ends this process has recorded (wrapping). A watching
/// waiter (`waitWatching`) reads it, then looks at the threads it watches
/// (`isThreadAlive`), then sleeps only if the count is still the same,
/// compared under the queue's lock: an end recorded after its look either
/// changes the count first or finds it queued and wakes it.
pub(crate) static ENDS: [std::sync::atomic::AtomicU32; 1] = [std::sync::atomic::AtomicU32::new(0)];

/// `ENDS` as an `ArrayBuffer` over its memory (read with `Atomics.load`),
/// or `null` where the runtime allows no external buffers (`threadEnds()`
/// then). Process memory that is never freed: no finalizer.
#[napi(js_name = "threadEndsBuffer")]
pub fn thread_ends_buffer(env: &Env) -> Result<Unknown<'_>> {
    static_atomics_buffer(env, &ENDS)
}

/// The count of `threadEndsBuffer`, by a call.
#[napi(js_name = "threadEnds")]
pub fn thread_ends() -> u32 {
    ENDS[0].load(std::sync::atomic::Ordering::SeqCst)
}

thread_local! {
    /// Whether this thread's death is already watched for.
    static REGISTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Watches this thread, `thread_id`, so that its end is recorded.
#[napi(js_name = "registerThread")]
pub fn register_thread(env: Env, thread_id: u32) -> Result<()> {
    if REGISTERED.get() {
        return Ok(());
    }
    // SAFETY: the hook only reads its argument as an integer.
    let status =
        unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(thread_ended), thread_id as usize as *mut c_void) };
    check(status, "napi_add_env_cleanup_hook")?;
    REGISTERED.set(true);
    let mut live = LIVE.lock();
    if let Err(i) = live.binary_search(&thread_id) {
        live.insert(i, thread_id);
    }
    Ok(())
}

/// False only for a thread known to have ended: one that loaded this copy
/// of the addon (`registerThread`) and was torn down since.
#[napi(js_name = "isThreadAlive")]
pub fn is_thread_alive(thread_id: u32) -> bool {
    !is_dead(thread_id)
}

/// The wait table's presence counts (see futex-core's `table` module) as an
/// `ArrayBuffer` over their memory, which `lib/futex.js` reads with
/// `Atomics.load` so that a `notify` nobody waits for never enters native
/// code; `null` where the runtime allows no external buffers. The memory is
/// the process-wide table's, which is never freed: no finalizer.
#[napi(js_name = "presenceBuffer")]
pub fn presence_buffer(env: &Env) -> Result<Unknown<'_>> {
    static_atomics_buffer(env, TABLE.presence())
}

/// An `ArrayBuffer` over `words`, memory of the process that is never freed
/// (so the buffer has no finalizer), or `null` where the runtime allows no
/// external buffers.
pub(crate) fn static_atomics_buffer<'env, T>(env: &'env Env, words: &'static [T]) -> Result<Unknown<'env>> {
    let raw_env = env.raw();
    let mut value = ptr::null_mut();
    // SAFETY: live env; `words` is static (never dropped), and its callers
    // pass atomics only ever accessed atomically, here and by JavaScript's
    // Atomics.
    let status = unsafe {
        sys::napi_create_external_arraybuffer(
            raw_env,
            words.as_ptr() as *mut c_void,
            std::mem::size_of_val(words),
            None,
            ptr::null_mut(),
            &mut value,
        )
    };
    if status != sys::Status::napi_ok {
        // SAFETY: live env; out-pointer is a local.
        check(unsafe { sys::napi_get_null(raw_env, &mut value) }, "napi_get_null")?;
    }
    // SAFETY: a value created on this env during this call.
    Ok(unsafe { Unknown::from_raw_unchecked(raw_env, value) })
}

/// The low 32 bits of the address of `ta[0]` (`ta` as in `wait`): with the
/// index, the JavaScript layer finds an element's presence slot.
#[napi(js_name = "addressOf")]
pub fn address_of(env: Env, ta: Unknown) -> Result<u32> {
    // SAFETY: handles of this call; only the address is used afterwards.
    let base = unsafe { Cell::base(env.raw(), ta.raw())? };
    Ok(base as u32)
}

/// Waiters currently queued on `ta[index]` (diagnostics and tests).
#[napi(js_name = "queueLength")]
pub fn queue_length(env: Env, ta: Unknown, index: f64) -> Result<u32> {
    // SAFETY: handles of this call; only the address is used afterwards.
    let cell = unsafe { Cell::resolve(env.raw(), ta.raw(), index)? };
    Ok(TABLE.len(cell.key()) as u32)
}

/// What the process holds natively for waiters and threads (diagnostics and
/// tests). All counts are process-wide.
#[napi(object)]
pub struct Diagnostics {
    /// Async waiters queued in the wait table.
    pub queued_async: u32,
    /// Outcomes decided but not yet handed to their thread.
    pub undelivered: u32,
    /// Threads' resolvers not yet freed.
    pub resolvers: u32,
    /// Entries in the deadline heap (including early-settled ones not yet compacted away).
    pub timer_entries: u32,
    /// Ranges of ended threads in the thread registry.
    pub dead_thread_ranges: u32,
    /// The sum of the wait table's presence counts: addresses with a queue,
    /// plus waiters checking their value right now.
    pub presence: u32,
    /// Condition wake-ups delivered to async sleepers whose relock is not
    /// done yet (kept on record by their thread).
    pub relocking: u32,
}

#[napi(js_name = "diagnostics")]
pub fn diagnostics() -> Diagnostics {
    use std::sync::atomic::Ordering::Relaxed;
    Diagnostics {
        queued_async: TABLE.queued_async() as u32,
        undelivered: resolver::UNDELIVERED.load(Relaxed) as u32,
        resolvers: resolver::RESOLVERS.load(Relaxed) as u32,
        timer_entries: TIMER.pending() as u32,
        dead_thread_ranges: DEAD.lock().len() as u32,
        presence: TABLE.presence().iter().map(|c| c.get()).sum(),
        relocking: resolver::RELOCKING.load(Relaxed) as u32,
    }
}
