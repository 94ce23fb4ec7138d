//! A robust mutex in one 32-bit word, over the wait table: the protocol
//! behind `AsyncLock` (and the model for the primitives built like it).
//!
//! # The word
//!
//! | word          | meaning                                          |
//! | ------------- | ------------------------------------------------ |
//! | `0`           | unlocked, nobody queued                          |
//! | `C`           | unlocked, waiters queued (one is on its way)     |
//! | `owner·2`     | locked by `owner`, nobody queued                 |
//! | `owner·2 + C` | locked by `owner`, waiters queued                |
//!
//! `owner` is a thread's id (nonzero, below 2³¹). `C` is set if and only if
//! waiters are queued on the word's address; it only changes under that
//! address's bucket lock (here), except that it is carried along by the
//! compare-exchanges of the fast paths, which never change it:
//!
//! * lock, uncontended: `0 → me·2` (a caller's own code, e.g. JavaScript);
//! * unlock, uncontended: `me·2 → 0`; fails when `C` is set, and the caller
//!   then calls [`RawLock::unlock`];
//! * a spinning locker may take `C → me·2 + C`.
//!
//! # The protocol (parking_lot's `raw_mutex`, with owners that can die)
//!
//! Every decision that needs the queue's state is made under the bucket lock
//! of the word's address, where the queue's state is known:
//!
//! * **park** ([`RawLock::lock`], [`RawLock::lock_async`]): the validation
//!   takes the lock if it is unlocked, takes it over if its owner's thread
//!   ended, and otherwise sets `C` and queues the caller.
//! * **unlock** ([`RawLock::unlock`]): [`WaitTable::unpark_one`] wakes the
//!   oldest waiter and, in the same critical section, either hands the lock
//!   to it (the word names the heir before anyone else can look:
//!   [`TOKEN_HANDOFF`]) if it has waited at least `fair_after`, or releases
//!   it and lets the woken waiter compete with newcomers ([`TOKEN_RETRY`]).
//!   `C` stays set exactly when more waiters remain.
//! * **leave** ([`Protocol::left`]): a waiter that times out, is cancelled or
//!   whose thread stops clears `C` if it was the last one queued.
//! * **owner death** ([`Protocol::thread_ended`]): when a thread ends, every
//!   lock word that names it and has waiters is handed to its oldest waiter
//!   with [`TOKEN_OWNER_DIED`]. A lock with no waiter keeps naming the dead
//!   thread; the next locker's validation takes it over. A lock that is free
//!   with waiters queued (`C`: an unlock woke one to compete, which has not
//!   come back) wakes its oldest waiter to compete: the one woken before may
//!   have been the ended thread's, its wake-up already in its JavaScript.
//! * **lost tokens** ([`Protocol::lost`]): a waiter whose thread stops after
//!   being woken passes what it got on: a retry wakes the next waiter if the
//!   lock is free, a handoff is handed on as the dead thread's unlock would
//!   (it never ran its critical section), an owner-died handoff goes on as
//!   such (the death still has to be reported once).
//! * **waiters that only compete** ([`RawLock::lock_async_competing`]): an
//!   async waiter whose thread may be blocked elsewhere when the lock comes
//!   free (a channel's async send, while its thread blocks in a receive)
//!   must never be handed the lock: nobody could release it until that
//!   thread runs again. Such a waiter is only ever woken to compete: an
//!   unlock wakes every one of them ahead of the first other waiter, and
//!   that one as before; a thread's end wakes them and hands a dead owner's
//!   lock to the first other waiter, or leaves it to be taken over.
//! * **another table** ([`OwnerState::Foreign`]): a holder that uses another
//!   copy of the table unlocks through that copy, which neither sees nor
//!   wakes our waiters and may clear `C`. A waiter that parks next to such a
//!   holder looks again after `safety_slice`, and whoever takes the lock
//!   here sets `C` from our queue, so its own unlock wakes the rest.
//!
//! The word is an `AtomicU32` at the key's address: a key handed to these
//! functions must be the address of a live, 4-aligned word.

use std::time::{Duration, Instant};

