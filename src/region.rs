//! Shared regions: named shared mappings that several processes map, whose
//! waiters live in the region's own control block (futex-core's `shared`
//! module) instead of the process's wait table.
//!
//! A region's file is `[control block][user bytes]`. Only the user bytes are
//! handed to JavaScript; waits on them are routed here by [`find`], the one
//! place that decides between the two homes of a waiter.
//!
//! Per process and region there is one mapping ([`Region`]), shared by every
//! thread and every `SharedRegion.open` of it, alive while any buffer over it
//! is (each buffer's finalizer gives its reference back), and one thread, the
//! *bell ringer's listener*: it sleeps on the process slot's doorbell and
//! hands each notified async waiter's outcome to its JavaScript thread
//! through the wait table's usual delivery, and fires their deadlines.
//!
//! Liveness: the process holds a lock on one byte per slot, past the end of
//! the file (Linux: an open-file-description record lock; Windows:
//! `LockFileEx`); the kernel drops it when the process dies, however it
//! dies, and any other process can ask. A recycled pid never matters: pids
//! are not used. Sleeping and waking across processes, the lock and the
//! mapping are each platform's (src/region/posix.rs for Linux and macOS, src/region/windows.rs;
//! src/region/unsupported.rs where regions do not work yet).

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futex_core::shared::{self, Layout, Os, Queues};
use futex_core::{Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkToken, WaitTable};
use napi::{sys, Env, Error, JsValue, Result, Status, Unknown};
use napi_derive::napi;
use parking_lot::{Mutex, RwLock};

use crate::resolver::{Resolver, Token};
use crate::TABLE;

/// Errors users see, by code (`lib/region.js` turns them into named errors).
fn coded(code: &str, message: String) -> Error {
    Error::new(Status::GenericFailure, format!("{code}: {message}"))
}

/// An async waiter of this process on a region: its record, its local
/// waiter in the wait table (keyed by the record's address), its deadline.
struct Pending {
    ticket: Ticket,
    deadline: Option<Instant>,
}

pub(crate) struct Region {
    queues: Queues<Sys>,
    base: *mut u8,
    len: usize,
    control: usize,
    /// Identity of the file, so that a second open in this process maps nothing new.
    id: (u64, u64),
    /// The file's path, as opened.
    path: String,
    /// Buffers over the mapping not yet finalized.
    users: AtomicUsize,
    closing: AtomicBool,
    pending: Mutex<PendingSet>,
    listener: Mutex<bool>,
    delivering: Mutex<()>,
    /// Whether this process's watcher of deaths follows every other process
    /// of the region (src/region/watch.rs; Linux, macOS and Windows).
    #[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
    watched: AtomicBool,
}

#[derive(Default)]
struct PendingSet {
    by_record: HashMap<u32, Pending>,
    by_seq: HashMap<u64, u32>,
    /// When the listener wakes next by itself (set as it goes to sleep);
    /// `None`: it has not slept yet.
    listener_wakes: Option<Instant>,
}

// SAFETY: the mapping is shared memory accessed only through atomics (the
// control block) or by JavaScript (the user bytes); it stays mapped until
// the value is dropped.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

/// The slice of a watching wait over a region whose deaths this process's
/// watcher follows (see `Region::slice_end`).
const WATCHED_SLICE: Duration = Duration::from_secs(1);

/// Every region mapped by this process.
static REGIONS: RwLock<Vec<Arc<Region>>> = RwLock::new(Vec::new());
/// `REGIONS.len()`, read without the lock by the hot paths.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// The region whose user bytes hold `addr`, and `addr`'s offset there.
pub(crate) fn find(addr: usize) -> Option<(Arc<Region>, u32)> {
    if MAPPED.load(Acquire) == 0 {
        return None;
    }
    let regions = REGIONS.read();
    regions.iter().find_map(|r| {
        let start = r.base as usize + r.control;
        (addr >= start && addr < r.base as usize + r.len).then(|| (r.clone(), (addr - start) as u32))
    })
}

/// The region whose control block holds `addr` (a record's local key).
fn find_control(addr: usize) -> Option<Arc<Region>> {
    let regions = REGIONS.read();
    regions.iter().find(|r| addr >= r.base as usize && addr < r.base as usize + r.control).cloned()
}

