//! Shared regions on Linux and macOS: a file mapped `MAP_SHARED` (Linux:
//! in /dev/shm by default; macOS: in /tmp); record locks for the slots'
//! liveness; and the kernel's address waits on its words: Linux's shared
//! futexes (`FUTEX_WAIT` without the private flag), macOS's
//! `os_sync_wait_on_address` with its shared flag (14.4+), or else
//! `__ulock_wait`'s shared compare-and-wait (10.12+).
//!
//! Record locks differ: Linux's open-file-description locks belong to the
//! descriptor; macOS has only POSIX's per-process locks, which the process
//! loses, all of them, as soon as it closes *any* descriptor of the file.
//! So on macOS a file this process has mapped is never opened again, and a
//! descriptor of it is closed only when no mapping of the file is left
//! (`OPENING`, `DEFERRED`, `close_unmapped`, `unmap`).

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use futex_core::shared::{self, Layout, Os, Queues};
use napi::Result;

use super::{coded, map_under_init_lock, mapped_already, register, settle_layout, slots_full, Region, HEADER_BYTES};

#[cfg(target_os = "linux")]
#[path = "bell.rs"]
mod bell;
#[path = "watch.rs"]
mod watch;

pub(crate) struct Sys {
    fd: i32,
}

/// Byte offsets of the record locks, far past any file's end.
const INIT_LOCK: i64 = 1 << 40;
const SLOT_LOCK: i64 = (1 << 40) + 64;

fn flock(kind: i64, at: i64) -> libc::flock {
    // SAFETY: plain data.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as _;
    l.l_whence = libc::SEEK_SET as _;
    l.l_start = at as _;
    l.l_len = 1;
    l
}

/// The record-lock commands: set, set and wait, ask (see the module docs).
#[cfg(target_os = "linux")]
const LOCK_CMDS: (i32, i32, i32) = (libc::F_OFD_SETLK, libc::F_OFD_SETLKW, libc::F_OFD_GETLK);
#[cfg(target_os = "macos")]
const LOCK_CMDS: (i32, i32, i32) = (libc::F_SETLK, libc::F_SETLKW, libc::F_GETLK);

pub(super) fn lock(fd: i32, at: i64, wait: bool) -> std::io::Result<bool> {
    let mut l = flock(libc::F_WRLCK as i64, at);
    let cmd = if wait { LOCK_CMDS.1 } else { LOCK_CMDS.0 };
    loop {
        // SAFETY: valid descriptor and flock.
        if unsafe { libc::fcntl(fd, cmd, &mut l) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) => return Ok(false),
            _ => return Err(e),
        }
    }
}

pub(super) fn unlock(fd: i32, at: i64) {
    let mut l = flock(libc::F_UNLCK as i64, at);
    // SAFETY: valid descriptor and flock.
    unsafe { libc::fcntl(fd, LOCK_CMDS.0, &mut l) };
}

impl Os for Sys {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        kernel::wait(word, expected, timeout)
    }

    fn wake(&self, word: &AtomicU32, count: u32) {
        kernel::wake(word, count)
    }

    fn slot_alive(&self, slot: u32) -> bool {
        let mut l = flock(libc::F_WRLCK as i64, SLOT_LOCK + slot as i64);
        // SAFETY: valid descriptor and flock.
        let r = unsafe { libc::fcntl(self.fd, LOCK_CMDS.2, &mut l) };
        // Unknown (an error): alive, so that nothing of a live process is taken.
        r != 0 || l.l_type != libc::F_UNLCK as _
    }

    #[cfg(target_os = "linux")]
    fn ring_bell(&self, bells: u64, bell: u32) -> bool {
        bell::ring(bells, bell)
    }
}

/// This thread's bell (0: none) and the times this process's bells rang.
pub(super) fn bell_info() -> (u32, u64) {
    #[cfg(target_os = "linux")]
    return bell::info();
    #[cfg(not(target_os = "linux"))]
    (0, 0)
}

/// This JavaScript thread's bell for its async waiters (0: none), see
/// src/region/bell.rs (Linux; elsewhere the doorbell serves).
pub(super) fn thread_bell(env: napi::sys::napi_env) -> u32 {
    #[cfg(target_os = "linux")]
    return bell::of_thread(env);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = env;
        0
    }
}

