//! The wait table: hashed buckets of per-address FIFO queues.
//!
//! # Implementation details
//!
//! An address is hashed to one of a fixed number of buckets. Each bucket is a
//! mutex around a short list of queues, one per address that currently has
//! waiters (a bucket rarely holds more than one). A queue is ordered by a
//! sequence number taken under the bucket lock, so its order is the order in
//! which waiters enqueued: popping the smallest entry is FIFO, and a waiter
//! that leaves early (timeout, cancellation) is removed by its sequence number
//! in `O(log n)` without disturbing the others.
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

use std::collections::BTreeMap;
use std::time::Instant;

use crate::sync::{current, fence, park_timeout, Arc, AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering, Thread};
// A diagnostic counter, not part of the protocol: `std`'s even under loom, so
// that models do not explore its interleavings.
use std::sync::atomic::AtomicUsize;

/// A memory location: the address of the waited-on element. A
/// `SharedArrayBuffer`'s memory has the same address in every thread, so the
/// address alone identifies the location across threads.
pub type Key = usize;

/// What a blocking [`WaitTable::wait`] ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitResult {
    /// Woken by [`WaitTable::notify`].
    Ok,
    /// `validate` returned false: the value was not the expected one; nothing was queued.
    NotEqual,
    /// The deadline passed before a notify reached this waiter.
    TimedOut,
    /// The `interrupted` probe reported that the waiting thread must stop; the
    /// waiter left the queue without consuming a wake-up.
    Interrupted,
}

/// The outcome delivered to an async waiter's [`Owner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncOutcome {
    Ok,
    TimedOut,
    /// Ended early by [`WaitTable::expire_first`]: for the waiter, a timeout
    /// that came sooner. It consumed no wake-up.
    Expired,
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
    /// [`AsyncOutcome::Expired`] passes it on with
    /// [`WaitTable::expire_first`]`(key)`.
    fn complete(&self, key: Key, token: u64, outcome: AsyncOutcome);
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
    /// Set (under the bucket lock) by the notify that removed this waiter.
    notified: AtomicBool,
    thread: Thread,
}

enum Waiter {
    Sync(Arc<SyncWaiter>),
    /// An async waiter: its owner and the owner's name for it.
    Async(Arc<dyn Owner>, u64),
}

struct Queue {
    key: Key,
    /// Waiters of `key` by sequence number: the first entry is the oldest.
    waiters: BTreeMap<u64, Waiter>,
}

/// One bucket, padded to its own cache line so neighbours do not false-share.
#[repr(align(64))]
struct Bucket {
    /// Queues of the addresses hashed here that have at least one waiter.
    /// Empty queues are removed as soon as they empty.
    queues: Mutex<Vec<Queue>>,
}

