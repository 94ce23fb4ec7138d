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
//! A notify bumps the sequence with one fetch-add of 2 (the caller's own
//! code, e.g. JavaScript), which never changes [`W`], and calls
//! [`RawCondvar::notify`] only if the value it replaced had `W`. `W` is set
//! if and only if waiters are queued on the word's address; it only changes
//! under that address's bucket lock (here).
//!
//! # The protocol
//!
//! * **park** ([`RawCondvar::wait`], [`RawCondvar::wait_async`]): a waiter
//!   read the word before releasing its lock; the validation queues it only
//!   if the sequence is still the one it read, setting `W`. Both the notify's
//!   fetch-add and the validation's compare-exchange are read-modify-writes
//!   of the word, so one comes first: either the validation sees the new
//!   sequence and does not sleep, or the notify sees `W` and looks at the queue.
//! * **notify** ([`RawCondvar::notify`]): [`WaitTable::unpark_one_if`] wakes
//!   the oldest waiter, clearing `W` in the same critical section if it was
//!   the last one, as many times as asked (at most as many as were queued
//!   when it began, so waiters that queue again meanwhile cannot keep it
//!   going).
//! * **leave** ([`Protocol::left`]): a waiter that times out, is cancelled
//!   or whose thread stops clears `W` if it was the last one queued.
//! * **lost tokens** ([`Protocol::lost`]): a waiter whose thread stops after
//!   being woken passes the wake-up on to the next waiter.

use std::time::{Duration, Instant};

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
        let word = unsafe { word(key) };
        match table.park(key, |_| Self::validate(word, seen), self.park_of(), || deadline, slice, interrupted) {
            WaitResult::TimedOut => Waited::TimedOut,
            WaitResult::Interrupted => Waited::Interrupted,
            _ => Waited::Ok,
        }
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
}

impl Protocol for RawCondvar {
    fn left(&self, key: Key, _token: ParkToken, was_last: bool) {
        if was_last {
            // SAFETY: the leaving waiter pins the memory (see `Protocol`).
            unsafe { word(key) }.fetch_and(!W, SeqCst);
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, _token: UnparkToken) {
        // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
        unsafe { self.notify(table, key, 1) };
    }
}
