//! A broadcast wake-up word: threads sleep on one `AtomicU32` until it changes, and one
//! system call wakes all of them (Linux `futex`, private to the process).
//!
//! Platform code, kept to this file. The protocol that makes it race-free is the
//! caller's: a sleeper reads the word, then checks its condition, then calls [`wait`] with
//! the value it read; a waker first makes the condition true, then changes the word, then
//! calls [`wake_all`]. `wait` returns at once if the word no longer holds the value read,
//! so a change between the check and the sleep is never missed. `wait` may also return
//! spuriously (signals); callers loop.

use std::sync::atomic::AtomicU32;

use rustix::thread::futex;

/// Sleep while `word` holds `expected` (returns immediately if it does not).
pub(crate) fn wait(word: &AtomicU32, expected: u32) {
    // EAGAIN (the word changed) and EINTR both mean "look again"; the caller loops.
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, None);
}

/// Wake every thread sleeping on `word`.
pub(crate) fn wake_all(word: &AtomicU32) {
    // The kernel reads the count as a signed int: `u32::MAX` would mean -1, which wakes
    // one thread only. `i32::MAX` is "all".
    let _ = futex::wake(word, futex::Flags::PRIVATE, i32::MAX as u32);
}
