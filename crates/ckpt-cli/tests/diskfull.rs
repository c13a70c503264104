//! Undo on a full disk (issue 19, item 1), on a small tmpfs that fills up:
//! the store on it too, or on another filesystem with only the workspace on
//! it. A restore frees space before it uses space, copies nothing the store
//! already holds, `--no-save` writes nothing to the store, a pre-restore
//! save that cannot fit is refused (exit 9) with nothing changed and the
//! paths `--no-save` would lose named, and a save that runs out of space
//! leaves store, index and `status` truthful (a first save of many files
//! too, whose objects are staged by shard). Every acknowledged checkpoint
//! still verifies and restores byte for byte.
//!
//! Mounting a tmpfs needs root (`common::skip_needs_root`: a failure under
//! `CI=true` when not root).

mod common;

use std::io::Write;
use std::path::Path;

use common::*;

/// Writes random bytes to `rel` until the filesystem is full (or `max`
/// bytes are written); returns how many were written.
fn fill(root: &Path, rel: &str, max: usize, rng: &mut Rng) -> usize {
    let mut f = std::fs::File::create(root.join(rel)).unwrap();
    let mut n = 0;
    while n < max {
        let chunk = rng.bytes(64 * 1024.min(max - n));
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("write {rel}: {e}"),
        }
    }
    n
}

