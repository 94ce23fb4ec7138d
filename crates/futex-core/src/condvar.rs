//! A condition variable's sequence word, over the wait table: the protocol
//! behind `Condition` (Rust std's futex condvar, with an exact "waiters
//! queued" bit so that a notify nobody waits for costs no native call).
//!
//! # The word
//!
//! | word          | meaning                                   |
//! | ------------- | ----------------------------------------- |
//! | `seq·2`       | sequence `seq`, nobody queued             |
//! | `seq·2 + W`   | sequence `seq`, waiters queued            |
//!
//! A notify bumps the sequence by 2, which never changes [`W`]: with one
//! compare-exchange that expects `W` clear in the caller's own code (e.g.
//! JavaScript), nobody being queued; and, finding `W`, with
//! [`RawCondvar::signal`], which bumps and wakes in one call. `W` is set
//! if and only if waiters are queued on the word's address; it only changes
//! under that address's bucket lock (here).
//!
//! # The protocol
//!
//! * **park** ([`RawCondvar::wait`], [`RawCondvar::wait_async`]): a waiter
//!   read the word before releasing its lock; the validation queues it only
//!   if the sequence is still the one it read, setting `W`. Both the notify's
//!   bump and the validation's compare-exchange are read-modify-writes
//!   of the word, so one comes first: either the validation sees the new
//!   sequence and does not sleep, or the notify sees `W` and looks at the queue.
//! * **notify** ([`RawCondvar::signal`], [`RawCondvar::notify`]): the bump,
//!   then [`WaitTable::unpark_one_if`] wakes
//!   the oldest waiter, clearing `W` in the same critical section if it was
//!   the last one, as many times as asked (at most as many as were queued
//!   when it began, so waiters that queue again meanwhile cannot keep it
//!   going).
//! * **leave** ([`Protocol::left`]): a waiter that times out, is cancelled
//!   or whose thread stops clears `W` if it was the last one queued.
//! * **lost tokens** ([`Protocol::lost`]): a waiter whose thread stops after
//!   being woken passes the wake-up on to the next waiter
//!   ([`RawCondvar::pass_on`]).
//! * **relock** ([`RawCondvar::wait_relock`]): a blocking sleeper retakes its
//!   lock in the same call, so that a thread stopping anywhere between the
//!   wake-up and the end of the relock still passes the wake-up on. (An
//!   async sleeper's relock is a later step of its thread; its owner keeps
//!   the wake-up on record until then, see [`RawCondvar::pass_on`].)

use std::time::{Duration, Instant};

use crate::lock::{Acquired, OwnerState, RawLock};
use crate::sync::Arc;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use crate::table::{Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkToken, WaitResult, WaitTable, TOKEN_NORMAL};

/// The "waiters queued" bit.
pub const W: u32 = 1;

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Woken by a notify, or the sequence had already moved on.
    Ok,
    /// The deadline passed; nothing is queued.
    TimedOut,
    /// The caller's thread is stopping; nothing is queued.
    Interrupted,
}

/// The condition variable protocol (one `static` serves every word).
pub struct RawCondvar;

/// The word at `key`.
///
/// # Safety
/// `key` is the address of a live, 4-aligned word for as long as the
/// reference is used.
unsafe fn word<'a>(key: Key) -> &'a AtomicU32 {
    // SAFETY: the caller's duty, as stated.
    unsafe { &*(key as *const AtomicU32) }
}

impl RawCondvar {
    /// Under the bucket lock: true (queue, with `W` set) if the word still
    /// holds sequence `seen` (read with or without `W`).
    fn validate(word: &AtomicU32, seen: u32) -> bool {
        let mut w = word.load(SeqCst);
        loop {
            if w & !W != seen & !W {
                return false;
            }
            if w & W != 0 || word.compare_exchange(w, w | W, SeqCst, SeqCst).is_ok() {
                return true;
            }
            w = word.load(SeqCst);
        }
    }

    fn park_of(&'static self) -> Park {
        Park { protocol: self, token: 0, since: Instant::now() }
    }

