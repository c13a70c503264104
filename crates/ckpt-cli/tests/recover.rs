//! A deleted workspace is recoverable (docs/CLI.md, "A deleted workspace"):
//! after `rm -rf proj` its store still holds every checkpoint, and
//! - `ckpt stores` finds the store (in the data home, in the list of known
//!   stores, or below a directory the user names) and says its workspace is
//!   gone;
//! - `ckpt restore --store S ID --to DIR` copies any checkpoint out exactly;
//! - `ckpt init --store S DIR` explains `--attach` instead of a bare "already
//!   holds a ckpt store", creating nothing;
//! - `ckpt init --attach --store S DIR` makes DIR its workspace again: its
//!   log is whole, `restore HEAD` brings back the last checkpoint exactly and
//!   `status` is then clean;
//! - attaching a second directory to a store whose workspace still exists is
//!   refused, with nothing changed.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// A scratch directory with a fixed data home, so every command (whatever
/// its working directory) sees the same `$XDG_DATA_HOME`.
struct Machine {
    tmp: tempfile::TempDir,
}

impl Machine {
    fn new() -> Machine {
        Machine {
            tmp: tempfile::Builder::new()
                .prefix("ckpt-recover-")
                .tempdir_in(test_base())
                .unwrap(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn data_home(&self) -> PathBuf {
        self.path("data")
    }

    fn run(&self, args: &[&str]) -> Run {
        let os: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        let mut c = command(self.tmp.path(), &os);
        c.env("XDG_DATA_HOME", self.data_home());
        run_command(c, format!("ckpt {}", args.join(" ")))
    }

    /// `ckpt stores --json [DIRS]`: the stores array.
    fn stores(&self, dirs: &[&str]) -> Vec<Value> {
        let mut args = vec!["stores", "--json"];
        args.extend_from_slice(dirs);
        self.run(&args).ok().json()["stores"]
            .as_array()
            .unwrap()
            .clone()
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Writes a small tree with a mode, a symlink, an empty directory and a
/// nested file, different for each `round`.
fn write_round(root: &Path, round: u32) {
    write(
        root,
        "src/main.rs",
        format!("fn main() {{ {round} }}\n").as_bytes(),
    );
    write(root, &format!("notes/{round}.md"), b"note\n");
    write(root, "run.sh", b"#!/bin/sh\necho hi\n");
    chmod(&root.join("run.sh"), 0o755);
    let _ = std::fs::remove_file(root.join("link"));
    std::os::unix::fs::symlink(format!("notes/{round}.md"), root.join("link")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
}

#[test]
fn a_deleted_workspace_comes_back_from_its_store() {
    let m = Machine::new();
    let proj = m.path("proj");
    std::fs::create_dir(&proj).unwrap();
    m.run(&["init", p(&proj)]).ok();
    let mut snaps = Vec::new();
    for round in 1..=2 {
        write_round(&proj, round);
        m.run(&["-C", p(&proj), "save", "-m", &format!("round {round}")])
            .ok();
        snaps.push(snapshot(&proj));
    }
    let store = PathBuf::from(
        m.run(&["-C", p(&proj), "du", "--json"]).ok().json()["store"]
            .as_str()
            .unwrap(),
    );
    remove_tree(&proj);

    // A command in the deleted directory points at `ckpt stores`.
    let r = m.run(&["-C", p(&proj), "restore", "HEAD"]).code(2);
    assert!(r.stderr.contains("ckpt stores"), "{}", r.dump());

    // `ckpt stores` finds it and says the workspace is gone.
    let listed = m.stores(&[]);
    let s = listed
        .iter()
        .find(|s| Path::new(s["path"].as_str().unwrap()) == store.canonicalize().unwrap())
        .unwrap_or_else(|| panic!("{} not listed: {listed:?}", store.display()));
    assert_eq!(
        s["workspace"].as_str(),
        Some(p(&proj.canonicalize().unwrap_or(proj.clone())))
    );
    assert_eq!(s["attachment"], "missing", "{s}");
    assert_eq!(s["checkpoints"], 2, "{s}");
    assert_eq!(s["latest"]["message"], "round 2", "{s}");

    // Every checkpoint copies out exactly, and single paths too.
    for (i, want) in snaps.iter().enumerate() {
        let out = m.path(&format!("out{i}"));
        let id = format!("v{}", i + 1);
        m.run(&["restore", "--store", p(&store), &id, "--to", p(&out)])
            .ok();
        assert_same(want, &snapshot(&out), &format!("restore --store {id} --to"));
    }
    let one = m.path("one");
    m.run(&[
        "restore",
        "--store",
        p(&store),
        "--to",
        p(&one),
        "v1",
        "--",
        "src/main.rs",
    ])
    .ok();
    assert_eq!(
        std::fs::read(one.join("src/main.rs")).unwrap(),
        b"fn main() { 1 }\n"
    );
    assert!(
        !one.join("run.sh").exists(),
        "only the named path is restored"
    );
    for bad in ["../escape", "/abs"] {
        let to = m.path("bad");
        m.run(&[
            "restore",
            "--store",
            p(&store),
            "--to",
            p(&to),
            "v1",
            "--",
            bad,
        ])
        .code(2);
        assert!(!to.exists(), "a refused path must create nothing");
    }

    // A plain init onto the store explains --attach and creates nothing.
    let r = m
        .run(&["init", "--create", "--store", p(&store), p(&proj)])
        .code(2);
    assert!(r.stderr.contains("--attach"), "{}", r.dump());
    assert!(
        !proj.exists(),
        "a refused init must not create the directory"
    );

    // Attach: the log is whole, restore brings HEAD back, status is clean.
    let r = m
        .run(&[
            "init",
            "--attach",
            "--create",
            "--store",
            p(&store),
            p(&proj),
            "--json",
        ])
        .ok();
    assert_eq!(r.json()["outcome"], "attached");
    let log = m.run(&["-C", p(&proj), "log", "--json"]).ok().json();
    let messages: Vec<&str> = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["round 2", "round 1"]);
    m.run(&["-C", p(&proj), "restore", "HEAD"]).ok();
    assert_same(&snaps[1], &snapshot(&proj), "restore HEAD after attach");
    let st = m.run(&["-C", p(&proj), "status", "--json"]).ok().json();
    assert_eq!(st["changes"].as_array().map(Vec::len), Some(0), "{st}");
    m.run(&["-C", p(&proj), "verify"]).ok();
    let listed = m.stores(&[]);
    let s = listed
        .iter()
        .find(|s| Path::new(s["path"].as_str().unwrap()) == store.canonicalize().unwrap())
        .unwrap();
    assert_eq!(s["attachment"], "attached", "{s}");
}

#[test]
fn attaching_a_store_whose_workspace_still_exists_is_refused() {
    let m = Machine::new();
    let proj = m.path("proj");
    std::fs::create_dir(&proj).unwrap();
    m.run(&["init", p(&proj)]).ok();
    write_round(&proj, 1);
    m.run(&["-C", p(&proj), "save"]).ok();
    let store = m.run(&["-C", p(&proj), "du", "--json"]).ok().json()["store"]
        .as_str()
        .unwrap()
        .to_string();
    let other = m.path("other");
    std::fs::create_dir(&other).unwrap();
    let r = m
        .run(&["init", "--attach", "--store", &store, p(&other)])
        .code(2);
    assert!(r.stderr.contains("still belongs to"), "{}", r.dump());
    assert!(!other.join(".ckpt").exists(), "nothing may be written");
    // The original workspace is untouched: clean, and it still saves.
    let st = m.run(&["-C", p(&proj), "status", "--json"]).ok().json();
    assert_eq!(st["changes"].as_array().map(Vec::len), Some(0), "{st}");
    write(&proj, "later.txt", b"x");
    assert_eq!(
        m.run(&["-C", p(&proj), "save", "--json"]).ok().json()["saved"],
        true
    );
    // Attaching a directory that holds no store is refused too.
    let r = m
        .run(&[
            "init",
            "--attach",
            "--store",
            p(&m.path("nothing")),
            p(&other),
        ])
        .code(2);
    assert!(r.stderr.contains("holds no ckpt store"), "{}", r.dump());
}

#[test]
fn stores_outside_the_data_home_are_found() {
    let m = Machine::new();
    // --store somewhere else: found through the list of known stores.
    let a = m.path("a");
    std::fs::create_dir(&a).unwrap();
    let elsewhere = m.path("elsewhere/store-a");
    m.run(&["init", p(&a), "--store", p(&elsewhere)]).ok();
    // No data home at all: the store goes beside the workspace, in
    // `.ckpt-stores/`, and `ckpt stores DIR` finds it there.
    let b = m.path("b");
    std::fs::create_dir(&b).unwrap();
    let out = command(
        m.tmp.path(),
        &["init".as_ref(), p(&b).as_ref(), "--json".as_ref()],
    )
    .env("HOME", "/nonexistent")
    .env_remove("XDG_DATA_HOME")
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let b_store: Value = serde_json::from_slice(&out.stdout).unwrap();
    let b_store = PathBuf::from(b_store["store"].as_str().unwrap());
    assert!(
        b_store.starts_with(m.path(".ckpt-stores")),
        "{}",
        b_store.display()
    );

    let paths = |v: Vec<Value>| -> Vec<PathBuf> {
        v.iter()
            .map(|s| PathBuf::from(s["path"].as_str().unwrap()))
            .collect()
    };
    let found = paths(m.stores(&[]));
    assert!(
        found.contains(&elsewhere.canonicalize().unwrap()),
        "{found:?}"
    );
    assert!(
        !found.contains(&b_store.canonicalize().unwrap()),
        "{found:?}"
    );
    let found = paths(m.stores(&[p(m.tmp.path())]));
    assert!(
        found.contains(&b_store.canonicalize().unwrap()),
        "{found:?}"
    );
    assert_eq!(
        found
            .iter()
            .filter(|f| **f == elsewhere.canonicalize().unwrap())
            .count(),
        1,
        "each store once: {found:?}"
    );
}

#[test]
fn a_moved_store_is_reattached_to_its_workspace() {
    let m = Machine::new();
    let proj = m.path("proj");
    std::fs::create_dir(&proj).unwrap();
    let old = m.path("stores/old");
    m.run(&["init", p(&proj), "--store", p(&old)]).ok();
    write_round(&proj, 1);
    m.run(&["-C", p(&proj), "save"]).ok();
    let want = snapshot(&proj);
    let new = m.path("moved");
    std::fs::rename(&old, &new).unwrap();

    let r = m.run(&["-C", p(&proj), "status"]).code(1);
    assert!(r.stderr.contains("ckpt stores"), "{}", r.dump());
    let found = m.stores(&[p(&new)]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["attachment"], "detached", "{found:?}");

    m.run(&["-C", p(&proj), "init", "--attach", "--store", p(&new), "."])
        .ok();
    let st = m.run(&["-C", p(&proj), "status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");
    assert_same(&want, &snapshot(&proj), "files untouched by attach");
    assert_eq!(m.stores(&[p(&new)])[0]["attachment"], "attached");
}
