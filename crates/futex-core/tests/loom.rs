//! Model tests: `loom` explores the interleavings of the real table code (its
//! mutexes, atomics and park/unpark come from `loom` under `cfg(loom)`).
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p futex-core --release --test loom`
//!
//! Each model uses a one-bucket table and at most three threads, so the whole
//! run stays small. A blocking waiter uses no deadline: under loom
//! `park_timeout` is a plain `park`, so a lost wake-up leaves it parked
//! forever, which loom reports as a deadlock.
//!
//! The test `Owner` records into a `std` mutex: it is never held across a loom
//! operation, so no model thread can be preempted while holding it, and the
//! log is only read after the other threads are joined.
#![cfg(loom)]

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futex_core::{AsyncOutcome, Key, Owner, Ticket, WaitResult, WaitTable};
use loom::sync::atomic::AtomicI32;
use loom::thread;

/// A fresh token for an async waiter. Far from the table's sequence numbers,
/// so a test cannot pass by confusing the two.
fn next_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000_000);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

const KEY: Key = 0x1000;

/// `loom::model`, reporting how many interleavings were explored (run with
/// `--nocapture` to see them; a count of 1 would mean nothing was explored).
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::AtomicUsize;
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    loom::model(move || {
        counter.fetch_add(1, SeqCst);
        f();
    });
    let runs = runs.load(SeqCst);
    eprintln!("{name}: {runs} interleavings");
    assert!(runs > 1, "{name}: loom explored a single interleaving");
}

/// A test `Owner`. `dead` is a loom atomic so that an owner's teardown (mark
/// dead, then `remove_owner`) interleaves with `notify`'s `is_alive` check.
struct Recorder {
    dead: loom::sync::atomic::AtomicBool,
    log: Mutex<Vec<(u64, AsyncOutcome)>>,
}

impl Recorder {
    fn new() -> Arc<Self> {
        Arc::new(Recorder { dead: loom::sync::atomic::AtomicBool::new(false), log: Mutex::default() })
    }
    fn log(&self) -> Vec<(u64, AsyncOutcome)> {
        self.log.lock().unwrap().clone()
    }
}

impl Owner for Recorder {
    fn is_alive(&self) -> bool {
        !self.dead.load(SeqCst)
    }
    fn complete(&self, _key: Key, token: u64, outcome: AsyncOutcome) {
        self.log.lock().unwrap().push((token, outcome));
    }
}

/// A one-bucket table plus one async waiter on `KEY`.
fn table_with_async_waiter() -> (Arc<WaitTable>, Arc<Recorder>, Ticket) {
    let table = Arc::new(WaitTable::new(1));
    let owner = Recorder::new();
    let ticket = table.wait_async(KEY, || true, owner.clone(), next_token()).expect("validate returned true");
    (table, owner, ticket)
}

/// Thread B changes the value and then notifies while thread A validates and
/// enqueues. Relaxed accesses on purpose: the bucket lock alone must order the
/// notifier's store before A's `validate` whenever A enqueues after the
/// notify. Either A sees the new value (NotEqual, nothing woken) or it is
/// queued before the notify looks and is woken by it (Ok, count 1).
#[test]
fn blocking_wait_vs_store_then_notify() {
    model("blocking_wait_vs_store_then_notify", || {
        let table = Arc::new(WaitTable::new(1));
        let memory = Arc::new(AtomicI32::new(0));
        let key = Arc::as_ptr(&memory) as Key;

        let notifier = {
            let (table, memory) = (table.clone(), memory.clone());
            thread::spawn(move || {
                memory.store(1, Relaxed);
                table.notify(key, 1)
            })
        };
        let validate = || memory.load(Relaxed) == 0;
        let r = table.wait(key, validate, None, Duration::from_secs(1), || false);
        // Read before joining: the join would order the store on its own.
        let seen = memory.load(Relaxed);
        let woken = notifier.join().unwrap();

        match r {
            WaitResult::Ok => {
                assert_eq!(woken, 1);
                // What the notifier wrote before notifying is visible to the
                // woken waiter. (Loom cannot isolate the `notified` flag's
                // Release/Acquire pair here: it models `unpark` as a
                // happens-before edge, and the notifier reaches the unpark
                // with no scheduling point after the flag store.)
                assert_eq!(seen, 1);
            }
            WaitResult::NotEqual => assert_eq!(woken, 0),
            other => panic!("a wait without deadline or interruption ended with {other:?}"),
        }
        assert_eq!(table.len(key), 0);
        assert!(!table.may_have_waiters(key), "a presence count outlived its queue");
    });
}

/// The same race for an async waiter: either it is not queued, or it is
/// queued and the notify completes it.
#[test]
fn async_wait_vs_store_then_notify() {
    model("async_wait_vs_store_then_notify", || {
        let table = Arc::new(WaitTable::new(1));
        let memory = Arc::new(AtomicI32::new(0));
        let owner = Recorder::new();

        let notifier = {
            let (table, memory) = (table.clone(), memory.clone());
            thread::spawn(move || {
                memory.store(1, Relaxed);
                table.notify(KEY, 1)
            })
        };
        let validate = || memory.load(Relaxed) == 0;
        let ticket = table.wait_async(KEY, validate, owner.clone(), next_token());
        let woken = notifier.join().unwrap();

        match ticket {
            Some(t) => {
                assert_eq!(woken, 1);
                assert_eq!(owner.log(), vec![(t.token, AsyncOutcome::Ok)]);
            }
            None => {
                assert_eq!(woken, 0);
                assert!(owner.log().is_empty());
            }
        }
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

/// Notify and the deadline race for one async waiter: exactly one of them
/// removes it, and its outcome and both return values agree on which.
#[test]
fn notify_vs_timeout() {
    model("notify_vs_timeout", || {
        let (table, owner, ticket) = table_with_async_waiter();
        let notifier = {
            let table = table.clone();
            thread::spawn(move || table.notify(KEY, 1))
        };
        let timer = {
            let table = table.clone();
            thread::spawn(move || table.timeout(ticket))
        };
        let woken = notifier.join().unwrap();
        let timed_out = timer.join().unwrap();

        let log = owner.log();
        assert_eq!(log.len(), 1, "exactly one completion: {log:?}");
        let (token, outcome) = log[0];
        assert_eq!(token, ticket.token);
        assert_eq!(woken == 1, outcome == AsyncOutcome::Ok);
        assert_eq!(timed_out, outcome == AsyncOutcome::TimedOut);
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

/// Notify and a cancellation race: if the cancel removed the waiter nothing is
/// delivered and notify counts nothing; otherwise the notify completed it.
#[test]
fn notify_vs_cancel() {
    model("notify_vs_cancel", || {
        let (table, owner, ticket) = table_with_async_waiter();
        let notifier = {
            let table = table.clone();
            thread::spawn(move || table.notify(KEY, 1))
        };
        let cancelled = table.cancel(ticket);
        let woken = notifier.join().unwrap();

        if cancelled {
            assert_eq!(woken, 0);
            assert!(owner.log().is_empty());
        } else {
            assert_eq!(woken, 1);
            assert_eq!(owner.log(), vec![(ticket.token, AsyncOutcome::Ok)]);
        }
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

/// Teardown of the owner races a notify and a timeout (all three remove the
/// same waiter): at most one completion, consistent with every return value,
/// and nothing left queued.
#[test]
fn notify_vs_timeout_vs_remove_owner() {
    model("notify_vs_timeout_vs_remove_owner", || {
        let (table, owner, ticket) = table_with_async_waiter();
        let notifier = {
            let table = table.clone();
            thread::spawn(move || table.notify(KEY, 1))
        };
        let timer = {
            let table = table.clone();
            thread::spawn(move || table.timeout(ticket))
        };
        let dyn_owner: Arc<dyn Owner> = owner.clone();
        let removed = table.remove_owner(&dyn_owner, |_| {});
        let woken = notifier.join().unwrap();
        let timed_out = timer.join().unwrap();

        assert_eq!(removed + woken + usize::from(timed_out), 1, "exactly one of them removed the waiter");
        let expected = match (removed, woken, timed_out) {
            (1, _, _) => vec![],
            (_, 1, _) => vec![(ticket.token, AsyncOutcome::Ok)],
            _ => vec![(ticket.token, AsyncOutcome::TimedOut)],
        };
        assert_eq!(owner.log(), expected);
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

/// An owner's teardown (mark dead, then `remove_owner`) racing a notify:
/// the waiter is removed exactly once, by the teardown (`removed == 1`), by
/// a notify that still saw the owner alive (`woken == 1`, the owner is
/// completed once), or by a notify that saw it dead (dropped: neither counts
/// it and nothing is delivered). Nothing is left queued.
#[test]
fn notify_vs_owner_teardown() {
    model("notify_vs_owner_teardown", || {
        let (table, owner, ticket) = table_with_async_waiter();
        let notifier = {
            let table = table.clone();
            thread::spawn(move || table.notify(KEY, 1))
        };
        owner.dead.store(true, SeqCst);
        let dyn_owner: Arc<dyn Owner> = owner.clone();
        let removed = table.remove_owner(&dyn_owner, |_| {});
        let woken = notifier.join().unwrap();

        assert!(removed + woken <= 1, "removed {removed}, woken {woken}");
        let expected = if woken == 1 { vec![(ticket.token, AsyncOutcome::Ok)] } else { vec![] };
        assert_eq!(owner.log(), expected);
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

/// A blocking waiter whose deadline has passed is on its way out of the
/// queue while a `notify(1)` runs: if the notify removed it first, the
/// wake-up is its outcome (`Ok`, even though it was leaving) and notify
/// counts it; if it left first, it reports `TimedOut` and notify counts
/// nothing. Under loom `Instant` is real time, so an already-expired deadline
/// is the only deterministic one: the waiter validates, enqueues, and leaves.
#[test]
fn expired_deadline_vs_notify() {
    model("expired_deadline_vs_notify", || {
        let table = Arc::new(WaitTable::new(1));
        let waiter = {
            let table = table.clone();
            thread::spawn(move || {
                let expired = std::time::Instant::now() - Duration::from_millis(1);
                table.wait(KEY, || true, Some(expired), Duration::from_secs(1), || false)
            })
        };
        let woken = table.notify(KEY, 1);
        let r = waiter.join().unwrap();

        match r {
            WaitResult::Ok => assert_eq!(woken, 1),
            WaitResult::TimedOut => assert_eq!(woken, 0, "notify counted a waiter that timed out"),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

/// The same race with an async waiter queued behind the blocking one: the
/// single wake-up is never lost. It goes to the blocking waiter, or, if that
/// one left first, to the async waiter.
#[test]
fn expired_deadline_passes_the_wakeup_on() {
    model("expired_deadline_passes_the_wakeup_on", || {
        let table = Arc::new(WaitTable::new(1));
        let owner = Recorder::new();
        // Set by `validate`, which runs under the bucket lock just before the
        // blocking waiter is inserted: once we see it, a later enqueue queues
        // behind that waiter (or finds it already gone).
        let validated = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let waiter = {
            let (table, validated) = (table.clone(), validated.clone());
            thread::spawn(move || {
                let expired = std::time::Instant::now() - Duration::from_millis(1);
                let validate = || {
                    validated.store(true, Relaxed);
                    true
                };
                table.wait(KEY, validate, Some(expired), Duration::from_secs(1), || false)
            })
        };
        while !validated.load(Relaxed) {
            thread::yield_now();
        }
        let ticket = table.wait_async(KEY, || true, owner.clone(), next_token()).unwrap();
        let woken = table.notify(KEY, 1);
        let r = waiter.join().unwrap();

        assert_eq!(woken, 1, "the async waiter was queued, so someone is woken");
        match r {
            WaitResult::Ok => {
                assert!(owner.log().is_empty());
                assert_eq!(table.len(KEY), 1, "the async waiter is still queued");
            }
            WaitResult::TimedOut => {
                assert_eq!(owner.log(), vec![(ticket.token, AsyncOutcome::Ok)], "the wake-up was lost");
                assert_eq!(table.len(KEY), 0);
                assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
            }
            other => panic!("unexpected {other:?}"),
        }
    });
}

/// A blocking waiter and an async waiter queued on one key, two concurrent
/// `notify(1)`: both are woken, each exactly once, and the counts add up.
#[test]
fn two_notifiers_two_waiters() {
    model("two_notifiers_two_waiters", || {
        let (table, owner, ticket) = table_with_async_waiter();
        // Queue a blocking waiter behind the async one from a model thread;
        // the two notifiers start once it is queued.
        let blocked = {
            let table = table.clone();
            thread::spawn(move || table.wait(KEY, || true, None, Duration::from_secs(1), || false))
        };
        while table.len(KEY) < 2 {
            thread::yield_now();
        }
        let notifier = {
            let table = table.clone();
            thread::spawn(move || table.notify(KEY, 1))
        };
        let woken = table.notify(KEY, 1) + notifier.join().unwrap();

        assert_eq!(blocked.join().unwrap(), WaitResult::Ok);
        assert_eq!(woken, 2);
        assert_eq!(owner.log(), vec![(ticket.token, AsyncOutcome::Ok)]);
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

/// A blocking waiter whose thread is being stopped is taken by a `notify(1)`
/// while a second waiter queues behind it: the stopping waiter never keeps
/// the wake-up (its thread will not act on it), so the second one is woken in
/// every interleaving. A lost wake-up leaves it parked forever: a deadlock.
#[test]
fn a_stopping_waiter_passes_its_wakeup_on() {
    model("a_stopping_waiter_passes_its_wakeup_on", || {
        let table = Arc::new(WaitTable::new(1));
        let stopping = {
            let table = table.clone();
            thread::spawn(move || table.wait(KEY, || true, None, Duration::from_secs(1), || true))
        };
        while table.len(KEY) < 1 {
            thread::yield_now();
        }
        let behind = {
            let table = table.clone();
            thread::spawn(move || table.wait(KEY, || true, None, Duration::from_secs(1), || false))
        };
        while table.len(KEY) < 2 {
            thread::yield_now();
        }
        assert_eq!(table.notify(KEY, 1), 1);
        assert_eq!(stopping.join().unwrap(), WaitResult::Interrupted);
        assert_eq!(behind.join().unwrap(), WaitResult::Ok);
        assert_eq!(table.len(KEY), 0);
        assert!(!table.may_have_waiters(KEY), "a presence count outlived its queue");
    });
}

// --- the lock protocol (futex_core::lock) -----------------------------------
//
// Each model builds a fresh lock: its word, its record of ended threads and
// the protocol are leaked (`&'static`, as the waiters' `Park` requires: the
// real protocol is a `static`), a few bytes per interleaving. Owner ids:
// A = 1 holds the lock at the start, others wait. Invariants checked after
// every model: no double grant (the word names exactly the thread that was
// told it holds the lock), and the waiters bit `C` is set exactly when
// waiters are queued.