    /// Blocks while the word at `key` holds sequence `seen`, until notified
    /// or the deadline passes (see [`Waited`]). Parks in slices of `slice`,
    /// calling `interrupted` between them (see [`WaitTable::wait`]).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn wait(
        &'static self,
        table: &WaitTable,
        key: Key,
        seen: u32,
        deadline: Option<Instant>,
        slice: Duration,
        interrupted: impl FnMut() -> bool,
    ) -> Waited {
        // SAFETY: the caller's duty.
        match unsafe { self.sleep(table, key, seen, deadline, slice, interrupted) } {
            WaitResult::TimedOut => Waited::TimedOut,
            WaitResult::Interrupted => Waited::Interrupted,
            _ => Waited::Ok,
        }
    }

    /// The sleep of [`wait`](Self::wait), as the table reports it:
    /// [`WaitResult::Unparked`] when a notify woke the sleeper,
    /// [`WaitResult::NotEqual`] when the sequence had moved on.
    ///
    /// # Safety
    /// As [`wait`](Self::wait).
    unsafe fn sleep(
        &'static self,
        table: &WaitTable,
        key: Key,
        seen: u32,
        deadline: Option<Instant>,
        slice: Duration,
        interrupted: impl FnMut() -> bool,
    ) -> WaitResult {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        table.park(key, |_| Self::validate(word, seen), self.park_of(), || deadline, slice, interrupted)
    }

    /// [`wait`](Self::wait), then retakes the lock at `lock_key` for `me`
    /// (without deadline), as one operation: Rust std's `Condvar::wait`
    /// after the caller released the lock. Returns how the sleep ended and
    /// how the relock did.
    ///
    /// A wake-up is never lost with a stopping thread. If a notify woke this
    /// sleeper and the thread stops before the relock is done, the wake-up
    /// goes to the next sleeper of `key` ([`pass_on`](Self::pass_on)): when
    /// the stop is seen during the sleep (the table passes it on), while the
    /// relock waits (the relock's wait is interrupted, and hands on whatever
    /// it was handed), or by one more look at `interrupted` once the relock
    /// holds the lock (the lock is then given back, see
    /// [`RawLock::give_back`]). Those cases return [`Acquired::Interrupted`]
    /// (nothing is held), except a dead owner's lock that nobody was queued
    /// for, which the stopping thread keeps ([`Acquired::OwnerDied`]: its
    /// end is reported to the next locker). A relock that cannot end
    /// ([`Acquired::Deadlock`]: the caller's own thread holds the lock)
    /// passes the wake-up on too, since its caller gets an error instead of
    /// a wake-up. A sleep that timed out or found the sequence moved on
    /// consumed no wake-up: nothing is passed on.
    ///
    /// # Safety
    /// `key` and `lock_key` are the addresses of live, 4-aligned words during
    /// the call.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn wait_relock<D: Fn(u32) -> OwnerState + Sync + 'static>(
        &'static self,
        table: &WaitTable,
        key: Key,
        seen: u32,
        deadline: Option<Instant>,
        lock: &'static RawLock<D>,
        lock_key: Key,
        me: u32,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> (Waited, Acquired) {
        // SAFETY: the caller's duty.
        let (waited, woken) = match unsafe { self.sleep(table, key, seen, deadline, slice, &mut interrupted) } {
            // Stopped asleep: the table passed on a wake-up it had taken.
            WaitResult::Interrupted => return (Waited::Interrupted, Acquired::Interrupted),
            WaitResult::TimedOut => (Waited::TimedOut, false),
            // The condition protocol waits for nobody's own waiter
            // (`Protocol::waits_for_own`): a deadlock queued nothing, too.
            WaitResult::NotEqual | WaitResult::Deadlock => (Waited::Ok, false),
            WaitResult::Ok | WaitResult::Unparked(_) => (Waited::Ok, true),
        };
        // SAFETY: the caller's duty.
        let mut got = unsafe { lock.lock(table, lock_key, me, Instant::now(), None, slice, &mut interrupted) };
        // Whether the caller will act on the wake-up: it holds the lock and
        // its thread is not stopping.
        let mut used = matches!(got, Acquired::Acquired | Acquired::OwnerDied);
        if used && interrupted() {
            used = false;
            // SAFETY: the caller's duty; `me` was just given the lock.
            if !unsafe { lock.give_back(table, lock_key, me, got) } {
                got = Acquired::Interrupted;
            }
        }
        if woken && !used {
            self.pass_on(table, key);
        }
        (waited, got)
    }

    /// Queues an async waiter of `owner` with the owner's `token` if the word
    /// at `key` still holds sequence `seen`, and returns its ticket (`None`:
    /// the sequence moved on, nothing is queued). Its outcome is
    /// [`AsyncOutcome::Unparked`](crate::AsyncOutcome::Unparked) (notified)
    /// or a timeout.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call, and
    /// stays one while the waiter is queued (its owner keeps the memory).
    pub unsafe fn wait_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        seen: u32,
        owner: Arc<dyn Owner>,
        token: impl FnOnce() -> u64,
    ) -> Option<Ticket> {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let validate = |_| if Self::validate(word, seen) { Some(token()) } else { None };
        table.park_async(key, validate, self.park_of(), owner)
    }

    /// A whole notify in one call: bumps the sequence of the word at `key`
    /// (one fetch-add of 2, which never changes `W`) and, if the value it
    /// replaced had `W`, wakes up to `count` waiters, oldest first. Returns
    /// how many were woken.
    ///
    /// The caller's own fast path (JavaScript) bumps the sequence with a
    /// compare-exchange that expects `W` clear and comes here when it finds
    /// `W`: a thread stopped between a bump and its wake-up would leave the
    /// sleepers asleep past a notify, which this call cannot be cut into.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn signal(&self, table: &WaitTable, key: Key, count: usize) -> usize {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        if word.fetch_add(2, SeqCst) & W == 0 {
            return 0;
        }
        // SAFETY: as above.
        unsafe { self.notify(table, key, count) }
    }

    /// Wakes up to `count` waiters of the word at `key`, oldest first, after
    /// the caller bumped its sequence and saw `W`. Returns how many were
    /// woken (async waiters of threads being torn down are not counted).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn notify(&self, table: &WaitTable, key: Key, count: usize) -> usize {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let mut woken = 0;
        let mut left = if count == 1 { 1 } else { count.min(table.len(key)) };
        while left > 0 {
            let (_, one) = table.unpark_one_if(key, |r| {
                if !r.have_more {
                    word.fetch_and(!W, SeqCst);
                }
                r.unparked.map(|_| TOKEN_NORMAL)
            });
            if !one {
                break;
            }
            woken += 1;
            left -= 1;
        }
        woken
    }

    /// Passes on a wake-up that a sleeper of the word at `key` took but will
    /// not act on (its thread stops before its wait is over): wakes the
    /// oldest sleeper still queued there, if any. Returns whether one was
    /// woken (if none is, nobody is left to miss the wake-up).
    ///
    /// Safe whether or not the caller keeps the word's memory alive: the
    /// word is only written (clearing `W` with the last sleeper) while a
    /// queued waiter pins it, and with nobody queued `W` is already clear. So a
    /// thread's teardown can pass on the wake-ups of async sleepers that had
    /// not finished relocking (the N-API layer's resolver keeps a record of
    /// them from delivery until the relock is done).
    pub fn pass_on(&self, table: &WaitTable, key: Key) -> bool {
        table
            .unpark_one_if(key, |r| {
                r.unparked?;
                if !r.have_more {
                    // SAFETY: the sleeper being woken pins the memory (see `Protocol`).
                    unsafe { word(key) }.fetch_and(!W, SeqCst);
                }
                Some(TOKEN_NORMAL)
            })
            .1
    }
}

impl Protocol for RawCondvar {
    fn follow_up_lost(&self, table: &WaitTable, key: Key) {
        self.pass_on(table, key);
    }

    fn left(&self, key: Key, _token: ParkToken, was_last: bool) {
        if was_last {
            // SAFETY: the leaving waiter pins the memory (see `Protocol`).
            unsafe { word(key) }.fetch_and(!W, SeqCst);
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, _token: UnparkToken) {
        self.pass_on(table, key);
    }
}