use crate::sync::Arc;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use crate::table::{FilterOp, Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkToken, WaitResult, WaitTable};

/// The "waiters queued" bit.
pub const C: u32 = 1;

/// Unpark tokens of the lock, in the low two bits; the recipient's id above them.
/// Woken: the lock is free (or was), compete for it.
pub const TOKEN_RETRY: UnparkToken = 0;
/// Woken holding the lock: the unlocker handed it over.
pub const TOKEN_HANDOFF: UnparkToken = 1;
/// Woken holding the lock, taken from a thread that ended holding it.
pub const TOKEN_OWNER_DIED: UnparkToken = 2;
const KIND: UnparkToken = 3;

/// The park-token bit of a waiter that only competes (above any thread id).
pub const COMPETES: ParkToken = 1 << 40;

fn competes(token: ParkToken) -> bool {
    token & COMPETES != 0
}

/// How a lock attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Held by the caller.
    Acquired,
    /// Held by the caller, taken over from a thread that ended holding it.
    OwnerDied,
    /// The deadline passed; nothing is held or queued.
    TimedOut,
    /// Held by the caller's own thread, or an async acquisition of the
    /// caller's thread is queued for it (a blocking caller would wait forever).
    Deadlock,
    /// The caller's thread is stopping; nothing is held or queued.
    Interrupted,
}

/// What the lock knows about the thread a word names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// A live thread that uses this table: its unlock wakes our waiters, and
    /// its end is pushed to them.
    Ours,
    /// A thread known to have ended.
    Dead,
    /// A thread this table never saw (it uses another copy of the table):
    /// alive as far as we know, but its unlock cannot wake our waiters.
    Foreign,
}

/// The lock protocol: how it learns about the thread a word names, its
/// fairness threshold and its safety slice.
pub struct RawLock<D: Fn(u32) -> OwnerState + Sync + 'static> {
    pub owner: D,
    /// A waiter woken after waiting this long is handed the lock; a younger
    /// one competes with newcomers (Go's `sync.Mutex` uses 1 ms).
    pub fair_after: Duration,
    /// A waiter that parks while a [`OwnerState::Foreign`] thread holds the
    /// lock looks again after this long: that thread's unlock goes through
    /// another table and wakes nobody here.
    pub safety_slice: Duration,
}

/// What the validation of a park decided.
enum Step {
    /// Queue; `foreign`: the holder is a [`OwnerState::Foreign`] thread.
    Park {
        foreign: bool,
    },
    Done(Acquired),
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

fn owner_of(w: u32) -> u32 {
    w >> 1
}

fn handed(to: ParkToken, kind: UnparkToken) -> UnparkToken {
    ((to as UnparkToken) << 2) | kind
}

/// The kind of a token the lock handed out: [`TOKEN_RETRY`],
/// [`TOKEN_HANDOFF`] or [`TOKEN_OWNER_DIED`].
pub fn kind(token: UnparkToken) -> UnparkToken {
    token & KIND
}

impl<D: Fn(u32) -> OwnerState + Sync + 'static> RawLock<D> {
    /// Under the bucket lock of the word (`queued`: others wait on it): take
    /// the lock if it is free or its owner ended; otherwise make sure `C` is
    /// set, and park.
    fn validate(&self, word: &AtomicU32, me: u32, blocking: bool, queued: bool) -> Step {
        let mut w = word.load(SeqCst);
        loop {
            let owner = owner_of(w);
            let state = if owner == 0 || owner == me { OwnerState::Ours } else { (self.owner)(owner) };
            let take = if owner == 0 {
                Some(Acquired::Acquired)
            } else if owner == me && blocking {
                return Step::Done(Acquired::Deadlock);
            } else if state == OwnerState::Dead {
                Some(Acquired::OwnerDied)
            } else {
                None
            };
            // Taking it sets C as the queue requires (a thread of another
            // table may have cleared it: its unlock only sees its own queue).
            let next = match take {
                Some(_) => (me << 1) | if queued { C } else { 0 },
                None => w | C,
            };
            if next == w || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok() {
                return take.map_or(Step::Park { foreign: state == OwnerState::Foreign }, Step::Done);
            }
            w = word.load(SeqCst);
        }
    }