impl Region {
    pub(crate) fn queues(&self) -> &Queues<Sys> {
        &self.queues
    }

    /// The local key of record `r`: its address (as futex-core lays it out).
    fn local_key(&self, r: u32) -> Key {
        self.queues.record_address(r)
    }

    fn record_of(&self, key: Key) -> u32 {
        self.queues.record_at(key)
    }

    /// Queues an async waiter of `owner` on `offset` if `validate()`; its
    /// outcome comes through the wait table's delivery. `Ok(None)`: not queued.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wait_async(
        self: &Arc<Region>,
        offset: u32,
        validate: impl FnOnce() -> bool,
        owner: Arc<Resolver>,
        token: Token,
        deadline: Option<Instant>,
        env: sys::napi_env,
        watching: bool,
    ) -> Result<Option<Ticket>> {
        let r = self.queues.alloc().ok_or_else(full)?;
        self.queues.set_bell(r, os::thread_bell(env));
        let key = self.local_key(r);
        let park = Park { protocol: &REGION_ASYNC, token: r as ParkToken, since: Instant::now() };
        // Not under `pending`'s lock: the wait table calls `left` (which
        // takes it) under its own.
        let enqueue = |validate| match watching {
            false => self.queues.enqueue(r, offset, true, validate),
            true => self.queues.enqueue_watching(r, offset, true, validate),
        };
        let ticket = TABLE.park_async(key, |_| enqueue(validate).then_some(token.0), park, owner as Arc<dyn Owner>);
        let Some(ticket) = ticket else {
            self.queues.free(r);
            return Ok(None);
        };
        let sooner = {
            let mut pending = self.pending.lock();
            pending.by_record.insert(r, Pending { ticket, deadline });
            pending.by_seq.insert(ticket.seq, r);
            deadline.is_some_and(|d| pending.listener_wakes.is_none_or(|w| d < w))
        };
        self.start_listener()?;
        // The listener sleeps until the nearest deadline it knew of: a
        // sooner one wakes it (later ones it finds when it wakes).
        if sooner {
            self.ring_myself();
        }
        // A notify that came before the entry above may have found no one
        // to deliver it (the listener looked before): deliver it here.
        if self.queues.is_notified(r) {
            self.deliver(false);
        }
        Ok(Some(ticket))
    }

    /// Takes back the async waiter `seq` (abort). True if it was still queued.
    pub(crate) fn cancel(&self, seq: u64) -> Option<u64> {
        let ticket = {
            let mut pending = self.pending.lock();
            let r = *pending.by_seq.get(&seq)?;
            if !self.queues.take(r) {
                // Notified: the listener delivers it.
                return None;
            }
            pending.by_seq.remove(&seq);
            pending.by_record.remove(&r).map(|p| p.ticket)
        }?;
        let token = TABLE.take(ticket.key, ticket.seq);
        self.queues.free(self.record_of(ticket.key));
        token
    }

    /// The deadline of one watching wait that asked for `deadline`: at most
    /// one slice on. A slice is long where this process's watcher learns
    /// of every death in the region at once (`os::watches`), so that only a
    /// failure of that watcher is left for the slice to catch; else short:
    /// nothing else tells a sleeper of another process's death.
    pub(crate) fn slice_end(&self, deadline: Option<Instant>) -> Option<Instant> {
        let slice = if os::watches(self) { WATCHED_SLICE } else { crate::SLICE };
        let end = Instant::now() + slice;
        Some(deadline.map_or(end, |d| d.min(end)))
    }

    fn ring_myself(&self) {
        let bell = self.queues.doorbell();
        bell.fetch_add(1, SeqCst);
        self.queues.os().wake(bell, u32::MAX);
    }

    fn start_listener(self: &Arc<Region>) -> Result<()> {
        let mut started = self.listener.lock();
        if *started {
            return Ok(());
        }
        let region = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("shared-futex region".to_owned())
            .spawn(move || listen(region))
            .map_err(|e| Error::new(Status::GenericFailure, format!("cannot start the region's thread: {e}")))?;
        *started = true;
        Ok(())
    }
}

