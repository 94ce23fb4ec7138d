//! The deadline thread starts with the first deadline, not before. (A test
//! binary of its own: no other test may start a timer in this process.)

#![cfg(all(target_os = "linux", not(loom)))]

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futex_core::Timer;

/// Threads of this process whose name is the timer's (Linux keeps the first
/// 15 bytes of a thread's name).
fn timer_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|t| {
            let comm = std::fs::read_to_string(t.as_ref().unwrap().path().join("comm")).unwrap_or_default();
            comm.trim_end() == &"shared-futex-timer"[..15]
        })
        .count()
}

#[test]
fn the_thread_starts_with_the_first_deadline() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let timer = Timer::new(move |i: u32| tx.lock().unwrap().send(i).unwrap());
    assert_eq!(timer.pending(), 0);
    assert_eq!(timer_threads(), 0, "a thread before any deadline");
    // Once a deadline fired, the thread that fired it has its name.
    timer.schedule(Instant::now() + Duration::from_millis(5), 1);
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
    assert_eq!(timer_threads(), 1);
    timer.schedule(Instant::now() + Duration::from_millis(5), 2);
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2));
    assert_eq!(timer_threads(), 1, "a second thread");
}
