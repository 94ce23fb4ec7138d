//! The watcher of deaths (Linux 5.3+, Windows, macOS): one thread per process
//! that learns at once when another process of a region it maps dies, and
//! then counts an end in that region and wakes every watching waiter there
//! (futex-core's `Queues::end_seen`). Without it a sleeper over region
//! memory learns of a death only by looking again, so it sleeps in slices
//! of 50 ms; with it, a slice only guards against a failure of the watcher,
//! and lasts a second.
//!
//! For each live process slot of each region mapped here, the watcher holds
//! a handle on the slot's process that the system signals once the process
//! has ended, and waits on them all:
//! * Linux: a pidfd (`pidfd_open`), polled with epoll. It becomes readable
//!   when the process has exited, after the kernel closed its files and so
//!   released the slot's record lock.
//! * Windows: a process handle (`OpenProcess` with `SYNCHRONIZE`), waited on
//!   by the thread pool (`RegisterWaitForSingleObject`), whose callback
//!   notes it and sets the watcher's event.
//! * macOS: a kqueue `EVFILT_PROC` / `NOTE_EXIT` event registered for the
//!   pid (one per process however many of its slots are followed: the
//!   user's region and its holds table are two).
//!
//! A fired handle is taken for the death once the slot's lock is seen free
//! (or the slot claimed again): where the system signals the handle before
//! it has released the process's locks, the watcher looks again for a
//! while, so that its waiters do not wake to a slot that still looks alive.
//!
//! A pid names a process only for as long as it lives, and (Linux) only in
//! its pid namespace, so a handle is trusted only if, after it was opened,
//! the slot is still held (its lock), still has the generation read before,
//! and its claimer named the same pid namespace as this process (the slot's
//! `ns`, which the claimer sets after its pid; Windows and macOS have one
//! namespace of pids): then the process holding the slot lived after the handle was
//! made, so it is the handle's. A slot whose namespace differs (a container
//! sharing the region's directory) cannot be followed, nor can a process
//! this one may not open: the region is then not *watched*, and its waits
//! use short slices.
//!
//! A process that claims a slot tells the watchers of the others (Linux: a
//! byte to `shared-futex-bell/<their bells>/w`, the watcher's own socket
//! beside the threads' bells; Windows: the named event
//! `Local\shared-futex.deaths.<pid>`; macOS has no such message, and its
//! watchers look five times a second instead), and each looks at the slots
//! again. A slot that changed generation, or that is found free where a
//! process was followed or was never seen alive, counts as an end. A
//! watcher also looks every second, should a message be lost.

use std::collections::HashMap;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::region::{Region, REGIONS};
use futex_core::shared::{Os, Queues};

#[cfg(target_os = "linux")]
use linux as sys;
#[cfg(target_os = "macos")]
use macos as sys;
#[cfg(windows)]
use windows as sys;

/// This process's pid namespace as its slot names it (never 0), or 0 where
/// it cannot be known (then no slot is followed).
pub(super) static NS: LazyLock<u32> = LazyLock::new(sys::namespace);

/// Whether the watcher runs; started by the first question (`watches`).
static STARTED: OnceLock<bool> = OnceLock::new();

/// Whether this process's watcher follows every process of `region`, so that
/// a death there wakes its watching waiters at once. Starts the watcher.
pub(super) fn watches(region: &Region) -> bool {
    let started = *STARTED.get_or_init(|| std::env::var_os("SHARED_FUTEX_NO_WATCHER").is_none() && start().is_some());
    started && region.watched.load(Acquire)
}

/// Tells the watchers of the region's other processes that this process
/// claimed a slot there (after its claim is complete), and this process's
/// own watcher, if it runs, that there is a region to look at.
pub(super) fn announce(region: &Region) {
    if STARTED.get() == Some(&true) {
        sys::ring_own();
    }
    let q = &region.queues;
    let me = q.my_slot();
    for i in 0..q.header().slots.load(Relaxed) {
        if i != me && q.slot(i).gen.load(Relaxed) != 0 {
            sys::ring(q.slot(i));
        }
    }
}