use futex_core::lock::{Acquired, C, TOKEN_HANDOFF, TOKEN_OWNER_DIED, TOKEN_RETRY};
use futex_core::{
    lock::{kind, OwnerState},
    RawLock,
};
use loom::sync::atomic::AtomicU32;
use std::time::Instant;

pub type Lock = RawLock<Box<dyn Fn(u32) -> OwnerState + Send + Sync>>;

pub const A: u32 = 1;
pub const B: u32 = 2;
pub const W: u32 = 3;

/// A lock held by A, with nobody dead yet. `fair`: every unlock hands off
/// (else none does).
fn held_by_a(fair: bool) -> (&'static Lock, &'static AtomicU32, &'static AtomicU32, Arc<WaitTable>) {
    let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(A << 1)));
    let dead: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    let lock: &'static Lock = Box::leak(Box::new(RawLock {
        owner: Box::new(move |owner| if dead.load(SeqCst) == owner { OwnerState::Dead } else { OwnerState::Ours })
            as Box<dyn Fn(u32) -> OwnerState + Send + Sync>,
        fair_after: if fair { Duration::ZERO } else { Duration::MAX },
        safety_slice: Duration::MAX,
    }));
    (lock, word, dead, Arc::new(WaitTable::new(1)))
}

/// A thread that tears A down, as its env cleanup does: A is recorded dead,
/// then the table pushes A's locks to their waiters. Joins with how many it
/// woke.
fn end_thread_a(dead: &'static AtomicU32, table: &Arc<WaitTable>) -> loom::thread::JoinHandle<usize> {
    let table = table.clone();
    loom::thread::spawn(move || {
        dead.store(A, SeqCst);
        table.thread_ended(A)
    })
}

fn key(word: &'static AtomicU32) -> Key {
    word as *const AtomicU32 as Key
}

/// The waiters bit says exactly whether anyone is queued.
fn assert_c_matches_queue(word: &AtomicU32, table: &WaitTable) {
    let queued = table.len(key_of(word)) > 0;
    assert_eq!(word.load(SeqCst) & C != 0, queued, "word {:#x}, queued {queued}", word.load(SeqCst));
}

fn key_of(word: &AtomicU32) -> Key {
    word as *const AtomicU32 as Key
}

/// A blocking `lock()` by `me` without deadline.
fn lock_blocking(lock: &'static Lock, table: &WaitTable, word: &'static AtomicU32, me: u32) -> Acquired {
    // SAFETY: the word is leaked: alive for the whole model.
    unsafe { lock.lock(table, key(word), me, Instant::now(), None, Duration::from_secs(1), || false) }
}

fn unlock(lock: &'static Lock, table: &WaitTable, word: &'static AtomicU32, me: u32) -> bool {
    // SAFETY: as above.
    unsafe { lock.unlock(table, key(word), me) }
}

/// Queues an async waiter of `me` (the lock is held by someone else).
fn lock_async(
    lock: &'static Lock,
    table: &WaitTable,
    word: &'static AtomicU32,
    me: u32,
    owner: &Arc<Recorder>,
) -> Ticket {
    // SAFETY: as above.
    unsafe { lock.lock_async(table, key(word), me, Instant::now(), owner.clone(), |_| next_token()) }
        .expect("the lock is held by a live thread: the waiter queues")
}

/// The token an async waiter was unparked with, if it was.
fn unparked(owner: &Recorder) -> Option<u32> {
    match owner.log().as_slice() {
        [] => None,
        [(_, AsyncOutcome::Unparked(token, _))] => Some(*token),
        [(_, AsyncOutcome::TimedOut)] => None,
        other => panic!("unexpected outcomes {other:?}"),
    }
}

fn kinds(token: u32) -> u32 {
    kind(token)
}
pub const HANDOFF: u32 = TOKEN_HANDOFF;
pub const OWNER_DIED: u32 = TOKEN_OWNER_DIED;

/// A's unlock (which hands off) races with the deadline of W's async
/// waiter. Exactly one wins: W is handed the lock (the word names W, and
/// W's outcome says so) or W timed out and the unlock released the lock
/// (word 0). Never both, never neither; the waiters bit ends clear.
#[test]
fn lock_handoff_vs_timeout() {
    model("lock_handoff_vs_timeout", || {
        let (lock, word, _, table) = held_by_a(true);
        let owner = Recorder::new();
        let ticket = lock_async(lock, &table, word, W, &owner);
        assert_eq!(word.load(SeqCst), (A << 1) | C);
        let unlocker = {
            let table = table.clone();
            loom::thread::spawn(move || assert!(unlock(lock, &table, word, A)))
        };
        let timed_out = table.timeout(ticket);
        unlocker.join().unwrap();
        match unparked(&owner) {
            Some(token) => {
                assert!(!timed_out);
                assert_eq!(kinds(token), HANDOFF);
                assert_eq!(word.load(SeqCst), W << 1);
            }
            None => {
                assert!(timed_out);
                assert_eq!(owner.log(), vec![(ticket.token, AsyncOutcome::TimedOut)]);
                assert_eq!(word.load(SeqCst), 0);
            }
        }
        assert_c_matches_queue(word, &table);
    });
}

/// The same race with an abort (cancel): a cancelled waiter gets nothing
/// and the lock is released; one not cancelled in time holds it.
#[test]
fn lock_handoff_vs_cancel() {
    model("lock_handoff_vs_cancel", || {
        let (lock, word, _, table) = held_by_a(true);
        let owner = Recorder::new();
        let ticket = lock_async(lock, &table, word, W, &owner);
        let unlocker = {
            let table = table.clone();
            loom::thread::spawn(move || assert!(unlock(lock, &table, word, A)))
        };
        let cancelled = table.cancel(ticket);
        unlocker.join().unwrap();
        if cancelled {
            assert_eq!(owner.log(), vec![]);
            assert_eq!(word.load(SeqCst), 0);
        } else {
            assert_eq!(unparked(&owner).map(kinds), Some(HANDOFF));
            assert_eq!(word.load(SeqCst), W << 1);
        }
        assert_c_matches_queue(word, &table);
    });
}

/// A blocking locker B parks while A unlocks: no lost wake-up (a B left
/// parked deadlocks the model), for a handoff and for a release that lets B
/// compete. B ends up holding the lock, and only B.
#[test]
fn lock_park_vs_unlock() {
    for fair in [true, false] {
        model(if fair { "lock_park_vs_unlock (handoff)" } else { "lock_park_vs_unlock (release)" }, move || {
            let (lock, word, _, table) = held_by_a(fair);
            let locker = {
                let table = table.clone();
                loom::thread::spawn(move || lock_blocking(lock, &table, word, B))
            };
            assert!(unlock(lock, &table, word, A));
            assert_eq!(locker.join().unwrap(), Acquired::Acquired);
            assert_eq!(word.load(SeqCst), B << 1);
            assert_c_matches_queue(word, &table);
            assert!(unlock(lock, &table, word, B));
            assert_eq!(word.load(SeqCst), 0);
        });
    }
}

/// A dies holding the lock (its death recorded, then pushed by
/// `thread_ended`) while B parks. B must be woken holding the lock, told the
/// owner died, whether its validation saw the death or the push found it
/// queued: exactly once, and never left asleep next to a dead owner.
#[test]
fn lock_owner_teardown_vs_park() {
    model("lock_owner_teardown_vs_park", || {
        let (lock, word, dead, table) = held_by_a(false);
        let teardown = end_thread_a(dead, &table);
        let r = lock_blocking(lock, &table, word, B);
        let pushed = teardown.join().unwrap();
        assert_eq!(r, Acquired::OwnerDied);
        assert!(pushed <= 1);
        assert_eq!(word.load(SeqCst), B << 1);
        assert_c_matches_queue(word, &table);
    });
}

/// A dies while W's async waiter times out. Either W was handed the lock
/// with the news, or W left (clearing the waiters bit) and the next locker
/// takes the lock over and is told: the death is reported exactly once.
#[test]
fn lock_owner_teardown_vs_timeout() {
    model("lock_owner_teardown_vs_timeout", || {
        let (lock, word, dead, table) = held_by_a(false);
        let owner = Recorder::new();
        let ticket = lock_async(lock, &table, word, W, &owner);
        let teardown = end_thread_a(dead, &table);
        let timed_out = table.timeout(ticket);
        let pushed = teardown.join().unwrap();
        assert_c_matches_queue(word, &table);
        if timed_out {
            assert_eq!(pushed, 0);
            assert_eq!(word.load(SeqCst), A << 1, "still names the dead owner");
            // SAFETY: the word is leaked.
            let next = unsafe { lock.try_lock(&table, key(word), B) };
            assert_eq!(next, Some(Acquired::OwnerDied));
            assert_eq!(word.load(SeqCst), B << 1);
        } else {
            assert_eq!(pushed, 1);
            assert_eq!(unparked(&owner).map(kinds), Some(OWNER_DIED));
            assert_eq!(word.load(SeqCst), W << 1);
        }
    });
}

/// Two async waiters; A's unlock (no handoff: it wakes the first to compete)
/// races with the second's timeout. The waiters bit must be set exactly
/// while someone is queued, and the woken waiter finds the lock free.
#[test]
fn lock_release_vs_timeout_keeps_the_waiters_bit_exact() {
    model("lock_release_vs_timeout_keeps_the_waiters_bit_exact", || {
        let (lock, word, _, table) = held_by_a(false);
        let first = Recorder::new();
        let second = Recorder::new();
        lock_async(lock, &table, word, W, &first);
        let ticket = lock_async(lock, &table, word, B, &second);
        let unlocker = {
            let table = table.clone();
            loom::thread::spawn(move || assert!(unlock(lock, &table, word, A)))
        };
        let timed_out = table.timeout(ticket);
        unlocker.join().unwrap();
        assert_eq!(unparked(&first).map(kinds), Some(TOKEN_RETRY));
        assert!(timed_out, "the unlock woke only the first waiter");
        assert_eq!(word.load(SeqCst), 0, "released, nobody queued");
        assert_c_matches_queue(word, &table);
    });
}

/// A newcomer takes the lock the way JavaScript's fast path does (a
/// compare-exchange from a free word, keeping the waiters bit) while A's
/// unlock wakes the parked B to compete. Mutual exclusion holds, and B is
/// not left asleep: it gets the lock once the newcomer releases it.
#[test]
fn lock_barging_newcomer_vs_woken_waiter() {
    model("lock_barging_newcomer_vs_woken_waiter", || {
        let (lock, word, _, table) = held_by_a(false);
        let inside = Arc::new(loom::sync::atomic::AtomicU32::new(0));
        let waiter = {
            let (table, inside) = (table.clone(), inside.clone());
            loom::thread::spawn(move || {
                assert_eq!(lock_blocking(lock, &table, word, B), Acquired::Acquired);
                assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders");
                inside.fetch_sub(1, SeqCst);
                if word.compare_exchange(B << 1, 0, SeqCst, SeqCst).is_err() {
                    assert!(unlock(lock, &table, word, B));
                }
            })
        };
        while table.len(key(word)) == 0 {
            loom::thread::yield_now();
        }
        let unlocker = {
            let table = table.clone();
            loom::thread::spawn(move || assert!(unlock(lock, &table, word, A)))
        };
        // The newcomer (N = 4): one try at a free word, as `takeFree` does.
        let w = word.load(SeqCst);
        if (w == 0 || w == C) && word.compare_exchange(w, (4 << 1) | w, SeqCst, SeqCst).is_ok() {
            assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders");
            inside.fetch_sub(1, SeqCst);
            if word.compare_exchange(4 << 1, 0, SeqCst, SeqCst).is_err() {
                assert!(unlock(lock, &table, word, 4));
            }
        }
        unlocker.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(word.load(SeqCst), 0);
        assert_c_matches_queue(word, &table);
    });
}

