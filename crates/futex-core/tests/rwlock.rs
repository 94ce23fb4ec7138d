//! The reader-writer lock protocol (`futex_core::rwlock`) with real threads,
//! through the same fast paths the JavaScript layer takes. Tests synchronise
//! on the table's queues and the words, never on sleeps.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use futex_core::lock::{Acquired, OwnerState};
use futex_core::rwlock::{drain_key, DIED, DRAINING, MARK, OVERFLOW, OWNER_SHIFT, PARKED};
use futex_core::{AsyncOutcome, Key, Owner, RawRwLock, WaitTable};

const HANG: Duration = Duration::from_secs(20);
const SLICE: Duration = Duration::from_secs(1);

/// Owner id 13 is a thread that ended.
const DEAD: u32 = 13;
static DEAD_TOO: AtomicU32 = AtomicU32::new(0);

fn state(owner: u32) -> OwnerState {
    if owner == DEAD || owner == DEAD_TOO.load(SeqCst) {
        OwnerState::Dead
    } else {
        OwnerState::Ours
    }
}

static RW: RawRwLock<fn(u32) -> OwnerState> = RawRwLock::new(state, Duration::from_millis(1));

/// Lets the queued waiters' wait pass the handoff threshold.
fn waited_long_enough() {
    thread::sleep(Duration::from_millis(2));
}

fn lock_words() -> &'static [AtomicU32; 4] {
    Box::leak(Box::new([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]))
}

fn key(w: &'static [AtomicU32; 4]) -> Key {
    w.as_ptr() as Key
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let give_up = Instant::now() + HANG;
    while !cond() {
        assert!(Instant::now() < give_up, "timed out waiting until {what}");
        thread::yield_now();
    }
}

/// JavaScript's read: claim a slot, look at STATE; else the addon.
fn read(table: &WaitTable, w: &'static [AtomicU32; 4], me: u32) -> Acquired {
    for i in 1..4 {
        if w[i].compare_exchange(0, me, SeqCst, SeqCst).is_ok() {
            if w[0].load(SeqCst) & !OVERFLOW == 0 {
                return Acquired::Acquired;
            }
            w[i].store(0, SeqCst);
            if w[0].load(SeqCst) & DRAINING != 0 {
                // SAFETY: the words are leaked: alive for the whole test.
                unsafe { RW.read_unlock(table, key(w), me, true) };
            }
            break;
        }
    }
    // SAFETY: as above.
    unsafe { RW.read(table, key(w), me, None, SLICE, || false) }
}

fn read_unlock(table: &WaitTable, w: &'static [AtomicU32; 4], me: u32) {
    for i in 1..4 {
        if w[i].compare_exchange(me, 0, SeqCst, SeqCst).is_ok() {
            return;
        }
        if w[i].compare_exchange(me | MARK, 0, SeqCst, SeqCst).is_ok() {
            // SAFETY: as above.
            assert!(unsafe { RW.read_unlock(table, key(w), me, true) });
            return;
        }
    }
    // SAFETY: as above.
    assert!(unsafe { RW.read_unlock(table, key(w), me, false) }, "{me} held no read lock");
}

fn write(table: &WaitTable, w: &'static [AtomicU32; 4], me: u32) -> Acquired {
    let pending = w[0].compare_exchange(0, me << OWNER_SHIFT, SeqCst, SeqCst).is_ok();
    if pending && (1..4).all(|i| w[i].load(SeqCst) == 0) {
        return Acquired::Acquired;
    }
    // SAFETY: as above.
    unsafe { RW.write(table, key(w), me, pending, None, SLICE, || false) }
}

fn write_unlock(table: &WaitTable, w: &'static [AtomicU32; 4], me: u32) {
    if w[0].compare_exchange(me << OWNER_SHIFT, 0, SeqCst, SeqCst).is_err() {
        // SAFETY: as above.
        assert!(unsafe { RW.write_unlock(table, key(w), me) }, "{me} did not hold the write lock");
    }
}

