//! Which async waiter of a lock watches its owner's liveness.
//!
//! # Implementation details
//!
//! A lock's waiters cannot be told that the owner's thread died, so someone
//! has to look now and then. Only one waiter per lock does: the holder of the
//! lock's *poll role*, keyed by the address of the lock's word. The others
//! sleep without a timeout of their own.
//!
//! The role is claimed by `claim`, which runs inside the `validate` of the
//! waiter's `waitAsync`, that is under the bucket lock of the address it
//! sleeps on. It is given up by `release` (the holder's acquisition ended: it
//! got the lock, timed out or was aborted) or by `thread_ended` (the holder's
//! thread is torn down), which both *hand it over*: the oldest live async
//! waiter on the lock's word, and the one on its second address (the
//! heir's), are woken early with `Expired`, and one of them claims the role
//! when it sleeps again.
//!
//! Nothing is lost in between: the role is cleared before the hand-over
//! takes the bucket lock, so a waiter that was about to sleep without the
//! role either is already queued (and may be the one woken), or runs its
//! `validate` after the hand-over and finds the role free. The registry's
//! own mutex is never held while a bucket lock is taken.
//!
//! Blocking waiters never hold the role: their thread wakes every slice in
//! native code anyway, and they look at the owner each time.

use std::thread::ThreadId;

use futex_core::Key;
use parking_lot::Mutex;

use crate::TABLE;

struct Role {
    /// The lock's word: the role's name.
    key: Key,
    /// The second address the lock's waiters may sleep on.
    alt: Key,
    /// The holder: its thread and its acquisition's number there.
    thread: ThreadId,
    id: u32,
}

/// One entry per lock that currently has an async waiter holding the role.
static ROLES: Mutex<Vec<Role>> = Mutex::new(Vec::new());

/// Takes the role of `key` for acquisition `id` of this thread if nobody
/// holds it. Returns whether this acquisition holds it now.
pub fn claim(key: Key, alt: Key, id: u32) -> bool {
    let me = std::thread::current().id();
    let mut roles = ROLES.lock();
    match roles.iter().find(|r| r.key == key) {
        Some(r) => r.thread == me && r.id == id,
        None => {
            roles.push(Role { key, alt, thread: me, id });
            true
        }
    }
}

/// Gives up the role of `key` if acquisition `id` of this thread holds it,
/// and hands it over. Returns whether it held it.
pub fn release(key: Key, id: u32) -> bool {
    let me = std::thread::current().id();
    let role = {
        let mut roles = ROLES.lock();
        let Some(i) = roles.iter().position(|r| r.key == key && r.thread == me && r.id == id) else {
            return false;
        };
        roles.swap_remove(i)
    };
    hand_over(role.key, role.alt);
    true
}

/// The thread `thread` is being torn down: its roles are handed over.
pub fn thread_ended(thread: ThreadId) {
    let gone: Vec<Role> = {
        let mut roles = ROLES.lock();
        let (gone, kept) = std::mem::take(&mut *roles).into_iter().partition(|r| r.thread == thread);
        *roles = kept;
        gone
    };
    for role in gone {
        hand_over(role.key, role.alt);
    }
}

/// Wakes the oldest async waiter of each address early. Both: if the one
/// on `key` belongs to a thread that is being torn down, its early end is
/// passed on along `key` only, and a heir asleep on `alt` must still look.
/// The one that does not get the role goes back to sleep without it.
fn hand_over(key: Key, alt: Key) {
    TABLE.expire_first(key);
    TABLE.expire_first(alt);
}

/// Roles currently held (diagnostics).
pub fn held() -> usize {
    ROLES.lock().len()
}
