//! Bells (Linux): a notify in one process reaches an async waiter's
//! JavaScript thread in another directly, in one hand-off, instead of
//! through the waiter's process's listener thread and then the thread's
//! threadsafe function (two hand-offs, each a scheduling delay when every
//! core is busy).
//!
//! A JavaScript thread that queues an async waiter on a region gets a bell:
//! a non-blocking datagram socket bound to a name in the abstract namespace,
//! `shared-futex-bell/<this process's bells, 16 hex digits>/<n>`, watched by
//! the thread's own event loop (`uv_poll`). Its records carry `n`, the
//! region's slot of the process carries the 64-bit random name of the
//! process's bells (so that two processes never share a name, whatever
//! their pid namespaces), and a notifier in another process sends one byte
//! there (futex-core's `Os::ring_bell`). When the loop sees the bell
//! readable it empties it and hands every notified async waiter of the
//! process its outcome (`Region::deliver`), on the waiter's thread.
//!
//! A send that fails (no such name: the thread has ended or never had a
//! bell; a full queue; another network namespace) rings the process's
//! doorbell instead, as before: the listener thread stays for that and for
//! deadlines. A send that succeeds reaches a socket that only its owner
//! thread reads, and that thread either looks at its records when its loop
//! polls or, ending, closes the socket first and then looks (`closed`), and
//! its waiters leave with the thread (`RegionAsync::left`).
//!
//! Where libuv's calls or N-API's async cleanup hooks cannot be found
//! (Node before 14.8, runtimes other than Node), or where
//! `SHARED_FUTEX_NO_BELLS` is set, threads have no bell.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::sync::LazyLock;

use napi::sys;

use crate::region::REGIONS;

/// The name of this process's bells: random, never 0.
pub(super) static BELLS: LazyLock<u64> = LazyLock::new(|| {
    let mut v = 0u64;
    while v == 0 {
        // The system call, not glibc's wrapper (glibc 2.25+; the binaries
        // ask for 2.17). SAFETY: writes at most 8 bytes into `v`.
        let n = unsafe { libc::syscall(libc::SYS_getrandom, &mut v as *mut u64 as *mut c_void, 8usize, 0u32) };
        if n != 8 {
            // No getrandom (very old kernels): the time and the pid.
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            v = (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 40);
        }
    }
    v
});

/// Bell numbers handed out in this process (0: none).
static NEXT: AtomicU32 = AtomicU32::new(1);
/// Times a bell of this process was found rung (diagnostics).
static RUNG: AtomicU64 = AtomicU64::new(0);

fn address(bells: u64, bell: u32) -> (libc::sockaddr_un, libc::socklen_t) {
    address_named(bells, &bell.to_string())
}

/// The abstract address `shared-futex-bell/<bells>/<what>`: a thread's bell
/// (`what` its number) or the watcher of deaths (`w`: src/region/watch.rs).
fn address_named(bells: u64, what: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: plain data.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = format!("shared-futex-bell/{bells:016x}/{what}");
    // sun_path[0] stays 0: the abstract namespace (no file).
    for (i, b) in name.bytes().enumerate() {
        a.sun_path[i + 1] = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (a, len as libc::socklen_t)
}

/// Sends one byte to bell `bell` of the process whose bells are `bells`.
/// True only if it is queued there.
pub(super) fn ring(bells: u64, bell: u32) -> bool {
    send_to(address(bells, bell))
}

/// Sends one byte to `shared-futex-bell/<bells>/<what>`. True if queued.
pub(super) fn ring_named(bells: u64, what: &str) -> bool {
    send_to(address_named(bells, what))
}

/// A non-blocking datagram socket bound to this process's
/// `shared-futex-bell/<bells>/<what>`, or -1.
pub(super) fn bind_named(what: &str) -> i32 {
    // SAFETY: a plain socket call.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return -1;
    }
    let (a, len) = address_named(*BELLS, what);
    // SAFETY: our socket and a valid address.
    if unsafe { libc::bind(fd, &a as *const libc::sockaddr_un as *const libc::sockaddr, len) } != 0 {
        // SAFETY: our socket, closed once.
        unsafe { libc::close(fd) };
        return -1;
    }
    fd
}

fn send_to((a, len): (libc::sockaddr_un, libc::socklen_t)) -> bool {
    static SENDER: LazyLock<c_int> = LazyLock::new(|| {
        // SAFETY: a plain socket call.
        unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) }
    });
    let fd = *SENDER;
    if fd < 0 {
        return false;
    }
    // SAFETY: our socket, a 1-byte buffer, a valid address.
    let n = unsafe {
        libc::sendto(
            fd,
            [1u8].as_ptr() as *const c_void,
            1,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            &a as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        )
    };
    n == 1
}