/// The listener of one region in this process (see the module docs).
fn listen(region: std::sync::Weak<Region>) {
    loop {
        let Some(region) = region.upgrade() else { return };
        if region.closing.load(Acquire) {
            return;
        }
        let bell = region.queues.doorbell();
        let seen = bell.load(SeqCst);
        // Until the time `deliver` recorded as the listener's next wake-up.
        let wakes = region.deliver(true);
        os::sleep_on_doorbell(region, seen, wakes.saturating_duration_since(Instant::now()));
    }
}

impl Region {
    /// `notify` on `offset`. A waiter of this process that it wakes gets its
    /// outcome at once, as in the process's own table, not when the
    /// listener next runs: the notifier's thread may be about to let its
    /// event loop end.
    ///
    /// The listener delivers nothing meanwhile, so that every waiter of this
    /// process that this call wakes is delivered by this thread: one of its
    /// own then counts as decided on its thread, which keeps its event loop
    /// alive until the promise settles (src/resolver.rs, `complete`).
    pub(crate) fn notify(&self, offset: u32, count: usize) -> usize {
        let delivering = self.delivering.lock();
        let bell = self.queues.doorbell().load(SeqCst);
        let woken = self.queues.notify(offset, count);
        if woken > 0 && self.queues.doorbell().load(SeqCst) != bell {
            self.deliver_locked(false, delivering);
        }
        woken
    }

    /// Hands every notified async waiter of this process its outcome and,
    /// with `deadlines` (the listener's turn), times out those whose
    /// deadline passed. Returns when the listener is to wake next: the
    /// nearest deadline still pending (at least 1 ms on), else a minute on.
    fn deliver(&self, deadlines: bool) -> Instant {
        self.deliver_locked(deadlines, self.delivering.lock())
    }

    /// `deliver`, holding the `delivering` lock (one delivery at a time).
    fn deliver_locked(&self, deadlines: bool, _delivering: parking_lot::MutexGuard<'_, ()>) -> Instant {
        let now = Instant::now();
        let mut notified = Vec::new();
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        let wakes;
        {
            let mut pending = self.pending.lock();
            let PendingSet { by_record, by_seq, listener_wakes } = &mut *pending;
            by_record.retain(|&r, p| {
                if self.queues.take_notified(r) {
                    notified.push((r, p.ticket));
                } else if deadlines && p.deadline.is_some_and(|d| d <= now) && self.queues.take(r) {
                    expired.push((r, p.ticket));
                } else {
                    if let Some(d) = p.deadline {
                        next = Some(next.map_or(d, |n| n.min(d)));
                    }
                    return true;
                }
                by_seq.remove(&p.ticket.seq);
                false
            });
            let now = Instant::now();
            wakes = next.map_or(now + Duration::from_secs(60), |d| d.max(now + Duration::from_millis(1)));
            if deadlines {
                // The listener's turn: it sleeps until then (`listen`),
                // recorded under this lock, so that a waiter queued after it
                // with a sooner deadline rings it (`wait_async`).
                *listener_wakes = Some(wakes);
            }
        }
        for (r, ticket) in notified {
            // The unpark token carries the offset (its kind bits 0: 'ok'),
            // so that a wake-up lost with a thread that ends before its
            // JavaScript runs is passed on there (`RegionAsync::lost`) after
            // the record is free. A waiter whose thread is gone already
            // passes it on here.
            let offset = self.queues.key_of(r);
            let token: futex_core::UnparkToken = offset << 2;
            let (_, woken) = TABLE.unpark_one_if(ticket.key, |found| found.unparked.map(|_| token));
            if !woken {
                self.queues.notify(offset, 1);
            }
            self.queues.free(r);
        }
        for (r, ticket) in expired {
            TABLE.timeout(ticket);
            self.queues.free(r);
        }
        wakes
    }
}

fn full() -> Error {
    coded(
        "ERR_REGION_FULL",
        "every waiter record of the region is in use; open it with a larger `waiters` option".to_owned(),
    )
}

/// The protocol of a region async waiter's local stand-in: when it leaves
/// the wait table without its outcome (its thread ended), its record leaves
/// the region's queue too, and a wake-up it had been given goes on.
struct RegionAsync;
static REGION_ASYNC: RegionAsync = RegionAsync;