#[test]
fn phase_fair_handoff() {
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    assert_eq!(write(&table, w, 1), Acquired::Acquired);
    // A reader, a writer, a reader queue, in that order.
    let spawn_read = |me| {
        let table = table.clone();
        thread::spawn(move || {
            let r = read(&table, w, me);
            (r, me)
        })
    };
    let r2 = spawn_read(2);
    wait_until("reader 2 is queued", || table.len(key(w)) == 1);
    let w3 = {
        let table = table.clone();
        thread::spawn(move || write(&table, w, 3))
    };
    wait_until("writer 3 is queued", || table.len(key(w)) == 2);
    let r4 = spawn_read(4);
    wait_until("reader 4 is queued", || table.len(key(w)) == 3);
    waited_long_enough();
    write_unlock(&table, w, 1);
    // Both readers are in; writer 3 has the writer's place and waits for them.
    assert_eq!(r2.join().unwrap().0, Acquired::Acquired);
    assert_eq!(r4.join().unwrap().0, Acquired::Acquired);
    wait_until("writer 3 waits for the readers", || table.len(drain_key(key(w))) == 1);
    assert_eq!(w[0].load(SeqCst) >> OWNER_SHIFT, 3);
    // A new reader queues behind the waiting writer.
    let r5 = spawn_read(5);
    wait_until("reader 5 is queued", || table.len(key(w)) == 1);
    read_unlock(&table, w, 2);
    assert_ne!(w[0].load(SeqCst) & DRAINING, 0, "writer 3 got in with reader 4 inside");
    read_unlock(&table, w, 4);
    assert_eq!(w3.join().unwrap(), Acquired::Acquired);
    write_unlock(&table, w, 3);
    assert_eq!(r5.join().unwrap().0, Acquired::Acquired);
    read_unlock(&table, w, 5);
    assert_eq!(w[0].load(SeqCst), 0);
    assert!(w[1..].iter().all(|s| s.load(SeqCst) == 0));
}

#[test]
fn readers_past_the_slots_are_registered() {
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    for me in 20..25 {
        assert_eq!(read(&table, w, me), Acquired::Acquired);
    }
    assert_eq!(RW.overflow_readers(key(w)), 2);
    assert_eq!((RW.overflow_reads_of(key(w), 23), RW.overflow_reads_of(key(w), 24)), (1, 1));
    assert_eq!(RW.overflow_reads_of(key(w), 20), 0, "20 reads through a slot");
    assert_ne!(w[0].load(SeqCst) & OVERFLOW, 0);
    let writer = {
        let table = table.clone();
        thread::spawn(move || write(&table, w, 30))
    };
    wait_until("the writer waits for the readers", || table.len(drain_key(key(w))) == 1);
    for me in 20..25 {
        read_unlock(&table, w, me);
    }
    assert_eq!(writer.join().unwrap(), Acquired::Acquired);
    assert_eq!(RW.overflow_readers(key(w)), 0);
    assert_eq!(w[0].load(SeqCst), 30 << OWNER_SHIFT);
    write_unlock(&table, w, 30);
    // SAFETY: as above.
    assert!(!unsafe { RW.read_unlock(&table, key(w), 20, false) }, "no read lock left to release");
}

#[test]
fn a_dead_reader_does_not_block_writers() {
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    let dead = 40;
    assert_eq!(read(&table, w, dead), Acquired::Acquired);
    for me in 41..44 {
        assert_eq!(read(&table, w, me), Acquired::Acquired); // the last one registered
    }
    let writer = {
        let table = table.clone();
        thread::spawn(move || write(&table, w, 50))
    };
    wait_until("the writer waits for the readers", || table.len(drain_key(key(w))) == 1);
    for me in 41..44 {
        read_unlock(&table, w, me);
    }
    assert!(!writer.is_finished());
    // The reader's thread ends: pushed, the writer gets in (not told: a reader changed nothing).
    DEAD_TOO.store(dead, SeqCst);
    RW.forget_readers(dead);
    table.thread_ended(dead);
    RW.recover(&table, dead);
    assert_eq!(writer.join().unwrap(), Acquired::Acquired);
    write_unlock(&table, w, 50);
    assert!(w.iter().all(|s| s.load(SeqCst) == 0));
}

