//! One background thread that fires deadlines, on tokio's timer.
//!
//! Async waiters with a finite timeout register `(deadline, item)` here; when
//! the deadline passes the thread calls the timer's callback with the item
//! (for the wait table: [`WaitTable::timeout`](crate::WaitTable::timeout),
//! which does nothing if a notify got there first).
//!
//! The entries live in a [`DelayQueue`] (a hierarchical timing wheel:
//! insertion and removal in O(1), one tokio sleep for the whole queue) behind
//! a mutex. [`Timer::schedule`] inserts on the caller's thread and
//! [`Timer::cancel`] removes there, so the entry of a waiter settled early is
//! freed at once. The thread runs a current-thread tokio runtime with only its
//! time driver, and one task that takes the due entries out of the queue and
//! fires them; it is woken only when a deadline passes or an earlier one is
//! scheduled, not for every entry.
//!
//! The thread is started by the first [`Timer::schedule`], not before. A
//! panic in the callback is caught and reported on stderr: it costs that one
//! item, never the thread, so later deadlines of the process still fire.
//! The thread never ends and nothing joins it: it neither keeps a process
//! alive nor delays its exit.

use std::collections::HashMap;
use std::future::poll_fn;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::runtime::Handle;
use tokio_util::time::{delay_queue, DelayQueue};

/// Deadlines further away than this are queued at this distance, and queued
/// again each time it passes. The wheel holds about 795 days past the last
/// time it moved, so with [`BEAT`] this keeps well inside it.
const HORIZON: Duration = Duration::from_secs(365 * 24 * 3600);

/// The wheel moves only when something in it fires: an entry that fires
/// this often keeps it from lagging behind (a wake-up of the thread a day).
const BEAT: Duration = Duration::from_secs(24 * 3600);

/// The wheel's name for the beat.
const BEAT_INDEX: u32 = u32::MAX;

/// At most this many due entries are taken out per pass of the timer thread,
/// which holds the queue's lock meanwhile.
const BATCH: usize = 256;

/// An empty queue that once held more entries than this gives back its memory.
const SHRINK: usize = 1024;

/// A scheduled deadline, for [`Timer::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    index: u32,
    generation: u32,
}

type Fire<T> = Arc<dyn Fn(T) + Send + Sync>;

/// An entry's place: its item and where it is in the wheel while it is
/// there. A slot is reused by a later entry with the next generation, so an
/// [`Entry`] whose deadline fired or was cancelled names nothing any more.
struct Slot<T> {
    generation: u32,
    key: Option<delay_queue::Key>,
    item: Option<T>,
}

/// The wheel (which knows entries by slot index), and the slots.
struct Queue<T> {
    wheel: DelayQueue<u32>,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
    /// The real deadlines of the entries queued at the horizon.
    far: HashMap<u32, Instant>,
    /// Deadlines up to this can be queued as they are (a recent now + HORIZON).
    near: Instant,
    /// The timer task, woken when a large queue becomes empty, to shrink it.
    task: Option<Waker>,
}

impl<T> Queue<T> {
    /// An empty queue; the beat goes in once the runtime runs.
    fn new() -> Self {
        Queue {
            wheel: DelayQueue::new(),
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            far: HashMap::new(),
            near: Instant::now() + HORIZON,
            task: None,
        }
    }

    /// Puts slot `index` in the wheel for `deadline`, or for the horizon.
    fn queue(&mut self, index: u32, deadline: Instant) -> delay_queue::Key {
        let mut at = deadline;
        if deadline > self.near {
            self.near = Instant::now() + HORIZON;
            if deadline > self.near {
                self.far.insert(index, deadline);
                at = self.near;
            }
        }
        self.wheel.insert_at(index, at.into())
    }

