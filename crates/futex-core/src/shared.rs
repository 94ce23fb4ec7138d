//! Wait queues that live in memory shared by several processes: the second
//! home of the wait path, for addresses inside a shared region.
//!
//! The process-wide [`WaitTable`](crate::WaitTable) keeps its queues in the
//! process's own heap, behind `parking_lot` mutexes, and learns of a thread's
//! end from that thread's own teardown. Neither works across processes: a
//! process killed with `SIGKILL` runs no teardown, and may die at any
//! instruction, holding any lock. So a region's control block holds:
//!
//! * **process slots**: a process that maps the region claims one. Its
//!   liveness is not a pid (pids are recycled) but a kernel object the
//!   embedder ties to the slot and the kernel releases when the process dies
//!   (a record lock on a byte of the region's file: [`Os::slot_alive`]).
//!   Each claim increments the slot's generation, and everything a process
//!   leaves in the block is stamped with its *tag* (slot and generation), so
//!   a tag of an earlier generation is dead without asking the kernel.
//! * **buckets**: a lock word and a doubly-linked FIFO list of waiter
//!   records, per hash of the waited-on offset. The lock word names its
//!   holder's tag; a locker that waits too long asks whether the holder is
//!   alive, takes a dead holder's lock over, and rebuilds the bucket's list
//!   from the records themselves (below), so a process killed inside a
//!   critical section leaves nothing half-done behind.
//! * **waiter records**: one per queued waiter: its state word (which is
//!   also the word its thread sleeps on: [`Os::wait`]), the offset it waits
//!   on, its arrival number in the bucket, its links. The state word holds
//!   the owner's tag, so a record is claimed, queued, notified and freed by
//!   single atomic stores or compare-exchanges.
//!
//! # The protocol
//!
//! It is the wait table's, with the same guarantees:
//!
//! * **wait**: lock the bucket, compare the value under the lock, link a
//!   record at the tail as `WAITING`, unlock, sleep on the record's state
//!   word while it is still `WAITING` (the kernel compares and queues
//!   atomically: a change made before the sleep is never missed).
//! * **notify**: lock the bucket, walk the list from the head, mark up to
//!   `count` records of the offset `NOTIFIED` and unlink them, unlock, then
//!   wake their sleepers. A record whose owner is dead is unlinked, freed and
//!   not counted: `notify` counts only waiters that will see the wake-up.
//! * **one outcome**: a record leaves its list only under the bucket lock,
//!   and whoever takes it out decides: notify (ok), its own waiter on a
//!   timeout (timed out) or cancellation (none).
//! * **order**: arrival numbers are taken under the bucket lock, so the list
//!   is FIFO per offset whatever order the kernel wakes sleepers in.
//!
//! # Recovery
//!
//! The truth of a bucket is its records' state words, which change only by
//! single atomic operations; the list is derived from them. A record is
//! marked `WAITING` (after its offset and arrival number are written) before
//! it is linked, and marked `NOTIFIED` or taken back before it is unlinked.
//! Whoever takes over the lock of a dead holder therefore rebuilds the list
//! from every `WAITING` record of the bucket whose owner lives, in arrival
//! order, and frees the records of dead owners: whatever instruction the
//! holder died at, no live waiter is lost and no dead one stays queued.

use crate::sync::{AtomicU32, Ordering::*};
use std::time::{Duration, Instant};

use crate::table::WaitResult;

/// What the embedder provides: a futex on shared memory, and the liveness of
/// process slots.
pub trait Os: Sync {
    /// Sleeps while `*word == expected`, at most `timeout` (`None`: no
    /// limit). May return early for no reason; the caller looks again.
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>);
    /// Wakes up to `count` sleepers of `word`, in any process.
    fn wake(&self, word: &AtomicU32, count: u32);
    /// Whether the process holding slot `slot` is alive. Never asked about
    /// the caller's own slot.
    fn slot_alive(&self, slot: u32) -> bool;
    /// Rings bell `bell` of the process whose bells are named by `bells`
    /// (its slot's [`Slot::bells`]): a wake-up that reaches the waiting
    /// thread directly, not through its process's doorbell. False: it could
    /// not (no such bell, or none on this platform); the doorbell is rung
    /// instead. True must mean that the bell's owner will look at its
    /// notified records, or that the owner is gone.
    fn ring_bell(&self, _bells: u64, _bell: u32) -> bool {
        false
    }
}

/// The first word of a ready control block.
pub const MAGIC: u32 = u32::from_le_bytes(*b"SFRG");
/// The layout of the control block; a block of another layout is refused.
pub const LAYOUT: u32 = 2;

/// Most process slots a block can have (the tag's slot field).
pub const MAX_SLOTS: u32 = 4096;

const KIND: u32 = 3;
const FREE: u32 = 0;
const RESERVED: u32 = 1;
const WAITING: u32 = 2;
const NOTIFIED: u32 = 3;
/// A record waited for by an async waiter: its notifier rings the owner's doorbell.
const ASYNC: u32 = 1;
/// A watching waiter's record: every end seen wakes it ([`Queues::end_seen`]).
const WATCHING: u32 = 2;

