//! A counting semaphore in two 32-bit words, over the wait table: the
//! protocol behind `Semaphore`, built like the lock ([`crate::lock`]). An
//! acquisition takes `n` permits at once (a weighted semaphore), or none.
//!
//! # The words
//!
//! `WORD` at the key, `RESERVE` at key + 4:
//!
//! | `WORD`     | meaning                                               |
//! | ---------- | ----------------------------------------------------- |
//! | `n`        | `n` permits free, nobody queued                       |
//! | `Q + n`    | `n` permits free, acquirers queued                    |
//!
//! `n` is at most [`MAX`] = 2³¹ − 1; [`Q`] is the top bit (the word is
//! negative as an `Int32Array` element). `Q` is set if and only if
//! acquirers are queued on the word's address; it only changes under that
//! address's bucket lock (here), except that it is carried along by the
//! compare-exchanges of the fast paths, which never change it:
//!
//! * acquire `k`, uncontended: `w → w − k` when `w` holds `k` free permits
//!   (one compare-exchange in the caller's own code, e.g. JavaScript);
//! * release `k`, uncontended: `n → n + k` without `Q`; a caller that finds
//!   `Q` calls [`RawSemaphore::release`].
//!
//! `RESERVE` holds the permits set aside for the oldest queued acquirer
//! (see the policy): nobody else can take them, because the fast paths never
//! look at it. It is read and written only under the bucket lock, and is 0
//! whenever `Q` is clear. Free plus reserved permits never exceed [`MAX`].
//!
//! # The policy
//!
//! * **Queued acquirers are served in order.** A release serves the oldest
//!   queued acquirer once the permits not held (free plus reserved) cover
//!   its whole request, then the next, and stops at the first one they do
//!   not cover: a large request at the head is never passed by smaller ones
//!   queued behind it.
//! * **Newcomers may pass for at most `fair_after`.** While the oldest
//!   acquirer has waited less than `fair_after` (counted from the start of
//!   its acquisition, across re-queueings), free permits stay in `WORD`,
//!   where newcomers and `tryAcquire` may take them (the lock's bounded
//!   unfairness, for the lock's reason: handing every permit to a sleeping
//!   thread makes every release wait for a wake-up, about 20 times slower on
//!   a busy one-permit semaphore, docs/lock.md); a release that covers it
//!   wakes it to compete ([`TOKEN_RETRY`]). Once it has waited longer, a
//!   release that covers it **hands it its permits** (they leave the words
//!   in the same critical section as the wake-up: [`permit_token`]), and
//!   one that does not **reserves** every free permit for it: `RESERVE`
//!   takes them out of `WORD`, and later releases add to `RESERVE`, until
//!   the request is covered and handed over.
//!
//! So an acquirer of `n` permits never starves while permits are released:
//! it waits for those queued before it, and for newcomers for at most
//! `fair_after`; after that every permit released goes to it until it has
//! its `n`. There is no partial grant: the permits set aside belong to the
//! queue's head as a place, not to a waiter, and a waiter holds permits only
//! once it holds all of them.
//!
//! # The operations
//!
//! * **park** ([`RawSemaphore::acquire`], [`RawSemaphore::acquire_async`]):
//!   the validation takes `n` permits if `WORD` has them free, and
//!   otherwise sets `Q` and queues the caller with `n` as its park token.
//! * **release** ([`RawSemaphore::release`]): `k` permits are added to what
//!   is not held, then [`WaitTable::unpark_one_if`] looks at the oldest
//!   acquirer, and under the bucket lock hands it its permits, wakes it to
//!   compete, or reserves for it (see the policy), setting `Q` exactly when
//!   more acquirers remain; while it woke someone and permits are left, it
//!   looks at the next one.
//! * **leave** ([`Protocol::left`]): an acquirer that times out, is
//!   cancelled or whose thread stops clears `Q` if it was the last one
//!   queued, and then the reserved permits go back to `WORD`. It was handed
//!   nothing (handing and leaving are both decided under the bucket lock),
//!   so nothing is lost. Then ([`Protocol::after_left`], outside the lock)
//!   the acquirers behind it are looked at as a release of 0 permits would:
//!   if it was the head, the permits it waited for may cover them, and
//!   permits reserved for it are reserved again for the next head or go back
//!   to `WORD`.
//! * **lost tokens** ([`Protocol::lost`]): an acquirer whose thread stops
//!   after being woken passes what it got on: handed permits are released
//!   again (as [`release`] would), a wake-up to compete becomes a look at
//!   the queue as above.
//!
//! Permits have no owner: a thread that ends holding some does not give
//! them back. When a thread ends, a semaphore whose free permits cover its
//! oldest queued acquirer ([`Protocol::thread_ended`]) wakes that acquirer
//! to compete: a release woke one to compete for those permits, and it may
//! have been the ended thread's, its wake-up already in its JavaScript,
//! where nothing passes it on.
//!
//! [`release`]: RawSemaphore::release

