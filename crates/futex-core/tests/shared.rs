//! The shared queues (`futex_core::shared`) with threads standing in for
//! processes: each "process" is a `Queues` of its own over one block, with
//! its own slot, and can be declared dead at any point (as the kernel's
//! record lock would say once the process is gone).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futex_core::shared::{self, Layout, Os, Queues};
use futex_core::WaitResult;

/// A futex emulated with one mutex and condvar (a change is made before
/// `wake`, and `wait` compares under the mutex, so no wake-up is lost), and
/// slot liveness from flags.
#[derive(Clone)]
struct TestOs {
    park: Arc<(Mutex<()>, Condvar)>,
    alive: Arc<Vec<AtomicBool>>,
    /// Bells rung (`ring_bell`'s arguments), and whether ringing succeeds.
    rung: Arc<Mutex<Vec<(u64, u32)>>>,
    bells_answer: Arc<AtomicBool>,
}

impl Os for TestOs {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let guard = self.park.0.lock().unwrap();
        if word.load(SeqCst) == expected {
            let _ = self.park.1.wait_timeout(guard, timeout.unwrap_or(Duration::from_millis(100))).unwrap();
        }
    }
    fn wake(&self, _word: &AtomicU32, _count: u32) {
        let _guard = self.park.0.lock().unwrap();
        self.park.1.notify_all();
    }
    fn slot_alive(&self, slot: u32) -> bool {
        self.alive[slot as usize].load(SeqCst)
    }
    fn ring_bell(&self, bells: u64, bell: u32) -> bool {
        self.rung.lock().unwrap().push((bells, bell));
        self.bells_answer.load(SeqCst)
    }
}

struct Block {
    base: *mut u8,
    layout: Layout,
    os: TestOs,
}
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Block {
    fn new(layout: Layout) -> Arc<Block> {
        let bytes = layout.bytes();
        let base = unsafe { std::alloc::alloc_zeroed(std::alloc::Layout::from_size_align(bytes, 4096).unwrap()) };
        unsafe { shared::init(base, layout, 4096, b"test 1") };
        let os = TestOs {
            park: Arc::new((Mutex::new(()), Condvar::new())),
            alive: Arc::new((0..layout.slots).map(|_| AtomicBool::new(false)).collect()),
            rung: Arc::default(),
            bells_answer: Arc::new(AtomicBool::new(true)),
        };
        Arc::new(Block { base, layout, os })
    }

    /// A new "process": claims the first slot whose process is not alive.
    fn process(self: &Arc<Block>) -> Queues<TestOs> {
        let mut q = unsafe { Queues::attach(self.base, self.layout, self.os.clone()) };
        let alive = self.os.alive.clone();
        q.claim_slot(|i| alive[i as usize].compare_exchange(false, true, SeqCst, SeqCst).is_ok(), 1).unwrap();
        q
    }

    fn kill(&self, q: &Queues<TestOs>) {
        self.os.alive[q.my_slot() as usize].store(false, SeqCst);
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        // The "user part": a separate static array stands in for it.
        &WORDS[offset]
    }
}

static WORDS: [AtomicU32; 16] = [const { AtomicU32::new(0) }; 16];