const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// Sleeps on a contended bucket lock last this long before the holder's
/// liveness is asked again.
const HOLDER_CHECK: Duration = Duration::from_millis(20);

/// The sizes a control block is made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub slots: u32,
    pub buckets: u32,
    pub records: u32,
    /// Thread slots: owners of the region's locks ([`Queues::claim_thread`]).
    pub threads: u32,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { slots: 256, buckets: 256, records: 4096, threads: 1024 }
    }
}

/// Most thread slots a block can have (an owner id's index field).
pub const MAX_THREADS: u32 = 4095;

/// The control block's first 128 bytes.
#[repr(C)]
pub struct Header {
    /// [`MAGIC`] once the block is ready.
    pub magic: AtomicU32,
    /// [`LAYOUT`].
    pub layout: AtomicU32,
    pub slots: AtomicU32,
    pub buckets: AtomicU32,
    pub records: AtomicU32,
    /// Size of the user's part of the region, in bytes.
    pub user_bytes: AtomicU32,
    /// Where the next record search starts.
    hint: AtomicU32,
    pub threads: AtomicU32,
    /// Ends seen: a thread that gave its owner id back, a process that
    /// gave its slot back or was found dead. Each is counted, then every
    /// watching waiter is woken ([`Queues::end_seen`]).
    pub ends: AtomicU32,
    _reserved: [AtomicU32; 7],
    /// The embedder's version string (NUL-padded), so that two builds that
    /// might lay out their users' words differently refuse each other.
    pub build: [AtomicU32; 16],
}

/// A process slot.
#[repr(C, align(64))]
pub struct Slot {
    /// Incremented by every claim.
    pub gen: AtomicU32,
    /// The claimer's pid, for display only (never for liveness).
    pub pid: AtomicU32,
    /// Rung (incremented and woken) when one of the slot's async waiters is notified.
    pub doorbell: AtomicU32,
    /// The name of the process's bells (low, high word; 0: none): see
    /// [`Os::ring_bell`]. Set by the process after its claim, before it
    /// queues a record that names a bell.
    pub bells: [AtomicU32; 2],
    /// The embedder's name of the claimer's pid namespace (0: unknown), so
    /// that `pid` is only read where it means the same process. Set after
    /// the claim.
    pub ns: AtomicU32,
}

#[repr(C, align(64))]
struct Bucket {
    lock: AtomicU32,
    /// Record index + 1 of the oldest and newest waiter; 0: none.
    head: AtomicU32,
    tail: AtomicU32,
    /// Next arrival number.
    seq: AtomicU32,
}

/// A thread slot: a thread of some process that owns, or may own, the
/// region's locks. Its owner id is its index and generation.
#[repr(C)]
struct ThreadSlot {
    /// The tag of the thread's process; 0: free.
    tag: AtomicU32,
    /// Incremented by every claim and every release.
    gen: AtomicU32,
}

#[repr(C)]
struct Record {
    /// kind (2 bits) | owner tag.
    state: AtomicU32,
    key: AtomicU32,
    seq: AtomicU32,
    flags: AtomicU32,
    /// Record index + 1; 0: none.
    next: AtomicU32,
    prev: AtomicU32,
    /// The bell an async record's notifier rings (0: the doorbell).
    bell: AtomicU32,
    _reserved: AtomicU32,
}

impl Layout {
    fn slots_at(&self) -> usize {
        std::mem::size_of::<Header>()
    }
    fn buckets_at(&self) -> usize {
        self.slots_at() + self.slots as usize * std::mem::size_of::<Slot>()
    }
    fn records_at(&self) -> usize {
        self.buckets_at() + self.buckets as usize * std::mem::size_of::<Bucket>()
    }
    fn threads_at(&self) -> usize {
        self.records_at() + self.records as usize * std::mem::size_of::<Record>()
    }
    /// Bytes of a control block with this layout, rounded up to 4 KiB.
    pub fn bytes(&self) -> usize {
        let end = self.threads_at() + self.threads as usize * std::mem::size_of::<ThreadSlot>();
        end.div_ceil(4096) * 4096
    }
    /// Whether the sizes are usable (slots and buckets powers of two, within limits).
    pub fn is_valid(&self) -> bool {
        (1..=MAX_SLOTS).contains(&self.slots)
            && self.buckets.is_power_of_two()
            && self.buckets <= 1 << 16
            && (1..=1 << 24).contains(&self.records)
            && (1..=MAX_THREADS).contains(&self.threads)
    }
}

/// A process's name in the block: slot and generation, as stored in state
/// and lock words (the two low bits are left to the kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag(u32);

