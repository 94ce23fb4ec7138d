//! Behaviour of the wait table with real threads.
//!
//! Tests synchronise on the table's state (`len`, the owners' logs), never on
//! sleeps: a sleep only ever widens a race window, it is never what makes an
//! assertion hold. Every blocking wait carries a generous deadline (`HANG`) so
//! that a lost wake-up shows up as a `TimedOut` assertion failure instead of a
//! hung test run.
#![cfg(not(loom))]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futex_core::{AsyncOutcome, Key, Owner, Park, Protocol, Ticket, Timer, WaitResult, WaitTable, TOKEN_NORMAL};

/// A fresh token for an async waiter. Far from the table's sequence numbers,
/// so a test cannot pass by confusing the two.
fn next_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000_000);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Far longer than any correct test step takes: reaching it means a wake-up was lost.
const HANG: Duration = Duration::from_secs(20);
/// Park slice for blocking waits that are not meant to be interrupted.
const SLICE: Duration = Duration::from_secs(1);

const K1: Key = 0x1000;
const K2: Key = 0x1008;

/// Everything that happened to the waiters of one test, in delivery order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// `Owner::complete(key, token, outcome)`.
    Async(u64, AsyncOutcome),
    /// A blocking waiter (test-chosen id) returned.
    Sync(usize, WaitResult),
}

type Log = Arc<Mutex<Vec<Event>>>;

/// A test `Owner`: records every completion, can be marked dead.
struct Recorder {
    alive: AtomicBool,
    log: Log,
}

impl Recorder {
    fn new() -> Arc<Self> {
        Self::with_log(Log::default())
    }
    fn with_log(log: Log) -> Arc<Self> {
        Arc::new(Recorder { alive: AtomicBool::new(true), log })
    }
    fn dyn_owner(self: &Arc<Self>) -> Arc<dyn Owner> {
        self.clone()
    }
    fn events(&self) -> Vec<Event> {
        self.log.lock().unwrap().clone()
    }
}

impl Owner for Recorder {
    fn is_alive(&self) -> bool {
        self.alive.load(SeqCst)
    }
    fn complete(&self, _key: Key, token: u64, outcome: AsyncOutcome) {
        self.log.lock().unwrap().push(Event::Async(token, outcome));
    }
}

/// Polls `cond` until it holds; panics (naming `what`) after `HANG`.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + HANG;
    while !cond() {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        thread::sleep(Duration::from_micros(200));
    }
}

/// Queues an async waiter that must be accepted.
fn enqueue(table: &WaitTable, key: Key, owner: &Arc<Recorder>) -> Ticket {
    table.wait_async(key, || true, owner.dyn_owner(), next_token()).expect("validate returned true")
}

/// Starts a blocking waiter (id `id`) on `key` that logs its result, and
/// returns once it is queued (`len(key)` reached `queued_after`).
fn spawn_sync_waiter(
    table: &Arc<WaitTable>,
    key: Key,
    id: usize,
    log: &Log,
    queued_after: usize,
) -> thread::JoinHandle<WaitResult> {
    let (t, l) = (table.clone(), log.clone());
    let h = thread::spawn(move || {
        let r = t.wait(key, || true, Some(Instant::now() + HANG), SLICE, || false);
        l.lock().unwrap().push(Event::Sync(id, r));
        r
    });
    wait_until(&format!("sync waiter {id} is queued"), || table.len(key) == queued_after);
    h
}

// ---------------------------------------------------------------------------
// validate

#[test]
fn validate_false_is_not_equal_and_queues_nothing() {
    let table = WaitTable::new(16);
    let calls = AtomicUsize::new(0);
    let validate = || {
        calls.fetch_add(1, SeqCst);
        false
    };
    assert_eq!(table.wait(K1, validate, None, SLICE, || panic!("must not park")), WaitResult::NotEqual);
    assert_eq!(calls.load(SeqCst), 1);
    assert_eq!(table.len(K1), 0);

    let owner = Recorder::new();
    let validate = || {
        calls.fetch_add(1, SeqCst);
        false
    };
    assert_eq!(table.wait_async(K1, validate, owner.dyn_owner(), next_token()), None);
    assert_eq!(calls.load(SeqCst), 2);
    assert_eq!(table.len(K1), 0);
    // Nothing is queued, so nothing can be woken or completed.
    assert_eq!(table.notify(K1, usize::MAX), 0);
    assert!(owner.events().is_empty());
}