use std::time::{Duration, Instant};

use crate::sync::Arc;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use crate::table::{Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkResult, UnparkToken, WaitResult, WaitTable};

/// The "acquirers queued" bit.
pub const Q: u32 = 1 << 31;
/// The most permits the words hold (free plus reserved).
pub const MAX: u32 = Q - 1;
/// The most permits one acquisition asks for: its count travels in the
/// unpark token above the lock's two kind bits.
pub const MAX_ACQUIRE: u32 = (1 << 30) - 1;

/// Unpark tokens of the semaphore: the lock's kinds in the low two bits,
/// so that whatever delivers a lock's outcomes delivers these the same way.
/// Woken: permits that cover the request are free, compete for them.
pub const TOKEN_RETRY: UnparkToken = crate::lock::TOKEN_RETRY;
/// The kind of a token of an acquirer woken holding its permits: the
/// releaser handed them over (their count above the kind: [`permit_token`]).
pub const TOKEN_PERMIT: UnparkToken = crate::lock::TOKEN_HANDOFF;

/// The token that hands `n` permits over.
pub fn permit_token(n: u32) -> UnparkToken {
    debug_assert!(n <= MAX_ACQUIRE);
    n << 2 | TOKEN_PERMIT
}

/// The permits a token hands over (0 for a wake-up to compete).
pub fn permits_of(token: UnparkToken) -> u32 {
    if crate::lock::kind(token) == TOKEN_PERMIT {
        token >> 2
    } else {
        0
    }
}

/// How an acquisition ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// The caller holds its permits.
    Acquired,
    /// The deadline passed; nothing is held or queued.
    TimedOut,
    /// The caller's thread is stopping; nothing is held or queued.
    Interrupted,
    /// An async acquisition of the caller's own thread is queued ahead of
    /// it (a blocking caller could wait for ever); nothing is held or queued.
    Deadlock,
}

/// The semaphore protocol: its fairness threshold.
pub struct RawSemaphore {
    /// An acquirer at the head of the queue that has waited this long is
    /// handed its permits, or has them reserved; a younger one competes with
    /// newcomers (as the lock's `fair_after`).
    pub fair_after: Duration,
}

/// The words at `key`: `WORD` and `RESERVE`.
///
/// # Safety
/// `key` is the address of two live, 4-aligned words for as long as the
/// references are used.
unsafe fn words<'a>(key: Key) -> (&'a AtomicU32, &'a AtomicU32) {
    let word = key as *const AtomicU32;
    // SAFETY: the caller's duty, as stated. `add(1)` is key + 4 (under loom,
    // the next element of the model's array of its own atomics).
    unsafe { (&*word, &*word.add(1)) }
}

/// What a look at the head decides.
struct Step {
    free: u32,
    reserve: u32,
    token: Option<UnparkToken>,
}

impl RawSemaphore {
    /// Under the bucket lock: take `n` permits (true: do not queue), or make
    /// sure `Q` is set (false: queue).
    fn validate(word: &AtomicU32, n: u32) -> bool {
        let mut w = word.load(SeqCst);
        loop {
            let take = w & MAX >= n;
            let next = if take { w - n } else { w | Q };
            if next == w || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok() {
                return take;
            }
            w = word.load(SeqCst);
        }
    }

