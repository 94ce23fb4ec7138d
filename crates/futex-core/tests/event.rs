//! The events' words (`futex_core::event`), the changes made with their
//! wake-up (`futex_core::wake`) and the condition's whole notify
//! (`RawCondvar::signal`), with real threads. Tests synchronise on the
//! table's state and the words, never on sleeps; every blocking wait has a
//! generous deadline, so a lost wake-up fails an assertion instead of
//! hanging the run.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futex_core::condvar::{Waited, W as WAITING};
use futex_core::event::{manual_set, AUTO_Q, AUTO_SET, MANUAL_SET, MANUAL_W, TOKEN_SIGNAL};
use futex_core::wake::{compare_exchange_notify_u32, compare_exchange_notify_u64, count_to_zero};
use futex_core::{AsyncOutcome, Key, Owner, RawAutoEvent, RawCondvar, WaitResult, WaitTable};

const HANG: Duration = Duration::from_secs(20);
const SLICE: Duration = Duration::from_secs(1);

static AUTO: RawAutoEvent = RawAutoEvent;
static CONDVAR: RawCondvar = RawCondvar;

fn word(value: u32) -> &'static AtomicU32 {
    Box::leak(Box::new(AtomicU32::new(value)))
}

fn key(w: &'static AtomicU32) -> Key {
    w as *const AtomicU32 as Key
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let give_up = Instant::now() + HANG;
    while !cond() {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        thread::yield_now();
    }
}

/// A plain futex waiter on `w` while it holds `value`.
fn sleeper(table: &Arc<WaitTable>, w: &'static AtomicU32, value: u32) -> thread::JoinHandle<WaitResult> {
    let table = table.clone();
    thread::spawn(move || table.wait(key(w), || w.load(SeqCst) == value, Some(Instant::now() + HANG), SLICE, || false))
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(u64, AsyncOutcome)>>);

impl Owner for Recorder {
    fn is_alive(&self) -> bool {
        true
    }
    fn complete(&self, _key: Key, token: u64, outcome: AsyncOutcome) {
        self.0.lock().unwrap().push((token, outcome));
    }
}

// --- ManualResetEvent ------------------------------------------------------------

#[test]
fn manual_set_sets_clears_w_and_wakes_every_sleeper() {
    let table = Arc::new(WaitTable::new(16));
    // Counter 4 (not set), W: two waiters asleep on that value.
    let w = word(8 | MANUAL_W);
    let sleepers: Vec<_> = (0..2).map(|_| sleeper(&table, w, 8 | MANUAL_W)).collect();
    wait_until("both sleep", || table.len(key(w)) == 2);
    // SAFETY: the word is leaked.
    assert!(unsafe { manual_set(&table, key(w)) });
    assert_eq!(w.load(SeqCst), 10, "counter 5 (set), W clear");
    for s in sleepers {
        assert_eq!(s.join().unwrap(), WaitResult::Ok);
    }
    // SAFETY: as above.
    assert!(!unsafe { manual_set(&table, key(w)) }, "already set: nothing changes");
    assert_eq!(w.load(SeqCst), 10);
    assert_eq!(w.load(SeqCst) & MANUAL_SET, MANUAL_SET);
}

#[test]
fn manual_set_of_a_set_event_changes_nothing_and_the_counter_runs_to_its_top() {
    let table = WaitTable::new(16);
    // Counter 2^31 − 1: odd, set.
    let w = word(u32::MAX - 1);
    // SAFETY: the word is leaked.
    assert!(!unsafe { manual_set(&table, key(w)) }, "an odd counter is set");
    assert_eq!(w.load(SeqCst), u32::MAX - 1);
    // Counter 2^31 − 2: even, W.
    w.store((u32::MAX - 3) | MANUAL_W, SeqCst);
    // SAFETY: as above.
    assert!(unsafe { manual_set(&table, key(w)) });
    assert_eq!(w.load(SeqCst), u32::MAX - 1, "counter + 1, W clear");
}

// --- AutoResetEvent ----------------------------------------------------------------

fn auto_wait(table: &Arc<WaitTable>, w: &'static AtomicU32) -> thread::JoinHandle<Waited> {
    let table = table.clone();
    // SAFETY: the word is leaked.
    thread::spawn(move || unsafe { AUTO.wait(&table, key(w), Some(Instant::now() + HANG), SLICE, || false) })
}

