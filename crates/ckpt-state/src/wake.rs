//! Sleeping on a word until another thread changes it (Linux `futex`, private to the
//! process).
//!
//! Platform code, kept to this file. The protocol that makes it race-free is the
//! caller's: a sleeper reads the word, checks its condition, then calls [`wait`] with the
//! value it read; a waker makes the condition true, then changes the word, then calls
//! [`wake_all`]. `wait` returns at once if the word no longer holds the value, so a change
//! between the check and the sleep is never missed. `wait` may also return spuriously
//! (signals); callers loop.

use std::sync::atomic::AtomicU32;

use rustix::thread::futex;

/// Sleep while `word` holds `expected` (returns immediately if it does not).
pub(crate) fn wait(word: &AtomicU32, expected: u32) {
    // EAGAIN (the word changed) and EINTR both mean "look again"; the caller loops.
    let _ = futex::wait(word, futex::Flags::PRIVATE, expected, None);
}

/// Wake every thread sleeping on `word`, with one system call.
pub(crate) fn wake_all(word: &AtomicU32) {
    // The kernel reads the count as a C `int`: `u32::MAX` would be -1 and wake only one.
    let _ = futex::wake(word, futex::Flags::PRIVATE, i32::MAX as u32);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    /// Every sleeper wakes, not just one: the threads are first seen asleep in the kernel
    /// (state `S` in /proc, after they announced themselves), then the word changes and
    /// one `wake_all` must release them all. A lost wake-up shows as the watchdog firing.
    #[test]
    fn wake_all_wakes_every_sleeper() {
        const SLEEPERS: usize = 6;
        let word = Arc::new(AtomicU32::new(0));
        let announced = Arc::new(AtomicUsize::new(0));
        let (tids_tx, tids_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        for _ in 0..SLEEPERS {
            let (word, announced) = (word.clone(), announced.clone());
            let (tids_tx, done_tx) = (tids_tx.clone(), done_tx.clone());
            std::thread::spawn(move || {
                tids_tx
                    .send(rustix::thread::gettid().as_raw_nonzero())
                    .unwrap();
                announced.fetch_add(1, Ordering::SeqCst);
                while word.load(Ordering::SeqCst) == 0 {
                    super::wait(&word, 0);
                }
                done_tx.send(()).unwrap();
            });
        }
        let tids: Vec<_> = (0..SLEEPERS).map(|_| tids_rx.recv().unwrap()).collect();
        let asleep = |tid: &std::num::NonZeroI32| {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
            // The state follows the parenthesised command name.
            stat.rsplit(')')
                .next()
                .unwrap()
                .trim_start()
                .starts_with('S')
        };
        while announced.load(Ordering::SeqCst) < SLEEPERS || !tids.iter().all(asleep) {
            std::thread::yield_now();
        }
        word.store(1, Ordering::SeqCst);
        super::wake_all(&word);
        for i in 0..SLEEPERS {
            done_rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("lost wake-up: only {i} of {SLEEPERS} sleepers woke"));
        }
    }
}