    fn park_of(&'static self, since: Instant, n: u32) -> Park {
        Park { protocol: self, token: ParkToken::from(n), since }
    }

    /// Blocks until the caller holds `n` permits (1 to [`MAX_ACQUIRE`]) of
    /// the semaphore at `key` (see [`Taken`]). Parks in slices of `slice`,
    /// calling `interrupted` between them (see [`WaitTable::wait`]).
    ///
    /// # Safety
    /// `key` is the address of the semaphore's two live, 4-aligned words
    /// during the call.
    pub unsafe fn acquire(
        &'static self,
        table: &WaitTable,
        key: Key,
        n: u32,
        deadline: Option<Instant>,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Taken {
        assert!((1..=MAX_ACQUIRE).contains(&n), "an acquisition asks for 1 to {MAX_ACQUIRE} permits");
        // SAFETY: the caller's duty.
        let (word, _) = unsafe { words(key) };
        let since = Instant::now();
        loop {
            let mut taken = false;
            let validate = |_| {
                taken = Self::validate(word, n);
                !taken
            };
            match table.park(key, validate, self.park_of(since, n), || deadline, slice, &mut interrupted) {
                WaitResult::NotEqual if taken => return Taken::Acquired,
                WaitResult::Unparked(token) if permits_of(token) != 0 => return Taken::Acquired,
                WaitResult::TimedOut => return Taken::TimedOut,
                WaitResult::Interrupted => return Taken::Interrupted,
                WaitResult::Deadlock => return Taken::Deadlock,
                // Woken to compete (or a plain notify of the word): look again.
                _ => {}
            }
        }
    }

    /// One step of an async acquisition of `n` permits (1 to
    /// [`MAX_ACQUIRE`]) by a caller waiting since `since`: takes them now
    /// (`None`) or queues an async waiter of `owner` with the owner's
    /// `token` and returns its ticket. Its outcome is
    /// [`AsyncOutcome::Unparked`](crate::AsyncOutcome::Unparked) with a
    /// [`TOKEN_PERMIT`] token (it holds its permits) or [`TOKEN_RETRY`]
    /// (look again), or a timeout.
    ///
    /// # Safety
    /// `key` is the address of the semaphore's two live, 4-aligned words
    /// during the call, and they stay live while the waiter is queued (its
    /// owner keeps the memory).
    pub unsafe fn acquire_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        n: u32,
        since: Instant,
        owner: Arc<dyn Owner>,
        token: impl FnOnce() -> u64,
    ) -> Option<Ticket> {
        assert!((1..=MAX_ACQUIRE).contains(&n), "an acquisition asks for 1 to {MAX_ACQUIRE} permits");
        // SAFETY: the caller's duty.
        let (word, _) = unsafe { words(key) };
        let validate = |_| if Self::validate(word, n) { None } else { Some(token()) };
        table.park_async(key, validate, self.park_of(since, n), owner)
    }