impl Tag {
    fn new(slot: u32, gen: u32) -> Tag {
        Tag((slot << 2) | ((gen & 0x3ffff) << 14))
    }
    fn of(word: u32) -> Tag {
        Tag(word & !KIND)
    }
    /// The slot this tag names.
    pub fn slot(self) -> u32 {
        (self.0 >> 2) & (MAX_SLOTS - 1)
    }
    fn gen(self) -> u32 {
        self.0 >> 14
    }
}

/// The queues of one control block, as one process sees them.
pub struct Queues<O: Os> {
    header: *const Header,
    slots: *const Slot,
    buckets: *const Bucket,
    records: *const Record,
    threads: *const ThreadSlot,
    layout: Layout,
    me: Tag,
    os: O,
}

// SAFETY: every field points into the shared block, which is only accessed
// through atomics; the block outlives the value (`attach`'s contract).
unsafe impl<O: Os + Send> Send for Queues<O> {}
unsafe impl<O: Os> Sync for Queues<O> {}

/// Why a waiter could not be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// Every waiter record of the block is in use.
    Records,
}

/// Lays out a fresh control block at `base` (zeroed memory of
/// `layout.bytes()` bytes) and marks it ready.
///
/// # Safety
/// `base` points to `layout.bytes()` writable bytes that nobody else uses
/// until this returns, aligned to 64.
pub unsafe fn init(base: *mut u8, layout: Layout, user_bytes: u32, build: &[u8]) {
    // SAFETY: the contract; the header is within the block.
    let header = unsafe { &*(base as *const Header) };
    header.layout.store(LAYOUT, Relaxed);
    header.slots.store(layout.slots, Relaxed);
    header.buckets.store(layout.buckets, Relaxed);
    header.records.store(layout.records, Relaxed);
    header.threads.store(layout.threads, Relaxed);
    header.user_bytes.store(user_bytes, Relaxed);
    for (i, word) in header.build.iter().enumerate() {
        let mut b = [0u8; 4];
        for (j, byte) in b.iter_mut().enumerate() {
            *byte = build.get(i * 4 + j).copied().unwrap_or(0);
        }
        word.store(u32::from_le_bytes(b), Relaxed);
    }
    header.magic.store(MAGIC, Release);
}

/// The build string stored in a block's header.
pub fn build_of(header: &Header) -> Vec<u8> {
    let mut out: Vec<u8> = header.build.iter().flat_map(|w| w.load(Relaxed).to_le_bytes()).collect();
    while out.last() == Some(&0) {
        out.pop();
    }
    out
}

/// A control block of loom atomics (which cannot be made by zeroing
/// memory), for model tests: its base address, to [`Queues::attach`].
#[cfg(loom)]
pub fn model_block(layout: Layout, user_bytes: u32) -> *const u8 {
    use std::alloc::{alloc, Layout as Mem};
    let bytes = layout.bytes();
    // SAFETY: a fresh allocation of `bytes` bytes, aligned to 4096; every
    // structure is written in place before use and the block is leaked.
    unsafe {
        let base = alloc(Mem::from_size_align(bytes, 4096).unwrap());
        let z = || AtomicU32::new(0);
        std::ptr::write(
            base as *mut Header,
            Header {
                magic: z(),
                layout: z(),
                slots: z(),
                buckets: z(),
                records: z(),
                user_bytes: z(),
                hint: z(),
                threads: z(),
                ends: z(),
                _reserved: std::array::from_fn(|_| z()),
                build: std::array::from_fn(|_| z()),
            },
        );
        for i in 0..layout.slots as usize {
            let at = base.add(layout.slots_at()) as *mut Slot;
            std::ptr::write(at.add(i), Slot { gen: z(), pid: z(), doorbell: z(), bells: [z(), z()], ns: z() });
        }
        for i in 0..layout.buckets as usize {
            let at = base.add(layout.buckets_at()) as *mut Bucket;
            std::ptr::write(at.add(i), Bucket { lock: z(), head: z(), tail: z(), seq: z() });
        }
        for i in 0..layout.records as usize {
            let at = base.add(layout.records_at()) as *mut Record;
            std::ptr::write(
                at.add(i),
                Record { state: z(), key: z(), seq: z(), flags: z(), next: z(), prev: z(), bell: z(), _reserved: z() },
            );
        }
        for i in 0..layout.threads as usize {
            let at = base.add(layout.threads_at()) as *mut ThreadSlot;
            std::ptr::write(at.add(i), ThreadSlot { tag: z(), gen: z() });
        }
        init(base, layout, user_bytes, b"model");
        base
    }
}

impl<O: Os> Queues<O> {
    /// This process's view of the block at `base`, before it has a slot.
    ///
    /// # Safety
    /// `base` points to a ready block of `layout` that stays mapped as long
    /// as the returned value lives.
    pub unsafe fn attach(base: *const u8, layout: Layout, os: O) -> Self {
        // SAFETY: offsets within the block (the contract).
        unsafe {
            Queues {
                header: base as *const Header,
                slots: base.add(layout.slots_at()) as *const Slot,
                buckets: base.add(layout.buckets_at()) as *const Bucket,
                records: base.add(layout.records_at()) as *const Record,
                threads: base.add(layout.threads_at()) as *const ThreadSlot,
                layout,
                me: Tag(0),
                os,
            }
        }
    }

