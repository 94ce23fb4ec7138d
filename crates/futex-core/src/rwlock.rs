//! A robust, phase-fair reader-writer lock in four 32-bit words, over the
//! wait table: the protocol behind `RwLock`.
//!
//! # The words
//!
//! `STATE` at the key, then three reader slots (`SLOT0..2`, at key + 4,
//! key + 8 and key + 12). A slot holds the owner id of a thread that holds a read lock
//! through it, or 0. Readers past the slots are registered here, natively
//! (see *overflow*). `STATE` is `owner << 4 | flags`:
//!
//! | part       | meaning                                                        |
//! | ---------- | -------------------------------------------------------------- |
//! | `owner`    | the writer's place: 0, or the thread that holds or is about to get the write lock |
//! | `PARKED`   | waiters are queued on the key (readers and writers)            |
//! | `DRAINING` | the writer named by `owner` is parked on key + 4 until the readers leave |
//! | `OVERFLOW` | readers past the slots are registered for this key             |
//! | `DIED`     | a writer died holding the lock; the next acquisition is told   |
//!
//! | `STATE`                  | slots / overflow | the lock                                   |
//! | ------------------------ | ---------------- | ------------------------------------------ |
//! | `0`                      | empty            | free                                       |
//! | `0`                      | readers          | read-locked                                |
//! | `W << 4`                 | empty            | write-locked by `W`                        |
//! | `W << 4`                 | readers          | `W` has the writer's place and waits for the readers to leave (`DRAINING` once it parks) |
//! | `W << 4 \| PARKED`       | any              | as above, with waiters queued behind `W`   |
//!
//! Invariant: waiters are queued on the key only while `owner` is nonzero.
//! Whoever sets `owner` to 0 with waiters queued (an unlock, a writer that
//! gives up its place, the recovery of a dead writer) does it under the
//! key's bucket lock with [`WaitTable::unpark_filter`], and in the same
//! critical section hands the read lock to every queued reader and the
//! writer's place to the oldest queued writer.
//!
//! # Fast paths (the caller's own code, e.g. JavaScript)
//!
//! * read: claim a free slot (`0 → me`, one compare-exchange), then load
//!   `STATE`: `owner == 0` and no `DIED` → held. Otherwise give the slot back
//!   and call [`RawRwLock::read`].
//! * read unlock: `me → 0` on the slot. It fails when a writer that waits
//!   for the readers has marked the slot (`me | MARK`): then `me | MARK → 0`
//!   and [`RawRwLock::read_unlock`] wakes the writer. (A reader that backs
//!   out of a slot it just claimed empties it and loads `STATE` for
//!   `DRAINING` instead: the writer may not have marked it yet.)
//! * write: `STATE` `0 → me << 4`, then load the slots: all empty → held;
//!   otherwise [`RawRwLock::write`] with `pending` (the caller has the
//!   writer's place and waits for the readers).
//! * write unlock: `me << 4 → 0`; fails when a flag is set →
//!   [`RawRwLock::write_unlock`].
//!
//! A reader and a writer that race never both get in: each writes its own
//! word (slot, `STATE`) then reads the other's, all sequentially consistent,
//! so the later of the two reads sees the other's write (Dekker). (Here, in
//! Rust, a `fence(SeqCst)` sits between the write and the read: JavaScript's
//! Atomics are sequentially consistent operations, and loom models that
//! guarantee only through fences.) A reader
//! that sees a writer backs out; a writer that sees a reader waits for it.
//! Readers past the slots register under a mutex and set `OVERFLOW` in
//! `STATE` itself, the word the writer's compare-exchange expects to be 0.
//!
//! No wake-up is lost: a writer that waits for readers sets `DRAINING`,
//! marks every taken slot and then looks at the slots, under the bucket lock
//! of key + 4. A leaving reader's compare-exchange on its own slot either
//! comes first (the writer sees the slot empty) or fails on the mark (the
//! reader wakes the writer, under that same bucket lock): one word, so no
//! ordering argument beyond its modification order. A reader that backs out
//! of a slot the writer did not mark empties it and then looks at
//! `DRAINING` (Dekker: the writer set `DRAINING` before looking at the slot). Queued waiters are woken only
//! by whoever clears `owner`, under the key's bucket lock, where a parking
//! waiter checked `owner` before it queued.
//!
//! # Policy: phase-fair
//!
//! * A reader queues while `owner` is nonzero: behind a writer that holds the
//!   lock and behind one that waits for the readers to leave, so a stream of
//!   readers cannot starve a writer.
//! * When a writer releases, every queued reader is handed the read lock at
//!   once, and the oldest queued writer gets the writer's place (it waits for
//!   exactly those readers), so a stream of writers cannot starve readers.
//!   This handoff happens once the oldest waiter has waited
//!   [`RawRwLock::fair_after`] (or a death must be told); before that the
//!   unlock releases the lock and wakes every waiter to compete
//!   ([`TOKEN_RETRY`]), as parking_lot's eventual fairness does: handing the
//!   lock to threads that are asleep stalls everyone until they run.
//!
//! Once handoffs happen, a reader waits for at most one writer's critical
//! section; a writer for the writers ahead of it and one read phase each.
//!
//! # Robustness
//!
//! * **writer death** ([`Protocol::thread_ended`] + [`RawRwLock::recover`]):
//!   a lock whose `owner` ended, with waiters queued, is released as its
//!   unlock would and the death is reported once (`TOKEN_OWNER_DIED`) to the
//!   oldest recipient (the first reader of the group handed the read lock,
//!   or the writer); without waiters, the next locker takes it over and is
//!   told. With nobody to tell yet, `DIED` keeps the news. A writer that has
//!   the writer's place counts as holding the lock, also while it waits for
//!   the readers: a blocking writer whose thread stops there
//!   ([`RawRwLock::write`] interrupted, or handed the write lock as it
//!   stops) gives the place up with the news, as the recovery does for an
//!   async one. A writer handed the place while it was still queued behind
//!   another, as its thread stops, never had it: that handoff is passed on
//!   without news, as [`crate::lock`]'s is.
//! * **reader death**: a slot that names a dead thread counts as empty (a
//!   writer clears it); registered readers of a thread that ended are
//!   forgotten ([`RawRwLock::forget_readers`]); a writer parked until the
//!   readers leave is woken by the death of the last one. A reader's death is
//!   not reported: it changed nothing.
//! * **overflow**: readers past the slots are registered in a list keyed by
//!   the lock's address, under a mutex; `OVERFLOW` is set exactly while the
//!   list may hold entries for the key.
//! * **lost tokens** ([`Protocol::lost`]): a reader handed the read lock
//!   whose thread stops gives it back; a writer hands on as its unlock would.
//!
//! All threads must use this copy of the table (there is no foreign-holder
//! slice as in [`crate::lock`]).
//!
//! The words are `AtomicU32`s at the key's address: a key handed to these
//! functions must be the address of four live, 4-aligned words.