impl Protocol for RegionAsync {
    fn left(&self, key: Key, _token: ParkToken, _was_last: bool) {
        let Some(region) = find_control(key) else { return };
        let r = region.record_of(key);
        let mut pending = region.pending.lock();
        let Some(p) = pending.by_record.remove(&r) else { return };
        pending.by_seq.remove(&p.ticket.seq);
        drop(pending);
        if region.queues.take(r) {
            region.queues.free(r);
        } else if region.queues.take_notified(r) {
            region.queues.notify(region.queues.key_of(r), 1);
            region.queues.free(r);
        }
    }

    fn lost(&self, _table: &WaitTable, key: Key, token: UnparkToken) {
        // Delivered to a thread that ended before its JavaScript ran: the
        // token carries the offset its record waited on (`deliver`).
        if let Some(region) = find_control(key) {
            region.queues.notify(token >> 2, 1);
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        sys_unmap(self);
    }
}

// ---------------------------------------------------------------------------
// The operating system's part: one module per platform, with the same items
// (`Sys`, futex-core's `Os`: wait, wake and a slot's liveness; `open`,
// `unmap`, `unlink`, `sleep_on_doorbell`, `SUPPORTED`), chosen here once.
// What they share (the header's checks, the registry) is below.

#[cfg(any(target_os = "linux", target_os = "macos"))]
#[path = "region/posix.rs"]
mod os;
#[cfg(windows)]
#[path = "region/windows.rs"]
mod os;
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
#[path = "region/unsupported.rs"]
mod os;

pub(crate) use os::Sys;

fn sys_unmap(region: &Region) {
    os::unmap(region)
}

/// Bytes of the header read from a file before it is mapped.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
const HEADER_BYTES: usize = std::mem::size_of::<shared::Header>();

/// The end of each platform's `open`, once the region's file is open as
/// `handle`: one process at a time (the file's init lock) lays out or checks
/// the header and maps it. `map` also says whether this process had the
/// region mapped already (then the handle is not needed); the handle is
/// closed unless the new mapping keeps it.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn map_under_init_lock<H: Copy>(
    handle: H,
    path: &str,
    lock: impl FnOnce(H) -> std::io::Result<()>,
    unlock: impl FnOnce(H),
    close: impl Fn(H),
    map: impl FnOnce(H) -> Result<(Arc<Region>, bool)>,
) -> Result<Arc<Region>> {
    if let Err(e) = lock(handle) {
        close(handle);
        return Err(coded("ERR_REGION_OPEN", format!("cannot lock {path}: {e}")));
    }
    let result = map(handle);
    unlock(handle);
    match result {
        Ok((region, mapped_before)) => {
            if mapped_before {
                close(handle);
            }
            Ok(region)
        }
        Err(e) => {
            close(handle);
            Err(e)
        }
    }
}

/// The region of this process already mapped from the file `id`, if any,
/// checked against what the caller asks for; it then counts one more user.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn mapped_already(id: (u64, u64), path: &str, user_bytes: u32, layout: Layout) -> Result<Option<Arc<Region>>> {
    let regions = REGIONS.read();
    let Some(existing) = regions.iter().find(|r| r.id == id) else { return Ok(None) };
    let have = (existing.len - existing.control) as u32;
    if user_bytes != 0 && user_bytes != have {
        return Err(mismatch(path, user_bytes, have));
    }
    let h = existing.queues.header();
    let (slots, records) = (h.slots.load(Relaxed), h.records.load(Relaxed));
    if (layout.slots != 0 && layout.slots != slots) || (layout.records != 0 && layout.records != records) {
        return Err(coded(
            "ERR_REGION_MISMATCH",
            format!("{path} has {slots} process slots and {records} waiter records"),
        ));
    }
    // Mapped already: this process shares that mapping (and slot).
    // The new buffer counts as a user before the registry's lock is
    // let go, so that the last old buffer's finalizer, which removes
    // the region under the write lock once it has no user, either
    // sees this one or has removed the region before this lookup.
    existing.users.fetch_add(1, AcqRel);
    Ok(Some(existing.clone()))
}

