//! The watcher of deaths (Linux): one thread per process that learns at once
//! when another process of a region it maps dies, and then counts an end in
//! that region and wakes every watching waiter there (futex-core's
//! `Queues::end_seen`). Without it a sleeper over region memory learns of a
//! death only by looking again, so it sleeps in slices of 50 ms; with it, a
//! slice only guards against a failure of the watcher, and lasts a second.
//!
//! For each live process slot of each region mapped here, the watcher holds
//! a pidfd (`pidfd_open`, Linux 5.3+) of the slot's process, polled with
//! epoll: it becomes readable when the process has exited, after the kernel
//! closed its files and so released the slot's record lock.
//!
//! A pid names a process only for as long as it lives, and only in its pid
//! namespace, so a pidfd is trusted only if, after it was opened, the slot
//! is still held (its record lock), still has the generation read before,
//! and its claimer named the same pid namespace as this process (the
//! slot's `ns`, which the claimer sets after its pid): then the process
//! holding the slot lived after the pidfd was made, so it is the pidfd's.
//! A slot whose namespace differs (a container sharing the region's
//! directory) cannot be followed: the region is then not *watched*, and its
//! waits use short slices.
//!
//! A process that claims a slot tells the watchers of the others (a byte to
//! `shared-futex-bell/<their bells>/w`, the watcher's own socket beside the
//! threads' bells), and each looks at the slots again. A slot that changed
//! generation, or that is found free where a process was followed or was
//! never seen alive, counts as an end. A watcher also looks every second,
//! should a message be lost.

use std::collections::HashMap;
use std::ffi::c_void;
use std::os::unix::fs::MetadataExt;
use std::ptr;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, LazyLock, OnceLock, Weak};

use super::bell;
use crate::region::{Region, REGIONS};
use futex_core::shared::Os;

/// This process's pid namespace (the low 32 bits of its inode, never 0),
/// or 0 where `/proc` cannot say.
pub(super) static NS: LazyLock<u32> =
    LazyLock::new(|| std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| (m.ino() as u32).max(1)));

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
        bell::ring_named(*bell::BELLS, "w");
    }
    let q = &region.queues;
    let me = q.my_slot();
    for i in 0..q.header().slots.load(Relaxed) {
        let slot = q.slot(i);
        if i == me || slot.gen.load(Relaxed) == 0 {
            continue;
        }
        let name = slot.bells[0].load(Relaxed) as u64 | (slot.bells[1].load(Relaxed) as u64) << 32;
        if name != 0 {
            bell::ring_named(name, "w");
        }
    }
}

// SAFETY (for the calls below): plain system calls on descriptors this
// module owns, with buffers of the sizes given.

fn pidfd_open(pid: u32) -> Option<i32> {
    // SAFETY: the system call takes a pid and flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0 as libc::c_long) };
    (fd >= 0).then_some(fd as i32)
}

fn close(fd: i32) {
    // SAFETY: a descriptor of this module, closed once.
    unsafe { libc::close(fd) };
}

/// Stops following pidfd `fd` and closes it. Taken out of the epoll set
/// first: closing alone leaves it there while any other descriptor refers
/// to the same pidfd (a child forked meanwhile, before its exec), and a
/// pidfd that has fired stays readable.
fn unfollow(ep: i32, fd: i32) {
    // SAFETY: see above.
    unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, ptr::null_mut()) };
    close(fd);
}

/// The epoll token of the watcher's socket (a pidfd's token is its number).
const WAKE: u64 = u64::MAX;

/// A slot of a region as last seen, by (the region's address, the slot).
type Slots = HashMap<(usize, u32), Followed>;

struct Followed {
    region: Weak<Region>,
    gen: u32,
    /// The pidfd, or -1: the slot was seen free (or not followable) with
    /// this generation.
    fd: i32,
}

/// Starts the watcher thread. `None`: this system cannot (no pidfd, no epoll).
fn start() -> Option<()> {
    // pidfd_open of this process: ENOSYS on kernels before 5.3.
    let me = pidfd_open(std::process::id())?;
    close(me);
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
    std::thread::Builder::new().name("shared-futex deaths".to_owned()).spawn(move || run(ep, sock)).ok()?;
    Some(())
}

