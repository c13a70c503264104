//! Crash tests: the real `ckpt` binary is SIGKILLed at random points during
//! `save`, `restore` and `gc`. Only the kill point depends on timing; the
//! verdict never does. After every kill we prove that:
//! - the store opens (`ckpt log --json` succeeds) and its `tmp/` is empty;
//! - every checkpoint acknowledged before (an id printed by a save that
//!   exited 0) still restores exactly (`restore --to`, compared with a
//!   snapshot taken when it was saved), and a checkpoint the killed process
//!   may have committed restores exactly to the state it captured;
//! - the next `ckpt save` succeeds and restores exactly, and leaves no
//!   `.ckpt-tmp.*` file in the workspace;
//! - an interrupted restore is either reported by `ckpt status` or did not
//!   touch the workspace or completed, and re-running it yields the target
//!   tree exactly (and its undo id gives back the pre-restore tree);
//! - an interrupted gc leaves every remaining checkpoint restorable, a
//!   second gc completes, and later saves never reference freed objects.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

/// Starts `ckpt ARGS` in `cwd`, SIGKILLs it after `delay` (unless it has
/// exited), and returns how it ended.
fn run_and_kill(cwd: &Path, args: &[&str], delay: Duration) -> Run {
    let mut child = spawn(cwd, args);
    std::thread::sleep(delay);
    let _ = child.kill();
    finish(
        child,
        &format!("ckpt {} (killed after {delay:?})", args.join(" ")),
    )
}

/// Whether a signal (our SIGKILL) ended the process.
fn killed(r: &Run) -> bool {
    r.code.is_none()
}

/// Asserts the store is empty of temporaries and returns the log ids.
#[track_caller]
fn store_opens(ws: &Ws, ctx: &str) -> Vec<String> {
    let r = ws.run(&["log", "--json"]);
    assert_eq!(
        r.code,
        Some(0),
        "{ctx}: the store does not open after a kill:\n{}",
        r.dump()
    );
    let ids = ws.log_ids();
    let temps = ws.store_temps();
    assert!(
        temps.is_empty(),
        "{ctx}: store tmp/ not cleaned by the next command: {temps:?}"
    );
    ids
}