/// The layout of the file at `path` of `size` bytes, under its init lock:
/// the header's (checked against what is asked), or, for a file to lay
/// out (empty, or left half-made by a creator that died), `layout` with
/// the defaults where it has 0. Also returns whether it is to be laid out.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn settle_layout(
    path: &str,
    size: usize,
    header: impl FnOnce() -> Option<[u8; HEADER_BYTES]>,
    user_bytes: u32,
    mut layout: Layout,
    build: &str,
) -> Result<(Layout, bool)> {
    let mut fresh = size == 0;
    if !fresh {
        // Created by another process: check its header before anything.
        let header = parse_header(header());
        if header.0 != shared::MAGIC {
            // Its creator died before it was ready (it held the init
            // lock, which we hold now): lay it out again.
            fresh = true;
        } else {
            check_header(path, &header, user_bytes, layout, build)?;
            layout = Layout { slots: header.2, buckets: header.3, records: header.4, threads: header.7 };
            if !layout.is_valid() {
                return Err(coded("ERR_REGION_MISMATCH", format!("{path} has an invalid header")));
            }
            let want = layout.bytes() + header.5 as usize;
            if size != want {
                return Err(coded(
                    "ERR_REGION_MISMATCH",
                    format!(
                        "{path} is {size} bytes long where its header says {want}: it was changed by something else"
                    ),
                ));
            }
        }
    }
    if fresh {
        let defaults = Layout::default();
        layout.slots = if layout.slots == 0 { defaults.slots } else { layout.slots };
        layout.records = if layout.records == 0 { defaults.records } else { layout.records };
        if user_bytes == 0 {
            return Err(coded(
                "ERR_REGION_NOT_FOUND",
                format!("{path} is not a region yet: give `bytes` to create it"),
            ));
        }
    }
    Ok((layout, fresh))
}

/// magic, layout, slots, buckets, records, user bytes, build, threads.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
type RawHeader = (u32, u32, u32, u32, u32, u32, Vec<u8>, u32);

#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn parse_header(buf: Option<[u8; HEADER_BYTES]>) -> RawHeader {
    let Some(buf) = buf else { return (0, 0, 0, 0, 0, 0, Vec::new(), 0) };
    let word = |i: usize| u32::from_le_bytes(buf[i * 4..i * 4 + 4].try_into().unwrap());
    let mut build: Vec<u8> = buf[64..128].to_vec();
    while build.last() == Some(&0) {
        build.pop();
    }
    (word(0), word(1), word(2), word(3), word(4), word(5), build, word(7))
}

#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn check_header(path: &str, h: &RawHeader, user_bytes: u32, layout: Layout, build: &str) -> Result<()> {
    if h.1 != shared::LAYOUT || h.6 != build.as_bytes() {
        return Err(coded(
            "ERR_REGION_VERSION",
            format!(
                "{path} was made by another version of shared-futex ({}, layout {}); this is {build}, layout {}",
                String::from_utf8_lossy(&h.6),
                h.1,
                shared::LAYOUT
            ),
        ));
    }
    let given = |asked: u32, have: u32| asked == 0 || asked == have;
    if !given(layout.slots, h.2) || !given(layout.records, h.4) {
        return Err(coded(
            "ERR_REGION_MISMATCH",
            format!(
                "{path} has {} process slots and {} waiter records; opened with {} and {}",
                h.2, h.4, layout.slots, layout.records
            ),
        ));
    }
    if user_bytes != 0 && user_bytes != h.5 {
        return Err(mismatch(path, user_bytes, h.5));
    }
    Ok(())
}

#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn mismatch(path: &str, asked: u32, have: u32) -> Error {
    coded("ERR_REGION_MISMATCH", format!("{path} has {have} bytes; opened with `bytes: {asked}`"))
}

#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn slots_full(path: &str, layout: Layout) -> Error {
    coded("ERR_REGION_FULL", format!("every process slot of {path} is taken by a live process ({})", layout.slots))
}