    pub fn os(&self) -> &O {
        &self.os
    }

    pub fn header(&self) -> &Header {
        // SAFETY: `attach`'s contract.
        unsafe { &*self.header }
    }

    pub fn slot(&self, i: u32) -> &Slot {
        debug_assert!(i < self.layout.slots);
        // SAFETY: `i` is below the slot count (callers' tags come from the block).
        unsafe { &*self.slots.add((i % self.layout.slots) as usize) }
    }

    fn bucket(&self, i: u32) -> &Bucket {
        // SAFETY: in bounds by the modulo.
        unsafe { &*self.buckets.add((i % self.layout.buckets) as usize) }
    }

    fn record(&self, i: u32) -> &Record {
        // SAFETY: in bounds by the modulo.
        unsafe { &*self.records.add((i % self.layout.records) as usize) }
    }

    fn bucket_of(&self, key: u32) -> u32 {
        (key.wrapping_mul(0x9E37_79B9) >> 16) & (self.layout.buckets - 1)
    }

    /// This process's slot (valid after [`claim_slot`](Self::claim_slot)).
    pub fn my_slot(&self) -> u32 {
        self.me.slot()
    }

    /// Claims a slot: the first whose kernel lock `try_lock(slot)` takes
    /// (it fails for a slot whose process lives), purging whatever the
    /// slot's dead process left. `None`: every slot is taken.
    pub fn claim_slot(&mut self, mut try_lock: impl FnMut(u32) -> bool, pid: u32) -> Option<u32> {
        for i in 0..self.layout.slots {
            if !try_lock(i) {
                continue;
            }
            let slot = self.slot(i);
            // Cleared before the generation moves on: whoever reads the
            // new generation reads 0 or this claimer's namespace (then its
            // pid too: `set_ns`).
            slot.ns.store(0, SeqCst);
            let gen = slot.gen.fetch_add(1, SeqCst).wrapping_add(1);
            slot.pid.store(pid, SeqCst);
            for w in &slot.bells {
                w.store(0, Relaxed);
            }
            self.me = Tag::new(i, gen);
            self.purge_slot(i);
            if gen != 1 {
                // The slot's last process is gone (its kernel lock is
                // free): an end, whether or not anyone saw it yet.
                self.end_seen();
            }
            return Some(i);
        }
        None
    }

    /// Frees the records a dead process of slot `i` left (its generation is
    /// already stale): unlinked ones at once, linked ones under their
    /// bucket's lock.
    fn purge_slot(&self, i: u32) {
        for r in 0..self.layout.records {
            let state = self.record(r).state.load(Acquire);
            if state == FREE || Tag::of(state).slot() != i || Tag::of(state) == self.me {
                continue;
            }
            self.reclaim(r, state);
        }
    }

    /// Frees record `r`, found in `state`, of a dead owner.
    fn reclaim(&self, r: u32, state: u32) {
        let rec = self.record(r);
        if state & KIND == WAITING {
            let b = self.bucket_of(rec.key.load(Relaxed));
            self.lock(b);
            if rec.state.load(Acquire) == state {
                self.unlink(b, r);
                rec.state.store(FREE, Release);
            }
            self.unlock(b);
        } else {
            let _ = rec.state.compare_exchange(state, FREE, AcqRel, Relaxed);
        }
    }

    /// Whether the process named by `tag` is gone.
    pub fn is_dead(&self, tag: Tag) -> bool {
        if tag == self.me {
            return false;
        }
        let slot = tag.slot();
        if slot >= self.layout.slots || self.slot(slot).gen.load(Acquire) & 0x3ffff != tag.gen() {
            return true;
        }
        !self.os.slot_alive(slot)
    }

    /// Locks bucket `b`. A holder found dead is replaced and the bucket rebuilt.
    fn lock(&self, b: u32) {
        let word = &self.bucket(b).lock;
        let mine = self.me.0 | LOCKED;
        if word.compare_exchange(0, mine, Acquire, Relaxed).is_ok() {
            return;
        }
        #[cfg(not(loom))]
        for _ in 0..64 {
            std::hint::spin_loop();
            if word.load(Relaxed) == 0 && word.compare_exchange(0, mine, Acquire, Relaxed).is_ok() {
                return;
            }
        }
        loop {
            let cur = word.load(Relaxed);
            if cur == 0 {
                // Taken as contended: someone else may sleep here.
                if word.compare_exchange(0, mine | CONTENDED, Acquire, Relaxed).is_ok() {
                    return;
                }
                continue;
            }
            if cur & CONTENDED == 0 && word.compare_exchange(cur, cur | CONTENDED, Relaxed, Relaxed).is_err() {
                continue;
            }
            let started = Instant::now();
            self.os.wait(word, cur | CONTENDED, Some(HOLDER_CHECK));
            // (Under loom a sleep is a yield: ask at once.)
            let slept = cfg!(loom) || started.elapsed() >= HOLDER_CHECK / 2;
            if word.load(Relaxed) == cur | CONTENDED
                && slept
                && self.is_dead(Tag::of(cur & !(LOCKED | CONTENDED)))
                && word.compare_exchange(cur | CONTENDED, mine | CONTENDED, Acquire, Relaxed).is_ok()
            {
                self.rebuild(b);
                return;
            }
        }
    }