/// Sleeping on a word and waking its sleepers, across processes: Linux.
#[cfg(target_os = "linux")]
mod kernel {
    use std::ptr;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    pub(super) fn available() -> bool {
        true
    }

    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let ts = timeout
            .map(|d| libc::timespec { tv_sec: d.as_secs().min(i32::MAX as u64) as _, tv_nsec: d.subsec_nanos() as _ });
        let tsp = ts.as_ref().map_or(ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `word` is a live 4-aligned word of the shared mapping;
        // FUTEX_WAIT without the private flag keys on the mapping, so
        // sleepers of every process that maps it meet.
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, tsp, 0usize, 0u32) };
    }

    pub(super) fn wake(word: &AtomicU32, count: u32) {
        // SAFETY: as in `wait`; waking needs only the address.
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, count.min(i32::MAX as u32), 0usize) };
    }
}

/// Sleeping on a word and waking its sleepers, across processes: macOS.
/// `os_sync_wait_on_address` (14.4+) where the system has it, else the
/// `__ulock` calls it is made of (10.12+, what libc++'s `atomic::wait`
/// uses), both found at run time; with neither, regions are refused.
#[cfg(target_os = "macos")]
mod kernel {
    use std::ffi::{c_int, c_void};
    use std::sync::atomic::AtomicU32;
    use std::sync::LazyLock;
    use std::time::Duration;

    type OsWait = unsafe extern "C" fn(*mut c_void, u64, usize, u32) -> c_int;
    type OsWaitTimeout = unsafe extern "C" fn(*mut c_void, u64, usize, u32, u32, u64) -> c_int;
    type OsWake = unsafe extern "C" fn(*mut c_void, usize, u32) -> c_int;
    type UlockWait = unsafe extern "C" fn(u32, *mut c_void, u64, u32) -> c_int;
    type UlockWake = unsafe extern "C" fn(u32, *mut c_void, u64) -> c_int;

    /// os_sync_wait_on_address.h: OS_SYNC_WAIT_ON_ADDRESS_SHARED and
    /// OS_SYNC_WAKE_BY_ADDRESS_SHARED; os/clock.h: OS_CLOCK_MACH_ABSOLUTE_TIME.
    const OS_SHARED: u32 = 1;
    const OS_CLOCK_MACH_ABSOLUTE_TIME: u32 = 32;
    /// xnu's sys/ulock.h: UL_COMPARE_AND_WAIT_SHARED, ULF_WAKE_ALL.
    const UL_COMPARE_AND_WAIT_SHARED: u32 = 3;
    const ULF_WAKE_ALL: u32 = 0x100;

    enum Calls {
        OsSync { wait: OsWait, wait_timeout: OsWaitTimeout, wake_any: OsWake, wake_all: OsWake },
        Ulock { wait: UlockWait, wake: UlockWake },
    }

    static CALLS: LazyLock<Option<Calls>> = LazyLock::new(|| {
        use crate::region::exported as find;
        // SAFETY: the types above are the symbols' declarations
        // (os/os_sync_wait_on_address.h; xnu's sys/ulock.h).
        unsafe {
            let os_sync = (|| {
                Some(Calls::OsSync {
                    wait: find(c"os_sync_wait_on_address")?,
                    wait_timeout: find(c"os_sync_wait_on_address_with_timeout")?,
                    wake_any: find(c"os_sync_wake_by_address_any")?,
                    wake_all: find(c"os_sync_wake_by_address_all")?,
                })
            })();
            os_sync.or_else(|| Some(Calls::Ulock { wait: find(c"__ulock_wait")?, wake: find(c"__ulock_wake")? }))
        }
    });