/// A mapping just made (its slot claimed), entered in the registry.
/// `users`: the buffer about to be made over it.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos", windows)), allow(dead_code))]
fn register(
    queues: Queues<Sys>,
    base: *mut u8,
    size: usize,
    layout: Layout,
    id: (u64, u64),
    path: &str,
) -> Arc<Region> {
    let region = Arc::new(Region {
        queues,
        base,
        len: size,
        control: layout.bytes(),
        id,
        path: path.to_owned(),
        users: AtomicUsize::new(1),
        closing: AtomicBool::new(false),
        pending: Mutex::new(PendingSet::default()),
        listener: Mutex::new(false),
        delivering: Mutex::new(()),
        watched: AtomicBool::new(false),
    });
    let mut regions = REGIONS.write();
    regions.push(region.clone());
    MAPPED.store(regions.len(), Release);
    region
}

// ---------------------------------------------------------------------------
// JavaScript's calls.

type CreateExternalSab = unsafe extern "C" fn(
    sys::napi_env,
    *mut c_void,
    usize,
    Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    *mut c_void,
    *mut sys::napi_value,
) -> sys::napi_status;

/// Node's `node_api_create_external_sharedarraybuffer` (24.16+, 26.1+;
/// experimental, so not bound by napi-rs): found in the running executable.
static CREATE_EXTERNAL_SAB: LazyLock<Option<CreateExternalSab>> = LazyLock::new(|| {
    if std::env::var_os("SHARED_FUTEX_NO_EXTERNAL_SAB").is_some() {
        return None;
    }
    #[cfg(unix)]
    // SAFETY: the symbol, if Node exports it, has the type declared above
    // (js_native_api.h).
    return unsafe { exported(c"node_api_create_external_sharedarraybuffer") };
    #[cfg(not(unix))]
    {
        #[cfg(windows)]
        let f = os::export_of_executable(c"node_api_create_external_sharedarraybuffer");
        #[cfg(not(windows))]
        let f: *mut c_void = ptr::null_mut();
        // SAFETY: as above.
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, CreateExternalSab>(f) })
    }
});

/// The symbol `name` of the running executable (or a library it loaded), as
/// a function of type `F`: for the calls of Node, libuv and the system that
/// are looked up at run time (Node's experimental N-API calls, bells,
/// macOS's address waits).
///
/// # Safety
/// `F` is a function pointer type that matches the symbol's declaration.
#[cfg(unix)]
pub(crate) unsafe fn exported<F: Copy>(name: &std::ffi::CStr) -> Option<F> {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: a NUL-terminated name.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    // SAFETY: a non-null function address, of type `F` (the contract).
    (!f.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&f) })
}

/// Finalizer of a buffer over a region: gives its reference back.
unsafe extern "C" fn released(_data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the `Arc` leaked for this buffer.
    let region = unsafe { Arc::from_raw(hint as *const Region) };
    if region.users.fetch_sub(1, AcqRel) == 1 {
        let mut regions = REGIONS.write();
        // Opened again meanwhile (a new buffer)? Then it stays.
        if region.users.load(Acquire) == 0 {
            regions.retain(|r| !Arc::ptr_eq(r, &region));
            MAPPED.store(regions.len(), Release);
            region.closing.store(true, Release);
            region.ring_myself();
        }
    }
}

unsafe extern "C" fn released_env(_env: sys::napi_env, data: *mut c_void, hint: *mut c_void) {
    // SAFETY: as `released`.
    unsafe { released(data, hint) }
}

