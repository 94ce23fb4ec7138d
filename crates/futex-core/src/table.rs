//! The wait table: hashed buckets of per-address FIFO queues.
//!
//! # Implementation details
//!
//! An address is hashed to one of a fixed number of buckets. Each bucket is a
//! mutex around a short list of queues, one per address that currently has
//! waiters (a bucket rarely holds more than one). A queue is ordered by a
//! sequence number taken under the bucket lock, so its order is the order in
//! which waiters enqueued: appending and popping the oldest are `O(1)`, and a
//! waiter that leaves early (timeout, cancellation) is found by its sequence
//! number in `O(log n)` without disturbing the others (see `queue.rs`).
//!
//! There is no global lock: two addresses in different buckets never contend,
//! and an address's waiters are only ever touched under its bucket's lock.
//!
//! A notify on an address nobody waits on takes no lock at all: the table
//! keeps a *presence* count per slot of addresses (see [`presence_slot`]),
//! which is non-zero while any address of the slot has a queue or a waiter is
//! about to check its value. It is the futex "has waiters" bit, counted:
//!
//! * a waiter increments its slot's count, then `fence(SeqCst)`, then
//!   compares the value (under the bucket lock);
//! * a notifier has changed the value, then `fence(SeqCst)`, then reads the
//!   count, and only if it is non-zero takes the bucket lock.
//!
//! Of the two fences, one comes first in the single total order of SeqCst
//! fences. If the notifier's does, the waiter's comparison sees the new value
//! and it does not queue; if the waiter's does, the notifier sees the count
//! (or a later, still non-zero one: the count only drops back once the waiter
//! is queued, and the queue holds its own count until it is empty) and looks
//! at the queue. Either way no wake-up is lost. The JavaScript layer reads the
//! same counts through [`WaitTable::presence`], with the same two steps.
//!
//! Wake-ups are decided under the lock (the waiter is removed from its queue
//! and, for a blocking waiter, its `notified` flag is set) and delivered after
//! the lock is released (unpark, or the owner's completion callback), so a
//! woken thread never immediately blocks on the bucket lock its waker holds.

use crate::queue::SeqQueue;
use std::time::Instant;

use crate::sync::{current, fence, park_timeout, Arc, AtomicU32, AtomicU64, Mutex, Ordering, Thread};
// A diagnostic counter, not part of the protocol: `std`'s even under loom, so
// that models do not explore its interleavings.
use std::sync::atomic::AtomicUsize;

/// A memory location: the address of the waited-on element. A
/// `SharedArrayBuffer`'s memory has the same address in every thread, so the
/// address alone identifies the location across threads.
pub type Key = usize;

/// A parked waiter's word for whoever unparks it (parking_lot's `ParkToken`):
/// a lock's waiter parks with its thread's owner id, for instance.
pub type ParkToken = u64;

/// What an unparker hands the waiter it wakes (parking_lot's `UnparkToken`).
/// [`TOKEN_NORMAL`] is a plain wake-up; the other values are the
/// [`Protocol`]'s own (a lock hands itself over with one).
pub type UnparkToken = u32;

/// A plain wake-up: the waiter looks again.
pub const TOKEN_NORMAL: UnparkToken = 0;

/// What a parked waiter carries besides itself: the [`Protocol`] whose
/// hooks run when it leaves without being unparked or loses an unpark
/// token, its [`ParkToken`], and since when its caller has been waiting (for
/// fairness decisions: a waiter that re-parks keeps its first `since`).
#[derive(Clone, Copy)]
pub struct Park {
    pub protocol: &'static dyn Protocol,
    pub token: ParkToken,
    pub since: Instant,
}

/// The hooks of a protocol built on the table (a lock word, say): decisions
/// that need the queue's state, made where that state is known.
///
/// Memory: each hook is called while the waiter it concerns still pins the
/// memory at `key` (a blocking waiter is inside the call that received the
/// buffer; an async waiter's thread keeps its typed array until the outcome
/// is delivered, and its teardown removes its waiters first), so a hook may
/// access the word at `key`.
pub trait Protocol: Sync {
    /// Under `key`'s bucket lock: a waiter with park token `token` left the
    /// queue without being unparked (timed out, cancelled, its thread
    /// stopped). `was_last`: nobody is queued on `key` any more
    /// (parking_lot's `timed_out(key, was_last)`).
    fn left(&self, key: Key, token: ParkToken, was_last: bool);

    /// Not under any lock, after [`left`](Self::left) once the bucket lock
    /// is released, while the waiter that left still pins the memory: a
    /// waiter's departure may let those behind it proceed (a semaphore
    /// waiter that asked for more permits than the ones queued behind it),
    /// and this is where the protocol wakes them. Called once per queue a
    /// departure (or several, in one teardown) changed; not when
    /// [`WaitTable::unpark_one_if`] drops dead waiters ahead of the one it
    /// wakes, since its callback learns the new head itself. Nothing by
    /// default.
    fn after_left(&self, table: &WaitTable, key: Key) {
        let _ = (table, key);
    }

    /// Not under any lock: a waiter unparked with `token` cannot act on it,
    /// because its thread is stopping. Pass it on (tokio's `Notified` drop),
    /// so that no wake-up or handoff is lost with the thread.
    fn lost(&self, table: &WaitTable, key: Key, token: UnparkToken);

    /// Not under any lock: a waiter of this protocol was delivered an
    /// unpark whose follow-up its thread will now never do (a condition
    /// sleeper's relock: the wake-up is not over until the sleeper holds its
    /// lock again). Pass the wake-up on. Nothing by default.
    fn follow_up_lost(&self, table: &WaitTable, key: Key) {
        let _ = (table, key);
    }

    /// Under `key`'s bucket lock, from [`WaitTable::thread_ended`]: the thread
    /// `ended` is gone, and the oldest live waiter of `key` has park token
    /// `head` (`have_more`: others are queued behind it). Return a token to
    /// unpark that waiter with it, or `None` to leave the queue alone.
    fn thread_ended(&self, key: Key, head: ParkToken, have_more: bool, ended: u32) -> Option<UnparkToken> {
        let _ = (key, head, have_more, ended);
        None
    }