/// A handoff reaches a blocking waiter whose thread is stopping: it passes
/// the lock on (as its unlock would) to the waiter behind it, which must not
/// be left asleep.
#[test]
fn lock_handoff_to_a_stopping_waiter_is_passed_on() {
    model("lock_handoff_to_a_stopping_waiter_is_passed_on", || {
        let (lock, word, _, table) = held_by_a(true);
        let stopping = {
            let table = table.clone();
            loom::thread::spawn(move || {
                // SAFETY: the word is leaked.
                unsafe { lock.lock(&table, key(word), W, Instant::now(), None, Duration::from_secs(1), || true) }
            })
        };
        while table.len(key(word)) < 1 {
            loom::thread::yield_now();
        }
        let behind = {
            let table = table.clone();
            loom::thread::spawn(move || lock_blocking(lock, &table, word, B))
        };
        while table.len(key(word)) < 2 {
            loom::thread::yield_now();
        }
        assert!(unlock(lock, &table, word, A));
        assert_eq!(stopping.join().unwrap(), Acquired::Interrupted);
        assert_eq!(behind.join().unwrap(), Acquired::Acquired);
        assert_eq!(word.load(SeqCst), B << 1);
        assert_c_matches_queue(word, &table);
    });
}

/// An async owner whose thread can be torn down: once dead, a lock token
/// delivered to it is passed on with `Protocol::lost`, as the N-API
/// layer's resolver does.
struct Passing {
    dead: loom::sync::atomic::AtomicBool,
    table: Arc<WaitTable>,
    log: Mutex<Vec<(u64, AsyncOutcome)>>,
}

impl Owner for Passing {
    fn is_alive(&self) -> bool {
        !self.dead.load(SeqCst)
    }
    fn complete(&self, key: Key, token: u64, outcome: AsyncOutcome) {
        if self.dead.load(SeqCst) {
            if let AsyncOutcome::Unparked(t, protocol) = outcome {
                protocol.lost(&self.table, key, t);
            }
            return;
        }
        self.log.lock().unwrap().push((token, outcome));
    }
}

/// A's unlock hands the lock to W while W's thread is torn down (marked
/// dead, its waiters removed); X waits behind W. Whatever the interleaving,
/// the lock ends up with exactly one of them: W, if the handoff reached it
/// alive, else X (handed on by W's teardown, or by the unlock that found W
/// gone). Never both, never neither, and the waiters bit is exact.
#[test]
fn lock_handoff_vs_waiter_thread_teardown() {
    model("lock_handoff_vs_waiter_thread_teardown", || {
        let (lock, word, _, table) = held_by_a(true);
        let w_owner = Arc::new(Passing {
            dead: loom::sync::atomic::AtomicBool::new(false),
            table: table.clone(),
            log: Mutex::default(),
        });
        let x_owner = Recorder::new();
        let dyn_w: Arc<dyn Owner> = w_owner.clone();
        // SAFETY: the word is leaked.
        unsafe { lock.lock_async(&table, key(word), W, Instant::now(), dyn_w.clone(), |_| next_token()) }
            .expect("queued");
        lock_async(lock, &table, word, B, &x_owner);
        let teardown = {
            let (table, w_owner) = (table.clone(), w_owner.clone());
            loom::thread::spawn(move || {
                w_owner.dead.store(true, SeqCst);
                let owner: Arc<dyn Owner> = w_owner;
                table.remove_owner(&owner, |_| {})
            })
        };
        assert!(unlock(lock, &table, word, A));
        teardown.join().unwrap();
        let w_kept = match w_owner.log.lock().unwrap().as_slice() {
            [] => false,
            [(_, AsyncOutcome::Unparked(t, _))] => {
                assert_eq!(kinds(*t), HANDOFF);
                true
            }
            other => panic!("unexpected outcomes for W {other:?}"),
        };
        let x_handed = unparked(&x_owner).map(kinds) == Some(HANDOFF);
        assert!(w_kept != x_handed, "W kept it: {w_kept}, X was handed it: {x_handed}");
        let holder = if w_kept { W } else { B };
        let queued = table.len(key(word)) > 0;
        assert_eq!(
            word.load(SeqCst),
            (holder << 1) | if queued { C } else { 0 },
            "W log {:?}, X log {:?}",
            w_owner.log.lock().unwrap(),
            x_owner.log()
        );
        assert_c_matches_queue(word, &table);
    });
}

/// A dies holding the lock (its death recorded and pushed) while W, the
/// oldest waiter, is torn down too; X waits behind W. The death is reported
/// exactly once: to W if the push reached it alive, else to X (skipped to,
/// or handed on by W's teardown), and the word names whoever was told.
#[test]
fn lock_owner_death_push_vs_waiter_teardown() {
    model("lock_owner_death_push_vs_waiter_teardown", || {
        let (lock, word, dead, table) = held_by_a(false);
        let w_owner = Arc::new(Passing {
            dead: loom::sync::atomic::AtomicBool::new(false),
            table: table.clone(),
            log: Mutex::default(),
        });
        let x_owner = Recorder::new();
        let dyn_w: Arc<dyn Owner> = w_owner.clone();
        // SAFETY: the word is leaked.
        unsafe { lock.lock_async(&table, key(word), W, Instant::now(), dyn_w.clone(), |_| next_token()) }
            .expect("queued");
        lock_async(lock, &table, word, B, &x_owner);
        let teardown = {
            let (table, w_owner) = (table.clone(), w_owner.clone());
            loom::thread::spawn(move || {
                w_owner.dead.store(true, SeqCst);
                let owner: Arc<dyn Owner> = w_owner;
                table.remove_owner(&owner, |_| {})
            })
        };
        dead.store(A, SeqCst);
        table.thread_ended(A);
        teardown.join().unwrap();
        let w_told = match w_owner.log.lock().unwrap().as_slice() {
            [] => false,
            [(_, AsyncOutcome::Unparked(t, _))] => {
                assert_eq!(kinds(*t), OWNER_DIED);
                true
            }
            other => panic!("unexpected outcomes for W {other:?}"),
        };
        let x_told = unparked(&x_owner).map(kinds) == Some(OWNER_DIED);
        assert!(w_told != x_told, "told W: {w_told}, told X: {x_told}");
        let holder = if w_told { W } else { B };
        let queued = table.len(key(word)) > 0;
        assert_eq!(word.load(SeqCst), (holder << 1) | if queued { C } else { 0 });
        assert_c_matches_queue(word, &table);
    });
}

/// A dies holding the lock while W's acquisition is aborted (cancel). If
/// the cancel came first, nobody was told and the word still names the dead
/// owner: the next locker takes it over and is told. Otherwise W was handed
/// the lock with the news. Exactly one report either way.
#[test]
fn lock_owner_teardown_vs_cancel() {
    model("lock_owner_teardown_vs_cancel", || {
        let (lock, word, dead, table) = held_by_a(false);
        let owner = Recorder::new();
        let ticket = lock_async(lock, &table, word, W, &owner);
        let teardown = end_thread_a(dead, &table);
        let cancelled = table.cancel(ticket);
        let pushed = teardown.join().unwrap();
        assert_c_matches_queue(word, &table);
        if cancelled {
            assert_eq!(pushed, 0);
            assert_eq!(owner.log(), vec![]);
            assert_eq!(word.load(SeqCst), A << 1);
            // SAFETY: the word is leaked.
            assert_eq!(unsafe { lock.try_lock(&table, key(word), B) }, Some(Acquired::OwnerDied));
        } else {
            assert_eq!(pushed, 1);
            assert_eq!(unparked(&owner).map(kinds), Some(OWNER_DIED));
            assert_eq!(word.load(SeqCst), W << 1);
        }
    });
}

// --- the semaphore protocol (futex_core::semaphore) -------------------------
//
// Each model leaks a fresh word (`&'static`, as for the lock), and uses a
// protocol that hands every permit over (`FAIR`) or none (`UNFAIR`: woken
// acquirers compete). Invariants checked after every model: no permit lost
// or duplicated (the permits the acquirers were handed plus those in the
// word equal those released), and `Q` is set exactly when acquirers are
// queued.

use futex_core::semaphore::{permit_token, Taken, MAX as PERMITS, Q, TOKEN_RETRY as PERMIT_RETRY};
use futex_core::RawSemaphore;

static FAIR: RawSemaphore = RawSemaphore { fair_after: Duration::ZERO };
static UNFAIR: RawSemaphore = RawSemaphore { fair_after: Duration::MAX };

/// A semaphore's two words (the free permits and `Q`, then the reserved
/// permits), leaked: the first is returned, the second follows it.
fn semaphore(permits: u32) -> (&'static AtomicU32, Arc<WaitTable>) {
    let words: &'static [AtomicU32; 2] = Box::leak(Box::new([AtomicU32::new(permits), AtomicU32::new(0)]));
    (&words[0], Arc::new(WaitTable::new(1)))
}

/// The permits reserved for the head of the queue (the word after `word`).
fn reserved(word: &'static AtomicU32) -> u32 {
    // SAFETY: `semaphore` made `word` the first of two leaked words.
    unsafe { &*(word as *const AtomicU32).add(1) }.load(SeqCst)
}

/// The permits in a word.
fn permits(word: &AtomicU32) -> u32 {
    word.load(SeqCst) & PERMITS
}

/// `Q` says exactly whether anyone is queued.
fn assert_queued_matches(word: &AtomicU32, table: &WaitTable) {
    let queued = table.len(key_of(word)) > 0;
    assert_eq!(word.load(SeqCst) & Q != 0, queued, "word {:#x}, queued {queued}", word.load(SeqCst));
}

/// Queues an async acquirer of one permit (the word holds no permit).
fn acquire_async(
    sem: &'static RawSemaphore,
    table: &WaitTable,
    word: &'static AtomicU32,
    owner: Arc<dyn Owner>,
) -> Ticket {
    acquire_async_n(sem, table, word, 1, owner)
}

/// Queues an async acquirer of `n` permits (the word holds fewer).
fn acquire_async_n(
    sem: &'static RawSemaphore,
    table: &WaitTable,
    word: &'static AtomicU32,
    n: u32,
    owner: Arc<dyn Owner>,
) -> Ticket {
    // SAFETY: the words are leaked: alive for the whole model.
    unsafe { sem.acquire_async(table, key(word), n, Instant::now(), owner, next_token) }
        .expect("too few permits: the acquirer queues")
}

fn acquire(sem: &'static RawSemaphore, table: &WaitTable, word: &'static AtomicU32, stopping: bool) -> Taken {
    acquire_n(sem, table, word, 1, stopping)
}

fn acquire_n(sem: &'static RawSemaphore, table: &WaitTable, word: &'static AtomicU32, n: u32, stopping: bool) -> Taken {
    // SAFETY: as above.
    unsafe { sem.acquire(table, key(word), n, None, Duration::from_secs(1), || stopping) }
}

fn release(sem: &'static RawSemaphore, table: &WaitTable, word: &'static AtomicU32, n: u32) -> u32 {
    // SAFETY: as above.
    unsafe { sem.release(table, key(word), n) }
}

/// The token an async acquirer was woken with, if it was.
fn woken_with(owner: &Recorder) -> Option<u32> {
    unparked(owner)
}

/// FAIR's release races the deadline of W's async acquirer: W is handed the
/// permit (the word stays empty) or W timed out and the permit is in the
/// word. Never both, never neither.
#[test]
fn semaphore_handoff_vs_timeout() {
    model("semaphore_handoff_vs_timeout", || {
        let (word, table) = semaphore(0);
        let owner = Recorder::new();
        let ticket = acquire_async(&FAIR, &table, word, owner.clone());
        assert_eq!(word.load(SeqCst), Q);
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&FAIR, &table, word, 1), 0))
        };
        let timed_out = table.timeout(ticket);
        releaser.join().unwrap();
        let got = woken_with(&owner) == Some(permit_token(1));
        assert!(got != timed_out, "handed {got}, timed out {timed_out}");
        assert_eq!(u32::from(got) + permits(word), 1, "a permit lost or duplicated");
        assert_queued_matches(word, &table);
    });
}

