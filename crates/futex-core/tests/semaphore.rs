//! The semaphore protocol (`futex_core::semaphore`) with real threads:
//! permits handed to the oldest acquirers once they have waited
//! `fair_after`, no permit taken past them then, requests of several
//! permits served in order and never passed by smaller ones behind them, a
//! deadline, a head that leaves letting those behind it proceed, and a
//! release that would overflow. Tests synchronise on the table's state and
//! the words, never on sleeps.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futex_core::semaphore::{Taken, MAX, Q};
use futex_core::{Key, RawSemaphore, WaitTable};

/// Hands every permit over: an acquirer has always waited long enough.
static SEMAPHORE: RawSemaphore = RawSemaphore { fair_after: Duration::ZERO };
/// Never hands over: queued acquirers are woken to compete with newcomers.
static UNFAIR: RawSemaphore = RawSemaphore { fair_after: Duration::MAX };
const HANG: Duration = Duration::from_secs(20);
const SLICE: Duration = Duration::from_secs(1);

/// A semaphore's two words: the free permits and `Q`, then the reserved permits.
struct Words([AtomicU32; 2]);

fn word(value: u32) -> &'static Words {
    Box::leak(Box::new(Words([AtomicU32::new(value), AtomicU32::new(0)])))
}

impl Words {
    fn load(&self, _: std::sync::atomic::Ordering) -> u32 {
        self.0[0].load(SeqCst)
    }
    fn reserved(&self) -> u32 {
        self.0[1].load(SeqCst)
    }
}

fn key(w: &'static Words) -> Key {
    w as *const Words as Key
}

fn acquire(table: &WaitTable, w: &'static Words, deadline: Option<Instant>) -> Taken {
    acquire_n(&SEMAPHORE, table, w, 1, deadline)
}

fn acquire_n(
    sem: &'static RawSemaphore,
    table: &WaitTable,
    w: &'static Words,
    n: u32,
    deadline: Option<Instant>,
) -> Taken {
    // SAFETY: the words are leaked: alive for the whole test.
    unsafe { sem.acquire(table, key(w), n, deadline, SLICE, || false) }
}

fn release(sem: &RawSemaphore, table: &WaitTable, w: &'static Words, n: u32) -> u32 {
    // SAFETY: the words are leaked.
    unsafe { sem.release(table, key(w), n) }
}

/// JavaScript's uncontended acquire: one compare-exchange if a permit is there.
fn try_acquire(w: &Words) -> bool {
    try_acquire_n(w, 1)
}

fn try_acquire_n(w: &Words, n: u32) -> bool {
    let v = w.0[0].load(SeqCst);
    v & MAX >= n && w.0[0].compare_exchange(v, v - n, SeqCst, SeqCst).is_ok()
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
    assert_eq!(release(&SEMAPHORE, &table, w, 1), 0);
    assert!(!try_acquire(w), "a permit was taken past the queued acquirers");
    wait_until("the oldest to get it", || order.lock().unwrap().len() == 1);
    assert_eq!(release(&SEMAPHORE, &table, w, 1), 0);
    wait_until("the next to get it", || order.lock().unwrap().len() == 2);
    // One for the last acquirer, one for the word.
    assert_eq!(release(&SEMAPHORE, &table, w, 2), 0);
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
    assert_eq!(release(&SEMAPHORE, &table, w, 3), 2);
    assert_eq!(w.load(SeqCst), MAX);
}

/// Spawns a blocking acquirer of `n` permits that records `id` in `order`
/// once it holds them, and waits until it is queued (the `queued`-th).
#[allow(clippy::too_many_arguments)]
fn queue_acquirer(
    sem: &'static RawSemaphore,
    table: &Arc<WaitTable>,
    w: &'static Words,
    n: u32,
    deadline: Option<Instant>,
    id: u32,
    order: &Arc<Mutex<Vec<u32>>>,
    queued: usize,
) -> thread::JoinHandle<Taken> {
    let (shared, order) = (table.clone(), order.clone());
    let h = thread::spawn(move || {
        let r = acquire_n(sem, &shared, w, n, deadline);
        if r == Taken::Acquired {
            order.lock().unwrap().push(id);
        }
        r
    });
    wait_until("the acquirer to queue", || table.len(key(w)) == queued);
    h
}

#[test]
fn a_large_request_at_the_head_is_served_before_smaller_ones_behind_it_and_nobody_takes_its_permits() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let order = Arc::new(Mutex::new(Vec::new()));
    let big = queue_acquirer(&SEMAPHORE, &table, w, 3, None, 3, &order, 1);
    let small = queue_acquirer(&SEMAPHORE, &table, w, 1, None, 1, &order, 2);
    // Two permits do not cover the head: they are reserved for it, and
    // neither the small acquirer behind it nor a newcomer gets one.
    assert_eq!(release(&SEMAPHORE, &table, w, 2), 0);
    assert_eq!(w.load(SeqCst), Q, "no permit is free");
    assert_eq!(w.reserved(), 2);
    assert!(!try_acquire(w), "a newcomer took a reserved permit");
    assert_eq!(table.len(key(w)), 2, "nobody was woken");
    // The third covers it: all three are handed over at once, then the
    // next release serves the small one.
    assert_eq!(release(&SEMAPHORE, &table, w, 1), 0);
    assert_eq!(big.join().unwrap(), Taken::Acquired);
    assert_eq!(w.load(SeqCst), Q);
    assert_eq!(w.reserved(), 0);
    assert_eq!(release(&SEMAPHORE, &table, w, 2), 0);
    assert_eq!(small.join().unwrap(), Taken::Acquired);
    assert_eq!(*order.lock().unwrap(), vec![3, 1]);
    assert_eq!(w.load(SeqCst), 1, "the permit nobody waited for is free");
    assert_eq!(table.len(key(w)), 0);
}