/// Deterministic check that `validate` runs under the bucket lock: from inside
/// `validate` we start a notifier and let it reach `notify`. If the lock were
/// not held, the notify would find an empty queue, return 0, and the waiter
/// would then sleep until its deadline. With the lock held, the notify blocks
/// until the waiter is queued and then wakes it.
#[test]
fn validate_runs_under_the_bucket_lock() {
    let table = WaitTable::new(16);
    let notified = AtomicUsize::new(usize::MAX);
    let notify_returned = AtomicBool::new(false);
    let r = thread::scope(|s| {
        let validate = || {
            let about_to_notify = Arc::new(Barrier::new(2));
            let b = about_to_notify.clone();
            let (table, notified, notify_returned) = (&table, &notified, &notify_returned);
            s.spawn(move || {
                b.wait();
                notified.store(table.notify(K1, 1), SeqCst);
                notify_returned.store(true, SeqCst);
            });
            about_to_notify.wait();
            // Give the notifier every chance to run ahead; it must not get
            // through `notify` while we hold the bucket lock.
            thread::sleep(Duration::from_millis(50));
            assert!(!notify_returned.load(SeqCst), "notify ran while validate held the bucket lock");
            true
        };
        table.wait(K1, validate, Some(Instant::now() + HANG), SLICE, || false)
    });
    assert_eq!(r, WaitResult::Ok);
    assert_eq!(notified.load(SeqCst), 1);
    assert_eq!(table.len(K1), 0);
}

/// The futex protocol under real contention: the notifier stores a new value
/// and then notifies; the waiter waits only while the value is the old one.
/// Whatever the interleaving, the waiter must not miss the wake-up, and
/// notify's count says exactly whether it was the notify that released it.
#[test]
fn store_then_notify_never_loses_a_wakeup() {
    const ROUNDS: usize = 3000;
    let table = WaitTable::default();
    let memory = AtomicI32::new(0);
    let key = &memory as *const AtomicI32 as Key;
    let (mut ok, mut not_equal) = (0, 0);
    for round in 0..ROUNDS {
        memory.store(0, SeqCst);
        let start = Barrier::new(2);
        let (r, woken) = thread::scope(|s| {
            let waiter = s.spawn(|| {
                start.wait();
                table.wait(key, || memory.load(SeqCst) == 0, Some(Instant::now() + HANG), SLICE, || false)
            });
            start.wait();
            // Vary where the notifier lands relative to the waiter's enqueue.
            for _ in 0..(round % 64) {
                std::hint::spin_loop();
            }
            memory.store(1, SeqCst);
            let woken = table.notify(key, 1);
            (waiter.join().unwrap(), woken)
        });
        match r {
            WaitResult::Ok => {
                assert_eq!(woken, 1, "round {round}: waiter woke but notify did not count it");
                ok += 1;
            }
            WaitResult::NotEqual => {
                assert_eq!(woken, 0, "round {round}: notify counted a waiter that never queued");
                not_equal += 1;
            }
            other => panic!("round {round}: lost wake-up, waiter ended with {other:?}"),
        }
        assert_eq!(table.len(key), 0, "round {round}: waiter left behind");
    }
    eprintln!("store_then_notify: {ok} woken, {not_equal} saw the new value");
}

// ---------------------------------------------------------------------------
// FIFO

/// One queue per key, shared by blocking and async waiters, served oldest first.
#[test]
fn fifo_across_sync_and_async_waiters() {
    let table = Arc::new(WaitTable::default());
    let log = Log::default();
    let owner = Recorder::with_log(log.clone());

    // Queue order: S0 A S1 A A S2 S3 A (S = blocking thread, A = async).
    let mut expected = Vec::new();
    let mut threads = Vec::new();
    for (i, is_sync) in [true, false, true, false, false, true, true, false].into_iter().enumerate() {
        if is_sync {
            let id = threads.len();
            threads.push(spawn_sync_waiter(&table, K1, id, &log, i + 1));
            expected.push(Event::Sync(id, WaitResult::Ok));
        } else {
            let t = enqueue(&table, K1, &owner);
            expected.push(Event::Async(t.token, AsyncOutcome::Ok));
        }
        assert_eq!(table.len(K1), i + 1);
    }

    // Wake one at a time and wait for that wake-up to be delivered, so the
    // log's order is the queue's order rather than the threads' scheduling.
    for (n, want) in expected.iter().enumerate() {
        assert_eq!(table.notify(K1, 1), 1);
        wait_until(&format!("wake-up {n} is delivered"), || log.lock().unwrap().len() == n + 1);
        assert_eq!(log.lock().unwrap()[n], *want, "wake-up {n} went to the wrong waiter");
        assert_eq!(table.len(K1), expected.len() - n - 1);
    }
    for h in threads {
        assert_eq!(h.join().unwrap(), WaitResult::Ok);
    }
    assert_eq!(table.notify(K1, 1), 0);
}