    fn park_of(&'static self, me: u32, since: Instant) -> Park {
        Park { protocol: self, token: me as ParkToken, since }
    }

    /// [`lock_async`](Self::lock_async) for a waiter that is never handed
    /// the lock, only woken to compete for it (see the module's docs): its
    /// outcome is always a retry ([`TOKEN_RETRY`]) or a timeout.
    ///
    /// # Safety
    /// As for [`lock_async`](Self::lock_async).
    pub unsafe fn lock_async_competing(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        owner: Arc<dyn Owner>,
        token: impl FnOnce(bool) -> u64,
    ) -> Result<Ticket, Acquired> {
        let park = Park { protocol: self, token: me as ParkToken | COMPETES, since: Instant::now() };
        // SAFETY: the caller's duty.
        unsafe { self.park_async_as(table, key, me, park, owner, token) }
    }

    /// An async acquisition's step, for a waiter that carries `park`.
    ///
    /// # Safety
    /// As for [`lock_async`](Self::lock_async).
    unsafe fn park_async_as(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        park: Park,
        owner: Arc<dyn Owner>,
        token: impl FnOnce(bool) -> u64,
    ) -> Result<Ticket, Acquired> {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let mut done = Acquired::Acquired;
        let validate = |queued| match self.validate(word, me, false, queued) {
            Step::Park { foreign } => Some(token(foreign)),
            Step::Done(r) => {
                done = r;
                None
            }
        };
        table.park_async(key, validate, park, owner).ok_or(done)
    }

    /// Blocks until the lock at `key` is held by `me` (see [`Acquired`]).
    /// `since`: when the caller began to wait. Parks in slices of `slice`,
    /// calling `interrupted` between them (see [`WaitTable::wait`]).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn lock(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        since: Instant,
        deadline: Option<Instant>,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Acquired {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        loop {
            let mut done = None;
            let foreign = std::cell::Cell::new(false);
            let validate = |queued| match self.validate(word, me, true, queued) {
                Step::Park { foreign: f } => {
                    foreign.set(f);
                    true
                }
                Step::Done(r) => {
                    done = Some(r);
                    false
                }
            };
            // Parked next to a foreign holder: look again after the safety slice.
            let mut sliced = false;
            let until = || match (foreign.get(), deadline) {
                (false, _) => deadline,
                (true, Some(d)) if d <= Instant::now() + self.safety_slice => deadline,
                (true, _) => {
                    sliced = true;
                    Some(Instant::now() + self.safety_slice)
                }
            };
            match table.park(key, validate, self.park_of(me, since), until, slice, &mut interrupted) {
                WaitResult::NotEqual => return done.expect("set when validate declines"),
                WaitResult::Unparked(token) => match kind(token) {
                    TOKEN_HANDOFF => return Acquired::Acquired,
                    TOKEN_OWNER_DIED => return Acquired::OwnerDied,
                    _ => {} // the lock was released: compete again
                },
                WaitResult::Ok => {}                 // a plain notify of the word: look again
                WaitResult::TimedOut if sliced => {} // the safety slice ran out
                WaitResult::TimedOut => return Acquired::TimedOut,
                WaitResult::Interrupted => return Acquired::Interrupted,
                WaitResult::Deadlock => return Acquired::Deadlock,
            }
        }
    }