/// A slot of a region as last seen, by (the region's address, the slot).
type Slots = HashMap<(usize, u32), Followed>;

struct Followed {
    region: Weak<Region>,
    gen: u32,
    /// The process's handle, or none: the slot was seen free (or not
    /// followable) with this generation.
    proc: Option<sys::Proc>,
}

/// Starts the watcher thread. `None`: this system cannot.
fn start() -> Option<()> {
    let poller = sys::Poller::new()?;
    std::thread::Builder::new().name("shared-futex deaths".to_owned()).spawn(move || run(poller)).ok()?;
    Some(())
}

fn run(mut poller: sys::Poller) {
    let mut followed = Slots::new();
    // Regions looked at before (by address): the first look at one is a
    // baseline, whose free slots are nobody's death.
    let mut seen: Vec<Weak<Region>> = Vec::new();
    let mut fired = Vec::new();
    loop {
        look(&mut poller, &mut followed, &mut seen);
        fired.clear();
        poller.wait(sys::LOOK_MS, &mut fired);
        for &p in &fired {
            // Every slot of that process (one per region: a process's
            // handle is its own per slot except on macOS).
            for (&(_, i), f) in followed.iter_mut().filter(|(_, f)| f.proc == Some(p)) {
                poller.remove(p);
                // Seen gone with this generation: not counted again.
                f.proc = None;
                if let Some(region) = f.region.upgrade() {
                    settle(&region.queues, i, f.gen);
                    region.queues.end_seen();
                }
            }
        }
    }
}

/// Waits (100 ms at most) until slot `i`, whose process with generation
/// `gen` has ended, is seen free or claimed again.
fn settle(q: &Queues<super::Sys>, i: u32, gen: u32) {
    let until = Instant::now() + Duration::from_millis(100);
    while q.os().slot_alive(i) && q.slot(i).gen.load(SeqCst) == gen && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Looks at every slot of every region mapped here: follows the processes
/// not yet followed, counts the ends it finds, and says per region whether
/// every process there is followed.
fn look(poller: &mut sys::Poller, followed: &mut Slots, seen: &mut Vec<Weak<Region>>) {
    let regions: Vec<Arc<Region>> = REGIONS.read().clone();
    // Regions no longer mapped: let go of what they had.
    followed.retain(|_, f| {
        let keep = f.region.upgrade().is_some_and(|r| regions.iter().any(|x| Arc::ptr_eq(x, &r)));
        if let Some(p) = f.proc.filter(|_| !keep) {
            poller.remove(p);
        }
        keep
    });
    seen.retain(|w| w.strong_count() > 0);
    let mine = *NS;
    for region in &regions {
        let first = !seen.iter().any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(region)));
        if first {
            seen.push(Arc::downgrade(region));
        }
        let q = &region.queues;
        let me = q.my_slot();
        let mut all = mine != 0;
        let mut ended = false;
        for i in 0..q.header().slots.load(Relaxed) {
            let slot = q.slot(i);
            let gen = slot.gen.load(SeqCst);
            if i == me || gen == 0 {
                continue;
            }
            let key = (Arc::as_ptr(region) as usize, i);
            if let Some(f) = followed.get_mut(&key).filter(|f| f.gen == gen) {
                let live = q.os().slot_alive(i);
                if let Some(p) = f.proc.filter(|_| !live) {
                    // Its process let the region go and lives on: what
                    // its threads held there is free to take over.
                    poller.remove(p);
                    f.proc = None;
                    ended = true;
                } else if f.proc.is_none() && live {
                    // Living, and not followable (another namespace).
                    all = false;
                }
                continue;
            }
            let old = followed.remove(&key).map(|f| f.proc);
            if let Some(Some(p)) = old {
                // Another generation: the process followed is gone (it
                // died, or let the region go), and its handle has not said
                // so yet.
                poller.remove(p);
                ended = true;
            }
            let alive = q.os().slot_alive(i);
            let ns = slot.ns.load(SeqCst);
            let proc = if !alive {
                // Free: a process that claimed it since the last look (or
                // was never seen alive here) and is gone already.
                ended |= !first && old.is_none();
                None
            } else if ns == 0 {
                // Mid-claim: its claimer will say when it is done (on
                // macOS, the next look finds it).
                all = false;
                continue;
            } else if ns != mine {
                all = false;
                None
            } else {
                match follow(poller, q, i, gen, slot.pid.load(SeqCst)) {
                    Some(p) if poller.add(p) => Some(p),
                    _ => {
                        // Gone meanwhile, claimed again, not to be opened
                        // here, or refused by the poller: look again soon.
                        all = false;
                        continue;
                    }
                }
            };
            followed.insert(key, Followed { region: Arc::downgrade(region), gen, proc });
        }
        region.watched.store(all, Release);
        if ended {
            q.end_seen();
        }
    }
}

