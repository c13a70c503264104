//! The writer harness shared by `benches/state.rs` (as `mod harness`) and
//! `examples/group_commit_ratio.rs` (which includes this file with `#[path]`): threads
//! released together by a barrier and timed until the last one finishes, the strict
//! writers of the group-commit measurements, and the disk's fsync probe.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ckpt_state::StateStore;

/// Runs `threads` threads; thread `id` first calls `setup(id)` (not timed), then waits for
/// the others and runs the closure `setup` returned. Returns the wall time from the common
/// start until the last thread finished.
pub fn run_threads<W: FnOnce()>(
    threads: usize,
    setup: impl Fn(usize) -> W + Send + Sync + 'static,
) -> Duration {
    let setup = Arc::new(setup);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|id| {
            let setup = setup.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let work = setup(id);
                barrier.wait();
                work()
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in hs {
        h.join().unwrap();
    }
    start.elapsed()
}

/// `writers` threads each commit `per` transactions of one 64-byte put to their own keys
/// (`w{id}/{i}`), all starting together; returns the wall time until the last finished.
pub fn run_writers(s: &Arc<StateStore>, writers: usize, per: usize) -> Duration {
    let s = s.clone();
    run_threads(writers, move |id| {
        let s = s.clone();
        move || {
            for i in 0..per {
                let mut t = s.begin();
                t.put(format!("w{id}/{i}").as_bytes(), &[0u8; 64]);
                t.commit().unwrap();
            }
        }
    })
}

/// One probe of the disk's fsync latency: write 4 KiB to `f` and `fdatasync` it.
pub fn write_4k_fdatasync(f: &mut File) {
    f.write_all(&[1u8; 4096]).unwrap();
    f.sync_data().unwrap();
}