// libuv and N-API calls found in the running executable (see the module docs).
type UvPollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
type UvCloseCb = unsafe extern "C" fn(*mut c_void);
/// N-API's `napi_async_cleanup_hook_handle` (opaque).
type HookHandle = *mut c_void;
type AsyncHook = unsafe extern "C" fn(HookHandle, *mut c_void);

struct Calls {
    handle_size: unsafe extern "C" fn(c_int) -> usize,
    poll_init: unsafe extern "C" fn(*mut sys::uv_loop_s, *mut c_void, c_int) -> c_int,
    poll_start: unsafe extern "C" fn(*mut c_void, c_int, UvPollCb) -> c_int,
    close: unsafe extern "C" fn(*mut c_void, UvCloseCb),
    unref: unsafe extern "C" fn(*mut c_void),
    add_hook: unsafe extern "C" fn(sys::napi_env, AsyncHook, *mut c_void, *mut HookHandle) -> sys::napi_status,
    remove_hook: unsafe extern "C" fn(HookHandle) -> sys::napi_status,
}

const UV_POLL: c_int = 8;
const UV_READABLE: c_int = 1;

static CALLS: LazyLock<Option<Calls>> = LazyLock::new(|| {
    if std::env::var_os("SHARED_FUTEX_NO_BELLS").is_some() {
        return None;
    }
    use crate::region::exported as find;
    // SAFETY: each type in `Calls` is the symbol's declaration (uv.h,
    // node_api.h).
    unsafe {
        Some(Calls {
            handle_size: find(c"uv_handle_size")?,
            poll_init: find(c"uv_poll_init")?,
            poll_start: find(c"uv_poll_start")?,
            close: find(c"uv_close")?,
            unref: find(c"uv_unref")?,
            add_hook: find(c"napi_add_async_cleanup_hook")?,
            remove_hook: find(c"napi_remove_async_cleanup_hook")?,
        })
    }
});

/// A thread's bell: its socket, its `uv_poll_t` (memory of libuv's size,
/// 8-aligned) and its async cleanup hook.
struct Bell {
    fd: c_int,
    handle: Vec<u64>,
    hook: HookHandle,
    /// Its handle is being closed (touched on the loop's thread only).
    closing: bool,
}

const NONE_YET: u32 = 0;
/// This thread has no bell and gets none (no support, or it is ending).
const NEVER: u32 = u32::MAX;

thread_local! {
    /// This thread's bell number, or `NONE_YET` / `NEVER`.
    static MINE: Cell<u32> = const { Cell::new(NONE_YET) };
}

/// This thread's bell (made on first use), 0 if it has none.
pub(super) fn of_thread(env: sys::napi_env) -> u32 {
    match MINE.get() {
        NONE_YET => {
            // SAFETY: the running call's env, on its thread.
            let bell = unsafe { make(env) }.unwrap_or(NEVER);
            MINE.set(bell);
            if bell == NEVER {
                0
            } else {
                bell
            }
        }
        NEVER => 0,
        bell => bell,
    }
}

/// This thread's bell (0: none yet, or none) and how many times this
/// process's bells were found rung (diagnostics).
pub(super) fn info() -> (u32, u64) {
    let mine = MINE.get();
    (if mine == NEVER { 0 } else { mine }, RUNG.load(Relaxed))
}

/// Whether the runtime is Node itself (Bun and Deno export some of libuv's
/// names without its loop).
///
/// # Safety
/// The running call's env.
unsafe fn is_node(env: sys::napi_env) -> bool {
    // SAFETY: the function's contract; out-pointers are locals.
    unsafe {
        let mut global = ptr::null_mut();
        let mut process = ptr::null_mut();
        let mut versions = ptr::null_mut();
        if sys::napi_get_global(env, &mut global) != sys::Status::napi_ok
            || sys::napi_get_named_property(env, global, c"process".as_ptr(), &mut process) != sys::Status::napi_ok
            || sys::napi_get_named_property(env, process, c"versions".as_ptr(), &mut versions) != sys::Status::napi_ok
        {
            return false;
        }
        let mut kind = 0;
        if sys::napi_typeof(env, versions, &mut kind) != sys::Status::napi_ok || kind != sys::ValueType::napi_object {
            return false;
        }
        for name in [c"node", c"bun", c"deno"] {
            let mut has = false;
            if sys::napi_has_named_property(env, versions, name.as_ptr(), &mut has) != sys::Status::napi_ok
                || has != (name == c"node")
            {
                return false;
            }
        }
        true
    }
}

