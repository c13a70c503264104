//! Watch mode end to end, with the real binary and a real watcher process:
//! random edit sequences (the save through the watcher equals a full-scan
//! save), queue overflow, SIGKILL of the watcher, restore's own writes, a
//! planted socket and a foreign uid, auto-save.
//!
//! No test depends on timing: readiness is `watch --daemon` returning (it
//! polls the watcher's status), and waits are bounded polls.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// A running watcher, stopped (or killed) when dropped.
struct Watcher {
    root: PathBuf,
    pid: i32,
}

/// Held while a watcher starts, and by the overflow test while the
/// system-wide queue limit is lowered (a watcher keeps the limit it was
/// created with, so other tests must not start one meanwhile).
static START: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Watcher {
    #[track_caller]
    fn start(ws: &Ws, extra: &[&str]) -> Watcher {
        let _g = START.lock().unwrap_or_else(|e| e.into_inner());
        Watcher::start_unlocked(ws, extra)
    }

    #[track_caller]
    fn start_unlocked(ws: &Ws, extra: &[&str]) -> Watcher {
        let mut args = vec!["watch", "--daemon", "--json"];
        args.extend_from_slice(extra);
        let v = ws.run(&args).ok().json();
        assert_eq!(v["running"], true, "{v}");
        assert_eq!(v["complete"], true, "{v}");
        Watcher {
            root: ws.root.clone(),
            pid: v["pid"].as_i64().unwrap() as i32,
        }
    }

    fn kill(&self) {
        // SAFETY: plain kill(2) on a pid we started.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        // Wait until it is gone (it was re-parented, so poll /proc).
        let t0 = Instant::now();
        while Path::new(&format!("/proc/{}", self.pid)).exists()
            && !std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
                .unwrap_or_default()
                .contains(") Z")
        {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "watcher did not die"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn status(&self) -> Value {
        ckpt(&self.root, &["watch", "--status", "--json"])
            .ok()
            .json()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let r = ckpt(&self.root, &["watch", "--stop"]);
        if r.code != Some(0) {
            // SAFETY: as in `kill`.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

/// `save -v --json` through whatever the workspace has; returns (json, stderr).
fn save_v(ws: &Ws) -> (Value, String) {
    let r = ws.run(&["-v", "save", "--json"]).ok();
    (r.json(), r.stderr)
}

/// The full-scan truth must equal HEAD: a forced full-scan save finds
/// nothing to save.
#[track_caller]
fn assert_full_scan_agrees(ws: &Ws, what: &str) {
    let r = ws.run(&["--full-scan", "save", "--json"]).ok();
    let v = r.json();
    assert_eq!(
        v["saved"], false,
        "{what}: a full scan found changes the watcher-based save missed: {v}"
    );
}

/// `status --json` changes; through the watcher (`full == false`) it must
/// not have scanned everything.
#[track_caller]
fn changes(ws: &Ws, full: bool) -> Value {
    let args = if full {
        vec!["--full-scan", "status", "--json"]
    } else {
        vec!["-v", "status", "--json"]
    };
    let r = ws.run(&args).ok();
    if !full {
        assert!(
            r.stderr.contains("partial scan"),
            "status scanned everything:\n{}",
            r.stderr
        );
    }
    r.json()["changes"].clone()
}

/// Every directory and file below `root` (relative), marker excluded.
fn listing(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut files, mut dirs) = (Vec::new(), vec![PathBuf::new()]);
    let mut i = 0;
    while i < dirs.len() {
        let d = root.join(&dirs[i]);
        let mut names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for n in names {
            if n == ".ckpt" {
                continue;
            }
            let rel = dirs[i].join(&n);
            let m = std::fs::symlink_metadata(root.join(&rel)).unwrap();
            if m.is_dir() {
                dirs.push(rel);
            } else {
                files.push(rel);
            }
        }
        i += 1;
    }
    (files, dirs)
}

/// Applies 1 to `max` random edits (numbered on from `*n`) and returns their log.
fn random_batch(rng: &mut Rng, root: &Path, outside: &Path, n: &mut u64, max: u64) -> Vec<String> {
    (0..1 + rng.below(max))
        .map(|_| {
            *n += 1;
            random_edit(rng, root, outside, *n)
        })
        .collect()
}

fn pick<'a>(rng: &mut Rng, v: &'a [PathBuf]) -> Option<&'a PathBuf> {
    (!v.is_empty()).then(|| &v[rng.below(v.len() as u64) as usize])
}

/// One random edit: create, modify (same size too), delete, rename files and
/// directories, move trees out of and into the workspace, chmod, symlinks,
/// mtime-only changes.
fn random_edit(rng: &mut Rng, root: &Path, outside: &Path, n: u64) -> String {
    let (files, dirs) = listing(root);
    // Names from a small pool, so paths are reused: a directory replaced by
    // another under the same name, a file by a directory, and so on.
    let name = format!("n{}", rng.below(4));
    let dir = pick(rng, &dirs).unwrap().clone();
    match rng.below(13) {
        0 | 1 => {
            let p = root.join(&dir).join(format!("{name}.txt"));
            let _ = std::fs::write(&p, rng.text(50));
            format!("create {}", p.display())
        }
        2 => match pick(rng, &files) {
            Some(f)
                if !std::fs::symlink_metadata(root.join(f))
                    .unwrap()
                    .is_symlink() =>
            {
                // Same size, new content: only the watcher (or mtime) knows.
                let p = root.join(f);
                let len = std::fs::metadata(&p).unwrap().len() as usize;
                std::fs::write(&p, rng.bytes(len)).unwrap();
                format!("rewrite {}", p.display())
            }
            _ => "nothing".into(),
        },
        3 => match pick(rng, &files) {
            Some(f)
                if !std::fs::symlink_metadata(root.join(f))
                    .unwrap()
                    .is_symlink() =>
            {
                use std::io::Write;
                let mut h = std::fs::OpenOptions::new()
                    .append(true)
                    .open(root.join(f))
                    .unwrap();
                h.write_all(b"more\n").unwrap();
                format!("append {}", f.display())
            }
            _ => "nothing".into(),
        },
        4 => match pick(rng, &files) {
            Some(f) => {
                let _ = std::fs::remove_file(root.join(f));
                format!("delete {}", f.display())
            }
            None => "nothing".into(),
        },
        5 => match pick(rng, &files) {
            Some(f) => {
                let to = dir.join(&name);
                let _ = std::fs::rename(root.join(f), root.join(&to));
                format!("rename {} -> {}", f.display(), to.display())
            }
            None => "nothing".into(),
        },
        6 => {
            let d = dir.join(&name);
            let _ = std::fs::create_dir_all(root.join(&d).join("sub"));
            let _ = std::fs::write(root.join(&d).join("sub/x"), rng.text(20));
            format!("mkdir {}", d.display())
        }
        7 => match pick(rng, &dirs[1..]) {
            Some(d) => {
                remove_tree(&root.join(d));
                format!("rm -r {}", d.display())
            }
            None => "nothing".into(),
        },
        8 => match pick(rng, &dirs[1..]) {
            Some(d) if !dir.starts_with(d) => {
                let to = dir.join(&name);
                let _ = std::fs::rename(root.join(d), root.join(&to));
                format!("mv dir {} -> {}", d.display(), to.display())
            }
            _ => "nothing".into(),
        },
        9 => match pick(rng, &dirs[1..]) {
            Some(d) => {
                let _ = std::fs::rename(root.join(d), outside.join(&name));
                format!("mv dir {} out", d.display())
            }
            None => "nothing".into(),
        },
        10 => {
            let ins: Vec<PathBuf> = std::fs::read_dir(outside)
                .unwrap()
                .map(|e| PathBuf::from(e.unwrap().file_name()))
                .collect();
            let src = match pick(rng, &ins) {
                Some(s) => outside.join(s),
                None => {
                    let s = outside.join(format!("made{n}"));
                    let _ = n;
                    std::fs::create_dir_all(s.join("deep/er")).unwrap();
                    std::fs::write(s.join("deep/er/f"), rng.text(30)).unwrap();
                    s
                }
            };
            let to = dir.join(&name);
            let _ = std::fs::rename(&src, root.join(&to));
            format!("mv {} in -> {}", src.display(), to.display())
        }
        11 => {
            let all: Vec<PathBuf> = files.iter().chain(&dirs[1..]).cloned().collect();
            match pick(rng, &all) {
                Some(p)
                    if !std::fs::symlink_metadata(root.join(p))
                        .unwrap()
                        .is_symlink() =>
                {
                    let m = std::fs::metadata(root.join(p)).unwrap();
                    let mode = if m.is_dir() {
                        if m.permissions().mode() & 0o077 == 0 {
                            0o755
                        } else {
                            0o700
                        }
                    } else if m.permissions().mode() & 0o100 == 0 {
                        0o755
                    } else {
                        0o644
                    };
                    chmod(&root.join(p), mode);
                    format!("chmod {:o} {}", mode, p.display())
                }
                _ => "nothing".into(),
            }
        }
        _ => {
            if rng.below(2) == 0 {
                let l = dir.join(format!("{name}.lnk"));
                let _ = std::os::unix::fs::symlink(format!("target-{n}"), root.join(&l));
                format!("symlink {}", l.display())
            } else {
                let all: Vec<PathBuf> = files.iter().chain(&dirs[1..]).cloned().collect();
                match pick(rng, &all) {
                    Some(p)
                        if !std::fs::symlink_metadata(root.join(p))
                            .unwrap()
                            .is_symlink() =>
                    {
                        let f = std::fs::File::open(root.join(p)).unwrap();
                        let t = std::time::SystemTime::UNIX_EPOCH
                            + Duration::from_secs(1_000_000 + rng.below(1_000_000));
                        f.set_modified(t).unwrap();
                        format!("touch {}", p.display())
                    }
                    _ => "nothing".into(),
                }
            }
        }
    }
}

#[test]
fn random_edits_through_the_watcher_save_what_a_full_scan_saves() {
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("watch-random-edits", 6);
    build_tree(&ws.root, 5, 6, &mut rng);
    random_edits_agree_with_full_scans(&ws, &mut rng, 60);
}

/// The same check on a tree of more than 100,000 entries (issue 23): a
/// partial scan of a few dirty directories among thousands must still save
/// exactly what a full scan saves. Slow (minutes), so ignored by default:
/// `cargo test -p ckpt-cli --test watch -- --ignored`.
#[test]
#[ignore = "slow: a 100k-entry tree; run with --ignored"]
fn random_edits_through_the_watcher_on_a_100k_entry_tree() {
    let t0 = Instant::now();
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("watch-random-edits-100k", 23);
    build_tree(&ws.root, 5, 6, &mut rng);
    // 40 × 25 directories of 100 files, under the random edits' reach.
    for a in 0..40 {
        for b in 0..25 {
            let d = ws.root.join(format!("bulk{a:02}/s{b:02}"));
            std::fs::create_dir_all(&d).unwrap();
            for i in 0..100 {
                std::fs::write(d.join(format!("f{i:03}")), format!("{a}/{b}/{i}\n")).unwrap();
            }
        }
    }
    let entries = listing(&ws.root);
    let n = entries.0.len() + entries.1.len();
    assert!(n >= 100_000, "only {n} entries");
    random_edits_agree_with_full_scans(&ws, &mut rng, 25);
    eprintln!(
        "100k-entry random edits: {n} entries, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// Saves `ws`, starts a watcher, then applies `batches` random batches of
/// edits; after each, status through the watcher must equal a full scan's,
/// the save must be partial, and a full-scan save must find nothing more.
fn random_edits_agree_with_full_scans(ws: &Ws, rng: &mut Rng, batches: u32) {
    std::fs::create_dir_all(ws.root.join("a/b/c")).unwrap();
    ws.save();
    let outside = ws.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let w = Watcher::start(ws, &[]);
    // The first save after the watcher started must scan everything.
    let (_, err) = save_v(ws);
    assert!(err.contains("full scan"), "{err}");
    let mut n = 0;
    for batch in 0..batches {
        let log = random_batch(rng, &ws.root, &outside, &mut n, 6);
        let what = format!("batch {batch}: {log:#?}");
        assert_eq!(
            changes(ws, false),
            changes(ws, true),
            "status through the watcher differs from a full scan after {what}"
        );
        let (_, err) = save_v(ws);
        assert!(
            err.contains("partial scan"),
            "{what}: the save did not use the watcher:\n{err}"
        );
        assert_full_scan_agrees(ws, &what);
    }
    assert_eq!(w.status()["complete"], true);
}

#[test]
fn restore_through_the_watcher_leaves_nothing_dirty_and_is_exact() {
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("watch-restore", 7);
    build_tree(&ws.root, 3, 5, &mut rng);
    let (v1, _) = ws.save();
    let want = snapshot(&ws.root);
    let _w = Watcher::start(&ws, &[]);
    save_v(&ws);
    write(&ws.root, "d00/f0001.txt", b"changed");
    remove_tree(&ws.root.join("d01"));
    write(&ws.root, "new/dir/file", b"new");
    let (v, _) = save_v(&ws);
    assert_eq!(v["saved"], true);
    let r = ws.run(&["-v", "restore", &v1]).ok();
    assert!(r.stderr.contains("restored by the watcher"), "{}", r.stderr);
    assert_same(&want, &snapshot(&ws.root), "restore through the watcher");
    // Restore's own writes are in the dirty set but match the index.
    let st = ws.run(&["-v", "status", "--json"]).ok();
    assert!(st.stderr.contains("partial scan"), "{}", st.stderr);
    assert_eq!(st.json()["clean"], true, "{}", st.stdout);
    let (v, err) = save_v(&ws);
    assert_eq!(
        v["saved"], false,
        "restore's writes showed up as changes: {v}"
    );
    assert!(err.contains("partial scan"), "{err}");
    assert_full_scan_agrees(&ws, "after restore");
}

/// Issue 19 through the watcher (which runs the same operations): on a
/// full 5 MB tmpfs holding workspace and store, the restore whose
/// pre-restore save cannot fit is refused with exit 9 and changes nothing,
/// `restore --no-save` runs in the watcher, and its view afterwards equals
/// a full scan's.
#[test]
fn undo_on_a_full_disk_through_the_watcher() {
    let Some(fs) = Tmpfs::mount_or_skip("5m") else {
        return;
    };
    let mut rng = Rng::new("watch-full-disk", 19);
    let ws = Ws::new_in(fs.path());
    ws.init();
    write(&ws.root, "big1.bin", &rng.bytes(1_800_000));
    let (v1, _) = ws.save();
    let want = snapshot(&ws.root);
    let _w = Watcher::start(&ws, &[]);
    save_v(&ws);
    let big = rng.bytes(4_000_000);
    let mut f = std::fs::File::create(ws.root.join("big2.bin")).unwrap();
    let _ = std::io::Write::write_all(&mut f, &big);
    drop(f);
    assert!(free_bytes(fs.path()) < 64 * 1024, "the disk is not full");
    let full = snapshot(&ws.root);
    let r = ws.run(&["-v", "restore", &v1]).code(9);
    assert!(r.stderr.contains("A big2.bin"), "{}", r.dump());
    assert_same(&full, &snapshot(&ws.root), "the refused restore");
    assert_eq!(ws.log_ids(), std::slice::from_ref(&v1));
    let r = ws.run(&["-v", "restore", "--no-save", &v1]).ok();
    assert!(r.stderr.contains("restored by the watcher"), "{}", r.stderr);
    assert_same(
        &want,
        &snapshot(&ws.root),
        "restore --no-save through the watcher",
    );
    assert_eq!(changes(&ws, false), changes(&ws, true));
    assert_full_scan_agrees(&ws, "after restore --no-save");
    assert_eq!(ws.log_ids(), std::slice::from_ref(&v1));
    assert_store_verifies(&ws, "after the undo");
}

/// Random edits, saves and restores (whole tree, some paths, no pre-save,
/// undo) run by the watcher: every restore gives exactly the saved tree,
/// and afterwards the watcher's view (status, next save) equals a full
/// scan's.
#[test]
fn random_restores_in_the_watcher_are_exact_and_leave_its_index_exact() {
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("watch-random-restores", 9);
    build_tree(&ws.root, 4, 5, &mut rng);
    let outside = ws.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let (first, _) = ws.save();
    let mut saved = vec![(first, snapshot(&ws.root))];
    let w = Watcher::start(&ws, &[]);
    save_v(&ws);
    let mut n = 0;
    for round in 0..25 {
        let log = random_batch(&mut rng, &ws.root, &outside, &mut n, 4);
        let what = format!("round {round}: {log:#?}");
        if rng.below(2) == 0 {
            let (v, _) = save_v(&ws);
            if v["saved"] == true {
                let id = v["id"].as_str().unwrap().to_string();
                saved.push((id, snapshot(&ws.root)));
            }
        }
        let (id, want) = saved[rng.below(saved.len() as u64) as usize].clone();
        // Sometimes first one top-level path only: that subtree becomes the
        // checkpoint's.
        let tops: Vec<&Vec<u8>> = want.keys().filter(|k| !k.contains(&b'/')).collect();
        if !tops.is_empty() && rng.below(3) == 0 {
            let top = tops[rng.below(tops.len() as u64) as usize].clone();
            let under = |s: &Snapshot| -> Snapshot {
                s.iter()
                    .filter(|(k, _)| **k == top || k.starts_with(&[&top[..], b"/"].concat()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            let top_s = String::from_utf8(top.clone()).unwrap();
            let r = ws.run(&["-v", "restore", id.as_str(), "--", &top_s]).ok();
            assert!(
                r.stderr.contains("restored by the watcher"),
                "{what}: the restore of {top_s} did not run in the watcher:\n{}",
                r.stderr
            );
            assert_same(
                &under(&want),
                &under(&snapshot(&ws.root)),
                &format!("{what}: restore {id} -- {top_s}"),
            );
            assert_full_scan_agrees(&ws, &format!("{what}: after restore {id} -- {top_s}"));
        }
        let mut args = vec!["-v", "restore", "--json", id.as_str()];
        if rng.below(3) == 0 {
            args.push("--no-save");
        }
        let r = ws.run(&args).ok();
        assert!(
            r.stderr.contains("restored by the watcher"),
            "{what}: the restore did not run in the watcher:\n{}",
            r.stderr
        );
        assert_same(&want, &snapshot(&ws.root), &format!("{what}: restore {id}"));
        assert_eq!(
            changes(&ws, false),
            changes(&ws, true),
            "{what}: status through the watcher differs from a full scan after restore {id}"
        );
        assert_full_scan_agrees(&ws, &format!("{what}: after restore {id}"));
        // The undo id brings back what was there before (when a pre-save ran).
        if let Some(undo) = r.json()["undo"].as_str() {
            if rng.below(4) == 0 {
                let r = ws.run(&["-v", "restore", "--no-save", undo]).ok();
                assert!(r.stderr.contains("restored by the watcher"), "{}", r.stderr);
                assert_full_scan_agrees(&ws, &format!("{what}: after undo {undo}"));
            }
        }
    }
    assert_eq!(w.status()["complete"], true);
}

#[test]
fn sigkill_of_the_watcher_between_edits_loses_nothing() {
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("watch-sigkill", 8);
    build_tree(&ws.root, 3, 4, &mut rng);
    ws.save();
    let w = Watcher::start(&ws, &[]);
    save_v(&ws);
    write(&ws.root, "d00/before-kill", b"1");
    w.kill();
    write(&ws.root, "d01/after-kill", b"2");
    std::fs::rename(ws.root.join("d02"), ws.root.join("d00/moved")).unwrap();
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], true);
    assert!(err.contains("full scan: watcher unavailable"), "{err}");
    assert_full_scan_agrees(&ws, "after SIGKILL");
    // A new watcher has a new epoch: its first save scans everything.
    let w2 = Watcher::start(&ws, &[]);
    write(&ws.root, "d01/after-restart", b"3");
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], true);
    assert!(err.contains("restarted"), "{err}");
    write(&ws.root, "d01/after-restart", b"4");
    let (_, err) = save_v(&ws);
    assert!(err.contains("partial scan"), "{err}");
    assert_full_scan_agrees(&ws, "after restart");
    drop(w2);
}

/// Restores a sysctl on drop.
struct Sysctl(&'static str, String);
impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0, &self.1);
    }
}

#[test]
fn queue_overflow_forces_a_full_scan_and_loses_nothing() {
    const Q: &str = "/proc/sys/fs/inotify/max_queued_events";
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("watch-overflow", 9);
    build_tree(&ws.root, 2, 4, &mut rng);
    ws.save();
    let start_guard = START.lock().unwrap_or_else(|e| e.into_inner());
    let old = std::fs::read_to_string(Q).unwrap_or_default();
    // A small queue makes the overflow cheap; without permission the
    // default-sized queue is overflowed instead.
    let guard = std::fs::write(Q, "64")
        .ok()
        .map(|()| Sysctl(Q, old.trim().to_string()));
    let limit: u64 = if guard.is_some() {
        64
    } else {
        eprintln!(
            "note: {Q} not writable; overflowing a queue of {}",
            old.trim()
        );
        old.trim().parse().unwrap_or(16384)
    };
    let w = Watcher::start_unlocked(&ws, &[]);
    drop(guard); // the watcher's queue keeps the limit it was created with
    drop(start_guard);
    save_v(&ws);
    // Freeze the watcher so nothing drains the queue, then fill it.
    // SAFETY: signals to the watcher process we started.
    unsafe { libc::kill(w.pid, libc::SIGSTOP) };
    write(&ws.root, "d00/lost-in-overflow", b"x");
    let (a, b) = (ws.root.join("d01/f0000.txt"), ws.root.join("d01/f0001.txt"));
    for i in 0..limit + 100 {
        // Alternating paths: identical consecutive events would be merged.
        chmod(
            if i % 2 == 0 { &a } else { &b },
            if i % 4 < 2 { 0o600 } else { 0o644 },
        );
    }
    chmod(&a, 0o640);
    unsafe { libc::kill(w.pid, libc::SIGCONT) };
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], true);
    assert!(
        err.contains("lost events"),
        "the overflow did not force a full scan:\n{err}"
    );
    let st = w.status();
    assert!(st["overflows"].as_u64().unwrap() >= 1, "{st}");
    assert_eq!(st["complete"], true, "{st}");
    assert_full_scan_agrees(&ws, "after overflow");
    // The watcher re-walked the tree: later changes are seen through it.
    std::fs::create_dir(ws.root.join("d00/newdir")).unwrap();
    write(&ws.root, "d00/newdir/f", b"y");
    let (_, err) = save_v(&ws);
    assert!(err.contains("partial scan"), "{err}");
    assert_full_scan_agrees(&ws, "after overflow, new directory");
}