    fn unlock(&self, b: u32) {
        let word = &self.bucket(b).lock;
        if word.swap(0, Release) & CONTENDED != 0 {
            self.os.wake(word, 1);
        }
    }

    /// Under bucket `b`'s lock, after its holder died: the list again, from
    /// the records (see "Recovery").
    fn rebuild(&self, b: u32) {
        let bucket = self.bucket(b);
        let next_seq = bucket.seq.load(Relaxed);
        let mut live = Vec::new();
        for r in 0..self.layout.records {
            let rec = self.record(r);
            let state = rec.state.load(Acquire);
            if state & KIND != WAITING || self.bucket_of(rec.key.load(Relaxed)) != b {
                continue;
            }
            if self.is_dead(Tag::of(state)) {
                let _ = rec.state.compare_exchange(state, FREE, AcqRel, Relaxed);
            } else {
                live.push((next_seq.wrapping_sub(rec.seq.load(Relaxed)), r));
            }
        }
        // Oldest (largest age) first.
        live.sort_by_key(|&(age, _)| std::cmp::Reverse(age));
        bucket.head.store(0, Relaxed);
        bucket.tail.store(0, Relaxed);
        for (_, r) in live {
            self.link(b, r);
        }
    }

    fn link(&self, b: u32, r: u32) {
        let bucket = self.bucket(b);
        let rec = self.record(r);
        let tail = bucket.tail.load(Relaxed);
        rec.prev.store(tail, Relaxed);
        rec.next.store(0, Relaxed);
        if tail == 0 {
            bucket.head.store(r + 1, Relaxed);
        } else {
            self.record(tail - 1).next.store(r + 1, Relaxed);
        }
        bucket.tail.store(r + 1, Relaxed);
    }

    fn unlink(&self, b: u32, r: u32) {
        let bucket = self.bucket(b);
        let rec = self.record(r);
        let (prev, next) = (rec.prev.load(Relaxed), rec.next.load(Relaxed));
        if prev == 0 {
            bucket.head.store(next, Relaxed);
        } else {
            self.record(prev - 1).next.store(next, Relaxed);
        }
        if next == 0 {
            bucket.tail.store(prev, Relaxed);
        } else {
            self.record(next - 1).prev.store(prev, Relaxed);
        }
        rec.prev.store(0, Relaxed);
        rec.next.store(0, Relaxed);
    }

    /// Takes a free record, or one a dead process left (unlinking it if it
    /// is still queued). `None`: all in use by live processes.
    pub fn alloc(&self) -> Option<u32> {
        let n = self.layout.records;
        let start = self.header().hint.load(Relaxed) % n;
        let mine = self.me.0 | RESERVED;
        for i in 0..n {
            let r = (start + i) % n;
            let rec = self.record(r);
            let state = rec.state.load(Relaxed);
            let took = if state == FREE {
                rec.state.compare_exchange(FREE, mine, Acquire, Relaxed).is_ok()
            } else if Tag::of(state).slot() != self.me.slot() && self.is_dead(Tag::of(state)) {
                // A dead process's record: a queued one leaves its list
                // first (under its bucket's lock), then it is free.
                if state & KIND == WAITING {
                    self.reclaim(r, state);
                    rec.state.compare_exchange(FREE, mine, Acquire, Relaxed).is_ok()
                } else {
                    rec.state.compare_exchange(state, mine, Acquire, Relaxed).is_ok()
                }
            } else {
                false
            };
            if took {
                rec.bell.store(0, Relaxed);
                self.header().hint.store(r + 1, Relaxed);
                return Some(r);
            }
        }
        None
    }

    /// Gives back a record this process holds `RESERVED`.
    pub fn free(&self, r: u32) {
        debug_assert_eq!(self.record(r).state.load(Relaxed), self.me.0 | RESERVED);
        self.record(r).state.store(FREE, Release);
    }

    /// Names this process's bells in its slot (see [`Os::ring_bell`]); 0: none.
    pub fn set_bells(&self, bells: u64) {
        let slot = self.slot(self.me.slot());
        slot.bells[0].store(bells as u32, Relaxed);
        slot.bells[1].store((bells >> 32) as u32, Relaxed);
    }

    /// Names this process's pid namespace in its slot (see [`Slot::ns`]):
    /// after its claim, which stored its pid before.
    pub fn set_ns(&self, ns: u32) {
        self.slot(self.me.slot()).ns.store(ns, SeqCst);
    }

