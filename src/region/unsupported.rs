//! Platforms without shared regions (other than Linux, macOS and Windows):
//! `open` and `unlink` throw `ERR_REGION_UNSUPPORTED`. A platform of its own
//! gets a module beside this one (src/region/posix.rs,
//! src/region/windows.rs) with the same items, chosen in src/region.rs.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use futex_core::shared::{Layout, Os};
use napi::{Error, Result};

use super::{coded, Region};

pub(crate) struct Sys;

impl Os for Sys {
    fn wait(&self, _word: &AtomicU32, _expected: u32, timeout: Option<Duration>) {
        std::thread::sleep(timeout.unwrap_or(Duration::from_millis(1)));
    }
    fn wake(&self, _word: &AtomicU32, _count: u32) {}
    fn slot_alive(&self, _slot: u32) -> bool {
        true
    }
}

fn unsupported() -> Error {
    coded(
        "ERR_REGION_UNSUPPORTED",
        format!("shared regions are not implemented on {} (Linux, macOS and Windows only)", std::env::consts::OS),
    )
}

pub(super) fn open(_: &str, _: u32, _: bool, _: u32, _: Layout, _: &str) -> Result<Arc<Region>> {
    Err(unsupported())
}
pub(super) fn sleep_on_doorbell(_region: Arc<Region>, _seen: u32, _timeout: Duration) {}
pub(super) fn unmap(_region: &Region) {}
pub(super) fn unlink(_: &str) -> Result<bool> {
    Err(unsupported())
}
pub(super) const SUPPORTED: bool = false;

/// No bells here yet: async waiters hear of other processes' notifies through the doorbell.
pub(super) fn thread_bell(_env: napi::sys::napi_env) -> u32 {
    0
}

/// No bells here (see `thread_bell`).
pub(super) fn bell_info() -> (u32, u64) {
    (0, 0)
}

/// Whether this process learns of every death of the region's processes at
/// once (no: its watching waits sleep in short slices).
pub(super) fn watches(_region: &Region) -> bool {
    false
}