    /// The contended release of `n` permits (the word has `Q`, or the fast
    /// path was not tried), and the look at the queue that follows: see the
    /// module docs. `n` may be 0: then it only serves the acquirers that the
    /// permits not held already cover. Returns how many permits could not
    /// be added because free plus reserved would exceed [`MAX`] (0 unless
    /// callers release more than they took).
    ///
    /// # Safety
    /// `key` is the address of the semaphore's two live, 4-aligned words
    /// during the call.
    pub unsafe fn release(&self, table: &WaitTable, key: Key, n: u32) -> u32 {
        // SAFETY: the caller's duty.
        let (word, reserve) = unsafe { words(key) };
        let fair = |since: Option<Instant>| since.is_some_and(|s| s.elapsed() >= self.fair_after);
        let mut add = n;
        let mut refused = 0;
        // Free permits this call told acquirers to compete for: not counted
        // again for the acquirers behind them, nor reserved away.
        let mut promised: u32 = 0;
        loop {
            let mut go_on = false;
            table.unpark_one_if(key, |r: UnparkResult| {
                let held_back = reserve.load(SeqCst);
                // Compare-exchanges: the fast paths change the free count
                // outside the bucket lock (never Q).
                let mut w = word.load(SeqCst);
                loop {
                    let free = w & MAX;
                    let fits = add.min(MAX.saturating_sub(free + held_back));
                    // Every permit not held.
                    let pool = free + held_back + fits;
                    let step = match r.unparked {
                        None => Step { free: pool, reserve: 0, token: None },
                        Some((need, since)) => {
                            let need = need as u32;
                            let kept = promised.min(pool);
                            let covered = pool - kept >= need;
                            match (fair(since), covered) {
                                (true, true) => Step { free: pool - need, reserve: 0, token: Some(permit_token(need)) },
                                (true, false) => Step { free: kept, reserve: pool - kept, token: None },
                                (false, true) => Step { free: pool, reserve: 0, token: Some(TOKEN_RETRY) },
                                (false, false) => Step { free: pool, reserve: 0, token: None },
                            }
                        }
                    };
                    let queued = if step.token.is_some() { r.have_more } else { r.unparked.is_some() };
                    let next = step.free | if queued { Q } else { 0 };
                    if w == next || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok() {
                        reserve.store(step.reserve, SeqCst);
                        refused += add - fits;
                        add = 0;
                        if let (Some(TOKEN_RETRY), Some((need, _))) = (step.token, r.unparked) {
                            promised = promised.saturating_add(need as u32);
                        }
                        // Look at the next acquirer only if there is one and
                        // some permit is left for it.
                        let left = (step.free + step.reserve).saturating_sub(promised);
                        go_on = step.token.is_some() && r.have_more && left > 0;
                        return step.token;
                    }
                    w = word.load(SeqCst);
                }
            });
            if !go_on {
                return refused;
            }
        }
    }
}

impl Protocol for RawSemaphore {
    fn left(&self, key: Key, _token: ParkToken, was_last: bool) {
        if was_last {
            // SAFETY: the leaving waiter pins the memory (see `Protocol`).
            let (word, reserve) = unsafe { words(key) };
            let held_back = reserve.load(SeqCst);
            // Free plus reserved never exceed MAX: this cannot overflow.
            let mut w = word.load(SeqCst);
            while let Err(now) = word.compare_exchange(w, (w & MAX) + held_back, SeqCst, SeqCst) {
                w = now;
            }
            reserve.store(0, SeqCst);
        }
    }

    fn after_left(&self, table: &WaitTable, key: Key) {
        // SAFETY: the waiter that left still pins the memory (see `Protocol`).
        let (word, reserve) = unsafe { words(key) };
        // Nothing free and nothing reserved: nobody can be served now, and a
        // release that changes this looks at the queue itself.
        if word.load(SeqCst) & MAX != 0 || reserve.load(SeqCst) != 0 {
            // SAFETY: as above.
            unsafe { self.release(table, key, 0) };
        }
    }

    /// A blocking acquisition queued behind an async one of its own thread:
    /// the queue serves that one first, and the permits it is given are used
    /// and given back only once the thread runs JavaScript again.
    fn waits_behind_own_thread(&self) -> bool {
        true
    }

    fn thread_ended(&self, key: Key, head: ParkToken, have_more: bool, _ended: u32) -> Option<UnparkToken> {
        // SAFETY: the queued head pins the memory (see `Protocol`).
        let (word, reserve) = unsafe { words(key) };
        let need = head as u32;
        // Nobody left queued: the reserve goes back with `Q`.
        let held_back = if have_more { 0 } else { reserve.load(SeqCst) };
        let mut w = word.load(SeqCst);
        loop {
            if w & MAX < need {
                return None;
            }
            let next = ((w & MAX) + held_back) | if have_more { Q } else { 0 };
            match word.compare_exchange(w, next, SeqCst, SeqCst) {
                Ok(_) => {
                    if !have_more {
                        reserve.store(0, SeqCst);
                    }
                    return Some(TOKEN_RETRY);
                }
                Err(now) => w = now,
            }
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, token: UnparkToken) {
        // Handed permits go back as a release would give them; a wake-up to
        // compete becomes a look at the queue.
        // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
        unsafe { self.release(table, key, permits_of(token)) };
    }
}