    fn insert(&mut self, deadline: Instant, item: T) -> Entry {
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot { generation: 0, key: None, item: None });
            (self.slots.len() - 1) as u32
        });
        let key = self.queue(index, deadline);
        let slot = &mut self.slots[index as usize];
        slot.key = Some(key);
        slot.item = Some(item);
        self.len += 1;
        Entry { index, generation: slot.generation }
    }

    /// Frees the slot of an entry that left the wheel; returns its item.
    fn release(&mut self, index: u32) -> Option<T> {
        let slot = &mut self.slots[index as usize];
        slot.key = None;
        slot.generation = slot.generation.wrapping_add(1);
        let item = slot.item.take();
        self.free.push(index);
        self.len -= 1;
        if !self.far.is_empty() {
            self.far.remove(&index);
        }
        item
    }

    fn cancel(&mut self, entry: Entry) {
        let Some(slot) = self.slots.get(entry.index as usize) else { return };
        let (true, Some(key)) = (slot.generation == entry.generation, slot.key) else { return };
        self.wheel.remove(&key);
        self.release(entry.index);
        if self.len == 0 && self.slots.len() > SHRINK {
            if let Some(task) = &self.task {
                task.wake_by_ref();
            }
        }
    }

    /// Slot `index` came out of the wheel: its item if its deadline passed.
    /// (On the timer thread.)
    fn expired(&mut self, index: u32) -> Option<T> {
        if index == BEAT_INDEX {
            self.beat();
            return None;
        }
        if let Some(&deadline) = self.far.get(&index) {
            if deadline > Instant::now() {
                // A deadline past the horizon: queue it again.
                let key = self.queue(index, deadline);
                self.slots[index as usize].key = Some(key);
                return None;
            }
        }
        self.release(index)
    }

    fn beat(&mut self) {
        self.wheel.insert_at(BEAT_INDEX, (Instant::now() + BEAT).into());
    }
}

/// A deadline thread calling `fire(item)` for each item whose deadline passed.
pub struct Timer<T: Send + 'static> {
    fire: Fire<T>,
    queue: Arc<Mutex<Queue<T>>>,
    /// The timer thread's runtime, once started: the queue's sleep belongs
    /// to its time driver.
    runtime: OnceLock<Handle>,
}

impl<T: Send + 'static> Timer<T> {
    /// A timer that calls `fire(item)` on its thread for each deadline that passes.
    pub fn new(fire: impl Fn(T) + Send + Sync + 'static) -> Self {
        Timer { fire: Arc::new(fire), queue: Arc::new(Mutex::new(Queue::new())), runtime: OnceLock::new() }
    }

    /// Calls `fire(item)` on the timer thread once `deadline` has passed
    /// (never before; tokio's timer counts whole milliseconds, so usually
    /// within a millisecond or two after). Starts the thread on first use.
    pub fn schedule(&self, deadline: Instant, item: T) -> Entry {
        // The queue may create or move its sleep, which needs the runtime.
        let _runtime = self.runtime().enter();
        self.queue.lock().insert(deadline, item)
    }

    /// Drops a scheduled entry whose work is done (its waiter was settled
    /// another way): it will not fire, and its memory is freed now.
    /// Cancelling an entry that already fired (or was cancelled) does nothing.
    pub fn cancel(&self, entry: Entry) {
        let Some(runtime) = self.runtime.get() else { return };
        let _runtime = runtime.enter();
        self.queue.lock().cancel(entry);
    }

    /// How many entries the timer holds (scheduled, not yet fired nor cancelled).
    pub fn pending(&self) -> usize {
        self.queue.lock().len
    }

    fn runtime(&self) -> &Handle {
        self.runtime.get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("cannot build the timer's runtime");
            let handle = runtime.handle().clone();
            let (queue, fire) = (self.queue.clone(), self.fire.clone());
            std::thread::Builder::new()
                .name("shared-futex-timer".into())
                .spawn(move || runtime.block_on(run(&queue, &*fire)))
                .expect("cannot start the timer thread");
            handle
        })
    }
}

/// Runs `f`, reporting a panic on stderr instead of unwinding into the
/// timer thread.
fn guarded(what: &str, f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        eprintln!("shared-futex: the timer's {what} callback panicked ({msg}); the timer goes on");
    }
}