    /// One step of an async acquisition: takes the lock now (`Err` with
    /// [`Acquired::Acquired`] or [`Acquired::OwnerDied`]) or queues an async
    /// waiter of `owner` and returns its ticket, with the owner's token for
    /// it chosen by `token(foreign)` (`foreign`: the holder is a
    /// [`OwnerState::Foreign`] thread, so the waiter should time out after
    /// the safety slice and look again). Its outcome is
    /// [`AsyncOutcome::Unparked`](crate::AsyncOutcome::Unparked) with a
    /// token whose [`kind`] says whether it holds the lock now, or a timeout.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call, and
    /// stays one while the waiter is queued (its owner keeps the memory).
    pub unsafe fn lock_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        since: Instant,
        owner: Arc<dyn Owner>,
        token: impl FnOnce(bool) -> u64,
    ) -> Result<Ticket, Acquired> {
        // SAFETY: the caller's duty.
        unsafe { self.park_async_as(table, key, me, self.park_of(me, since), owner, token) }
    }

    /// A lock attempt that never queues: `Some` if `me` holds the lock now
    /// ([`Acquired::Acquired`] or [`Acquired::OwnerDied`]), `None` if a live
    /// thread holds it. Runs under the bucket lock, so a takeover sets `C`
    /// exactly as the queue requires.
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn try_lock(&'static self, table: &WaitTable, key: Key, me: u32) -> Option<Acquired> {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let mut done = None;
        let validate = |queued| {
            let mut w = word.load(SeqCst);
            loop {
                let owner = owner_of(w);
                let r = if owner == 0 {
                    Acquired::Acquired
                } else if owner != me && (self.owner)(owner) == OwnerState::Dead {
                    Acquired::OwnerDied
                } else {
                    return false;
                };
                match word.compare_exchange(w, (me << 1) | if queued { C } else { 0 }, SeqCst, SeqCst) {
                    Ok(_) => {
                        done = Some(r);
                        return false;
                    }
                    Err(now) => w = now,
                }
            }
        };
        // `validate` never asks to queue: this only borrows the bucket lock.
        let ticket = table.park(key, validate, self.park_of(me, Instant::now()), || None, Duration::ZERO, || true);
        debug_assert_eq!(ticket, WaitResult::NotEqual);
        done
    }

    /// The contended unlock by `me` (the word has `C`, or the fast path was
    /// not tried). False if `me` does not hold the lock (nothing changes).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn unlock(&self, table: &WaitTable, key: Key, me: u32) -> bool {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        if owner_of(word.load(SeqCst)) != me {
            return false;
        }
        self.hand_on(table, key, word, me, TOKEN_HANDOFF);
        true
    }

    /// Gives back the lock that `me` was just given by [`lock`](Self::lock)
    /// (`got`: [`Acquired::Acquired`] or [`Acquired::OwnerDied`]) and will
    /// not use, because its thread is stopping before it ran its critical
    /// section: handed on as its unlock would, and a dead owner's lock with
    /// the news still to be told (as [`Protocol::lost`] hands on a token).
    /// With nobody queued, a dead owner's lock keeps naming `me`, whose
    /// thread is ending: the next locker takes it over and is told. Returns
    /// whether `me` still holds the lock (that case).
    ///
    /// # Safety
    /// `key` is the address of a live, 4-aligned word during the call.
    pub unsafe fn give_back(&self, table: &WaitTable, key: Key, me: u32, got: Acquired) -> bool {
        // SAFETY: the caller's duty.
        let word = unsafe { word(key) };
        let kind = if got == Acquired::OwnerDied { TOKEN_OWNER_DIED } else { TOKEN_HANDOFF };
        self.hand_on(table, key, word, me, kind);
        owner_of(word.load(SeqCst)) == me
    }

    /// Releases the lock `from` holds: wakes the oldest waiter, and hands the
    /// lock to it (with `kind`) if it waited long enough, or always for an
    /// owner-died handoff (the news must reach someone); otherwise the lock
    /// is released and the woken waiter competes with newcomers. Does
    /// nothing if the word no longer names `from`. Nobody but its holder
    /// changes a held word outside the bucket lock, so the stores are safe.
    fn hand_on(&self, table: &WaitTable, key: Key, word: &AtomicU32, from: u32, kind: UnparkToken) {
        // The waiters woken: every one that only competes ahead of the
        // first other one, and that one (the heir, with since when it waits).
        let heir = std::cell::Cell::new(None);
        let filter = |token: ParkToken, since: Instant| {
            if heir.get().is_some() {
                return FilterOp::Stop;
            }
            if !competes(token) {
                heir.set(Some((token, since)));
            }
            FilterOp::Unpark
        };
        table.unpark_filter(key, filter, |tokens: &[ParkToken], have_more| {
            if owner_of(word.load(SeqCst)) != from {
                return None;
            }
            let c = if have_more { C } else { 0 };
            let fair = |since: Instant| since.elapsed() >= self.fair_after;
            let retry = |n: usize| vec![TOKEN_RETRY; n];
            match heir.get() {
                Some((heir, since)) if kind == TOKEN_OWNER_DIED || fair(since) => {
                    word.store(((heir as u32) << 1) | c, SeqCst);
                    let mut out = retry(tokens.len() - 1);
                    out.push(handed(heir, kind));
                    Some(out)
                }
                // Nobody to tell but waiters that only compete: the word
                // keeps naming the ended thread, so the next locker (one of
                // them, or anyone) takes it over and is told.
                None if kind == TOKEN_OWNER_DIED => {
                    if tokens.is_empty() {
                        return None;
                    }
                    word.store((from << 1) | c, SeqCst);
                    Some(retry(tokens.len()))
                }
                _ => {
                    word.store(c, SeqCst);
                    if tokens.is_empty() {
                        None
                    } else {
                        Some(retry(tokens.len()))
                    }
                }
            }
        });
    }
}

