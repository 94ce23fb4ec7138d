//! A counting semaphore in one 32-bit word, over the wait table: the
//! protocol behind `Semaphore`, built like the lock ([`crate::lock`]).
//!
//! # The word
//!
//! | word       | meaning                                               |
//! | ---------- | ----------------------------------------------------- |
//! | `n`        | `n` permits available, nobody queued                  |
//! | `Q + n`    | `n` permits available, acquirers queued               |
//!
//! `n` is at most [`MAX`] = 2³¹ − 1; [`Q`] is the top bit (the word is
//! negative as an `Int32Array` element). `Q` is set if and only if
//! acquirers are queued on the word's address; it only changes under that
//! address's bucket lock (here), except that it is carried along by the
//! compare-exchanges of the fast paths, which never change it:
//!
//! * acquire, uncontended: `w → w − 1` when `w` holds a permit (one
//!   compare-exchange in the caller's own code, e.g. JavaScript);
//! * release, uncontended: `n → n + k` without `Q`; a caller that finds `Q`
//!   calls [`RawSemaphore::release`].
//!
//! # The protocol (the lock's, with permits for the lock)
//!
//! * **park** ([`RawSemaphore::acquire`], [`RawSemaphore::acquire_async`]):
//!   the validation takes a permit if the word has one, and otherwise sets
//!   `Q` and queues the caller.
//! * **release** ([`RawSemaphore::release`]): for each permit, while
//!   acquirers are queued, [`WaitTable::unpark_one_if`] wakes the oldest and,
//!   in the same critical section, either hands it the permit
//!   ([`TOKEN_PERMIT`]: the word never holds it) if it has waited at least
//!   `fair_after`, or adds the permit to the word and lets the woken
//!   acquirer compete for it with newcomers ([`TOKEN_RETRY`]). `Q` stays set
//!   exactly when more acquirers remain; permits left once nobody is queued
//!   go to the word. So a stream of uncontended acquisitions can take a
//!   permit past a queued acquirer for at most `fair_after`: after that, the
//!   next release hands it one (the lock's bounded unfairness, for the
//!   lock's reason: handing every permit to a sleeping thread makes every
//!   release wait for a wake-up, about 20 times slower on a busy one-permit
//!   semaphore, docs/lock.md).
//! * **leave** ([`Protocol::left`]): an acquirer that times out, is
//!   cancelled or whose thread stops clears `Q` if it was the last one
//!   queued. It was handed nothing (handing and leaving are both decided
//!   under the bucket lock), so nothing is lost.
//! * **lost tokens** ([`Protocol::lost`]): an acquirer whose thread stops
//!   after being woken passes what it got on: a handed permit is released
//!   again (as [`release`] would), a wake-up to compete goes to the next
//!   acquirer if the word holds a permit.
//!
//! Permits have no owner: a thread that ends holding one does not give it
//! back. When a thread ends, a word that holds permits while acquirers are
//! queued ([`Protocol::thread_ended`]) wakes its oldest acquirer to compete:
//! a release woke one to compete for those permits, and it may have been the
//! ended thread's, its wake-up already in its JavaScript, where nothing
//! passes it on.
//!
//! [`release`]: RawSemaphore::release

use std::time::{Duration, Instant};

use crate::sync::Arc;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use crate::table::{Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkResult, UnparkToken, WaitResult, WaitTable};

/// The "acquirers queued" bit.
pub const Q: u32 = 1 << 31;
/// The most permits the word holds.
pub const MAX: u32 = Q - 1;

/// Unpark tokens of the semaphore: the lock's codes, so that whatever
/// delivers a lock's outcomes delivers these the same way.
/// Woken: a permit was added to the word (or is on its way), compete for it.
pub const TOKEN_RETRY: UnparkToken = crate::lock::TOKEN_RETRY;
/// Woken holding a permit: the releaser handed it over.
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

/// The semaphore protocol: its fairness threshold.
pub struct RawSemaphore {
    /// An acquirer woken after waiting this long is handed the permit; a
    /// younger one competes with newcomers (as the lock's `fair_after`).
    pub fair_after: Duration,
}

/// The word at `key`.
///
/// # Safety
/// `key` is the address of a live, 4-aligned word for as long as the
/// reference is used.
unsafe fn word<'a>(key: Key) -> &'a AtomicU32 {
    // SAFETY: the caller's duty, as stated.
    unsafe { &*(key as *const AtomicU32) }
}

impl RawSemaphore {
    /// Under the bucket lock: take a permit (true: do not queue), or make
    /// sure `Q` is set (false: queue).
    fn validate(word: &AtomicU32) -> bool {
        let mut w = word.load(SeqCst);
        loop {
            let take = w & MAX != 0;
            let next = if take { w - 1 } else { w | Q };
            if next == w || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok() {
                return take;
            }
            w = word.load(SeqCst);
        }
    }