#[test]
fn auto_n_sets_release_exactly_n_waiters_and_leave_nothing() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let h = auto_wait(&table, w);
            wait_until("the waiter to queue", || table.len(key(w)) == i + 1);
            h
        })
        .collect();
    assert_eq!(w.load(SeqCst), AUTO_Q);
    for i in 0..3 {
        // SAFETY: the word is leaked.
        assert!(unsafe { AUTO.set(&table, key(w)) }, "set {i} releases a waiter");
    }
    for h in waiters {
        assert_eq!(h.join().unwrap(), Waited::Ok);
    }
    assert_eq!(w.load(SeqCst), 0, "no signal left over, Q clear");
    assert_eq!(table.len(key(w)), 0);
}

#[test]
fn auto_set_with_nobody_queued_stores_one_signal_which_a_wait_takes() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    // SAFETY: the word is leaked.
    unsafe {
        assert!(!AUTO.set(&table, key(w)));
        assert!(!AUTO.set(&table, key(w)));
    }
    assert_eq!(w.load(SeqCst), AUTO_SET, "set twice is set once");
    assert_eq!(auto_wait(&table, w).join().unwrap(), Waited::Ok, "takes it without queueing");
    assert_eq!(w.load(SeqCst), 0);
    // A stale Q with nobody queued is cleared by the set that stores the signal.
    w.store(AUTO_Q, SeqCst);
    // SAFETY: as above.
    assert!(!unsafe { AUTO.set(&table, key(w)) });
    assert_eq!(w.load(SeqCst), AUTO_SET);
}

#[test]
fn auto_a_waiter_that_times_out_clears_q_and_takes_nothing() {
    let table = WaitTable::new(16);
    let w = word(0);
    // SAFETY: the word is leaked.
    let r = unsafe { AUTO.wait(&table, key(w), Some(Instant::now() + Duration::from_millis(5)), SLICE, || false) };
    assert_eq!(r, Waited::TimedOut);
    assert_eq!(w.load(SeqCst), 0);
    // SAFETY: as above.
    assert!(!unsafe { AUTO.set(&table, key(w)) });
    assert_eq!(w.load(SeqCst), AUTO_SET, "the set is kept for the next waiter");
}

#[test]
fn auto_a_signal_handed_to_a_stopping_waiter_goes_to_the_next_one() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let stopping = {
        let table = table.clone();
        // Its thread is being stopped: it notices once woken (its slice is
        // long: it does not leave before).
        // SAFETY: the word is leaked.
        thread::spawn(move || unsafe { AUTO.wait(&table, key(w), Some(Instant::now() + HANG), HANG, || true) })
    };
    wait_until("the stopping waiter to queue", || table.len(key(w)) == 1);
    let next = auto_wait(&table, w);
    wait_until("the next waiter to queue", || table.len(key(w)) == 2);
    // SAFETY: as above.
    assert!(unsafe { AUTO.set(&table, key(w)) });
    assert_eq!(stopping.join().unwrap(), Waited::Interrupted);
    assert_eq!(next.join().unwrap(), Waited::Ok, "the signal was passed on");
    assert_eq!(w.load(SeqCst), 0);
}

#[test]
fn auto_async_waiter_is_handed_the_signal_or_cancelled_not_both() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let owner = Arc::new(Recorder::default());
    // SAFETY: the word is leaked.
    let ticket = unsafe { AUTO.wait_async(&table, key(w), owner.clone(), || 7) }.expect("queued");
    assert_eq!(w.load(SeqCst), AUTO_Q);
    // SAFETY: as above.
    assert!(unsafe { AUTO.set(&table, key(w)) });
    assert!(!table.cancel(ticket), "too late to cancel: it was handed the signal");
    let log = owner.0.lock().unwrap().clone();
    assert_eq!(log.len(), 1);
    assert!(matches!(log[0], (7, AsyncOutcome::Unparked(TOKEN_SIGNAL, _))));
    assert_eq!(w.load(SeqCst), 0);
    // Cancelled in time: nothing handed, Q cleared, a set is stored.
    // SAFETY: as above.
    let ticket = unsafe { AUTO.wait_async(&table, key(w), owner.clone(), || 8) }.expect("queued");
    assert!(table.cancel(ticket));
    assert_eq!(w.load(SeqCst), 0);
    // SAFETY: as above.
    unsafe { AUTO.set(&table, key(w)) };
    assert_eq!(w.load(SeqCst), AUTO_SET);
    // SAFETY: as above.
    assert!(unsafe { AUTO.wait_async(&table, key(w), owner.clone(), || 9) }.is_none(), "took the signal at once");
    assert_eq!(w.load(SeqCst), 0);
}