/// A batch notify takes the oldest `count` waiters; later enqueues queue behind
/// the ones left over.
#[test]
fn batch_notify_takes_the_oldest() {
    let table = WaitTable::default();
    let owner = Recorder::new();
    let first: Vec<Ticket> = (0..5).map(|_| enqueue(&table, K1, &owner)).collect();
    assert_eq!(table.notify(K1, 3), 3);
    let late = enqueue(&table, K1, &owner);
    assert_eq!(table.notify(K1, usize::MAX), 3);
    let order: Vec<u64> = first.iter().chain([&late]).map(|t| t.token).collect();
    let got: Vec<u64> = owner
        .events()
        .into_iter()
        .map(|e| match e {
            Event::Async(seq, AsyncOutcome::Ok) => seq,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(got, order);
}

// ---------------------------------------------------------------------------
// notify counts and key isolation

#[test]
fn notify_count_semantics() {
    let table = WaitTable::default();
    let owner = Recorder::new();
    assert_eq!(table.notify(K1, 5), 0, "notify on a key that never had waiters");

    let tickets: Vec<Ticket> = (0..5).map(|_| enqueue(&table, K1, &owner)).collect();
    assert_eq!(table.notify(K1, 0), 0, "count 0 wakes nobody");
    assert_eq!(table.len(K1), 5);
    assert!(owner.events().is_empty());

    assert_eq!(table.notify(K1, 2), 2);
    assert_eq!(table.len(K1), 3);
    assert_eq!(
        owner.events(),
        vec![Event::Async(tickets[0].token, AsyncOutcome::Ok), Event::Async(tickets[1].token, AsyncOutcome::Ok)]
    );

    assert_eq!(table.notify(K1, 10), 3, "returns how many were woken, not the count asked for");
    assert_eq!(table.len(K1), 0);
    assert_eq!(owner.events().len(), 5);
    assert_eq!(table.notify(K1, 1), 0, "notify on a key whose queue emptied");
}

#[test]
fn notify_wakes_exactly_n_blocking_waiters() {
    let table = Arc::new(WaitTable::default());
    let log = Log::default();
    let threads: Vec<_> = (0..4).map(|i| spawn_sync_waiter(&table, K1, i, &log, i + 1)).collect();

    assert_eq!(table.notify(K1, 0), 0);
    assert_eq!(table.notify(K1, 2), 2);
    wait_until("two waiters returned", || log.lock().unwrap().len() == 2);
    assert_eq!(table.len(K1), 2, "exactly two left the queue");
    let mut threads = threads.into_iter();
    for h in threads.by_ref().take(2) {
        assert_eq!(h.join().unwrap(), WaitResult::Ok);
    }
    // The other two are still blocked: nothing else was logged.
    assert_eq!(log.lock().unwrap().len(), 2);

    assert_eq!(table.notify(K1, usize::MAX), 2);
    for h in threads {
        assert_eq!(h.join().unwrap(), WaitResult::Ok);
    }
    assert_eq!(table.len(K1), 0);
}

/// Keys sharing a bucket (a one-bucket table puts every key in the same
/// bucket) still have separate queues.
#[test]
fn other_keys_are_unaffected_even_in_the_same_bucket() {
    for table in [WaitTable::new(1), WaitTable::default()] {
        let table = Arc::new(table);
        let log = Log::default();
        let owner = Recorder::with_log(log.clone());
        let a1 = enqueue(&table, K1, &owner);
        let b1 = enqueue(&table, K2, &owner);
        let blocked = spawn_sync_waiter(&table, K2, 0, &log, 2);
        let a2 = enqueue(&table, K1, &owner);

        assert_eq!(table.notify(K1, usize::MAX), 2);
        assert_eq!(table.len(K1), 0);
        assert_eq!(table.len(K2), 2, "waiters of the other key stay queued");
        assert_eq!(
            owner.events(),
            vec![Event::Async(a1.token, AsyncOutcome::Ok), Event::Async(a2.token, AsyncOutcome::Ok)]
        );
        // The emptied K1 queue is gone; K2's queue still works, in order.
        assert_eq!(table.notify(K1, 1), 0);
        assert_eq!(table.notify(K2, 1), 1);
        assert_eq!(owner.events().last(), Some(&Event::Async(b1.token, AsyncOutcome::Ok)));
        assert_eq!(table.notify(K2, 1), 1);
        assert_eq!(blocked.join().unwrap(), WaitResult::Ok);
        assert_eq!(table.len(K2), 0);
    }
}

// ---------------------------------------------------------------------------
// blocking waiters giving up

#[test]
fn deadline_times_out_and_leaves_the_queue() {
    let table = WaitTable::default();
    let owner = Recorder::new();
    let start = Instant::now();
    let r = table.wait(K1, || true, Some(start + Duration::from_millis(50)), SLICE, || false);
    assert_eq!(r, WaitResult::TimedOut);
    assert!(start.elapsed() >= Duration::from_millis(50), "returned before its deadline");
    assert_eq!(table.len(K1), 0);

    // A deadline already in the past still validates, then times out at once.
    let r = table.wait(K1, || true, Some(Instant::now() - Duration::from_millis(1)), SLICE, || false);
    assert_eq!(r, WaitResult::TimedOut);
    assert_eq!(table.len(K1), 0);

    // The departed waiters took no wake-up with them: a later waiter gets it.
    let t = enqueue(&table, K1, &owner);
    assert_eq!(table.notify(K1, 1), 1);
    assert_eq!(owner.events(), vec![Event::Async(t.token, AsyncOutcome::Ok)]);
}

#[test]
fn interrupted_leaves_the_queue_without_consuming_a_wakeup() {
    let table = Arc::new(WaitTable::default());
    let owner = Recorder::new();
    let stop = Arc::new(AtomicBool::new(false));
    let probes = Arc::new(AtomicUsize::new(0));
    let waiter = {
        let (table, stop, probes) = (table.clone(), stop.clone(), probes.clone());
        thread::spawn(move || {
            let interrupted = || {
                probes.fetch_add(1, SeqCst);
                stop.load(SeqCst)
            };
            table.wait(K1, || true, Some(Instant::now() + HANG), Duration::from_millis(5), interrupted)
        })
    };
    wait_until("the blocking waiter is queued", || table.len(K1) == 1);
    let behind = enqueue(&table, K1, &owner);
    // The probe is consulted between slices while the waiter stays queued.
    wait_until("the probe has run a few times", || probes.load(SeqCst) >= 3);
    assert_eq!(table.len(K1), 2);

    stop.store(true, SeqCst);
    assert_eq!(waiter.join().unwrap(), WaitResult::Interrupted);
    assert_eq!(table.len(K1), 1, "the interrupted waiter left the queue");
    assert_eq!(table.notify(K1, 1), 1, "the wake-up goes to the waiter behind it");
    assert_eq!(owner.events(), vec![Event::Async(behind.token, AsyncOutcome::Ok)]);
}

/// A blocking waiter that a notify takes just as its thread is being stopped
/// will never act on the wake-up: it passes it on to the next waiter, so the
/// notify that counted it still wakes someone (tokio's `Notified` on drop).
#[test]
fn a_wakeup_taken_by_a_stopping_thread_is_passed_on() {
    let table = Arc::new(WaitTable::default());
    let owner = Recorder::new();
    let stopping = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (table, stopping) = (table.clone(), stopping.clone());
        thread::spawn(move || table.wait(K1, || true, Some(Instant::now() + HANG), HANG, || stopping.load(SeqCst)))
    };
    wait_until("the blocking waiter is queued", || table.len(K1) == 1);
    let behind = enqueue(&table, K1, &owner);
    // The thread is asked to stop, then a notify takes its waiter before it
    // noticed (its slice is long: the notify's unpark is what wakes it).
    stopping.store(true, SeqCst);
    assert_eq!(table.notify(K1, 1), 1);
    assert_eq!(waiter.join().unwrap(), WaitResult::Interrupted);
    assert_eq!(owner.events(), vec![Event::Async(behind.token, AsyncOutcome::Ok)], "the wake-up was lost");
    assert_eq!(table.len(K1), 0);
    assert_eq!(table.queued_async(), 0);
}

/// The diagnostic count of queued async waiters follows every way in and out.
#[test]
fn queued_async_counts_every_way_out() {
    let table = WaitTable::default();
    let owner = Recorder::new();
    let other = Recorder::new();
    let a = enqueue(&table, K1, &owner);
    let _b = enqueue(&table, K1, &owner);
    let _c = enqueue(&table, K1 + 8, &other);
    let d = enqueue(&table, K1 + 8, &other);
    assert_eq!(table.queued_async(), 4);
    assert!(table.is_queued(a.key, a.seq));
    assert_eq!(table.notify(K1, 1), 1);
    assert!(!table.is_queued(a.key, a.seq));
    assert_eq!(table.queued_async(), 3);
    assert!(table.cancel(d));
    assert_eq!(table.queued_async(), 2);
    let mut removed = Vec::new();
    assert_eq!(table.remove_owner(&owner.dyn_owner(), |t| removed.push(t)), 1);
    assert_eq!(removed.len(), 1);
    assert_eq!(table.queued_async(), 1);
    assert_eq!(table.notify(K1 + 8, usize::MAX), 1);
    assert_eq!(table.queued_async(), 0);
}

/// Deadlines racing with notifies: a waiter whose notify lands between its
/// deadline check and its leaving the queue must report `Ok`, so the notify
/// count always equals the number of `Ok` results.
#[test]
fn blocking_deadline_racing_notify_counts_consistently() {
    let table = WaitTable::new(4);
    let (mut ok_total, mut timed_out_total) = (0, 0);
    for round in 0..200u64 {
        let key = K1 + 8 * (round as usize % 4);
        let stop = AtomicBool::new(false);
        let (results, woken) = thread::scope(|s| {
            let waiters: Vec<_> = (0..4)
                .map(|i| {
                    let table = &table;
                    s.spawn(move || {
                        let deadline = Instant::now() + Duration::from_micros(100 * ((round + i) % 8));
                        table.wait(key, || true, Some(deadline), Duration::from_micros(50), || false)
                    })
                })
                .collect();
            let notifier = s.spawn(|| {
                let mut woken = 0;
                while !stop.load(SeqCst) {
                    woken += table.notify(key, 1);
                    thread::yield_now();
                }
                woken
            });
            let results: Vec<WaitResult> = waiters.into_iter().map(|h| h.join().unwrap()).collect();
            stop.store(true, SeqCst);
            (results, notifier.join().unwrap())
        });
        let ok = results.iter().filter(|r| **r == WaitResult::Ok).count();
        let timed_out = results.iter().filter(|r| **r == WaitResult::TimedOut).count();
        assert_eq!(ok + timed_out, results.len(), "round {round}: {results:?}");
        assert_eq!(woken, ok, "round {round}: notify count disagrees with the waiters ({results:?})");
        assert_eq!(table.len(key), 0);
        ok_total += ok;
        timed_out_total += timed_out;
    }
    eprintln!("blocking deadline vs notify: {ok_total} woken, {timed_out_total} timed out");
}

/// The narrowest form of that race: the waiter's deadline has already passed,
/// so it enqueues and immediately leaves, while a notifier hammers the key.
/// A notify that gets in between must be the waiter's outcome (`Ok`), never
/// counted by notify *and* reported as `TimedOut`.
#[test]
fn expired_deadline_racing_notify_counts_consistently() {
    let table = WaitTable::new(1);
    let (mut ok_total, mut timed_out_total) = (0, 0);
    for round in 0..300 {
        let done = AtomicBool::new(false);
        let start = Barrier::new(2);
        let (r, woken) = thread::scope(|s| {
            let notifier = s.spawn(|| {
                start.wait();
                let mut woken = 0;
                while !done.load(SeqCst) {
                    woken += table.notify(K1, 1);
                }
                woken
            });
            start.wait();
            let expired = Instant::now() - Duration::from_millis(1);
            let r = table.wait(K1, || true, Some(expired), SLICE, || false);
            done.store(true, SeqCst);
            (r, notifier.join().unwrap())
        });
        match r {
            WaitResult::Ok => ok_total += 1,
            WaitResult::TimedOut => timed_out_total += 1,
            other => panic!("round {round}: unexpected {other:?}"),
        }
        assert_eq!(woken, usize::from(r == WaitResult::Ok), "round {round}: notify count disagrees with {r:?}");
        assert_eq!(table.len(K1), 0);
    }
    eprintln!("expired deadline vs notify: {ok_total} woken, {timed_out_total} timed out");
}

// ---------------------------------------------------------------------------
// async waiters: timeout, cancel, teardown

#[test]
fn timeout_completes_once_and_reports_it() {
    let table = WaitTable::default();
    let owner = Recorder::new();
    let t = enqueue(&table, K1, &owner);
    let other = enqueue(&table, K1, &owner);
    assert!(table.timeout(t));
    assert_eq!(owner.events(), vec![Event::Async(t.token, AsyncOutcome::TimedOut)]);
    assert_eq!(table.len(K1), 1);

    assert!(!table.timeout(t), "a second timeout finds nothing");
    assert!(!table.cancel(t), "nor does a cancel");
    assert_eq!(table.notify(K1, usize::MAX), 1, "the timed-out waiter is not woken again");
    assert_eq!(
        owner.events(),
        vec![Event::Async(t.token, AsyncOutcome::TimedOut), Event::Async(other.token, AsyncOutcome::Ok)]
    );
    assert_eq!(table.len(K1), 0);
}

#[test]
fn timeout_after_notify_does_nothing() {
    let table = WaitTable::default();
    let owner = Recorder::new();
    let t = enqueue(&table, K1, &owner);
    assert_eq!(table.notify(K1, 1), 1);
    assert!(!table.timeout(t));
    assert_eq!(owner.events(), vec![Event::Async(t.token, AsyncOutcome::Ok)]);
}

#[test]
fn cancel_removes_without_completing() {
    let table = WaitTable::default();
    let owner = Recorder::new();
    let t = enqueue(&table, K1, &owner);
    let behind = enqueue(&table, K1, &owner);
    assert!(table.cancel(t));
    assert_eq!(table.len(K1), 1);
    assert!(owner.events().is_empty(), "cancel delivers no outcome");
    assert!(!table.cancel(t));
    assert!(!table.timeout(t));
    // The cancelled waiter does not absorb a wake-up.
    assert_eq!(table.notify(K1, 1), 1);
    assert_eq!(owner.events(), vec![Event::Async(behind.token, AsyncOutcome::Ok)]);
    assert_eq!(table.len(K1), 0);
}

#[test]
fn remove_owner_removes_only_that_owners_waiters() {
    let table = Arc::new(WaitTable::new(4));
    let log = Log::default();
    let doomed = Recorder::with_log(log.clone());
    let keeper = Recorder::with_log(log.clone());
    let keys: Vec<Key> = (0..16).map(|i| 0x4000 + 8 * i).collect();
    let mut kept = HashMap::new();
    for (i, &key) in keys.iter().enumerate() {
        for j in 0..=i % 3 {
            enqueue(&table, key, &doomed);
            if (i + j) % 2 == 0 {
                kept.entry(key).or_insert_with(Vec::new).push(enqueue(&table, key, &keeper).token);
            }
        }
    }
    // A blocking waiter is never anyone's async waiter.
    let blocked = spawn_sync_waiter(&table, keys[0], 99, &log, table.len(keys[0]) + 1);
    let doomed_count: usize = keys.iter().enumerate().map(|(i, _)| i % 3 + 1).sum();

    assert_eq!(table.remove_owner(&doomed.dyn_owner(), |_| {}), doomed_count);
    assert!(log.lock().unwrap().is_empty(), "teardown delivers no outcomes");
    for &key in &keys {
        let want = kept.get(&key).map_or(0, Vec::len) + usize::from(key == keys[0]);
        assert_eq!(table.len(key), want, "key {key:#x}");
    }
    assert_eq!(table.remove_owner(&doomed.dyn_owner(), |_| {}), 0, "nothing left to remove");

    // The survivors are intact and still in order.
    for &key in &keys {
        log.lock().unwrap().clear();
        let n = table.notify(key, usize::MAX);
        if key == keys[0] {
            assert_eq!(blocked_result(&log), WaitResult::Ok);
        }
        let want: Vec<Event> =
            kept.get(&key).into_iter().flatten().map(|&s| Event::Async(s, AsyncOutcome::Ok)).collect();
        let got: Vec<Event> = log.lock().unwrap().iter().copied().filter(|e| matches!(e, Event::Async(..))).collect();
        assert_eq!(got, want, "key {key:#x}");
        assert_eq!(n, want.len() + usize::from(key == keys[0]));
        assert_eq!(table.len(key), 0);
    }
    assert_eq!(blocked.join().unwrap(), WaitResult::Ok);

    fn blocked_result(log: &Log) -> WaitResult {
        let mut found = None;
        wait_until("the blocking waiter returned", || {
            found = log.lock().unwrap().iter().find_map(|e| match e {
                Event::Sync(99, r) => Some(*r),
                _ => None,
            });
            found.is_some()
        });
        found.unwrap()
    }
}

#[test]
fn notify_skips_and_does_not_count_dead_owners() {
    let table = WaitTable::default();
    let dead = Recorder::new();
    let live = Recorder::new();
    let _d1 = enqueue(&table, K1, &dead);
    let l1 = enqueue(&table, K1, &live);
    let _d2 = enqueue(&table, K1, &dead);
    let _d3 = enqueue(&table, K1, &dead);
    let l2 = enqueue(&table, K1, &live);
    let _d4 = enqueue(&table, K1, &dead);
    dead.alive.store(false, SeqCst);

    // Wakes l1; d1 in front of it is dropped on the way and not counted.
    assert_eq!(table.notify(K1, 1), 1);
    assert_eq!(live.events(), vec![Event::Async(l1.token, AsyncOutcome::Ok)]);
    assert_eq!(table.len(K1), 4, "d1 dropped, l1 woken, the rest untouched");
    // Wakes l2, dropping d2 and d3; d4 is behind it and stays.
    assert_eq!(table.notify(K1, 1), 1);
    assert_eq!(table.len(K1), 1);
    // Only dead waiters left: they are dropped and nothing is counted.
    assert_eq!(table.notify(K1, usize::MAX), 0);
    assert_eq!(table.len(K1), 0);
    assert!(dead.events().is_empty(), "a dead owner is never completed by notify");
    assert_eq!(live.events(), vec![Event::Async(l1.token, AsyncOutcome::Ok), Event::Async(l2.token, AsyncOutcome::Ok)]);
}

// ---------------------------------------------------------------------------
// protocols: park, unpark_one, left, lost, thread_ended

/// A test protocol that records its hooks' calls.
#[derive(Default)]
struct Hooks {
    left: Mutex<Vec<(Key, u64, bool)>>,
    lost: Mutex<Vec<(Key, u32)>>,
    /// `thread_ended` unparks the head with this token when `ended` is 7.
    ended: Mutex<Vec<(Key, u64, bool, u32)>>,
    /// `after_left(key)`, with the queue's length it saw (it takes the bucket
    /// lock to look, which deadlocks if the table still held it).
    after: Mutex<Vec<(Key, usize)>>,
}

impl Protocol for Hooks {
    fn left(&self, key: Key, token: u64, was_last: bool) {
        self.left.lock().unwrap().push((key, token, was_last));
    }
    fn lost(&self, _table: &WaitTable, key: Key, token: u32) {
        self.lost.lock().unwrap().push((key, token));
    }
    fn thread_ended(&self, key: Key, head: u64, have_more: bool, ended: u32) -> Option<u32> {
        self.ended.lock().unwrap().push((key, head, have_more, ended));
        (ended == 7).then_some(70)
    }
    fn after_left(&self, table: &WaitTable, key: Key) {
        let len = table.len(key);
        self.after.lock().unwrap().push((key, len));
    }
}

fn hooks() -> &'static Hooks {
    Box::leak(Box::default())
}

