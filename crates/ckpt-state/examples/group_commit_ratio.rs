//! Measures strict-mode commit throughput with 1, 2, 4, 8 and 16 writers, interleaved over
//! several rounds so that drifting disk latency affects every writer count alike, and prints
//! the median rate per writer count, the mean group size (commits per fsync) and this
//! disk's fsync latency measured in the same run (write 4 KiB + `fdatasync`, same
//! directory, median). A last row gives the ceiling of any group-commit queue for the
//! largest writer count: groups of that size committed already formed, from one thread.
//! Run:
//! `cargo run --release -p ckpt-state --example group_commit_ratio [rounds] [dir] [writers,...]`
//! (e.g. `... 5 /tmp 1,8` to compare one and eight writers only).

#[path = "../benches/harness/mod.rs"]
mod harness;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ckpt_state::{Durability, Options, StateStore};

/// Commits per writer per run: enough that the start and the tail of a run (when writers
/// finish at different times and groups shrink) do not dominate.
const PER_WRITER: usize = 64;

/// Commits per second of `writers` strict writers committing `per` transactions each.
fn run(s: &Arc<StateStore>, writers: usize, per: usize) -> f64 {
    (writers * per) as f64 / harness::run_writers(s, writers, per).as_secs_f64()
}

/// The ceiling of any group-commit queue for `size` writers: one thread commits groups of
/// `size` transactions that are already formed (`commit_group`), and only the commit
/// calls are timed. No writer wakes, returns, begins or queues, so this is the group's
/// own cost (validation, one redb transaction, its fsync, applying) and nothing else.
fn preformed(s: &StateStore, size: usize, groups: usize) -> f64 {
    let mut spent = Duration::ZERO;
    for g in 0..groups {
        let txns: Vec<_> = (0..size)
            .map(|w| {
                let mut t = s.begin();
                t.put(format!("pre{w}/{g}").as_bytes(), &[0u8; 64]);
                t
            })
            .collect();
        let start = Instant::now();
        let results = s.commit_group(txns);
        spent += start.elapsed();
        assert!(results.iter().all(Result::is_ok));
    }
    (size * groups) as f64 / spent.as_secs_f64()
}

/// Median latency of write 4 KiB + fdatasync over `n` rounds in `dir`.
fn fsync_latency(dir: &std::path::Path, n: usize) -> Duration {
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut v: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            harness::write_4k_fdatasync(&mut f);
            t.elapsed()
        })
        .collect();
    let _ = std::fs::remove_file(path);
    v.sort();
    v[n / 2]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let dir = match args.get(2) {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let counts: Vec<usize> = args
        .get(3)
        .map(|a| a.split(',').filter_map(|w| w.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4, 8, 16]);
    let s = Arc::new(
        StateStore::open(
            &dir.path().join("state.redb"),
            Options::with_durability(Durability::Strict),
        )
        .unwrap(),
    );
    let mut rates = vec![Vec::new(); counts.len()];
    let mut groups = vec![(0u64, 0u64); counts.len()];
    let largest = *counts.iter().max().unwrap();
    let mut ceiling = Vec::new();
    let mut fsyncs = Vec::new();
    for _ in 0..rounds {
        fsyncs.push(fsync_latency(dir.path(), 200).as_secs_f64() * 1e3);
        ceiling.push(preformed(&s, largest, PER_WRITER));
        for (i, &w) in counts.iter().enumerate() {
            let before = s.commit_stats();
            rates[i].push(run(&s, w, PER_WRITER));
            let after = s.commit_stats();
            groups[i].0 += after.commits_written - before.commits_written;
            groups[i].1 += after.fsyncs - before.fsyncs;
        }
    }
    let fsync_ms = median(&mut fsyncs);
    let meds: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    println!(
        "fsync (write 4 KiB + fdatasync) median {fsync_ms:.3} ms = {:.0}/s; {rounds} rounds, median rate",
        1e3 / fsync_ms
    );
    println!("| writers | strict commits/s | × one writer | commits per fsync |");
    println!("|---|---|---|---|");
    for (i, &w) in counts.iter().enumerate() {
        println!(
            "| {w} | {:.0} | {:.2}× | {:.2} |",
            meds[i],
            meds[i] / meds[0],
            groups[i].0 as f64 / groups[i].1.max(1) as f64
        );
    }
    let c = median(&mut ceiling);
    println!(
        "| {largest}, pre-formed (ceiling of any queue) | {c:.0} | {:.2}× | {largest}.00 |",
        c / meds[0]
    );
}
