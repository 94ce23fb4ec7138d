//! The semaphore protocol (`futex_core::semaphore`) with real threads:
//! permits handed to the oldest acquirers once they have waited
//! `fair_after`, no permit taken past them then, a deadline, and a release
//! that would overflow. Tests synchronise on the
//! table's state and the word, never on sleeps.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futex_core::semaphore::{Taken, MAX, Q};
use futex_core::{Key, RawSemaphore, WaitTable};

/// Hands every permit over: an acquirer has always waited long enough.
static SEMAPHORE: RawSemaphore = RawSemaphore { fair_after: Duration::ZERO };
const HANG: Duration = Duration::from_secs(20);
const SLICE: Duration = Duration::from_secs(1);

fn word(value: u32) -> &'static AtomicU32 {
    Box::leak(Box::new(AtomicU32::new(value)))
}

fn key(w: &'static AtomicU32) -> Key {
    w as *const AtomicU32 as Key
}

fn acquire(table: &WaitTable, w: &'static AtomicU32, deadline: Option<Instant>) -> Taken {
    // SAFETY: the word is leaked: alive for the whole test.
    unsafe { SEMAPHORE.acquire(table, key(w), deadline, SLICE, || false) }
}

/// JavaScript's uncontended acquire: one compare-exchange if a permit is there.
fn try_acquire(w: &AtomicU32) -> bool {
    let v = w.load(SeqCst);
    v & MAX != 0 && w.compare_exchange(v, v - 1, SeqCst, SeqCst).is_ok()
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let give_up = Instant::now() + HANG;
    while !cond() {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        thread::yield_now();
    }
}

#[test]
fn permits_go_to_the_oldest_acquirers_first_and_nobody_takes_one_past_them() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for i in 0..3 {
        let (shared, order) = (table.clone(), order.clone());
        threads.push(thread::spawn(move || {
            assert_eq!(acquire(&shared, w, None), Taken::Acquired);
            order.lock().unwrap().push(i);
        }));
        wait_until("the acquirer to queue", || table.len(key(w)) == i + 1);
    }
    assert_eq!(w.load(SeqCst), Q);
    // SAFETY: the word is leaked.
    assert_eq!(unsafe { SEMAPHORE.release(&table, key(w), 1) }, 0);
    assert!(!try_acquire(w), "a permit was taken past the queued acquirers");
    wait_until("the oldest to get it", || order.lock().unwrap().len() == 1);
    // SAFETY: as above.
    assert_eq!(unsafe { SEMAPHORE.release(&table, key(w), 1) }, 0);
    wait_until("the next to get it", || order.lock().unwrap().len() == 2);
    // One for the last acquirer, one for the word.
    // SAFETY: as above.
    assert_eq!(unsafe { SEMAPHORE.release(&table, key(w), 2) }, 0);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert_eq!(w.load(SeqCst), 1, "the permit nobody waited for is in the word");
    assert_eq!(table.len(key(w)), 0);
}

#[test]
fn an_acquirer_that_times_out_leaves_the_word_as_it_found_it() {
    let table = WaitTable::new(16);
    let w = word(0);
    assert_eq!(acquire(&table, w, Some(Instant::now() + Duration::from_millis(5))), Taken::TimedOut);
    assert_eq!(w.load(SeqCst), 0);
    assert_eq!(table.len(key(w)), 0);
}

#[test]
fn a_release_past_the_maximum_reports_what_did_not_fit() {
    let table = WaitTable::new(16);
    let w = word(MAX - 1);
    // SAFETY: the word is leaked.
    assert_eq!(unsafe { SEMAPHORE.release(&table, key(w), 3) }, 2);
    assert_eq!(w.load(SeqCst), MAX);
}