use std::time::{Duration, Instant};

use crate::lock::{Acquired, OwnerState};
use crate::sync::{fence, Arc, AtomicU32, Mutex, Ordering::SeqCst};
use crate::table::{FilterOp, Key, Owner, Park, ParkToken, Protocol, Ticket, UnparkToken, WaitResult, WaitTable};

pub const PARKED: u32 = 1;
pub const DRAINING: u32 = 2;
pub const OVERFLOW: u32 = 4;
pub const DIED: u32 = 8;
const FLAGS: u32 = 15;
pub const OWNER_SHIFT: u32 = 4;
/// Reader slots after `STATE`.
pub const SLOTS: usize = 3;
/// A slot's mark: the writer waits for this reader (set by the writer that
/// goes to sleep until the readers leave), so the reader's unlock, whose
/// compare-exchange expects its bare id, takes the slow path and wakes it.
pub const MARK: u32 = 1 << 30;
/// The largest owner id `STATE` can name.
pub const MAX_OWNER: u32 = (1 << 27) - 1;

/// Unpark tokens (low two bits, as [`crate::lock`]'s: the same codes reach
/// JavaScript). Woken to compete again: the lock was released.
pub const TOKEN_RETRY: UnparkToken = 0;
/// Woken holding the lock: a reader its read lock; a writer (on the key) the
/// writer's place, still to wait for the readers inside, if any (on key + 4:
/// the write lock).
pub const TOKEN_HANDOFF: UnparkToken = 1;
/// Woken holding the lock (a writer: the write lock itself); a writer died
/// holding it before.
pub const TOKEN_OWNER_DIED: UnparkToken = 2;
const KIND: UnparkToken = 3;
const U_READER: UnparkToken = 4;
const U_DRAIN: UnparkToken = 8;

/// Park tokens: `owner << 2 | DRAIN | WRITER`.
const P_WRITER: ParkToken = 1;
const P_DRAIN: ParkToken = 2;

/// The kind of a token the lock handed out.
pub fn kind(token: UnparkToken) -> UnparkToken {
    token & KIND
}

fn owner_of(s: u32) -> u32 {
    s >> OWNER_SHIFT
}

fn parked_owner(t: ParkToken) -> u32 {
    (t >> 2) as u32
}

fn handed(to: u32, reader: bool, drain: bool, kind: UnparkToken) -> UnparkToken {
    (to << 4) | if reader { U_READER } else { 0 } | if drain { U_DRAIN } else { 0 } | kind
}

/// The key writers wait on for the readers to leave.
pub fn drain_key(key: Key) -> Key {
    key + 4
}

struct Words<'a> {
    state: &'a AtomicU32,
    slots: [&'a AtomicU32; SLOTS],
}

