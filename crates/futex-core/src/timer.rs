//! One background thread that fires deadlines, in deadline order.
//!
//! Async waiters with a finite timeout register `(deadline, item)` here; when
//! the deadline passes the thread calls the timer's callback with the item
//! (for the wait table: [`WaitTable::timeout`](crate::WaitTable::timeout),
//! which does nothing if a notify got there first). Entries are not removed
//! when their waiter is notified early: they stay in the heap until their
//! deadline and then fire harmlessly. That keeps notify free of timer work at
//! the cost of 32 bytes per early-notified waiter until its deadline.
//!
//! The thread is started on first use and sleeps on a condvar until the
//! earliest deadline; scheduling an earlier deadline wakes it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

struct State<T> {
    /// Pending deadlines, earliest on top.
    heap: BinaryHeap<Reverse<(Instant, T)>>,
    started: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

/// A deadline thread calling `fire(item)` for each item whose deadline passed.
pub struct Timer<T: Ord + Send + 'static> {
    shared: Arc<Shared<T>>,
    fire: Arc<dyn Fn(T) + Send + Sync>,
}

impl<T: Ord + Send + 'static> Timer<T> {
    pub fn new(fire: impl Fn(T) + Send + Sync + 'static) -> Self {
        Timer {
            shared: Arc::new(Shared {
                state: Mutex::new(State { heap: BinaryHeap::new(), started: false }),
                wake: Condvar::new(),
            }),
            fire: Arc::new(fire),
        }
    }

    /// Calls `fire(item)` on the timer thread once `deadline` has passed.
    pub fn schedule(&self, deadline: Instant, item: T) {
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let earliest = state.heap.peek().is_none_or(|Reverse((d, _))| deadline < *d);
        state.heap.push(Reverse((deadline, item)));
        if !state.started {
            state.started = true;
            let shared = self.shared.clone();
            let fire = self.fire.clone();
            std::thread::Builder::new()
                .name("shared-futex-timer".into())
                .spawn(move || run(&shared, &*fire))
                .expect("cannot start the timer thread");
        } else if earliest {
            self.shared.wake.notify_one();
        }
    }

    /// How many deadlines are pending (including ones whose waiter was already woken).
    pub fn pending(&self) -> usize {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).heap.len()
    }
}

fn run<T: Ord>(shared: &Shared<T>, fire: &(dyn Fn(T) + Send + Sync)) {
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
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
            // call back into `schedule` indirectly.
            drop(state);
            for item in due {
                fire(item);
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
}