/// Makes this thread's bell. `None`: it cannot have one.
///
/// # Safety
/// The running call's env, on its thread.
unsafe fn make(env: sys::napi_env) -> Option<u32> {
    let calls = CALLS.as_ref()?;
    // SAFETY: the function's contract.
    if !unsafe { is_node(env) } {
        return None;
    }
    let mut uv_loop = ptr::null_mut();
    // SAFETY: the running call's env.
    if unsafe { sys::napi_get_uv_event_loop(env, &mut uv_loop) } != sys::Status::napi_ok || uv_loop.is_null() {
        return None;
    }
    // SAFETY: a plain socket call.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return None;
    }
    let close_fd = || {
        // SAFETY: our socket, not handed to anything.
        unsafe { libc::close(fd) };
    };
    let bell = NEXT.fetch_add(1, Relaxed);
    let (a, len) = address(*BELLS, bell);
    // SAFETY: our socket and a valid address.
    if bell == NEVER || unsafe { libc::bind(fd, &a as *const libc::sockaddr_un as *const libc::sockaddr, len) } != 0 {
        close_fd();
        return None;
    }
    // SAFETY: a libuv call with a handle type.
    let size = unsafe { (calls.handle_size)(UV_POLL) };
    let b = Box::into_raw(Box::new(Bell {
        fd,
        handle: vec![0u64; size.div_ceil(8)],
        hook: ptr::null_mut(),
        closing: false,
    }));
    // SAFETY: `b` is ours until the hook's close callback frees it; the
    // handle's memory is libuv's size; the loop is this thread's.
    unsafe {
        let handle = (*b).handle.as_mut_ptr() as *mut c_void;
        if (calls.poll_init)(uv_loop, handle, fd) != 0 {
            close_fd();
            drop(Box::from_raw(b));
            return None;
        }
        // `data`, the first member of every libuv handle.
        *(handle as *mut *mut c_void) = b as *mut c_void;
        // From here the handle belongs to the loop: it is closed (and `b`
        // freed) through `uv_close`, never dropped here.
        let started = (calls.poll_start)(handle, UV_READABLE, rung) == 0;
        // A bell never keeps the loop alive: a pending waiter does that
        // (src/resolver.rs).
        (calls.unref)(handle);
        if !started || (calls.add_hook)(env, ending, b as *mut c_void, &mut (*b).hook) != sys::Status::napi_ok {
            (*b).hook = ptr::null_mut();
            (calls.close)(handle, closed);
            return None;
        }
    }
    Some(bell)
}

/// The loop saw the bell readable: empty it, then deliver.
unsafe extern "C" fn rung(handle: *mut c_void, status: c_int, _events: c_int) {
    // SAFETY: `data` holds the bell this handle was made for.
    let b = unsafe { *(handle as *mut *mut Bell) };
    if status < 0 {
        // The loop cannot watch it any more: no more bell for this thread
        // (`closed` delivers what rang meanwhile).
        MINE.set(NEVER);
        // SAFETY: a live handle (`close` closes it once).
        unsafe { close(b) };
        return;
    }
    RUNG.fetch_add(1, Relaxed);
    let mut buf = [0u8; 64];
    // SAFETY: our socket, a local buffer.
    while unsafe { libc::recv((*b).fd, buf.as_mut_ptr() as *mut c_void, buf.len(), libc::MSG_DONTWAIT) } >= 0 {}
    deliver_all();
}

/// Hands every notified async waiter of this process its outcome.
fn deliver_all() {
    let regions: Vec<_> = REGIONS.read().clone();
    for region in regions {
        region.deliver(false);
    }
}

/// The env is being torn down: close the bell.
unsafe extern "C" fn ending(_hook: HookHandle, arg: *mut c_void) {
    MINE.set(NEVER);
    // SAFETY: `arg` is the bell, live until its close callback has run,
    // which removes this hook.
    unsafe { close(arg as *mut Bell) };
}

/// Closes bell `b`'s handle, once (an env torn down right after the loop
/// failed to watch the bell finds it closing); `closed` finishes.
///
/// # Safety
/// `b` is live: its handle's close callback has not run.
unsafe fn close(b: *mut Bell) {
    let Some(calls) = CALLS.as_ref() else { return };
    // SAFETY: the function's contract.
    unsafe {
        if (*b).closing {
            return;
        }
        (*b).closing = true;
        (calls.close)((*b).handle.as_mut_ptr() as *mut c_void, closed);
    }
}

/// The bell's handle is closed: close its socket (later rings fail and go to
/// the doorbell), then deliver what rang before, free the bell and let the
/// env's teardown go on.
unsafe extern "C" fn closed(handle: *mut c_void) {
    // SAFETY: `data` holds the bell, ours alone now.
    let b = unsafe { Box::from_raw(*(handle as *mut *mut Bell)) };
    // SAFETY: our socket, closed once.
    unsafe { libc::close(b.fd) };
    deliver_all();
    let hook = b.hook;
    drop(b);
    if let (false, Some(calls)) = (hook.is_null(), CALLS.as_ref()) {
        // SAFETY: the hook registered for this bell, removed once.
        unsafe { (calls.remove_hook)(hook) };
    }
}