fn small() -> Layout {
    Layout { slots: 8, buckets: 4, records: 64, threads: 8 }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn header_and_layout() {
    let layout = Layout::default();
    assert!(layout.is_valid());
    assert_eq!(layout.bytes() % 4096, 0);
    assert!(!Layout { slots: 0, ..layout }.is_valid());
    assert!(!Layout { buckets: 3, ..layout }.is_valid());
    let block = Block::new(small());
    let q = block.process();
    assert_eq!(q.header().magic.load(SeqCst), shared::MAGIC);
    assert_eq!(shared::build_of(q.header()), b"test 1");
    assert_eq!(q.header().user_bytes.load(SeqCst), 4096);
}

#[test]
fn not_equal_queues_nothing() {
    let block = Block::new(small());
    let q = block.process();
    let r = q.wait(0, || false, None, Duration::from_millis(50), || false).unwrap();
    assert_eq!(r, WaitResult::NotEqual);
    assert_eq!(q.records_in_use(), 0);
}

#[test]
fn timeout_leaves_nothing() {
    let block = Block::new(small());
    let q = block.process();
    let at = Instant::now() + Duration::from_millis(30);
    let r = q.wait(4, || true, Some(at), Duration::from_millis(50), || false).unwrap();
    assert_eq!(r, WaitResult::TimedOut);
    assert!(Instant::now() >= at);
    assert_eq!(q.records_in_use(), 0);
    assert_eq!(q.len(4), 0);
}

/// Waiters of three processes on one offset, queued in a known order, are
/// woken oldest first, by exact counts, by a fourth process.
#[test]
fn fifo_and_exact_counts_across_processes() {
    let block = Block::new(small());
    let order = Arc::new(Mutex::new(Vec::new()));
    let notifier = block.process();
    let mut handles = Vec::new();
    for i in 0..6u32 {
        let q = block.process();
        let order = order.clone();
        handles.push(thread::spawn(move || {
            let r = q.wait(8, || block_word(8) == 0, None, Duration::from_millis(50), || false).unwrap();
            assert_eq!(r, WaitResult::Ok);
            order.lock().unwrap().push(i);
        }));
        // Queue in order i.
        wait_until("the waiter to queue", || notifier.len(8) == i as usize + 1);
    }
    assert_eq!(notifier.notify(8, 2), 2);
    wait_until("two to wake", || order.lock().unwrap().len() == 2);
    assert_eq!(notifier.len(8), 4);
    assert_eq!(notifier.notify(8, usize::MAX), 4);
    for h in handles {
        h.join().unwrap();
    }
    let order = order.lock().unwrap();
    let mut first: Vec<u32> = order[..2].to_vec();
    first.sort();
    assert_eq!(first, vec![0, 1]);
    assert_eq!(notifier.notify(8, 1), 0);
    assert_eq!(notifier.records_in_use(), 0);
}

fn block_word(offset: usize) -> u32 {
    WORDS[offset].load(SeqCst)
}

/// A waiter whose process died is never counted by notify, and the wake-up
/// goes to the next live waiter instead.
#[test]
fn dead_waiters_are_not_counted() {
    let block = Block::new(small());
    let notifier = block.process();
    // A "process" that queues a record and dies without ever running again.
    let dead = block.process();
    let r = dead.alloc().unwrap();
    assert!(dead.enqueue(r, 12, false, || true));
    let live = block.process();
    let woke = Arc::new(AtomicUsize::new(0));
    let w = woke.clone();
    let h = thread::spawn(move || {
        let r = live.wait(12, || true, None, Duration::from_millis(50), || false).unwrap();
        assert_eq!(r, WaitResult::Ok);
        w.fetch_add(1, SeqCst);
    });
    wait_until("both to queue", || notifier.len(12) == 2);
    block.kill(&dead);
    assert_eq!(notifier.len(12), 1);
    assert_eq!(notifier.notify(12, 1), 1);
    h.join().unwrap();
    assert_eq!(woke.load(SeqCst), 1);
    assert_eq!(notifier.records_in_use(), 0, "the dead process's record was freed");
}

/// A process that dies holding a bucket's lock, at the worst point, is
/// replaced by the next locker, which rebuilds the list from the records:
/// the live waiters queued before stay queued, in order.
#[test]
fn a_lock_holder_that_dies_is_taken_over() {
    let block = Block::new(small());
    let notifier = block.process();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..3u32 {
        let q = block.process();
        let order = order.clone();
        handles.push(thread::spawn(move || {
            assert_eq!(q.wait(3, || true, None, Duration::from_millis(50), || false).unwrap(), WaitResult::Ok);
            order.lock().unwrap().push(i);
        }));
        wait_until("the waiter to queue", || notifier.len(3) == i as usize + 1);
    }
    let dying = block.process();
    dying.lock_and_abandon(3);
    block.kill(&dying);
    let start = Instant::now();
    assert_eq!(notifier.notify(3, 1), 1);
    assert!(start.elapsed() < Duration::from_secs(2));
    wait_until("the first to wake", || order.lock().unwrap().len() == 1);
    assert_eq!(order.lock().unwrap()[0], 0, "the oldest is still first after the rebuild");
    assert_eq!(notifier.notify(3, 5), 2);
    for h in handles {
        h.join().unwrap();
    }
}

/// A slot freed by a dead process is claimed again with a new generation;
/// what the dead one left is purged, and its old tag stays dead.
#[test]
fn slots_are_reused_with_new_generations() {
    let block = Block::new(Layout { slots: 2, buckets: 4, records: 8, threads: 2 });
    let a = block.process();
    let r = a.alloc().unwrap();
    assert!(a.enqueue(r, 5, false, || true));
    let b = block.process();
    block.kill(&a);
    let a2 = block.process();
    assert_eq!(a2.my_slot(), a.my_slot());
    assert_eq!(b.len(5), 0);
    assert_eq!(b.records_in_use(), 0);
    assert_eq!(b.notify(5, 1), 0);
}

#[test]
fn records_run_out_cleanly() {
    let block = Block::new(Layout { slots: 2, buckets: 4, records: 2, threads: 2 });
    let q = block.process();
    let r1 = q.alloc().unwrap();
    let r2 = q.alloc().unwrap();
    assert_eq!(q.alloc(), None);
    assert_eq!(q.wait(0, || true, None, Duration::from_millis(10), || false), Err(shared::Full::Records));
    q.free(r1);
    q.free(r2);
    assert!(q.alloc().is_some());
}

/// An async record: notify marks it and rings its process's doorbell; the
/// process claims the outcome exactly once, and a take after that fails.
#[test]
fn async_records_ring_the_doorbell() {
    let block = Block::new(small());
    let a = block.process();
    let b = block.process();
    let r = a.alloc().unwrap();
    assert!(a.enqueue(r, 7, true, || true));
    let before = a.doorbell().load(SeqCst);
    assert_eq!(b.notify(7, 1), 1);
    assert_ne!(a.doorbell().load(SeqCst), before);
    assert!(a.is_notified(r));
    assert!(!a.take(r));
    assert!(a.take_notified(r));
    assert!(!a.take_notified(r));
    a.free(r);
    // Taken back before a notify: not counted.
    let r = a.alloc().unwrap();
    assert!(a.enqueue(r, 7, true, || true));
    assert!(a.take(r));
    a.free(r);
    assert_eq!(b.notify(7, 1), 0);
}

/// A record that names a bell of a process that named its bells has that
/// bell rung by another process's notify, not the doorbell; the doorbell
/// stays for everything else: a bell that cannot be rung, the notifier's own
/// process, a record with no bell, a process with no bells.
#[test]
fn async_records_ring_their_bell_or_else_the_doorbell() {
    let block = Block::new(small());
    let a = block.process();
    let b = block.process();
    let rung = || std::mem::take(&mut *block.os.rung.lock().unwrap());
    let queue = |q: &Queues<TestOs>, bell: u32| {
        let r = q.alloc().unwrap();
        if bell != 0 {
            q.set_bell(r, bell);
        }
        assert!(q.enqueue(r, 7, true, || true));
        r
    };
    let settle = |q: &Queues<TestOs>, r: u32| {
        assert!(q.take_notified(r));
        q.free(r);
    };
    a.set_bells(0x1234_5678_9abc);

    // Rung directly: the bell, once per (process, bell), never the doorbell.
    let (r1, r2, r3) = (queue(&a, 5), queue(&a, 5), queue(&a, 6));
    let before = a.doorbell().load(SeqCst);
    assert_eq!(b.notify(7, 3), 3);
    assert_eq!(rung(), vec![(0x1234_5678_9abc, 5), (0x1234_5678_9abc, 6)]);
    assert_eq!(a.doorbell().load(SeqCst), before);
    for r in [r1, r2, r3] {
        settle(&a, r);
    }

    // A bell that cannot be rung: the doorbell instead.
    block.os.bells_answer.store(false, SeqCst);
    let r = queue(&a, 5);
    assert_eq!(b.notify(7, 1), 1);
    assert_eq!(rung(), vec![(0x1234_5678_9abc, 5)]);
    assert_ne!(a.doorbell().load(SeqCst), before);
    settle(&a, r);
    block.os.bells_answer.store(true, SeqCst);

    // The notifier's own process: the doorbell, which its notify watches.
    let r = queue(&a, 5);
    let before = a.doorbell().load(SeqCst);
    assert_eq!(a.notify(7, 1), 1);
    assert!(rung().is_empty());
    assert_ne!(a.doorbell().load(SeqCst), before);
    settle(&a, r);

    // A record reused without a bell: the doorbell (alloc clears the bell).
    let r = queue(&a, 0);
    let before = a.doorbell().load(SeqCst);
    assert_eq!(b.notify(7, 1), 1);
    assert!(rung().is_empty());
    assert_ne!(a.doorbell().load(SeqCst), before);
    settle(&a, r);

    // A process whose bells are not named: the doorbell.
    let r = queue(&b, 9);
    let before = b.doorbell().load(SeqCst);
    assert_eq!(a.notify(7, 1), 1);
    assert!(rung().is_empty());
    assert_ne!(b.doorbell().load(SeqCst), before);
    settle(&b, r);

    // A slot claimed again forgets the bells of its last process.
    block.kill(&a);
    let c = block.process();
    assert_eq!(c.my_slot(), a.my_slot());
    let r = queue(&c, 5);
    assert_eq!(b.notify(7, 1), 1);
    assert!(rung().is_empty());
    settle(&c, r);
}

/// Interrupted after being notified: the wake-up goes to the next waiter.
#[test]
fn an_interrupted_waiter_passes_its_wake_up_on() {
    let block = Block::new(small());
    let notifier = block.process();
    let first = block.process();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let gate = Arc::new(AtomicBool::new(false));
    let g = gate.clone();
    let h1 = thread::spawn(move || {
        // Sleeps through its notify (the test holds it), then is told to stop.
        first.wait(
            9,
            || true,
            None,
            Duration::from_millis(5),
            || {
                while !g.load(SeqCst) {
                    thread::yield_now();
                }
                s.load(SeqCst)
            },
        )
    });
    wait_until("the first to queue", || notifier.len(9) == 1);
    let second = block.process();
    let h2 = thread::spawn(move || second.wait(9, || true, None, Duration::from_millis(50), || false));
    wait_until("the second to queue", || notifier.len(9) == 2);
    stop.store(true, SeqCst);
    assert_eq!(notifier.notify(9, 1), 1);
    gate.store(true, SeqCst);
    let r1 = h1.join().unwrap().unwrap();
    assert_eq!(r1, WaitResult::Interrupted);
    assert_eq!(h2.join().unwrap().unwrap(), WaitResult::Ok);
}

/// Many processes' threads wait and notify on a few offsets with every
/// kind of exit; at the end every waiter got exactly one outcome, wake-ups
/// counted match waiters woken, and no record is left.
#[test]
fn stress_counts_match() {
    let block = Block::new(Layout { slots: 16, buckets: 2, records: 256, threads: 4 });
    let woken = Arc::new(AtomicUsize::new(0));
    let counted = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut waiters = Vec::new();
    for t in 0..6 {
        let q = block.process();
        let woken = woken.clone();
        let done = done.clone();
        waiters.push(thread::spawn(move || {
            let mut i = 0u32;
            while !done.load(SeqCst) {
                i += 1;
                let key = (i + t) % 3;
                let at = Instant::now() + Duration::from_micros(200 + (i % 7) as u64 * 100);
                match q.wait(key, || true, Some(at), Duration::from_millis(5), || false).unwrap() {
                    WaitResult::Ok => {
                        woken.fetch_add(1, SeqCst);
                    }
                    WaitResult::TimedOut => {}
                    other => panic!("{other:?}"),
                }
            }
        }));
    }
    let mut notifiers = Vec::new();
    for _ in 0..2 {
        let q = block.process();
        let counted = counted.clone();
        let done = done.clone();
        notifiers.push(thread::spawn(move || {
            let mut i = 0u32;
            while !done.load(SeqCst) {
                i += 1;
                counted.fetch_add(q.notify(i % 3, 1 + (i % 2) as usize), SeqCst);
                thread::yield_now();
            }
        }));
    }
    thread::sleep(Duration::from_millis(1500));
    done.store(true, SeqCst);
    for h in notifiers {
        h.join().unwrap();
    }
    // Wake whoever is still queued.
    let last = block.process();
    for _ in 0..50 {
        for k in 0..3 {
            counted.fetch_add(last.notify(k, usize::MAX), SeqCst);
        }
        thread::sleep(Duration::from_millis(2));
    }
    for h in waiters {
        h.join().unwrap();
    }
    assert!(woken.load(SeqCst) > 0);
    assert_eq!(woken.load(SeqCst), counted.load(SeqCst));
    assert_eq!(last.records_in_use(), 0);
    let _ = block.word(0);
}

/// Owner ids of threads: alive while claimed by a live process, dead once
/// released or once the process dies, and a reclaimed slot gives a new id.
#[test]
fn thread_owners() {
    let block = Block::new(Layout { slots: 2, buckets: 4, records: 8, threads: 2 });
    let a = block.process();
    let b = block.process();
    let t1 = a.claim_thread().unwrap();
    let t2 = a.claim_thread().unwrap();
    assert_ne!(t1, 0);
    assert!(t1 < 1 << 30 && t2 < 1 << 30);
    assert_eq!(b.claim_thread(), None, "both slots are held by a live process");
    assert!(b.owner_alive(t1) && b.owner_alive(t2));
    assert!(!b.owner_alive(0));
    a.release_thread(t1);
    assert!(!b.owner_alive(t1));
    let t3 = b.claim_thread().unwrap();
    assert_ne!(t3, t1, "a reclaimed slot has a new generation");
    assert!(a.owner_alive(t3));
    block.kill(&a);
    assert!(!b.owner_alive(t2), "its process died");
    let t4 = b.claim_thread().unwrap();
    assert!(b.owner_alive(t4) && !b.owner_alive(t2));
}

/// A dead process's queued records are taken back by the next search for a
/// free record: its waiters never use the block's records up.
#[test]
fn a_dead_process_never_uses_the_records_up() {
    let block = Block::new(Layout { slots: 2, buckets: 4, records: 2, threads: 2 });
    let dead = block.process();
    for key in [4, 8] {
        let r = dead.alloc().unwrap();
        assert!(dead.enqueue(r, key, true, || true));
    }
    let live = block.process();
    assert_eq!(live.alloc(), None, "both records are queued by a live process");
    block.kill(&dead);
    let r = live.alloc().expect("a dead process's queued record is taken back");
    live.free(r);
    assert_eq!(live.records_in_use(), 1, "the other one stays until a search or a notify reaches it");
    let at = Instant::now() + Duration::from_millis(5);
    assert_eq!(live.wait(4, || true, Some(at), Duration::from_millis(5), || false), Ok(WaitResult::TimedOut));
}

/// An end seen (a thread's owner id given back, a slot claimed again, or a
/// death the embedder learnt of) counts in `ends` and wakes every watching
/// waiter of every process as a notify would, uncounted: sync and async,
/// each through its own path. Plain waiters stay queued; a watching waiter
/// that read the count before the end never sleeps on it.
#[test]
fn an_end_wakes_every_watching_waiter() {
    let block = Block::new(small());
    let a = block.process();
    let b = block.process();
    let a = Arc::new(a);

    // A plain async waiter and a watching async waiter of `a`, both on 7.
    let plain = a.alloc().unwrap();
    assert!(a.enqueue(plain, 7, true, || true));
    let watching = a.alloc().unwrap();
    let ends = a.ends();
    assert!(a.enqueue_watching(watching, 7, true, || a.ends() == ends));
    // A watching sync waiter of `a` on 9, in a thread.
    let sync = {
        let a = a.clone();
        let seen = a.ends();
        thread::spawn(move || a.wait_watching(9, || a.ends() == seen, None, Duration::from_secs(60), || false).unwrap())
    };
    wait_until("the sync waiter queued", || a.len(9) == 1);

    // Another process's thread gives its owner id back: an end.
    let owner = b.claim_thread().unwrap();
    let before = a.doorbell().load(SeqCst);
    b.release_thread(owner);
    assert_eq!(a.ends(), ends + 1);
    assert_eq!(sync.join().unwrap(), WaitResult::Ok);
    assert!(a.is_notified(watching), "the watching async waiter is woken");
    assert_ne!(a.doorbell().load(SeqCst), before, "through its process's doorbell");
    assert!(!a.is_notified(plain), "a plain waiter is not");
    assert_eq!(a.len(7), 1);
    // Uncounted: a notify still finds the plain waiter.
    assert_eq!(b.notify(7, 1), 1);
    for r in [plain, watching] {
        assert!(a.take_notified(r));
        a.free(r);
    }

    // A watching waiter whose count is stale (an end after its look) does
    // not queue; nor is anything woken when nobody watches.
    let stale = a.ends();
    assert_eq!(b.end_seen(), 0);
    let r = a.wait_watching(3, || a.ends() == stale, None, Duration::from_secs(60), || false).unwrap();
    assert_eq!(r, WaitResult::NotEqual);
    assert_eq!(a.records_in_use(), 0);

    // A slot claimed again after its process died counts as an end.
    let seen = a.ends();
    block.kill(&b);
    let c = block.process();
    assert_eq!(c.my_slot(), b.my_slot());
    assert_eq!(a.ends(), seen + 1);
    // A release that is not this process's thread (another generation):
    // nothing, no end.
    let owner = c.claim_thread().unwrap();
    a.release_thread(owner);
    assert_eq!(a.ends(), seen + 1);
}