    pub(super) fn available() -> bool {
        CALLS.is_some()
    }

    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let addr = word.as_ptr() as *mut c_void;
        // SAFETY (each call): `word` is a live 4-aligned word of the shared
        // mapping, waited on with the shared flag as it is woken.
        match CALLS.as_ref() {
            Some(Calls::OsSync { wait, wait_timeout, .. }) => match timeout {
                None => unsafe {
                    wait(addr, expected as u64, 4, OS_SHARED);
                },
                Some(d) if d.is_zero() => {}
                Some(d) => unsafe {
                    let ns = d.as_nanos().min(u64::MAX as u128) as u64;
                    wait_timeout(addr, expected as u64, 4, OS_SHARED, OS_CLOCK_MACH_ABSOLUTE_TIME, ns);
                },
            },
            Some(Calls::Ulock { wait, .. }) => {
                // Microseconds, 0 meaning no limit: a limit rounds up to 1.
                let us = timeout.map_or(0, |d| d.as_micros().clamp(1, u32::MAX as u128) as u32);
                // SAFETY: as above.
                unsafe { wait(UL_COMPARE_AND_WAIT_SHARED, addr, expected as u64, us) };
            }
            // Never reached: `open` refuses regions without the calls.
            None => std::thread::sleep(timeout.unwrap_or(Duration::from_millis(1)).min(Duration::from_millis(1))),
        }
    }

    pub(super) fn wake(word: &AtomicU32, count: u32) {
        let addr = word.as_ptr() as *mut c_void;
        // SAFETY (each call): as in `wait`; waking needs only the address.
        match CALLS.as_ref() {
            Some(Calls::OsSync { wake_any, wake_all, .. }) => unsafe {
                if count == 1 {
                    wake_any(addr, 4, OS_SHARED);
                } else {
                    wake_all(addr, 4, OS_SHARED);
                }
            },
            Some(Calls::Ulock { wake, .. }) => unsafe {
                let op = UL_COMPARE_AND_WAIT_SHARED | if count == 1 { 0 } else { ULF_WAKE_ALL };
                wake(op, addr, 0);
            },
            None => {}
        }
    }
}

/// Opens (creating if absent and `create`) the region file at `path`
/// with `user_bytes` (0: whatever it has) and maps it.
pub(super) fn open(
    path: &str,
    user_bytes: u32,
    create: bool,
    mode: u32,
    layout: Layout,
    build: &str,
) -> Result<Arc<Region>> {
    let cpath = std::ffi::CString::new(path).map_err(|_| coded("ERR_REGION_NAME", "NUL in the path".into()))?;
    if !kernel::available() {
        return Err(coded(
            "ERR_REGION_UNSUPPORTED",
            "this system has no wait on a shared address (macOS 10.12 or later is needed)".to_owned(),
        ));
    }
    #[cfg(target_os = "macos")]
    let _opening = OPENING.lock();
    #[cfg(target_os = "macos")]
    {
        // A file this process maps already is not opened again (its
        // descriptor could not be closed: see the module docs).
        // SAFETY: plain data, filled by stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: NUL-terminated path, a local out-parameter.
        if unsafe { libc::stat(cpath.as_ptr(), &mut st) } == 0 {
            if let Some(existing) = mapped_already((st.st_dev as u64, st.st_ino as u64), path, user_bytes, layout)? {
                return Ok(existing);
            }
        }
    }
    let flags = libc::O_RDWR | libc::O_CLOEXEC | if create { libc::O_CREAT } else { 0 };
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(cpath.as_ptr(), flags, mode as libc::c_uint) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOENT) if !create => coded("ERR_REGION_NOT_FOUND", format!("no region at {path}")),
            Some(libc::ENOENT) => coded("ERR_REGION_OPEN", format!("cannot create {path}: {e}")),
            Some(libc::EACCES) | Some(libc::EPERM) => {
                coded("ERR_REGION_ACCESS", format!("permission denied for {path}: {e}"))
            }
            _ => coded("ERR_REGION_OPEN", format!("cannot open {path}: {e}")),
        });
    }
    map_under_init_lock(
        fd,
        path,
        |fd| lock(fd, INIT_LOCK, true).map(|_| ()),
        |fd| unlock(fd, INIT_LOCK),
        close_unmapped,
        |fd| map(fd, path, user_bytes, layout, build),
    )
}