    /// Whether every waiter of this protocol is woken (with
    /// [`TOKEN_NORMAL`]) by [`WaitTable::thread_ended`], wherever it is
    /// queued: for waiters that sleep while some set of threads is alive
    /// and check that set again when woken. False by default.
    fn wakes_at_thread_end(&self) -> bool {
        false
    }

    /// Whether the waiter with park token `token` only competes, and is
    /// never handed anything: [`WaitTable::thread_ended`] wakes such
    /// waiters ahead of the first other one (with [`TOKEN_NORMAL`]) and
    /// shows that one to [`thread_ended`](Self::thread_ended) as the head.
    fn competes_only(&self, token: ParkToken) -> bool {
        let _ = token;
        false
    }

    /// Under `key`'s bucket lock, before a *blocking* waiter with park token
    /// `me` is validated: whether it would wait for ever because of the
    /// queued *async* waiter of this protocol with park token `queued`. An
    /// async waiter of the blocking caller's own thread is such a waiter for
    /// an acquisition: what the queue hands it first (a lock, permits) can
    /// only be used once that thread runs JavaScript again, which its
    /// blocking call prevents. True makes the park return
    /// [`WaitResult::Deadlock`] without queueing. Only waiters of the same
    /// protocol are asked about.
    fn waits_for_own(&self, me: ParkToken, queued: ParkToken) -> bool {
        let _ = (me, queued);
        false
    }

    /// Like [`waits_for_own`](Self::waits_for_own), for a protocol whose
    /// park tokens do not name threads (a semaphore's carry its permit
    /// count): whether a blocking waiter would wait for ever behind any
    /// queued async waiter of the protocol whose [`Owner::thread`] is the
    /// blocking caller's own thread.
    fn waits_behind_own_thread(&self) -> bool {
        false
    }
}

/// What [`WaitTable::unpark_one`]'s callback learns, under the bucket lock
/// (parking_lot's `UnparkResult`).
#[derive(Clone, Copy, Debug)]
pub struct UnparkResult {
    /// The waiter being woken, if any: its park token and since when its
    /// caller has been waiting (`None` for a plain waiter, which has no
    /// [`Park`]).
    pub unparked: Option<(ParkToken, Option<Instant>)>,
    /// Whether waiters are still queued on the key after this one left.
    pub have_more: bool,
}

/// What [`WaitTable::unpark_filter`]'s filter says of a waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterOp {
    /// Wake it.
    Unpark,
    /// Leave it queued and look at the next one.
    Skip,
    /// Leave it and every waiter behind it queued.
    Stop,
}

/// What a blocking [`WaitTable::wait`] ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitResult {
    /// Woken by [`WaitTable::notify`].
    Ok,
    /// Woken by [`WaitTable::unpark_one`] or [`WaitTable::thread_ended`],
    /// with the unparker's token (only waiters queued with a [`Park`]).
    Unparked(UnparkToken),
    /// `validate` returned false: the value was not the expected one; nothing was queued.
    NotEqual,
    /// The deadline passed before a notify reached this waiter.
    TimedOut,
    /// The `interrupted` probe reported that the waiting thread must stop; the
    /// waiter left the queue without consuming a wake-up.
    Interrupted,
    /// The protocol's [`Protocol::waits_for_own`] found an async waiter of
    /// the caller's own that it would wait for ever for; nothing was queued.
    Deadlock,
}

/// The outcome delivered to an async waiter's [`Owner`].
#[derive(Clone, Copy)]
pub enum AsyncOutcome {
    Ok,
    /// Unparked with this token by a waiter's [`Protocol`] (only waiters
    /// queued with a [`Park`]); an owner that cannot deliver it passes it on
    /// with [`Protocol::lost`].
    Unparked(UnparkToken, &'static dyn Protocol),
    TimedOut,
}

impl PartialEq for AsyncOutcome {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (AsyncOutcome::Unparked(a, p), AsyncOutcome::Unparked(b, q)) => {
                a == b && std::ptr::addr_eq(*p as *const dyn Protocol, *q as *const dyn Protocol)
            }
            (AsyncOutcome::Ok, AsyncOutcome::Ok) | (AsyncOutcome::TimedOut, AsyncOutcome::TimedOut) => true,
            _ => false,
        }
    }
}
impl Eq for AsyncOutcome {}

impl std::fmt::Debug for AsyncOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsyncOutcome::Ok => f.write_str("Ok"),
            AsyncOutcome::Unparked(token, _) => write!(f, "Unparked({token})"),
            AsyncOutcome::TimedOut => f.write_str("TimedOut"),
        }
    }
}

/// The thread (or event loop) that async waiters belong to.
///
/// `complete` is called at most once per async waiter, never while a bucket
/// lock is held, from whichever thread decided the outcome (a notifier or the
/// timer thread).
pub trait Owner: Send + Sync {
    /// False once the owner is being torn down. A notify that finds a waiter
    /// of a dead owner drops it without counting it as woken.
    fn is_alive(&self) -> bool;
    /// Delivers the outcome of the async waiter the owner queued on `key` as
    /// `token`. An owner that learns it cannot deliver an [`AsyncOutcome::Ok`]
    /// any more (its thread is going away) passes the wake-up on with
    /// [`WaitTable::notify`]`(key, 1)`, so that the notify that counted it
    /// still wakes someone; one that cannot deliver an
    /// [`AsyncOutcome::Unparked`] passes it on with [`Protocol::lost`].
    fn complete(&self, key: Key, token: u64, outcome: AsyncOutcome);

    /// Under the bucket lock: one of this owner's waiters was just woken,
    /// and its [`complete`](Self::complete) follows once the lock is
    /// released, then [`decided`](Self::decided). An owner whose teardown
    /// frees the memory its waiters wait on counts these, and waits for
    /// them to finish after it has removed its waiters: a completion that
    /// finds the owner gone passes the wake-up on
    /// ([`Protocol::lost`]), which may touch the word at the key.
    fn deciding(&self) {}