fn park_of(protocol: &'static Hooks, token: u64) -> Park {
    Park { protocol, token, since: Instant::now() }
}

fn park_async(table: &WaitTable, key: Key, protocol: &'static Hooks, park_token: u64, owner: &Arc<Recorder>) -> Ticket {
    table.park_async(key, |_| Some(next_token()), park_of(protocol, park_token), owner.dyn_owner()).expect("queued")
}

#[test]
fn unpark_one_tells_its_callback_who_and_whether_more_remain_and_hands_over_its_token() {
    let table = Arc::new(WaitTable::default());
    let protocol = hooks();
    let sync = {
        let t = table.clone();
        thread::spawn(move || {
            t.park(K1, |_| true, park_of(protocol, 11), || Some(Instant::now() + HANG), SLICE, || false)
        })
    };
    wait_until("the blocking waiter queued", || table.len(K1) == 1);
    let owner = Recorder::new();
    let a = park_async(&table, K1, protocol, 22, &owner);

    let mut seen = None;
    let r = table.unpark_one(K1, |r| {
        seen = Some(r);
        5
    });
    let seen = seen.unwrap();
    assert_eq!(seen.unparked.map(|(t, _)| t), Some(11));
    assert!(seen.unparked.unwrap().1.is_some(), "a parked waiter says since when it waits");
    assert!(seen.have_more);
    assert_eq!(r.unparked, seen.unparked);
    assert_eq!(sync.join().unwrap(), WaitResult::Unparked(5));

    let r = table.unpark_one(K1, |r| {
        assert!(!r.have_more);
        TOKEN_NORMAL
    });
    assert_eq!(r.unparked.map(|(t, _)| t), Some(22));
    assert_eq!(owner.events(), vec![Event::Async(a.token, AsyncOutcome::Unparked(TOKEN_NORMAL, protocol))]);
    assert_eq!(table.len(K1), 0);

    // Nobody queued: the callback still runs, and learns it.
    let r = table.unpark_one(K1, |r| {
        assert!(r.unparked.is_none() && !r.have_more);
        9
    });
    assert!(r.unparked.is_none());
    assert!(protocol.left.lock().unwrap().is_empty(), "nobody left without being unparked");
}

