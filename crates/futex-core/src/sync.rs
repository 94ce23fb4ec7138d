//! The synchronisation primitives the table is built from, taken from `loom`
//! under `cfg(loom)` so that model tests explore the real code's
//! interleavings, and from `std` / `parking_lot` otherwise.

#[cfg(loom)]
mod imp {
    pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
    pub use loom::thread::{current, park, Thread};

    /// `loom`'s mutex behind the `parking_lot` interface (no poisoning).
    pub struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }
        pub fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }
    }

    /// loom has no timed park; model tests only use waits without deadline.
    pub fn park_timeout(_dur: std::time::Duration) {
        park()
    }
}

#[cfg(not(loom))]
mod imp {
    pub use parking_lot::Mutex;
    pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
    pub use std::thread::{current, park_timeout, Thread};
}

pub(crate) use imp::*;

// Reference counting is not part of the protocol being modelled, and `loom`'s
// `Arc` cannot hold a `dyn Owner`: both configurations use `std`'s.
pub use std::sync::Arc;
