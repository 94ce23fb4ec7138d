//! State changes that owe a wake-up, made together with it in one call.
//!
//! A JavaScript thread can be stopped between any two of its steps: at a
//! function entry or a loop back-edge, by `worker.terminate()` (or a
//! script's timeout), with no `catch` or `finally` run after that. A native
//! call runs to its end, and an `Atomics` builtin runs wholly or not at all.
//! A primitive that changed a shared word with `Atomics.compareExchange` and
//! only then called `notify` could be stopped in between: the change is
//! made, its sleepers are never woken, and a later operation that finds the
//! change made (an event already set, a generation already complete)
//! notifies nobody either. These calls make the change and the wake-up as
//! one step: stopped before, nothing happened; after, both did.
//!
//! The wake-up is the table's [`WaitTable::notify`], after the change: a
//! waiter that compared its value before the change is queued by then (its
//! comparison and queueing are one critical section of the bucket lock, and
//! the presence count that `notify` reads first covers the time in between,
//! see the table's docs); one that compares after it sees the new value.

use crate::sync::{AtomicU32, AtomicU64, Ordering::SeqCst};
use crate::table::{Key, ParkToken, Protocol, UnparkToken, WaitTable};

/// Compare-exchange of the 32-bit word at `key`, `expected → new`; if it
/// took, wakes up to `count` waiters of `key`. Returns the value found
/// (`expected` if it took), as `Atomics.compareExchange` does.
///
/// # Safety
/// `key` is the address of a live, 4-aligned word during the call.
pub unsafe fn compare_exchange_notify_u32(table: &WaitTable, key: Key, expected: u32, new: u32, count: usize) -> u32 {
    // SAFETY: the caller's duty.
    let word = unsafe { &*(key as *const AtomicU32) };
    match word.compare_exchange(expected, new, SeqCst, SeqCst) {
        Ok(old) => {
            table.notify(key, count);
            old
        }
        Err(old) => old,
    }
}

/// [`compare_exchange_notify_u32`] for a 64-bit word (a `BigInt64Array`
/// element: the Barrier's).
///
/// # Safety
/// `key` is the address of a live, 8-aligned word during the call.
pub unsafe fn compare_exchange_notify_u64(table: &WaitTable, key: Key, expected: u64, new: u64, count: usize) -> u64 {
    // SAFETY: the caller's duty.
    let word = unsafe { &*(key as *const AtomicU64) };
    match word.compare_exchange(expected, new, SeqCst, SeqCst) {
        Ok(old) => {
            table.notify(key, count);
            old
        }
        Err(old) => old,
    }
}

/// A count that reaches zero, for waiters that sleep on a separate epoch
/// word (the WaitGroup's): compare-exchange of the count at `count_key`,
/// `expected → 0`; if it took, adds one to the epoch at `epoch_key` and
/// wakes every waiter of the epoch. Returns the count found (`expected` if
/// it took).
///
/// # Safety
/// `count_key` and `epoch_key` are the addresses of live, 4-aligned words
/// during the call.
pub unsafe fn count_to_zero(table: &WaitTable, count_key: Key, epoch_key: Key, expected: u32) -> u32 {
    // SAFETY: the caller's duty.
    let (count, epoch) = unsafe { (&*(count_key as *const AtomicU32), &*(epoch_key as *const AtomicU32)) };
    match count.compare_exchange(expected, 0, SeqCst, SeqCst) {
        Ok(old) => {
            epoch.fetch_add(1, SeqCst);
            table.notify(epoch_key, usize::MAX);
            old
        }
        Err(old) => old,
    }
}

/// The protocol of a *watching* waiter: one that sleeps while a word holds
/// a value and no thread has ended since it looked at some set of threads
/// (a channel's other side). Such a waiter is woken by any change of the
/// word, like a plain waiter, and also by [`WaitTable::thread_ended`], after
/// which it looks at its threads again. The caller's `validate` compares
/// the word and a count of ended threads read before the look, under the
/// bucket lock: an end recorded after the look either fails that comparison
/// or finds the waiter queued and wakes it.
pub struct Watch;

/// The one [`Watch`] protocol every watching waiter parks with.
pub static WATCH: Watch = Watch;

impl Protocol for Watch {
    fn left(&self, _key: Key, _token: ParkToken, _was_last: bool) {}

    /// A wake-up that a stopping thread cannot use goes to the next waiter,
    /// as a plain waiter's does.
    fn lost(&self, table: &WaitTable, key: Key, _token: UnparkToken) {
        table.notify(key, 1);
    }

    fn wakes_at_thread_end(&self) -> bool {
        true
    }
}
