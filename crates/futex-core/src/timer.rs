//! One background thread that fires deadlines, on tokio's timer.
//!
//! Async waiters with a finite timeout register `(deadline, item)` here; when
//! the deadline passes the thread calls the timer's callback with the item
//! (for the wait table: [`WaitTable::timeout`](crate::WaitTable::timeout),
//! which does nothing if a notify got there first).
//!
//! The thread runs a current-thread tokio runtime with only its time driver,
//! and one task that owns a [`DelayQueue`] (a hierarchical timing wheel:
//! insertion and removal in O(1), one tokio sleep for the whole queue).
//! [`Timer::schedule`] and [`Timer::cancel`] only append to a list under a
//! mutex, as cheap as a binary heap's push, and wake the thread if it is
//! asleep and has to act: for a deadline earlier than the one it sleeps
//! until, or for [`CANCEL_BATCH`] cancellations (or for the last entry it
//! holds being cancelled). The thread moves the lists into the wheel, O(1)
//! each, and removes cancelled entries there: at most [`CANCEL_BATCH`] of
//! them outlive their waiter, and a notify-all of many costs a wake-up per
//! batch, none per entry.
//!
//! The thread is started by the first [`Timer::schedule`], not before. A
//! panic in the callback is caught and reported on stderr: it costs that one
//! item, never the thread, so later deadlines of the process still fire.
//! The thread never ends and nothing joins it: it neither keeps a process
//! alive nor delays its exit.

use std::future::poll_fn;
use std::mem;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use tokio_util::time::{delay_queue, DelayQueue};

/// Deadlines further away than this are queued at this distance, and queued
/// again each time it passes. The wheel holds about 795 days past the last
/// time it moved, so with [`BEAT`] this keeps well inside it.
const HORIZON: Duration = Duration::from_secs(365 * 24 * 3600);

/// The wheel moves only when something in it fires: an entry that fires
/// this often keeps it from lagging behind (a wake-up of the thread a day).
const BEAT: Duration = Duration::from_secs(24 * 3600);

/// At most this many due entries are fired per pass of the timer thread
/// before it looks at the lists again.
const BATCH: usize = 256;

/// A wheel (or list) that once held more entries than this gives back its
/// memory once empty.
const SHRINK: usize = 1024;

/// Cancellations wake the thread once this many are waiting, or once every
/// entry it holds is cancelled: a burst of them costs a few wake-ups, and at
/// most this many entries of settled waiters outlive their waiter.
const CANCEL_BATCH: usize = 64;

/// A scheduled deadline, for [`Timer::cancel`]. Entries are numbered in
/// order and never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry(u64);

/// The beat's name in the wheel.
const BEAT_ENTRY: Entry = Entry(u64::MAX);

/// What callers hand the timer thread, under a mutex.
struct Inbox<T> {
    schedule: Vec<(Entry, Instant, T)>,
    cancel: Vec<Entry>,
    next: u64,
    /// Entries scheduled and not yet let go by the timer thread (fired,
    /// or cancelled and taken out of the wheel).
    held: usize,
    /// The thread will look at the lists without being woken (it is in a
    /// pass, or was woken). Cleared by the thread before it sleeps.
    awake: bool,
    /// While it sleeps: the deadline it sleeps until.
    wakes_at: Option<Instant>,
    /// The timer task.
    task: Option<Waker>,
}

type Fire<T> = Arc<dyn Fn(T) + Send + Sync>;

/// A deadline thread calling `fire(item)` for each item whose deadline passed.
pub struct Timer<T: Send + 'static> {
    fire: Fire<T>,
    inbox: Arc<Mutex<Inbox<T>>>,
    started: OnceLock<()>,
}