/// A handle of the process holding slot `i` with generation `gen`, whose
/// pid the slot says is `pid`; `None` if that cannot be made sure of.
fn follow(poller: &mut sys::Poller, q: &Queues<super::Sys>, i: u32, gen: u32, pid: u32) -> Option<sys::Proc> {
    let p = poller.open(pid)?;
    // Held, by the same claim, after the handle was made: that claimer was
    // alive then, so the pid was still its own.
    if q.os().slot_alive(i) && q.slot(i).gen.load(SeqCst) == gen && q.slot(i).pid.load(SeqCst) == pid {
        Some(p)
    } else {
        poller.remove(p);
        None
    }
}

/// Linux: pidfds in an epoll set, and a datagram socket to be told of
/// newcomers (src/region/bell.rs).
#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::c_void;
    use std::os::unix::fs::MetadataExt;
    use std::ptr;

    use super::super::bell;
    use futex_core::shared::Slot;

    // SAFETY (for the calls below): plain system calls on descriptors this
    // module owns, with buffers of the sizes given.

    /// A pidfd.
    pub(super) type Proc = i32;

    /// The low 32 bits of the inode of this process's pid namespace.
    pub(super) fn namespace() -> u32 {
        std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| (m.ino() as u32).max(1))
    }

    pub(super) fn ring_own() {
        bell::ring_named(*bell::BELLS, "w");
    }

    pub(super) fn ring(slot: &Slot) {
        let name = slot.bells[0].load(std::sync::atomic::Ordering::Relaxed) as u64
            | (slot.bells[1].load(std::sync::atomic::Ordering::Relaxed) as u64) << 32;
        if name != 0 {
            bell::ring_named(name, "w");
        }
    }

    /// How often the watcher looks at the slots (newcomers ring it).
    pub(super) const LOOK_MS: i32 = 1000;

    fn pidfd_open(pid: u32) -> Option<i32> {
        // SAFETY: the system call takes a pid and flags.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0 as libc::c_long) };
        (fd >= 0).then_some(fd as i32)
    }

    fn close(fd: i32) {
        // SAFETY: a descriptor of this module, closed once.
        unsafe { libc::close(fd) };
    }

    /// The epoll token of the watcher's socket (a pidfd's token is its number).
    const WAKE: u64 = u64::MAX;

    pub(super) struct Poller {
        ep: i32,
        sock: i32,
    }

    impl Poller {
        /// `None`: no pidfd (kernels before 5.3) or no epoll.
        pub(super) fn new() -> Option<Poller> {
            close(pidfd_open(std::process::id())?);
            // SAFETY: see above.
            let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if ep < 0 {
                return None;
            }
            let sock = bell::bind_named("w");
            if sock >= 0 {
                let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: WAKE };
                // SAFETY: see above.
                unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, sock, &mut ev) };
            }
            Some(Poller { ep, sock })
        }

        /// A pidfd of process `pid` (not yet followed).
        pub(super) fn open(&mut self, pid: u32) -> Option<i32> {
            pidfd_open(pid)
        }

        /// Follows `fd`; false (and closed): cannot.
        pub(super) fn add(&mut self, fd: i32) -> bool {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
            // SAFETY: see above.
            let added = unsafe { libc::epoll_ctl(self.ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } == 0;
            if !added {
                close(fd);
            }
            added
        }

        /// Stops following `fd` (if it was) and closes it. Taken out of the epoll set
        /// first: closing alone leaves it there while any other descriptor
        /// refers to the same pidfd (a child forked meanwhile, before its
        /// exec), and a pidfd that has fired stays readable. So the number
        /// of a pidfd in the set names no other one.
        pub(super) fn remove(&mut self, fd: i32) {
            // SAFETY: see above.
            unsafe { libc::epoll_ctl(self.ep, libc::EPOLL_CTL_DEL, fd, ptr::null_mut()) };
            close(fd);
        }

        /// Sleeps until a followed process ends, the watcher is told to
        /// look, or `ms` pass; `fired`: the pidfds of processes that ended.
        pub(super) fn wait(&mut self, ms: i32, fired: &mut Vec<i32>) {
            let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
            // SAFETY: see above.
            let n = unsafe { libc::epoll_wait(self.ep, events.as_mut_ptr(), events.len() as i32, ms) };
            for ev in events.iter().take(n.max(0) as usize) {
                if ev.u64 == WAKE {
                    let mut buf = [0u8; 64];
                    // SAFETY: see above; a non-blocking socket.
                    while unsafe {
                        libc::recv(self.sock, buf.as_mut_ptr() as *mut c_void, buf.len(), libc::MSG_DONTWAIT)
                    } > 0
                    {}
                } else {
                    fired.push(ev.u64 as i32);
                }
            }
        }
    }
}

