//! `ckpt restore ID -- PATHS` (issue 19, items 3 and 4): a misplaced flag
//! after `--` and a path that matches nothing are refused with nothing
//! changed; after a path restore `status` shows the path unchanged and the
//! same restore again is a no-op, also through a live watcher.

mod common;

use std::path::PathBuf;

use common::*;
use serde_json::Value;

/// A saved workspace (`v1`) with uncommitted edits on top.
fn setup() -> (Ws, String) {
    let ws = Ws::new();
    write(
        &ws.root,
        "src/util/helpers.py",
        b"def helper():\n    return 1\n",
    );
    write(&ws.root, "src/app.py", b"print('app')\n");
    write(&ws.root, "notes.txt", b"notes\n");
    ws.init();
    let (v1, saved) = ws.save();
    assert!(saved);
    write(&ws.root, "src/new/x.txt", b"not saved\n");
    write(&ws.root, "notes.txt", b"notes, edited\n");
    (ws, v1)
}

/// The paths in a `status --json`'s changes.
fn changed_paths(v: &Value) -> Vec<String> {
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect()
}

/// What must stay the same when a command is refused.
struct Unchanged {
    files: Snapshot,
    log: Vec<String>,
}

impl Unchanged {
    fn of(ws: &Ws) -> Unchanged {
        Unchanged {
            files: snapshot(&ws.root),
            log: ws.log_ids(),
        }
    }

    #[track_caller]
    fn check(&self, ws: &Ws, what: &str) {
        assert_same(&self.files, &snapshot(&ws.root), what);
        assert_eq!(self.log, ws.log_ids(), "{what}: checkpoints changed");
        let st = ws.run(&["status", "--json"]).ok().json();
        assert!(
            st["interrupted_restore"].is_null(),
            "{what}: a restore journal was left: {st}"
        );
    }
}

#[test]
fn a_flag_after_double_dash_is_refused_and_changes_nothing() {
    let (ws, v1) = setup();
    let before = Unchanged::of(&ws);
    for flag in [
        "--dry-run",
        "--no-save",
        "--json",
        "--files-only",
        "--state-only",
        "--to=../elsewhere",
        "-q",
        "-v",
    ] {
        let r = ws.run(&["restore", &v1, "--", "src/new", flag]).code(2);
        let name = flag.split('=').next().unwrap();
        assert!(
            r.stderr.contains(name) && r.stderr.contains("before `--`"),
            "{flag}: no hint to put flags before `--`:\n{}",
            r.dump()
        );
        assert!(r.stderr.contains("Nothing was changed"), "{}", r.dump());
        before.check(&ws, &format!("restore {v1} -- src/new {flag}"));
    }
    // `restore --to` refuses it too, and creates nothing.
    let dest = ws.fresh_dir();
    ws.run(&[
        "restore",
        "--to",
        dest.to_str().unwrap(),
        &v1,
        "--",
        "src",
        "--dry-run",
    ])
    .code(2);
    assert!(!dest.exists(), "restore --to created {}", dest.display());
    before.check(&ws, "restore --to DIR ID -- src --dry-run");
    // Flags before `--` work: a dry run changes nothing ...
    let r = ws.run(&["restore", "--dry-run", &v1, "--", "src/new"]).ok();
    assert!(r.stdout.contains("dry run"), "{}", r.dump());
    before.check(&ws, "restore --dry-run ID -- src/new");
    // ... and the path is restored for real without it (it exists only in
    // the working directory: restoring it to v1 deletes it).
    ws.run(&["restore", &v1, "--", "src/new"]).ok();
    assert!(!ws.root.join("src/new").exists());
}

#[test]
fn a_file_named_like_a_flag_can_be_restored_as_dot_slash() {
    let ws = Ws::new();
    write(&ws.root, "--dry-run", b"a file with an odd name\n");
    ws.init();
    let (v1, _) = ws.save();
    write(&ws.root, "--dry-run", b"edited\n");
    ws.run(&["restore", &v1, "--", "--dry-run"]).code(2);
    assert_eq!(
        std::fs::read(ws.root.join("--dry-run")).unwrap(),
        b"edited\n"
    );
    ws.run(&["restore", &v1, "--", "./--dry-run"]).ok();
    assert_eq!(
        std::fs::read(ws.root.join("--dry-run")).unwrap(),
        b"a file with an odd name\n"
    );
}