#[test]
fn a_dead_writer_is_reported_once() {
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    w[0].store(DEAD << OWNER_SHIFT, SeqCst);
    // Nobody queued: a reader takes it over and is told; the next is not.
    assert_eq!(read(&table, w, 60), Acquired::OwnerDied);
    assert_eq!(read(&table, w, 61), Acquired::Acquired);
    read_unlock(&table, w, 60);
    read_unlock(&table, w, 61);
    assert_eq!(w[0].load(SeqCst) & DIED, 0);
    // A dead writer with readers and a writer queued: the first reader is told.
    let w = lock_words();
    let me = 70;
    assert_eq!(write(&table, w, me), Acquired::Acquired);
    let handles: Vec<_> = [(71, false), (72, true), (73, false)]
        .into_iter()
        .map(|(id, writer)| {
            let t = table.clone();
            let h = thread::spawn(move || if writer { write(&t, w, id) } else { read(&t, w, id) });
            let n = id as usize - 70;
            wait_until("queued", || table.len(key(w)) == n);
            (id, h)
        })
        .collect();
    waited_long_enough();
    DEAD_TOO.store(me, SeqCst);
    table.thread_ended(me);
    RW.recover(&table, me);
    let mut results = Vec::new();
    for (id, h) in handles {
        if id == 72 {
            wait_until("the writer waits for the readers", || table.len(drain_key(key(w))) == 1);
            read_unlock(&table, w, 71);
            read_unlock(&table, w, 73);
        }
        results.push(h.join().unwrap());
    }
    assert_eq!(results, [Acquired::OwnerDied, Acquired::Acquired, Acquired::Acquired]);
    write_unlock(&table, w, 72);
    assert!(w.iter().all(|s| s.load(SeqCst) == 0));
}

/// A blocking writer that has the writer's place and waits for the readers,
/// in a thread that is asked to stop (`stop`), with `slice` between looks.
fn draining_writer(
    table: &Arc<WaitTable>,
    w: &'static [AtomicU32; 4],
    me: u32,
    slice: Duration,
    stop: &Arc<AtomicBool>,
) -> thread::JoinHandle<Acquired> {
    let (table, stop) = (table.clone(), stop.clone());
    let pending = w[0].compare_exchange(0, me << OWNER_SHIFT, SeqCst, SeqCst).is_ok();
    assert!(pending, "the writer takes the place with a reader inside");
    let h = {
        let table = table.clone();
        // SAFETY: as above.
        thread::spawn(move || unsafe { RW.write(&table, key(w), me, true, None, slice, || stop.load(SeqCst)) })
    };
    wait_until("the writer waits for the readers", || table.len(drain_key(key(w))) == 1);
    h
}

#[test]
fn a_writer_stopped_while_it_waits_for_the_readers_is_reported() {
    // As when a thread ends with an async wait for the readers: it had the
    // writer's place, so the next acquisition is told, once.
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    assert_eq!(read(&table, w, 120), Acquired::Acquired);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = draining_writer(&table, w, 121, Duration::from_millis(5), &stop);
    stop.store(true, SeqCst);
    assert_eq!(writer.join().unwrap(), Acquired::Interrupted);
    assert_eq!(w[0].load(SeqCst) >> OWNER_SHIFT, 0, "the place was given up");
    read_unlock(&table, w, 120);
    assert_eq!(read(&table, w, 122), Acquired::OwnerDied);
    assert_eq!(read(&table, w, 123), Acquired::Acquired);
    read_unlock(&table, w, 122);
    read_unlock(&table, w, 123);
    assert!(w.iter().all(|s| s.load(SeqCst) == 0), "words left {:?}", w);

    // With a reader queued behind it: that reader is let in, and told.
    let w = lock_words();
    assert_eq!(read(&table, w, 124), Acquired::Acquired);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = draining_writer(&table, w, 125, Duration::from_millis(5), &stop);
    let queued = {
        let table = table.clone();
        thread::spawn(move || read(&table, w, 126))
    };
    wait_until("a reader queues behind the writer", || table.len(key(w)) == 1);
    stop.store(true, SeqCst);
    assert_eq!(writer.join().unwrap(), Acquired::Interrupted);
    assert_eq!(queued.join().unwrap(), Acquired::OwnerDied);
    read_unlock(&table, w, 124);
    read_unlock(&table, w, 126);
    assert!(w.iter().all(|s| s.load(SeqCst) == 0), "words left {:?}", w);
}

#[test]
fn a_writer_that_stops_as_the_last_reader_leaves_is_reported() {
    // The last reader's unlock hands the write lock to a writer whose thread
    // is stopping (`Protocol::lost`): it had the writer's place, so the
    // write lock goes on with the news.
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    assert_eq!(read(&table, w, 130), Acquired::Acquired);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = draining_writer(&table, w, 131, HANG, &stop);
    stop.store(true, SeqCst);
    read_unlock(&table, w, 130);
    assert_eq!(writer.join().unwrap(), Acquired::Interrupted);
    assert_eq!(w[0].load(SeqCst) >> OWNER_SHIFT, 0, "the write lock was handed on");
    assert_eq!(read(&table, w, 132), Acquired::OwnerDied);
    read_unlock(&table, w, 132);
    assert!(w.iter().all(|s| s.load(SeqCst) == 0), "words left {:?}", w);
}