#[test]
fn unpark_one_if_may_decline_and_leaves_the_waiter_queued() {
    let table = WaitTable::default();
    let protocol = hooks();
    let owner = Recorder::new();
    park_async(&table, K1, protocol, 1, &owner);
    let (r, woken) = table.unpark_one_if(K1, |_| None);
    assert!(!woken);
    assert_eq!(r.unparked.map(|(t, _)| t), Some(1));
    assert_eq!(table.len(K1), 1);
    assert!(owner.events().is_empty());
}

#[test]
fn a_protocol_hears_when_its_waiters_leave_and_whether_they_were_the_last() {
    let table = WaitTable::default();
    let protocol = hooks();
    let owner = Recorder::new();
    let a = park_async(&table, K1, protocol, 1, &owner);
    let b = park_async(&table, K1, protocol, 2, &owner);
    let c = park_async(&table, K2, protocol, 3, &owner);
    assert!(table.timeout(a));
    assert!(table.cancel(b));
    // Teardown of the owner removes the last one on K2.
    assert_eq!(table.remove_owner(&owner.dyn_owner(), |_| {}), 1);
    assert!(!table.cancel(c));
    assert_eq!(*protocol.left.lock().unwrap(), vec![(K1, 1, false), (K1, 2, true), (K2, 3, true)]);
    assert_eq!(table.queued_async(), 0);

    // A blocking waiter past its deadline leaves the same way.
    let r = table.park(K1, |_| true, park_of(protocol, 4), || Some(Instant::now()), SLICE, || false);
    assert_eq!(r, WaitResult::TimedOut);
    assert_eq!(protocol.left.lock().unwrap().last(), Some(&(K1, 4, true)));
}