/// The words at `key`.
///
/// # Safety
/// `key` is the address of four live, 4-aligned words while they are used.
unsafe fn words<'a>(key: Key) -> Words<'a> {
    // SAFETY: the caller's duty, as stated.
    unsafe {
        // (`add`, not 4 bytes a word: loom's atomics are larger.)
        let at = |i: usize| &*(key as *const AtomicU32).add(i);
        Words { state: at(0), slots: [at(1), at(2), at(3)] }
    }
}

/// The protocol: how it learns whether a thread ended, the registered
/// readers past the slots, and the locks whose writer ended with waiters
/// queued.
pub struct RawRwLock<D: Fn(u32) -> OwnerState + Sync + 'static> {
    pub owner: D,
    /// An unlock hands the lock over (phase-fair) when a waiter has waited
    /// this long; before that it releases the lock and wakes every waiter to
    /// compete, so that threads that are running keep it moving.
    pub fair_after: Duration,
    overflow: Mutex<Vec<(Key, u32)>>,
    ended: Mutex<Vec<(Key, u32)>>,
}

/// What the validation of a reader's park decided.
enum ReadStep {
    Park,
    Done(Acquired),
    /// `owner` names a thread that ended: release its lock first.
    Recover(u32),
    /// Backed out of a slot while a writer waits for the readers: wake it.
    WakeDrain,
}

/// What the validation of a writer's park decided.
enum WriteStep {
    Park,
    /// The writer's place was taken: wait for the readers.
    Took,
    Deadlock,
}