/// An async waiter's owner that ignores its outcome.
struct Quiet;

impl Owner for Quiet {
    fn is_alive(&self) -> bool {
        true
    }
    fn complete(&self, _key: Key, _token: u64, _outcome: AsyncOutcome) {}
}

/// A writer's thread ends while a reader is queued behind it, so the lock
/// is listed for recovery; before the recovery runs, that reader leaves and
/// the lock's memory is freed (its last holder let it go). The recovery
/// must not touch that memory, nor make a reference to it, which is
/// undefined behaviour even if nothing is read: a normal run cannot see
/// that, Miri does (`cargo +nightly miri test -p futex-core --test rwlock
/// recover_`).
#[test]
fn recover_touches_no_lock_that_nobody_pins() {
    let table = WaitTable::new(64);
    let ended = 140;
    let words =
        Box::new([AtomicU32::new(ended << OWNER_SHIFT), AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]);
    let key = words.as_ptr() as Key;
    // SAFETY: `words` lives until it is dropped below, after the waiter left.
    let ticket = unsafe { RW.read_async(&table, key, 141, Arc::new(Quiet), || 1) }.expect("the reader queues");
    table.thread_ended(ended);
    assert!(table.cancel(ticket), "the reader was still queued");
    assert_eq!(words[0].load(SeqCst), ended << OWNER_SHIFT, "nobody queued: the lock keeps naming the writer");
    drop(words);
    RW.recover(&table, ended);
    assert_eq!(table.len(key), 0);
}

#[test]
fn timeouts_leave_nothing_behind() {
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    assert_eq!(read(&table, w, 80), Acquired::Acquired);
    // A writer that times out waiting for the reader gives its place up.
    let soon = Some(Instant::now() + Duration::from_millis(20));
    // SAFETY: as above.
    let r = unsafe { RW.write(&table, key(w), 81, false, soon, SLICE, || false) };
    assert_eq!(r, Acquired::TimedOut);
    assert_eq!(w[0].load(SeqCst), 0);
    assert_eq!(read(&table, w, 82), Acquired::Acquired);
    read_unlock(&table, w, 80);
    read_unlock(&table, w, 82);
    // A reader that times out behind a writer leaves PARKED clear.
    assert_eq!(write(&table, w, 83), Acquired::Acquired);
    let soon = Some(Instant::now() + Duration::from_millis(20));
    // SAFETY: as above.
    let r = unsafe { RW.read(&table, key(w), 84, soon, SLICE, || false) };
    assert_eq!(r, Acquired::TimedOut);
    assert_eq!(w[0].load(SeqCst) & PARKED, 0);
    write_unlock(&table, w, 83);
    assert!(w.iter().all(|s| s.load(SeqCst) == 0));
}

#[test]
fn stress_no_writer_overlaps_anything() {
    let table = Arc::new(WaitTable::new(64));
    let w = lock_words();
    let inside: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    const WRITER: u32 = 1 << 20;
    let threads: Vec<_> = (0..6u32)
        .map(|t| {
            let table = table.clone();
            thread::spawn(move || {
                let me = 100 + t;
                for i in 0..3000u32 {
                    if (i + t) % 4 == 0 {
                        write(&table, w, me);
                        assert_eq!(inside.swap(WRITER, SeqCst), 0, "a writer got in with others inside");
                        assert_eq!(inside.swap(0, SeqCst), WRITER);
                        if i % 8 == 0 {
                            // SAFETY: as above.
                            assert!(unsafe { RW.downgrade(&table, key(w), me) });
                            assert!(inside.fetch_add(1, SeqCst) < WRITER);
                            inside.fetch_sub(1, SeqCst);
                            read_unlock(&table, w, me);
                        } else {
                            write_unlock(&table, w, me);
                        }
                    } else {
                        read(&table, w, me);
                        assert!(inside.fetch_add(1, SeqCst) < WRITER, "a reader got in with a writer");
                        inside.fetch_sub(1, SeqCst);
                        read_unlock(&table, w, me);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(w.iter().all(|s| s.load(SeqCst) == 0), "words left {:?}", w);
    assert_eq!(table.len(key(w)) + table.len(drain_key(key(w))), 0);
}
