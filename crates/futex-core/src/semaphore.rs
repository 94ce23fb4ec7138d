//! A counting semaphore in one 32-bit word, over the wait table: the
//! protocol behind `Semaphore`, built like the lock ([`crate::lock`]).
//!
//! # The word
//!
//! | word        | meaning                                              |
//! | ----------- | ---------------------------------------------------- |
//! | `n ≥ 0`     | `n` permits available, nobody queued                 |
//! | [`QUEUED`]  | no permit available, acquirers queued (`-1` in JS)   |
//!
//! Permits are at most 2³¹ − 1, so `QUEUED` (all bits set) is never a count.
//! `QUEUED` is set if and only if acquirers are queued on the word's address
//! (a plain notify of the word by someone else can empty the queue behind the
//! protocol's back: the next release or acquisition then treats `QUEUED` as
//! 0 permits and repairs it). It only changes under the bucket lock of that
//! address; outside it, callers only ever change a count to a count:
//!
//! * acquire, uncontended: `n → n − 1` for `n > 0` (one compare-exchange in
//!   the caller's own code, e.g. JavaScript);
//! * release, uncontended: `n → n + k` for `n ≥ 0`; a caller that finds
//!   `QUEUED` calls [`RawSemaphore::release`].
//!
//! Because a queued acquirer means the word holds no permit, nobody can take
//! a permit past a queued acquirer: a stream of uncontended acquisitions
//! cannot starve a queued one.
//!
//! # The protocol
//!
//! * **park** ([`RawSemaphore::acquire`], [`RawSemaphore::acquire_async`]):
//!   the validation takes a permit if the word has one, and otherwise sets
//!   `QUEUED` and queues the caller.
//! * **release** ([`RawSemaphore::release`]): while permits remain and
//!   acquirers are queued, [`WaitTable::unpark_one_if`] hands one permit to
//!   the oldest ([`TOKEN_PERMIT`]); the word keeps `QUEUED` while others
//!   remain, and gets the permits left over once nobody is queued. Strictly
//!   FIFO: unlike the lock, there is no critical section that a woken
//!   acquirer and a newcomer compete to run next, and a semaphore's holders
//!   (a pool's connections, a rate limit) are usually held long enough that
//!   the wake-up is a small part of them.
//! * **leave** ([`Protocol::left`]): an acquirer that times out, is
//!   cancelled or whose thread stops clears `QUEUED` if it was the last one
//!   queued. It was handed nothing (handing and leaving are both decided
//!   under the bucket lock), so nothing is lost.
//! * **lost tokens** ([`Protocol::lost`]): an acquirer whose thread stops
//!   after being handed a permit releases it again, as [`release`] would.
//!
//! Permits have no owner: a thread that ends holding one does not give it
//! back ([`Protocol::thread_ended`] does nothing).
//!
//! [`release`]: RawSemaphore::release

use std::time::{Duration, Instant};

use crate::sync::Arc;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use crate::table::{Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkResult, UnparkToken, WaitResult, WaitTable};

/// The word while acquirers are queued (`-1` as an `Int32Array` element).
pub const QUEUED: u32 = u32::MAX;
/// The most permits the word holds.
pub const MAX: u32 = 0x7fff_ffff;

/// A permit handed to the woken acquirer. The lock's
/// [`TOKEN_HANDOFF`](crate::lock::TOKEN_HANDOFF) code, so that whatever
/// delivers a lock's handoff delivers this one the same way.
pub const TOKEN_PERMIT: UnparkToken = crate::lock::TOKEN_HANDOFF;

/// How an acquisition ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// The caller holds a permit.
    Acquired,
    /// The deadline passed; nothing is held or queued.
    TimedOut,
    /// The caller's thread is stopping; nothing is held or queued.
    Interrupted,
}

/// The semaphore protocol (it has no parameters: one `static` serves every word).
pub struct RawSemaphore;

/// The word at `key`.
///
/// # Safety
/// `key` is the address of a live, 4-aligned word for as long as the
/// reference is used.
unsafe fn word<'a>(key: Key) -> &'a AtomicU32 {
    // SAFETY: the caller's duty, as stated.
    unsafe { &*(key as *const AtomicU32) }
}

/// The permits a word holds (`QUEUED` holds none).
fn permits(w: u32) -> u32 {
    if w == QUEUED {
        0
    } else {
        w
    }
}