#[test]
fn one_release_serves_every_acquirer_it_covers_in_order_and_stops_at_the_first_it_does_not() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let order = Arc::new(Mutex::new(Vec::new()));
    let a = queue_acquirer(&SEMAPHORE, &table, w, 2, None, 2, &order, 1);
    let b = queue_acquirer(&SEMAPHORE, &table, w, 1, None, 1, &order, 2);
    let c = queue_acquirer(&SEMAPHORE, &table, w, 4, None, 4, &order, 3);
    let d = queue_acquirer(&SEMAPHORE, &table, w, 1, None, 5, &order, 4);
    // 2 + 1 served; 4 not covered by the 2 left: reserved for it, and the
    // 1 behind it waits.
    assert_eq!(release(&SEMAPHORE, &table, w, 5), 0);
    assert_eq!(a.join().unwrap(), Taken::Acquired);
    assert_eq!(b.join().unwrap(), Taken::Acquired);
    assert_eq!(table.len(key(w)), 2);
    assert_eq!(w.reserved(), 2);
    assert_eq!(w.load(SeqCst), Q);
    assert_eq!(release(&SEMAPHORE, &table, w, 3), 0);
    assert_eq!(c.join().unwrap(), Taken::Acquired);
    assert_eq!(d.join().unwrap(), Taken::Acquired);
    // Served two at a time: the threads of a pair record themselves in any order.
    let mut order = order.lock().unwrap().clone();
    order[..2].sort();
    order[2..].sort();
    assert_eq!(order, vec![1, 2, 4, 5]);
    assert_eq!(w.load(SeqCst), 0);
    assert_eq!(w.reserved(), 0);
}

/// Spawns a blocking acquirer of `n` permits that gives up (as a timeout
/// or its thread stopping would: it leaves the queue) once `stop` is set,
/// and waits until it is queued.
fn queue_quitter(
    table: &Arc<WaitTable>,
    w: &'static Words,
    n: u32,
    stop: &Arc<AtomicU32>,
) -> thread::JoinHandle<Taken> {
    let (shared, stop) = (table.clone(), stop.clone());
    let h = thread::spawn(move || {
        // SAFETY: the words are leaked.
        unsafe { SEMAPHORE.acquire(&shared, key(w), n, None, Duration::from_millis(2), || stop.load(SeqCst) != 0) }
    });
    wait_until("the acquirer to queue", || table.len(key(w)) == 1);
    h
}

#[test]
fn a_head_that_gives_up_lets_the_acquirers_behind_it_have_the_permits_it_waited_for() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let order = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicU32::new(0));
    let big = queue_quitter(&table, w, 3, &stop);
    // A stranded acquirer fails the test at its deadline instead of hanging it.
    let give_up = Some(Instant::now() + HANG);
    let small = queue_acquirer(&SEMAPHORE, &table, w, 1, give_up, 1, &order, 2);
    let other = queue_acquirer(&SEMAPHORE, &table, w, 1, give_up, 2, &order, 3);
    assert_eq!(release(&SEMAPHORE, &table, w, 2), 0);
    assert_eq!(w.reserved(), 2, "reserved for the head");
    assert_eq!(table.len(key(w)), 3);
    // The head gives up: the two permits it waited for go to the two behind it.
    stop.store(1, SeqCst);
    assert_eq!(big.join().unwrap(), Taken::Interrupted);
    assert_eq!(small.join().unwrap(), Taken::Acquired);
    assert_eq!(other.join().unwrap(), Taken::Acquired);
    assert_eq!(w.load(SeqCst), 0);
    assert_eq!(w.reserved(), 0);
    assert_eq!(table.len(key(w)), 0);
}

#[test]
fn the_last_acquirer_leaving_gives_the_reserved_permits_back_to_the_word() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let stop = Arc::new(AtomicU32::new(0));
    let big = queue_quitter(&table, w, 5, &stop);
    assert_eq!(release(&SEMAPHORE, &table, w, 4), 0);
    assert_eq!((w.load(SeqCst), w.reserved()), (Q, 4));
    stop.store(1, SeqCst);
    assert_eq!(big.join().unwrap(), Taken::Interrupted);
    assert_eq!((w.load(SeqCst), w.reserved()), (4, 0));
    assert!(try_acquire_n(w, 4));
}

#[test]
fn before_fair_after_newcomers_take_free_permits_past_a_queued_large_request() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let order = Arc::new(Mutex::new(Vec::new()));
    let big = queue_acquirer(&UNFAIR, &table, w, 3, None, 3, &order, 1);
    // Not covered, not old enough for a reserve: the permits stay free.
    assert_eq!(release(&UNFAIR, &table, w, 2), 0);
    assert_eq!((w.load(SeqCst), w.reserved()), (Q | 2, 0));
    assert!(try_acquire_n(w, 2), "a newcomer may take them");
    assert_eq!(release(&UNFAIR, &table, w, 3), 0);
    // Covered: woken to compete, it takes them.
    assert_eq!(big.join().unwrap(), Taken::Acquired);
    assert_eq!(w.load(SeqCst), 0);
}