impl<D: Fn(u32) -> OwnerState + Sync + 'static> RawRwLock<D> {
    #[cfg(not(loom))]
    pub const fn new(owner: D, fair_after: Duration) -> Self {
        RawRwLock { owner, fair_after, overflow: Mutex::new(Vec::new()), ended: Mutex::new(Vec::new()) }
    }

    #[cfg(loom)]
    pub fn new(owner: D, fair_after: Duration) -> Self {
        RawRwLock { owner, fair_after, overflow: Mutex::new(Vec::new()), ended: Mutex::new(Vec::new()) }
    }

    fn dead(&self, owner: u32) -> bool {
        owner != 0 && (self.owner)(owner) == OwnerState::Dead
    }

    fn park_of(&'static self, me: u32, writer: bool, drain: bool, since: Instant) -> Park {
        let token = ((me as ParkToken) << 2) | if writer { P_WRITER } else { 0 } | if drain { P_DRAIN } else { 0 };
        Park { protocol: self, token, since }
    }

    /// Whether live readers hold the lock: slots naming ended threads are
    /// emptied on the way, registrations of ended threads forgotten, and a
    /// stale `OVERFLOW` cleared. Needs the words pinned.
    fn has_readers(&self, key: Key, w: &Words) -> bool {
        let mut any = false;
        for slot in w.slots {
            let r = slot.load(SeqCst);
            if r != 0 {
                if self.dead(r & !MARK) {
                    let _ = slot.compare_exchange(r, 0, SeqCst, SeqCst);
                } else {
                    any = true;
                }
            }
        }
        if w.state.load(SeqCst) & OVERFLOW != 0 {
            let mut reg = self.overflow.lock();
            reg.retain(|&(k, o)| k != key || !self.dead(o));
            if reg.iter().any(|&(k, _)| k == key) {
                any = true;
            } else {
                w.state.fetch_and(!OVERFLOW, SeqCst);
            }
        }
        any
    }

    /// Gives `id` a read lock: a free slot, else a registration.
    fn claim_read(&self, key: Key, w: &Words, id: u32) {
        for slot in w.slots {
            if slot.compare_exchange(0, id, SeqCst, SeqCst).is_ok() {
                return;
            }
        }
        let mut reg = self.overflow.lock();
        if w.state.load(SeqCst) & OVERFLOW == 0 {
            // Entries without the flag belong to a lock that was freed at
            // this address while read-locked.
            reg.retain(|&(k, _)| k != key);
        }
        reg.push((key, id));
        w.state.fetch_or(OVERFLOW, SeqCst);
    }

    /// Takes back one read lock of `id`: a slot, else a registration. False
    /// if `id` holds none.
    fn unclaim_read(&self, key: Key, w: &Words, id: u32) -> bool {
        for slot in w.slots {
            if slot.compare_exchange(id, 0, SeqCst, SeqCst).is_ok()
                || slot.compare_exchange(id | MARK, 0, SeqCst, SeqCst).is_ok()
            {
                return true;
            }
        }
        self.unregister(key, w, id)
    }

    fn unregister(&self, key: Key, w: &Words, id: u32) -> bool {
        let mut reg = self.overflow.lock();
        if w.state.load(SeqCst) & OVERFLOW == 0 {
            reg.retain(|&(k, _)| k != key);
            return false;
        }
        let Some(i) = reg.iter().position(|&(k, o)| k == key && o == id) else { return false };
        reg.swap_remove(i);
        if !reg.iter().any(|&(k, _)| k == key) {
            w.state.fetch_and(!OVERFLOW, SeqCst);
        }
        true
    }

    /// Claims the report of a writer's death, if one is pending.
    fn take_report(w: &Words) -> Acquired {
        if w.state.fetch_and(!DIED, SeqCst) & DIED != 0 {
            Acquired::OwnerDied
        } else {
            Acquired::Acquired
        }
    }

    /// Under the key's bucket lock.
    fn read_validate(&self, key: Key, w: &Words, me: u32, blocking: bool, park: bool) -> ReadStep {
        let mut s = w.state.load(SeqCst);
        loop {
            let owner = owner_of(s);
            if owner == 0 {
                self.claim_read(key, w, me);
                fence(SeqCst);
                let now = w.state.load(SeqCst);
                if owner_of(now) == 0 {
                    return ReadStep::Done(Self::take_report(w));
                }
                // A writer's fast path got in: back out, then queue.
                self.unclaim_read(key, w, me);
                fence(SeqCst);
                if w.state.load(SeqCst) & DRAINING != 0 {
                    return ReadStep::WakeDrain;
                }
                s = w.state.load(SeqCst);
                continue;
            }
            if owner == me && blocking {
                return ReadStep::Done(Acquired::Deadlock);
            }
            if owner != me && self.dead(owner) {
                return ReadStep::Recover(owner);
            }
            if s & PARKED != 0 || !park {
                return ReadStep::Park;
            }
            match w.state.compare_exchange(s, s | PARKED, SeqCst, SeqCst) {
                Ok(_) => return ReadStep::Park,
                Err(now) => s = now,
            }
        }
    }

    /// Under the key's bucket lock: takes the writer's place if it is free
    /// or its thread ended (then `DIED` records the news), else parks.
    fn write_validate(&self, w: &Words, me: u32, blocking: bool) -> WriteStep {
        let mut s = w.state.load(SeqCst);
        loop {
            let owner = owner_of(s);
            let next = if owner == 0 {
                (me << OWNER_SHIFT) | (s & FLAGS)
            } else if owner == me && blocking {
                return WriteStep::Deadlock;
            } else if owner != me && self.dead(owner) {
                (me << OWNER_SHIFT) | (s & FLAGS & !DRAINING) | DIED
            } else {
                s | PARKED
            };
            if next == s || w.state.compare_exchange(s, next, SeqCst, SeqCst).is_ok() {
                return if owner_of(next) == me && owner != me { WriteStep::Took } else { WriteStep::Park };
            }
            s = w.state.load(SeqCst);
        }
    }

    /// Under the bucket lock of key + 4, for the writer that has the
    /// writer's place: park (true) while readers remain.
    fn drain_validate(&self, key: Key, w: &Words) -> bool {
        w.state.fetch_or(DRAINING, SeqCst);
        fence(SeqCst);
        // Mark the readers' slots: their unlock's compare-exchange (me → 0)
        // then fails, and they come here to wake us.
        for slot in w.slots {
            let mut r = slot.load(SeqCst);
            while r != 0 && r & MARK == 0 {
                match slot.compare_exchange(r, r | MARK, SeqCst, SeqCst) {
                    Ok(_) => break,
                    Err(now) => r = now,
                }
            }
        }
        if self.has_readers(key, w) {
            return true;
        }
        w.state.fetch_and(!DRAINING, SeqCst);
        false
    }

    /// Blocks until `me` holds a read lock at `key`.
    ///
    /// # Safety
    /// `key` is the address of four live, 4-aligned words during the call.
    pub unsafe fn read(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        deadline: Option<Instant>,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Acquired {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        let since = Instant::now();
        loop {
            let mut step = ReadStep::Park;
            let validate = |_| {
                step = self.read_validate(key, &w, me, true, true);
                matches!(step, ReadStep::Park)
            };
            match table.park(key, validate, self.park_of(me, false, false, since), || deadline, slice, &mut interrupted)
            {
                WaitResult::NotEqual => match step {
                    ReadStep::Done(r) => return r,
                    ReadStep::Recover(dead) => {
                        // SAFETY: the caller's duty: the words are live during this call.
                        unsafe { self.hand_on(table, key, dead, true, None, false) };
                    }
                    ReadStep::WakeDrain => self.wake_drain(table, key, &w),
                    ReadStep::Park => unreachable!("a park that queued"),
                },
                WaitResult::Unparked(t) => match kind(t) {
                    TOKEN_OWNER_DIED => return Acquired::OwnerDied,
                    TOKEN_HANDOFF => return Acquired::Acquired,
                    _ => {} // released: compete again
                },
                WaitResult::Ok => {}
                WaitResult::TimedOut => return Acquired::TimedOut,
                WaitResult::Interrupted => return Acquired::Interrupted,
                WaitResult::Deadlock => return Acquired::Deadlock,
            }
        }
    }

    /// One step of an async read acquisition: `Err` with the outcome if it
    /// is decided now, else the ticket of a queued async waiter (its token
    /// from `token()`), which is handed the read lock
    /// ([`TOKEN_HANDOFF`] / [`TOKEN_OWNER_DIED`]) or times out.
    ///
    /// # Safety
    /// As [`read`](Self::read); the words stay live while the waiter is queued.
    pub unsafe fn read_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        owner: Arc<dyn Owner>,
        token: impl Fn() -> u64,
    ) -> Result<Ticket, Acquired> {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        loop {
            let mut step = ReadStep::Park;
            let validate = |_| {
                step = self.read_validate(key, &w, me, false, true);
                matches!(step, ReadStep::Park).then(&token)
            };
            if let Some(ticket) =
                table.park_async(key, validate, self.park_of(me, false, false, Instant::now()), owner.clone())
            {
                return Ok(ticket);
            }
            match step {
                ReadStep::Done(r) => return Err(r),
                ReadStep::Recover(dead) => {
                    // SAFETY: the caller's duty: the words are live during this call.
                    unsafe { self.hand_on(table, key, dead, true, None, false) };
                }
                ReadStep::WakeDrain => self.wake_drain(table, key, &w),
                ReadStep::Park => unreachable!("a park that queued"),
            };
        }
    }

    /// A read lock now, or `None` (a live writer holds or waits).
    ///
    /// # Safety
    /// As [`read`](Self::read).
    pub unsafe fn try_read(&'static self, table: &WaitTable, key: Key, me: u32) -> Option<Acquired> {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        for _ in 0..2 {
            let mut step = ReadStep::Park;
            let validate = |_| {
                step = self.read_validate(key, &w, me, false, false);
                false
            };
            table.park(key, validate, self.park_of(me, false, false, Instant::now()), || None, Duration::ZERO, || true);
            match step {
                ReadStep::Done(r) => return Some(r),
                ReadStep::Park => return None,
                ReadStep::Recover(dead) => {
                    // SAFETY: the caller's duty: the words are live during this call.
                    unsafe { self.hand_on(table, key, dead, true, None, false) };
                }
                ReadStep::WakeDrain => self.wake_drain(table, key, &w),
            }
        }
        None
    }

    /// Blocks until `me` holds the write lock at `key`. `pending`: the
    /// caller already has the writer's place (its fast path took it with
    /// readers inside) and only waits for them to leave.
    ///
    /// # Safety
    /// As [`read`](Self::read).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn write(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        mut pending: bool,
        deadline: Option<Instant>,
        slice: Duration,
        mut interrupted: impl FnMut() -> bool,
    ) -> Acquired {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        let since = Instant::now();
        loop {
            if !pending {
                let mut step = WriteStep::Park;
                let validate = |_| {
                    step = self.write_validate(&w, me, true);
                    matches!(step, WriteStep::Park)
                };
                let park = self.park_of(me, true, false, since);
                match table.park(key, validate, park, || deadline, slice, &mut interrupted) {
                    WaitResult::NotEqual => match step {
                        WriteStep::Deadlock => return Acquired::Deadlock,
                        _ => pending = true,
                    },
                    WaitResult::Unparked(t) => match kind(t) {
                        TOKEN_OWNER_DIED => return Acquired::OwnerDied,
                        TOKEN_HANDOFF => pending = true, // the place: now the readers
                        _ => {}                          // released: compete again
                    },
                    WaitResult::Ok => {}
                    WaitResult::TimedOut => return Acquired::TimedOut,
                    WaitResult::Interrupted => return Acquired::Interrupted,
                    WaitResult::Deadlock => return Acquired::Deadlock,
                }
                continue;
            }
            let validate = || self.drain_validate(key, &w);
            let park = self.park_of(me, true, true, since);
            let r = table.park(drain_key(key), |_| validate(), park, || deadline, slice, &mut interrupted);
            match r {
                WaitResult::NotEqual => return Self::take_report(&w),
                WaitResult::Unparked(t) if kind(t) == TOKEN_OWNER_DIED => return Acquired::OwnerDied,
                WaitResult::Unparked(_) => return Acquired::Acquired,
                WaitResult::Ok => {}
                WaitResult::TimedOut | WaitResult::Interrupted | WaitResult::Deadlock => {
                    // Give the writer's place up as an unlock would. A thread
                    // that stops while it has the place is a writer's death,
                    // reported as one: as when it ends with an async wait
                    // for the readers, whose place its recovery gives up.
                    let died = r == WaitResult::Interrupted;
                    // SAFETY: the caller's duty: the words are live during this call.
                    unsafe { self.hand_on(table, key, me, died, None, false) };
                    return match r {
                        WaitResult::TimedOut => Acquired::TimedOut,
                        WaitResult::Deadlock => Acquired::Deadlock,
                        _ => Acquired::Interrupted,
                    };
                }
            }
        }
    }

    /// One step of an async write acquisition (`pending` as in
    /// [`write`](Self::write)): `Err` with the outcome if decided now, else
    /// the ticket of a queued async waiter. A waiter queued on the key is
    /// woken with [`TOKEN_OWNER_DIED`] (held), [`TOKEN_HANDOFF`] (the
    /// writer's place is the caller's: call again with `pending`) or
    /// [`TOKEN_RETRY`] (call again); one queued on key + 4 (`pending`) with
    /// [`TOKEN_HANDOFF`] / [`TOKEN_OWNER_DIED`] (held). A
    /// pending caller whose waiter times out or is cancelled gives its place
    /// up with [`write_unlock`](Self::write_unlock).
    ///
    /// # Safety
    /// As [`read_async`](Self::read_async).
    pub unsafe fn write_async(
        &'static self,
        table: &WaitTable,
        key: Key,
        me: u32,
        pending: bool,
        owner: Arc<dyn Owner>,
        token: impl Fn() -> u64,
    ) -> Result<Ticket, Acquired> {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        if !pending {
            let mut step = WriteStep::Park;
            let validate = |_| {
                step = self.write_validate(&w, me, false);
                matches!(step, WriteStep::Park).then(&token)
            };
            if let Some(ticket) =
                table.park_async(key, validate, self.park_of(me, true, false, Instant::now()), owner.clone())
            {
                return Ok(ticket);
            }
        }
        let validate = |_| self.drain_validate(key, &w).then(&token);
        let park = self.park_of(me, true, true, Instant::now());
        table.park_async(drain_key(key), validate, park, owner).ok_or_else(|| Self::take_report(&w))
    }

    /// The write lock now, or `None`.
    ///
    /// # Safety
    /// As [`read`](Self::read).
    pub unsafe fn try_write(&'static self, table: &WaitTable, key: Key, me: u32) -> Option<Acquired> {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        let mut took = false;
        let validate = |_| {
            let s = w.state.load(SeqCst);
            let owner = owner_of(s);
            if owner != 0 && (owner == me || !self.dead(owner)) {
                return false;
            }
            let next = (me << OWNER_SHIFT) | (s & FLAGS & !DRAINING) | if owner != 0 { DIED } else { 0 };
            took = w.state.compare_exchange(s, next, SeqCst, SeqCst).is_ok();
            false
        };
        table.park(key, validate, self.park_of(me, true, false, Instant::now()), || None, Duration::ZERO, || true);
        if !took {
            return None;
        }
        fence(SeqCst);
        if self.has_readers(key, &w) {
            // SAFETY: the caller's duty: the words are live during this call.
            unsafe { self.hand_on(table, key, me, false, None, false) };
            return None;
        }
        Some(Self::take_report(&w))
    }

    /// The contended read unlock by `me`: `released` if the caller already
    /// emptied its slot, else one of its registrations past the slots is
    /// taken back. Wakes a writer waiting for the readers if they are gone.
    /// False if `me` held no read lock (nothing changes).
    ///
    /// # Safety
    /// As [`read`](Self::read).
    pub unsafe fn read_unlock(&self, table: &WaitTable, key: Key, me: u32, released: bool) -> bool {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        if !released && !self.unclaim_read(key, &w, me) {
            return false;
        }
        fence(SeqCst);
        if w.state.load(SeqCst) & DRAINING != 0 {
            self.wake_drain(table, key, &w);
        }
        true
    }

    /// Hands the write lock to the writer parked on key + 4 if the readers
    /// are gone.
    fn wake_drain(&self, table: &WaitTable, key: Key, w: &Words) {
        table.unpark_filter(
            drain_key(key),
            |_, _| FilterOp::Unpark,
            |chosen, _| {
                let &[t] = chosen else { return None };
                if w.state.load(SeqCst) & DRAINING == 0 || self.has_readers(key, w) {
                    return None;
                }
                let s = w.state.fetch_and(!(DRAINING | DIED), SeqCst);
                let k = if s & DIED != 0 { TOKEN_OWNER_DIED } else { TOKEN_HANDOFF };
                Some(vec![handed(parked_owner(t), false, true, k)])
            },
        );
    }

    /// The contended write unlock by `me` (also: a writer that gives up its
    /// place). False if `me` does not have the writer's place.
    ///
    /// # Safety
    /// As [`read`](Self::read).
    pub unsafe fn write_unlock(&self, table: &WaitTable, key: Key, me: u32) -> bool {
        // SAFETY: the caller's duty: the words are live during this call.
        unsafe { self.hand_on(table, key, me, false, None, false) }
    }

    /// Write lock → read lock, atomically: `me` takes a read lock before it
    /// releases the writer's place, so no writer gets in between; queued
    /// readers come in with it. False if `me` does not hold the write lock.
    ///
    /// # Safety
    /// As [`read`](Self::read).
    pub unsafe fn downgrade(&self, table: &WaitTable, key: Key, me: u32) -> bool {
        // SAFETY: the caller's duty.
        let w = unsafe { words(key) };
        if w.state.load(SeqCst) & DRAINING != 0 {
            return false;
        }
        // SAFETY: the caller's duty: the words are live during this call.
        unsafe { self.hand_on(table, key, me, false, Some(me), false) }
    }

    /// Releases the writer's place held by `from` (an unlock, a writer that
    /// gives up, or a dead writer with `died`), under the key's bucket lock:
    /// every queued reader is handed a read lock, the oldest queued writer
    /// gets the writer's place (the write lock itself if no reader is
    /// inside). `read_for`: a downgrade's own read lock, taken first.
    /// `pinned_only`: the caller does not pin the words, so they are touched
    /// (and referred to) only while a waiter queued on the key pins them.
    /// False if `from` does not have the place.
    ///
    /// # Safety
    /// Unless `pinned_only`, `key` is the address of four live, 4-aligned
    /// words during the call.
    unsafe fn hand_on(
        &self,
        table: &WaitTable,
        key: Key,
        from: u32,
        died: bool,
        read_for: Option<u32>,
        pinned_only: bool,
    ) -> bool {
        let mut done = false;
        let mut writer_seen = false;
        // Decided by the oldest waiter, the first one the filter sees: hand
        // over if it has waited `fair_after` (or a death must be told), else
        // wake everyone to compete.
        let fair = std::cell::Cell::new(None);
        let filter = |t: ParkToken, since: Instant| {
            let f = fair.get().unwrap_or_else(|| died || since.elapsed() >= self.fair_after);
            fair.set(Some(f));
            let fair = f;
            if !fair || t & P_WRITER == 0 {
                FilterOp::Unpark
            } else if writer_seen {
                FilterOp::Skip
            } else {
                writer_seen = true;
                FilterOp::Unpark
            }
        };
        table.unpark_filter(key, filter, |chosen, have_more| {
            if pinned_only && chosen.is_empty() {
                return None;
            }
            // SAFETY: the caller pins the words, or (`pinned_only`) the live
            // waiters just chosen do: they are still queued, under the bucket
            // lock held here (see `Protocol`).
            let w = &unsafe { words(key) };
            let s = w.state.load(SeqCst);
            if owner_of(s) != from {
                return None;
            }
            done = true;
            if let Some(id) = read_for {
                self.claim_read(key, w, id);
            }
            let mut report = died || s & DIED != 0;
            if fair.get() == Some(false) {
                // Released: `owner` 0, nobody queued (all woken), the news kept.
                let mut cur = s;
                loop {
                    let next = (cur & OVERFLOW) | if have_more { PARKED } else { 0 } | if report { DIED } else { 0 };
                    match w.state.compare_exchange(cur, next, SeqCst, SeqCst) {
                        Ok(_) => break,
                        Err(now) => cur = now,
                    }
                }
                let retry = |&t: &ParkToken| handed(parked_owner(t), t & P_WRITER == 0, false, TOKEN_RETRY);
                return Some(chosen.iter().map(retry).collect());
            }
            let mut tokens = vec![0; chosen.len()];
            let mut writer = None;
            let mut readers = false;
            for (i, &t) in chosen.iter().enumerate() {
                if t & P_WRITER != 0 {
                    writer = Some(i);
                    continue;
                }
                self.claim_read(key, w, parked_owner(t));
                let k = if std::mem::take(&mut report) { TOKEN_OWNER_DIED } else { TOKEN_HANDOFF };
                tokens[i] = handed(parked_owner(t), true, false, k);
                readers = true;
            }
            let mut next_owner = 0;
            if let Some(i) = writer {
                let id = parked_owner(chosen[i]);
                next_owner = id;
                let k = if readers || self.has_readers(key, w) {
                    TOKEN_HANDOFF // the place; DIED, if still set, reaches it once the readers are gone
                } else if std::mem::take(&mut report) {
                    TOKEN_OWNER_DIED
                } else {
                    TOKEN_HANDOFF
                };
                tokens[i] = handed(id, false, false, k);
            }
            // The flags other threads may change meanwhile (OVERFLOW, from a
            // reader's registration under the overflow mutex) are kept.
            let mut cur = w.state.load(SeqCst);
            loop {
                let next = (next_owner << OWNER_SHIFT)
                    | (cur & OVERFLOW)
                    | if have_more { PARKED } else { 0 }
                    | if report { DIED } else { 0 };
                match w.state.compare_exchange(cur, next, SeqCst, SeqCst) {
                    Ok(_) => break,
                    Err(now) => cur = now,
                }
            }
            Some(tokens)
        });
        done
    }

    /// Forgets the registrations of readers past the slots of the thread
    /// `ended` (call before [`WaitTable::thread_ended`]); their words are
    /// not touched (a stale `OVERFLOW` is cleared by the next writer).
    pub fn forget_readers(&self, ended: u32) {
        self.overflow.lock().retain(|&(_, o)| o != ended);
    }

    /// After [`WaitTable::thread_ended`]`(ended)`: releases every lock the
    /// thread `ended` held the writer's place of and that had waiters, with
    /// the news of its death.
    ///
    /// Nothing pins a listed lock's memory here: the waiters seen by
    /// `thread_ended` may have left since, and the thread that ended may
    /// have been the last to keep the buffer, so the memory may be gone.
    /// The words are touched, and referred to, only under the key's bucket
    /// lock, and only while a live waiter queued there pins them
    /// (`pinned_only`). A lock whose waiters all left keeps naming the dead
    /// writer, and the next locker takes it over and is told.
    pub fn recover(&self, table: &WaitTable, ended: u32) {
        let keys: Vec<Key> = {
            let mut list = self.ended.lock();
            let mine = list.iter().filter(|&&(_, e)| e == ended).map(|&(k, _)| k).collect();
            list.retain(|&(_, e)| e != ended);
            mine
        };
        for key in keys {
            // SAFETY: `pinned_only`: touched only while a queued waiter pins them.
            unsafe { self.hand_on(table, key, ended, true, None, true) };
        }
    }

    /// Readers registered past the slots at `key` (diagnostics and tests).
    pub fn overflow_readers(&self, key: Key) -> usize {
        self.overflow.lock().iter().filter(|&&(k, _)| k == key).count()
    }

    /// Read locks that thread `id` holds past the slots at `key`.
    pub fn overflow_reads_of(&self, key: Key, id: u32) -> usize {
        self.overflow.lock().iter().filter(|&&(k, o)| k == key && o == id).count()
    }
}

