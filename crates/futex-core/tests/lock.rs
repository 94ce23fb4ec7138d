//! The lock protocol (`futex_core::lock`) with real threads: the paths the
//! loom models do not reach (deadlines, the safety slice next to a holder
//! from another table, the waiters bit after such a holder cleared it).
//! Tests synchronise on the table's state and the word, never on sleeps.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use futex_core::lock::{Acquired, OwnerState, C};
use futex_core::{Key, RawLock, WaitTable};

const HANG: Duration = Duration::from_secs(20);
const SLICE: Duration = Duration::from_secs(1);

/// Owner ids: 1 and 2 are threads of this table, 9 one of another table.
const A: u32 = 1;
const B: u32 = 2;
const FOREIGN: u32 = 9;

type Lock = RawLock<fn(u32) -> OwnerState>;

fn state(owner: u32) -> OwnerState {
    if owner == FOREIGN {
        OwnerState::Foreign
    } else {
        OwnerState::Ours
    }
}

static LOCK: Lock =
    RawLock { owner: state, fair_after: Duration::from_millis(1), safety_slice: Duration::from_millis(20) };

fn word(value: u32) -> &'static AtomicU32 {
    Box::leak(Box::new(AtomicU32::new(value)))
}

fn key(w: &'static AtomicU32) -> Key {
    w as *const AtomicU32 as Key
}

fn lock(table: &WaitTable, w: &'static AtomicU32, me: u32, deadline: Option<Instant>) -> Acquired {
    // SAFETY: the word is leaked: alive for the whole test.
    unsafe { LOCK.lock(table, key(w), me, Instant::now(), deadline, SLICE, || false) }
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let give_up = Instant::now() + HANG;
    while !cond() {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        thread::yield_now();
    }
}

/// JavaScript's unlock: the uncontended compare-exchange, else the addon.
fn unlock(table: &WaitTable, w: &'static AtomicU32, me: u32) {
    if w.compare_exchange(me << 1, 0, SeqCst, SeqCst).is_err() {
        // SAFETY: as above.
        assert!(unsafe { LOCK.unlock(table, key(w), me) });
    }
}

#[test]
fn a_waiter_next_to_a_foreign_holder_looks_again_and_restores_the_waiters_bit() {
    const OURS: u32 = 3;
    let table = Arc::new(WaitTable::new(1));
    let w = word(OURS << 1);
    // B queues behind a holder of this table: no safety slice.
    let b = {
        let t = table.clone();
        thread::spawn(move || lock(&t, w, B, Some(Instant::now() + HANG)))
    };
    wait_until("B queued", || table.len(key(w)) == 1);
    // The lock passes to a thread of another table (as a barging newcomer
    // would take it), and A queues behind that one: with the safety slice.
    w.store((FOREIGN << 1) | C, SeqCst);
    let a = {
        let t = table.clone();
        thread::spawn(move || lock(&t, w, A, Some(Instant::now() + HANG)))
    };
    wait_until("A queued", || table.len(key(w)) == 2);
    // The foreign holder's unlock, through its own table: nobody queued
    // there, so it clears the word and wakes nobody here.
    w.store(0, SeqCst);
    // A's safety slice brings it back: it takes the lock with the waiters
    // bit set for B, so its plain unlock goes through the table and wakes B.
    assert_eq!(a.join().unwrap(), Acquired::Acquired);
    assert_eq!(w.load(SeqCst), (A << 1) | C, "B is still queued");
    unlock(&table, w, A);
    assert_eq!(b.join().unwrap(), Acquired::Acquired);
    assert_eq!(w.load(SeqCst), B << 1);
    assert_eq!(table.len(key(w)), 0);
}

#[test]
fn a_deadline_shorter_than_the_safety_slice_still_times_out() {
    let table = WaitTable::new(1);
    let w = word(FOREIGN << 1);
    assert_eq!(lock(&table, w, A, Some(Instant::now() + Duration::from_millis(5))), Acquired::TimedOut);
    assert_eq!(w.load(SeqCst), FOREIGN << 1, "the last waiter left: no waiters bit");
}

#[test]
fn a_blocking_lock_by_the_holder_is_a_deadlock_and_queues_nothing() {
    let table = WaitTable::new(1);
    let w = word(A << 1);
    assert_eq!(lock(&table, w, A, None), Acquired::Deadlock);
    assert_eq!(w.load(SeqCst), A << 1);
    assert_eq!(table.len(key(w)), 0);
}

#[test]
fn an_unlock_by_a_non_holder_changes_nothing() {
    let table = WaitTable::new(1);
    let w = word((A << 1) | C);
    // SAFETY: as above.
    assert!(!unsafe { LOCK.unlock(&table, key(w), B) });
    assert_eq!(w.load(SeqCst), (A << 1) | C);
}

/// An owner of async waiters that records nothing and never dies.
struct Quiet;

impl futex_core::Owner for Quiet {
    fn is_alive(&self) -> bool {
        true
    }
    fn complete(&self, _key: Key, _token: u64, _outcome: futex_core::AsyncOutcome) {}
}