    /// The completion announced by [`deciding`](Self::deciding) returned.
    fn decided(&self) {}

    /// The thread whose event loop this owner's waiters continue on, if it
    /// is one thread (see [`Protocol::waits_behind_own_thread`]).
    fn thread(&self) -> Option<std::thread::ThreadId> {
        None
    }
}

/// Identifies a queued async waiter, for [`WaitTable::timeout`] and
/// [`WaitTable::cancel`]: its address, its place in the queue (`seq`, unique
/// in the table), and the owner's `token` for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket {
    pub key: Key,
    pub seq: u64,
    pub token: u64,
}

/// A blocking waiter: the parked thread and the flag its waker sets.
struct SyncWaiter {
    /// 0 while queued; set (under the bucket lock) by the notify or unpark
    /// that removed this waiter to `WOKEN | token`.
    notified: AtomicU64,
    thread: Thread,
    park: Option<Park>,
}

/// The flag bit of [`SyncWaiter::notified`]; the low 32 bits hold the token.
const WOKEN: u64 = 1 << 32;

enum Waiter {
    Sync(Arc<SyncWaiter>),
    /// An async waiter: its owner, the owner's name for it, and its
    /// [`Park`] if it has one (boxed: plain waiters pay one word for it).
    Async(Arc<dyn Owner>, u64, Option<Box<Park>>),
}

impl Waiter {
    fn park(&self) -> Option<&Park> {
        match self {
            Waiter::Sync(w) => w.park.as_ref(),
            Waiter::Async(_, _, park) => park.as_deref(),
        }
    }
    /// Whether someone will act on a wake-up of this waiter (async waiters
    /// of a thread that is being torn down will not).
    fn is_live(&self) -> bool {
        match self {
            Waiter::Sync(_) => true,
            Waiter::Async(owner, ..) => owner.is_alive(),
        }
    }
}

/// A waiter taken out of its queue, to be woken once the bucket lock is released.
enum Woken {
    Sync(Arc<SyncWaiter>),
    Async(Arc<dyn Owner>, u64, AsyncOutcome),
}

impl Woken {
    fn deliver(self, key: Key) {
        match self {
            Woken::Sync(w) => w.thread.unpark(),
            Woken::Async(owner, token, outcome) => {
                owner.complete(key, token, outcome);
                owner.decided();
            }
        }
    }
}

/// Marks `waiter`, just removed from its queue under the bucket lock, as
/// woken with `token`: sets a blocking waiter's flag, and chooses an async
/// waiter's outcome.
fn wake(waiter: Waiter, token: UnparkToken) -> Woken {
    match waiter {
        Waiter::Sync(w) => {
            // Release pairs with the Acquire loads in `wait`.
            w.notified.store(WOKEN | token as u64, Ordering::Release);
            Woken::Sync(w)
        }
        Waiter::Async(owner, t, park) => {
            let outcome = match park {
                Some(park) => AsyncOutcome::Unparked(token, park.protocol),
                None => AsyncOutcome::Ok,
            };
            owner.deciding();
            Woken::Async(owner, t, outcome)
        }
    }
}

struct Queue {
    key: Key,
    /// Waiters of `key` by sequence number: the first entry is the oldest.
    waiters: SeqQueue<Waiter>,
}

/// One bucket, padded to its own cache line so neighbours do not false-share.
#[repr(align(64))]
struct Bucket {
    /// Queues of the addresses hashed here that have at least one waiter.
    /// Empty queues are removed as soon as they empty.
    queues: Mutex<Vec<Queue>>,
}

/// How many presence counts the table keeps (a power of two).
pub const PRESENCE_SLOTS: usize = 1024;

/// One presence count, alone on its cache line: waiters on different
/// addresses update different counts, and must not contend for one line.
/// In memory, count `i` is the `u32` at index `i * 16`; the rest of its line
/// is zeros (JavaScript sees the whole table).
#[repr(C, align(64))]
pub struct PresenceCount(AtomicU32, [u32; 15]);