impl<D: Fn(u32) -> OwnerState + Sync + 'static> Protocol for RawRwLock<D> {
    fn left(&self, key: Key, token: ParkToken, was_last: bool) {
        // SAFETY: the leaving waiter pins the memory (see `Protocol`).
        // (A drainer of a writer that ended may still be queued behind the
        // next writer's drainer: only the last one clears DRAINING.)
        if was_last {
            let (main, flag) = if token & P_DRAIN != 0 { (key - 4, DRAINING) } else { (key, PARKED) };
            unsafe { words(main) }.state.fetch_and(!flag, SeqCst);
        }
    }

    fn lost(&self, table: &WaitTable, key: Key, token: UnparkToken) {
        let main = if token & U_DRAIN != 0 { key - 4 } else { key };
        // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
        let w = unsafe { words(main) };
        let id = token >> 4;
        let died = kind(token) == TOKEN_OWNER_DIED;
        if kind(token) == TOKEN_RETRY {
            // A wake-up to compete: everyone queued was woken with it.
            return;
        }
        if token & U_READER != 0 {
            // A read lock nobody will use: give it back, and keep the news.
            self.unclaim_read(main, &w, id);
            if died {
                w.state.fetch_or(DIED, SeqCst);
            }
            fence(SeqCst);
            if w.state.load(SeqCst) & DRAINING != 0 {
                self.wake_drain(table, main, &w);
            }
        } else {
            // The writer's place (or the write lock): hand it on as the
            // writer's unlock would, with the news if it carried some, or if
            // the writer already had the place and waited for the readers
            // (`U_DRAIN`): its thread stopped holding the place, a writer's
            // death (see `write`).
            let died = died || token & U_DRAIN != 0;
            // SAFETY: the waiter that lost the token pins the memory (see `Protocol`).
            unsafe { self.hand_on(table, main, id, died, None, false) };
        }
    }

    /// A blocking `read` or `write` by a thread whose own async acquisition
    /// is queued on the same lock: what the queue grants that acquisition
    /// first (a read lock it holds, the writer's place) is only used and
    /// given back once the thread runs JavaScript again, and the blocking
    /// caller waits behind it (a writer for the readers to drain, a reader
    /// behind a writer that waits for them).
    fn waits_for_own(&self, me: ParkToken, queued: ParkToken) -> bool {
        me >> 2 == queued >> 2
    }

    fn thread_ended(&self, key: Key, head: ParkToken, _have_more: bool, ended: u32) -> Option<UnparkToken> {
        if head & P_DRAIN != 0 {
            // A writer waits for the readers; the ended thread may have been
            // the last of them.
            // SAFETY: the queued head pins the memory (see `Protocol`).
            let w = unsafe { words(key - 4) };
            if w.state.load(SeqCst) & DRAINING == 0 || self.has_readers(key - 4, &w) {
                return None;
            }
            let s = w.state.fetch_and(!(DRAINING | DIED), SeqCst);
            let k = if s & DIED != 0 { TOKEN_OWNER_DIED } else { TOKEN_HANDOFF };
            return Some(handed(parked_owner(head), false, true, k));
        }
        // SAFETY: as above.
        let w = unsafe { words(key) };
        if owner_of(w.state.load(SeqCst)) == ended {
            // Waking the whole group needs `unpark_filter`, which cannot run
            // under this bucket lock: `recover` does it next.
            self.ended.lock().push((key, ended));
        }
        None
    }
}
