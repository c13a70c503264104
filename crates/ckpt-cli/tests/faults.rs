//! Crash at every durable-step boundary: for each point in
//! [`ckpt_fault::POINTS`] (the one list of crash points in save, restore,
//! delete, gc and agent-state commits), run the operation that reaches it in
//! a child `ckpt` with `CKPT_FAULT=point[:N]`, which SIGKILLs itself there.
//! Then prove, deterministically (no timing involved):
//! - the child really died at the point (so the list cannot rot: a point
//!   that is no longer reached fails the test);
//! - the store opens, `ckpt verify --store` is clean, and after that one
//!   command no temporary file is left in the store;
//! - every checkpoint acknowledged before the crash restores exactly, and a
//!   checkpoint the killed save may have committed restores to what it
//!   captured;
//! - an interrupted restore re-run yields the target exactly (files and
//!   agent state), leaves no `.ckpt-tmp.*`, and its undo id gives back the
//!   pre-restore files and state;
//! - an interrupted gc leaves every live checkpoint restorable and a second
//!   gc leaves exactly the live objects;
//! - a state commit killed before redb's commit is absent, after it present;
//! - finally, restoring the first checkpoint in place gives its files and
//!   its agent state (its pinned state version survived).
//!
//! The binary gets the points because ckpt-cli's dev-dependencies enable
//! ckpt-lib's `fault-injection` feature for test builds (release builds
//! have none).

mod common;

use common::*;

/// The fixture: v1 and v2 acknowledged, with agent state "one"/"two", and
/// the workspace edited since (state "three"), so a save has work to do and
/// a restore of v1 has files to write, add and remove.
struct Fixture {
    ws: Ws,
    v1: String,
    s1: Snapshot,
    v2: String,
    s2: Snapshot,
    s3: Snapshot,
}

