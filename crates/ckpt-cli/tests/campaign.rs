//! The random crash campaign: hundreds of operations (save, in-place
//! restore, delete, gc, agent-state commits) on one workspace, each killed
//! either by SIGKILL after a random delay or at a random crash point
//! (`CKPT_FAULT`, a random point of `ckpt_fault::POINTS` at a random hit),
//! with files and state edited between operations. After every operation:
//! - the store opens and holds no temporary file;
//! - every acknowledged checkpoint is still in the log, one of them chosen
//!   at random restores exactly, and every 10 operations all do and
//!   `verify --store` is clean;
//! - a checkpoint the killed operation created (a save that got as far as
//!   its commit, a pre-restore save) restores to the state before it;
//! - a killed restore, re-run, gives the target's files and agent state
//!   exactly and leaves no `.ckpt-tmp.*`;
//! - a killed state commit left the old value or the new one, nothing else.
//!
//! The verdicts never depend on timing (only where the kill lands does).
//! `CKPT_SOAK=N` runs N times as many operations; `CKPT_TEST_SEED` replays.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;

/// Operations per run (times `CKPT_SOAK`).
const OPS: usize = 150;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Save,
    Restore,
    Delete,
    Gc,
    StatePut,
}

/// An acknowledged checkpoint: its files and its agent state.
#[derive(Clone)]
struct Acked {
    id: String,
    files: Snapshot,
    plan: Option<String>,
}

/// Whether `op` may pass crash point `p` (so armed kills mostly land).
fn reachable(op: Op, p: &str) -> bool {
    let save = ["save.", "objects.", "catalog.", "index."];
    let any = |pre: &[&str]| pre.iter().any(|x| p.starts_with(x));
    match op {
        Op::Save => any(&save),
        Op::Restore => any(&save) || any(&["restore.", "state.before", "state.after"]),
        Op::Delete => p.starts_with("delete."),
        Op::Gc => any(&["gc.", "state.gc", "index."]),
        Op::StatePut => any(&["state.before", "state.after"]),
    }
}

fn edit(ws: &Ws, i: usize, rng: &mut Rng) {
    let n = 1 + rng.below(4);
    for _ in 0..n {
        let d = rng.below(3);
        let f = rng.below(30);
        let rel = format!("d{d:02}/f{f:04}.txt");
        match rng.below(6) {
            0 => {
                let _ = std::fs::remove_file(ws.root.join(&rel));
            }
            1 => fill_dir(&ws.root, &format!("burst{}", rng.below(3)), 60, rng),
            2 => {
                let _ = std::fs::remove_dir_all(ws.root.join(format!("burst{}", rng.below(3))));
            }
            3 => {
                let b = rng.bytes(70_000 + i);
                write(&ws.root, "big/blob2.bin", &b);
            }
            _ => {
                let len = 50 + rng.below(300) as usize;
                write(&ws.root, &rel, &rng.text(len));
            }
        }
    }
}

