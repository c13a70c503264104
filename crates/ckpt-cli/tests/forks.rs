//! Parallel agents: `ckpt fork --count`, a fork's first save, `ckpt forks`,
//! `ckpt diff --fork`, `ckpt adopt`, `ckpt fork --remove` (docs/FORK.md).
//!
//! - Property (seeded, `CKPT_TEST_SEED` reruns one): fork N=4 of a random
//!   tree, random edits in each fork and in the parent; each sees exactly
//!   its own edits (bytes, modes, mtimes), each fork's checkpoints restore
//!   exactly, `verify --store` is clean everywhere, a fork's first save
//!   after a 1-file edit reads only that file, adopt makes the parent the
//!   fork's checkpoint (files and agent state) and undo gives back the
//!   previous state exactly; deleting the parent store breaks no fork.
//! - SIGKILL during a fork (at many moments): the fork directory is missing
//!   or complete (a complete one verifies and saves); during an adopt: the
//!   parent is unchanged or exactly the fork's state after the next command.
//! - Bad input: a non-empty directory, the workspace itself, a directory
//!   that is not a fork: a clear error, nothing changed.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// A data home shared by every command of a test (forks find each other
/// through its list of stores).
struct Fleet {
    ws: Ws,
    xdg: PathBuf,
}

impl Fleet {
    fn new() -> Fleet {
        Fleet::new_in(&test_base())
    }

    fn new_in(base: &Path) -> Fleet {
        let ws = Ws::new_in(base);
        let xdg = ws.tmp.path().join("xdg");
        std::fs::create_dir(&xdg).unwrap();
        let f = Fleet { ws, xdg };
        let root = f.ws.root.to_str().unwrap().to_string();
        f.at(f.ws.tmp.path(), &["init", &root]).ok();
        f
    }

    fn cmd(&self, cwd: &Path, args: &[&str]) -> std::process::Command {
        let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let mut c = command(cwd, &a);
        c.env("XDG_DATA_HOME", &self.xdg);
        c
    }

    fn at(&self, cwd: &Path, args: &[&str]) -> Run {
        run_command(self.cmd(cwd, args), format!("ckpt {}", args.join(" ")))
    }

    fn run(&self, args: &[&str]) -> Run {
        self.at(&self.ws.root, args)
    }

    fn save(&self, dir: &Path) -> serde_json::Value {
        self.at(dir, &["save", "--json"]).ok().json()
    }

    fn dir(&self, name: &str) -> PathBuf {
        self.ws.tmp.path().join(name)
    }

    fn verify_store(&self, dir: &Path) {
        let r = self.at(dir, &["verify", "--store", "--json"]);
        assert_eq!(
            r.code,
            Some(0),
            "verify --store in {}:\n{}",
            dir.display(),
            r.dump()
        );
        assert_eq!(r.json()["ok"], true);
    }

    fn store_of(&self, dir: &Path) -> PathBuf {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(".ckpt")).unwrap()).unwrap();
        PathBuf::from(m["store"].as_str().unwrap())
    }
}

/// Random edits below `root`: modify, add, delete, chmod (each a file of
/// the original tree or a new one). Returns nothing: the test compares
/// snapshots.
fn edit(root: &Path, rng: &mut Rng, tag: &str) {
    let snap = snapshot(root);
    let files: Vec<&Vec<u8>> = snap
        .iter()
        .filter(|(_, s)| matches!(s.what, What::File(_)))
        .map(|(k, _)| k)
        .collect();
    for i in 0..(1 + rng.below(4)) {
        let pick = |rng: &mut Rng| {
            let f = files[rng.below(files.len() as u64) as usize];
            root.join(String::from_utf8_lossy(f).as_ref())
        };
        match rng.below(4) {
            0 => {
                let p = pick(rng);
                if p.exists() {
                    chmod(&p, 0o644);
                    let len = 50 + rng.below(3000) as usize;
                    std::fs::write(&p, rng.text(len)).unwrap();
                }
            }
            1 => write(root, &format!("new-{tag}-{i}/f{i}.txt"), &rng.bytes(100)),
            2 => {
                let p = pick(rng);
                let _ = std::fs::remove_file(p);
            }
            _ => {
                let p = pick(rng);
                if p.exists() {
                    chmod(&p, if rng.below(2) == 0 { 0o600 } else { 0o755 });
                }
            }
        }
    }
}