    /// Reserved record `r`, queued as async, is to ring `bell` of this
    /// process when notified (0: the doorbell). Before [`enqueue`](Self::enqueue).
    pub fn set_bell(&self, r: u32, bell: u32) {
        self.record(r).bell.store(bell, Relaxed);
    }

    /// Queues reserved record `r` on `key` if `validate()`, run under the
    /// bucket lock, says so; an async record rings this process's doorbell
    /// when notified. False: not queued (the record stays reserved).
    pub fn enqueue(&self, r: u32, key: u32, is_async: bool, validate: impl FnOnce() -> bool) -> bool {
        self.enqueue_as(r, key, if is_async { ASYNC } else { 0 }, validate)
    }

    /// [`enqueue`](Self::enqueue) as a *watching* waiter: besides a notify,
    /// every end seen from now on ([`end_seen`](Self::end_seen)) wakes it
    /// as a notify would (uncounted). The caller's `validate` compares
    /// [`ends`](Self::ends) with the count it read before it looked at
    /// the state it waits on, so that an end after its look either stops
    /// it here or finds it queued.
    pub fn enqueue_watching(&self, r: u32, key: u32, is_async: bool, validate: impl FnOnce() -> bool) -> bool {
        self.enqueue_as(r, key, WATCHING | if is_async { ASYNC } else { 0 }, validate)
    }

    fn enqueue_as(&self, r: u32, key: u32, flags: u32, validate: impl FnOnce() -> bool) -> bool {
        let b = self.bucket_of(key);
        self.lock(b);
        if !validate() {
            self.unlock(b);
            return false;
        }
        let bucket = self.bucket(b);
        let rec = self.record(r);
        let seq = bucket.seq.load(Relaxed);
        bucket.seq.store(seq.wrapping_add(1), Relaxed);
        rec.key.store(key, Relaxed);
        rec.seq.store(seq, Relaxed);
        rec.flags.store(flags, Relaxed);
        rec.state.store(self.me.0 | WAITING, Release);
        self.link(b, r);
        self.unlock(b);
        true
    }

    /// Takes queued record `r` of this process back out (timeout, cancel).
    /// True: it was still queued and is now reserved again; false: it was
    /// notified (see [`take_notified`](Self::take_notified)).
    pub fn take(&self, r: u32) -> bool {
        let rec = self.record(r);
        let b = self.bucket_of(rec.key.load(Relaxed));
        self.lock(b);
        let queued = rec.state.load(Relaxed) == self.me.0 | WAITING;
        if queued {
            self.unlink(b, r);
            rec.state.store(self.me.0 | RESERVED, Relaxed);
        }
        self.unlock(b);
        queued
    }

    /// Record `r` of this process was notified: true once, for whoever
    /// claims the outcome (the record is then reserved again).
    pub fn take_notified(&self, r: u32) -> bool {
        self.record(r).state.compare_exchange(self.me.0 | NOTIFIED, self.me.0 | RESERVED, AcqRel, Relaxed).is_ok()
    }

    /// Whether record `r` of this process is notified (not yet claimed).
    pub fn is_notified(&self, r: u32) -> bool {
        self.record(r).state.load(Acquire) == self.me.0 | NOTIFIED
    }

    /// The address of record `r`: a key for this process's wait table that
    /// no other waiter uses while the record is this process's.
    pub fn record_address(&self, r: u32) -> usize {
        self.record(r) as *const Record as usize
    }

    /// The record at `address` (as [`record_address`](Self::record_address) gave it).
    pub fn record_at(&self, address: usize) -> u32 {
        ((address - self.records as usize) / std::mem::size_of::<Record>()) as u32
    }

    /// The offset record `r` waits on.
    pub fn key_of(&self, r: u32) -> u32 {
        self.record(r).key.load(Relaxed)
    }

    /// Blocks on `key` with record-less arguments: takes a record, queues it
    /// if `validate()`, and sleeps until notified, `deadline`, or
    /// `interrupted()` (asked every `slice`). An interrupted waiter that had
    /// been notified passes the wake-up on.
    pub fn wait(
        &self,
        key: u32,
        validate: impl FnOnce() -> bool,
        deadline: Option<Instant>,
        slice: Duration,
        interrupted: impl FnMut() -> bool,
    ) -> Result<WaitResult, Full> {
        self.wait_as(key, 0, validate, deadline, slice, interrupted)
    }

    /// [`wait`](Self::wait) as a watching waiter (see
    /// [`enqueue_watching`](Self::enqueue_watching)): an end seen wakes it
    /// with `Ok`.
    pub fn wait_watching(
        &self,
        key: u32,
        validate: impl FnOnce() -> bool,
        deadline: Option<Instant>,
        slice: Duration,
        interrupted: impl FnMut() -> bool,
    ) -> Result<WaitResult, Full> {
        self.wait_as(key, WATCHING, validate, deadline, slice, interrupted)
    }