#[test]
fn random_kills_across_all_operations() {
    let mut rng = Rng::new("random_kills_across_all_operations", Rng::time_seed());
    let ws = Ws::new();
    build_tree(&ws.root, 3, 30, &mut rng);
    ws.init();
    ws.run(&["state", "put", "plan", "p0"]).ok();
    let (v, _) = ws.save();
    let mut acked = vec![Acked {
        id: v,
        files: snapshot(&ws.root),
        plan: Some("p0".into()),
    }];
    let mut plan = Some("p0".to_string());
    let mut took: HashMap<Op, Duration> = HashMap::new();
    let mut kills = 0usize;
    let mut fault_kills = 0usize;
    let ops = OPS * soak();
    let started = Instant::now();

    for i in 0..ops {
        if rng.below(3) > 0 {
            edit(&ws, i, &mut rng);
        }
        let op = match rng.below(10) {
            0..=3 => Op::Save,
            4..=5 => Op::Restore,
            6 => Op::Delete,
            7 => Op::Gc,
            _ => Op::StatePut,
        };
        let target = acked[rng.below(acked.len() as u64) as usize].clone();
        let new_plan = format!("p{}", i + 1);
        let args: Vec<&str> = match op {
            Op::Save => vec!["save", "--json"],
            Op::Restore => vec!["restore", &target.id, "--json"],
            Op::Delete if acked.len() > 2 => vec!["delete", &target.id],
            Op::Delete => vec!["log"],
            Op::Gc => vec!["gc"],
            Op::StatePut => vec!["state", "put", "plan", &new_plan],
        };
        let before_files = snapshot(&ws.root);
        let before_ids = ws.log_ids();
        let by_fault = rng.below(2) == 0;
        let (r, how) = if by_fault {
            let points: Vec<&str> = ckpt_fault::POINTS
                .iter()
                .copied()
                .filter(|p| reachable(op, p))
                .collect();
            let p = points[rng.below(points.len() as u64) as usize];
            let f = format!("{p}:{}", 1 + rng.below(4));
            (ckpt_with_fault(&ws.root, &args, &f), f)
        } else {
            let bound = took.get(&op).copied().unwrap_or(Duration::from_millis(60));
            let delay = Duration::from_micros(rng.below(bound.as_micros() as u64 * 6 / 5 + 1));
            let t = Instant::now();
            let mut child = spawn(&ws.root, &args);
            std::thread::sleep(delay);
            let _ = child.kill();
            let r = finish(child, &format!("{args:?}"));
            if r.code.is_some() {
                took.insert(op, t.elapsed());
            }
            (r, format!("kill after {delay:?}"))
        };
        let ctx = format!("op {i} {op:?} {args:?} ({how})");
        let killed = r.code.is_none();
        if killed {
            kills += 1;
            fault_kills += by_fault as usize;
        } else {
            assert_eq!(
                r.code,
                Some(0),
                "{ctx}: failed without a kill:\n{}",
                r.dump()
            );
        }

        // The store opens and is clean of temporaries.
        let ids = ws.log_ids();
        let left = store_leftovers(&ws.store);
        assert!(left.is_empty(), "{ctx}: temporaries left: {left:?}");

        // Checkpoints the operation created hold the state before it.
        for id in ids.iter().filter(|id| !before_ids.contains(id)) {
            ws.assert_restores(id, &before_files);
        }

        match op {
            Op::Save if !killed => {
                let v = r.json();
                if v["saved"] == true {
                    acked.push(Acked {
                        id: v["id"].as_str().unwrap().to_string(),
                        files: before_files.clone(),
                        plan: plan.clone(),
                    });
                }
            }
            Op::Restore => {
                if killed {
                    ws.run(&["restore", &target.id]).ok();
                }
                assert_same(
                    &target.files,
                    &snapshot(&ws.root),
                    &format!("{ctx}: restored"),
                );
                assert_eq!(state_get(&ws, "plan"), target.plan, "{ctx}: restored state");
                let wt = workspace_temps(&ws.root);
                assert!(wt.is_empty(), "{ctx}: workspace temporaries: {wt:?}");
                plan = target.plan.clone();
            }
            // A finished delete removed the id; a killed one may have.
            Op::Delete if args[0] == "delete" && (!killed || !ids.contains(&target.id)) => {
                assert!(!ids.contains(&target.id), "{ctx}: deleted id still listed");
                acked.retain(|a| a.id != target.id);
            }
            Op::StatePut => {
                let now = state_get(&ws, "plan");
                if !killed {
                    assert_eq!(now.as_deref(), Some(new_plan.as_str()), "{ctx}");
                } else {
                    assert!(
                        now == plan || now.as_deref() == Some(new_plan.as_str()),
                        "{ctx}: state is {now:?}, neither the old {plan:?} nor {new_plan}"
                    );
                }
                plan = now;
            }
            _ => {}
        }

        for a in &acked {
            assert!(ids.contains(&a.id), "{ctx}: acknowledged {} vanished", a.id);
        }
        let a = &acked[rng.below(acked.len() as u64) as usize];
        ws.assert_restores(&a.id, &a.files);
        if i % 10 == 9 {
            assert_store_verifies(&ws, &ctx);
            for a in &acked {
                ws.assert_restores(&a.id, &a.files);
            }
        }
    }
    assert_store_verifies(&ws, "end of campaign");
    for a in &acked {
        ws.assert_restores(&a.id, &a.files);
    }
    eprintln!(
        "campaign: {ops} operations, {kills} killed ({fault_kills} at crash points, {} by timed SIGKILL), \
         {} acknowledged checkpoints all exact, in {:?}",
        kills - fault_kills,
        acked.len(),
        started.elapsed()
    );
}
