//! Shared regions on Windows: a file (in the temporary directory by default)
//! opened with every sharing mode and mapped with `CreateFileMappingW` +
//! `MapViewOfFile`.
//!
//! * **Liveness**: a process holds an exclusive `LockFileEx` lock on one byte
//!   per slot far past the file's end (as the Linux build's record lock);
//!   Windows drops a process's locks when the process ends, however it ends
//!   (`TerminateProcess`, a crash). `slot_alive` asks with a *shared* lock
//!   on that byte, taken and given back at once: it is granted only if no
//!   process holds the byte exclusively (so the slot's process is gone), and
//!   probes of several processes never refuse each other.
//! * **Sleeping across processes**: Windows has no futex between processes
//!   (`WaitOnAddress` is per process). Every word the shared queues sleep on
//!   gets a named auto-reset event, `Local\shared-futex.<volume>.<file
//!   index>.<offset>`, made or opened on first use and kept open by each
//!   process that uses it. `wait` opens the event, compares the word and
//!   sleeps on the event if it is unchanged; `wake` changes nothing but sets
//!   the event. A wake made between the compare and the sleep leaves the
//!   event set, so the sleep returns at once: no wake-up is lost. A set with
//!   nobody asleep stays until the next sleep on the word, which then returns
//!   early for nothing: every caller of `Os::wait` looks again and sleeps
//!   again (futex-core's `shared` module; the listener). Each word has at
//!   most one sleeper that `wake` must reach beyond the first: the record's
//!   state word has its one waiter, the doorbell its process's one listener,
//!   and a bucket lock's sleepers are woken one per unlock (an auto-reset
//!   event wakes one), each bounded by a 20 ms look at the holder.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use futex_core::shared::{self, Layout, Os, Queues};
use napi::{Error, Result};
use parking_lot::Mutex;

use super::{coded, map_under_init_lock, mapped_already, register, settle_layout, slots_full, Region, HEADER_BYTES};

#[path = "watch.rs"]
mod watch;

type Handle = *mut c_void;

#[repr(C)]
struct Overlapped {
    internal: usize,
    internal_high: usize,
    offset: u32,
    offset_high: u32,
    event: Handle,
}

#[repr(C)]
#[derive(Default)]
struct FileInformation {
    attributes: u32,
    creation: [u32; 2],
    access: [u32; 2],
    write: [u32; 2],
    volume_serial: u32,
    size_high: u32,
    size_low: u32,
    links: u32,
    index_high: u32,
    index_low: u32,
}

#[link(name = "kernel32")]
extern "system" {
    fn CreateFileW(
        name: *const u16,
        access: u32,
        share: u32,
        security: *mut c_void,
        disposition: u32,
        flags: u32,
        template: Handle,
    ) -> Handle;
    fn CloseHandle(handle: Handle) -> i32;
    fn LockFileEx(file: Handle, flags: u32, reserved: u32, low: u32, high: u32, overlapped: *mut Overlapped) -> i32;
    fn UnlockFileEx(file: Handle, reserved: u32, low: u32, high: u32, overlapped: *mut Overlapped) -> i32;
    fn ReadFile(file: Handle, buffer: *mut c_void, bytes: u32, read: *mut u32, overlapped: *mut Overlapped) -> i32;
    fn GetFileSizeEx(file: Handle, size: *mut i64) -> i32;
    fn SetFilePointerEx(file: Handle, distance: i64, new: *mut i64, method: u32) -> i32;
    fn SetEndOfFile(file: Handle) -> i32;
    fn GetFileInformationByHandle(file: Handle, info: *mut FileInformation) -> i32;
    fn SetFileInformationByHandle(file: Handle, class: i32, info: *const c_void, size: u32) -> i32;
    fn CreateFileMappingW(
        file: Handle,
        security: *mut c_void,
        protect: u32,
        size_high: u32,
        size_low: u32,
        name: *const u16,
    ) -> Handle;
    fn MapViewOfFile(mapping: Handle, access: u32, offset_high: u32, offset_low: u32, bytes: usize) -> *mut c_void;
    fn UnmapViewOfFile(base: *const c_void) -> i32;
    fn CreateEventW(security: *mut c_void, manual_reset: i32, initial: i32, name: *const u16) -> Handle;
    fn SetEvent(event: Handle) -> i32;
    fn WaitForSingleObject(handle: Handle, milliseconds: u32) -> u32;
    fn MoveFileExW(from: *const u16, to: *const u16, flags: u32) -> i32;
    fn DeleteFileW(name: *const u16) -> i32;
    fn GetModuleHandleW(name: *const u16) -> Handle;
    fn GetProcAddress(module: Handle, name: *const u8) -> *mut c_void;
}