    fn wait_as(
        &self,
        key: u32,
        flags: u32,
        validate: impl FnOnce() -> bool,
        deadline: Option<Instant>,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Result<WaitResult, Full> {
        let r = self.alloc().ok_or(Full::Records)?;
        if !self.enqueue_as(r, key, flags, validate) {
            self.free(r);
            return Ok(WaitResult::NotEqual);
        }
        let rec = self.record(r);
        let waiting = self.me.0 | WAITING;
        // A partner that answers within microseconds (a ping-pong) is met
        // without a futex sleep and wake-up, as in the process's table.
        crate::table::spin_until(|| rec.state.load(Acquire) != waiting);
        loop {
            if rec.state.load(Acquire) != waiting {
                self.free_notified(r);
                return Ok(WaitResult::Ok);
            }
            let now = Instant::now();
            let expired = deadline.is_some_and(|d| now >= d);
            let stop = !expired && interrupted();
            if expired || stop {
                if self.take(r) {
                    self.free(r);
                    return Ok(if stop { WaitResult::Interrupted } else { WaitResult::TimedOut });
                }
                self.free_notified(r);
                if stop {
                    self.notify(key, 1);
                    return Ok(WaitResult::Interrupted);
                }
                return Ok(WaitResult::Ok);
            }
            let sleep = deadline.map_or(slice, |d| slice.min(d - now));
            self.os.wait(&rec.state, waiting, Some(sleep));
        }
    }

    fn free_notified(&self, r: u32) {
        let taken = self.take_notified(r);
        debug_assert!(taken);
        self.free(r);
    }

    /// Wakes up to `count` waiters of `key`, oldest first; returns how many.
    /// Records of dead processes met on the way are freed and not counted.
    pub fn notify(&self, key: u32, count: usize) -> usize {
        if count == 0 {
            return 0;
        }
        let b = self.bucket_of(key);
        let mut woken: Vec<(u32, u32, Option<u32>)> = Vec::new();
        let mut alive: Vec<(Tag, bool)> = Vec::new();
        self.lock(b);
        let mut at = self.bucket(b).head.load(Relaxed);
        while at != 0 && woken.len() < count {
            let r = at - 1;
            let rec = self.record(r);
            at = rec.next.load(Relaxed);
            let state = rec.state.load(Relaxed);
            let tag = Tag::of(state);
            let live = match alive.iter().find(|(t, _)| *t == tag) {
                Some(&(_, live)) => live,
                None => {
                    let live = !self.is_dead(tag);
                    alive.push((tag, live));
                    live
                }
            };
            if !live {
                self.unlink(b, r);
                rec.state.store(FREE, Release);
            } else if rec.key.load(Relaxed) == key {
                rec.state.store(tag.0 | NOTIFIED, Release);
                self.unlink(b, r);
                let is_async = rec.flags.load(Relaxed) & ASYNC != 0;
                woken.push((r, tag.0 | NOTIFIED, is_async.then(|| rec.bell.load(Relaxed))));
            }
        }
        self.unlock(b);
        self.wake_records(&woken);
        woken.len()
    }

    /// Wakes the sleepers of records just marked `NOTIFIED` (record, its
    /// state, its bell if async), after their buckets' locks are let go.
    fn wake_records(&self, woken: &[(u32, u32, Option<u32>)]) {
        // The records may be reused from here on: a stray wake-up is one
        // more early return for their next sleeper, which looks again.
        let mut rung: Vec<(u32, u32)> = Vec::new();
        for &(r, state, bell) in woken {
            match bell {
                Some(bell) => {
                    let slot = Tag::of(state).slot();
                    if !rung.contains(&(slot, bell)) {
                        rung.push((slot, bell));
                    }
                }
                None => self.os.wake(&self.record(r).state, 1),
            }
        }
        let mut doorbells: Vec<u32> = Vec::new();
        for (slot, bell) in rung {
            // Another process's waiting thread is rung directly where it
            // has a bell; this process's own waiters go through the
            // doorbell, whose change its notifier looks for.
            let direct = bell != 0 && slot != self.me.slot() && {
                let bells = &self.slot(slot).bells;
                let name = bells[0].load(Relaxed) as u64 | (bells[1].load(Relaxed) as u64) << 32;
                name != 0 && self.os.ring_bell(name, bell)
            };
            if !direct && !doorbells.contains(&slot) {
                doorbells.push(slot);
            }
        }
        for slot in doorbells {
            self.ring(slot);
        }
    }

    /// The count of ends seen (see [`Header::ends`]), for a watching
    /// waiter to read before it looks at what it depends on.
    pub fn ends(&self) -> u32 {
        self.header().ends.load(SeqCst)
    }

    /// Counts an end (a thread or process gone, whatever it held now free
    /// to be taken over) and wakes every watching waiter of every process,
    /// each as a notify would, without counting it for anyone: each looks
    /// again. Returns how many it woke. Also called by whoever learns of a
    /// process's death (the embedder's watcher of process deaths).
    pub fn end_seen(&self) -> usize {
        self.header().ends.fetch_add(1, SeqCst);
        let mut woken: Vec<(u32, u32, Option<u32>)> = Vec::new();
        // Bucket by bucket, under its lock: a waiter validates the count
        // under the same lock, so it either saw the new count (and did not
        // queue) or is in the list here.
        for b in 0..self.layout.buckets {
            self.lock(b);
            let mut at = self.bucket(b).head.load(Relaxed);
            while at != 0 {
                let r = at - 1;
                let rec = self.record(r);
                at = rec.next.load(Relaxed);
                let flags = rec.flags.load(Relaxed);
                if flags & WATCHING == 0 {
                    continue;
                }
                let state = rec.state.load(Relaxed);
                rec.state.store(Tag::of(state).0 | NOTIFIED, Release);
                self.unlink(b, r);
                woken.push((r, Tag::of(state).0 | NOTIFIED, (flags & ASYNC != 0).then(|| rec.bell.load(Relaxed))));
            }
            self.unlock(b);
        }
        self.wake_records(&woken);
        woken.len()
    }

    fn ring(&self, slot: u32) {
        let doorbell = &self.slot(slot).doorbell;
        doorbell.fetch_add(1, SeqCst);
        self.os.wake(doorbell, u32::MAX);
    }

    /// This process's doorbell: rung when one of its async records is notified.
    pub fn doorbell(&self) -> &AtomicU32 {
        &self.slot(self.me.slot()).doorbell
    }

    /// Waiters queued on `key` (diagnostics).
    pub fn len(&self, key: u32) -> usize {
        let b = self.bucket_of(key);
        self.lock(b);
        let mut n = 0;
        let mut at = self.bucket(b).head.load(Relaxed);
        while at != 0 {
            let rec = self.record(at - 1);
            if rec.key.load(Relaxed) == key && !self.is_dead(Tag::of(rec.state.load(Relaxed))) {
                n += 1;
            }
            at = rec.next.load(Relaxed);
        }
        self.unlock(b);
        n
    }

    /// Records in use by any process (diagnostics).
    pub fn records_in_use(&self) -> usize {
        (0..self.layout.records).filter(|&r| self.record(r).state.load(Relaxed) != FREE).count()
    }

    /// Gives this process's slot up: every record it still has becomes
    /// dead to the others at once (its generation moves on). The caller
    /// releases the slot's kernel lock afterwards.
    pub fn release_slot(&self) {
        self.slot(self.me.slot()).gen.fetch_add(1, SeqCst);
        self.end_seen();
    }

    fn thread_slot(&self, i: u32) -> &ThreadSlot {
        // SAFETY: in bounds by the modulo.
        unsafe { &*self.threads.add((i % self.layout.threads) as usize) }
    }

    /// Claims a thread slot for a thread of this process and returns its
    /// owner id (below 2³⁰, never 0): the index + 1 in the low 12 bits, the
    /// slot's generation above. A slot is free, or its process is dead.
    /// `None`: every slot is held by a live process's thread.
    pub fn claim_thread(&self) -> Option<u32> {
        for i in 0..self.layout.threads {
            let t = self.thread_slot(i);
            let tag = t.tag.load(Acquire);
            if (tag == 0 || self.is_dead(Tag(tag))) && t.tag.compare_exchange(tag, self.me.0, AcqRel, Relaxed).is_ok() {
                let gen = t.gen.fetch_add(1, AcqRel).wrapping_add(1);
                return Some((i + 1) | ((gen & 0x3ffff) << 12));
            }
        }
        None
    }

    /// Gives a thread slot of this process back (its thread ended): every
    /// word naming its owner id names a dead owner from now on.
    pub fn release_thread(&self, owner: u32) {
        let Some(i) = (owner & 0xfff).checked_sub(1) else { return };
        if i >= self.layout.threads {
            return;
        }
        let t = self.thread_slot(i);
        if t.gen.load(Acquire) & 0x3ffff == owner >> 12 && t.tag.load(Acquire) == self.me.0 {
            t.gen.fetch_add(1, SeqCst);
            t.tag.store(0, SeqCst);
            // Whatever it held (a lock word naming it) is free to take
            // over: its watching waiters look again.
            self.end_seen();
        }
    }

    /// Whether the thread with owner id `owner` is alive: its slot still
    /// has that generation and its process lives. 0 is nobody (false).
    pub fn owner_alive(&self, owner: u32) -> bool {
        let Some(i) = (owner & 0xfff).checked_sub(1) else { return false };
        if i >= self.layout.threads {
            return false;
        }
        let t = self.thread_slot(i);
        let tag = t.tag.load(Acquire);
        t.gen.load(Acquire) & 0x3ffff == owner >> 12 && tag != 0 && !self.is_dead(Tag(tag))
    }

    /// Test hook: locks bucket of `key` and never unlocks it (a holder that dies inside).
    #[doc(hidden)]
    pub fn lock_and_abandon(&self, key: u32) {
        self.lock(self.bucket_of(key));
    }
}