/// The timer thread's one task: takes due entries out of the queue and fires
/// them, without holding the queue's lock (`fire` takes bucket locks, and
/// may cancel other entries).
async fn run<T>(queue: &Mutex<Queue<T>>, fire: &(dyn Fn(T) + Send + Sync)) {
    queue.lock().beat();
    let mut due = Vec::new();
    poll_fn(|cx: &mut Context<'_>| loop {
        {
            let mut queue = queue.lock();
            if !queue.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                queue.task = Some(cx.waker().clone());
            }
            if queue.len == 0 && queue.slots.len() > SHRINK {
                // Give back what a burst of deadlines grew.
                let task = queue.task.take();
                *queue = Queue::new();
                queue.task = task;
                queue.beat();
            }
            while due.len() < BATCH {
                // Registers the task for the next deadline, and for an
                // earlier one that `schedule` inserts.
                let Poll::Ready(Some(expired)) = queue.wheel.poll_expired(cx) else { break };
                if let Some(item) = queue.expired(expired.into_inner()) {
                    due.push(item);
                }
            }
        }
        if due.is_empty() {
            return Poll::<()>::Pending;
        }
        for item in due.drain(..) {
            guarded("fire", || fire(item));
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Mutex;

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

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
        wait_until("the fired entries are gone", || timer.pending() == 0);
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
        wait_until("the entries are gone, the panicking one too", || timer.pending() == 0);
    }

    #[test]
    fn cancelled_entries_are_released_and_never_fire() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
        let far = Instant::now() + Duration::from_secs(3600);
        let entries: Vec<Entry> = (0..1000).map(|i| timer.schedule(far, i)).collect();
        assert_eq!(timer.pending(), 1000);
        // 900 waiters settle early: their entries must not stay for an hour.
        for &entry in &entries[..900] {
            timer.cancel(entry);
        }
        assert_eq!(timer.pending(), 100, "cancelled entries are still held");
        // Cancelling twice, or after the entry fired, changes nothing.
        timer.cancel(entries[0]);
        let soon = timer.schedule(Instant::now() + Duration::from_millis(20), 1000);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1000));
        timer.cancel(soon);
        for &entry in &entries[900..] {
            timer.cancel(entry);
        }
        wait_until("every entry is released", || timer.pending() == 0);
        assert!(rx.try_recv().is_err(), "a cancelled entry fired");
    }

    #[test]
    fn a_queue_emptied_by_cancels_still_fires_later_deadlines() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
        for round in 0..3 {
            // A burst the timer thread gives back once it is all cancelled.
            let far = Instant::now() + Duration::from_secs(3600);
            let entries: Vec<Entry> = (0..2 * SHRINK as u32).map(|i| timer.schedule(far, i)).collect();
            for entry in entries {
                timer.cancel(entry);
            }
            std::thread::sleep(Duration::from_millis(20));
            timer.schedule(Instant::now() + Duration::from_millis(5), round);
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(round), "round {round}");
        }
    }

    #[test]
    fn cancelling_a_fired_entry_leaves_the_one_that_took_its_place() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
        let first = timer.schedule(Instant::now(), 1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
        wait_until("the fired entry is released", || timer.pending() == 0);
        let second = timer.schedule(Instant::now() + Duration::from_millis(20), 2);
        timer.cancel(first);
        assert_eq!(timer.pending(), 1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2), "a stale entry cancelled another");
        timer.cancel(second);
    }

    #[test]
    fn cancels_racing_their_deadlines_release_every_entry_once() {
        let timer = Timer::new(|_: u32| {});
        let start = Instant::now();
        let entries: Vec<Entry> = (0..2000).map(|i| timer.schedule(start + Duration::from_micros(i * 5), 0)).collect();
        for entry in entries {
            timer.cancel(entry);
        }
        // Each entry leaves once, fired or cancelled: a count that went
        // below zero or stayed above it would never read 0.
        wait_until("every entry fired or was cancelled", || timer.pending() == 0);
    }

    #[test]
    fn a_deadline_past_the_horizon_is_kept_not_fired() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
        // Far past what the wheel holds: must neither fire nor stop the thread.
        let far = timer.schedule(Instant::now() + HORIZON * 100, 0);
        timer.schedule(Instant::now() + Duration::from_millis(10), 1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1), "the timer thread died");
        assert_eq!(timer.pending(), 1);
        timer.cancel(far);
        wait_until("the far entry is released", || timer.pending() == 0);
        assert!(rx.try_recv().is_err(), "the far entry fired");
    }
}