/// UNFAIR's release races the deadline: the permit is in the word either
/// way, and W was woken to compete for it or timed out, not both.
#[test]
fn semaphore_retry_vs_timeout() {
    model("semaphore_retry_vs_timeout", || {
        let (word, table) = semaphore(0);
        let owner = Recorder::new();
        let ticket = acquire_async(&UNFAIR, &table, word, owner.clone());
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&UNFAIR, &table, word, 1), 0))
        };
        let timed_out = table.timeout(ticket);
        releaser.join().unwrap();
        assert!((woken_with(&owner) == Some(PERMIT_RETRY)) != timed_out);
        assert_eq!(word.load(SeqCst), 1);
        assert_queued_matches(word, &table);
    });
}

/// FAIR's release races an abort: a cancelled acquirer gets nothing and the
/// permit stays in the word; one not cancelled in time holds it.
#[test]
fn semaphore_handoff_vs_cancel() {
    model("semaphore_handoff_vs_cancel", || {
        let (word, table) = semaphore(0);
        let owner = Recorder::new();
        let ticket = acquire_async(&FAIR, &table, word, owner.clone());
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&FAIR, &table, word, 1), 0))
        };
        let cancelled = table.cancel(ticket);
        releaser.join().unwrap();
        assert!((woken_with(&owner) == Some(permit_token(1))) != cancelled);
        assert_eq!(u32::from(!cancelled) + permits(word), 1, "a permit lost or duplicated");
        assert_queued_matches(word, &table);
    });
}

/// A blocking acquirer parks while a permit is released: no lost wake-up
/// (an acquirer left parked deadlocks the model); it ends up with the
/// permit, taken from the word, handed over, or competed for.
#[test]
fn semaphore_park_vs_release() {
    for sem in [&FAIR, &UNFAIR] {
        model("semaphore_park_vs_release", move || {
            let (word, table) = semaphore(0);
            let acquirer = {
                let table = table.clone();
                loom::thread::spawn(move || acquire(sem, &table, word, false))
            };
            assert_eq!(release(sem, &table, word, 1), 0);
            assert_eq!(acquirer.join().unwrap(), Taken::Acquired);
            assert_eq!(word.load(SeqCst), 0);
            assert_queued_matches(word, &table);
        });
    }
}

/// FAIR's release of two permits races the timeout of the first of two
/// queued acquirers: the second always gets one, the first gets the other
/// or it goes to the word. Two permits in all, never more.
#[test]
fn semaphore_release_many_vs_timeout() {
    model("semaphore_release_many_vs_timeout", || {
        let (word, table) = semaphore(0);
        let (first, second) = (Recorder::new(), Recorder::new());
        let ticket = acquire_async(&FAIR, &table, word, first.clone());
        acquire_async(&FAIR, &table, word, second.clone());
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&FAIR, &table, word, 2), 0))
        };
        let timed_out = table.timeout(ticket);
        releaser.join().unwrap();
        assert_eq!(woken_with(&second), Some(permit_token(1)), "the second acquirer was passed over");
        assert!((woken_with(&first) == Some(permit_token(1))) != timed_out);
        assert_eq!(u32::from(!timed_out) + 1 + permits(word), 2, "a permit lost or duplicated");
        assert_queued_matches(word, &table);
    });
}

/// A release wakes W (handing it the permit, or to compete) while W's
/// thread is torn down (marked dead, its waiters removed); X waits behind
/// W. The wake-up ends up with exactly one of them: W if it reached W
/// alive, else X (passed on by W's teardown, or by the release that found W
/// gone). A handed permit is never in the word as well; a permit to compete
/// for always is.
#[test]
fn semaphore_wakeup_vs_waiter_thread_teardown() {
    for sem in [&FAIR, &UNFAIR] {
        model("semaphore_wakeup_vs_waiter_thread_teardown", move || {
            let (word, table) = semaphore(0);
            let w_owner = Arc::new(Passing {
                dead: loom::sync::atomic::AtomicBool::new(false),
                table: table.clone(),
                log: Mutex::default(),
            });
            let x_owner = Recorder::new();
            acquire_async(sem, &table, word, w_owner.clone());
            acquire_async(sem, &table, word, x_owner.clone());
            let teardown = {
                let (table, w_owner) = (table.clone(), w_owner.clone());
                loom::thread::spawn(move || {
                    w_owner.dead.store(true, SeqCst);
                    let owner: Arc<dyn Owner> = w_owner;
                    table.remove_owner(&owner, |_| {})
                })
            };
            assert_eq!(release(sem, &table, word, 1), 0);
            teardown.join().unwrap();
            let expected = if std::ptr::eq(sem, &FAIR) { permit_token(1) } else { PERMIT_RETRY };
            let w_kept = match w_owner.log.lock().unwrap().as_slice() {
                [] => false,
                [(_, AsyncOutcome::Unparked(t, _))] => {
                    assert_eq!(*t, expected);
                    true
                }
                other => panic!("unexpected outcomes for W {other:?}"),
            };
            let x_woken = woken_with(&x_owner);
            assert!(x_woken.is_none() || x_woken == Some(expected));
            assert!(w_kept != x_woken.is_some(), "W kept it: {w_kept}, X woken: {x_woken:?}");
            assert_eq!(permits(word), u32::from(expected == PERMIT_RETRY), "a permit lost or duplicated");
            assert_queued_matches(word, &table);
        });
    }
}

/// A permit handed to a blocking acquirer whose thread is stopping is
/// released again, and reaches the acquirer behind it, which must not be
/// left asleep.
#[test]
fn semaphore_handoff_to_a_stopping_acquirer_is_passed_on() {
    model("semaphore_handoff_to_a_stopping_acquirer_is_passed_on", || {
        let (word, table) = semaphore(0);
        let stopping = {
            let table = table.clone();
            loom::thread::spawn(move || acquire(&FAIR, &table, word, true))
        };
        while table.len(key(word)) < 1 {
            loom::thread::yield_now();
        }
        let behind = {
            let table = table.clone();
            loom::thread::spawn(move || acquire(&FAIR, &table, word, false))
        };
        while table.len(key(word)) < 2 {
            loom::thread::yield_now();
        }
        assert_eq!(release(&FAIR, &table, word, 1), 0);
        assert_eq!(stopping.join().unwrap(), Taken::Interrupted);
        assert_eq!(behind.join().unwrap(), Taken::Acquired);
        assert_eq!(word.load(SeqCst), 0);
        assert_queued_matches(word, &table);
    });
}

/// W's deadline passes while X queues: whichever goes first, `Q` is set
/// while one of them is queued, and clear once both have left.
#[test]
fn semaphore_timeout_vs_park_keeps_the_queued_bit_exact() {
    model("semaphore_timeout_vs_park_keeps_the_queued_bit_exact", || {
        let (word, table) = semaphore(0);
        let ticket = acquire_async(&FAIR, &table, word, Recorder::new());
        let timer = {
            let table = table.clone();
            loom::thread::spawn(move || assert!(table.timeout(ticket)))
        };
        let x = acquire_async(&FAIR, &table, word, Recorder::new());
        timer.join().unwrap();
        assert_queued_matches(word, &table);
        assert!(table.cancel(x));
        assert_eq!(word.load(SeqCst), 0);
        assert_queued_matches(word, &table);
    });
}

/// JavaScript's fast paths, which carry `Q` along: take a permit if the
/// word holds one; give one back without the addon unless `Q` is set.
fn try_take(word: &AtomicU32) -> bool {
    let w = word.load(SeqCst);
    w & PERMITS != 0 && word.compare_exchange(w, w - 1, SeqCst, SeqCst).is_ok()
}

fn give_back(sem: &'static RawSemaphore, table: &WaitTable, word: &'static AtomicU32) {
    let w = word.load(SeqCst);
    if w & Q != 0 || word.compare_exchange(w, w + 1, SeqCst, SeqCst).is_err() {
        assert_eq!(release(sem, table, word, 1), 0);
    }
}

/// UNFAIR: a newcomer's fast path takes the permit a release added for the
/// woken acquirer B, then gives it back. B queues again and is not left
/// asleep; it ends with the permit, and the word with nothing.
#[test]
fn semaphore_barging_newcomer_vs_woken_acquirer() {
    model("semaphore_barging_newcomer_vs_woken_acquirer", || {
        let (word, table) = semaphore(0);
        let acquirer = {
            let table = table.clone();
            loom::thread::spawn(move || acquire(&UNFAIR, &table, word, false))
        };
        while table.len(key(word)) < 1 {
            loom::thread::yield_now();
        }
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&UNFAIR, &table, word, 1), 0))
        };
        if try_take(word) {
            give_back(&UNFAIR, &table, word);
        }
        releaser.join().unwrap();
        assert_eq!(acquirer.join().unwrap(), Taken::Acquired);
        assert_eq!(word.load(SeqCst), 0);
        assert_queued_matches(word, &table);
    });
}

// --- weighted acquisitions ---------------------------------------------------
//
// Invariants: permits are conserved (held + free + reserved = released), an
// acquirer is handed all its permits or none, the acquirers behind a head
// that leaves are not stranded when the permits cover them, and at the end
// nothing stays reserved.

/// FAIR: H (2 permits) heads the queue, X (1) waits behind it; a release of
/// 1 races H's deadline. The permit is reserved for H (not enough) or goes
/// straight to X (H already gone); either way X ends up with it: H's
/// departure hands the reserved permit on. H never gets anything.
#[test]
fn semaphore_weighted_head_timeout_vs_release_lets_the_next_through() {
    model("semaphore_weighted_head_timeout_vs_release_lets_the_next_through", || {
        let (word, table) = semaphore(0);
        let (h, x) = (Recorder::new(), Recorder::new());
        let ticket = acquire_async_n(&FAIR, &table, word, 2, h.clone());
        acquire_async_n(&FAIR, &table, word, 1, x.clone());
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&FAIR, &table, word, 1), 0))
        };
        assert!(table.timeout(ticket), "H can never be covered");
        releaser.join().unwrap();
        assert_eq!(woken_with(&x), Some(permit_token(1)), "X was stranded");
        assert_eq!((word.load(SeqCst), reserved(word)), (0, 0));
        assert_queued_matches(word, &table);
    });
}

/// FAIR: H (2 permits) is queued; two releases of 1 race. H is handed its
/// two permits exactly once, whichever comes first: the first is reserved,
/// the second completes it.
#[test]
fn semaphore_two_releases_cover_a_weighted_head() {
    model("semaphore_two_releases_cover_a_weighted_head", || {
        let (word, table) = semaphore(0);
        let h = Recorder::new();
        acquire_async_n(&FAIR, &table, word, 2, h.clone());
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&FAIR, &table, word, 1), 0))
        };
        assert_eq!(release(&FAIR, &table, word, 1), 0);
        releaser.join().unwrap();
        assert_eq!(woken_with(&h), Some(permit_token(2)));
        assert_eq!((word.load(SeqCst), reserved(word)), (0, 0));
        assert_queued_matches(word, &table);
    });
}

/// FAIR: H (2 permits, its thread being torn down) heads the queue, X (1)
/// waits behind it; a release of 1 races the teardown. X gets the permit,
/// reserved or not on the way; nothing stays reserved.
#[test]
fn semaphore_weighted_head_teardown_vs_release() {
    model("semaphore_weighted_head_teardown_vs_release", || {
        let (word, table) = semaphore(0);
        let h = Arc::new(Passing {
            dead: loom::sync::atomic::AtomicBool::new(false),
            table: table.clone(),
            log: Mutex::default(),
        });
        let x = Recorder::new();
        acquire_async_n(&FAIR, &table, word, 2, h.clone());
        acquire_async_n(&FAIR, &table, word, 1, x.clone());
        let teardown = {
            let (table, h) = (table.clone(), h.clone());
            loom::thread::spawn(move || {
                h.dead.store(true, SeqCst);
                let owner: Arc<dyn Owner> = h;
                table.remove_owner(&owner, |_| {})
            })
        };
        assert_eq!(release(&FAIR, &table, word, 1), 0);
        // H is removed by the teardown, or dropped by the release that
        // found its owner dead ahead of X.
        assert!(teardown.join().unwrap() <= 1);
        assert!(h.log.lock().unwrap().is_empty());
        assert_eq!(woken_with(&x), Some(permit_token(1)), "X was stranded");
        assert_eq!((word.load(SeqCst), reserved(word)), (0, 0));
        assert_queued_matches(word, &table);
    });
}

/// FAIR: H (2 permits) is queued with 1 free; a release of 1 races a
/// newcomer's fast path, which takes a free permit if it finds one and gives
/// it back. The newcomer never takes a permit reserved for H, H ends with
/// its two, and nothing is left free or reserved.
#[test]
fn semaphore_barging_newcomer_vs_reserve() {
    model("semaphore_barging_newcomer_vs_reserve", || {
        let (word, table) = semaphore(1);
        let h = Recorder::new();
        acquire_async_n(&FAIR, &table, word, 2, h.clone());
        let releaser = {
            let table = table.clone();
            loom::thread::spawn(move || assert_eq!(release(&FAIR, &table, word, 1), 0))
        };
        if try_take(word) {
            give_back(&FAIR, &table, word);
        }
        releaser.join().unwrap();
        assert_eq!(woken_with(&h), Some(permit_token(2)));
        assert_eq!((word.load(SeqCst), reserved(word)), (0, 0));
        assert_queued_matches(word, &table);
    });
}