#[test]
fn a_socket_planted_by_another_user_is_refused() {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "f", b"1");
    ws.save();
    let sock = ws.store.join("watch.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let c = std::ffi::CString::new(sock.to_str().unwrap()).unwrap();
    // SAFETY: chown(2) on a path we created.
    if unsafe { libc::chown(c.as_ptr(), 12345, 12345) } != 0 {
        skip_needs_root("cannot chown the planted socket");
        return;
    }
    chmod(&sock, 0o777);
    write(&ws.root, "f", b"2");
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], true);
    assert!(err.contains("refusing"), "{err}");
    assert!(
        listener.accept().is_err(),
        "the client connected to a socket owned by another uid"
    );
    assert_full_scan_agrees(&ws, "planted socket");
}

#[test]
fn the_watcher_refuses_a_client_of_another_uid() {
    let ws = Ws::new();
    ws.init();
    ws.save();
    let _w = Watcher::start(&ws, &[]);
    let sock = ws.store.join("watch.sock");
    // Let the other uid reach the socket so the watcher's own check is what
    // refuses it (the 0600 mode would stop it first).
    chmod(&ws.store, 0o755);
    chmod(&sock, 0o777);
    if unsafe { libc::geteuid() } != 0 {
        skip("needs root to act as another uid");
        return;
    }
    let v = ckpt_lib::watch::PROTOCOL;
    let req = |op: &str| format!("{{\"v\":{v},\"op\":\"{op}\"}}\n").into_bytes();
    let answer = connect_as_uid(&sock, 12345, &req("dirty"));
    assert!(
        answer.contains("may not use this watcher") && !answer.contains("\"dirs\":["),
        "the watcher answered another uid: {answer}"
    );
    // Its owner is still served.
    let answer = connect_as_uid(&sock, 0, &req("status"));
    assert!(answer.contains("\"status\":{"), "{answer}");
}