/// Closes a descriptor no mapping uses. On macOS, one of a file that this
/// process maps (opened between the check in `open` and the open itself,
/// when the path was made anew and back) waits for that mapping's end.
fn close_unmapped(fd: i32) {
    #[cfg(target_os = "macos")]
    {
        // SAFETY: plain data, filled by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: our descriptor.
        if unsafe { libc::fstat(fd, &mut st) } == 0 {
            let id = (st.st_dev as u64, st.st_ino as u64);
            if super::REGIONS.read().iter().any(|r| r.id == id) {
                DEFERRED.lock().push((id, fd));
                return;
            }
        }
    }
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(fd) };
}

/// `layout`'s slots and records: 0 where the caller gave none (the
/// defaults when creating, the region's own when opening).
/// Also returns whether the region was mapped already (`fd` then unused).
fn map(fd: i32, path: &str, user_bytes: u32, layout: Layout, build: &str) -> Result<(Arc<Region>, bool)> {
    // SAFETY: plain data, filled by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our descriptor.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(coded("ERR_REGION_OPEN", format!("cannot stat {path}: {}", std::io::Error::last_os_error())));
    }
    let id = (st.st_dev as u64, st.st_ino as u64);
    if let Some(existing) = mapped_already(id, path, user_bytes, layout)? {
        return Ok((existing, true));
    }
    let mut size = st.st_size as usize;
    let (layout, fresh) = settle_layout(path, size, || read_header(fd), user_bytes, layout, build)?;
    if fresh {
        size = layout.bytes() + user_bytes as usize;
        // SAFETY: our descriptor. Truncating to 0 first zeroes a
        // half-made block of a creator that died.
        let ok = unsafe { libc::ftruncate(fd, 0) == 0 && libc::ftruncate(fd, size as libc::off_t) == 0 };
        if !ok {
            let e = std::io::Error::last_os_error();
            return Err(coded("ERR_REGION_NO_SPACE", format!("cannot size {path} to {size} bytes: {e}")));
        }
    }
    // SAFETY: mapping our descriptor's file, shared.
    let base =
        unsafe { libc::mmap(ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    if base == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        return Err(coded("ERR_REGION_NO_SPACE", format!("cannot map {path}: {e}")));
    }
    let base = base as *mut u8;
    if fresh {
        // The file system allocates on first touch (tmpfs; a sparse file):
        // allocate now, so that a full disk is an error here and not a
        // SIGBUS later.
        let r = allocate(fd, size);
        if r != 0 && r != libc::EOPNOTSUPP && r != libc::ENOSYS {
            // SAFETY: the mapping just made.
            unsafe { libc::munmap(base as *mut c_void, size) };
            return Err(coded(
                "ERR_REGION_NO_SPACE",
                format!("no space for {size} bytes at {path}: {}", std::io::Error::from_raw_os_error(r)),
            ));
        }
        // SAFETY: a zeroed block of the layout's size, ours alone under the init lock.
        unsafe { shared::init(base, layout, user_bytes, build.as_bytes()) };
    }
    // SAFETY: a ready block that stays mapped as long as the Region.
    let mut queues = unsafe { Queues::attach(base, layout, Sys { fd }) };
    if queues.claim_slot(|i| lock(fd, SLOT_LOCK + i as i64, false).unwrap_or(false), std::process::id()).is_none() {
        // SAFETY: the mapping just made.
        unsafe { libc::munmap(base as *mut c_void, size) };
        return Err(slots_full(path, layout));
    }
    #[cfg(target_os = "linux")]
    queues.set_bells(*bell::BELLS);
    queues.set_ns(*watch::NS);
    let region = register(queues, base, size, layout, id, path);
    watch::announce(&region);
    Ok((region, false))
}

/// The file's first bytes (the header), or none if it is shorter.
fn read_header(fd: i32) -> Option<[u8; HEADER_BYTES]> {
    let mut buf = [0u8; HEADER_BYTES];
    // SAFETY: our descriptor, a buffer of that size.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr() as *mut c_void, buf.len(), 0) };
    (n == buf.len() as isize).then_some(buf)
}