/// A blocking acquirer of 2 permits parks while two releases of 1 happen,
/// FAIR (handed over) and UNFAIR (woken to compete): no lost wake-up (an
/// acquirer left parked deadlocks the model), and it ends with both.
#[test]
fn semaphore_weighted_park_vs_releases() {
    for sem in [&FAIR, &UNFAIR] {
        model("semaphore_weighted_park_vs_releases", move || {
            let (word, table) = semaphore(0);
            let acquirer = {
                let table = table.clone();
                loom::thread::spawn(move || acquire_n(sem, &table, word, 2, false))
            };
            let releaser = {
                let table = table.clone();
                loom::thread::spawn(move || assert_eq!(release(sem, &table, word, 1), 0))
            };
            assert_eq!(release(sem, &table, word, 1), 0);
            releaser.join().unwrap();
            assert_eq!(acquirer.join().unwrap(), Taken::Acquired);
            assert_eq!((word.load(SeqCst), reserved(word)), (0, 0));
            assert_queued_matches(word, &table);
        });
    }
}

// --- the condition variable protocol (futex_core::condvar) -------------------
//
// JavaScript's notify is one fetch-add of 2 on the word, then the addon only
// if the value it replaced had `W` (`js_notify`: a compare-exchange while
// `W` is clear, `RawCondvar::signal` once it is set). Invariants: no wake-up lost (a sleeper
// left parked deadlocks the model), and `W` is set exactly when waiters are
// queued.

use futex_core::condvar::{Waited, W as WAITING};
use futex_core::{presence_slot, RawCondvar};

static CONDVAR: RawCondvar = RawCondvar;

/// What `notifyOne` / `notifyAll` do in JavaScript: with `W` clear, one
/// compare-exchange bumps the sequence; finding `W`, `signal` bumps and
/// wakes in one call.
fn js_notify(table: &WaitTable, word: &'static AtomicU32, count: usize) -> usize {
    loop {
        let v = word.load(SeqCst);
        if v & WAITING != 0 {
            // SAFETY: the word is leaked: alive for the whole model.
            return unsafe { CONDVAR.signal(table, key(word), count) };
        }
        if word.compare_exchange(v, v.wrapping_add(2), SeqCst, SeqCst).is_ok() {
            return 0;
        }
    }
}

fn assert_waiting_matches(word: &AtomicU32, table: &WaitTable) {
    let queued = table.len(key_of(word)) > 0;
    assert_eq!(word.load(SeqCst) & WAITING != 0, queued, "word {:#x}, queued {queued}", word.load(SeqCst));
}

/// A sleeper read the sequence and sleeps while a notifier bumps it and
/// notifies: either the sleeper saw the new sequence, or the notify saw `W`
/// and woke it. Never left asleep.
#[test]
fn condvar_wait_vs_notify() {
    for count in [1, usize::MAX] {
        model("condvar_wait_vs_notify", move || {
            let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(4)));
            let table = Arc::new(WaitTable::new(1));
            let seen = word.load(SeqCst);
            let notifier = {
                let table = table.clone();
                loom::thread::spawn(move || js_notify(&table, word, count))
            };
            // SAFETY: the word is leaked.
            let r = unsafe { CONDVAR.wait(&table, key(word), seen, None, Duration::from_secs(1), || false) };
            let woken = notifier.join().unwrap();
            assert_eq!(r, Waited::Ok);
            assert!(woken <= 1);
            assert_eq!(word.load(SeqCst) & !WAITING, 6);
            assert_waiting_matches(word, &table);
        });
    }
}

/// A notify races the deadline of an async sleeper: exactly one of them
/// takes it out of the queue, and `W` ends clear.
#[test]
fn condvar_notify_vs_timeout() {
    model("condvar_notify_vs_timeout", || {
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let table = Arc::new(WaitTable::new(1));
        let owner = Recorder::new();
        // SAFETY: the word is leaked.
        let ticket = unsafe { CONDVAR.wait_async(&table, key(word), 0, owner.clone(), next_token) }.expect("queued");
        let notifier = {
            let table = table.clone();
            loom::thread::spawn(move || js_notify(&table, word, 1))
        };
        let timed_out = table.timeout(ticket);
        let woken = notifier.join().unwrap();
        assert!((woken == 1) != timed_out);
        assert_eq!(owner.log().len(), 1);
        assert_waiting_matches(word, &table);
    });
}

/// A notifyOne reaches a blocking sleeper whose thread is stopping: it
/// passes the wake-up on to the sleeper behind it, which must not be left
/// asleep.
#[test]
fn condvar_notify_to_a_stopping_sleeper_is_passed_on() {
    model("condvar_notify_to_a_stopping_sleeper_is_passed_on", || {
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let table = Arc::new(WaitTable::new(1));
        let sleeper = |stopping: bool, table: Arc<WaitTable>| {
            loom::thread::spawn(move || {
                // SAFETY: the word is leaked.
                unsafe { CONDVAR.wait(&table, key(word), 0, None, Duration::from_secs(1), || stopping) }
            })
        };
        let stopping = sleeper(true, table.clone());
        while table.len(key(word)) < 1 {
            loom::thread::yield_now();
        }
        let behind = sleeper(false, table.clone());
        while table.len(key(word)) < 2 {
            loom::thread::yield_now();
        }
        assert_eq!(js_notify(&table, word, 1), 1);
        assert_eq!(stopping.join().unwrap(), Waited::Interrupted);
        assert_eq!(behind.join().unwrap(), Waited::Ok);
        assert_waiting_matches(word, &table);
    });
}

/// A leaked condition word whose presence slot is not the lock word's. The
/// slot comes from the address, which differs between loom's runs of one
/// model: where the two shared one in some runs only, `notify`'s presence
/// check took other branches in those runs, and loom, which replays a run's
/// prefix to explore the next, failed on its own (an internal assertion),
/// depending on the heap's layout left by the tests run before.
fn cond_word(lock_word: &AtomicU32) -> &'static AtomicU32 {
    loop {
        let cond: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        if presence_slot(key_of(cond)) != presence_slot(key_of(lock_word)) {
            return cond;
        }
    }
}

/// A blocking `Condition.wait` with its relock (`RawCondvar::wait_relock`)
/// by `me`, with the lock at `lock_word`, stopping once `stop` is set. If it
/// returns holding the lock, it does what a caller's predicate loop does
/// with a wake-up it used: unlocks and notifies once more, so that the
/// other sleeper is never left waiting for a notify nobody makes.
fn sleeper_relocking(
    table: Arc<WaitTable>,
    cond: &'static AtomicU32,
    lock: &'static Lock,
    lock_word: &'static AtomicU32,
    me: u32,
    stop: Option<&'static loom::sync::atomic::AtomicBool>,
) -> loom::thread::JoinHandle<(Waited, Acquired)> {
    loom::thread::spawn(move || {
        let interrupted = || stop.is_some_and(|s| s.load(SeqCst));
        // SAFETY: the words are leaked.
        let r = unsafe {
            CONDVAR.wait_relock(
                &table,
                key(cond),
                0,
                None,
                lock,
                key(lock_word),
                me,
                Duration::from_secs(1),
                interrupted,
            )
        };
        if matches!(r.1, Acquired::Acquired | Acquired::OwnerDied) {
            assert_eq!(lock_word.load(SeqCst) >> 1, me, "the word names the thread told it holds the lock");
            js_unlock(lock, &table, lock_word, me);
            js_notify(&table, cond, 1);
        }
        r
    })
}

/// JavaScript's unlock: the uncontended compare-exchange, else the addon.
fn js_unlock(lock: &'static Lock, table: &WaitTable, word: &'static AtomicU32, me: u32) {
    if word.compare_exchange(me << 1, 0, SeqCst, SeqCst).is_err() {
        assert!(unlock(lock, table, word, me));
    }
}

/// Two sleepers, A (oldest) and B; the notifier holds the lock, wakes one,
/// and A's thread is stopped while A's relock waits for that lock. The
/// wake-up A took must reach B, which must not be left asleep; A holds
/// nothing, and both words' waiters bits are exact.
#[test]
fn condvar_relock_of_a_stopping_sleeper_passes_the_wakeup_on() {
    model("condvar_relock_of_a_stopping_sleeper_passes_the_wakeup_on", || {
        let (lock, lock_word, _, table) = held_by_a(false);
        let cond = cond_word(lock_word);
        let stop: &'static loom::sync::atomic::AtomicBool =
            Box::leak(Box::new(loom::sync::atomic::AtomicBool::new(false)));
        let a = sleeper_relocking(table.clone(), cond, lock, lock_word, B, Some(stop));
        while table.len(key(cond)) < 1 {
            loom::thread::yield_now();
        }
        let b = sleeper_relocking(table.clone(), cond, lock, lock_word, W, None);
        while table.len(key(cond)) < 2 {
            loom::thread::yield_now();
        }
        assert_eq!(js_notify(&table, cond, 1), 1);
        // A, woken, waits for the lock the notifier (thread A = 1) holds.
        while table.len(key(lock_word)) < 1 {
            loom::thread::yield_now();
        }
        stop.store(true, SeqCst);
        js_unlock(lock, &table, lock_word, A);
        assert_eq!(a.join().unwrap(), (Waited::Ok, Acquired::Interrupted));
        assert_eq!(b.join().unwrap(), (Waited::Ok, Acquired::Acquired));
        assert_eq!(lock_word.load(SeqCst), 0);
        assert_waiting_matches(cond, &table);
        assert_c_matches_queue(lock_word, &table);
    });
}

/// The lock is free; A is woken and its thread is stopped at any point of
/// its wake-up and relock (seen by the table as it wakes, by the relock, or
/// only once the relock holds the lock, which is then given back). Either
/// A returns holding the lock (the stop came too late: it used the
/// wake-up, and notifies again), or B gets the wake-up A passed on. B is
/// never left asleep, and nobody is told it holds a lock it does not hold.
#[test]
fn condvar_wakeup_vs_stop_during_the_relock() {
    model("condvar_wakeup_vs_stop_during_the_relock", || {
        let (lock, lock_word, _, table) = held_by_a(false);
        lock_word.store(0, SeqCst);
        let cond = cond_word(lock_word);
        let stop: &'static loom::sync::atomic::AtomicBool =
            Box::leak(Box::new(loom::sync::atomic::AtomicBool::new(false)));
        let a = sleeper_relocking(table.clone(), cond, lock, lock_word, B, Some(stop));
        while table.len(key(cond)) < 1 {
            loom::thread::yield_now();
        }
        let b = sleeper_relocking(table.clone(), cond, lock, lock_word, W, None);
        while table.len(key(cond)) < 2 {
            loom::thread::yield_now();
        }
        assert_eq!(js_notify(&table, cond, 1), 1);
        stop.store(true, SeqCst);
        let (waited, got) = a.join().unwrap();
        assert!(waited == Waited::Interrupted || waited == Waited::Ok, "{waited:?}");
        assert!(matches!(got, Acquired::Acquired | Acquired::Interrupted), "{got:?}");
        assert_eq!(b.join().unwrap(), (Waited::Ok, Acquired::Acquired));
        assert_eq!(lock_word.load(SeqCst), 0);
        assert_waiting_matches(cond, &table);
        assert_c_matches_queue(lock_word, &table);
    });
}

// --- the reader-writer lock protocol (futex_core::rwlock) --------------------
//
// Each model builds a fresh lock (four leaked words and a leaked protocol).
// Owner ids as above: A = 1 holds the lock at the start (as a writer or a
// reader), B and W wait. Invariants checked after every model: no writer
// inside together with anyone (the words name exactly who was told it
// holds the lock), no lost wake-up (loom reports a parked thread left
// behind as a deadlock), and `PARKED` / `DRAINING` set exactly when waiters
// are queued on the key / key + 4.

mod rw {
    use super::*;
    pub use futex_core::lock::Acquired;
    use futex_core::lock::OwnerState;
    use futex_core::rwlock::{self, drain_key, DRAINING, MARK, OWNER_SHIFT, PARKED};
    use futex_core::RawRwLock;
    use loom::sync::atomic::AtomicU32;

    pub type Rw = RawRwLock<Box<dyn Fn(u32) -> OwnerState + Send + Sync>>;

    pub struct Lock {
        pub rw: &'static Rw,
        pub words: &'static [AtomicU32; 4],
        pub dead: &'static AtomicU32,
        pub table: Arc<WaitTable>,
    }