/// Connects to `sock` from a forked child running as `uid`, sends `req` and
/// returns the answer. The child only makes system calls (no allocation).
fn connect_as_uid(sock: &Path, uid: u32, req: &[u8]) -> String {
    // SAFETY: everything the child uses is prepared before fork; the child
    // calls only async-signal-safe functions and _exit.
    unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let p = sock.to_str().unwrap().as_bytes();
        for (i, b) in p.iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let mut pipe = [0i32; 2];
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        let mut buf = [0u8; 4096];
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            libc::close(pipe[0]);
            if libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                libc::_exit(2);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len) != 0 {
                let msg = b"connect failed";
                libc::write(pipe[1], msg.as_ptr().cast(), msg.len());
                libc::_exit(3);
            }
            libc::write(fd, req.as_ptr().cast(), req.len());
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n > 0 {
                libc::write(pipe[1], buf.as_ptr().cast(), n as usize);
            }
            libc::_exit(0);
        }
        libc::close(pipe[1]);
        let mut out = Vec::new();
        loop {
            let n = libc::read(pipe[0], buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        libc::close(pipe[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[test]
fn auto_save_checkpoints_after_a_quiet_period_and_only_if_something_changed() {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "f", b"1");
    ws.save();
    let _w = Watcher::start(&ws, &["--auto-save", "0.2", "--auto-save-tag", "who=test"]);
    save_v(&ws);
    let before = ws.log_ids().len();
    write(&ws.root, "f", b"2");
    let t0 = Instant::now();
    let log = loop {
        let v = ws.run(&["log", "--json"]).ok().json();
        if v["checkpoints"].as_array().unwrap().len() > before {
            break v;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "no auto-save");
        std::thread::sleep(Duration::from_millis(50));
    };
    let cp = &log["checkpoints"][0];
    assert_eq!(cp["tags"]["who"], "test", "{cp}");
    assert_eq!(cp["tags"]["ckpt.reason"], "auto-save", "{cp}");
    assert_full_scan_agrees(&ws, "auto-save");
}

/// A save through the watcher that records nothing writes nothing to the
/// catalog (it is opened writable only when a commit is due, and redb's
/// open and close write even without a commit), and the next save that
/// records a checkpoint still does.
#[test]
fn a_save_through_the_watcher_that_records_nothing_leaves_the_catalog_alone() {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "f", b"1");
    ws.save();
    let _w = Watcher::start(&ws, &[]);
    save_v(&ws);
    let catalog = ws.store.join("catalog.redb");
    let before = std::fs::read(&catalog).unwrap();
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], false, "{v}");
    assert!(
        err.contains("partial scan"),
        "not through the watcher: {err}"
    );
    assert!(
        std::fs::read(&catalog).unwrap() == before,
        "a save that recorded nothing wrote to the catalog"
    );
    write(&ws.root, "f", b"2");
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], true, "{v}");
    assert!(
        err.contains("partial scan"),
        "not through the watcher: {err}"
    );
    assert_eq!(ws.log_ids().len(), 2);
    assert_full_scan_agrees(&ws, "after a save that opened the catalog writable");
}

