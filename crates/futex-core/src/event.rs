//! The events' words, over the wait table: what `ManualResetEvent.set` and
//! `AutoResetEvent` decide in one call, so that a thread stopped between
//! two of its JavaScript steps never leaves a set half made.
//!
//! A JavaScript thread can be stopped (`worker.terminate()`, or a script's
//! timeout: V8's `TerminateExecution`) at the entry of any function or at
//! any loop back-edge, and runs no `catch` or `finally` after that; a native
//! call runs to its end, and an `Atomics` builtin runs wholly or not at all.
//! So a state change that owes a wake-up is either one compare-exchange
//! that owes nobody anything (no waiter can be asleep: the word says so in
//! the same value), or one call of this module, which makes the change and
//! the wake-up together.
//!
//! # The manual-reset event's word
//!
//! | bits   | meaning                                                         |
//! | ------ | --------------------------------------------------------------- |
//! | 0: [`MANUAL_W`] | a waiter may be asleep on the word (set by waiters before they sleep; cleared by the set that wakes them) |
//! | 1–31   | a counter, changed by every set and reset: odd ([`MANUAL_SET`] on) = set |
//!
//! A waiter that finds the event not set with `W` clear sets `W` with a
//! compare-exchange, then sleeps (a plain futex wait) while the word holds
//! the value with `W`; it is released once the counter moves on. `set` with
//! `W` clear is one compare-exchange (JavaScript), which fails if a waiter
//! set `W` meanwhile; with `W` set it is [`manual_set`]: the compare-exchange
//! that sets the event and clears `W`, then a wake-up of every waiter, in
//! one call. `reset` adds 2 to an odd word: one compare-exchange, no wake-up.
//! A `W` left by a waiter that timed out, was aborted or whose thread ended
//! costs the next `set` one native call, nothing else.
//!
//! # The auto-reset event's word
//!
//! | word            | meaning                                      |
//! | --------------- | -------------------------------------------- |
//! | `0`             | not set, nobody queued                       |
//! | [`AUTO_SET`]    | set (one signal), nobody queued              |
//! | [`AUTO_Q`]      | not set, waiters queued                      |
//!
//! `Q` is set if and only if waiters are queued on the word's address; it
//! only changes under that address's bucket lock. A signal and a queued
//! waiter never coexist: a waiter that finds the event set takes the signal
//! instead of queueing, and a set with waiters queued hands its signal to
//! the oldest one, under the bucket lock, instead of storing it.
//!
//! * set, nobody queued: `0 → SET` (JavaScript; a set event stays as it is);
//! * wait, set: `SET → 0` (JavaScript);
//! * **park** ([`RawAutoEvent::wait`], [`RawAutoEvent::wait_async`]): the
//!   validation takes the signal if the word has one, and otherwise sets `Q`
//!   and queues the caller;
//! * **set** with `Q` ([`RawAutoEvent::set`]): [`WaitTable::unpark_one_if`]
//!   wakes the oldest waiter holding the signal ([`TOKEN_SIGNAL`]), clearing
//!   `Q` in the same critical section if it was the last one; if nobody is
//!   queued any more, the word gets the signal;
//! * **leave** ([`Protocol::left`]): a waiter that times out, is cancelled or
//!   whose thread stops clears `Q` if it was the last one queued; it was
//!   handed nothing (handing and leaving are both decided under the bucket
//!   lock);
//! * **lost tokens** ([`Protocol::lost`]): a waiter handed the signal whose
//!   thread stops before it could return it sets the event again, which
//!   hands the signal to the next waiter or stores it.
//!
//! So N sets with N waiters queued release exactly N of them, a set with
//! nobody waiting leaves one signal however often it is repeated, and a
//! waiter that leaves or dies takes no signal and leaves no count behind.

use std::time::{Duration, Instant};

use crate::condvar::Waited;
use crate::sync::Arc;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use crate::table::{Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkToken, WaitResult, WaitTable};

/// The manual-reset event's "a waiter may be asleep" bit.
pub const MANUAL_W: u32 = 1;
/// The manual-reset event's "set" bit: the counter's lowest.
pub const MANUAL_SET: u32 = 2;

/// The auto-reset event's signal.
pub const AUTO_SET: u32 = 1;
/// The auto-reset event's "waiters queued" bit.
pub const AUTO_Q: u32 = 1 << 31;

/// The unpark token of a waiter handed the signal: the lock's handoff code,
/// so that whatever delivers a lock's outcomes delivers it the same way.
pub const TOKEN_SIGNAL: UnparkToken = crate::lock::TOKEN_HANDOFF;