    impl Lock {
        /// `state`: STATE; `slot`: what the first reader slot holds.
        /// A lock that always hands over (`fair`) or never does.
        pub fn new(state: u32, slot: u32) -> Lock {
            Lock::with(state, slot, true)
        }
        pub fn with(state: u32, slot: u32, fair: bool) -> Lock {
            let words: &'static [AtomicU32; 4] = Box::leak(Box::new([
                AtomicU32::new(state),
                AtomicU32::new(slot),
                AtomicU32::new(0),
                AtomicU32::new(0),
            ]));
            let dead: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
            let rw: &'static Rw = Box::leak(Box::new(RawRwLock::new(
                Box::new(move |owner| if dead.load(SeqCst) == owner { OwnerState::Dead } else { OwnerState::Ours })
                    as Box<dyn Fn(u32) -> OwnerState + Send + Sync>,
                if fair { Duration::ZERO } else { Duration::MAX },
            )));
            Lock { rw, words, dead, table: Arc::new(WaitTable::new(1)) }
        }
        pub fn key(&self) -> Key {
            self.words.as_ptr() as Key
        }
        pub fn state(&self) -> u32 {
            self.words[0].load(SeqCst)
        }
        pub fn slots(&self) -> Vec<u32> {
            self.words[1..].iter().map(|s| s.load(SeqCst)).collect()
        }
        pub fn assert_bits_match_queues(&self) {
            let s = self.state();
            assert_eq!(s & PARKED != 0, self.table.len(self.key()) > 0, "PARKED, state {s:#x}");
            assert_eq!(s & DRAINING != 0, self.table.len(drain_key(self.key())) > 0, "DRAINING, state {s:#x}");
        }
        pub fn read_async(&self, me: u32, owner: &Arc<Recorder>) -> Ticket {
            // SAFETY: the words are leaked: alive for the whole model.
            unsafe { self.rw.read_async(&self.table, self.key(), me, owner.clone(), next_token) }
                .expect("a live writer holds the lock: the reader queues")
        }
        pub fn write_blocking(&self, me: u32, pending: bool) -> Acquired {
            // SAFETY: as above.
            unsafe { self.rw.write(&self.table, self.key(), me, pending, None, Duration::from_secs(1), || false) }
        }
        pub fn write_unlock(&self, me: u32) -> bool {
            // SAFETY: as above.
            unsafe { self.rw.write_unlock(&self.table, self.key(), me) }
        }
        /// JavaScript's read unlock: empty the slot; if a draining writer
        /// marked it, empty it marked and wake the writer.
        pub fn read_unlock(&self, me: u32) {
            for s in &self.words[1..] {
                if s.compare_exchange(me, 0, SeqCst, SeqCst).is_ok() {
                    return;
                }
                if s.compare_exchange(me | MARK, 0, SeqCst, SeqCst).is_ok() {
                    // SAFETY: as above.
                    assert!(unsafe { self.rw.read_unlock(&self.table, self.key(), me, true) });
                    return;
                }
            }
            // SAFETY: as above.
            assert!(unsafe { self.rw.read_unlock(&self.table, self.key(), me, false) });
        }
        /// JavaScript's back-out of a slot just claimed: empty it, then look for a draining writer.
        pub fn leave_slot(&self, me: u32) {
            // (A draining writer may have marked it meanwhile. JavaScript's
            // Atomics.store is sequentially consistent; loom's SeqCst store is
            // not modelled as such, a swap is.)
            self.words[1].swap(0, SeqCst);
            // JavaScript's Atomics are sequentially consistent; loom models that through fences.
            loom::sync::atomic::fence(SeqCst);
            if self.state() & DRAINING != 0 {
                // SAFETY: as above.
                assert!(unsafe { self.rw.read_unlock(&self.table, self.key(), me, true) });
            }
        }
        /// JavaScript's read fast path, then the addon (blocking).
        pub fn read_blocking(&self, me: u32) -> Acquired {
            if self.words[1].compare_exchange(0, me, SeqCst, SeqCst).is_ok() {
                loom::sync::atomic::fence(SeqCst);
                if self.state() >> OWNER_SHIFT == 0 {
                    return Acquired::Acquired;
                }
                self.leave_slot(me);
            }
            // SAFETY: as above.
            unsafe { self.rw.read(&self.table, self.key(), me, None, Duration::from_secs(1), || false) }
        }
        /// The thread A ends: recorded dead, then pushed as src/lib.rs does.
        pub fn end_thread_a(&'static self) -> loom::thread::JoinHandle<()> {
            loom::thread::spawn(move || {
                self.dead.store(A, SeqCst);
                self.rw.forget_readers(A);
                self.table.thread_ended(A);
                self.rw.recover(&self.table, A);
            })
        }
    }

    pub fn kind(token: u32) -> u32 {
        rwlock::kind(token)
    }
}

/// A's write unlock races with the deadline of B's queued async read. Exactly
/// one wins: B is handed the read lock (a slot names B, B's outcome says so)
/// or B timed out and the lock is free; `PARKED` ends clear.
#[test]
fn rw_handoff_to_readers_vs_timeout() {
    model("rw_handoff_to_readers_vs_timeout", || {
        let lock: &'static rw::Lock = Box::leak(Box::new(rw::Lock::new(A << 4, 0)));
        let owner = Recorder::new();
        let ticket = lock.read_async(B, &owner);
        let unlocker = loom::thread::spawn(move || assert!(lock.write_unlock(A)));
        let timed_out = lock.table.timeout(ticket);
        unlocker.join().unwrap();
        match unparked(&owner) {
            Some(token) => {
                assert!(!timed_out);
                assert_eq!(rw::kind(token), HANDOFF);
                assert_eq!(lock.slots(), [B, 0, 0]);
            }
            None => {
                assert!(timed_out);
                assert_eq!(lock.slots(), [0, 0, 0]);
            }
        }
        assert_eq!(lock.state() >> 4, 0, "the writer's place is free");
        lock.assert_bits_match_queues();
    });
}

/// A reader leaves (fast path, then a wake-up if a writer drains) while W,
/// which took the writer's place with A inside, parks until the readers
/// leave. W always gets in (a lost wake-up would leave it parked: loom's
/// deadlock), and only once A is out.
#[test]
fn rw_last_reader_leaves_vs_writer_drains() {
    model("rw_last_reader_leaves_vs_writer_drains", || {
        let lock: &'static rw::Lock = Box::leak(Box::new(rw::Lock::new(W << 4, A)));
        let reader = loom::thread::spawn(move || lock.read_unlock(A));
        assert_eq!(lock.write_blocking(W, true), Acquired::Acquired);
        assert_eq!(lock.slots(), [0, 0, 0], "the writer got in with a reader inside");
        reader.join().unwrap();
        assert_eq!(lock.state(), W << 4);
        lock.assert_bits_match_queues();
    });
}

/// A reader's fast path (slot, then STATE) races with a writer's fast path
/// (STATE, then the slots), each then leaving. Never both inside.
#[test]
fn rw_reader_vs_writer_fast_paths() {
    model("rw_reader_vs_writer_fast_paths", || {
        let lock: &'static rw::Lock = Box::leak(Box::new(rw::Lock::new(0, 0)));
        let inside: &'static loom::sync::atomic::AtomicU32 = Box::leak(Box::new(loom::sync::atomic::AtomicU32::new(0)));
        let reader = loom::thread::spawn(move || {
            assert_eq!(lock.read_blocking(B), Acquired::Acquired);
            assert_eq!(inside.fetch_add(1, SeqCst), 0, "a reader got in with the writer");
            inside.fetch_sub(1, SeqCst);
            lock.read_unlock(B);
        });
        let pending = lock.words[0].compare_exchange(0, W << 4, SeqCst, SeqCst).is_ok();
        loom::sync::atomic::fence(SeqCst);
        if !(pending && lock.slots() == [0, 0, 0]) {
            assert_eq!(lock.write_blocking(W, pending), Acquired::Acquired);
        }
        assert_eq!(inside.fetch_add(1, SeqCst), 0, "the writer got in with a reader");
        inside.fetch_sub(1, SeqCst);
        assert!(lock.write_unlock(W) || lock.state() == 0);
        reader.join().unwrap();
        assert_eq!(lock.slots(), [0, 0, 0]);
        assert_eq!(lock.state(), 0);
    });
}

/// A dies holding the write lock while B's async read is queued and
/// cancelled. B is either cancelled (then the next locker is told) or
/// handed the read lock and told; the news is never lost nor told twice.
#[test]
fn rw_writer_death_vs_cancel() {
    model("rw_writer_death_vs_cancel", || {
        let lock: &'static rw::Lock = Box::leak(Box::new(rw::Lock::new(A << 4, 0)));
        let owner = Recorder::new();
        let ticket = lock.read_async(B, &owner);
        let teardown = lock.end_thread_a();
        let cancelled = lock.table.cancel(ticket);
        teardown.join().unwrap();
        let told = match unparked(&owner) {
            Some(token) => {
                assert!(!cancelled);
                assert_eq!(lock.slots(), [B, 0, 0]);
                rw::kind(token) == OWNER_DIED
            }
            None => {
                assert!(cancelled);
                false
            }
        };
        lock.assert_bits_match_queues();
        // The next writer takes over whatever is left and is told if B was not.
        if told {
            lock.read_unlock(B);
        }
        let next = lock.write_blocking(W, false);
        assert_eq!(next == Acquired::OwnerDied, !told, "the death is told exactly once");
    });
}

/// A reader in a slot dies while W waits for it: the death is pushed and W
/// gets in, whichever comes first.
#[test]
fn rw_reader_death_vs_drain() {
    model("rw_reader_death_vs_drain", || {
        let lock: &'static rw::Lock = Box::leak(Box::new(rw::Lock::new(W << 4, A)));
        let teardown = lock.end_thread_a();
        assert_eq!(lock.write_blocking(W, true), Acquired::Acquired);
        teardown.join().unwrap();
        assert_eq!(lock.state(), W << 4);
        lock.assert_bits_match_queues();
    });
}

/// A's write unlock hands the read lock to B's queued async read while B's
/// thread is torn down (its owner dies, then its waiters are removed). A
/// read lock that reached a dead owner is given back by the protocol's
/// `lost`, as the resolver does: nothing stays held, nothing stays queued.
#[test]
fn rw_handoff_vs_reader_thread_teardown() {
    model("rw_handoff_vs_reader_thread_teardown", || {
        let lock: &'static rw::Lock = Box::leak(Box::new(rw::Lock::new(A << 4, 0)));
        let owner = Recorder::new();
        lock.read_async(B, &owner);
        let teardown = {
            let (owner, table) = (owner.clone(), lock.table.clone());
            loom::thread::spawn(move || {
                owner.dead.store(true, SeqCst);
                let as_owner: Arc<dyn Owner> = owner.clone();
                table.remove_owner(&as_owner, |_| {});
            })
        };
        assert!(lock.write_unlock(A));
        teardown.join().unwrap();
        // The resolver of a closed thread passes what reached it on.
        if let [(_, AsyncOutcome::Unparked(token, protocol))] = owner.log().as_slice() {
            protocol.lost(&lock.table, lock.key(), *token);
        }
        assert_eq!(lock.slots(), [0, 0, 0]);
        assert_eq!(lock.state(), 0);
        lock.assert_bits_match_queues();
    });
}

/// Without handoff (young waiters): A's write unlock releases the lock and
/// wakes B's queued async read to compete, racing with B's deadline. B is
/// woken to retry (and its retry gets the read lock) or timed out; either
/// way nothing stays queued and `PARKED` ends clear.
#[test]
fn rw_release_to_compete_vs_timeout() {
    model("rw_release_to_compete_vs_timeout", || {
        let lock: &'static rw::Lock = Box::leak(Box::new(rw::Lock::with(A << 4, 0, false)));
        let owner = Recorder::new();
        let ticket = lock.read_async(B, &owner);
        let unlocker = loom::thread::spawn(move || assert!(lock.write_unlock(A)));
        let timed_out = lock.table.timeout(ticket);
        unlocker.join().unwrap();
        assert_eq!(lock.state(), 0);
        lock.assert_bits_match_queues();
        if let Some(token) = unparked(&owner) {
            assert!(!timed_out);
            assert_eq!(rw::kind(token), futex_core::rwlock::TOKEN_RETRY);
            assert_eq!(lock.slots(), [0, 0, 0], "a wake-up to compete hands nothing over");
            // SAFETY: the words are leaked: alive for the whole model.
            let again = unsafe { lock.rw.read_async(&lock.table, lock.key(), B, owner.clone(), next_token) };
            assert!(matches!(again, Err(Acquired::Acquired)));
            assert_eq!(lock.slots(), [B, 0, 0]);
        } else {
            assert!(timed_out);
        }
    });
}

// --- the events (futex_core::event) ------------------------------------------
//
// The auto-reset event: a signal and a queued waiter never coexist, `Q` is
// set exactly when waiters are queued, and every set either releases one
// waiter or leaves the word set (once). The manual-reset event: a waiter
// that set `W` and sleeps is woken by the set that finds `W`; one that
// compares after the set sees it.

use futex_core::event::{manual_set, AUTO_Q, AUTO_SET, MANUAL_SET, MANUAL_W, TOKEN_SIGNAL};
use futex_core::RawAutoEvent;

static AUTO: RawAutoEvent = RawAutoEvent;

fn assert_q_matches(word: &AtomicU32, table: &WaitTable) {
    let queued = table.len(key_of(word)) > 0;
    let w = word.load(SeqCst);
    assert_eq!(w & AUTO_Q != 0, queued, "word {w:#x}, queued {queued}");
    assert!(!(w & AUTO_Q != 0 && w & AUTO_SET != 0), "a signal next to a queued waiter: {w:#x}");
}

