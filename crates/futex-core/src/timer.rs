//! One background thread that fires deadlines, in deadline order.
//!
//! Async waiters with a finite timeout register `(deadline, item)` here; when
//! the deadline passes the thread calls the timer's callback with the item
//! (for the wait table: [`WaitTable::timeout`](crate::WaitTable::timeout),
//! which does nothing if a notify got there first).
//!
//! Entries of waiters that were settled early (notified, cancelled, or their
//! thread ended) are not removed on the spot, which keeps notify free of timer
//! work. Their owners report them with [`Timer::forget`]; once reported
//! entries make up half of the heap (or all of it), the timer thread
//! compacts it, keeping only the items its `is_live` callback still accepts.
//! So the heap holds at most about twice as many entries as there are
//! pending deadlines (plus a small constant), instead of every early-settled
//! entry until its deadline.
//!
//! The thread is started on first use and sleeps on a condvar until the
//! earliest deadline; scheduling an earlier deadline, or enough reports to
//! compact, wakes it. A panic in a callback is caught and reported on
//! stderr: it costs that one item, never the thread, so later deadlines of
//! the process still fire.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Heaps smaller than this are never compacted: not worth a pass.
const COMPACT_MIN: usize = 64;

struct State<T> {
    /// Pending deadlines, earliest on top.
    heap: BinaryHeap<Reverse<(Instant, T)>>,
    /// Entries reported dead by [`Timer::forget`] since the last compaction
    /// (an estimate: some may already have fired).
    forgotten: usize,
    /// A compaction was asked for and has not run yet.
    compact: bool,
    started: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

type Callbacks<T> = (Box<dyn Fn(T) + Send + Sync>, Box<dyn Fn(&T) -> bool + Send + Sync>);

/// A deadline thread calling `fire(item)` for each item whose deadline passed.
pub struct Timer<T: Ord + Send + 'static> {
    shared: Arc<Shared<T>>,
    /// `fire(item)`, and `is_live(item)`: whether an entry still has work to
    /// do (false lets compaction drop it; `fire` must do nothing for it).
    callbacks: Arc<Callbacks<T>>,
}

impl<T: Ord + Send + 'static> Timer<T> {
    /// A timer whose entries are never reported dead (never compacted).
    pub fn new(fire: impl Fn(T) + Send + Sync + 'static) -> Self {
        Self::with_liveness(fire, |_| true)
    }

    /// A timer that compacts its heap with `is_live` once enough entries were
    /// reported dead with [`Timer::forget`].
    pub fn with_liveness(
        fire: impl Fn(T) + Send + Sync + 'static,
        is_live: impl Fn(&T) -> bool + Send + Sync + 'static,
    ) -> Self {
        Timer {
            shared: Arc::new(Shared {
                state: Mutex::new(State { heap: BinaryHeap::new(), forgotten: 0, compact: false, started: false }),
                wake: Condvar::new(),
            }),
            callbacks: Arc::new((Box::new(fire), Box::new(is_live))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls `fire(item)` on the timer thread once `deadline` has passed.
    pub fn schedule(&self, deadline: Instant, item: T) {
        let mut state = self.lock();
        let earliest = state.heap.peek().is_none_or(|Reverse((d, _))| deadline < *d);
        state.heap.push(Reverse((deadline, item)));
        if !state.started {
            state.started = true;
            let shared = self.shared.clone();
            let callbacks = self.callbacks.clone();
            std::thread::Builder::new()
                .name("shared-futex-timer".into())
                .spawn(move || run(&shared, &callbacks))
                .expect("cannot start the timer thread");
        } else if earliest {
            self.shared.wake.notify_one();
        }
    }

    /// Reports that `n` scheduled entries no longer have work to do (their
    /// waiters were settled another way). Wakes the timer thread to compact
    /// the heap once such entries are half of it.
    pub fn forget(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut state = self.lock();
        state.forgotten += n;
        if !state.compact && wants_compaction(&state) {
            state.compact = true;
            self.shared.wake.notify_one();
        }
    }

    /// How many deadlines are in the heap (including ones whose waiter was
    /// already settled and that were not compacted away yet).
    pub fn pending(&self) -> usize {
        self.lock().heap.len()
    }
}

/// Half the heap reported dead, or all of it (however small).
fn wants_compaction<T>(state: &State<T>) -> bool {
    let len = state.heap.len();
    len > 0 && (state.forgotten >= len || (len >= COMPACT_MIN && state.forgotten * 2 >= len))
}

/// Runs `f`, reporting a panic on stderr instead of unwinding into the
/// timer thread. Returns `None` if it panicked.
fn guarded<R>(what: &str, f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            eprintln!("shared-futex: the timer's {what} callback panicked ({msg}); the timer goes on");
            None
        }
    }
}

