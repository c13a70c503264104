//! The floor under `ckpt watch` starting: how long this machine takes to
//! walk every directory of a tree and add an inotify watch to each, and
//! nothing else.
//!
//! Each round makes a fresh inotify instance and walks the tree as the
//! watcher does (watch a directory by path, then list it, `d_type` saying
//! which names are directories), with N threads taking directories from a
//! shared stack. The first round's time is printed apart (caches as found:
//! on a machine that evicts cold page cache, directory blocks are read from
//! disk), then the median and range of 5 more.
//!
//! Run: `cargo run --release -p ckpt-lib --example watch_floor -- DIR [THREADS...]`

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use ckpt_lib::platform::inotify::Inotify;

/// One round: every directory watched and listed by `threads` threads;
/// (ms, directories).
fn round(root: &Path, threads: usize) -> (f64, usize) {
    let ino = Inotify::new().expect("inotify_init");
    let stack = Mutex::new(vec![root.to_path_buf()]);
    let busy = std::sync::atomic::AtomicUsize::new(0);
    let dirs = std::sync::atomic::AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let next = {
                    let mut st = stack.lock().unwrap();
                    let p = st.pop();
                    if p.is_some() {
                        busy.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    p
                };
                let Some(dir) = next else {
                    if busy.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                        break;
                    }
                    std::thread::yield_now();
                    continue;
                };
                ino.add_dir(&dir)
                    .expect("inotify_add_watch (raise fs.inotify.max_user_watches?)");
                dirs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut found = Vec::new();
                if let Ok(rd) = std::fs::read_dir(&dir) {
                    for e in rd.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            found.push(e.path());
                        }
                    }
                }
                stack.lock().unwrap().extend(found);
                busy.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    let ms = start.elapsed().as_secs_f64() * 1e3;
    (ms, dirs.into_inner())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(args.next().expect("usage: watch_floor DIR [THREADS...]"));
    let mut counts: Vec<usize> = args.map(|a| a.parse().expect("a thread count")).collect();
    if counts.is_empty() {
        counts = vec![1, 2];
    }
    let (first, n) = round(&root, counts[0]);
    println!(
        "first round ({} thread(s), caches as found): {n} directories watched in {first:.1} ms",
        counts[0]
    );
    for &t in &counts {
        let mut v: Vec<f64> = (0..5).map(|_| round(&root, t).0).collect();
        v.sort_by(f64::total_cmp);
        println!(
            "{t} thread(s): {n} directories watched in {:.1} ms median ({:.1}–{:.1})",
            v[2], v[0], v[4]
        );
    }
}
