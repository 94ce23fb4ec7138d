//! The promises of this thread's pending async waiters.
//!
//! Promises are created natively (`napi_create_promise`), as V8 does for its
//! own `Atomics.waitAsync`: a bare promise with an off-heap handle to settle
//! it, instead of a JS promise whose resolving functions and their closure
//! would stay on the heap for every pending waiter. Only the owning JS thread
//! touches this table (the deferred handles belong to its isolate), so it is
//! thread-local and needs no lock.
//!
//! The table also counts the pending waiters that keep the event loop alive:
//! the thread's threadsafe function is ref'd while that count is not zero.

use std::cell::{Cell, RefCell};
use std::ptr;

use napi::{sys, Error, Result, Status};

use crate::resolver::Resolver;

struct Pending {
    deferred: sys::napi_deferred,
    keep_alive: bool,
}

/// A slab of pending waiters: a waiter's token is its slot index, so
/// settling is an index, not a hash lookup, and slots are reused.
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Pending>>,
    /// Reserved slots not yet filled, plus filled ones.
    used: usize,
    /// Free slot indices.
    free: Vec<usize>,
}

thread_local! {
    /// Pending waiters of this thread, by token.
    static PENDING: RefCell<Slab> = RefCell::new(Slab::default());
    /// How many of them keep the event loop alive.
    static KEEP_ALIVE: Cell<usize> = const { Cell::new(0) };
}

/// Reserves the token of a waiter about to be queued. Give it back with
/// [`release`] if the waiter is not queued after all.
pub fn reserve() -> u64 {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        p.used += 1;
        match p.free.pop() {
            Some(i) => i as u64,
            None => {
                p.slots.push(None);
                (p.slots.len() - 1) as u64
            }
        }
    })
}

/// Returns a reserved token whose waiter was not queued.
pub fn release(token: u64) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        p.used -= 1;
        p.free.push(token as usize);
    })
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::GenericFailure, format!("{what} failed ({status})")))
    }
}

/// Creates the promise of the queued waiter `token` (from [`reserve`]) and
/// records how to settle it.
///
/// # Safety
/// `env` must be the live env of the current N-API call on the thread that
/// owns `resolver`.
pub unsafe fn create(env: sys::napi_env, token: u64, keep_alive: bool, resolver: &Resolver) -> Result<sys::napi_value> {
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    // SAFETY: live env (function contract); out-pointers are locals.
    check(unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) }, "napi_create_promise")?;
    PENDING.with(|p| p.borrow_mut().slots[token as usize] = Some(Pending { deferred, keep_alive }));
    if keep_alive {
        let n = KEEP_ALIVE.get();
        KEEP_ALIVE.set(n + 1);
        if n == 0 {
            resolver.set_keep_alive(true);
        }
    }
    Ok(promise)
}

/// Settles the promise of `token` with `value`. False if this thread has no
/// pending waiter `token` (already settled or cancelled).
///
/// # Safety
/// `env` must be this thread's live env, inside an N-API call or callback.
pub unsafe fn settle(env: sys::napi_env, token: u64, value: sys::napi_value, resolver: &Resolver) -> bool {
    let taken = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let pending = p.slots.get_mut(token as usize)?.take()?;
        p.used -= 1;
        p.free.push(token as usize);
        Some(pending)
    });
    let Some(pending) = taken else { return false };
    if pending.keep_alive {
        let n = KEEP_ALIVE.get() - 1;
        KEEP_ALIVE.set(n);
        if n == 0 {
            resolver.set_keep_alive(false);
        }
    }
    // SAFETY: the deferred was created on this env and is settled once: it
    // just left the table. Settling frees it.
    unsafe { sys::napi_resolve_deferred(env, pending.deferred, value) };
    true
}

/// Whether this thread has no pending waiter left.
pub fn is_empty() -> bool {
    PENDING.with(|p| p.borrow().used == 0)
}