/// The paths and statuses of `ckpt status --json`.
#[track_caller]
fn status(ws: &Ws) -> Vec<(String, String)> {
    let v = ws.run(&["status", "--json"]).ok().json();
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The reproduction of issue 19: on a 5 MB tmpfs holding workspace and
/// store, big1.bin is saved as v1, then big2.bin fills the disk.
#[test]
fn undo_on_a_full_disk_that_also_holds_the_store() {
    let Some(fs) = Tmpfs::mount_or_skip("5m") else {
        return;
    };
    let mut rng = Rng::new("full_disk_same_fs", 19);
    let ws = Ws::new_in(fs.path());
    ws.init();
    write(&ws.root, "big1.bin", &rng.bytes(1_800_000));
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    fill(&ws.root, "big2.bin", usize::MAX, &mut rng);
    assert!(free_bytes(fs.path()) < 64 * 1024, "the disk is not full");
    let s2 = snapshot(&ws.root);
    let log = ws.log_ids();

    // The pre-restore save cannot fit: refused with its own exit code,
    // naming what `--no-save` would lose; nothing changed.
    let r = ws.run(&["restore", &v1]).code(9);
    for needle in [
        "no space to save the current state before restoring",
        "nothing was changed",
        "--no-save",
        "A big2.bin",
    ] {
        assert!(r.stderr.contains(needle), "no {needle:?}:\n{}", r.dump());
    }
    assert_same(&s2, &snapshot(&ws.root), "after the refused restore");
    assert_eq!(ws.log_ids(), log, "the refused restore changed the log");
    assert!(store_leftovers(&ws.store).is_empty());

    // A save that runs out of space: fails, leaves the store consistent,
    // and `status` still shows the unsaved file.
    let r = ws.run(&["save"]).code(1);
    assert!(r.stderr.contains("No space left"), "{}", r.dump());
    assert_eq!(ws.log_ids(), log, "the failed save changed the log");
    assert!(store_leftovers(&ws.store).is_empty());
    assert_store_verifies(&ws, "after the failed save");
    assert_eq!(status(&ws), [("big2.bin".into(), "added".into())]);

    // `--no-save` only deletes big2.bin.
    ws.run(&["restore", &v1, "--no-save"]).ok();
    assert_same(&s1, &snapshot(&ws.root), "restore --no-save");
    assert_eq!(status(&ws), []);
    assert_eq!(ws.log_ids(), log, "--no-save recorded a checkpoint");
    // Everything works again: a restore of the current checkpoint, save,
    // verify.
    ws.run(&["restore", "HEAD"]).ok();
    assert_eq!(ws.save(), (v1.clone(), false));
    ws.run(&["verify", &v1]).ok();
    assert_store_verifies(&ws, "at the end");
    assert!(workspace_temps(&ws.root).is_empty());
}

/// A first save of many small files into a store on a full disk: past the
/// 32 objects fsynced one by one, its objects go into staged shards below
/// `tmp/` (store/objects.rs, "Placing a fresh shard whole"). Running out of
/// space there names no object and leaves nothing behind; a save that fits
/// then places them all.
#[test]
fn a_large_save_that_runs_out_of_space_names_no_object() {
    let Some(fs) = Tmpfs::mount_or_skip("3m") else {
        return;
    };
    let mut rng = Rng::new("a_large_save_that_runs_out_of_space", 23);
    let mut ws = Ws::new();
    ws.store = fs.path().join("store");
    ws.init();
    // 4.8 MB of distinct small files for a 3 MB store.
    for i in 0..600 {
        write(
            &ws.root,
            &format!("d{:02}/f{i:03}.bin", i % 20),
            &rng.bytes(8192),
        );
    }
    let r = ws.run(&["save"]).code(1);
    assert!(r.stderr.contains("No space left"), "{}", r.dump());
    assert_eq!(
        ws.log_ids(),
        Vec::<String>::new(),
        "the failed save recorded"
    );
    assert!(
        store_leftovers(&ws.store).is_empty(),
        "{:?}",
        store_leftovers(&ws.store)
    );
    assert_eq!(ws.object_count(), 0, "the failed save named objects");
    assert_store_verifies(&ws, "after the failed save");

    // 200 files fit: every one is placed and restores.
    for i in 200..600 {
        std::fs::remove_file(ws.root.join(format!("d{:02}/f{i:03}.bin", i % 20))).unwrap();
    }
    let want = snapshot(&ws.root);
    let (id, saved) = ws.save();
    assert!(saved);
    assert_eq!(ws.object_count(), 200);
    assert!(store_leftovers(&ws.store).is_empty());
    assert_store_verifies(&ws, "after the save that fits");
    ws.assert_restores(&id, &want);
}

/// The store on another filesystem, the workspace's full: a restore frees
/// space first (deletions, then files that shrink) and needs no copy of
/// what the store holds, with or without the pre-restore save.
#[test]
fn restore_frees_space_before_it_uses_space() {
    let Some(fs) = Tmpfs::mount_or_skip("5m") else {
        return;
    };
    let mut rng = Rng::new("full_disk_other_fs", 7);
    let ws = Ws::new();
    std::fs::remove_dir(&ws.root).unwrap();
    let root = fs.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(&root, &ws.root).unwrap();
    ws.init();
    // v1: a.bin large, b.bin small. v2: the other way round, and c.bin.
    write(&root, "a.bin", &rng.bytes(2_400_000));
    write(&root, "b.bin", &rng.bytes(300_000));
    let (v1, _) = ws.save();
    let s1 = snapshot(&root);
    write(&root, "a.bin", &rng.bytes(300_000));
    write(&root, "b.bin", &rng.bytes(2_400_000));
    write(&root, "c.bin", &rng.bytes(500_000));
    let (v2, _) = ws.save();
    let s2 = snapshot(&root);
    // Leave less room than a.bin needs even after c.bin is gone: only
    // shrinking b.bin first makes room for a.bin.
    let pad = fs.path().join("pad");
    let free = free_bytes(fs.path()) as usize;
    std::fs::write(&pad, rng.bytes(free - 1_200_000)).unwrap();
    for (id, want) in [(&v1, &s1), (&v2, &s2), (&v1, &s1)] {
        let r = ws.run(&["restore", id, "--json"]).ok().json();
        assert_same(want, &snapshot(&root), &format!("restore {id}"));
        assert_eq!(r["pre_save"], serde_json::Value::Null, "{r}");
    }
    for (id, want) in [(&v2, &s2), (&v1, &s1)] {
        ws.run(&["restore", id, "--no-save"]).ok();
        assert_same(want, &snapshot(&root), &format!("restore {id} --no-save"));
        assert_eq!(status(&ws), []);
    }
    assert_eq!(ws.log_ids(), [v2.clone(), v1.clone()]);
    assert_store_verifies(&ws, "at the end");
}

/// Random writes, saves and undos on a nearly full tmpfs. Saves that fail
/// leave the log, the store and `status` truthful; `restore --no-save` to
/// the last acknowledged checkpoint always works; a restore with its save
/// either works or is refused with exit 9 and nothing changed; at the end
/// every acknowledged checkpoint verifies and restores byte for byte.
#[test]
fn random_work_on_a_nearly_full_disk_never_loses_a_checkpoint() {
    for (seed, store_on_tmpfs) in [(1, true), (2, false), (3, true), (4, false)] {
        let Some(fs) = Tmpfs::mount_or_skip("6m") else {
            return;
        };
        random_work(&fs, seed, store_on_tmpfs);
    }
}

fn random_work(fs: &Tmpfs, seed: u64, store_on_tmpfs: bool) {
    let mut rng = Rng::new(
        &format!("random_work (store on the tmpfs: {store_on_tmpfs})"),
        seed,
    );
    let ws = match store_on_tmpfs {
        true => Ws::new_in(fs.path()),
        false => {
            let ws = Ws::new();
            std::fs::remove_dir(&ws.root).unwrap();
            std::fs::create_dir(fs.path().join("ws")).unwrap();
            std::os::unix::fs::symlink(fs.path().join("ws"), &ws.root).unwrap();
            ws
        }
    };
    let root = ws.root.canonicalize().unwrap();
    ws.init();
    let names = ["a.bin", "b.bin", "c.bin", "d/e.bin", "d/f.txt"];
    std::fs::create_dir(root.join("d")).unwrap();
    let (first, _) = ws.save();
    // Every checkpoint recorded (oldest first), and HEAD.
    let mut acked = vec![(first, snapshot(&root))];
    let mut head = acked[0].clone();
    // Failed saves, refused restores, restores, undos: printed at the end.
    let mut seen = [0u32; 4];
    for step in 0..30 {
        let what = format!("seed {seed}, step {step}");
        let name = names[rng.below(names.len() as u64) as usize];
        let newest = acked.last().unwrap().0.clone();
        let before = snapshot(&root);
        match rng.below(8) {
            0..=2 => {
                let max = 200_000 + rng.below(1_800_000) as usize;
                fill(&root, name, max, &mut rng);
            }
            3 => {
                let _ = std::fs::remove_file(root.join(name));
            }
            4..=5 => {
                let r = ws.run(&["save", "--json"]);
                if r.code == Some(0) {
                    let v = r.json();
                    if v["saved"] == true {
                        acked.push((v["id"].as_str().unwrap().to_string(), before));
                        head = acked.last().unwrap().clone();
                    }
                    continue;
                }
                assert!(r.stderr.contains("No space left"), "{what}: {}", r.dump());
                seen[0] += 1;
                assert_eq!(ws.log_ids()[0], newest, "{what}: the failed save recorded");
                assert!(store_leftovers(&ws.store).is_empty(), "{what}");
                assert_eq!(
                    status(&ws).is_empty(),
                    files(&before) == files(&head.1),
                    "{what}: status after the failed save"
                );
            }
            6 => {
                // Back to HEAD, with the pre-restore save.
                let r = ws.run(&["restore", &head.0, "--json"]);
                match r.code {
                    Some(0) => {
                        seen[2] += 1;
                        assert_same(&head.1, &snapshot(&root), &what)
                    }
                    Some(9) => {
                        seen[1] += 1;
                        assert_same(&before, &snapshot(&root), &what);
                        assert_eq!(ws.log_ids()[0], newest, "{what}: refused, yet recorded");
                    }
                    // The pre-restore save fit but the files did not (the
                    // store holds both now): an interrupted restore, its
                    // pre-restore save recorded.
                    Some(1) if store_on_tmpfs && r.stderr.contains("No space left") => {
                        let v = ws.run(&["status", "--json"]).ok().json();
                        assert!(!v["interrupted_restore"].is_null(), "{what}: {v}");
                        let log = ws.log_ids();
                        if log[0] != newest {
                            acked.push((log[0].clone(), before.clone()));
                        }
                    }
                    _ => panic!("{what}: restore {}: {}", head.0, r.dump()),
                }
                if r.code == Some(0) {
                    if let Some(p) = r.json()["pre_save"].as_str() {
                        acked.push((p.to_string(), before));
                    }
                }
            }
            _ => {
                // Undo to the newest checkpoint, dropping what is unsaved.
                head = acked.last().unwrap().clone();
                seen[3] += 1;
                ws.run(&["restore", &head.0, "--no-save"]).ok();
                assert_same(&head.1, &snapshot(&root), &format!("{what}: undo"));
            }
        }
    }
    eprintln!(
        "seed {seed}: {} checkpoints, {} failed saves, {} restores refused (exit 9), \
         {} restores, {} undos with --no-save",
        acked.len(),
        seen[0],
        seen[1],
        seen[2],
        seen[3]
    );
    assert_store_verifies(&ws, &format!("seed {seed}"));
    // Each restores byte for byte into a directory on another filesystem.
    let other = tempfile::tempdir_in(test_base()).unwrap();
    for (i, (id, snap)) in acked.iter().enumerate() {
        let dest = other.path().join(i.to_string());
        ws.run(&["restore", id, "--to", dest.to_str().unwrap()])
            .ok();
        assert_same(
            snap,
            &snapshot(&dest),
            &format!("seed {seed}: restore {id} --to"),
        );
    }
    // Undo to each acknowledged checkpoint in place, newest first (with the
    // store elsewhere each one fits on the disk it was saved from).
    if !store_on_tmpfs {
        for (id, snap) in acked.iter().rev() {
            ws.run(&["restore", id, "--no-save"]).ok();
            assert_same(
                snap,
                &snapshot(&root),
                &format!("seed {seed}: undo to {id}"),
            );
            ws.run(&["verify", id]).ok();
        }
    }
}

/// The regular files of a snapshot and their bytes (what `status` compares
/// besides mtimes, which a failed write also moves).
fn files(s: &Snapshot) -> Vec<(&Vec<u8>, &Vec<u8>)> {
    s.iter()
        .filter_map(|(p, e)| match &e.what {
            What::File(c) => Some((p, c)),
            _ => None,
        })
        .collect()
}