/// How many presence counts the table keeps (a power of two).
pub const PRESENCE_SLOTS: usize = 4096;

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
    presence: Box<[AtomicU32]>,
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
#[cfg(not(loom))]
fn spin_until(done: impl Fn() -> bool) -> bool {
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

/// Under loom spinning only multiplies the interleavings to explore.
#[cfg(loom)]
fn spin_until(_done: impl Fn() -> bool) -> bool {
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
            presence: (0..PRESENCE_SLOTS).map(|_| AtomicU32::new(0)).collect(),
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
        self.enqueue_with(key, || if validate() { waiter.take() } else { None })
    }

    /// [`enqueue`](Self::enqueue) with the waiter made by `make` under the
    /// bucket lock (`None`: nothing is queued).
    fn enqueue_with(&self, key: Key, make: impl FnOnce() -> Option<Waiter>) -> Option<u64> {
        // Present before the value is compared (see the module docs).
        let presence = &self.presence[presence_slot(key)];
        presence.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let mut queues = self.bucket(key).queues.lock();
        let Some(waiter) = make() else {
            presence.fetch_sub(1, Ordering::SeqCst);
            return None;
        };
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        if matches!(waiter, Waiter::Async(..)) {
            self.queued_async.fetch_add(1, Ordering::Relaxed);
        }
        match position(&queues, key) {
            Some(i) => {
                queues[i].waiters.insert(seq, waiter);
                // The queue already holds the slot's count.
                presence.fetch_sub(1, Ordering::SeqCst);
            }
            None => {
                // The new queue keeps the count this waiter took.
                let mut waiters = BTreeMap::new();
                waiters.insert(seq, waiter);
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
        self.presence[presence_slot(q.key)].fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether `key` may have waiters: false only if no address of its
    /// presence slot has a queue and no waiter is checking its value. The
    /// caller changed the value it notifies about before asking; the fence
    /// orders that change before the read (see the module docs).
    pub fn may_have_waiters(&self, key: Key) -> bool {
        fence(Ordering::SeqCst);
        self.presence[presence_slot(key)].load(Ordering::SeqCst) != 0
    }

    /// The presence counts, [`PRESENCE_SLOTS`] of them, for a JavaScript
    /// layer that reads them with `Atomics.load` (see the module docs). They
    /// live as long as the table.
    #[cfg(not(loom))]
    pub fn presence(&self) -> &[AtomicU32] {
        &self.presence
    }

    /// Removes the waiter `seq` from `key`'s queue. Returns it if it was still
    /// queued, `None` if someone else already decided its outcome.
    fn remove(&self, key: Key, seq: u64) -> Option<Waiter> {
        let mut queues = self.bucket(key).queues.lock();
        let i = position(&queues, key)?;
        let waiter = queues[i].waiters.remove(&seq);
        if queues[i].waiters.is_empty() {
            self.drop_queue(&mut queues, i);
        }
        if matches!(waiter, Some(Waiter::Async(..))) {
            self.queued_async.fetch_sub(1, Ordering::Relaxed);
        }
        waiter
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
        mut interrupted: impl FnMut() -> bool,
    ) -> WaitResult {
        let me = Arc::new(SyncWaiter { notified: AtomicBool::new(false), thread: current() });
        let Some(seq) = self.enqueue(key, validate, Waiter::Sync(me.clone())) else {
            return WaitResult::NotEqual;
        };
        // The other side of a ping-pong usually answers within microseconds:
        // check briefly before paying for a futex sleep and wake-up.
        if spin_until(|| me.notified.load(Ordering::Acquire)) {
            return self.woken(key, &mut interrupted);
        }
        loop {
            // Acquire pairs with the Release store in `notify`: whatever the
            // notifier wrote before notifying is visible once we see the flag.
            if me.notified.load(Ordering::Acquire) {
                return self.woken(key, &mut interrupted);
            }
            let mut nap = slice;
            if let Some(deadline) = deadline {
                let now = Instant::now();
                if now >= deadline {
                    return self.leave(key, seq, WaitResult::TimedOut);
                }
                nap = nap.min(deadline - now);
            }
            park_timeout(nap);
            if !me.notified.load(Ordering::Acquire) && interrupted() {
                return match self.remove(key, seq) {
                    Some(_) => WaitResult::Interrupted,
                    // A notify removed us (and counted us) under the lock we
                    // just took: the wake-up is ours, and we cannot use it.
                    None => self.pass_on(key),
                };
            }
        }
    }

    /// A blocking waiter was notified. If its thread is being stopped it
    /// returns to no JavaScript, and a wake-up it kept would be counted by
    /// its notifier and seen by nobody: it goes to the next waiter instead.
    fn woken(&self, key: Key, interrupted: &mut impl FnMut() -> bool) -> WaitResult {
        if interrupted() {
            self.pass_on(key)
        } else {
            WaitResult::Ok
        }
    }

    /// Hands a wake-up this (stopping) thread consumed to the next waiter of `key`.
    fn pass_on(&self, key: Key) -> WaitResult {
        self.notify(key, 1);
        WaitResult::Interrupted
    }

    /// A blocking waiter gives up (`why`): it leaves the queue, unless a
    /// notify already removed it, in which case that wake-up is its outcome.
    fn leave(&self, key: Key, seq: u64, why: WaitResult) -> WaitResult {
        match self.remove(key, seq) {
            Some(_) => why,
            // Not queued any more: a notify removed us and set `notified`
            // under the same bucket lock we just took, so the wake-up is ours.
            None => WaitResult::Ok,
        }
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
        self.enqueue(key, validate, Waiter::Async(owner, token)).map(|seq| Ticket { key, seq, token })
    }

    /// [`wait_async`](Self::wait_async) where `validate` also chooses the
    /// token: it runs under the bucket lock and returns `None` for 'not
    /// equal', or the token to queue the waiter with. Whatever `validate`
    /// decides is therefore atomic with respect to every other operation on
    /// `key` (for instance an [`expire_first`](Self::expire_first) that must
    /// either see this waiter or happen before `validate` runs).
    pub fn wait_async_with(
        &self,
        key: Key,
        validate: impl FnOnce() -> Option<u64>,
        owner: Arc<dyn Owner>,
    ) -> Option<Ticket> {
        let mut token = 0;
        let seq = self.enqueue_with(key, || {
            token = validate()?;
            Some(Waiter::Async(owner, token))
        })?;
        Some(Ticket { key, seq, token })
    }

    /// Ends the oldest async waiter of `key` whose owner is alive early, with
    /// [`AsyncOutcome::Expired`] (blocking waiters are skipped; async waiters
    /// of dead owners are dropped on the way, as `notify` does). Consumes no
    /// wake-up: the waiter just looks again sooner. Returns whether one was
    /// found.
    pub fn expire_first(&self, key: Key) -> bool {
        let found = {
            let mut queues = self.bucket(key).queues.lock();
            let Some(i) = position(&queues, key) else {
                return false;
            };
            let waiters = &mut queues[i].waiters;
            let mut found = None;
            let mut dead = Vec::new();
            for (&seq, waiter) in waiters.iter() {
                if let Waiter::Async(owner, token) = waiter {
                    if owner.is_alive() {
                        found = Some((seq, owner.clone(), *token));
                        break;
                    }
                    dead.push(seq);
                }
            }
            for seq in dead.iter().chain(found.as_ref().map(|(seq, ..)| seq)) {
                waiters.remove(seq);
                self.queued_async.fetch_sub(1, Ordering::Relaxed);
            }
            if waiters.is_empty() {
                self.drop_queue(&mut queues, i);
            }
            found
        };
        match found {
            Some((_, owner, token)) => {
                owner.complete(key, token, AsyncOutcome::Expired);
                true
            }
            None => false,
        }
    }

    /// Times out an async waiter: if it is still queued it is removed and its
    /// owner gets [`AsyncOutcome::TimedOut`]. Returns whether that happened
    /// (false: a notify, cancel or teardown got there first).
    pub fn timeout(&self, ticket: Ticket) -> bool {
        match self.remove(ticket.key, ticket.seq) {
            Some(Waiter::Async(owner, token)) => {
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
            Waiter::Async(_, token) => Some(token),
            Waiter::Sync(_) => unreachable!("tickets are only handed out for async waiters"),
        }
    }

    /// Wakes up to `count` waiters of `key`, oldest first, and returns how
    /// many were woken. Async waiters whose owner is no longer alive are
    /// dropped on the way and not counted.
    pub fn notify(&self, key: Key, count: usize) -> usize {
        let mut sync_woken: Vec<Arc<SyncWaiter>> = Vec::new();
        let mut async_woken: Vec<(Arc<dyn Owner>, u64)> = Vec::new();
        let mut woken = 0;
        if count == 0 || !self.may_have_waiters(key) {
            return 0;
        }
        {
            let mut queues = self.bucket(key).queues.lock();
            let Some(i) = position(&queues, key) else {
                return 0;
            };
            let waiters = &mut queues[i].waiters;
            while woken < count {
                let Some((_, waiter)) = waiters.pop_first() else { break };
                match waiter {
                    Waiter::Sync(w) => {
                        // Release pairs with the Acquire load in `wait`.
                        w.notified.store(true, Ordering::Release);
                        sync_woken.push(w);
                        woken += 1;
                    }
                    Waiter::Async(owner, token) => {
                        self.queued_async.fetch_sub(1, Ordering::Relaxed);
                        if owner.is_alive() {
                            async_woken.push((owner, token));
                            woken += 1;
                        }
                    }
                }
            }
            if waiters.is_empty() {
                self.drop_queue(&mut queues, i);
            }
        }
        // Deliver after releasing the lock.
        for w in &sync_woken {
            w.thread.unpark();
        }
        for (owner, token) in async_woken {
            owner.complete(key, token, AsyncOutcome::Ok);
        }
        woken
    }

    /// Removes every async waiter that belongs to `owner` (a thread being torn
    /// down), without delivering outcomes; `removed(token)` is called for
    /// each, after the bucket's lock is released. Returns how many were removed.
    pub fn remove_owner(&self, owner: &Arc<dyn Owner>, mut removed: impl FnMut(u64)) -> usize {
        let target = Arc::as_ptr(owner) as *const ();
        let mut count = 0;
        let mut tokens = Vec::new();
        for bucket in self.buckets.iter() {
            {
                let mut queues = bucket.queues.lock();
                for q in queues.iter_mut() {
                    q.waiters.retain(|_, w| match w {
                        Waiter::Async(o, token) if Arc::as_ptr(o) as *const () == target => {
                            tokens.push(*token);
                            false
                        }
                        _ => true,
                    });
                }
                let mut i = 0;
                while i < queues.len() {
                    if queues[i].waiters.is_empty() {
                        self.drop_queue(&mut queues, i);
                    } else {
                        i += 1;
                    }
                }
                self.queued_async.fetch_sub(tokens.len(), Ordering::Relaxed);
            }
            count += tokens.len();
            tokens.drain(..).for_each(&mut removed);
        }
        count
    }

    /// Whether the waiter `seq` is still queued on `key`.
    pub fn is_queued(&self, key: Key, seq: u64) -> bool {
        let queues = self.bucket(key).queues.lock();
        position(&queues, key).is_some_and(|i| queues[i].waiters.contains_key(&seq))
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