/// The listener's sleep on this process's doorbell (src/region.rs, `listen`).
pub(super) fn sleep_on_doorbell(region: Arc<Region>, seen: u32, timeout: Duration) {
    let os = Sys { fd: region.queues.os().fd };
    let bell_ptr: *const AtomicU32 = region.queues.doorbell();
    drop(region);
    // The region may be unmapped while this thread sleeps (its last
    // buffer collected): a closing region rings first, and a futex call
    // on an address no longer mapped only fails (EFAULT) or, were the
    // address mapped again meanwhile, returns within its time limit;
    // neither reads or writes memory. The next turn then finds the
    // region gone and ends the thread.
    // SAFETY: the futex call reads the word only through the kernel (above).
    os.wait(unsafe { &*bell_ptr }, seen, Some(timeout));
}

/// Gives the file's `size` bytes their blocks; 0 or an errno.
fn allocate(fd: i32, size: usize) -> i32 {
    #[cfg(target_os = "linux")]
    // SAFETY: our descriptor.
    return unsafe { libc::posix_fallocate(fd, 0, size as libc::off_t) };
    #[cfg(target_os = "macos")]
    {
        // No posix_fallocate: write the zeros (the file is new and zero).
        let zeros = vec![0u8; 1 << 16];
        let mut at = 0usize;
        while at < size {
            let n = zeros.len().min(size - at);
            // SAFETY: our descriptor, a buffer of at least `n` bytes.
            let w = unsafe { libc::pwrite(fd, zeros.as_ptr() as *const c_void, n, at as libc::off_t) };
            if w < 0 {
                let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
                if e == libc::EINTR {
                    continue;
                }
                return e;
            }
            at += w as usize;
        }
        0
    }
}

pub(super) fn unmap(region: &Region) {
    #[cfg(target_os = "macos")]
    let _opening = OPENING.lock();
    // SAFETY: the mapping this region made; nothing uses it any more (the
    // last reference is gone).
    unsafe { libc::munmap(region.base as *mut c_void, region.len) };
    #[cfg(target_os = "macos")]
    {
        let others =
            super::REGIONS.read().iter().filter(|r| r.id == region.id).map(|r| r.queues.my_slot()).collect::<Vec<_>>();
        if !others.is_empty() {
            // The file is mapped again meanwhile: closing this descriptor
            // would drop the new mapping's locks too. Give back this
            // mapping's slot (unless the new one took the same) and close
            // the descriptor with the last mapping.
            let slot = region.queues.my_slot();
            if !others.contains(&slot) {
                unlock(region.queues.os().fd, SLOT_LOCK + slot as i64);
            }
            DEFERRED.lock().push((region.id, region.queues.os().fd));
            return;
        }
        let mut deferred = DEFERRED.lock();
        deferred.retain(|&(id, fd)| {
            if id == region.id {
                // SAFETY: a descriptor of a mapping gone before, closed once.
                unsafe { libc::close(fd) };
            }
            id != region.id
        });
    }
    // SAFETY: this region's descriptor, closed once.
    unsafe { libc::close(region.queues.os().fd) };
}

/// Serializes this process's opens and unmaps of region files (macOS: see
/// the module docs).
#[cfg(target_os = "macos")]
static OPENING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// macOS: descriptors of mappings that are gone whose file is mapped again,
/// closed with the last mapping of their file (by identity).
#[cfg(target_os = "macos")]
static DEFERRED: parking_lot::Mutex<Vec<((u64, u64), i32)>> = parking_lot::Mutex::new(Vec::new());

pub(super) fn unlink(path: &str) -> Result<bool> {
    let cpath = std::ffi::CString::new(path).map_err(|_| coded("ERR_REGION_NAME", "NUL in the path".into()))?;
    // SAFETY: NUL-terminated path.
    if unsafe { libc::unlink(cpath.as_ptr()) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOENT) => Ok(false),
        Some(libc::EACCES) | Some(libc::EPERM) => {
            Err(coded("ERR_REGION_ACCESS", format!("permission denied for {path}: {e}")))
        }
        _ => Err(coded("ERR_REGION_OPEN", format!("cannot unlink {path}: {e}"))),
    }
}

pub(super) const SUPPORTED: bool = true;

/// Whether this process learns of every death of the region's processes at
/// once (src/region/watch.rs), so that its watching waits can sleep long.
pub(super) fn watches(region: &Region) -> bool {
    watch::watches(region)
}