/// `regionOpen(path, bytes, create, mode, build, slots, waiters)`: maps the
/// region at `path` (see lib/region.js). Returns `[buffer, slot]`: a
/// `SharedArrayBuffer` (where Node can make one over foreign memory) or an
/// `ArrayBuffer` over the region's user bytes, and this process's slot.
#[napi(js_name = "regionOpen")]
#[allow(clippy::too_many_arguments)]
pub fn region_open<'env>(
    env: &'env Env,
    path: String,
    bytes: u32,
    create: bool,
    mode: u32,
    build: String,
    slots: u32,
    waiters: u32,
) -> Result<(Unknown<'env>, u32)> {
    // 0: not given (see `map`).
    let layout = Layout { slots, buckets: 256, records: waiters, threads: Layout::default().threads };
    let check = Layout { slots: slots.max(1), records: waiters.max(1), ..layout };
    if !check.is_valid() {
        return Err(Error::new(Status::InvalidArg, "invalid region layout".to_owned()));
    }
    let region = os::open(&path, bytes, create, mode, layout, &build)?;
    let raw_env = env.raw();
    let data = unsafe { region.base.add(region.control) } as *mut c_void;
    let len = region.len - region.control;
    // (`users` already counts the buffer made here: `os::open`.)
    let hint = Arc::into_raw(region.clone()) as *mut c_void;
    let mut value = ptr::null_mut();
    let (status, shared) = match *CREATE_EXTERNAL_SAB {
        // SAFETY: live env; the memory stays mapped until the finalizer
        // gives the reference in `hint` back.
        Some(create_sab) => (unsafe { create_sab(raw_env, data, len, Some(released), hint, &mut value) }, true),
        // SAFETY: as above.
        None => (
            unsafe { sys::napi_create_external_arraybuffer(raw_env, data, len, Some(released_env), hint, &mut value) },
            false,
        ),
    };
    if status != sys::Status::napi_ok {
        // SAFETY: the reference leaked above, never handed to a buffer.
        unsafe { released(data, hint) };
        return Err(coded(
            "ERR_REGION_UNSUPPORTED",
            format!("this runtime cannot make a buffer over shared memory (N-API status {status})"),
        ));
    }
    let _ = shared;
    // SAFETY: a value created on this env during this call.
    Ok((unsafe { Unknown::from_raw_unchecked(raw_env, value) }, region.queues.my_slot()))
}

thread_local! {
    /// The owner ids this thread holds in regions (`regionOwner`), given
    /// back when the thread ends.
    static OWNERS: std::cell::RefCell<Vec<(std::sync::Weak<Region>, u32)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    static HOOKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// This thread's env is torn down: its owner ids die with it, so that a
/// lock it held is taken over (with `ownerDied`) by the next locker.
unsafe extern "C" fn thread_owners_end(_arg: *mut c_void) {
    let owners = OWNERS.with(|o| std::mem::take(&mut *o.borrow_mut()));
    for (region, owner) in owners {
        if let Some(region) = region.upgrade() {
            region.queues.release_thread(owner);
        }
    }
}

/// `regionOwner(ta)`: this thread's owner id in the region of `ta`'s
/// memory (claimed on first use, given back when the thread ends), for the
/// words of the region's locks. 0 if `ta` is not region memory.
#[napi(js_name = "regionOwner")]
pub fn region_owner(env: Env, ta: Unknown) -> Result<u32> {
    // SAFETY: handles of this call; only the address is used.
    let base = unsafe { crate::cell::Cell::base(env.raw(), ta.raw())? };
    let Some((region, _)) = find(base) else { return Ok(0) };
    let known = OWNERS
        .with(|o| o.borrow().iter().find(|(r, _)| std::ptr::eq(r.as_ptr(), Arc::as_ptr(&region))).map(|&(_, id)| id));
    if let Some(id) = known {
        return Ok(id);
    }
    if !HOOKED.get() {
        // SAFETY: the hook ignores its argument.
        let status = unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(thread_owners_end), ptr::null_mut()) };
        crate::check(status, "napi_add_env_cleanup_hook")?;
        HOOKED.set(true);
    }
    let id = region.queues.claim_thread().ok_or_else(|| {
        coded("ERR_REGION_FULL", "every thread slot of the region is held by a live process's thread".to_owned())
    })?;
    OWNERS.with(|o| o.borrow_mut().push((Arc::downgrade(&region), id)));
    Ok(id)
}

/// `regionOwnerAlive(ta, owner)`: whether the thread with that owner id (in
/// the region of `ta`'s memory) lives: its process lives and it has not ended.
#[napi(js_name = "regionOwnerAlive")]
pub fn region_owner_alive(env: Env, ta: Unknown, owner: u32) -> Result<bool> {
    // SAFETY: handles of this call; only the address is used.
    let base = unsafe { crate::cell::Cell::base(env.raw(), ta.raw())? };
    Ok(find(base).is_some_and(|(region, _)| region.queues.owner_alive(owner)))
}