/// Windows: a thread-pool wait (`RegisterWaitForSingleObject`) per process
/// handle, whose callback notes the handle and sets the watcher's named
/// event, on which the watcher sleeps: no limit of 64 handles per wait.
#[cfg(windows)]
mod windows {
    use std::collections::HashMap;
    use std::ffi::c_void;
    use std::sync::OnceLock;

    use parking_lot::Mutex;

    use super::super::{wide, CloseHandle, CreateEventW, Handle, SetEvent, WaitForSingleObject};
    use futex_core::shared::Slot;

    type Callback = extern "system" fn(context: *mut c_void, timed_out: u8);

    #[link(name = "kernel32")]
    extern "system" {
        fn OpenProcess(access: u32, inherit: i32, pid: u32) -> Handle;
        fn OpenEventW(access: u32, inherit: i32, name: *const u16) -> Handle;
        fn RegisterWaitForSingleObject(
            wait: *mut Handle,
            object: Handle,
            callback: Callback,
            context: *mut c_void,
            milliseconds: u32,
            flags: u32,
        ) -> i32;
        fn UnregisterWaitEx(wait: Handle, completion: Handle) -> i32;
    }

    const SYNCHRONIZE: u32 = 0x0010_0000;
    const EVENT_MODIFY_STATE: u32 = 0x0002;
    const INFINITE: u32 = u32::MAX;
    const WT_EXECUTEONLYONCE: u32 = 0x0000_0008;
    /// `UnregisterWaitEx`'s completion: return once a running callback is done.
    const WAIT_FOR_CALLBACKS: Handle = -1isize as Handle;

    // SAFETY (for the calls below): handles this module opened, closed once;
    // NUL-terminated names.

    /// A process handle (as an address: it is sent to the watcher's thread).
    pub(super) type Proc = usize;

    /// Windows has one namespace of pids.
    pub(super) fn namespace() -> u32 {
        1
    }

    /// How often the watcher looks at the slots (newcomers set its event).
    pub(super) const LOOK_MS: i32 = 1000;

    fn close(h: usize) {
        // SAFETY: see above.
        unsafe { CloseHandle(h as Handle) };
    }

    fn event_name(pid: u32) -> Vec<u16> {
        wide(&format!(r"Local\shared-futex.deaths.{pid}"))
    }

    /// The watcher's own event, once it runs.
    static OWN: OnceLock<usize> = OnceLock::new();

    /// Process handles whose process ended, noted by the thread pool's callback.
    static FIRED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