#[test]
fn four_forks_each_see_only_their_own_edits_and_adopt_undoes() {
    four_forks(&test_base());
}

#[test]
fn four_forks_on_loop_btrfs() {
    on_loop("btrfs", &[]);
}

#[test]
fn four_forks_on_loop_xfs() {
    on_loop("xfs", &["-m", "reflink=1"]);
}

fn on_loop(fs: &str, mkfs_args: &[&str]) {
    use common::loopfs::{mount, NoFs};
    match mount(fs, mkfs_args) {
        Ok(lfs) => four_forks(&lfs.mnt),
        Err(NoFs::Missing(why)) => skip(&format!("forks on {fs}: {why}")),
        Err(NoFs::Refused(why)) => skip_env(&format!("forks on {fs}: {why}")),
    }
}

/// The property test on the filesystem holding `base`.
fn four_forks(base: &Path) {
    let mut rng = Rng::new("four_forks", 22);
    let f = Fleet::new_in(base);
    build_tree(&f.ws.root, 6, 8, &mut rng);
    chmod(&f.ws.root.join("d00"), 0o750);
    // Files older than the racy window (a file modified within 50 ms of a
    // scan is re-hashed by the next one, by design).
    let st = std::process::Command::new("find")
        .arg(&f.ws.root)
        .args(["-exec", "touch", "-h", "-d", "@1700000000", "{}", "+"])
        .status()
        .unwrap();
    assert!(st.success());
    f.run(&["state", "put", "plan", "base"]).ok();
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let base = snapshot(&f.ws.root);

    let prefix = f.dir("agent");
    let r = f
        .run(&[
            "fork",
            &v1,
            "--count",
            "4",
            prefix.to_str().unwrap(),
            "--json",
        ])
        .ok()
        .json();
    let forks: Vec<PathBuf> = r["forks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| PathBuf::from(x["to"].as_str().unwrap()))
        .collect();
    assert_eq!(forks.len(), 4);
    for x in r["forks"].as_array().unwrap() {
        // Same filesystem: the fork's store links the parent's objects.
        assert!(x["objects"]["linked"].as_u64().unwrap() > 0, "{x}");
        assert_eq!(x["objects"]["copied"], 0, "{x}");
    }
    for (i, d) in forks.iter().enumerate() {
        assert_eq!(
            d,
            &f.dir(&format!("agent{}", i + 1)).canonicalize().unwrap()
        );
        assert_same(&base, &snapshot(d), "a fresh fork");
        // The fork knows its origin: clean status, the origin in its log,
        // its agent state.
        let st = f.at(d, &["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "fresh fork {i} is not clean: {st}");
        assert_eq!(state_at(&f, d, "plan").as_deref(), Some("base"));
    }

    // A fork's first save after a 1-file edit reads that one file.
    write(&forks[0], "d01/f0001.txt", b"fork one edit\n");
    let s = f.at(&forks[0], &["save", "--verbose"]).ok();
    assert!(
        s.stderr.contains("read 1 files"),
        "the first save in a fork re-read more than the edited file:\n{}",
        s.dump()
    );

    // Random edits everywhere, then each sees exactly its own.
    let mut want = Vec::new();
    for (i, d) in forks.iter().enumerate() {
        edit(d, &mut rng, &format!("f{i}"));
        f.at(d, &["state", "put", "plan", &format!("fork{i}")]).ok();
        want.push(snapshot(d));
    }
    edit(&f.ws.root, &mut rng, "parent");
    let parent_want = snapshot(&f.ws.root);
    let mut fork_heads = Vec::new();
    for (i, d) in forks.iter().enumerate() {
        let id = f.save(d)["id"].as_str().unwrap().to_string();
        assert_same(&want[i], &snapshot(d), &format!("fork {i} after all edits"));
        let got = {
            let dest = f.dir(&format!("check{i}"));
            f.at(d, &["restore", &id, "--to", dest.to_str().unwrap()])
                .ok();
            let s = snapshot(&dest);
            remove_tree(&dest);
            s
        };
        assert_same(&want[i], &got, &format!("fork {i}'s checkpoint restores"));
        fork_heads.push(id);
    }
    assert_same(
        &parent_want,
        &snapshot(&f.ws.root),
        "the parent after all edits",
    );
    let pv = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    f.ws.assert_restores(&pv, &parent_want);

    // The fleet.
    let list = f.run(&["forks", "--json"]).ok().json();
    let listed: Vec<PathBuf> = list["forks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| PathBuf::from(x["dir"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, forks, "ckpt forks: {list}");
    for x in list["forks"].as_array().unwrap() {
        assert_eq!(x["origin"], v1.as_str());
    }
    let d = f
        .run(&[
            "diff",
            "--fork",
            forks[2].to_str().unwrap(),
            "--name-status",
            "--json",
        ])
        .ok()
        .json();
    assert!(d["to"].as_str().unwrap().ends_with(&fork_heads[2]), "{d}");

    // Adopt fork 3 (index 2): files and agent state; then undo.
    let a = f
        .run(&["adopt", forks[2].to_str().unwrap(), "--json"])
        .ok()
        .json();
    assert_same(&want[2], &snapshot(&f.ws.root), "the parent after adopt");
    assert_eq!(state_at(&f, &f.ws.root, "plan").as_deref(), Some("fork2"));
    let log = f.run(&["log", "--json"]).ok().json();
    assert!(
        log.to_string().contains("adopted_from"),
        "the adopted checkpoint is not named in the log: {log}"
    );
    let undo = a["restore"]["undo"].as_str().unwrap().to_string();
    f.run(&["restore", &undo]).ok();
    assert_same(&parent_want, &snapshot(&f.ws.root), "adopt then undo");
    assert_eq!(state_at(&f, &f.ws.root, "plan").as_deref(), Some("base"));

    for d in forks.iter().chain([&f.ws.root]) {
        f.verify_store(d);
    }

    // Forks do not need the parent's store.
    let parent_store = f.store_of(&f.ws.root);
    remove_tree(&parent_store);
    for (i, d) in forks.iter().enumerate() {
        f.verify_store(d);
        let dest = f.dir(&format!("after{i}"));
        f.at(d, &["restore", &v1, "--to", dest.to_str().unwrap()])
            .ok();
        assert_same(
            &base,
            &snapshot(&dest),
            "the origin checkpoint in a fork, parent store gone",
        );
    }

    // Remove one.
    let other = Fleet::new();
    let r = other.run(&["fork", "--remove", forks[0].to_str().unwrap()]);
    assert_ne!(r.code, Some(0), "removed a fork of another workspace");
    assert!(forks[0].exists());
}

fn state_at(f: &Fleet, dir: &Path, key: &str) -> Option<String> {
    let r = f.at(dir, &["state", "get", key]);
    match r.code {
        Some(0) => Some(r.stdout.trim_end().to_string()),
        _ => None,
    }
}

#[test]
fn fork_remove_deletes_the_fork_and_its_store() {
    let mut rng = Rng::new("fork_remove", 3);
    let f = Fleet::new();
    build_tree(&f.ws.root, 2, 3, &mut rng);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let d = f.dir("gone");
    f.run(&["fork", &v1, d.to_str().unwrap()]).ok();
    let store = f.store_of(&d);
    assert!(store.exists());
    f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
    assert!(!d.exists() && !store.exists());
    let list = f.run(&["forks", "--json"]).ok().json();
    assert_eq!(list["forks"].as_array().unwrap().len(), 0);
    // The parent is untouched.
    f.verify_store(&f.ws.root);
}

#[test]
fn bad_fork_input_changes_nothing() {
    let mut rng = Rng::new("bad_fork_input", 5);
    let f = Fleet::new();
    build_tree(&f.ws.root, 2, 3, &mut rng);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let before = snapshot(&f.ws.root);
    let busy = f.dir("busy");
    write(&busy, "mine.txt", b"keep me");
    let busy_before = snapshot(&busy);
    let inside = f.ws.root.join("sub");
    for (args, what) in [
        (vec!["fork", &v1, busy.to_str().unwrap()], "not empty"),
        (
            vec!["fork", &v1, inside.to_str().unwrap()],
            "inside the workspace",
        ),
        (
            vec!["fork", &v1, f.ws.root.to_str().unwrap()],
            "inside the workspace",
        ),
        (vec!["adopt", busy.to_str().unwrap()], ""),
        (
            vec!["adopt", f.ws.root.to_str().unwrap()],
            "this workspace itself",
        ),
        (vec!["fork", "--remove", busy.to_str().unwrap()], ""),
    ] {
        let r = f.run(&args);
        assert_ne!(r.code, Some(0), "{}", r.dump());
        assert!(r.stderr.contains(what), "{what}: {}", r.dump());
        assert_same(&before, &snapshot(&f.ws.root), "workspace after bad input");
        assert_same(&busy_before, &snapshot(&busy), "busy dir after bad input");
    }
    // --count with one busy member makes none.
    let p = f.dir("c");
    write(&f.dir("c2"), "x", b"busy");
    let r = f.run(&["fork", &v1, "--count", "3", p.to_str().unwrap()]);
    assert_ne!(r.code, Some(0));
    assert!(!f.dir("c1").exists() && !f.dir("c3").exists());
    assert_eq!(
        f.run(&["log", "--json"]).ok().json()["checkpoints"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn sigkill_during_fork_leaves_it_missing_or_complete() {
    let mut rng = Rng::new("sigkill_fork", 9);
    let f = Fleet::new();
    build_tree(&f.ws.root, 20, 40, &mut rng);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let base = snapshot(&f.ws.root);
    let mut outcomes = (0, 0);
    for i in 0..12u64 {
        let d = f.dir(&format!("k{i}"));
        let mut child = f
            .cmd(&f.ws.root, &["fork", &v1, d.to_str().unwrap()])
            .spawn()
            .unwrap();
        // Any moment is a valid crash point; spread them over the fork.
        std::thread::sleep(Duration::from_millis(i * 15));
        let _ = child.kill();
        let st = child.wait().unwrap();
        if d.join(".ckpt").exists() {
            assert_same(&base, &snapshot(&d), "a fork that survived SIGKILL");
            f.verify_store(&d);
            let st2 = f.at(&d, &["status", "--json"]).ok().json();
            assert_eq!(st2["clean"], true, "{st2}");
            outcomes.1 += 1;
        } else {
            let left: Vec<_> = std::fs::read_dir(&d)
                .map(|r| r.count())
                .into_iter()
                .collect();
            assert!(
                left.is_empty() || left == vec![0],
                "half a fork at {} ({st:?})",
                d.display()
            );
            // The same fork then succeeds (stale staging is cleaned up).
            f.run(&["fork", &v1, d.to_str().unwrap()]).ok();
            assert_same(&base, &snapshot(&d), "a fork after a killed one");
            outcomes.0 += 1;
        }
        assert_same(&base, &snapshot(&f.ws.root), "the parent during forks");
    }
    f.verify_store(&f.ws.root);
    eprintln!(
        "killed forks: {} missing, {} complete",
        outcomes.0, outcomes.1
    );
}

#[test]
fn sigkill_during_adopt_leaves_parent_unchanged_or_adopted() {
    let mut rng = Rng::new("sigkill_adopt", 11);
    let f = Fleet::new();
    build_tree(&f.ws.root, 20, 30, &mut rng);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let before = snapshot(&f.ws.root);
    let d = f.dir("winner");
    f.run(&["fork", &v1, d.to_str().unwrap()]).ok();
    build_tree(&d.join("more"), 10, 20, &mut rng);
    edit(&d, &mut rng, "w");
    f.save(&d);
    let won = snapshot(&d);
    for i in 0..8u64 {
        let mut child = f
            .cmd(&f.ws.root, &["adopt", d.to_str().unwrap()])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(i * 25));
        let _ = child.kill();
        let _ = child.wait();
        // An interrupted restore is reported, and re-running it finishes it.
        let st = f.run(&["status", "--json"]).ok().json();
        if let Some(target) = st["interrupted_restore"].as_str() {
            f.run(&["restore", target]).ok();
            assert_same(
                &won,
                &snapshot(&f.ws.root),
                "an interrupted adopt, finished",
            );
        } else {
            let now = snapshot(&f.ws.root);
            assert!(
                now == before || now == won,
                "adopt killed after {} ms left a state that is neither before nor adopted",
                i * 25
            );
        }
        assert_same(&won, &snapshot(&d), "the fork during adopt");
        f.verify_store(&f.ws.root);
        // Back to the start for the next round.
        f.run(&["restore", &v1]).ok();
        assert_same(&before, &snapshot(&f.ws.root), "reset");
    }
}