/// The word at `key`.
///
/// # Safety
/// `key` is the address of a live, 4-aligned word for as long as the
/// reference is used.
unsafe fn word<'a>(key: Key) -> &'a AtomicU32 {
    // SAFETY: the caller's duty, as stated.
    unsafe { &*(key as *const AtomicU32) }
}

/// Sets the manual-reset event at `key` if it is not set, and then, if a
/// waiter may be asleep (`W` was set), wakes every waiter of the word, in
/// one call. Returns whether this call set the event.
///
/// # Safety
/// `key` is the address of a live, 4-aligned word during the call.
pub unsafe fn manual_set(table: &WaitTable, key: Key) -> bool {
    // SAFETY: the caller's duty.
    let word = unsafe { word(key) };
    let mut v = word.load(SeqCst);
    loop {
        if v & MANUAL_SET != 0 {
            return false;
        }
        // The counter moves on to odd and `W` clears: (2c + w) → 2(c + 1).
        let next = (v | MANUAL_W).wrapping_add(1);
        match word.compare_exchange(v, next, SeqCst, SeqCst) {
            Ok(_) => {
                if v & MANUAL_W != 0 {
                    table.notify(key, usize::MAX);
                }
                return true;
            }
            Err(now) => v = now,
        }
    }
}

/// The auto-reset event protocol (one `static` serves every word).
pub struct RawAutoEvent;

impl RawAutoEvent {
    /// Under the bucket lock: take the signal (true: do not queue), or make
    /// sure `Q` is set (false: queue).
    fn validate(word: &AtomicU32) -> bool {
        let mut w = word.load(SeqCst);
        loop {
            let take = w & AUTO_SET != 0;
            let next = if take { w & !AUTO_SET } else { w | AUTO_Q };
            if next == w || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok() {
                return take;
            }
            w = word.load(SeqCst);
        }
    }

    fn park_of(&'static self, since: Instant) -> Park {
        Park { protocol: self, token: 0, since }
    }

    /// Blocks until the caller takes a signal of the event at `key` (see
    /// [`Waited`]: `Ok` is a signal taken). Parks in slices of `slice`,
    /// calling `interrupted` between them (see [`WaitTable::wait`]).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn wait(
        &'static self,
        table: &WaitTable,
        key: Key,
        deadline: Option<Instant>,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Waited {
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
                WaitResult::NotEqual if taken => return Waited::Ok,
                WaitResult::Unparked(TOKEN_SIGNAL) => return Waited::Ok,
                WaitResult::TimedOut => return Waited::TimedOut,
                WaitResult::Interrupted => return Waited::Interrupted,
                // A plain notify of the word (not from a set): look again.
                _ => {}
            }
        }
    }

    /// One step of an async wait: takes the signal now (`None`) or queues
    /// an async waiter of `owner` with the owner's `token` and returns its
    /// ticket. Its outcome is
    /// [`AsyncOutcome::Unparked`](crate::AsyncOutcome::Unparked) with
    /// [`TOKEN_SIGNAL`] (it holds a signal), or a timeout.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call, and
    /// stays one while the waiter is queued (its owner keeps the memory).
    pub unsafe fn wait_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        owner: Arc<dyn Owner>,
        token: impl FnOnce() -> u64,
    ) -> Option<Ticket> {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let validate = |_| if Self::validate(word) { None } else { Some(token()) };
        table.park_async(key, validate, self.park_of(Instant::now()), owner)
    }

    /// `set` of the event at `key` whose word has `Q` (or whose fast path
    /// was not tried): hands the signal to the oldest queued waiter, clearing
    /// `Q` if it was the last; with nobody queued, the word gets the signal
    /// (once: a set event stays set). Returns whether a waiter was released.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn set(&self, table: &WaitTable, key: Key) -> bool {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let (_, woken) = table.unpark_one_if(key, |r| {
            if r.unparked.is_some() {
                if !r.have_more {
                    word.fetch_and(!AUTO_Q, SeqCst);
                }
                return Some(TOKEN_SIGNAL);
            }
            // Nobody queued, so `Q` is clear (or stale): store the signal.
            let mut w = word.load(SeqCst);
            loop {
                let next = (w & !AUTO_Q) | AUTO_SET;
                if w == next {
                    return None;
                }
                match word.compare_exchange(w, next, SeqCst, SeqCst) {
                    Ok(_) => return None,
                    Err(now) => w = now,
                }
            }
        });
        woken
    }
}

impl Protocol for RawAutoEvent {
    fn left(&self, key: Key, _token: ParkToken, was_last: bool) {
        if was_last {
            // SAFETY: the leaving waiter pins the memory (see `Protocol`).
            unsafe { word(key) }.fetch_and(!AUTO_Q, SeqCst);
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, token: UnparkToken) {
        if token == TOKEN_SIGNAL {
            // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
            unsafe { self.set(table, key) };
        }
    }
}