/// What `AutoResetEvent.set()` does in JavaScript: `0 → SET`, a set event
/// stays, and with `Q` the addon's set.
fn js_auto_set(table: &WaitTable, word: &'static AtomicU32) {
    loop {
        let v = word.load(SeqCst);
        if v == 0 {
            if word.compare_exchange(0, AUTO_SET, SeqCst, SeqCst).is_ok() {
                return;
            }
            continue;
        }
        if v & AUTO_Q != 0 {
            // SAFETY: the word is leaked: alive for the whole model.
            unsafe { AUTO.set(table, key(word)) };
        }
        return;
    }
}

fn auto_wait_blocking(table: &WaitTable, word: &'static AtomicU32, stopping: bool) -> Waited {
    if word.compare_exchange(AUTO_SET, 0, SeqCst, SeqCst).is_ok() {
        return Waited::Ok;
    }
    // SAFETY: the word is leaked.
    unsafe { AUTO.wait(table, key(word), None, Duration::from_secs(1), || stopping) }
}

/// A blocking waiter parks while a set comes from JavaScript: it takes the
/// signal (left in the word, or handed over), never sleeps past it, and
/// nothing is left over.
#[test]
fn auto_park_vs_set() {
    model("auto_park_vs_set", || {
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let table = Arc::new(WaitTable::new(1));
        let setter = {
            let table = table.clone();
            loom::thread::spawn(move || js_auto_set(&table, word))
        };
        assert_eq!(auto_wait_blocking(&table, word, false), Waited::Ok);
        setter.join().unwrap();
        assert_eq!(word.load(SeqCst), 0, "the one signal was taken");
        assert_q_matches(word, &table);
    });
}

/// A set races the deadline of a queued async waiter: it is handed the
/// signal or it timed out and the word holds the signal. Never both,
/// never neither.
#[test]
fn auto_set_vs_timeout() {
    model("auto_set_vs_timeout", || {
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let table = Arc::new(WaitTable::new(1));
        let owner = Recorder::new();
        // SAFETY: the word is leaked.
        let ticket = unsafe { AUTO.wait_async(&table, key(word), owner.clone(), next_token) }.expect("queued");
        let setter = {
            let table = table.clone();
            loom::thread::spawn(move || js_auto_set(&table, word))
        };
        let timed_out = table.timeout(ticket);
        setter.join().unwrap();
        let handed = unparked(&owner) == Some(TOKEN_SIGNAL);
        assert!(handed != timed_out, "handed {handed}, timed out {timed_out}");
        assert_eq!(u32::from(handed) + (word.load(SeqCst) & AUTO_SET), 1, "a set lost or doubled");
        assert_q_matches(word, &table);
    });
}

/// A set races an abort: a cancelled waiter took nothing and the word holds
/// the signal; one cancelled too late holds it.
#[test]
fn auto_set_vs_cancel() {
    model("auto_set_vs_cancel", || {
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let table = Arc::new(WaitTable::new(1));
        let owner = Recorder::new();
        // SAFETY: the word is leaked.
        let ticket = unsafe { AUTO.wait_async(&table, key(word), owner.clone(), next_token) }.expect("queued");
        let setter = {
            let table = table.clone();
            loom::thread::spawn(move || js_auto_set(&table, word))
        };
        let cancelled = table.cancel(ticket);
        setter.join().unwrap();
        assert!((unparked(&owner) == Some(TOKEN_SIGNAL)) != cancelled);
        assert_eq!(u32::from(!cancelled) + (word.load(SeqCst) & AUTO_SET), 1, "a set lost or doubled");
        assert_q_matches(word, &table);
    });
}

/// Two sets, two queued waiters, one of them on a thread that is stopping:
/// the stopping one passes what it was handed on. Both sets are accounted
/// for: the other waiter is released, and the word holds at most one.
#[test]
fn auto_signal_to_a_stopping_waiter_is_passed_on() {
    model("auto_signal_to_a_stopping_waiter_is_passed_on", || {
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let table = Arc::new(WaitTable::new(1));
        let waiter = |stopping: bool, table: Arc<WaitTable>| {
            loom::thread::spawn(move || auto_wait_blocking(&table, word, stopping))
        };
        let stopping = waiter(true, table.clone());
        while table.len(key(word)) < 1 {
            loom::thread::yield_now();
        }
        let behind = waiter(false, table.clone());
        while table.len(key(word)) < 2 {
            loom::thread::yield_now();
        }
        js_auto_set(&table, word);
        assert_eq!(stopping.join().unwrap(), Waited::Interrupted);
        assert_eq!(behind.join().unwrap(), Waited::Ok, "the signal was passed on");
        assert_eq!(word.load(SeqCst), 0);
        assert_q_matches(word, &table);
    });
}

/// What a `ManualResetEvent` waiter does in JavaScript, having read the word
/// as `start`: sets `W` on a value that is not set, and sleeps while the word
/// holds it, until the counter moved on from `start`'s.
fn js_manual_wait(table: &WaitTable, word: &'static AtomicU32, start: u32) {
    let mut v = start;
    let counter = v >> 1;
    loop {
        if v & MANUAL_SET != 0 || v >> 1 != counter {
            return;
        }
        if v & MANUAL_W == 0 {
            if let Err(now) = word.compare_exchange(v, v | MANUAL_W, SeqCst, SeqCst) {
                v = now;
                continue;
            }
            v |= MANUAL_W;
        }
        let expected = v;
        table.wait(key(word), || word.load(SeqCst) == expected, None, Duration::from_secs(1), || false);
        v = word.load(SeqCst);
    }
}

/// What `ManualResetEvent.set()` does in JavaScript: one compare-exchange
/// while `W` is clear, `manual_set` once it is set.
fn js_manual_set(table: &WaitTable, word: &'static AtomicU32) {
    loop {
        let v = word.load(SeqCst);
        if v & MANUAL_SET != 0 {
            return;
        }
        if v & MANUAL_W != 0 {
            // SAFETY: the word is leaked.
            unsafe { manual_set(table, key(word)) };
            return;
        }
        if word.compare_exchange(v, v + 2, SeqCst, SeqCst).is_ok() {
            return;
        }
    }
}

/// A waiter that began before two sets race, one of them followed by a
/// reset (`set(); reset()`): the sets take the JavaScript path or the
/// addon's depending on `W`, and the waiter never sleeps past them (a lost
/// wake-up deadlocks the model). One waiter: with two blocking waiters woken
/// through `notify`'s presence check, loom reports a false deadlock (it does
/// so for plain wait / store / notify as well).
#[test]
fn manual_waiter_vs_two_sets_and_a_reset() {
    model("manual_waiter_vs_two_sets_and_a_reset", || {
        let word: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let table = Arc::new(WaitTable::new(1));
        // The waiter reads the word before the sets start: one that begins
        // after the reset rightly sleeps until the next set.
        let start = word.load(SeqCst);
        let setter = {
            let table = table.clone();
            loom::thread::spawn(move || js_manual_set(&table, word))
        };
        let resetter = {
            let table = table.clone();
            loom::thread::spawn(move || {
                js_manual_set(&table, word);
                // reset(): an odd counter moves on to even.
                let v = word.load(SeqCst);
                if v & MANUAL_SET != 0 {
                    let _ = word.compare_exchange(v, v + 2, SeqCst, SeqCst);
                }
            })
        };
        js_manual_wait(&table, word, start);
        setter.join().unwrap();
        resetter.join().unwrap();
        assert_eq!(table.len(key(word)), 0);
    });
}

// --- the Channel's room check (lib/channel.js) -------------------------------
//
// The Channel is JavaScript, so this models its steps over the table: STATE
// is one 64-bit word (lo = WRITE | CLOSED | RW, hi = READ | SW), NEED a
// 32-bit word beside it, every `Atomics` operation SeqCst. A 32-bit
// `Atomics.compareExchange` of one half is a compare-exchange of the 64-bit
// word that keeps the other half (retried while only the other half moves);
// `compareExchangeNotify` and the sleep are the addon's own calls
// (`compare_exchange_notify_u64`, `WaitTable::wait` comparing the 64-bit word
// under the bucket lock).
//
// The scene: a 16-byte ring holding 12 bytes (room 4); a sender of a 12-byte
// frame is asleep (NEED = 12, SW set; as a thread it would only look again
// and sleep again: there is never room for it here); a sender of an 8-byte
// frame finds no room and goes to sleep while one receive of a 4-byte frame
// leaves room 8: enough for it, not for NEED's 12. Nobody receives after
// that, so that receive must wake the small sender if it is asleep, or it
// sleeps for ever with room for its message. The model checks exactly that:
// once the receive is done, the small sender is not queued on STATE. (It
// cannot queue later: the receive changed STATE after any value it found no
// room in. If it did, it would never be woken, and loom would report the
// deadlock.) A second scene has both senders as threads under SEND.
//
// Each protocol is modelled twice: as it was (the receive that keeps SW
// returns at once: loom finds the small sender stranded), and as fixed (NEED
// read again after that compare-exchange: none stranded). Both scenes pass
// with LOOM_MAX_PREEMPTIONS=3 as well; from 4 on, loom itself trips in the
// two-sender scene: its `unpark` makes a thread blocked on a loom mutex
// runnable ("expected to be able to acquire lock").
//
// Loom treats a SeqCst load as an acquire, which may still return an initial
// value (not a SeqCst store) after a newer SeqCst store to the same word:
// the words are therefore made with `new(0)` and given their first values by
// SeqCst stores, as the Channel's constructor does with `Atomics.store`.

mod channel {
    use super::*;
    use futex_core::wake::compare_exchange_notify_u64;
    use loom::sync::atomic::{AtomicU32, AtomicU64};
    use std::sync::atomic::AtomicUsize;

    const CAPACITY: u32 = 16;
    const POS: u32 = 0x3fff_ffff;
    const CLOSED: u32 = 0x4000_0000;
    /// RW in lo, SW in hi.
    const SLEEPERS: u32 = 0x8000_0000;

    /// The scene: WRITE and READ at the start, the frame the receive takes,
    /// the frame the sender asleep from the start waits to send, and the
    /// small sender's.
    const WRITE: u32 = 12;
    const READ: u32 = 0;
    const TAKEN: u32 = 4;
    const BIG: u32 = 12;
    const SMALL: u32 = 8;

    fn lo_of(v: u64) -> u32 {
        v as u32
    }
    fn hi_of(v: u64) -> u32 {
        (v >> 32) as u32
    }
    fn join(lo: u32, hi: u32) -> u64 {
        (hi as u64) << 32 | lo as u64
    }
    /// `capacity − inUse(w, r)`: positions run over [0, 2·CAPACITY).
    fn room(w: u32, r: u32) -> u32 {
        CAPACITY - if w >= r { w - r } else { w + 2 * CAPACITY - r }
    }
    fn advance(p: u32, n: u32) -> u32 {
        (p + n) % (2 * CAPACITY)
    }

    struct Ring {
        state: AtomicU64,
        need: AtomicU32,
        table: WaitTable,
        /// The SEND lock (an `AsyncLock` in the Channel; here only its
        /// mutual exclusion matters).
        send: loom::sync::Mutex<()>,
    }

    /// A ring holding 12 bytes: WRITE 12, READ 0, and `sw`, `need` as given.
    /// The words are made with 0 and given their values by SeqCst stores
    /// (see above). Dropped at the end of each run, as the other models'
    /// tables are: nothing is leaked.
    fn ring(sw: u32, need: u32) -> Arc<Ring> {
        let ring = Arc::new(Ring {
            state: AtomicU64::new(0),
            need: AtomicU32::new(0),
            table: WaitTable::new(1),
            send: loom::sync::Mutex::new(()),
        });
        ring.state.store(join(WRITE, READ | sw), SeqCst);
        ring.need.store(need, SeqCst);
        ring
    }

    impl Ring {
        fn key(&self) -> Key {
            &self.state as *const AtomicU64 as Key
        }
        fn lo(&self) -> u32 {
            lo_of(self.state.load(SeqCst))
        }
        fn hi(&self) -> u32 {
            hi_of(self.state.load(SeqCst))
        }
        /// `Atomics.compareExchange` of the half at `shift` (0: lo, 32: hi),
        /// `expected → new`: whether it took.
        fn cas_half(&self, shift: u32, expected: u32, new: u32) -> bool {
            let half = |v: u64| (v >> shift) as u32;
            let other = |v: u64| v & !(0xffff_ffff_u64 << shift);
            self.state
                .fetch_update(SeqCst, SeqCst, |v| (half(v) == expected).then(|| other(v) | (new as u64) << shift))
                .is_ok()
        }
    }