impl PresenceCount {
    /// The count (diagnostics).
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The presence count of `key`: Fibonacci hashing of the low 32 bits of the
/// element address, so that the JavaScript layer, which knows the low 32 bits
/// of an array's address, computes the same slot with `Math.imul`.
pub fn presence_slot(key: Key) -> usize {
    let low = (key as u32) >> 2;
    (low.wrapping_mul(0x9E37_79B1) >> (32 - PRESENCE_SLOTS.trailing_zeros())) as usize
}

/// A table of wait queues keyed by address. See the module docs.
pub struct WaitTable {
    buckets: Box<[Bucket]>,
    /// Per presence slot: queues of its addresses, plus waiters checking
    /// their value right now. See the module docs.
    presence: Box<[PresenceCount]>,
    /// Source of sequence numbers. Only incremented under a bucket lock, so
    /// within one address the numbers follow enqueue order.
    next_seq: AtomicU64,
    /// Async waiters currently queued, over all keys (diagnostics). Changed
    /// under the bucket lock of the waiter that is added or removed.
    queued_async: AtomicUsize,
}

impl Default for WaitTable {
    fn default() -> Self {
        Self::new(1024)
    }
}

/// Most `yield`s a blocking waiter spends before it parks, and the fewest.
#[cfg(not(loom))]
const SPIN_YIELDS: (u32, u32) = (50, 10);

#[cfg(not(loom))]
thread_local! {
    /// Consecutive waits of this thread whose spin ended in a park anyway.
    static SPIN_MISSES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Yields until `done()`, a bounded number of times; false if it never
/// became true. Yielding, not busy-looping: a partner on the same CPU gets to
/// run at once, and a thread alone on its CPU keeps that CPU awake, so the
/// partner's wake-up does not land on a halted one. The budget halves after
/// each wait that parked anyway (down to a floor), so a thread whose waits are
/// long stops paying for the spin.
///
/// Not at all while the machine has more runnable threads than CPUs
/// ([`overloaded`]): a yield then hands the CPU to a busy process for a whole
/// time slice (milliseconds), which is what the park was for.
#[cfg(not(loom))]
pub(crate) fn spin_until(done: impl Fn() -> bool) -> bool {
    if overloaded() {
        return done();
    }
    let misses = SPIN_MISSES.get();
    let budget = (SPIN_YIELDS.0 >> misses).max(SPIN_YIELDS.1);
    for _ in 0..budget {
        if done() {
            SPIN_MISSES.set(0);
            return true;
        }
        std::thread::yield_now();
    }
    if done() {
        SPIN_MISSES.set(0);
        return true;
    }
    SPIN_MISSES.set((misses + 1).min(8));
    false
}

/// Whether the machine has more runnable threads than CPUs, from Linux's
/// `/proc/loadavg` (its running / total field), read at most every 50 ms by
/// whichever thread asks first; never elsewhere, or where it cannot be read.
#[cfg(not(loom))]
pub(crate) fn overloaded() -> bool {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::sync::OnceLock;
    static STARTED: OnceLock<Instant> = OnceLock::new();
    static NEXT_READ_MS: AtomicU64 = AtomicU64::new(0);
    static OVERLOADED: AtomicBool = AtomicBool::new(false);
    static CPUS: OnceLock<usize> = OnceLock::new();
    if !cfg!(target_os = "linux") {
        return false;
    }
    let now = STARTED.get_or_init(Instant::now).elapsed().as_millis() as u64;
    let next = NEXT_READ_MS.load(Relaxed);
    if now >= next && NEXT_READ_MS.compare_exchange(next, now + 50, Relaxed, Relaxed).is_ok() {
        let cpus = *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let runnable = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|s| s.split_whitespace().nth(3).and_then(|f| f.split('/').next()?.parse::<usize>().ok()));
        OVERLOADED.store(runnable.is_some_and(|r| r > cpus), Relaxed);
    }
    OVERLOADED.load(Relaxed)
}

/// Under loom spinning only multiplies the interleavings to explore.
#[cfg(loom)]
pub(crate) fn spin_until(_done: impl Fn() -> bool) -> bool {
    false
}

fn position(queues: &[Queue], key: Key) -> Option<usize> {
    queues.iter().position(|q| q.key == key)
}

impl WaitTable {
    /// A table with `buckets` buckets (rounded up to a power of two).
    pub fn new(buckets: usize) -> Self {
        let n = buckets.max(1).next_power_of_two();
        WaitTable {
            buckets: (0..n).map(|_| Bucket { queues: Mutex::new(Vec::new()) }).collect(),
            presence: (0..PRESENCE_SLOTS).map(|_| PresenceCount(AtomicU32::new(0), [0; 15])).collect(),
            next_seq: AtomicU64::new(1),
            queued_async: AtomicUsize::new(0),
        }
    }

    fn bucket(&self, key: Key) -> &Bucket {
        // Fibonacci hashing of the element address (its low bits carry little
        // information: elements are 4- or 8-byte aligned).
        let h = (key as u64 >> 2).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let bits = self.buckets.len().trailing_zeros();
        let index = if bits == 0 { 0 } else { (h >> (64 - bits)) as usize };
        &self.buckets[index]
    }

    /// Queues `waiter` on `key` if `validate()` holds; returns its sequence number.
    ///
    /// `validate` runs under the bucket lock: this is the whole futex
    /// protocol. A notifier changes the value *before* it takes the bucket lock
    /// in `notify`, so either `validate` sees the new value (and we do not
    /// queue), or we are queued before `notify` looks at the queue.
    fn enqueue(&self, key: Key, validate: impl FnOnce() -> bool, waiter: Waiter) -> Option<u64> {
        let mut waiter = Some(waiter);
        self.enqueue_with(key, |_| if validate() { waiter.take() } else { None })
    }

    /// [`enqueue`](Self::enqueue) with the waiter made by `make` under the
    /// bucket lock (`None`: nothing is queued). `make` learns whether other
    /// waiters are queued on `key`.
    fn enqueue_with(&self, key: Key, make: impl FnOnce(bool) -> Option<Waiter>) -> Option<u64> {
        self.enqueue_seeing(key, |queue| make(queue.is_some()))
    }

    /// [`enqueue_with`](Self::enqueue_with) where `make` sees the queue of
    /// `key` itself (`None`: nobody waits on it).
    fn enqueue_seeing(&self, key: Key, make: impl FnOnce(Option<&SeqQueue<Waiter>>) -> Option<Waiter>) -> Option<u64> {
        // Present before the value is compared (see the module docs).
        let presence = &self.presence[presence_slot(key)].0;
        presence.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let mut queues = self.bucket(key).queues.lock();
        let Some(waiter) = make(position(&queues, key).map(|i| &queues[i].waiters)) else {
            presence.fetch_sub(1, Ordering::SeqCst);
            return None;
        };
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        if matches!(waiter, Waiter::Async(..)) {
            self.queued_async.fetch_add(1, Ordering::Relaxed);
        }
        match position(&queues, key) {
            Some(i) => {
                queues[i].waiters.push(seq, waiter);
                // The queue already holds the slot's count.
                presence.fetch_sub(1, Ordering::SeqCst);
            }
            None => {
                // The new queue keeps the count this waiter took.
                let mut waiters = SeqQueue::new();
                waiters.push(seq, waiter);
                queues.push(Queue { key, waiters });
            }
        }
        Some(seq)
    }

    /// Drops `queues[i]`, which is empty, and its presence count. Every
    /// queue leaves its bucket through here.
    fn drop_queue(&self, queues: &mut Vec<Queue>, i: usize) {
        let q = queues.swap_remove(i);
        debug_assert!(q.waiters.is_empty());
        self.presence[presence_slot(q.key)].0.fetch_sub(1, Ordering::SeqCst);
    }