    extern "system" fn exited(context: *mut c_void, _timed_out: u8) {
        FIRED.lock().push(context as usize);
        ring_own();
    }

    pub(super) fn ring_own() {
        if let Some(&h) = OWN.get() {
            // SAFETY: see above (never closed).
            unsafe { SetEvent(h as Handle) };
        }
    }

    pub(super) fn ring(slot: &Slot) {
        let name = event_name(slot.pid.load(std::sync::atomic::Ordering::Relaxed));
        // SAFETY: see above. None such (no watcher there): nothing to tell.
        unsafe {
            let h = OpenEventW(EVENT_MODIFY_STATE, 0, name.as_ptr());
            if !h.is_null() {
                SetEvent(h);
                CloseHandle(h);
            }
        }
    }

    /// The thread-pool wait of each process handle followed.
    pub(super) struct Poller {
        waits: HashMap<usize, usize>,
    }

    impl Poller {
        pub(super) fn new() -> Option<Poller> {
            let name = event_name(std::process::id());
            // SAFETY: see above; an auto-reset event, not set.
            let own = unsafe { CreateEventW(std::ptr::null_mut(), 0, 0, name.as_ptr()) };
            if own.is_null() {
                return None;
            }
            OWN.set(own as usize).ok()?;
            Some(Poller { waits: HashMap::new() })
        }

        /// A handle of process `pid` (not yet followed).
        pub(super) fn open(&mut self, pid: u32) -> Option<usize> {
            // SAFETY: see above.
            let h = unsafe { OpenProcess(SYNCHRONIZE, 0, pid) };
            (!h.is_null()).then_some(h as usize)
        }

        /// Follows `h`; false (and closed): the thread pool refused.
        pub(super) fn add(&mut self, h: usize) -> bool {
            let mut wait: Handle = std::ptr::null_mut();
            // SAFETY: see above; the callback is a plain function, its
            // context the handle's value.
            let ok = unsafe {
                RegisterWaitForSingleObject(
                    &mut wait,
                    h as Handle,
                    exited,
                    h as *mut c_void,
                    INFINITE,
                    WT_EXECUTEONLYONCE,
                )
            } != 0;
            if !ok {
                close(h);
                return false;
            }
            self.waits.insert(h, wait as usize);
            true
        }

        /// Stops following `h` (if it was) and closes it. Its callback, if
        /// it ran meanwhile, is done and forgotten first: the handle's
        /// number may name another process once closed.
        pub(super) fn remove(&mut self, h: usize) {
            if let Some(wait) = self.waits.remove(&h) {
                // SAFETY: a wait registered here, unregistered once.
                unsafe { UnregisterWaitEx(wait as Handle, WAIT_FOR_CALLBACKS) };
                FIRED.lock().retain(|&x| x != h);
            }
            close(h);
        }

        /// Sleeps until a followed process ends, the watcher is told to
        /// look, or `ms` pass; `fired`: the handles of processes that ended.
        pub(super) fn wait(&mut self, ms: i32, fired: &mut Vec<usize>) {
            if let Some(&own) = OWN.get() {
                // SAFETY: see above (never closed).
                unsafe { WaitForSingleObject(own as Handle, ms as u32) };
            }
            fired.append(&mut FIRED.lock());
        }
    }
}

/// macOS: one kqueue, an `EVFILT_PROC` / `NOTE_EXIT` event per process
/// followed (by pid: one for all the slots of that process, counted), and
/// an `EVFILT_USER` event for this process's own new regions. Other
/// processes cannot tell this watcher of a newcomer: it looks five times a
/// second.
#[cfg(target_os = "macos")]
mod macos {
    use std::collections::HashMap;
    use std::ptr;
    use std::sync::OnceLock;

    use futex_core::shared::Slot;

    // SAFETY (for the calls below): the kqueue this module made, with
    // arrays of the sizes given.

    /// A pid whose exit is registered with the kqueue.
    pub(super) type Proc = i32;

    /// macOS has no pid namespaces.
    pub(super) fn namespace() -> u32 {
        1
    }

