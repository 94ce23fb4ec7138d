//! Address-keyed FIFO wait queues: the futex protocol behind `Atomics.wait`,
//! `Atomics.notify` and `Atomics.waitAsync`, without any JavaScript engine.
//!
//! # The contract
//!
//! * [`WaitTable::wait`] and [`WaitTable::wait_async`] run a caller-supplied
//!   `validate` closure *while holding the lock of the bucket that owns the
//!   address*. If it returns `false` ("the value is not the expected one") the
//!   call returns at once and nothing is queued. Because [`WaitTable::notify`]
//!   takes the same bucket lock, a notifier that changed the value before
//!   notifying can never slip between the check and the enqueue: no wake-up is
//!   lost.
//! * One queue per address, shared by blocking and async waiters, served in
//!   FIFO order.
//! * Every waiter gets exactly one outcome. The outcome is decided by whoever
//!   removes the waiter from its queue, and removal only happens under the
//!   bucket lock: `notify` (→ ok), the timeout (→ timed out), a cancellation,
//!   or the teardown of the owning thread.
//! * Blocking waiters never wake spuriously from the caller's point of view:
//!   [`WaitTable::wait`] returns only with one of the outcomes above.
//!
//! # Layout
//!
//! * [`table`]: the hashed buckets and their operations, including
//!   parking_lot's `park` / `unpark_one` with callbacks run under the bucket
//!   lock, for protocols built on the table.
//! * [`lock`]: the robust mutex word built that way.
//! * [`semaphore`]: the counting semaphore word built the same way.
//! * [`condvar`]: a condition variable's sequence word, the same way.
//! * [`rwlock`]: the robust reader-writer lock built the same way.
//! * [`event`]: the events' words (`ManualResetEvent.set`, and the
//!   auto-reset event's protocol, built like the semaphore).
//! * [`shared`]: the queues of memory shared by processes (a region's
//!   control block), with the same protocol and owners that can die at any
//!   instruction.
//! * [`wake`]: state changes that owe a wake-up, made with it in one call.
//! * [`timer`]: one background thread that fires async deadlines.
//! * `sync`: a `std` / `loom` shim so model tests run the same code.

pub mod condvar;
pub mod event;
pub mod lock;
mod queue;
pub mod rwlock;
pub mod semaphore;
pub mod shared;
mod sync;
pub mod table;
pub mod timer;
pub mod wake;

pub use condvar::RawCondvar;
pub use event::RawAutoEvent;
pub use lock::RawLock;
pub use rwlock::RawRwLock;
pub use semaphore::RawSemaphore;
pub use table::{
    presence_slot, AsyncOutcome, FilterOp, Key, Owner, Park, ParkToken, PresenceCount, Protocol, Ticket, UnparkResult,
    UnparkToken, WaitResult, WaitTable, PRESENCE_SLOTS, TOKEN_NORMAL,
};
pub use timer::Timer;