const INVALID_HANDLE_VALUE: Handle = -1isize as Handle;
const GENERIC_READ: u32 = 0x8000_0000;
const GENERIC_WRITE: u32 = 0x4000_0000;
const DELETE: u32 = 0x0001_0000;
const SHARE_ALL: u32 = 0x1 | 0x2 | 0x4; // FILE_SHARE_READ | WRITE | DELETE
const OPEN_EXISTING: u32 = 3;
const OPEN_ALWAYS: u32 = 4;
const FILE_ATTRIBUTE_NORMAL: u32 = 0x80;
const LOCKFILE_FAIL_IMMEDIATELY: u32 = 1;
const LOCKFILE_EXCLUSIVE_LOCK: u32 = 2;
const PAGE_READWRITE: u32 = 4;
const FILE_MAP_WRITE: u32 = 2;
const FILE_MAP_READ: u32 = 4;
const INFINITE: u32 = u32::MAX;
const FILE_DISPOSITION_INFO_EX: i32 = 21;
const FILE_DISPOSITION_FLAG_DELETE: u32 = 1;
const FILE_DISPOSITION_FLAG_POSIX_SEMANTICS: u32 = 2;

const ERROR_FILE_NOT_FOUND: i32 = 2;
const ERROR_PATH_NOT_FOUND: i32 = 3;
const ERROR_ACCESS_DENIED: i32 = 5;

/// Byte offsets of the locks, far past any file's end (as on Linux).
const INIT_LOCK: u64 = 1 << 40;
const SLOT_LOCK: u64 = (1 << 40) + 64;

pub(crate) struct Sys {
    file: usize,
    /// The mapping's address: a word's event is named after its offset.
    base: usize,
    /// `Local\shared-futex.<volume>.<file index>.`: the file's identity.
    prefix: String,
    /// The events this process has open, by offset.
    events: Mutex<HashMap<usize, usize>>,
}

fn overlapped(at: u64) -> Overlapped {
    Overlapped {
        internal: 0,
        internal_high: 0,
        offset: at as u32,
        offset_high: (at >> 32) as u32,
        event: ptr::null_mut(),
    }
}

/// Locks byte `at` of `file` (`flags`: exclusive, fail at once); true if granted.
fn lock(file: Handle, at: u64, flags: u32) -> bool {
    let mut ov = overlapped(at);
    // SAFETY: our handle, a live OVERLAPPED (the handle is synchronous).
    unsafe { LockFileEx(file, flags, 0, 1, 0, &mut ov) != 0 }
}

fn unlock(file: Handle, at: u64) {
    let mut ov = overlapped(at);
    // SAFETY: as in `lock`.
    unsafe { UnlockFileEx(file, 0, 1, 0, &mut ov) };
}

/// Claims slot byte `at`: an exclusive lock. A byte a live process holds
/// refuses it; so does, for an instant, a byte another process probes
/// (`slot_alive`'s shared lock), which a shared lock of ours then tells
/// apart: granted, nobody holds it exclusively, so try again.
fn claim(file: Handle, at: u64) -> bool {
    for _ in 0..16 {
        if lock(file, at, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY) {
            return true;
        }
        if !lock(file, at, LOCKFILE_FAIL_IMMEDIATELY) {
            return false;
        }
        unlock(file, at);
        std::thread::yield_now();
    }
    false
}

/// `s` as a NUL-terminated UTF-16 string.
fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// A path for the wide file functions: past MAX_PATH (260) a drive path
/// needs the `\\?\` prefix. A NUL would cut it short: refused (as on Linux).
fn checked_path(path: &str) -> Result<Vec<u16>> {
    if path.contains('\0') {
        return Err(coded("ERR_REGION_NAME", "NUL in the path".into()));
    }
    Ok(wide_path(path))
}