    /// Drops every empty queue of a bucket (see [`drop_queue`](Self::drop_queue)).
    fn drop_empty_queues(&self, queues: &mut Vec<Queue>) {
        let mut i = 0;
        while i < queues.len() {
            if queues[i].waiters.is_empty() {
                self.drop_queue(queues, i);
            } else {
                i += 1;
            }
        }
    }

    /// Whether `key` may have waiters: false only if no address of its
    /// presence slot has a queue and no waiter is checking its value. The
    /// caller changed the value it notifies about before asking; the fence
    /// orders that change before the read (see the module docs).
    pub fn may_have_waiters(&self, key: Key) -> bool {
        fence(Ordering::SeqCst);
        self.presence[presence_slot(key)].0.load(Ordering::SeqCst) != 0
    }

    /// The presence counts, [`PRESENCE_SLOTS`] of them, for a JavaScript
    /// layer that reads them with `Atomics.load` (see the module docs). They
    /// live as long as the table.
    #[cfg(not(loom))]
    pub fn presence(&self) -> &[PresenceCount] {
        &self.presence
    }

    /// Removes the waiter `seq` from `key`'s queue. Returns it if it was still
    /// queued, `None` if someone else already decided its outcome.
    fn remove(&self, key: Key, seq: u64) -> Option<Waiter> {
        let waiter = {
            let mut queues = self.bucket(key).queues.lock();
            let i = position(&queues, key)?;
            let waiter = queues[i].waiters.remove(seq)?;
            let was_last = queues[i].waiters.is_empty();
            if was_last {
                self.drop_queue(&mut queues, i);
            }
            if matches!(waiter, Waiter::Async(..)) {
                self.queued_async.fetch_sub(1, Ordering::Relaxed);
            }
            if let Some(park) = waiter.park() {
                park.protocol.left(key, park.token, was_last);
            }
            waiter
        };
        // The caller pins the memory: a blocking waiter is in its call, an
        // async one's outcome is not delivered yet (or it is being cancelled
        // by a call that holds the array).
        if let Some(park) = waiter.park() {
            park.protocol.after_left(self, key);
        }
        Some(waiter)
    }

    /// Blocks the calling thread on `key` until notified, the deadline passes,
    /// or `interrupted()` returns true.
    ///
    /// `validate` runs under the bucket lock (see [`WaitTable`]); when it
    /// returns false the result is [`WaitResult::NotEqual`]. The thread parks
    /// in slices of at most `slice`; between slices, and once more when it was
    /// notified, it calls `interrupted`, so a thread that is asked to stop (a
    /// terminated worker) leaves the queue within one slice. If it is being
    /// stopped and a notify already took it, that wake-up is passed on to the
    /// next waiter of `key` (the stopping thread will never act on it) and
    /// the result is [`WaitResult::Interrupted`]. Spurious unparks are
    /// absorbed here.
    pub fn wait(
        &self,
        key: Key,
        validate: impl FnOnce() -> bool,
        deadline: Option<Instant>,
        slice: std::time::Duration,
        interrupted: impl FnMut() -> bool,
    ) -> WaitResult {
        let mut waiter = None;
        self.wait_parked(key, |_| validate(), &mut waiter, || deadline, slice, interrupted)
    }

    /// [`wait`](Self::wait) for a waiter of a [`Protocol`] (parking_lot's
    /// `park`): the waiter carries `park`, an unpark wakes it with
    /// [`WaitResult::Unparked`], and the protocol's hooks run when it leaves
    /// without being unparked (timeout, its thread stopping:
    /// [`Protocol::left`]) or cannot use a token it was given
    /// ([`Protocol::lost`]). `validate` learns whether other waiters are
    /// queued on `key`; `deadline` is asked once the waiter is queued, so it
    /// may depend on what `validate` found.
    pub fn park(
        &self,
        key: Key,
        validate: impl FnOnce(bool) -> bool,
        park: Park,
        deadline: impl FnOnce() -> Option<Instant>,
        slice: std::time::Duration,
        interrupted: impl FnMut() -> bool,
    ) -> WaitResult {
        let mut park = Some(park);
        self.wait_parked(key, validate, &mut park, deadline, slice, interrupted)
    }

