//! Sleeping on a word until another thread changes it (Linux `futex`, private to the
//! process).
//!
//! Platform code, kept to this file. The protocol that makes it race-free is the
//! caller's: a sleeper announces itself by storing a value in the word, then calls
//! [`wait`] with that value; a waker stores a different value and, if the value it
//! replaced was the announcement, calls [`wake`]. `wait` returns at once if the word no
//! longer holds the value, so a change between the announcement and the sleep is never
//! missed. `wait` may also return spuriously (signals); callers loop.

use std::sync::atomic::AtomicU32;

use rustix::thread::futex;

/// Sleep while `word` holds `expected` (returns immediately if it does not).
pub(crate) fn wait(word: &AtomicU32, expected: u32) {
    // EAGAIN (the word changed) and EINTR both mean "look again"; the caller loops.
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, None);
}

/// Wake the thread sleeping on `word`, if any.
pub(crate) fn wake(word: &AtomicU32) {
    let _ = futex::wake(word, futex::Flags::PRIVATE, 1);
}