fn wide_path(path: &str) -> Vec<u16> {
    let b = path.as_bytes();
    if path.len() >= 240 && b.len() > 2 && b[1] == b':' && b[2] == b'\\' {
        wide(&format!(r"\\?\{path}"))
    } else {
        wide(path)
    }
}

impl Sys {
    fn file(&self) -> Handle {
        self.file as Handle
    }

    /// The event of `word`, opened (made if no process has it) on first use.
    fn event(&self, word: &AtomicU32) -> Option<Handle> {
        let offset = word.as_ptr() as usize - self.base;
        if let Some(&h) = self.events.lock().get(&offset) {
            return Some(h as Handle);
        }
        let name = wide(&format!("{}{offset:x}", self.prefix));
        // SAFETY: a NUL-terminated name; an auto-reset event, not set.
        let h = unsafe { CreateEventW(ptr::null_mut(), 0, 0, name.as_ptr()) };
        if h.is_null() {
            return None;
        }
        let mut events = self.events.lock();
        let kept = *events.entry(offset).or_insert(h as usize);
        if kept != h as usize {
            // SAFETY: the handle just made, not kept.
            unsafe { CloseHandle(h) };
        }
        Some(kept as Handle)
    }

    fn close_events(&self) {
        for (_, h) in self.events.lock().drain() {
            // SAFETY: handles this value opened; nobody waits on them any more.
            unsafe { CloseHandle(h as Handle) };
        }
    }
}

impl Os for Sys {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        // The event first: a wake after the compare then sets this very
        // event, even if its waker's process has ended since.
        let event = self.event(word);
        if word.load(SeqCst) != expected {
            return;
        }
        let ms = timeout.map_or(INFINITE, |d| d.as_nanos().div_ceil(1_000_000).min(INFINITE as u128 - 1) as u32);
        match event {
            // SAFETY: an event handle this value keeps open.
            Some(h) => unsafe {
                WaitForSingleObject(h, ms);
            },
            // No event (out of handles): sleep a little; the caller looks again.
            None => std::thread::sleep(Duration::from_millis(ms.min(1) as u64)),
        }
    }

    fn wake(&self, word: &AtomicU32, _count: u32) {
        // One set wakes one sleeper, which is every sleeper a wake-up is for
        // (the module's docs).
        if let Some(h) = self.event(word) {
            // SAFETY: an event handle this value keeps open.
            unsafe { SetEvent(h) };
        }
    }

    fn slot_alive(&self, slot: u32) -> bool {
        let at = SLOT_LOCK + slot as u64;
        // A shared lock is refused only while a process holds the byte
        // exclusively: its slot's process. Unknown (an error): alive, so
        // that nothing of a live process is taken.
        if lock(self.file(), at, LOCKFILE_FAIL_IMMEDIATELY) {
            unlock(self.file(), at);
            return false;
        }
        true
    }
}

fn open_error(path: &str, what: &str, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(ERROR_ACCESS_DENIED) => coded("ERR_REGION_ACCESS", format!("permission denied for {path}: {e}")),
        _ => coded("ERR_REGION_OPEN", format!("cannot {what} {path}: {e}")),
    }
}

/// Opens (creating if absent and `create`) the region file at `path`
/// with `user_bytes` (0: whatever it has) and maps it. (`mode` is for
/// POSIX permissions: a file made here gets the directory's ACL.)
pub(super) fn open(
    path: &str,
    user_bytes: u32,
    create: bool,
    _mode: u32,
    layout: Layout,
    build: &str,
) -> Result<Arc<Region>> {
    let wpath = checked_path(path)?;
    let disposition = if create { OPEN_ALWAYS } else { OPEN_EXISTING };
    // SAFETY: a NUL-terminated path.
    let file = unsafe {
        CreateFileW(
            wpath.as_ptr(),
            GENERIC_READ | GENERIC_WRITE,
            SHARE_ALL,
            ptr::null_mut(),
            disposition,
            FILE_ATTRIBUTE_NORMAL,
            ptr::null_mut(),
        )
    };
    if file == INVALID_HANDLE_VALUE {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND) if !create => {
                coded("ERR_REGION_NOT_FOUND", format!("no region at {path}"))
            }
            Some(ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND) => {
                coded("ERR_REGION_OPEN", format!("cannot create {path}: {e}"))
            }
            _ => open_error(path, "open", e),
        });
    }
    map_under_init_lock(
        file,
        path,
        |f| if lock(f, INIT_LOCK, LOCKFILE_EXCLUSIVE_LOCK) { Ok(()) } else { Err(std::io::Error::last_os_error()) },
        |f| unlock(f, INIT_LOCK),
        // SAFETY: our handle, closed once.
        |f| unsafe {
            CloseHandle(f);
        },
        |f| map(f, path, user_bytes, layout, build),
    )
}