fn run<T: Ord>(shared: &Shared<T>, callbacks: &Callbacks<T>) {
    let (fire, is_live) = (&callbacks.0, &callbacks.1);
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if state.compact {
            // Filter without holding the lock: `is_live` takes bucket locks,
            // and JS threads scheduling deadlines should not wait for a pass
            // over the whole heap. Entries scheduled meanwhile are kept.
            let heap = std::mem::take(&mut state.heap);
            state.forgotten = 0;
            state.compact = false;
            drop(state);
            let kept: Vec<_> = heap
                .into_vec()
                .into_iter()
                .filter(|Reverse((_, item))| guarded("is_live", || is_live(item)).unwrap_or(true))
                .collect();
            state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            state.heap.extend(kept);
            // Reports that arrived during the pass may already call for another.
            state.compact = wants_compaction(&state);
            continue;
        }
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(Reverse((deadline, _))) = state.heap.peek() {
            if *deadline > now {
                break;
            }
            let Reverse((_, item)) = state.heap.pop().expect("peeked");
            due.push(item);
        }
        if !due.is_empty() {
            // Fire without holding the lock: `fire` takes bucket locks and may
            // call back into `schedule` or `forget` indirectly.
            drop(state);
            for item in due {
                guarded("fire", || fire(item));
            }
            state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        state = match state.heap.peek() {
            Some(Reverse((deadline, _))) => {
                let wait = deadline.saturating_duration_since(now);
                shared.wake.wait_timeout(state, wait).unwrap_or_else(|e| e.into_inner()).0
            }
            None => shared.wake.wait(state).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn fires_in_deadline_order_and_not_early() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send((i, Instant::now())).unwrap());
        let start = Instant::now();
        timer.schedule(start + Duration::from_millis(60), 3);
        timer.schedule(start + Duration::from_millis(20), 1);
        timer.schedule(start + Duration::from_millis(40), 2);
        let mut got = Vec::new();
        for _ in 0..3 {
            let (i, at) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            assert!(at >= start + Duration::from_millis(20 * i as u64), "item {i} fired early");
            got.push(i);
        }
        assert_eq!(got, vec![1, 2, 3]);
        assert_eq!(timer.pending(), 0);
    }

    #[test]
    fn an_earlier_deadline_wakes_the_sleeping_thread() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
        timer.schedule(Instant::now() + Duration::from_secs(3600), 0);
        // Let the thread go to sleep until that one.
        std::thread::sleep(Duration::from_millis(50));
        timer.schedule(Instant::now() + Duration::from_millis(10), 1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
    }

    #[test]
    fn a_deadline_in_the_past_fires_at_once() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
        timer.schedule(Instant::now() - Duration::from_secs(1), 7);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(7));
    }

    #[test]
    fn a_panicking_callback_does_not_stop_the_timer() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| {
            if i == 1 {
                panic!("item {i}");
            }
            tx.lock().unwrap().send(i).unwrap();
        });
        let start = Instant::now();
        timer.schedule(start + Duration::from_millis(5), 1);
        timer.schedule(start + Duration::from_millis(10), 2);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2), "the timer thread died with the panic");
        timer.schedule(Instant::now(), 3);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(3));
    }

    #[test]
    fn forgotten_entries_are_compacted_away() {
        use std::collections::HashSet;
        let live: Arc<Mutex<HashSet<u32>>> = Arc::new(Mutex::new((0..1000).collect()));
        let check = live.clone();
        let timer = Timer::with_liveness(|_: u32| {}, move |i| check.lock().unwrap().contains(i));
        let far = Instant::now() + Duration::from_secs(3600);
        for i in 0..1000 {
            timer.schedule(far, i);
        }
        // 900 waiters settle early: their entries must not stay for an hour.
        live.lock().unwrap().retain(|i| *i >= 900);
        timer.forget(900);
        let deadline = Instant::now() + Duration::from_secs(10);
        while timer.pending() != 100 {
            assert!(Instant::now() < deadline, "still {} entries", timer.pending());
            std::thread::yield_now();
        }
    }
}