    fn wait_parked(
        &self,
        key: Key,
        validate: impl FnOnce(bool) -> bool,
        park: &mut Option<Park>,
        deadline: impl FnOnce() -> Option<Instant>,
        slice: std::time::Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> WaitResult {
        let me = Arc::new(SyncWaiter { notified: AtomicU64::new(0), thread: current(), park: park.take() });
        let mut waiter = Some(Waiter::Sync(me.clone()));
        let mut deadlock = false;
        let enqueued = self.enqueue_seeing(key, |queue| {
            if let (Some(park), Some(queue)) = (&me.park, queue) {
                deadlock = Self::waits_for_own(park, queue);
                if deadlock {
                    return None;
                }
            }
            if validate(queue.is_some()) {
                waiter.take()
            } else {
                None
            }
        });
        let Some(seq) = enqueued else {
            return if deadlock { WaitResult::Deadlock } else { WaitResult::NotEqual };
        };
        let deadline = deadline();
        // Acquire pairs with the Release store in `wake`: whatever the
        // notifier wrote before notifying is visible once we see the flag.
        let woken = || me.notified.load(Ordering::Acquire) != 0;
        // The other side of a ping-pong usually answers within microseconds:
        // check briefly before paying for a futex sleep and wake-up.
        if spin_until(woken) {
            return self.woken(key, &me, &mut interrupted);
        }
        loop {
            if woken() {
                return self.woken(key, &me, &mut interrupted);
            }
            let mut nap = slice;
            if let Some(deadline) = deadline {
                let now = Instant::now();
                if now >= deadline {
                    return match self.remove(key, seq) {
                        Some(_) => WaitResult::TimedOut,
                        // Not queued any more: a notify removed us and set
                        // `notified` under the same bucket lock we just
                        // took, so the wake-up is ours.
                        None => Self::result(&me),
                    };
                }
                nap = nap.min(deadline - now);
            }
            park_timeout(nap);
            if !woken() && interrupted() {
                return match self.remove(key, seq) {
                    Some(_) => WaitResult::Interrupted,
                    // A notify removed us (and counted us) under the lock we
                    // just took: the wake-up is ours, and we cannot use it.
                    None => self.pass_on(key, &me),
                };
            }
        }
    }

    /// Under the bucket lock: whether the blocking waiter that carries
    /// `park` would wait for ever for one of the async waiters in `queue`
    /// (see [`Protocol::waits_for_own`]).
    fn waits_for_own(park: &Park, queue: &SeqQueue<Waiter>) -> bool {
        let protocol = park.protocol as *const dyn Protocol;
        let me = park.protocol.waits_behind_own_thread().then(|| std::thread::current().id());
        queue.iter().any(|(_, w)| match w {
            Waiter::Async(owner, _, Some(theirs)) if w.is_live() => {
                std::ptr::addr_eq(theirs.protocol as *const dyn Protocol, protocol)
                    && (park.protocol.waits_for_own(park.token, theirs.token) || (me.is_some() && owner.thread() == me))
            }
            _ => false,
        })
    }

    /// What a woken blocking waiter returns.
    fn result(me: &SyncWaiter) -> WaitResult {
        match me.park {
            Some(_) => WaitResult::Unparked(me.notified.load(Ordering::Acquire) as UnparkToken),
            None => WaitResult::Ok,
        }
    }

    /// A blocking waiter was notified. If its thread is being stopped it
    /// returns to no JavaScript, and a wake-up it kept would be counted by
    /// its notifier and seen by nobody: it goes to the next waiter instead.
    fn woken(&self, key: Key, me: &SyncWaiter, interrupted: &mut impl FnMut() -> bool) -> WaitResult {
        if interrupted() {
            self.pass_on(key, me)
        } else {
            Self::result(me)
        }
    }

    /// Hands a wake-up this (stopping) thread consumed to the next waiter of
    /// `key`, or, for a protocol's waiter, lets the protocol pass its token on.
    fn pass_on(&self, key: Key, me: &SyncWaiter) -> WaitResult {
        match &me.park {
            Some(park) => {
                let token = me.notified.load(Ordering::Acquire) as UnparkToken;
                park.protocol.lost(self, key, token);
            }
            None => {
                self.notify(key, 1);
            }
        }
        WaitResult::Interrupted
    }

    /// Queues an async waiter of `owner` on `key` if `validate()` holds
    /// (checked under the bucket lock). Returns its ticket; its outcome is
    /// later delivered through `owner.complete(token, _)` exactly once,
    /// unless it is removed by [`WaitTable::cancel`] or
    /// [`WaitTable::remove_owner`] first. `token` is the owner's own name for
    /// the waiter (the table never looks at it).
    pub fn wait_async(
        &self,
        key: Key,
        validate: impl FnOnce() -> bool,
        owner: Arc<dyn Owner>,
        token: u64,
    ) -> Option<Ticket> {
        self.enqueue(key, validate, Waiter::Async(owner, token, None)).map(|seq| Ticket { key, seq, token })
    }

    /// [`wait_async`](Self::wait_async) for a waiter of a [`Protocol`] (see
    /// [`park`](Self::park)): an unpark delivers
    /// [`AsyncOutcome::Unparked`], and [`Protocol::left`] runs when it leaves
    /// without one (timeout, cancel, its owner's teardown).
    /// `validate` learns whether other waiters are queued on `key`, and
    /// chooses the owner's token for the waiter (`None`: nothing is queued).
    pub fn park_async(
        &self,
        key: Key,
        validate: impl FnOnce(bool) -> Option<u64>,
        park: Park,
        owner: Arc<dyn Owner>,
    ) -> Option<Ticket> {
        let mut token = 0;
        let seq = self.enqueue_with(key, |queued| {
            token = validate(queued)?;
            Some(Waiter::Async(owner, token, Some(Box::new(park))))
        })?;
        Some(Ticket { key, seq, token })
    }

    /// Times out an async waiter: if it is still queued it is removed and its
    /// owner gets [`AsyncOutcome::TimedOut`]. Returns whether that happened
    /// (false: a notify, cancel or teardown got there first).
    pub fn timeout(&self, ticket: Ticket) -> bool {
        match self.remove(ticket.key, ticket.seq) {
            Some(Waiter::Async(owner, token, _)) => {
                owner.complete(ticket.key, token, AsyncOutcome::TimedOut);
                true
            }
            Some(Waiter::Sync(_)) => unreachable!("tickets are only handed out for async waiters"),
            None => false,
        }
    }

    /// Removes an async waiter without delivering any outcome. Returns whether
    /// it was still queued.
    pub fn cancel(&self, ticket: Ticket) -> bool {
        self.take(ticket.key, ticket.seq).is_some()
    }

    /// Removes the async waiter `seq` of `key` without delivering any
    /// outcome, and returns its owner's token for it; `None` if it was no
    /// longer queued (its outcome is decided elsewhere).
    pub fn take(&self, key: Key, seq: u64) -> Option<u64> {
        match self.remove(key, seq)? {
            Waiter::Async(_, token, _) => Some(token),
            Waiter::Sync(_) => unreachable!("tickets are only handed out for async waiters"),
        }
    }

    /// Wakes up to `count` waiters of `key`, oldest first, and returns how
    /// many were woken. Async waiters whose owner is no longer alive are
    /// dropped on the way and not counted.
    pub fn notify(&self, key: Key, count: usize) -> usize {
        let mut woken: Vec<Woken> = Vec::new();
        let mut left = Vec::new();
        if count == 0 || !self.may_have_waiters(key) {
            return 0;
        }
        {
            let mut queues = self.bucket(key).queues.lock();
            let Some(i) = position(&queues, key) else {
                return 0;
            };
            let waiters = &mut queues[i].waiters;
            while woken.len() < count {
                let Some(waiter) = self.pop_live(key, waiters, &mut left) else { break };
                woken.push(wake(waiter, TOKEN_NORMAL));
            }
            if waiters.is_empty() {
                self.drop_queue(&mut queues, i);
            }
        }
        // Deliver after releasing the lock.
        let n = woken.len();
        for w in woken {
            w.deliver(key);
        }
        // The notifier's array pins the memory.
        for protocol in left {
            protocol.after_left(self, key);
        }
        n
    }

    /// Under the bucket lock: removes and returns the oldest waiter of `key`
    /// that will act on a wake-up. Async waiters of a thread that is being
    /// torn down are dropped on the way (their owner removes the rest).
    /// The protocols of the waiters dropped go to `left`, for their
    /// [`Protocol::after_left`] once the lock is released.
    fn pop_live(
        &self,
        key: Key,
        waiters: &mut SeqQueue<Waiter>,
        left: &mut Vec<&'static dyn Protocol>,
    ) -> Option<Waiter> {
        while let Some((_, waiter)) = waiters.pop_first() {
            if matches!(waiter, Waiter::Async(..)) {
                self.queued_async.fetch_sub(1, Ordering::Relaxed);
            }
            if waiter.is_live() {
                return Some(waiter);
            }
            if let Some(park) = waiter.park() {
                park.protocol.left(key, park.token, waiters.is_empty());
                left.push(park.protocol);
            }
        }
        None
    }

    /// Wakes the oldest waiter of `key` (parking_lot's `unpark_one`).
    /// `callback` runs under the bucket lock, before anything else can change
    /// the queue: it learns whether there is a waiter to wake and whether more
    /// remain behind it, and returns the token the woken waiter receives. So
    /// a protocol can hand its state to the woken waiter and clear its
    /// "waiters" bit atomically with the wake-up. The callback runs even when
    /// nobody is queued. Returns what the callback was told.
    pub fn unpark_one(&self, key: Key, callback: impl FnOnce(UnparkResult) -> UnparkToken) -> UnparkResult {
        self.unpark_one_if(key, |r| Some(callback(r))).0
    }

    /// [`unpark_one`](Self::unpark_one) where the callback may also decline
    /// (`None`): the waiter then stays queued where it was. Returns what the
    /// callback was told, and whether a waiter was woken.
    pub fn unpark_one_if(
        &self,
        key: Key,
        callback: impl FnOnce(UnparkResult) -> Option<UnparkToken>,
    ) -> (UnparkResult, bool) {
        let (result, woken) = {
            let mut queues = self.bucket(key).queues.lock();
            let Some(i) = position(&queues, key) else {
                let result = UnparkResult { unparked: None, have_more: false };
                callback(result);
                return (result, false);
            };
            let waiters = &mut queues[i].waiters;
            // Drop the async waiters of threads being torn down that are
            // ahead of the first live one.
            while waiters.first().is_some_and(|(_, w)| !w.is_live()) {
                self.pop_live_or_drop_first(key, waiters);
            }
            let head = waiters.first().map(|(seq, w)| match w.park() {
                Some(park) => (seq, park.token, Some(park.since)),
                None => (seq, 0, None),
            });
            let unparked = head.map(|(_, token, since)| (token, since));
            let result = UnparkResult { unparked, have_more: waiters.len() > 1 };
            let woken = match (head, callback(result)) {
                (Some((seq, ..)), Some(token)) => {
                    // Exactly the waiter the callback was told about, even if
                    // its thread began its teardown meanwhile (liveness is
                    // not guarded by this lock): its owner then passes the
                    // token on (`Protocol::lost`).
                    let waiter = waiters.remove(seq).expect("queued under this lock");
                    if matches!(waiter, Waiter::Async(..)) {
                        self.queued_async.fetch_sub(1, Ordering::Relaxed);
                    }
                    Some(wake(waiter, token))
                }
                _ => None,
            };
            if waiters.is_empty() {
                self.drop_queue(&mut queues, i);
            }
            (result, woken)
        };
        let some = woken.is_some();
        if let Some(w) = woken {
            w.deliver(key);
        }
        (result, some)
    }

    /// Wakes a chosen set of the waiters of `key` (parking_lot's
    /// `unpark_filter`, with a token per woken waiter): under the bucket
    /// lock, `filter` is shown the park token of each live waiter of a
    /// [`Protocol`], oldest first, with since when its caller has waited,
    /// and says whether to wake it, skip it or stop looking; then `callback` learns the park tokens chosen and
    /// whether others stay queued, and returns one unpark token for each of
    /// them, in the same order, or `None` to wake nobody. So a protocol can
    /// hand its state to a group of waiters (a reader-writer lock's readers)
    /// atomically with waking them. Returns how many were woken.
    pub fn unpark_filter(
        &self,
        key: Key,
        mut filter: impl FnMut(ParkToken, Instant) -> FilterOp,
        callback: impl FnOnce(&[ParkToken], bool) -> Option<Vec<UnparkToken>>,
    ) -> usize {
        let woken = {
            let mut queues = self.bucket(key).queues.lock();
            let Some(i) = position(&queues, key) else {
                callback(&[], false);
                return 0;
            };
            let waiters = &mut queues[i].waiters;
            let mut chosen = Vec::new();
            let mut tokens = Vec::new();
            for (seq, w) in waiters.iter() {
                let Some(park) = w.park().filter(|_| w.is_live()) else { continue };
                match filter(park.token, park.since) {
                    FilterOp::Unpark => {
                        chosen.push(seq);
                        tokens.push(park.token);
                    }
                    FilterOp::Skip => {}
                    FilterOp::Stop => break,
                }
            }
            let have_more = waiters.len() > chosen.len();
            let mut woken = Vec::new();
            if let Some(unpark) = callback(&tokens, have_more) {
                assert_eq!(unpark.len(), chosen.len(), "one unpark token per chosen waiter");
                for (seq, token) in chosen.into_iter().zip(unpark) {
                    let waiter = waiters.remove(seq).expect("queued under this lock");
                    if matches!(waiter, Waiter::Async(..)) {
                        self.queued_async.fetch_sub(1, Ordering::Relaxed);
                    }
                    woken.push(wake(waiter, token));
                }
            }
            if waiters.is_empty() {
                self.drop_queue(&mut queues, i);
            }
            woken
        };
        let n = woken.len();
        for w in woken {
            w.deliver(key);
        }
        n
    }

    /// Under the bucket lock: drops the first waiter if it will not act on a
    /// wake-up (see [`pop_live`](Self::pop_live)).
    fn pop_live_or_drop_first(&self, key: Key, waiters: &mut SeqQueue<Waiter>) {
        if let Some((_, waiter)) = waiters.pop_first() {
            if matches!(waiter, Waiter::Async(..)) {
                self.queued_async.fetch_sub(1, Ordering::Relaxed);
            }
            if let Some(park) = waiter.park() {
                park.protocol.left(key, park.token, waiters.is_empty());
            }
        }
    }

    /// The thread `ended` (a protocol's own id for it) is gone: for every
    /// queue whose oldest live waiter belongs to a [`Protocol`], under that
    /// queue's bucket lock, the protocol's [`Protocol::thread_ended`] decides
    /// whether to unpark that waiter, and with which token (a lock whose word
    /// names the ended thread hands itself to its oldest waiter). Returns how
    /// many waiters were unparked.
    pub fn thread_ended(&self, ended: u32) -> usize {
        let mut count = 0;
        for bucket in self.buckets.iter() {
            let mut woken = Vec::new();
            {
                let mut queues = bucket.queues.lock();
                for q in queues.iter_mut() {
                    // Waiters of protocols that wake at every thread's end.
                    let watchers: Vec<u64> = q
                        .waiters
                        .iter()
                        .filter(|(_, w)| w.is_live() && w.park().is_some_and(|p| p.protocol.wakes_at_thread_end()))
                        .map(|(seq, _)| seq)
                        .collect();
                    self.wake_all_of(q, watchers, &mut woken);
                    // Waiters that only compete, ahead of the head: woken to look again.
                    let ahead: Vec<u64> = q
                        .waiters
                        .iter()
                        .filter(|(_, w)| w.is_live())
                        .take_while(|(_, w)| w.park().is_some_and(|p| p.protocol.competes_only(p.token)))
                        .map(|(seq, _)| seq)
                        .collect();
                    self.wake_all_of(q, ahead, &mut woken);
                    let Some((seq, head)) = q.waiters.iter().find(|(_, w)| w.is_live()) else { continue };
                    let Some(park) = head.park().copied() else { continue };
                    let have_more = q.waiters.len() > 1;
                    if let Some(token) = park.protocol.thread_ended(q.key, park.token, have_more, ended) {
                        let waiter = q.waiters.remove(seq).expect("found under the same lock");
                        if matches!(waiter, Waiter::Async(..)) {
                            self.queued_async.fetch_sub(1, Ordering::Relaxed);
                        }
                        woken.push((q.key, wake(waiter, token)));
                    }
                }
                self.drop_empty_queues(&mut queues);
            }
            count += woken.len();
            for (key, w) in woken {
                w.deliver(key);
            }
        }
        count
    }

    /// Under `q`'s bucket lock: takes the waiters `seqs` out of `q`, each
    /// with a plain wake-up ([`TOKEN_NORMAL`]) to deliver once the lock is
    /// released.
    fn wake_all_of(&self, q: &mut Queue, seqs: Vec<u64>, woken: &mut Vec<(Key, Woken)>) {
        for seq in seqs {
            let waiter = q.waiters.remove(seq).expect("found under the same lock");
            if matches!(waiter, Waiter::Async(..)) {
                self.queued_async.fetch_sub(1, Ordering::Relaxed);
            }
            woken.push((q.key, wake(waiter, TOKEN_NORMAL)));
        }
    }

    /// Removes every async waiter that belongs to `owner` (a thread being torn
    /// down), without delivering outcomes; `removed(token)` is called for
    /// each, after the bucket's lock is released. Returns how many were removed.
    pub fn remove_owner(&self, owner: &Arc<dyn Owner>, mut removed: impl FnMut(u64)) -> usize {
        let target = Arc::as_ptr(owner) as *const ();
        let mut count = 0;
        let mut tokens = Vec::new();
        let mut parks = Vec::new();
        let mut left = Vec::new();
        for bucket in self.buckets.iter() {
            {
                let mut queues = bucket.queues.lock();
                for q in queues.iter_mut() {
                    q.waiters.retain(|_, w| match w {
                        Waiter::Async(o, token, park) if Arc::as_ptr(o) as *const () == target => {
                            tokens.push(*token);
                            parks.extend(park.as_deref().copied());
                            false
                        }
                        _ => true,
                    });
                    let was_last = q.waiters.is_empty();
                    if let Some(park) = parks.first() {
                        left.push((q.key, park.protocol));
                    }
                    for park in parks.drain(..) {
                        park.protocol.left(q.key, park.token, was_last);
                    }
                }
                self.drop_empty_queues(&mut queues);
                self.queued_async.fetch_sub(tokens.len(), Ordering::Relaxed);
            }
            // Before `removed`: until then the owner pins the memory of
            // the waiters it had here.
            for (key, protocol) in left.drain(..) {
                protocol.after_left(self, key);
            }
            count += tokens.len();
            tokens.drain(..).for_each(&mut removed);
        }
        count
    }

    /// Whether the waiter `seq` is still queued on `key`.
    pub fn is_queued(&self, key: Key, seq: u64) -> bool {
        let queues = self.bucket(key).queues.lock();
        position(&queues, key).is_some_and(|i| queues[i].waiters.contains(seq))
    }

    /// How many async waiters are queued, over all keys.
    pub fn queued_async(&self) -> usize {
        self.queued_async.load(Ordering::Relaxed)
    }

    /// How many waiters (of any kind) are queued on `key`.
    pub fn len(&self, key: Key) -> usize {
        let queues = self.bucket(key).queues.lock();
        position(&queues, key).map_or(0, |i| queues[i].waiters.len())
    }
}
