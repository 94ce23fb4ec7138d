//! A wake-up to compete that reached a thread which then ended before it
//! acted: its async outcome was delivered to its JavaScript, where nothing
//! passes it on, so the table cannot (`Protocol::lost` only sees outcomes
//! not yet delivered). The thread's end (`WaitTable::thread_ended`) wakes
//! the next waiter in its place, for the lock and the semaphore. Real
//! threads; every blocking wait has a generous deadline, so a waiter left
//! asleep fails an assertion instead of hanging the run.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futex_core::lock::{Acquired, OwnerState, TOKEN_RETRY};
use futex_core::semaphore::{Taken, Q};
use futex_core::{AsyncOutcome, Key, Owner, RawLock, RawSemaphore, WaitTable};

const HANG: Duration = Duration::from_secs(20);
const SLICE: Duration = Duration::from_secs(1);

/// Never hands over: every unlock wakes its waiter to compete.
static LOCK: RawLock<fn(u32) -> OwnerState> =
    RawLock { owner: |_| OwnerState::Ours, fair_after: Duration::MAX, safety_slice: Duration::MAX };
static SEMAPHORE: RawSemaphore = RawSemaphore { fair_after: Duration::MAX };

const A: u32 = 1;
const V: u32 = 2;
const B: u32 = 3;

/// A leaked word, followed by a second one (a semaphore's reserve).
fn word(value: u32) -> &'static AtomicU32 {
    &Box::leak(Box::new([AtomicU32::new(value), AtomicU32::new(0)]))[0]
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

/// The owner of V's async waiter: records its outcome, and never acts on it
/// (its thread ends).
#[derive(Default)]
struct Silent(Mutex<Vec<AsyncOutcome>>);

impl Owner for Silent {
    fn is_alive(&self) -> bool {
        true
    }
    fn complete(&self, _key: Key, _token: u64, outcome: AsyncOutcome) {
        self.0.lock().unwrap().push(outcome);
    }
}

#[test]
fn lock_a_retry_taken_by_a_thread_that_ends_goes_to_the_next_waiter() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(A << 1);
    let v = Arc::new(Silent::default());
    // SAFETY: the word is leaked.
    unsafe { LOCK.lock_async(&table, key(w), V, Instant::now(), v.clone(), |_| 1) }.expect("queued behind A");
    let b = {
        let table = table.clone();
        // SAFETY: as above.
        thread::spawn(move || unsafe {
            LOCK.lock(&table, key(w), B, Instant::now(), Some(Instant::now() + HANG), SLICE, || false)
        })
    };
    wait_until("B to queue behind V", || table.len(key(w)) == 2);
    // SAFETY: as above.
    assert!(unsafe { LOCK.unlock(&table, key(w), A) });
    assert!(matches!(v.0.lock().unwrap().as_slice(), [AsyncOutcome::Unparked(t, _)] if *t == TOKEN_RETRY));
    assert_eq!(w.load(SeqCst), 1, "free, B still queued");
    // V's thread ends without acting on its wake-up.
    assert_eq!(table.thread_ended(V), 1, "B is woken in V's place");
    assert_eq!(b.join().unwrap(), Acquired::Acquired);
    assert_eq!(w.load(SeqCst), B << 1);
}

#[test]
fn lock_a_thread_that_ends_wakes_nobody_at_a_held_lock() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(A << 1);
    let v = Arc::new(Silent::default());
    // SAFETY: the word is leaked.
    unsafe { LOCK.lock_async(&table, key(w), V, Instant::now(), v.clone(), |_| 1) }.expect("queued behind A");
    assert_eq!(table.thread_ended(B), 0, "held by a live thread: its unlock wakes someone");
    assert!(v.0.lock().unwrap().is_empty());
}

#[test]
fn semaphore_a_retry_taken_by_a_thread_that_ends_goes_to_the_next_acquirer() {
    let table = Arc::new(WaitTable::new(16));
    let w = word(0);
    let v = Arc::new(Silent::default());
    // SAFETY: the word is leaked.
    unsafe { SEMAPHORE.acquire_async(&table, key(w), 1, Instant::now(), v.clone(), || 1) }.expect("no permit: queued");
    let b = {
        let table = table.clone();
        // SAFETY: as above.
        thread::spawn(move || unsafe {
            SEMAPHORE.acquire(&table, key(w), 1, Some(Instant::now() + HANG), SLICE, || false)
        })
    };
    wait_until("B to queue behind V", || table.len(key(w)) == 2);
    // SAFETY: as above.
    assert_eq!(unsafe { SEMAPHORE.release(&table, key(w), 1) }, 0);
    assert_eq!(v.0.lock().unwrap().len(), 1, "V woken to compete");
    assert_eq!(w.load(SeqCst), Q | 1, "the permit in the word, B still queued");
    assert_eq!(table.thread_ended(V), 1, "B is woken in V's place");
    assert_eq!(b.join().unwrap(), Taken::Acquired);
    assert_eq!(w.load(SeqCst), 0);
}

/// A watching waiter (`wake::WATCH`) sleeps while its word holds a value;
/// any thread's end wakes it, blocking or async, and leaves plain waiters of
/// the same word asleep.
#[test]
fn a_thread_end_wakes_every_watching_waiter() {
    use futex_core::wake::WATCH;
    use futex_core::{Park, WaitResult};
    let table: &'static WaitTable = Box::leak(Box::new(WaitTable::default()));
    let w = word(7);
    let k = key(w);
    let watch = || Park { protocol: &WATCH, token: 0, since: Instant::now() };
    let blocked = thread::spawn(move || {
        table.park(k, |_| w.load(SeqCst) == 7, watch(), || Some(Instant::now() + HANG), SLICE, || false)
    });
    let silent = Arc::new(Silent::default());
    let owner: Arc<dyn Owner> = silent.clone();
    let ticket = table.park_async(k, |_| Some(5), watch(), owner.clone());
    assert!(ticket.is_some(), "the async watcher is queued");
    let plain = table.wait_async(k, || true, owner, 6);
    assert!(plain.is_some(), "the plain waiter is queued");
    wait_until("both watchers and the plain waiter are queued", || table.len(k) == 3);
    table.thread_ended(99);
    assert_eq!(blocked.join().unwrap(), WaitResult::Unparked(0));
    assert_eq!(*silent.0.lock().unwrap(), vec![AsyncOutcome::Unparked(0, &WATCH)]);
    assert_eq!(table.len(k), 1, "the plain waiter stays queued");
}