// --- wake --------------------------------------------------------------------------

#[test]
fn compare_exchange_notify_wakes_only_if_it_took() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(5);
    let s = sleeper(&table, w, 5);
    wait_until("the sleeper to queue", || table.len(key(w)) == 1);
    // SAFETY: the word is leaked.
    assert_eq!(unsafe { compare_exchange_notify_u32(&table, key(w), 4, 6, usize::MAX) }, 5, "did not take");
    assert_eq!(table.len(key(w)), 1, "nobody woken");
    // SAFETY: as above.
    assert_eq!(unsafe { compare_exchange_notify_u32(&table, key(w), 5, 6, usize::MAX) }, 5);
    assert_eq!(w.load(SeqCst), 6);
    assert_eq!(s.join().unwrap(), WaitResult::Ok);

    let w64: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(1 << 40)));
    let k64 = w64 as *const AtomicU64 as Key;
    let s = {
        let table = table.clone();
        thread::spawn(move || {
            table.wait(k64, || w64.load(SeqCst) == 1 << 40, Some(Instant::now() + HANG), SLICE, || false)
        })
    };
    wait_until("the 64-bit sleeper to queue", || table.len(k64) == 1);
    // SAFETY: the word is leaked.
    assert_eq!(unsafe { compare_exchange_notify_u64(&table, k64, 1 << 40, 3 << 40, 1) }, 1 << 40);
    assert_eq!(s.join().unwrap(), WaitResult::Ok);
}

#[test]
fn count_to_zero_bumps_the_epoch_and_wakes_its_sleepers() {
    let table = Arc::new(WaitTable::new(16));
    let words: &'static [AtomicU32; 2] = Box::leak(Box::new([AtomicU32::new(3), AtomicU32::new(41)]));
    let (count, epoch) = (&words[0], &words[1]);
    let epoch_key = epoch as *const AtomicU32 as Key;
    let count_key = count as *const AtomicU32 as Key;
    let s = {
        let table = table.clone();
        thread::spawn(move || {
            table.wait(epoch_key, || epoch.load(SeqCst) == 41, Some(Instant::now() + HANG), SLICE, || false)
        })
    };
    wait_until("the sleeper to queue", || table.len(epoch_key) == 1);
    // SAFETY: the words are leaked.
    assert_eq!(unsafe { count_to_zero(&table, count_key, epoch_key, 2) }, 3, "did not take");
    assert_eq!(epoch.load(SeqCst), 41);
    // SAFETY: as above.
    assert_eq!(unsafe { count_to_zero(&table, count_key, epoch_key, 3) }, 3);
    assert_eq!((count.load(SeqCst), epoch.load(SeqCst)), (0, 42));
    assert_eq!(s.join().unwrap(), WaitResult::Ok);
}

// --- the condition's whole notify ------------------------------------------------

#[test]
fn condvar_signal_bumps_and_wakes_in_one_call() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(6);
    let sleepers: Vec<_> = (0..2)
        .map(|i| {
            let shared = table.clone();
            // SAFETY: the word is leaked.
            let h = thread::spawn(move || unsafe {
                CONDVAR.wait(&shared, key(w), 6, Some(Instant::now() + HANG), SLICE, || false)
            });
            wait_until("the sleeper to queue", || table.len(key(w)) == i + 1);
            h
        })
        .collect();
    assert_eq!(w.load(SeqCst), 6 | WAITING);
    // SAFETY: as above.
    assert_eq!(unsafe { CONDVAR.signal(&table, key(w), 1) }, 1);
    assert_eq!(w.load(SeqCst), 8 | WAITING, "bumped; one still queued");
    // SAFETY: as above.
    assert_eq!(unsafe { CONDVAR.signal(&table, key(w), usize::MAX) }, 1);
    assert_eq!(w.load(SeqCst), 10, "bumped; W cleared with the last");
    for h in sleepers {
        assert_eq!(h.join().unwrap(), Waited::Ok);
    }
    // SAFETY: as above.
    assert_eq!(unsafe { CONDVAR.signal(&table, key(w), 1) }, 0);
    assert_eq!(w.load(SeqCst), 12, "nobody queued: only the bump");
}