fn file_list(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(root).unwrap() {
        let d = d.unwrap();
        let name = d.file_name().to_string_lossy().into_owned();
        if d.file_type().unwrap().is_dir() && (name.starts_with('d') || name.starts_with('n')) {
            for f in std::fs::read_dir(d.path()).unwrap() {
                out.push(f.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

fn top_dirs(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| (n.starts_with('d') || n.starts_with('n')) && root.join(n).is_dir())
        .collect();
    v.sort();
    v
}

/// A small edit: always changes something.
fn small_edit(root: &Path, iter: usize, rng: &mut Rng) {
    let files = file_list(root);
    for _ in 0..3 {
        let f = &files[rng.below(files.len() as u64) as usize];
        let mut c = std::fs::read(f).unwrap();
        c.extend(rng.text(20));
        std::fs::write(f, c).unwrap();
    }
    let victim = &files[rng.below(files.len() as u64) as usize];
    let _ = std::fs::remove_file(victim);
    write(root, &format!("d00/added-{iter}.txt"), &rng.text(100));
    let f = &files[rng.below(files.len() as u64) as usize];
    if f.exists() {
        chmod(f, if rng.below(2) == 0 { 0o600 } else { 0o755 });
    }
    let len = 70_000 + rng.below(50_000) as usize;
    write(root, "big/blob2.bin", &rng.bytes(len));
}

/// A big edit, so the next save has much to store.
fn big_edit(root: &Path, iter: usize, rng: &mut Rng) {
    let dirs = top_dirs(root);
    match rng.below(3) {
        0 => fill_dir(root, &format!("n{iter:02}"), 1000, rng),
        1 => {
            // Rewrite every file of the largest few directories.
            for d in dirs.iter().take(6) {
                fill_dir(root, d, 100, rng);
            }
            fill_dir(root, &format!("n{iter:02}"), 400, rng);
        }
        _ => {
            let d = &dirs[rng.below(dirs.len() as u64) as usize];
            remove_tree(&root.join(d));
            fill_dir(root, &format!("n{iter:02}"), 900, rng);
        }
    }
}

#[test]
fn save_killed_at_random_points() {
    let mut rng = Rng::new("save_killed_at_random_points", Rng::time_seed());
    const ROUNDS: usize = 3;
    const PER_ROUND: usize = 10;

    // Calibrate: how long a first save of this shape takes here.
    let calib = {
        let ws = Ws::new();
        build_tree(&ws.root, 20, 100, &mut rng);
        ws.init();
        let t = Instant::now();
        ws.save();
        t.elapsed()
    };
    eprintln!("first save of ~2000 files takes {calib:?}");
    let mut bound_big = calib.mul_f64(1.3);
    let mut bound_small = Duration::from_millis(150);
    let mut kills = 0;

    for round in 0..ROUNDS {
        let ws = Ws::new();
        build_tree(&ws.root, 20, 100, &mut rng);
        ws.init();
        let mut acked: Vec<(String, Snapshot)> = Vec::new();
        for iter in 0..PER_ROUND {
            let big = iter == 0 || rng.below(2) == 0;
            if iter > 0 {
                if big {
                    big_edit(&ws.root, iter, &mut rng);
                } else {
                    small_edit(&ws.root, iter, &mut rng);
                }
            }
            let before = snapshot(&ws.root);
            let bound = if big { bound_big } else { bound_small };
            let delay = Duration::from_micros(rng.below(bound.as_micros() as u64 + 1));
            let ctx = format!(
                "round {round} iter {iter} ({}, kill after {delay:?})",
                if big { "big" } else { "small" }
            );
            let r = run_and_kill(&ws.root, &["save", "--json", "-m", "crash"], delay);
            if killed(&r) {
                kills += 1;
            } else {
                // Finished before the kill: it must have succeeded.
                let r = r.ok();
                acked.push((r.json()["id"].as_str().unwrap().to_string(), before.clone()));
            }

            let ids = store_opens(&ws, &ctx);
            for (id, _) in &acked {
                assert!(
                    ids.contains(id),
                    "{ctx}: acknowledged checkpoint {id} vanished from the log: {ids:?}"
                );
            }
            let extra: Vec<&String> = ids
                .iter()
                .filter(|i| !acked.iter().any(|(a, _)| a == *i))
                .collect();
            assert!(
                extra.len() <= 1,
                "{ctx}: more than one unacknowledged checkpoint: {extra:?}"
            );
            for id in &extra {
                // The killed save got as far as committing: it must be complete.
                ws.assert_restores(id, &before);
            }

            // The next save succeeds and restores exactly.
            let t = Instant::now();
            let (id, saved) = ws.save();
            let took = t.elapsed();
            if !saved {
                assert!(
                    extra.contains(&&id) || acked.last().is_some_and(|(a, _)| *a == id),
                    "{ctx}: save said nothing changed since {id}, which is not the state just captured"
                );
            }
            ws.assert_restores(&id, &before);
            if !acked.iter().any(|(a, _)| *a == id) {
                acked.push((id, before.clone()));
            }
            let wt = workspace_temps(&ws.root);
            assert!(
                wt.is_empty(),
                "{ctx}: temp files left in the workspace: {wt:?}"
            );
            assert!(
                ws.store_temps().is_empty(),
                "{ctx}: temp files left in the store"
            );

            // One older acknowledged checkpoint, chosen at random.
            let (old, snap) = &acked[rng.below(acked.len() as u64) as usize];
            ws.assert_restores(old, snap);

            let b = took.mul_f64(1.5).max(Duration::from_millis(20));
            if big {
                bound_big = b.max(bound_big / 2);
            } else {
                bound_small = b;
            }
        }
        // Every acknowledged checkpoint of the round, at the end.
        for (id, snap) in &acked {
            ws.assert_restores(id, snap);
        }
        // And in place: back to the first one, exactly.
        ws.run(&["restore", &acked[0].0]).ok();
        assert_same(
            &acked[0].1,
            &snapshot(&ws.root),
            "in-place restore after the crash round",
        );
        let st = ws.run(&["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "status not clean after restore: {st}");
    }
    eprintln!(
        "{kills} of {} saves were killed before finishing",
        ROUNDS * PER_ROUND
    );
}

#[test]
fn restore_killed_at_random_points() {
    let mut rng = Rng::new("restore_killed_at_random_points", Rng::time_seed());
    const ITERS: usize = 8;
    let ws = Ws::new();
    build_tree(&ws.root, 4, 50, &mut rng);
    fill_dir(&ws.root, "many", 2000, &mut rng);
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    // The pre-restore state: the 2000-file directory gone, some edits.
    remove_tree(&ws.root.join("many"));
    small_edit(&ws.root, 0, &mut rng);
    let (v2, _) = ws.save();
    let s_pre = snapshot(&ws.root);

    // Calibrate with a full restore and its undo.
    let t = Instant::now();
    let r = ws.run(&["restore", &v1, "--json"]).ok().json();
    let calib = t.elapsed();
    assert_same(&s1, &snapshot(&ws.root), "calibration restore");
    let undo = r["undo"].as_str().unwrap().to_string();
    ws.run(&["restore", &undo]).ok();
    assert_same(
        &s_pre,
        &snapshot(&ws.root),
        "undo of the calibration restore",
    );
    eprintln!("restore of 2000 files takes {calib:?}");

    let mut outcomes = [0usize; 3];
    for iter in 0..ITERS {
        // Some early kills (during the pre-restore save), most anywhere.
        let span = if iter % 4 == 0 {
            calib / 8
        } else {
            calib.mul_f64(1.2)
        };
        let delay = Duration::from_micros(rng.below(span.as_micros() as u64 + 1));
        let ctx = format!("iter {iter} (kill after {delay:?})");
        let r = run_and_kill(&ws.root, &["restore", &v1], delay);
        if !killed(&r) {
            r.ok();
        }
        store_opens(&ws, &ctx);
        let st = ws.run(&["status", "--json"]).ok().json();
        let now = snapshot(&ws.root);
        match st["interrupted_restore"].as_str() {
            Some(t) => {
                assert_eq!(
                    t, v1,
                    "{ctx}: status reports an interrupted restore of the wrong checkpoint: {st}"
                );
                outcomes[1] += 1;
            }
            None => {
                // Not reported: then it either did not start changing the
                // workspace, or finished.
                let done = now == s1;
                assert!(
                    done || now == s_pre,
                    "{ctx}: status reports no interrupted restore, but the workspace is neither the pre-restore \
                     state nor the target: {st}"
                );
                if done {
                    assert_eq!(
                        st["clean"], true,
                        "{ctx}: restore finished but status is not clean: {st}"
                    );
                }
                outcomes[if done { 2 } else { 0 }] += 1;
            }
        }
        let finished = st["interrupted_restore"].is_null() && now == s1;

        // Re-running it yields the target, exactly, with no temp files.
        let r = ws.run(&["restore", &v1, "--json"]).ok().json();
        assert_same(&s1, &snapshot(&ws.root), &format!("{ctx}: re-run restore"));
        let wt = workspace_temps(&ws.root);
        assert!(
            wt.is_empty(),
            "{ctx}: temp files left in the workspace after the re-run: {wt:?}"
        );
        let st = ws.run(&["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "{ctx}: status after the re-run: {st}");
        assert!(
            st["interrupted_restore"].is_null(),
            "{ctx}: journal not cleared: {st}"
        );

        // Checkpoints that existed before still restore exactly.
        ws.assert_restores(&v1, &s1);
        ws.assert_restores(&v2, &s_pre);

        // The undo id gives back the pre-restore state (unless the killed
        // restore had already finished, when the re-run had nothing to undo).
        let undo = r["undo"].as_str().map(str::to_string);
        if !finished {
            let undo = undo.unwrap_or_else(|| panic!("{ctx}: no undo id: {r}"));
            ws.assert_restores(&undo, &s_pre);
        }
        // Back to the pre-restore state for the next round.
        ws.run(&["restore", &v2]).ok();
        assert_same(
            &s_pre,
            &snapshot(&ws.root),
            &format!("{ctx}: back to the pre-restore state"),
        );
    }
    eprintln!(
        "outcomes: untouched {}, reported interrupted {}, finished {}",
        outcomes[0], outcomes[1], outcomes[2]
    );
}

#[test]
fn gc_killed_at_random_points() {
    let mut rng = Rng::new("gc_killed_at_random_points", Rng::time_seed());
    const ITERS: usize = 6;
    let ws = Ws::new();
    build_tree(&ws.root, 5, 60, &mut rng);
    ws.init();
    let (v, _) = ws.save();
    let mut live: Vec<(String, Snapshot)> = vec![(v, snapshot(&ws.root))];
    let mut bound = Duration::from_millis(400);
    for iter in 0..ITERS {
        // A: lots of new content; B: it goes away, something new comes.
        fill_dir(&ws.root, &format!("g{iter}"), 1000, &mut rng);
        let (a, _) = ws.save();
        let sa = snapshot(&ws.root);
        remove_tree(&ws.root.join(format!("g{iter}")));
        fill_dir(&ws.root, &format!("h{iter}"), 300, &mut rng);
        let (b, _) = ws.save();
        let sb = snapshot(&ws.root);
        // Odd iterations delete the head itself, so its objects (still in
        // the workspace and in the stat index) become garbage.
        let delete_head = iter % 2 == 1;
        if delete_head {
            ws.run(&["delete", &b]).ok();
            live.push((a, sa));
        } else {
            ws.run(&["delete", &a]).ok();
            live.push((b, sb.clone()));
        }

        let delay = Duration::from_micros(rng.below(bound.as_micros() as u64 + 1));
        let ctx = format!("iter {iter} (kill gc after {delay:?}, deleted head: {delete_head})");
        let r = run_and_kill(&ws.root, &["gc"], delay);
        if !killed(&r) {
            r.ok();
        }
        let ids = store_opens(&ws, &ctx);
        for (id, _) in &live {
            assert!(ids.contains(id), "{ctx}: {id} vanished: {ids:?}");
        }
        // Remaining checkpoints restore exactly (two at random, the latest).
        for _ in 0..2 {
            let (id, s) = &live[rng.below(live.len() as u64) as usize];
            ws.assert_restores(id, s);
        }
        let (id, s) = live.last().unwrap();
        ws.assert_restores(id, s);

        // A second gc completes and leaves exactly the live objects.
        let t = Instant::now();
        let g = ws.run(&["gc", "--json"]).ok().json();
        bound = t.elapsed().mul_f64(1.5).max(Duration::from_millis(50));
        assert_eq!(
            g["objects_live"].as_u64().unwrap() as usize,
            ws.object_count(),
            "{ctx}: after gc the store holds objects that are not live: {g}"
        );

        // Saving now must store again whatever gc freed: the new checkpoint
        // restores exactly.
        small_edit(&ws.root, 100 + iter, &mut rng);
        let (n, saved) = ws.save();
        assert!(saved, "{ctx}: save after gc recorded nothing");
        let sn = snapshot(&ws.root);
        ws.assert_restores(&n, &sn);
        live.push((n, sn));
    }
    for (id, s) in &live {
        ws.assert_restores(id, s);
    }
    ws.run(&["gc"]).ok();
    for (id, s) in &live {
        ws.assert_restores(id, s);
    }
}