    /// How often the watcher looks at the slots (no newcomer tells it).
    pub(super) const LOOK_MS: i32 = 200;

    /// The ident of the watcher's `EVFILT_USER` event.
    const WAKE: usize = 0;

    /// The watcher's kqueue, once it runs.
    static OWN: OnceLock<i32> = OnceLock::new();

    fn change(kq: i32, ident: usize, filter: i16, flags: u16, fflags: u32) -> bool {
        // SAFETY: an all-zero kevent is valid; the fields are set below.
        let mut ev: libc::kevent = unsafe { std::mem::zeroed() };
        ev.ident = ident;
        ev.filter = filter;
        ev.flags = flags;
        ev.fflags = fflags;
        // SAFETY: see above.
        unsafe { libc::kevent(kq, &ev, 1, ptr::null_mut(), 0, ptr::null()) == 0 }
    }

    pub(super) fn ring_own() {
        if let Some(&kq) = OWN.get() {
            change(kq, WAKE, libc::EVFILT_USER, 0, libc::NOTE_TRIGGER);
        }
    }

    /// No message between the watchers of two processes here.
    pub(super) fn ring(_slot: &Slot) {}

    pub(super) struct Poller {
        kq: i32,
        /// How many followed slots each pid has.
        follows: HashMap<i32, u32>,
    }

    impl Poller {
        pub(super) fn new() -> Option<Poller> {
            // SAFETY: see above.
            let kq = unsafe { libc::kqueue() };
            if kq < 0 {
                return None;
            }
            if !change(kq, WAKE, libc::EVFILT_USER, libc::EV_ADD | libc::EV_CLEAR, 0) {
                // SAFETY: the kqueue just made, closed once.
                unsafe { libc::close(kq) };
                return None;
            }
            OWN.set(kq).ok()?;
            Some(Poller { kq, follows: HashMap::new() })
        }

        /// Registers the exit of process `pid` (`None`: no such process).
        pub(super) fn open(&mut self, pid: u32) -> Option<i32> {
            let pid = i32::try_from(pid).ok().filter(|&p| p > 0)?;
            let n = self.follows.entry(pid).or_insert(0);
            if *n == 0
                && !change(self.kq, pid as usize, libc::EVFILT_PROC, libc::EV_ADD | libc::EV_ONESHOT, libc::NOTE_EXIT)
            {
                self.follows.remove(&pid);
                return None;
            }
            *n += 1;
            Some(pid)
        }

        /// Registered at `open`.
        pub(super) fn add(&mut self, _pid: i32) -> bool {
            true
        }

        /// One slot of `pid` is no longer followed; the event goes with the last.
        pub(super) fn remove(&mut self, pid: i32) {
            let Some(n) = self.follows.get_mut(&pid) else { return };
            *n -= 1;
            if *n == 0 {
                self.follows.remove(&pid);
                // Already gone if it fired (one-shot).
                change(self.kq, pid as usize, libc::EVFILT_PROC, libc::EV_DELETE, 0);
            }
        }

        /// Sleeps until a followed process exits, the watcher is told to
        /// look, or `ms` pass; `fired`: the pids that exited.
        pub(super) fn wait(&mut self, ms: i32, fired: &mut Vec<i32>) {
            // SAFETY: an all-zero kevent is valid.
            let mut events: [libc::kevent; 32] = unsafe { std::mem::zeroed() };
            let timeout = libc::timespec {
                tv_sec: (ms / 1000) as libc::time_t,
                tv_nsec: (ms % 1000) as libc::c_long * 1_000_000,
            };
            // SAFETY: see above.
            let n =
                unsafe { libc::kevent(self.kq, ptr::null(), 0, events.as_mut_ptr(), events.len() as i32, &timeout) };
            for ev in events.iter().take(n.max(0) as usize) {
                if ev.filter == libc::EVFILT_PROC && ev.fflags & libc::NOTE_EXIT != 0 {
                    fired.push(ev.ident as i32);
                }
            }
        }
    }
}
