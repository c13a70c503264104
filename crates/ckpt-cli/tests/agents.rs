//! Concurrent agents on one workspace: 2, 4 and 8 "agent" threads, each
//! running real `ckpt` processes back to back — save, in-place restore of a
//! checkpoint another agent made, diff, status, state put and state cas —
//! while a writer thread keeps changing files (atomic replacements and
//! in-place appends of self-checking lines). Proves:
//! - liveness: every command exits within a generous bound (no deadlock;
//!   not a speed assertion) and none fails except the documented "kept
//!   changing" refusal of a save;
//! - no lost checkpoint: every id a save acknowledged is in the log at the
//!   end, and distinct saves got distinct ids;
//! - no torn file: every acknowledged checkpoint restores (`--to`) to a
//!   tree where each file is whole lines its writer really wrote;
//! - the store is intact: `verify --store` is clean, no temporaries remain.
//!
//! `CKPT_SOAK=N` multiplies the operations.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

/// Liveness bound per command (generous: the machine is shared).
const BOUND: Duration = Duration::from_secs(120);

/// Runs `ckpt ARGS`, killing it (and failing) if it outlives [`BOUND`].
fn bounded(root: &std::path::Path, args: &[&str]) -> (Run, Duration) {
    let t = Instant::now();
    let mut child = spawn(root, args);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t.elapsed() > BOUND {
            let _ = child.kill();
            let r = finish(child, &args.join(" "));
            panic!(
                "ckpt {args:?} did not finish within {BOUND:?} (deadlock?):\n{}",
                r.dump()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    (
        finish(child, &format!("ckpt {}", args.join(" "))),
        t.elapsed(),
    )
}

fn writer(root: PathBuf, staging: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut rng = Rng::new("agents-writer", 99);
        let mut gen = 1u64;
        let mut ops = 0;
        while !stop.load(Ordering::Relaxed) {
            gen += 1;
            let rel = format!("w{}/f{:02}", rng.below(4), rng.below(20));
            let p = root.join(&rel);
            if rng.below(2) == 0 {
                // Atomic replacement, staged outside the workspace.
                let tmp = staging.join(format!("s{gen}"));
                let n = 1 + rng.below(40) as usize;
                let _ = std::fs::write(&tmp, line(&rel, gen).repeat(n))
                    .and_then(|()| std::fs::create_dir_all(p.parent().unwrap()))
                    .and_then(|()| std::fs::rename(&tmp, &p));
            } else if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&p) {
                let _ = f.write_all(&line(&rel, gen).repeat(1 + rng.below(8) as usize));
            }
            ops += 1;
            std::thread::sleep(Duration::from_micros(500));
        }
        ops
    })
}

fn agents(n: usize, ops_each: usize) {
    let ws = Ws::new();
    for d in 0..4 {
        for f in 0..20 {
            let rel = format!("w{d}/f{f:02}");
            write(&ws.root, &rel, &line(&rel, 0).repeat(3));
        }
    }
    ws.init();
    let (v0, _) = ws.save();
    let staging = ws.tmp.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(ws.root.clone(), staging, Arc::clone(&stop));
    let acked = Arc::new(Mutex::new(vec![v0]));
    let slowest = Arc::new(AtomicU64::new(0));
    let counts = Arc::new(Mutex::new([0usize; 7]));
    std::thread::scope(|s| {
        for a in 0..n {
            let (root, acked, slowest, counts) = (
                ws.root.clone(),
                Arc::clone(&acked),
                Arc::clone(&slowest),
                Arc::clone(&counts),
            );
            s.spawn(move || {
                let mut rng = Rng::new(&format!("agent{a}"), 1000 + a as u64);
                for i in 0..ops_each {
                    let op = rng.below(7) as usize;
                    let key = format!("agent{a}");
                    let val = format!("{i}");
                    let target = {
                        let l = acked.lock().unwrap();
                        l[rng.below(l.len() as u64) as usize].clone()
                    };
                    let args: Vec<&str> = match op {
                        0 | 1 => vec!["save", "--json"],
                        2 => vec!["restore", &target, "--files-only"],
                        3 => vec!["diff", &target, "--name-status"],
                        4 => vec!["status", "--json"],
                        5 => vec!["state", "put", &key, &val],
                        _ => vec!["state", "cas", "shared", "0", &key],
                    };
                    let (r, took) = bounded(&root, &args);
                    slowest.fetch_max(took.as_millis() as u64, Ordering::Relaxed);
                    let unstable = r.code == Some(1) && r.stderr.contains("kept changing");
                    let cas_lost = op == 6 && r.code == Some(7);
                    assert!(
                        r.code == Some(0) || unstable || cas_lost,
                        "agent {a} op {i}: {}",
                        r.dump()
                    );
                    if op <= 1 && r.code == Some(0) {
                        let v = r.json();
                        if v["saved"] == true {
                            acked
                                .lock()
                                .unwrap()
                                .push(v["id"].as_str().unwrap().to_string());
                        }
                    }
                    counts.lock().unwrap()[op] += 1;
                }
            });
        }
    });
    stop.store(true, Ordering::Relaxed);
    let writes = w.join().unwrap();

    let acked = acked.lock().unwrap().clone();
    let mut distinct = acked.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), acked.len(), "two saves reported one id");
    let log = ws.log_ids();
    assert_untorn(&ws, &acked, &log);
    assert_store_verifies(&ws, "after the agents");
    assert!(store_leftovers(&ws.store).is_empty());
    assert!(workspace_temps(&ws.root).is_empty());
    eprintln!(
        "{n} agents: ops by kind (save, save, restore, diff, status, put, cas) {:?}, \
         {} checkpoints all whole, {writes} writer changes, slowest command {} ms",
        counts.lock().unwrap(),
        acked.len(),
        slowest.load(Ordering::Relaxed)
    );
}

#[test]
fn two_agents_and_a_writer() {
    agents(2, 30 * soak());
}

#[test]
fn four_agents_and_a_writer() {
    agents(4, 20 * soak());
}

#[test]
fn eight_agents_and_a_writer() {
    agents(8, 12 * soak());
}