/// `regionPath(ta)`: the path of the region file of `ta`'s memory, as it
/// was opened (for the files kept beside it); `null` if `ta` is not region
/// memory.
#[napi(js_name = "regionPath")]
pub fn region_path(env: Env, ta: Unknown) -> Result<Option<String>> {
    // SAFETY: handles of this call; only the address is used.
    let base = unsafe { crate::cell::Cell::base(env.raw(), ta.raw())? };
    Ok(find(base).map(|(region, _)| region.path.clone()))
}

/// `regionInode(ta)`: the inode of the region file mapped under `ta`'s
/// memory (its low 31 bits, never 0), to tell it from a file made later at
/// the same path; 0 if `ta` is not region memory.
#[napi(js_name = "regionInode")]
pub fn region_inode(env: Env, ta: Unknown) -> Result<u32> {
    // SAFETY: handles of this call; only the address is used.
    let base = unsafe { crate::cell::Cell::base(env.raw(), ta.raw())? };
    Ok(find(base).map_or(0, |(region, _)| ((region.id.1 & 0x7fff_ffff) as u32).max(1)))
}

/// `regionUnlink(path)`: removes the region's name; mappings stay valid.
#[napi(js_name = "regionUnlink")]
pub fn region_unlink(path: String) -> Result<bool> {
    os::unlink(&path)
}

/// Whether shared regions work on this platform.
#[napi(js_name = "regionSupported")]
pub fn region_supported() -> bool {
    os::SUPPORTED
}

/// Whether a region's buffer is a `SharedArrayBuffer` here (else an `ArrayBuffer`).
#[napi(js_name = "regionMakesShared")]
pub fn region_makes_shared() -> bool {
    CREATE_EXTERNAL_SAB.is_some()
}

/// What a region holds (diagnostics and tests): its slot here, records in
/// use by every process, this process's pending async waiters; `null` if
/// `ta` is not over a region.
#[napi(object)]
pub struct RegionInfo {
    pub slot: u32,
    pub records_in_use: u32,
    pub pending_async: u32,
    pub queued: u32,
    /// This thread's bell (0: none; src/region/bell.rs).
    pub bell: u32,
    /// Times this process's bells were found rung.
    pub bell_rings: f64,
    /// The region's count of ends seen (threads and processes gone).
    pub ends: u32,
    /// Whether this process's watcher of deaths follows every other process
    /// of the region (src/region/watch.rs): its watching waits sleep long.
    pub watched: bool,
}

#[napi(js_name = "regionInfo")]
pub fn region_info(env: Env, ta: Unknown, index: f64) -> Result<Option<RegionInfo>> {
    // SAFETY: handles of this call; only the address is used afterwards.
    let cell = unsafe { crate::cell::Cell::resolve(env.raw(), ta.raw(), index)? };
    let (bell, rings) = os::bell_info();
    Ok(find(cell.key()).map(|(r, offset)| RegionInfo {
        slot: r.queues.my_slot(),
        records_in_use: r.queues.records_in_use() as u32,
        pending_async: r.pending.lock().by_record.len() as u32,
        queued: r.queues.len(offset) as u32,
        bell,
        bell_rings: rings as f64,
        ends: r.queues.ends(),
        watched: os::watches(&r),
    }))
}

/// `regionEnds(ta)`: the count of ends the region of `ta`'s memory has
/// seen (threads and processes gone: futex-core's `Queues::end_seen`), for
/// a watching wait (`waitWatching`) over it; -1 if `ta` is not region
/// memory. Read it before looking at the state to wait on.
#[napi(js_name = "regionEnds")]
pub fn region_ends(env: Env, ta: Unknown) -> Result<f64> {
    // SAFETY: handles of this call; only the address is used.
    let base = unsafe { crate::cell::Cell::base(env.raw(), ta.raw())? };
    Ok(find(base).map_or(-1.0, |(region, _)| region.queues.ends() as f64))
}

/// Whether `ta`'s memory is a region's.
#[napi(js_name = "inRegion")]
pub fn in_region(env: Env, ta: Unknown) -> Result<bool> {
    // SAFETY: handles of this call; only the address is used.
    let base = unsafe { crate::cell::Cell::base(env.raw(), ta.raw())? };
    Ok(find(base).is_some())
}

pub(crate) fn full_error() -> Error {
    full()
}