impl RawSemaphore {
    /// Under the bucket lock: take a permit (true: do not queue), or make
    /// sure the word says `QUEUED` (false: queue).
    fn validate(word: &AtomicU32) -> bool {
        let mut w = word.load(SeqCst);
        loop {
            let next = match permits(w) {
                0 => QUEUED,
                n => n - 1,
            };
            if next == w || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok() {
                return next != QUEUED;
            }
            w = word.load(SeqCst);
        }
    }

    fn park_of(&'static self) -> Park {
        Park { protocol: self, token: 0, since: Instant::now() }
    }

    /// Blocks until the caller holds a permit of the word at `key` (see
    /// [`Taken`]). Parks in slices of `slice`, calling `interrupted` between
    /// them (see [`WaitTable::wait`]).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn acquire(
        &'static self,
        table: &WaitTable,
        key: Key,
        deadline: Option<Instant>,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Taken {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        loop {
            let mut taken = false;
            let validate = |_| {
                taken = Self::validate(word);
                !taken
            };
            match table.park(key, validate, self.park_of(), || deadline, slice, &mut interrupted) {
                WaitResult::NotEqual if taken => return Taken::Acquired,
                WaitResult::Unparked(TOKEN_PERMIT) => return Taken::Acquired,
                WaitResult::TimedOut => return Taken::TimedOut,
                WaitResult::Interrupted => return Taken::Interrupted,
                // A plain notify of the word: look again.
                _ => {}
            }
        }
    }

    /// One step of an async acquisition: takes a permit now (`None`) or
    /// queues an async waiter of `owner` with the owner's `token` and returns
    /// its ticket. Its outcome is
    /// [`AsyncOutcome::Unparked`](crate::AsyncOutcome::Unparked) with
    /// [`TOKEN_PERMIT`] (it holds a permit), or a timeout.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call, and
    /// stays one while the waiter is queued (its owner keeps the memory).
    pub unsafe fn acquire_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        owner: Arc<dyn Owner>,
        token: impl FnOnce() -> u64,
    ) -> Option<Ticket> {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let validate = |_| if Self::validate(word) { None } else { Some(token()) };
        table.park_async(key, validate, self.park_of(), owner)
    }

    /// The contended release of `n` permits (the word said `QUEUED`, or the
    /// fast path was not tried): hands one permit to each of the oldest
    /// queued acquirers, at most `n` of them, and adds the rest to the word.
    /// Returns how many permits could not be added because the word would
    /// exceed [`MAX`] (0 unless callers release more than they took).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn release(&self, table: &WaitTable, key: Key, mut n: u32) -> u32 {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        while n > 0 {
            let mut refused = 0;
            let mut last = false;
            let (_, handed) = table.unpark_one_if(key, |r: UnparkResult| {
                if r.unparked.is_some() {
                    // Permits go to the queue first: the word stays QUEUED
                    // while others remain, else gets what is left.
                    last = !r.have_more;
                    word.store(if r.have_more { QUEUED } else { n - 1 }, SeqCst);
                    return Some(TOKEN_PERMIT);
                }
                // Nobody queued: the permits go to the word (compare: the
                // fast paths change counts outside the bucket lock).
                let mut w = word.load(SeqCst);
                loop {
                    let have = permits(w);
                    let add = n.min(MAX - have);
                    refused = n - add;
                    match word.compare_exchange(w, have + add, SeqCst, SeqCst) {
                        Ok(_) => return None,
                        Err(now) => w = now,
                    }
                }
            });
            if !handed {
                return refused;
            }
            if last {
                // The rest went to the word with the last handoff.
                return 0;
            }
            n -= 1;
        }
        0
    }
}

impl Protocol for RawSemaphore {
    fn left(&self, key: Key, _token: ParkToken, was_last: bool) {
        if was_last {
            // SAFETY: the leaving waiter pins the memory (see `Protocol`).
            let _ = unsafe { word(key) }.compare_exchange(QUEUED, 0, SeqCst, SeqCst);
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, token: UnparkToken) {
        if token == TOKEN_PERMIT {
            // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
            unsafe { self.release(table, key, 1) };
        } else {
            // A plain notify of the word: the next waiter gets it.
            table.notify(key, 1);
        }
    }
}