#[test]
fn watch_status_stop_and_a_second_watcher() {
    let ws = Ws::new();
    ws.init();
    let v = ws.run(&["watch", "--status", "--json"]).ok().json();
    assert_eq!(v["running"], false);
    let w = Watcher::start(&ws, &[]);
    let st = w.status();
    assert!(st["watches"].as_u64().unwrap() >= 1, "{st}");
    assert!(st["rss_bytes"].as_u64().unwrap() > 0, "{st}");
    let mode = std::fs::metadata(ws.store.join("watch.sock"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "socket mode {mode:o}");
    let r = ws.run(&["watch", "--daemon"]).code(2);
    assert!(r.stderr.contains("already running"), "{}", r.dump());
    let v = ws.run(&["watch", "--stop", "--json"]).ok().json();
    assert_eq!(v["stopped"], true);
    assert!(!ws.store.join("watch.sock").exists());
    let v = ws.run(&["watch", "--stop", "--json"]).ok().json();
    assert_eq!(v["stopped"], false);
    drop(w);
}

#[test]
fn watch_status_epoch_is_a_string_and_a_second_daemon_has_one_prefix() {
    let ws = Ws::new();
    ws.init();
    ws.save();
    let v = {
        let _g = START.lock().unwrap_or_else(|e| e.into_inner());
        ws.run(&["watch", "--daemon", "--json"]).ok().json()
    };
    let w = Watcher {
        root: ws.root.clone(),
        pid: v["pid"].as_i64().unwrap() as i32,
    };
    let sv = ws.run(&["watch", "--status", "--json"]).ok().json();
    let second = ws.run(&["watch", "--daemon"]);
    drop(w);
    for (what, v) in [("--daemon --json", &v), ("--status --json", &sv)] {
        let e = v["epoch"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: epoch is not a string: {v}"));
        e.parse::<u64>()
            .unwrap_or_else(|err| panic!("{what}: epoch {e:?} is not a decimal u64: {err}"));
    }
    assert_ne!(second.code, Some(0), "{}", second.dump());
    assert!(
        second.stderr.contains("already running"),
        "{}",
        second.dump()
    );
    assert_eq!(
        second.stderr.matches("ckpt: error:").count(),
        1,
        "the error prefix appears more than once:\n{}",
        second.dump()
    );
}

#[test]
fn scripted_edge_cases_through_the_watcher_save_what_a_full_scan_saves() {
    let ws = Ws::new();
    ws.init();
    let r = ws.root.clone();
    write(&r, "x/a/f", b"one");
    write(&r, "x/b/g", b"two");
    write(&r, "y/h", b"three");
    ws.save();
    let _w = Watcher::start(&ws, &[]);
    save_v(&ws);
    type Step = Box<dyn Fn(&Path)>;
    let steps: Vec<(&str, Step)> = vec![
        (
            "directory replaced by a new one under the same name",
            Box::new(|r| {
                remove_tree(&r.join("x/a"));
                write(r, "x/a/f", b"ONE");
            }),
        ),
        (
            // The old directory's inode outlives its name, so the kernel's
            // IN_IGNORED for its watch may come late: the new directory's
            // watch must not be lost to it.
            "directory deleted while held open, then recreated and filled",
            Box::new(|r| {
                std::fs::create_dir_all(r.join("held")).unwrap();
                std::mem::forget(std::fs::File::open(r.join("held")).unwrap());
                remove_tree(&r.join("held"));
                write(r, "held/f", b"new");
            }),
        ),
        (
            "a file written into the recreated directory",
            Box::new(|r| write(r, "held/g", b"later")),
        ),
        (
            "directory replaced by a moved-in one under the same name",
            Box::new(|r| {
                remove_tree(&r.join("x/a"));
                std::fs::rename(r.join("x/b"), r.join("x/a")).unwrap();
            }),
        ),
        (
            "file replaced by a directory",
            Box::new(|r| {
                std::fs::remove_file(r.join("y/h")).unwrap();
                write(r, "y/h/inner", b"i");
            }),
        ),
        (
            "directory replaced by a file",
            Box::new(|r| {
                remove_tree(&r.join("y/h"));
                write(r, "y/h", b"file again");
            }),
        ),
        (
            "chmod of a directory only",
            Box::new(|r| chmod(&r.join("x"), 0o700)),
        ),
        (
            "mtime of a deep directory only",
            Box::new(|r| {
                let f = std::fs::File::open(r.join("x/a")).unwrap();
                f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(12345))
                    .unwrap();
            }),
        ),
        (
            "tree moved out, then a different tree moved in under its name",
            Box::new(|r| {
                let out = r.parent().unwrap().join("elsewhere");
                std::fs::rename(r.join("x"), &out).unwrap();
                write(&out, "a/f", b"changed while outside");
                let other = r.parent().unwrap().join("other");
                write(&other, "a/f", b"other tree");
                std::fs::rename(&other, r.join("x")).unwrap();
            }),
        ),
        (
            "nested directories created and filled in one go",
            Box::new(|r| {
                for i in 0..5 {
                    write(r, &format!("deep/l1/l2/l3/f{i}"), b"d");
                }
            }),
        ),
        (
            "rename of a directory within its parent",
            Box::new(|r| std::fs::rename(r.join("deep/l1"), r.join("deep/L1")).unwrap()),
        ),
    ];
    for (what, step) in steps {
        step(&r);
        assert_eq!(
            changes(&ws, false),
            changes(&ws, true),
            "status after: {what}"
        );
        let (v, err) = save_v(&ws);
        assert_eq!(v["saved"], true, "{what}: nothing saved\n{err}");
        assert!(err.contains("partial scan"), "{what}: {err}");
        assert_full_scan_agrees(&ws, what);
    }
}

#[test]
fn gc_between_saves_through_the_watcher_forces_one_full_scan() {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "f", b"first content");
    write(&ws.root, "d/g", b"kept");
    let (v1, _) = ws.save();
    let _w = Watcher::start(&ws, &[]);
    save_v(&ws);
    write(&ws.root, "f", b"second content");
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], true);
    assert!(err.contains("partial scan"), "{err}");
    ws.run(&["delete", &v1]).ok();
    let g = ws.run(&["gc", "--json"]).ok().json();
    assert!(g["objects_removed"].as_u64().unwrap() >= 1, "{g}");
    write(&ws.root, "d/g", b"changed after gc");
    let (v, err) = save_v(&ws);
    assert_eq!(v["saved"], true);
    assert!(
        err.contains("full scan"),
        "gc must invalidate the watcher's index: {err}"
    );
    assert_full_scan_agrees(&ws, "after gc");
    write(&ws.root, "f", b"third");
    let (_, err) = save_v(&ws);
    assert!(err.contains("partial scan"), "{err}");
    assert_full_scan_agrees(&ws, "after gc, second save");
}