    fn park_of(&'static self, since: Instant) -> Park {
        Park { protocol: self, token: 0, since }
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
        let since = Instant::now();
        loop {
            let mut taken = false;
            let validate = |_| {
                taken = Self::validate(word);
                !taken
            };
            match table.park(key, validate, self.park_of(since), || deadline, slice, &mut interrupted) {
                WaitResult::NotEqual if taken => return Taken::Acquired,
                WaitResult::Unparked(TOKEN_PERMIT) => return Taken::Acquired,
                WaitResult::TimedOut => return Taken::TimedOut,
                WaitResult::Interrupted => return Taken::Interrupted,
                // Woken to compete (or a plain notify of the word): look again.
                _ => {}
            }
        }
    }

    /// One step of an async acquisition by a caller waiting since `since`:
    /// takes a permit now (`None`) or queues an async waiter of `owner` with
    /// the owner's `token` and returns its ticket. Its outcome is
    /// [`AsyncOutcome::Unparked`](crate::AsyncOutcome::Unparked) with
    /// [`TOKEN_PERMIT`] (it holds a permit) or [`TOKEN_RETRY`] (look again),
    /// or a timeout.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call, and
    /// stays one while the waiter is queued (its owner keeps the memory).
    pub unsafe fn acquire_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        since: Instant,
        owner: Arc<dyn Owner>,
        token: impl FnOnce() -> u64,
    ) -> Option<Ticket> {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let validate = |_| if Self::validate(word) { None } else { Some(token()) };
        table.park_async(key, validate, self.park_of(since), owner)
    }

    /// The contended release of `n` permits (the word has `Q`, or the fast
    /// path was not tried): each goes to the oldest queued acquirer, handed
    /// over or added to the word for it to compete (see the module docs);
    /// those left once nobody is queued are added to the word. Returns how
    /// many permits could not be added because the word would exceed
    /// [`MAX`] (0 unless callers release more than they took).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn release(&self, table: &WaitTable, key: Key, mut n: u32) -> u32 {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let fair = |since: Option<Instant>| since.is_some_and(|s| s.elapsed() >= self.fair_after);
        while n > 0 {
            // Permits this step disposed of: handed over or added to the word.
            let mut placed = 0;
            let (_, woken) = table.unpark_one_if(key, |r: UnparkResult| {
                // Compare-exchanges: the fast paths change the count outside
                // the bucket lock (never Q).
                let mut w = word.load(SeqCst);
                loop {
                    let have = w & MAX;
                    let (add, token) = match r.unparked {
                        Some((_, since)) if fair(since) => (0, Some(TOKEN_PERMIT)),
                        Some(_) => (1.min(MAX - have), Some(TOKEN_RETRY)),
                        None => (n.min(MAX - have), None),
                    };
                    let next = (have + add) | if r.have_more { Q } else { 0 };
                    if w == next || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok() {
                        placed = if token == Some(TOKEN_PERMIT) { 1 } else { add };
                        return token;
                    }
                    w = word.load(SeqCst);
                }
            });
            if !woken || placed == 0 {
                return n - placed;
            }
            n -= placed;
        }
        0
    }
}

impl Protocol for RawSemaphore {
    fn left(&self, key: Key, _token: ParkToken, was_last: bool) {
        if was_last {
            // SAFETY: the leaving waiter pins the memory (see `Protocol`).
            unsafe { word(key) }.fetch_and(MAX, SeqCst);
        }
    }

    fn thread_ended(&self, key: Key, _head: ParkToken, have_more: bool, _ended: u32) -> Option<UnparkToken> {
        // SAFETY: the queued head pins the memory (see `Protocol`).
        let word = unsafe { word(key) };
        let mut w = word.load(SeqCst);
        loop {
            if w & MAX == 0 {
                return None;
            }
            let next = (w & MAX) | if have_more { Q } else { 0 };
            match word.compare_exchange(w, next, SeqCst, SeqCst) {
                Ok(_) => return Some(TOKEN_RETRY),
                Err(now) => w = now,
            }
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, token: UnparkToken) {
        // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
        let word = unsafe { word(key) };
        if token == TOKEN_PERMIT {
            // SAFETY: as above.
            unsafe { self.release(table, key, 1) };
            return;
        }
        // A wake-up to compete: if the word holds a permit, the next
        // acquirer competes for it instead.
        table.unpark_one_if(key, |r| {
            let mut w = word.load(SeqCst);
            loop {
                if w & MAX == 0 || r.unparked.is_none() {
                    return None;
                }
                let next = (w & MAX) | if r.have_more { Q } else { 0 };
                match word.compare_exchange(w, next, SeqCst, SeqCst) {
                    Ok(_) => return Some(TOKEN_RETRY),
                    Err(now) => w = now,
                }
            }
        });
    }
}