#[test]
fn a_path_that_matches_nothing_is_refused_and_changes_nothing() {
    let (ws, v1) = setup();
    let before = Unchanged::of(&ws);
    for args in [
        vec!["restore", v1.as_str(), "--", "does/not/exist"],
        vec!["restore", v1.as_str(), "--", "src/app.py", "does/not/exist"],
        vec!["restore", "--no-save", v1.as_str(), "--", "does/not/exist"],
        vec!["restore", "--dry-run", v1.as_str(), "--", "does/not/exist"],
        vec!["restore", "--json", v1.as_str(), "--", "src/app.py/below"],
    ] {
        let what = args.join(" ");
        let r = ws.run(&args).code(2);
        assert!(
            r.stderr.contains("nothing was changed"),
            "{what}: the message does not say nothing was changed:\n{}",
            r.dump()
        );
        assert!(
            r.stderr.contains("does/not/exist") || r.stderr.contains("src/app.py/below"),
            "{what}: the message does not name the path:\n{}",
            r.dump()
        );
        before.check(&ws, &what);
    }
    // `--to` likewise: a path not in the checkpoint writes nothing.
    let dest = ws.fresh_dir();
    let r = ws
        .run(&["restore", "--to", dest.to_str().unwrap(), &v1, "--", "nope"])
        .code(2);
    assert!(r.stderr.contains("nope"), "{}", r.dump());
    assert!(!dest.exists());
    before.check(&ws, "restore --to DIR ID -- nope");
}

/// Edits a saved file, restores only it from HEAD, and checks that
/// `status` shows it unchanged and that the same restore again writes
/// nothing and records nothing. `args` go first (e.g. `-v`); `watcher`
/// says the restores must have run in the watcher.
fn restore_of_one_path_leaves_status_clean(ws: &Ws, watcher: bool) {
    let helpers = ws.root.join("src/util/helpers.py");
    let good = std::fs::read(&helpers).unwrap();
    let mut bad = good.clone();
    bad.extend_from_slice(b"# bad edit\n");
    std::fs::write(&helpers, &bad).unwrap();

    let r = restore_helpers(ws);
    if watcher {
        assert!(
            r.stderr.contains("restored by the watcher"),
            "the restore did not run in the watcher:\n{}",
            r.stderr
        );
    }
    let first = r.json();
    assert_eq!(std::fs::read(&helpers).unwrap(), good, "{first}");
    assert!(!first["post_save"].is_null(), "nothing recorded: {first}");

    let st = ws.run(&["status", "--json"]).ok().json();
    assert!(
        !changed_paths(&st).contains(&"src/util/helpers.py".to_string()),
        "status shows the restored path as changed: {st}"
    );
    assert_eq!(st["clean"], true, "{st}");
    // Other edits stay as they were.
    assert_eq!(
        std::fs::read(ws.root.join("notes.txt")).unwrap(),
        b"notes, edited\n"
    );

    // The same command again is a no-op.
    let log = ws.log_ids();
    let r = restore_helpers(ws);
    let again = r.json();
    assert_eq!(again["changes"], Value::Array(vec![]), "{again}");
    assert!(again["pre_save"].is_null(), "{again}");
    assert!(again["post_save"].is_null(), "{again}");
    assert_eq!(std::fs::read(&helpers).unwrap(), good);
    assert_eq!(
        log,
        ws.log_ids(),
        "a repeated restore recorded a checkpoint"
    );
    let r = ws
        .run(&["restore", "HEAD", "--", "src/util/helpers.py"])
        .ok();
    assert!(r.stdout.contains(" 0 files written"), "{}", r.dump());
    assert_eq!(std::fs::read(&helpers).unwrap(), good);

    // The undo id still brings the bad edit back.
    let undo = first["undo"].as_str().expect("an undo id").to_string();
    ws.run(&["restore", &undo]).ok();
    assert_eq!(std::fs::read(&helpers).unwrap(), bad);
}

#[test]
fn a_path_restore_leaves_status_clean_and_repeats_as_a_no_op() {
    let (ws, _) = setup();
    restore_of_one_path_leaves_status_clean(&ws, false);
}

/// A running `ckpt watch --daemon`, stopped when dropped.
struct Watcher(PathBuf);

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = ckpt(&self.0, &["watch", "--stop"]);
    }
}

#[test]
fn a_path_restore_through_the_watcher_leaves_status_clean_too() {
    let (ws, _) = setup();
    let v = ws.run(&["watch", "--daemon", "--json"]).ok().json();
    assert_eq!(v["running"], true, "{v}");
    let _w = Watcher(ws.root.clone());
    restore_of_one_path_leaves_status_clean(&ws, true);
    // And a full scan agrees with what the watcher recorded.
    let v = ws.run(&["--full-scan", "save", "--json"]).ok().json();
    assert_eq!(v["saved"], false, "{v}");
}

/// `ckpt -v restore --json HEAD -- src/util/helpers.py`, which must succeed.
fn restore_helpers(ws: &Ws) -> Run {
    ws.run(&[
        "-v",
        "restore",
        "--json",
        "HEAD",
        "--",
        "src/util/helpers.py",
    ])
    .ok()
}