/// A watch limit smaller than the tree (`user.max_inotify_watches` lowered
/// in a user namespace of the watcher's own, so nothing else on the machine
/// is affected): the watcher says which sysctl to raise and to what, and
/// every status and save through it stays exactly what a full scan finds,
/// because commands fall back to full scans.
#[test]
fn a_watch_limit_too_small_for_the_tree_names_the_sysctl_and_saves_stay_exact() {
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("watch-limit", 11);
    build_tree(&ws.root, 6, 3, &mut rng);
    for i in 0..12 {
        write(&ws.root, &format!("deep/{i}/sub/f"), b"x");
    }
    ws.save();
    let _g = START.lock().unwrap_or_else(|e| e.into_inner());
    let script = "echo 8 > /proc/sys/user/max_inotify_watches && exec \"$0\" -C \"$1\" watch --daemon --json";
    let out = std::process::Command::new("unshare")
        .args(["-Ur", "sh", "-c", script, bin(), ws.root.to_str().unwrap()])
        .current_dir(&ws.root)
        .stdin(std::process::Stdio::null())
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("unshare") => {
            skip_env(&format!(
                "cannot make a user namespace with its own inotify limit: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            return;
        }
        Ok(o) => panic!(
            "watch --daemon in a user namespace failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            skip_env(&format!("cannot run unshare: {e}"));
            return;
        }
    };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = Watcher {
        root: ws.root.clone(),
        pid: v["pid"].as_i64().unwrap() as i32,
    };
    drop(_g);
    assert_eq!(v["complete"], false, "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("sysctl fs.inotify.max_user_watches=") && reason.contains("=8 "),
        "the reason must name the limit and the sysctl to raise: {reason}"
    );
    let outside = ws.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let mut n = 0;
    for batch in 0..25 {
        let log = random_batch(&mut rng, &ws.root, &outside, &mut n, 4);
        let what = format!("batch {batch}: {log:#?}");
        let r = ws.run(&["-v", "status", "--json"]).ok();
        assert!(r.stderr.contains("full scan"), "{what}: {}", r.stderr);
        assert_eq!(
            r.json()["changes"],
            changes(&ws, true),
            "status differs from a full scan after {what}"
        );
        let (_, err) = save_v(&ws);
        assert!(err.contains("cannot vouch"), "{what}: {err}");
        assert_full_scan_agrees(&ws, &what);
    }
    assert_eq!(w.status()["complete"], false);
}