#[test]
fn a_blocking_lock_behind_its_own_threads_async_acquisition_is_a_deadlock() {
    let table = WaitTable::new(1);
    let w = word(B << 1);
    let owner: Arc<dyn futex_core::Owner> = Arc::new(Quiet);
    // SAFETY: as above.
    // Waiting for a second already: the unlock hands it the lock.
    let since = Instant::now() - Duration::from_secs(1);
    let queued = unsafe { LOCK.lock_async(&table, key(w), A, since, owner.clone(), |_| 1) };
    assert!(queued.is_ok(), "B holds the lock: A's async acquisition queues");
    // A's blocking lock would be queued behind A's own async waiter, which B's
    // unlock hands the lock to: it never returns. It is refused, queueing nothing.
    assert_eq!(lock(&table, w, A, Some(Instant::now() + HANG)), Acquired::Deadlock);
    assert_eq!(table.len(key(w)), 1);
    // Another thread's blocking lock queues behind it as usual.
    let (b, tb) = (w, &table);
    thread::scope(|s| {
        let waiter = s.spawn(move || lock(tb, b, 3, Some(Instant::now() + HANG)));
        wait_until("the other thread is queued", || tb.len(key(b)) == 2);
        unlock(tb, b, B);
        // The async waiter (A) is first: it is handed the lock; 3 waits for A.
        assert_eq!(w.load(SeqCst) >> 1, A);
        unlock(tb, b, A);
        assert_eq!(waiter.join().unwrap(), Acquired::Acquired);
    });
}

/// Records the outcomes of its async waiters.
#[derive(Default)]
struct Outcomes(std::sync::Mutex<Vec<futex_core::AsyncOutcome>>);

impl futex_core::Owner for Outcomes {
    fn is_alive(&self) -> bool {
        true
    }
    fn complete(&self, _key: Key, _token: u64, outcome: futex_core::AsyncOutcome) {
        self.0.lock().unwrap().push(outcome);
    }
}

#[test]
fn a_waiter_that_only_competes_is_never_handed_the_lock_and_the_next_one_is() {
    use futex_core::lock::{kind, TOKEN_RETRY};
    let table = WaitTable::new(1);
    let w = word(B << 1);
    let outcomes = Arc::new(Outcomes::default());
    let owner: Arc<dyn futex_core::Owner> = outcomes.clone();
    // SAFETY: the word is leaked.
    let queued = unsafe { LOCK.lock_async_competing(&table, key(w), A, owner.clone(), |_| 1) };
    assert!(queued.is_ok(), "B holds the lock: A's waiter queues");
    // A's own blocking lock is no deadlock: the lock is never handed to A's
    // async waiter, which could not use it while A blocks.
    let (b, tb) = (w, &table);
    thread::scope(|s| {
        let blocked = s.spawn(move || lock(tb, b, A, Some(Instant::now() + HANG)));
        wait_until("A's blocking lock is queued", || tb.len(key(b)) == 2);
        thread::sleep(Duration::from_millis(5)); // both have waited past fair_after
        unlock(tb, b, B);
        // The competing waiter is woken to compete; the blocking one behind
        // it, having waited long enough, is handed the lock.
        assert_eq!(blocked.join().unwrap(), Acquired::Acquired);
        assert_eq!(w.load(SeqCst) >> 1, A);
    });
    let got = outcomes.0.lock().unwrap().clone();
    assert!(matches!(got[..], [futex_core::AsyncOutcome::Unparked(t, _)] if kind(t) == TOKEN_RETRY), "{got:?}");
}

#[test]
fn a_dead_owners_lock_goes_to_the_first_waiter_that_takes_handoffs() {
    use futex_core::lock::{kind, TOKEN_OWNER_DIED, TOKEN_RETRY};
    use futex_core::Protocol;
    let table = WaitTable::new(1);
    let w = word(B << 1);
    let outcomes = Arc::new(Outcomes::default());
    let owner: Arc<dyn futex_core::Owner> = outcomes.clone();
    // SAFETY: the word is leaked.
    unsafe {
        LOCK.lock_async_competing(&table, key(w), A, owner.clone(), |_| 1).expect("queued");
        LOCK.lock_async(&table, key(w), 3, Instant::now(), owner.clone(), |_| 2).expect("queued");
    }
    assert!(LOCK.competes_only(futex_core::lock::COMPETES | A as u64));
    table.thread_ended(B);
    let got = outcomes.0.lock().unwrap().clone();
    let kinds: Vec<_> = got
        .iter()
        .map(|o| match o {
            futex_core::AsyncOutcome::Unparked(t, _) => kind(*t),
            _ => 99,
        })
        .collect();
    assert_eq!(kinds, vec![TOKEN_RETRY, TOKEN_OWNER_DIED]);
    assert_eq!(w.load(SeqCst) >> 1, 3, "handed to the waiter behind the competing one");
}