fn fixture(rng: &mut Rng) -> Fixture {
    let ws = Ws::new();
    build_tree(&ws.root, 3, 20, rng);
    ws.init();
    ws.run(&["state", "put", "plan", "one"]).ok();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    // v2: a new directory of 40 files, some edits, a deletion, a chmod.
    fill_dir(&ws.root, "m", 40, rng);
    for i in 0..5 {
        write(&ws.root, &format!("d00/f{i:04}.txt"), &rng.text(200));
    }
    std::fs::remove_file(ws.root.join("d01/f0000.txt")).unwrap();
    chmod(&ws.root.join("d02/f0001.txt"), 0o600);
    ws.run(&["state", "put", "plan", "two"]).ok();
    let (v2, _) = ws.save();
    let s2 = snapshot(&ws.root);
    // The unsaved state: v2's new directory gone again (its objects become
    // garbage once v2 is deleted), new content, a big file rewritten.
    remove_tree(&ws.root.join("m"));
    // Enough new files that, past the 32 fsynced one by one, the save
    // stages fresh shards (so it reaches the `objects.*shard_rename` points).
    fill_dir(&ws.root, "n", 120, rng);
    for i in 5..10 {
        write(&ws.root, &format!("d00/f{i:04}.txt"), &rng.text(200));
    }
    write(&ws.root, "big/blob2.bin", &rng.bytes(100_000));
    ws.run(&["state", "put", "plan", "three"]).ok();
    let s3 = snapshot(&ws.root);
    Fixture {
        ws,
        v1,
        s1,
        v2,
        s2,
        s3,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Save,
    Restore,
    Delete,
    Gc,
    StatePut,
}

/// Which operation reaches a point first.
fn op_for(point: &str) -> Op {
    match point.split('.').next().unwrap() {
        "save" | "objects" | "catalog" | "index" => Op::Save,
        "restore" => Op::Restore,
        "delete" => Op::Delete,
        "gc" => Op::Gc,
        "state" if point.starts_with("state.gc") => Op::Gc,
        "state" => Op::StatePut,
        other => panic!("crash point {point}: no operation known for prefix {other}"),
    }
}

/// Points hit once per item (object, file, deleted object): also crashed at
/// the third hit, in the middle of the batch.
const PER_ITEM: &[&str] = &[
    "objects.before_shard_rename",
    "objects.after_shard_rename",
    "objects.before_rename",
    "objects.after_rename",
    "restore.after_tmp_write",
    "restore.after_rename",
    "gc.after_delete",
];

#[test]
fn crash_at_every_fault_point() {
    let mut rng = Rng::new("crash_at_every_fault_point", 8);
    let mut cases: Vec<String> = ckpt_fault::POINTS.iter().map(|p| p.to_string()).collect();
    cases.extend(PER_ITEM.iter().map(|p| format!("{p}:3")));
    let mut outcomes = Vec::new();
    for fault in &cases {
        let point = fault.split(':').next().unwrap();
        outcomes.push(crash_case(fault, op_for(point), &mut rng));
    }
    eprintln!(
        "{} crash cases, all recovered: {}",
        cases.len(),
        outcomes.join(", ")
    );
}

/// One crash at `fault` during `op`, then every check. Returns a word for
/// the summary.
fn crash_case(fault: &str, op: Op, rng: &mut Rng) -> String {
    let f = fixture(rng);
    let ws = &f.ws;
    let ctx = format!("CKPT_FAULT={fault} during {op:?}");
    let mut v3 = None;
    if op == Op::Gc {
        // Garbage to collect: v2's files and its state version "two".
        let (id, _) = ws.save();
        ws.run(&["delete", &f.v2]).ok();
        v3 = Some(id);
    }
    let args: Vec<&str> = match op {
        Op::Save => vec!["save", "--json"],
        Op::Restore => vec!["restore", &f.v1, "--json"],
        Op::Delete => vec!["delete", &f.v2],
        Op::Gc => vec!["gc", "--json"],
        Op::StatePut => vec!["state", "put", "plan", "four"],
    };
    let r = ckpt_with_fault(&ws.root, &args, fault);
    assert_eq!(
        r.code,
        None,
        "{ctx}: the process was not killed at the point (is the point still reached, \
         and is the binary built with the fault-injection feature?):\n{}",
        r.dump()
    );

    // The store opens, and that one command cleans every temporary.
    let ids = ws.log_ids();
    let left = store_leftovers(&ws.store);
    assert!(
        left.is_empty(),
        "{ctx}: temporary files left in the store after the next command: {left:?}"
    );
    assert_store_verifies(ws, &ctx);

    // Acknowledged checkpoints are all there and restore exactly.
    ws.assert_restores(&f.v1, &f.s1);
    let v2_alive = ids.contains(&f.v2);
    match op {
        Op::Delete | Op::Gc => {}
        _ => assert!(v2_alive, "{ctx}: acknowledged {} vanished: {ids:?}", f.v2),
    }
    if v2_alive {
        ws.assert_restores(&f.v2, &f.s2);
    }
    if let Some(v3) = &v3 {
        assert!(ids.contains(v3), "{ctx}: acknowledged {v3} vanished");
        ws.assert_restores(v3, &f.s3);
    }

    let outcome = match op {
        Op::Save => {
            let extra: Vec<&String> = ids.iter().filter(|i| **i != f.v1 && **i != f.v2).collect();
            assert!(extra.len() <= 1, "{ctx}: unexpected checkpoints {extra:?}");
            for id in &extra {
                ws.assert_restores(id, &f.s3);
            }
            let (id, _) = ws.save();
            ws.assert_restores(&id, &f.s3);
            if extra.is_empty() {
                "lost-unacked"
            } else {
                "committed"
            }
        }
        Op::Restore => {
            let before = snapshot(&ws.root);
            let st = ws.run(&["status", "--json"]).ok().json();
            if st["interrupted_restore"].is_null() {
                assert!(
                    before == f.s3 || before == f.s1,
                    "{ctx}: no interrupted restore reported, but the workspace is neither \
                     the pre-restore state nor the target"
                );
            } else {
                assert_eq!(st["interrupted_restore"].as_str(), Some(f.v1.as_str()));
            }
            let rr = ws.run(&["restore", &f.v1, "--json"]).ok().json();
            assert_same(
                &f.s1,
                &snapshot(&ws.root),
                &format!("{ctx}: re-run restore"),
            );
            assert_eq!(state_get(ws, "plan").as_deref(), Some("one"), "{ctx}");
            let wt = workspace_temps(&ws.root);
            assert!(wt.is_empty(), "{ctx}: workspace temp files: {wt:?}");
            let st = ws.run(&["status", "--json"]).ok().json();
            assert_eq!(st["clean"], true, "{ctx}: status after the re-run: {st}");
            if before != f.s1 {
                let undo = rr["undo"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{ctx}: no undo id: {rr}"))
                    .to_string();
                ws.run(&["restore", &undo]).ok();
                assert_same(&f.s3, &snapshot(&ws.root), &format!("{ctx}: undo"));
                assert_eq!(state_get(ws, "plan").as_deref(), Some("three"), "{ctx}");
                "resumed"
            } else {
                "finished"
            }
        }
        Op::Delete => {
            if v2_alive {
                ws.run(&["delete", &f.v2]).ok();
                "not-deleted"
            } else {
                "deleted"
            }
        }
        Op::Gc => {
            let g = ws.run(&["gc", "--json"]).ok().json();
            assert_eq!(
                g["objects_live"].as_u64().unwrap() as usize,
                ws.object_count(),
                "{ctx}: after a second gc the store holds dead objects: {g}"
            );
            ws.assert_restores(&f.v1, &f.s1);
            ws.assert_restores(v3.as_ref().unwrap(), &f.s3);
            "collected"
        }
        Op::StatePut => {
            let want = if fault.starts_with("state.after_commit") {
                "four"
            } else {
                "three"
            };
            assert_eq!(state_get(ws, "plan").as_deref(), Some(want), "{ctx}");
            ws.run(&["state", "put", "plan", "five"]).ok();
            assert_eq!(state_get(ws, "plan").as_deref(), Some("five"), "{ctx}");
            "state-ok"
        }
    };

    // In place: back to v1, files and agent state.
    ws.run(&["restore", &f.v1]).ok();
    assert_same(&f.s1, &snapshot(&ws.root), &format!("{ctx}: restore v1"));
    assert_eq!(
        state_get(ws, "plan").as_deref(),
        Some("one"),
        "{ctx}: v1's state"
    );
    assert!(store_leftovers(&ws.store).is_empty(), "{ctx}");
    assert!(workspace_temps(&ws.root).is_empty(), "{ctx}");
    format!("{fault}={outcome}")
}