    /// A send of a `size`-byte frame, as `blocking` runs it (without the
    /// spin before the first sleep: one more look at STATE): under SEND,
    /// `put`, and while there is no room `prepareSleep`; then a sleep on
    /// STATE without the lock, and the same again. Whether it was sent (else
    /// the channel was closed).
    fn js_send(ring: &Ring, size: u32) -> bool {
        loop {
            let v = {
                let _send = ring.send.lock().unwrap();
                loop {
                    // put
                    let lo = ring.lo();
                    if lo & CLOSED != 0 {
                        return false;
                    }
                    let w = lo & POS;
                    if room(w, ring.hi() & POS) >= size {
                        // commitWrite: no receiver sleeps in these scenes (RW
                        // clear), so one compare-exchange of lo.
                        assert_eq!(lo & SLEEPERS, 0);
                        if ring.cas_half(0, lo, advance(w, size)) {
                            return true;
                        }
                        continue;
                    }
                    // prepareSleep
                    let need = ring.need.load(SeqCst);
                    if need == 0 || size < need {
                        ring.need.store(size, SeqCst);
                    }
                    let word = ring.hi();
                    if word & SLEEPERS == 0 && !ring.cas_half(32, word, word | SLEEPERS) {
                        continue;
                    }
                    let v = ring.state.load(SeqCst);
                    let (lo, hi) = (lo_of(v), hi_of(v));
                    if hi & SLEEPERS != 0 && lo & CLOSED == 0 && room(lo & POS, hi & POS) < size {
                        break v;
                    }
                }
            };
            // futex.wait(STATE, v): queued only if STATE still holds v.
            ring.table.wait(ring.key(), || ring.state.load(SeqCst) == v, None, Duration::from_secs(1), || false);
        }
    }

    /// `close()`: CLOSED set and both sleepers bits cleared, every sleeper
    /// woken, in one call.
    fn js_close(ring: &Ring) {
        loop {
            let old = ring.state.load(SeqCst);
            let new = join((lo_of(old) | CLOSED) & !SLEEPERS, hi_of(old) & !SLEEPERS);
            // SAFETY: the caller's `Arc` keeps the word alive.
            if unsafe { compare_exchange_notify_u64(&ring.table, ring.key(), old, new, usize::MAX) } == old {
                return;
            }
        }
    }

    /// A receive of the frame at READ (`take`), committed by `commitRead`.
    /// `fixed`: after a compare-exchange that keeps SW, NEED is read again,
    /// and if it changed the receive goes round (lib/channel.js since the
    /// fix).
    fn js_recv(ring: &Ring, fixed: bool) {
        // take
        let mut hi = ring.hi();
        let r = hi & POS;
        assert_ne!(r, ring.lo() & POS, "the ring holds a frame");
        let next = advance(r, TAKEN);
        // commitRead
        loop {
            if hi & SLEEPERS == 0 {
                if ring.cas_half(32, hi, next) {
                    return;
                }
                hi = ring.hi();
                continue;
            }
            let need = ring.need.load(SeqCst);
            if need != 0 {
                let left = room(ring.lo() & POS, next);
                if left < need {
                    if ring.cas_half(32, hi, next | SLEEPERS) {
                        // A sender stores its NEED before it reads the STATE
                        // it sleeps on: a NEED stored since the load above
                        // belongs to a sender that may have read STATE before
                        // this compare-exchange and sleep on it with room now.
                        // Then round again: the next pass finds the new NEED
                        // (and wakes the senders if it fits).
                        if !fixed || ring.need.load(SeqCst) == need {
                            return;
                        }
                    }
                    hi = ring.hi();
                    continue;
                }
            }
            // Cleared first: stopped before the call, the next receive finds
            // SW with NEED 0 and wakes the senders.
            ring.need.store(0, SeqCst);
            let old = ring.state.load(SeqCst);
            if hi_of(old) == hi {
                let new = join(lo_of(old), next);
                // SAFETY: the caller's `Arc` keeps the word alive.
                if unsafe { compare_exchange_notify_u64(&ring.table, ring.key(), old, new, usize::MAX) } == old {
                    return;
                }
            }
            hi = ring.hi();
        }
    }

    /// Runs the scene over every interleaving; returns in how many the small
    /// sender was left asleep with room for its frame once the receive was
    /// done.
    fn room_check(name: &str, fixed: bool) -> usize {
        let runs = Arc::new(AtomicUsize::new(0));
        let stranded = Arc::new(AtomicUsize::new(0));
        let (counter, strandings) = (runs.clone(), stranded.clone());
        loom::model(move || {
            counter.fetch_add(1, SeqCst);
            // The sender of BIG asleep: NEED noted, SW set.
            let ring = ring(SLEEPERS, BIG);
            let sender = {
                let ring = ring.clone();
                thread::spawn(move || assert!(js_send(&ring, SMALL)))
            };
            js_recv(&ring, fixed);
            // Nobody receives again: a sender queued now is stranded (the
            // count is taken under the bucket lock). Woken here so that the
            // run ends.
            if ring.table.len(ring.key()) != 0 {
                assert!(room(ring.lo() & POS, ring.hi() & POS) >= SMALL, "asleep without room is no loss");
                strandings.fetch_add(1, SeqCst);
                ring.table.notify(ring.key(), usize::MAX);
            }
            sender.join().unwrap();
            // The message went in after the one left in the ring.
            assert_eq!(ring.lo() & POS, advance(WRITE, SMALL));
        });
        let (runs, stranded) = (runs.load(SeqCst), stranded.load(SeqCst));
        eprintln!("{name}: {runs} interleavings, the small sender stranded in {stranded}");
        assert!(runs > 1, "{name}: loom explored a single interleaving");
        stranded
    }

    /// The protocol before the fix: the receive reads NEED (12) and finds
    /// the room it leaves (8) too little; meanwhile the small sender notes
    /// NEED = 8, finds SW set and no room, and sleeps on STATE; the receive
    /// keeps SW without a wake-up. Loom must find that interleaving.
    #[test]
    fn channel_room_check_strands_a_smaller_sender() {
        let stranded = room_check("channel_room_check_strands_a_smaller_sender", false);
        assert!(stranded > 0, "loom did not find the stranded sender");
    }

    /// With NEED read again after the compare-exchange that keeps SW: the
    /// sender notes NEED before it reads the STATE it sleeps on, so if that
    /// read came before the compare-exchange, the second read of NEED sees
    /// the sender's frame, and the receive wakes it.
    #[test]
    fn channel_room_check_reads_need_again() {
        let stranded = room_check("channel_room_check_reads_need_again", true);
        assert_eq!(stranded, 0, "a sender was left asleep with room for its frame");
    }

    /// Both senders as threads, starting together on a ring with no room
    /// for either (so the big one may also note NEED before or after the
    /// small one, or be woken and look again), and the one receive. The
    /// small sender must send: the model joins it, so one stranded asleep
    /// is a deadlock loom reports. Then `close()` ends the big one, which
    /// never has room.
    fn two_senders(name: &str, fixed: bool) {
        model(name, move || {
            let ring = ring(0, 0);
            let big = {
                let ring = ring.clone();
                thread::spawn(move || js_send(&ring, BIG))
            };
            let small = {
                let ring = ring.clone();
                thread::spawn(move || js_send(&ring, SMALL))
            };
            js_recv(&ring, fixed);
            assert!(small.join().unwrap());
            js_close(&ring);
            assert!(!big.join().unwrap());
        });
    }

    /// The old protocol deadlocks: the big sender asleep first, then the
    /// interleaving above.
    #[test]
    #[should_panic(expected = "deadlock")]
    fn channel_two_senders_strand_the_smaller() {
        two_senders("channel_two_senders_strand_the_smaller", false);
    }

    /// The fixed protocol: the small sender always sends.
    #[test]
    fn channel_two_senders_read_need_again() {
        two_senders("channel_two_senders_read_need_again", true);
    }
}

/// The queues of shared memory (`futex_core::shared`), with threads standing
/// in for processes. Under loom a futex sleep is a yield (a spurious return
/// the callers absorb), so a lost wake-up shows as a waiter that never
/// returns, which loom reports when it runs out of branches.
mod shared_queues {
    use super::model;
    use futex_core::shared::{model_block, Layout, Os, Queues};
    use futex_core::WaitResult;
    use loom::sync::atomic::{AtomicBool, AtomicU32};
    use loom::sync::Arc;
    use loom::thread;
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::Duration;

    struct ModelOs {
        alive: Arc<[AtomicBool; 2]>,
    }

    impl Os for ModelOs {
        fn wait(&self, _word: &AtomicU32, _expected: u32, _timeout: Option<Duration>) {
            thread::yield_now();
        }
        fn wake(&self, _word: &AtomicU32, _count: u32) {}
        fn slot_alive(&self, slot: u32) -> bool {
            self.alive[slot as usize].load(SeqCst)
        }
    }

    const LAYOUT: Layout = Layout { slots: 2, buckets: 1, records: 2, threads: 1 };

    /// Two "processes" over one block, each with its own slot.
    fn processes() -> (Queues<ModelOs>, Queues<ModelOs>) {
        let (a, b, _) = processes_with_liveness();
        (a, b)
    }

    fn processes_with_liveness() -> (Queues<ModelOs>, Queues<ModelOs>, Arc<[AtomicBool; 2]>) {
        let base = model_block(LAYOUT, 64);
        let alive = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let attach = |i: u32| {
            let mut q = unsafe { Queues::attach(base, LAYOUT, ModelOs { alive: alive.clone() }) };
            let a = alive.clone();
            q.claim_slot(|s| s == i && a[s as usize].compare_exchange(false, true, SeqCst, SeqCst).is_ok(), 1).unwrap();
            q
        };
        (attach(0), attach(1), alive)
    }

    /// A value changed before notify: the waiter either sees it under the
    /// bucket lock or is queued when notify looks; never both missed.
    #[test]
    fn no_lost_wake_up_across_processes() {
        model("shared: no lost wake-up", || {
            let (a, b) = processes();
            let value = Arc::new(AtomicU32::new(0));
            let v = value.clone();
            let waiter = thread::spawn(move || {
                let r = a.wait(8, || v.load(SeqCst) == 0, None, Duration::from_millis(1), || false).unwrap();
                assert!(matches!(r, WaitResult::Ok | WaitResult::NotEqual), "{r:?}");
                (r, a.records_in_use())
            });
            value.store(1, SeqCst);
            let n = b.notify(8, 1);
            let (r, _) = waiter.join().unwrap();
            assert_eq!(n == 1, r == WaitResult::Ok, "notify counted {n}, the waiter saw {r:?}");
            assert_eq!(b.records_in_use(), 0);
        });
    }

    /// A queued record taken back (a timeout, a cancel) while another
    /// process notifies: exactly one of them has it.
    #[test]
    fn take_and_notify_decide_once() {
        model("shared: take or notify", || {
            let (a, b) = processes();
            let r = a.alloc().unwrap();
            assert!(a.enqueue(r, 4, true, || true));
            let notifier = thread::spawn(move || (b.notify(4, 1), b));
            let taken = a.take(r);
            let (n, b) = notifier.join().unwrap();
            assert_eq!(taken, n == 0, "taken {taken}, notified {n}");
            if !taken {
                assert!(a.take_notified(r));
            }
            a.free(r);
            assert_eq!(b.records_in_use(), 0);
        });
    }

    /// A waiter's process dies while a notify walks the queue: the notify
    /// either counts it (it looked alive then) or frees its record, and
    /// never leaves the record linked and the count wrong.
    #[test]
    fn a_dead_waiter_is_never_counted_after_it_is_seen_dead() {
        model("shared: dead waiter", || {
            let (a, b, alive) = processes_with_liveness();
            let r = a.alloc().unwrap();
            assert!(a.enqueue(r, 4, false, || true));
            // What the kernel does when process `a` dies: its lock goes.
            let killer = thread::spawn(move || alive[0].store(false, SeqCst));
            let n = b.notify(4, 1);
            killer.join().unwrap();
            assert!(n <= 1);
            assert_eq!(b.len(4), 0, "nothing stays queued");
            assert_eq!(b.notify(4, 1), 0);
            drop(a);
        });
    }

    /// A watching waiter reads the count of ends, then what it depends on
    /// (here: whether the other process's thread still holds its owner
    /// id), then waits comparing the count. The thread gives its id back
    /// meanwhile (an end): the waiter either sees the id free, or is
    /// stopped by the count, or is queued and woken; it never sleeps
    /// through the end (under loom a sleep that nobody ends never returns).
    #[test]
    fn an_end_never_slips_past_a_watching_waiter() {
        model("shared: end vs watching waiter", || {
            let (a, b) = processes();
            let owner = b.claim_thread().unwrap();
            let a = Arc::new(a);
            let a2 = a.clone();
            let waiter = thread::spawn(move || {
                let seen = a2.ends();
                if !a2.owner_alive(owner) {
                    return None;
                }
                Some(a2.wait_watching(8, || a2.ends() == seen, None, Duration::from_millis(1), || false).unwrap())
            });
            b.release_thread(owner);
            let r = waiter.join().unwrap();
            assert!(matches!(r, None | Some(WaitResult::Ok) | Some(WaitResult::NotEqual)), "{r:?}");
            assert_eq!(a.records_in_use(), 0);
        });
    }
}
