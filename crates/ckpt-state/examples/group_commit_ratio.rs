//! Measures strict-mode commit throughput with 1, 2, 4, 8 and 16 writers, interleaved over
//! several rounds so that drifting disk latency affects every writer count alike, and prints
//! the mean group size (commits per fsync). Run:
//! `cargo run --release -p ckpt-state --example group_commit_ratio [rounds] [dir]`.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use ckpt_state::{Durability, Options, StateStore};

fn run(s: &Arc<StateStore>, writers: usize, per: usize) -> f64 {
    let barrier = Arc::new(Barrier::new(writers + 1));
    let hs: Vec<_> = (0..writers)
        .map(|id| {
            let s = s.clone();
            let b = barrier.clone();
            std::thread::spawn(move || {
                b.wait();
                for i in 0..per {
                    let mut t = s.begin();
                    t.put(format!("w{id}/{i}").as_bytes(), &[0u8; 64]);
                    t.commit().unwrap();
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in hs {
        h.join().unwrap();
    }
    (writers * per) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let dir = match args.get(2) {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let s = Arc::new(
        StateStore::open(
            &dir.path().join("state.redb"),
            Options::with_durability(Durability::Strict),
        )
        .unwrap(),
    );
    let counts = [1usize, 2, 4, 8, 16];
    let mut sums = vec![0.0; counts.len()];
    let mut groups = vec![(0u64, 0u64); counts.len()];
    for _ in 0..rounds {
        for (i, &w) in counts.iter().enumerate() {
            let before = s.commit_stats();
            sums[i] += run(&s, w, (64 / w).max(8));
            let after = s.commit_stats();
            groups[i].0 += after.commits_written - before.commits_written;
            groups[i].1 += after.fsyncs - before.fsyncs;
        }
    }
    let one = sums[0] / rounds as f64;
    println!("| writers | strict commits/s | × one writer | commits per fsync |");
    println!("|---|---|---|---|");
    for (i, &w) in counts.iter().enumerate() {
        let r = sums[i] / rounds as f64;
        println!(
            "| {w} | {r:.0} | {:.2}× | {:.2} |",
            r / one,
            groups[i].0 as f64 / groups[i].1.max(1) as f64
        );
    }
}