impl<D: Fn(u32) -> OwnerState + Sync + 'static> Protocol for RawLock<D> {
    fn left(&self, key: Key, _token: ParkToken, was_last: bool) {
        if was_last {
            // SAFETY: the leaving waiter pins the memory (see `Protocol`).
            unsafe { word(key) }.fetch_and(!C, SeqCst);
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, token: UnparkToken) {
        // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
        let word = unsafe { word(key) };
        match kind(token) {
            // The lock was handed to a waiter that never ran: hand it on as
            // that waiter's unlock would, with the same news.
            k @ (TOKEN_HANDOFF | TOKEN_OWNER_DIED) => self.hand_on(table, key, word, token >> 2, k),
            // A wake-up to compete: if the lock is free, the next waiter gets
            // it instead; if it is held, its holder's unlock wakes someone.
            _ => {
                table.unpark_one_if(key, |r| {
                    let mut w = word.load(SeqCst);
                    loop {
                        if owner_of(w) != 0 || r.unparked.is_none() {
                            return None;
                        }
                        // Keep C only if others stay queued behind the one woken
                        // (a spinner may take the free word meanwhile: compare).
                        let next = if r.have_more { C } else { 0 };
                        match word.compare_exchange(w, next, SeqCst, SeqCst) {
                            Ok(_) => return Some(TOKEN_RETRY),
                            Err(now) => w = now,
                        }
                    }
                });
            }
        }
    }
    /// A blocking `lock` by a thread whose own async acquisition is queued
    /// on the same word: an unlock may hand the lock to that acquisition,
    /// which cannot run (nor unlock) while its thread is blocked here.
    fn waits_for_own(&self, me: ParkToken, queued: ParkToken) -> bool {
        me == queued
    }

    fn competes_only(&self, token: ParkToken) -> bool {
        competes(token)
    }

    fn thread_ended(&self, key: Key, head: ParkToken, have_more: bool, ended: u32) -> Option<UnparkToken> {
        // SAFETY: the queued head pins the memory (see `Protocol`).
        let word = unsafe { word(key) };
        let w = word.load(SeqCst);
        if owner_of(w) == 0 {
            // Free with waiters queued: an unlock woke one to compete, and it
            // has not come back. That one may have been the ended thread's,
            // whose wake-up reached its JavaScript (where nothing passes it
            // on) before the thread stopped: the waiters behind it would
            // sleep by a free lock. Wake the oldest to compete in its place
            // (if the first is alive and on its way, one more competes).
            let next = if have_more { C } else { 0 };
            return (w == next || word.compare_exchange(w, next, SeqCst, SeqCst).is_ok()).then_some(TOKEN_RETRY);
        }
        if owner_of(w) != ended {
            return None;
        }
        word.store(((head as u32) << 1) | if have_more { C } else { 0 }, SeqCst);
        Some(handed(head, TOKEN_OWNER_DIED))
    }
}