/// As on Linux (src/region/posix.rs, `map`).
fn map(file: Handle, path: &str, user_bytes: u32, layout: Layout, build: &str) -> Result<(Arc<Region>, bool)> {
    let mut info = FileInformation::default();
    let mut size: i64 = 0;
    // SAFETY: our handle, live out-parameters.
    if unsafe { GetFileInformationByHandle(file, &mut info) == 0 || GetFileSizeEx(file, &mut size) == 0 } {
        return Err(open_error(path, "stat", std::io::Error::last_os_error()));
    }
    let index = (info.index_high as u64) << 32 | info.index_low as u64;
    let id = (info.volume_serial as u64, index);
    if let Some(existing) = mapped_already(id, path, user_bytes, layout)? {
        return Ok((existing, true));
    }
    let mut size = size as usize;
    let (layout, fresh) = settle_layout(path, size, || read_header(file), user_bytes, layout, build)?;
    if fresh {
        size = layout.bytes() + user_bytes as usize;
        // Truncating to 0 first zeroes a half-made block of a creator that
        // died. NTFS allocates the clusters here: a full disk is an error now.
        if !set_size(file, 0) || !set_size(file, size) {
            let e = std::io::Error::last_os_error();
            return Err(coded("ERR_REGION_NO_SPACE", format!("cannot size {path} to {size} bytes: {e}")));
        }
    }
    // SAFETY: our handle; a mapping of the whole file, closed once viewed
    // (the view keeps it).
    let base = unsafe {
        let mapping =
            CreateFileMappingW(file, ptr::null_mut(), PAGE_READWRITE, (size >> 32) as u32, size as u32, ptr::null());
        if mapping.is_null() {
            ptr::null_mut()
        } else {
            let base = MapViewOfFile(mapping, FILE_MAP_READ | FILE_MAP_WRITE, 0, 0, size);
            CloseHandle(mapping);
            base
        }
    };
    if base.is_null() {
        let e = std::io::Error::last_os_error();
        return Err(coded("ERR_REGION_NO_SPACE", format!("cannot map {path}: {e}")));
    }
    let base = base as *mut u8;
    if fresh {
        // SAFETY: a zeroed block of the layout's size, ours alone under the init lock.
        unsafe { shared::init(base, layout, user_bytes, build.as_bytes()) };
    }
    let sys = Sys {
        file: file as usize,
        base: base as usize,
        prefix: format!(r"Local\shared-futex.{:08x}.{index:016x}.", info.volume_serial),
        events: Mutex::new(HashMap::new()),
    };
    // SAFETY: a ready block that stays mapped as long as the Region.
    let mut queues = unsafe { Queues::attach(base, layout, sys) };
    if queues.claim_slot(|i| claim(file, SLOT_LOCK + i as u64), std::process::id()).is_none() {
        queues.os().close_events();
        // SAFETY: the view just made.
        unsafe { UnmapViewOfFile(base as *const c_void) };
        return Err(slots_full(path, layout));
    }
    queues.set_ns(*watch::NS);
    let region = register(queues, base, size, layout, id, path);
    watch::announce(&region);
    Ok((region, false))
}

fn set_size(file: Handle, size: usize) -> bool {
    // SAFETY: our handle.
    unsafe { SetFilePointerEx(file, size as i64, ptr::null_mut(), 0) != 0 && SetEndOfFile(file) != 0 }
}