impl<T: Send + 'static> Timer<T> {
    /// A timer that calls `fire(item)` on its thread for each deadline that passes.
    pub fn new(fire: impl Fn(T) + Send + Sync + 'static) -> Self {
        Timer {
            fire: Arc::new(fire),
            inbox: Arc::new(Mutex::new(Inbox {
                schedule: Vec::new(),
                cancel: Vec::new(),
                next: 0,
                held: 0,
                awake: true,
                wakes_at: None,
                task: None,
            })),
            started: OnceLock::new(),
        }
    }

    /// Calls `fire(item)` on the timer thread once `deadline` has passed
    /// (never before; tokio's timer counts whole milliseconds, so usually
    /// within a millisecond or two after). Starts the thread on first use.
    pub fn schedule(&self, deadline: Instant, item: T) -> Entry {
        self.started.get_or_init(|| self.start());
        let mut inbox = self.inbox.lock();
        let entry = Entry(inbox.next);
        inbox.next += 1;
        inbox.held += 1;
        inbox.schedule.push((entry, deadline, item));
        let earlier = inbox.wakes_at.is_none_or(|at| deadline < at);
        let task = wake(&mut inbox, earlier);
        drop(inbox);
        if let Some(task) = task {
            task.wake();
        }
        entry
    }

    /// Drops a scheduled entry whose work is done (its waiter was settled
    /// another way): it will not fire, and it leaves the timer the next time
    /// the timer thread runs, which this wakes once [`CANCEL_BATCH`] are
    /// waiting or no scheduled entry is left uncancelled. Cancelling an
    /// entry that already fired (or was cancelled) does nothing.
    pub fn cancel(&self, entry: Entry) {
        if self.started.get().is_none() {
            return;
        }
        let mut inbox = self.inbox.lock();
        inbox.cancel.push(entry);
        let due = inbox.cancel.len() >= CANCEL_BATCH.min(inbox.held);
        let task = wake(&mut inbox, due);
        drop(inbox);
        if let Some(task) = task {
            task.wake();
        }
    }

    /// How many entries the timer holds: scheduled, and not yet fired nor
    /// cancelled and taken out by the timer thread.
    pub fn pending(&self) -> usize {
        self.inbox.lock().held
    }

    fn start(&self) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("cannot build the timer's runtime");
        let (inbox, fire) = (self.inbox.clone(), self.fire.clone());
        std::thread::Builder::new()
            .name("shared-futex-timer".into())
            .spawn(move || runtime.block_on(run(&inbox, &*fire)))
            .expect("cannot start the timer thread");
    }
}