/// Every way out of a queue but an unpark is followed by `after_left`, once
/// per queue it changed, outside the bucket lock and after `left`.
#[test]
fn a_protocol_is_called_after_a_departure_outside_the_lock() {
    let table = WaitTable::default();
    let protocol = hooks();
    let owner = Recorder::new();
    let other = Recorder::new();
    let a = park_async(&table, K1, protocol, 1, &owner);
    let b = park_async(&table, K1, protocol, 2, &other);
    park_async(&table, K1, protocol, 3, &owner);
    park_async(&table, K2, protocol, 4, &owner);
    park_async(&table, K2, protocol, 5, &owner);
    assert!(table.timeout(a));
    assert_eq!(*protocol.after.lock().unwrap(), vec![(K1, 2)]);
    // The teardown removes one waiter of K1 and both of K2: one call each.
    assert_eq!(table.remove_owner(&owner.dyn_owner(), |_| {}), 3);
    let mut after = protocol.after.lock().unwrap().clone();
    after[1..].sort();
    assert_eq!(after, vec![(K1, 2), (K1, 1), (K2, 0)]);
    assert!(table.cancel(b));
    assert_eq!(protocol.after.lock().unwrap().last(), Some(&(K1, 0)));
    let r = table.park(K1, |_| true, park_of(protocol, 6), || Some(Instant::now()), SLICE, || false);
    assert_eq!(r, WaitResult::TimedOut);
    assert_eq!(protocol.after.lock().unwrap().len(), 5);
    // A notify that drops a dead owner's waiter on its way.
    let dead = Recorder::new();
    park_async(&table, K1, protocol, 7, &dead);
    dead.alive.store(false, SeqCst);
    assert_eq!(table.notify(K1, 1), 0);
    assert_eq!(protocol.after.lock().unwrap().last(), Some(&(K1, 0)));
    assert_eq!(protocol.after.lock().unwrap().len(), 6);
    // An unpark is no departure.
    park_async(&table, K1, protocol, 8, &other);
    table.unpark_one(K1, |_| TOKEN_NORMAL);
    assert_eq!(protocol.after.lock().unwrap().len(), 6);
}