/// The file's first bytes (the header), or none if it is shorter.
fn read_header(file: Handle) -> Option<[u8; HEADER_BYTES]> {
    let mut buf = [0u8; HEADER_BYTES];
    let mut read = 0u32;
    let mut ov = overlapped(0);
    // SAFETY: our handle, a buffer of that size, a live OVERLAPPED (at 0).
    let ok = unsafe { ReadFile(file, buf.as_mut_ptr() as *mut c_void, buf.len() as u32, &mut read, &mut ov) != 0 };
    (ok && read as usize == buf.len()).then_some(buf)
}

/// The listener's sleep on this process's doorbell (src/region.rs,
/// `listen`). An event wait reads the word first, so the region stays
/// mapped while the listener sleeps; a closing region rings it awake.
pub(super) fn sleep_on_doorbell(region: Arc<Region>, seen: u32, timeout: Duration) {
    region.queues.os().wait(region.queues.doorbell(), seen, Some(timeout));
}

pub(super) fn unmap(region: &Region) {
    let sys = region.queues.os();
    sys.close_events();
    // SAFETY: the view and handle this region made; nothing uses them any
    // more (the last reference is gone). Closing the handle gives back the
    // slot's lock.
    unsafe {
        UnmapViewOfFile(region.base as *const c_void);
        CloseHandle(sys.file());
    }
}

/// Removes the name at once. With POSIX semantics (Windows 10 1709+ on
/// NTFS) the file goes and its mappings stay. Elsewhere the file is first
/// renamed out of the way (`~shared-futex-unlinked.*` in the same
/// directory; renaming an open, mapped file is allowed), then deleted, which
/// Windows refuses while a process maps it: such files are deleted by a
/// later `unlink` in that directory once nobody maps them.
pub(super) fn unlink(path: &str) -> Result<bool> {
    let wpath = checked_path(path)?;
    // SAFETY: a NUL-terminated path.
    let file =
        unsafe { CreateFileW(wpath.as_ptr(), DELETE, SHARE_ALL, ptr::null_mut(), OPEN_EXISTING, 0, ptr::null_mut()) };
    if file == INVALID_HANDLE_VALUE {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND) => Ok(false),
            _ => Err(open_error(path, "unlink", e)),
        };
    }
    let flags = FILE_DISPOSITION_FLAG_DELETE | FILE_DISPOSITION_FLAG_POSIX_SEMANTICS;
    // SAFETY: our handle, FILE_DISPOSITION_INFO_EX (one ULONG).
    let posix = unsafe {
        let done = SetFileInformationByHandle(file, FILE_DISPOSITION_INFO_EX, &flags as *const u32 as *const c_void, 4);
        CloseHandle(file);
        done != 0
    };
    let (dir, _) = path.rsplit_once('\\').unwrap_or((".", path));
    if !posix {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let grave = format!(r"{dir}\~shared-futex-unlinked.{}.{nanos:x}", std::process::id());
        let wgrave = wide_path(&grave);
        // SAFETY: NUL-terminated paths.
        if unsafe { MoveFileExW(wpath.as_ptr(), wgrave.as_ptr(), 0) } == 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND) => Ok(false),
                _ => Err(open_error(path, "unlink", e)),
            };
        }
        // SAFETY: a NUL-terminated path. A failure leaves it to a later sweep.
        unsafe { DeleteFileW(wgrave.as_ptr()) };
        // Files renamed away earlier whose last mapping is gone.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with("~shared-futex-unlinked.") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
    Ok(true)
}

/// A function the running executable (node.exe) exports, or null.
pub(super) fn export_of_executable(name: &CStr) -> *mut c_void {
    // SAFETY: the executable's module handle (never freed); a NUL-terminated name.
    unsafe {
        let exe = GetModuleHandleW(ptr::null());
        if exe.is_null() {
            return ptr::null_mut();
        }
        GetProcAddress(exe, name.as_ptr() as *const u8)
    }
}

pub(super) const SUPPORTED: bool = true;

/// No bells here yet: async waiters hear of other processes' notifies through the doorbell.
pub(super) fn thread_bell(_env: napi::sys::napi_env) -> u32 {
    0
}

/// No bells here (see `thread_bell`).
pub(super) fn bell_info() -> (u32, u64) {
    (0, 0)
}

/// Whether this process learns of every death of the region's processes at
/// once (src/region/watch.rs), so that its watching waits can sleep long.
pub(super) fn watches(region: &Region) -> bool {
    watch::watches(region)
}