/// The timer task to wake, if it sleeps and `needed`: marks it awake, so
/// that one wake-up serves every caller until it has looked at the lists.
fn wake<T>(inbox: &mut Inbox<T>, needed: bool) -> Option<Waker> {
    if inbox.awake || !needed {
        return None;
    }
    inbox.awake = true;
    inbox.wakes_at = None;
    inbox.task.clone()
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

/// The wheel, owned by the timer task.
struct Wheel<T> {
    queue: DelayQueue<Entry>,
    /// Where each entry is in the queue, and its item.
    entries: HashMap<Entry, (delay_queue::Key, T)>,
    /// The real deadlines of the entries queued at the horizon.
    far: HashMap<Entry, Instant>,
}

impl<T> Wheel<T> {
    /// A wheel with the beat in it (on the timer thread: the queue's sleep
    /// needs the runtime).
    fn new() -> Self {
        let mut wheel = Wheel { queue: DelayQueue::new(), entries: HashMap::default(), far: HashMap::default() };
        wheel.beat();
        wheel
    }

    fn beat(&mut self) {
        self.queue.insert_at(BEAT_ENTRY, (Instant::now() + BEAT).into());
    }

    fn insert(&mut self, entry: Entry, deadline: Instant, item: T) {
        let key = self.queue_at(entry, deadline);
        self.entries.insert(entry, (key, item));
    }

    fn queue_at(&mut self, entry: Entry, deadline: Instant) -> delay_queue::Key {
        let limit = Instant::now() + HORIZON;
        let at = if deadline > limit {
            self.far.insert(entry, deadline);
            limit
        } else {
            deadline
        };
        self.queue.insert_at(entry, at.into())
    }

    /// Whether the entry was in the wheel.
    fn remove(&mut self, entry: Entry) -> bool {
        let Some((key, _)) = self.entries.remove(&entry) else { return false };
        self.queue.remove(&key);
        if !self.far.is_empty() {
            self.far.remove(&entry);
        }
        true
    }

    /// An entry came out of the queue: its item if its deadline passed.
    fn expired(&mut self, entry: Entry) -> Option<T> {
        if entry == BEAT_ENTRY {
            self.beat();
            return None;
        }
        if let Some(&deadline) = self.far.get(&entry) {
            if deadline > Instant::now() {
                // A deadline past the horizon: queue it again.
                let key = self.queue_at(entry, deadline);
                self.entries.get_mut(&entry).expect("queued entries have an item").0 = key;
                return None;
            }
            self.far.remove(&entry);
        }
        self.entries.remove(&entry).map(|(_, item)| item)
    }
}

/// The timer thread's one task: moves what callers scheduled and cancelled
/// into the wheel, takes due entries out and fires them, without holding
/// the inbox's lock (`fire` takes bucket locks, and may cancel entries).
async fn run<T>(inbox: &Mutex<Inbox<T>>, fire: &(dyn Fn(T) + Send + Sync)) {
    let mut wheel = Wheel::new();
    let mut schedule = Vec::new();
    let mut cancel = Vec::new();
    let mut due = Vec::new();
    poll_fn(|cx: &mut Context<'_>| loop {
        {
            let mut inbox = inbox.lock();
            if !inbox.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                inbox.task = Some(cx.waker().clone());
            }
            mem::swap(&mut inbox.schedule, &mut schedule);
            mem::swap(&mut inbox.cancel, &mut cancel);
        }
        for (entry, deadline, item) in schedule.drain(..) {
            wheel.insert(entry, deadline, item);
        }
        let mut released = 0;
        for entry in cancel.drain(..) {
            released += usize::from(wheel.remove(entry));
        }
        if wheel.entries.is_empty() && wheel.entries.capacity() > SHRINK {
            // Give back what a burst of deadlines grew.
            wheel = Wheel::new();
        }
        while due.len() < BATCH {
            // Registers the task for the next deadline.
            let Poll::Ready(Some(expired)) = wheel.queue.poll_expired(cx) else { break };
            if let Some(item) = wheel.expired(expired.into_inner()) {
                released += 1;
                due.push(item);
            }
        }
        let idle = {
            let mut inbox = inbox.lock();
            inbox.held -= released;
            let idle = due.is_empty() && inbox.schedule.is_empty() && inbox.cancel.is_empty();
            if idle {
                inbox.awake = false;
                inbox.wakes_at = wheel.queue.peek().map(|key| wheel.queue.deadline(&key).into_std());
            }
            idle
        };
        if idle {
            if schedule.capacity() > SHRINK {
                schedule = Vec::new();
            }
            if cancel.capacity() > SHRINK {
                cancel = Vec::new();
            }
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
    fn an_earlier_deadline_wakes_the_sleeping_thread() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
        let far = timer.schedule(Instant::now() + Duration::from_secs(3600), 0);
        // Let the thread take it in and go to sleep until then.
        std::thread::sleep(Duration::from_millis(50));
        let start = Instant::now();
        timer.schedule(start + Duration::from_millis(10), 1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
        timer.cancel(far);
        wait_until("both entries are gone", || timer.pending() == 0);
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
        // 900 waiters settle early: their entries must not stay for an hour
        // (all but fewer than a batch of them leave at once).
        for &entry in &entries[..900] {
            timer.cancel(entry);
        }
        wait_until("the cancelled entries are released", || timer.pending() < 100 + CANCEL_BATCH);
        // Cancelling twice, or after the entry fired, changes nothing.
        timer.cancel(entries[0]);
        let soon = timer.schedule(Instant::now() + Duration::from_millis(20), 1000);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1000));
        timer.cancel(soon);
        // Once none is left uncancelled, none is left.
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