#[test]
fn a_stopping_parked_waiter_hands_its_token_to_the_protocol() {
    let table = Arc::new(WaitTable::default());
    let protocol = hooks();
    let stopping = Arc::new(AtomicBool::new(false));
    let h = {
        let (t, s) = (table.clone(), stopping.clone());
        thread::spawn(move || {
            t.park(K1, |_| true, park_of(protocol, 1), || Some(Instant::now() + HANG), SLICE, || s.load(SeqCst))
        })
    };
    wait_until("the waiter queued", || table.len(K1) == 1);
    stopping.store(true, SeqCst);
    table.unpark_one(K1, |_| 42);
    assert_eq!(h.join().unwrap(), WaitResult::Interrupted);
    assert_eq!(*protocol.lost.lock().unwrap(), vec![(K1, 42)]);
}

#[test]
fn thread_ended_offers_each_queue_head_to_its_protocol() {
    let table = WaitTable::default();
    let protocol = hooks();
    let dead = Recorder::new();
    let owner = Recorder::new();
    park_async(&table, K1, protocol, 1, &dead);
    let b = park_async(&table, K1, protocol, 2, &owner);
    park_async(&table, K1, protocol, 3, &owner);
    enqueue(&table, K2, &owner); // a plain waiter: no protocol to ask
    dead.alive.store(false, SeqCst);

    assert_eq!(table.thread_ended(6), 0);
    assert_eq!(table.thread_ended(7), 1);
    // The dead owner's waiter is skipped: the head offered is the first live one.
    assert_eq!(*protocol.ended.lock().unwrap(), vec![(K1, 2, true, 6), (K1, 2, true, 7)]);
    assert_eq!(owner.events(), vec![Event::Async(b.token, AsyncOutcome::Unparked(70, protocol))]);
    assert_eq!(table.len(K1), 2);
    assert_eq!(table.len(K2), 1);
}

