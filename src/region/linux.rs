//! Shared regions on Linux: a file (in /dev/shm by default) mapped
//! `MAP_SHARED`; shared futexes (`FUTEX_WAIT` without the private flag) on
//! its words; open-file-description record locks for the slots' liveness.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use futex_core::shared::{self, Layout, Os, Queues};
use napi::Result;

use super::{coded, map_under_init_lock, mapped_already, register, settle_layout, slots_full, Region, HEADER_BYTES};

#[path = "bell.rs"]
mod bell;

pub(crate) struct Sys {
    fd: i32,
}

/// Byte offsets of the record locks, far past any file's end.
const INIT_LOCK: i64 = 1 << 40;
const SLOT_LOCK: i64 = (1 << 40) + 64;

fn flock(kind: i32, at: i64) -> libc::flock {
    // SAFETY: plain data.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as _;
    l.l_whence = libc::SEEK_SET as _;
    l.l_start = at as _;
    l.l_len = 1;
    l
}

pub(super) fn lock(fd: i32, at: i64, wait: bool) -> std::io::Result<bool> {
    let mut l = flock(libc::F_WRLCK, at);
    let cmd = if wait { libc::F_OFD_SETLKW } else { libc::F_OFD_SETLK };
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
    let mut l = flock(libc::F_UNLCK, at);
    // SAFETY: valid descriptor and flock.
    unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &mut l) };
}

impl Os for Sys {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let ts = timeout
            .map(|d| libc::timespec { tv_sec: d.as_secs().min(i32::MAX as u64) as _, tv_nsec: d.subsec_nanos() as _ });
        let tsp = ts.as_ref().map_or(ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `word` is a live 4-aligned word of the shared mapping;
        // FUTEX_WAIT without the private flag keys on the mapping, so
        // sleepers of every process that maps it meet.
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, tsp, 0usize, 0u32) };
    }

    fn wake(&self, word: &AtomicU32, count: u32) {
        // SAFETY: as in `wait`; waking needs only the address.
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, count.min(i32::MAX as u32), 0usize) };
    }

    fn slot_alive(&self, slot: u32) -> bool {
        let mut l = flock(libc::F_WRLCK, SLOT_LOCK + slot as i64);
        // SAFETY: valid descriptor and flock.
        let r = unsafe { libc::fcntl(self.fd, libc::F_OFD_GETLK, &mut l) };
        // Unknown (an error): alive, so that nothing of a live process is taken.
        r != 0 || l.l_type != libc::F_UNLCK as _
    }

    fn ring_bell(&self, bells: u64, bell: u32) -> bool {
        bell::ring(bells, bell)
    }
}

/// This thread's bell (0: none) and the times this process's bells rang.
pub(super) fn bell_info() -> (u32, u64) {
    bell::info()
}

/// This JavaScript thread's bell for its async waiters (0: none), see src/region/bell.rs.
pub(super) fn thread_bell(env: napi::sys::napi_env) -> u32 {
    bell::of_thread(env)
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
        // SAFETY: our descriptor, closed once.
        |fd| unsafe {
            libc::close(fd);
        },
        |fd| map(fd, path, user_bytes, layout, build),
    )
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
        // tmpfs allocates pages on first touch: touch them now, so that a
        // full /dev/shm is an error here and not a SIGBUS later.
        // SAFETY: our descriptor.
        let r = unsafe { libc::posix_fallocate(fd, 0, size as libc::off_t) };
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
    queues.set_bells(*bell::BELLS);
    Ok((register(queues, base, size, layout, id, path), false))
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

pub(super) fn unmap(region: &Region) {
    // SAFETY: the mapping and descriptor this region made; nothing uses
    // them any more (the last reference is gone).
    unsafe {
        libc::munmap(region.base as *mut c_void, region.len);
        libc::close(region.queues.os().fd);
    }
}

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