fn run(ep: i32, sock: i32) {
    let mut followed = Slots::new();
    // Regions looked at before (by address): the first look at one is a
    // baseline, whose free slots are nobody's death.
    let mut seen: Vec<Weak<Region>> = Vec::new();
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
    loop {
        look(ep, &mut followed, &mut seen);
        // SAFETY: see above.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, 1000) };
        for ev in events.iter().take(n.max(0) as usize) {
            if ev.u64 == WAKE {
                let mut buf = [0u8; 64];
                // SAFETY: see above; non-blocking socket.
                while unsafe { libc::recv(sock, buf.as_mut_ptr() as *mut c_void, buf.len(), libc::MSG_DONTWAIT) } > 0 {}
                continue;
            }
            // Exited. (A pidfd leaves the set before it is closed, so its
            // number names no other one here.)
            let Some(f) = followed.values_mut().find(|f| f.fd >= 0 && f.fd as u64 == ev.u64) else { continue };
            unfollow(ep, f.fd);
            // Seen gone with this generation: not counted again.
            f.fd = -1;
            if let Some(region) = f.region.upgrade() {
                region.queues.end_seen();
            }
        }
    }
}

/// Looks at every slot of every region mapped here: follows the processes
/// not yet followed, counts the ends it finds, and says per region whether
/// every process there is followed.
fn look(ep: i32, followed: &mut Slots, seen: &mut Vec<Weak<Region>>) {
    let regions: Vec<Arc<Region>> = REGIONS.read().clone();
    // Regions no longer mapped: let go of what they had.
    followed.retain(|_, f| {
        let keep = f.region.upgrade().is_some_and(|r| regions.iter().any(|x| Arc::ptr_eq(x, &r)));
        if !keep && f.fd >= 0 {
            unfollow(ep, f.fd);
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
                if f.fd >= 0 && !live {
                    // Its process let the region go and lives on: what
                    // its threads held there is free to take over.
                    unfollow(ep, f.fd);
                    f.fd = -1;
                    ended = true;
                } else if f.fd < 0 && live {
                    // Living, and not followable (another namespace).
                    all = false;
                }
                continue;
            }
            let old = followed.remove(&key).map(|f| f.fd);
            if let Some(fd) = old {
                if fd >= 0 {
                    // Another generation: the process followed is gone (it
                    // died, or let the region go), and its pidfd has not
                    // said so yet.
                    unfollow(ep, fd);
                    ended = true;
                }
            }
            let alive = q.os().slot_alive(i);
            let ns = slot.ns.load(SeqCst);
            let fd = if !alive {
                // Free: a process that claimed it since the last look (or
                // was never seen alive here) and is gone already.
                ended |= !first && old.is_none();
                -1
            } else if ns == 0 {
                // Mid-claim: its claimer will say when it is done.
                all = false;
                continue;
            } else if ns != mine {
                all = false;
                -1
            } else {
                match follow(q, i, gen, slot.pid.load(SeqCst)) {
                    Some(fd) => fd,
                    None => {
                        // Gone meanwhile, or claimed again: look again soon.
                        all = false;
                        continue;
                    }
                }
            };
            if fd >= 0 {
                let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
                // SAFETY: see above.
                if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                    close(fd);
                    all = false;
                    continue;
                }
            }
            followed.insert(key, Followed { region: Arc::downgrade(region), gen, fd });
        }
        region.watched.store(all, Release);
        if ended {
            q.end_seen();
        }
    }
}

/// A pidfd of the process holding slot `i` with generation `gen`, whose pid
/// the slot says is `pid`; `None` if that cannot be made sure of.
fn follow(q: &futex_core::shared::Queues<super::Sys>, i: u32, gen: u32, pid: u32) -> Option<i32> {
    let fd = pidfd_open(pid)?;
    // Held, by the same claim, after the pidfd was made: that claimer was
    // alive then, so the pid was still its own.
    if q.os().slot_alive(i) && q.slot(i).gen.load(SeqCst) == gen && q.slot(i).pid.load(SeqCst) == pid {
        Some(fd)
    } else {
        close(fd);
        None
    }
}