// ---------------------------------------------------------------------------
// timer integration

/// The deadline thread and notifiers race for many async waiters. Whoever
/// removes a waiter decides its outcome, so: every waiter is completed exactly
/// once, notify's total equals the `Ok` completions and the timer's `true`
/// returns equal the `TimedOut` completions.
#[test]
fn timer_racing_notify_completes_every_waiter_exactly_once() {
    const WAITERS: usize = 1500;
    let keys: Vec<Key> = (0..4).map(|i| 0x8000 + 4 * i).collect();
    let table = Arc::new(WaitTable::new(2));
    let fired = Arc::new(AtomicUsize::new(0));
    let fired_true = Arc::new(AtomicUsize::new(0));
    let timer = {
        let (table, fired, fired_true) = (table.clone(), fired.clone(), fired_true.clone());
        Timer::new(move |t: Ticket| {
            if table.timeout(t) {
                fired_true.fetch_add(1, SeqCst);
            }
            fired.fetch_add(1, SeqCst);
        })
    };

    let (mut ok_total, mut timed_out_total) = (0, 0);
    for round in 0..4 {
        let owner = Recorder::new();
        let fired_before = fired.load(SeqCst);
        let true_before = fired_true.load(SeqCst);
        let start = Instant::now();
        let tickets: Vec<Ticket> = (0..WAITERS)
            .map(|i| {
                let t = enqueue(&table, keys[i % keys.len()], &owner);
                timer.schedule(start + Duration::from_micros(20 * (i as u64 % 1000)), t);
                t
            })
            .collect();

        let woken: usize = thread::scope(|s| {
            let notifiers: Vec<_> = (0..2)
                .map(|n| {
                    let (table, owner, keys) = (&table, &owner, &keys);
                    s.spawn(move || {
                        let mut woken = 0;
                        let mut i = n;
                        while owner.log.lock().unwrap().len() < WAITERS {
                            woken += table.notify(keys[i % keys.len()], 1 + i % 3);
                            i += 1;
                            thread::sleep(Duration::from_micros(20));
                        }
                        woken
                    })
                })
                .collect();
            notifiers.into_iter().map(|h| h.join().unwrap()).sum()
        });
        wait_until("every deadline has fired", || fired.load(SeqCst) - fired_before == WAITERS);

        let events = owner.events();
        let mut seen: HashMap<u64, AsyncOutcome> = HashMap::new();
        for e in &events {
            let Event::Async(seq, outcome) = *e else { unreachable!() };
            assert!(seen.insert(seq, outcome).is_none(), "round {round}: waiter {seq} completed twice");
        }
        assert_eq!(seen.len(), WAITERS, "round {round}: some waiter never completed");
        assert!(tickets.iter().all(|t| seen.contains_key(&t.token)));
        let ok = seen.values().filter(|o| **o == AsyncOutcome::Ok).count();
        let timed_out = WAITERS - ok;
        assert_eq!(woken, ok, "round {round}: notify count != Ok completions");
        assert_eq!(fired_true.load(SeqCst) - true_before, timed_out, "round {round}: timeout() count != TimedOut");
        for &key in &keys {
            assert_eq!(table.len(key), 0);
        }
        ok_total += ok;
        timed_out_total += timed_out;
    }
    eprintln!("timer vs notify: {ok_total} woken, {timed_out_total} timed out");
    assert!(ok_total > 0 && timed_out_total > 0, "the race was never exercised");
    assert_eq!(timer.pending(), 0);
}
