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
//!   Also on loop btrfs with the workspace a subvolume (every fork a
//!   snapshot plus a restore of what differs; the parent has unsaved edits
//!   when forked), and `adopt --dry-run` changes nothing, not even the log.
//! - Crash points (ckpt-fault) at each durable step of a fork (its store's
//!   commits and index; for a subvolume fork, the restore's journal and
//!   renames) and of an adopt (import commit, each restore step): nothing
//!   under the fork's name, the parent unchanged or exactly adopted.
//! - Bad input: a non-empty directory, the workspace itself, a directory
//!   that is not a fork, every backend `doctor` says cannot work here
//!   forced with `--backend`, a subvolume fork onto another filesystem or
//!   of a workspace that is not a subvolume, `init --subvolume` off btrfs:
//!   a clear error, nothing changed. `--count` that runs out of space part
//!   way (a small tmpfs): the forks made stay whole and are named, the exit
//!   code is the I/O error's.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::fleet::{random_edits, Fleet};
use common::*;

/// One to four random edits below `root` ([`random_edits`]).
fn edit(root: &Path, rng: &mut Rng, tag: &str) {
    random_edits(root, rng, tag, 1);
}

#[test]
fn four_forks_each_see_only_their_own_edits_and_adopt_undoes() {
    four_forks(&test_base());
}

#[test]
fn four_forks_on_loop_btrfs() {
    on_loop("btrfs", &[]);
}

/// The property test with the workspace made a subvolume first, so every
/// fork is a snapshot plus a restore of what differs.
#[test]
fn four_subvolume_forks_on_loop_btrfs() {
    with_loop("btrfs", &[], |mnt| {
        four_forks_with(mnt, Some("btrfs-subvolume"))
    });
}

/// The property test with overlay forks (root: each fork a mount over one
/// shared lower; fork_overlay.rs has the rest of their tests).
#[test]
fn four_overlay_forks() {
    if !Fleet::new().overlay_works(false) {
        return;
    }
    four_forks_with(&test_base(), Some("overlay"));
}

/// The property test with overlay forks of a workspace whose store is a
/// btrfs subvolume (root): each fork's store is a snapshot of ours.
#[test]
fn four_overlay_forks_on_loop_btrfs() {
    with_loop("btrfs", &[], |mnt| {
        if Fleet::new_in(mnt).overlay_works(false) {
            four_forks_in(mnt, Some("overlay"), true);
        }
    });
}

#[test]
fn four_forks_on_loop_xfs() {
    on_loop("xfs", &["-m", "reflink=1"]);
}

fn on_loop(fs: &str, mkfs_args: &[&str]) {
    // Not a subvolume workspace: every file is a reflink.
    with_loop(fs, mkfs_args, |mnt| four_forks_with(mnt, Some("reflink")));
}

/// Runs `test` on a fresh loop filesystem, or skips with the reason.
fn with_loop(fs: &str, mkfs_args: &[&str], test: impl FnOnce(&Path)) {
    use common::loopfs::{mount, NoFs};
    match mount(fs, mkfs_args) {
        Ok(lfs) => test(&lfs.mnt),
        Err(NoFs::Missing(why)) => skip(&format!("forks on {fs}: {why}")),
        Err(NoFs::Refused(why)) => skip_env(&format!("forks on {fs}: {why}")),
    }
}

/// Runs `test` on a fresh loop btrfs (or skips with the reason) with a
/// fleet whose workspace and store are subvolumes (`init --subvolume`),
/// holding a random tree of `shape` (directories, files per directory)
/// from the seeded `Rng` `name`, which `test` gets too.
fn on_subvolume_fleet(
    name: &str,
    seed: u64,
    shape: (usize, usize),
    test: impl FnOnce(&Fleet, &mut Rng),
) {
    with_loop("btrfs", &[], |mnt| {
        let mut rng = Rng::new(name, seed);
        let f = Fleet::new_in(mnt);
        f.run(&["init", "--subvolume"]).ok();
        build_tree(&f.ws.root, shape.0, shape.1, &mut rng);
        test(&f, &mut rng);
    });
}

/// The property test on the filesystem holding `base`.
fn four_forks(base: &Path) {
    four_forks_with(base, None)
}

/// The property test; `backend`: the one every fork must have used (with
/// `btrfs-subvolume` the workspace is made a subvolume first).
fn four_forks_with(base: &Path, backend: Option<&str>) {
    four_forks_in(base, backend, backend == Some("btrfs-subvolume"))
}

/// [`four_forks_with`]; `subvolume`: make the workspace and its store
/// subvolumes first (`init --subvolume`), so every fork's store is a
/// snapshot of ours.
fn four_forks_in(base: &Path, backend: Option<&str>, subvolume: bool) {
    let mut rng = Rng::new("four_forks", 22);
    let f = Fleet::new_in(base);
    if subvolume {
        let r = f.run(&["init", "--subvolume", "--json"]).ok().json();
        assert_eq!(r["subvolume"]["already"], false, "{r}");
        assert_eq!(r["store_subvolume"]["already"], false, "{r}");
        assert_eq!(r["outcome"], "kept", "{r}");
    }
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
    // Agent state moved on after v1: each fork has v1's.
    f.run(&["state", "put", "plan", "later"]).ok();
    // Unsaved edits in the parent: a fork is of v1, not of what is on disk
    // (a subvolume fork starts from what is on disk and restores v1).
    edit(&f.ws.root, &mut rng, "unsaved");
    write(&f.ws.root, "unsaved-new/x.txt", b"not in v1");
    let dirty = snapshot(&f.ws.root);

    let prefix = f.dir("agent");
    let mut args = vec![
        "fork",
        &v1,
        "--count",
        "4",
        prefix.to_str().unwrap(),
        "--json",
    ];
    let overlay = backend == Some("overlay");
    if overlay {
        args.extend(["--backend", "overlay"]);
    }
    let r = f.run(&args).ok().json();
    let forks: Vec<PathBuf> = r["forks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| PathBuf::from(x["to"].as_str().unwrap()))
        .collect();
    assert_eq!(forks.len(), 4);
    for x in r["forks"].as_array().unwrap() {
        if subvolume {
            // `init --subvolume` made the store a subvolume too: each
            // fork's store is a snapshot of it, and no object moved.
            assert_eq!(x["store_snapshot"], true, "{x}");
            assert_eq!(x["objects"]["linked"], 0, "{x}");
        } else {
            // Same filesystem: the fork's store links the parent's objects.
            assert_eq!(x["store_snapshot"], false, "{x}");
            assert!(x["objects"]["linked"].as_u64().unwrap() > 0, "{x}");
        }
        assert_eq!(x["objects"]["copied"], 0, "{x}");
        if let Some(b) = backend {
            assert_eq!(x["backend"], b, "{x}");
        }
        if backend == Some("btrfs-subvolume") {
            // Only the unsaved edits were undone in the snapshot.
            let w = &x["restored"];
            assert!(
                w["written"].as_u64().unwrap() + w["removed"].as_u64().unwrap() > 0,
                "{x}"
            );
            assert!(w["written"].as_u64().unwrap() < 40, "{x}");
        }
    }
    assert_same(&dirty, &snapshot(&f.ws.root), "the parent after forking");
    // Back to v1 in the parent, as the rest of the test expects.
    f.run(&["restore", &v1, "--no-save"]).ok();
    assert_same(&base, &snapshot(&f.ws.root), "the parent back at v1");
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

    // A fork's first save after a 1-file edit reads that one file (an
    // overlay fork whose layers overlayfs reports on another device than
    // the lower's, as across btrfs subvolumes, gets no device map and
    // hashes every file once: docs/FORK.md).
    write(&forks[0], "d01/f0001.txt", b"fork one edit\n");
    let s = f.at(&forks[0], &["save", "--verbose"]).ok();
    let mapped = r["forks"][0]["overlay"]["index_mapped"] != false;
    assert!(
        !mapped || s.stderr.contains("read 1 files"),
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

    // A dry run changes nothing, not even the log.
    let log_before = f.run(&["log", "--json"]).ok().json();
    let dry = f
        .run(&["adopt", forks[2].to_str().unwrap(), "--dry-run", "--json"])
        .ok()
        .json();
    assert!(dry["adopted"].is_null(), "{dry}");
    assert!(
        !dry["restore"]["changes"].as_array().unwrap().is_empty(),
        "{dry}"
    );
    assert_eq!(
        f.run(&["log", "--json"]).ok().json(),
        log_before,
        "adopt --dry-run changed the log"
    );
    assert_same(
        &parent_want,
        &snapshot(&f.ws.root),
        "the parent after adopt --dry-run",
    );

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

    if overlay {
        // An overlay fork's lower is in the parent's store (docs/FORK.md):
        // removing the forks unmounts them and removes the lower.
        for d in &forks {
            f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
        }
        assert!(!f
            .store_of(&f.ws.root)
            .join("lowers")
            .read_dir()
            .unwrap()
            .any(|_| true));
        return;
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

/// After an adopt was killed: an interrupted restore is reported, and
/// re-running it gives exactly `won`; otherwise the parent is exactly
/// `before` or `won`.
/// What an adopt test starts from: the parent saved as `v1` (`before`),
/// and its fork `fork`, edited and saved (`won`).
struct Adoption {
    v1: String,
    before: Snapshot,
    fork: PathBuf,
    won: Snapshot,
}

impl Adoption {
    /// Saves the parent, forks it into `winner`, lets `edit_fork` change
    /// the fork and saves that.
    fn new(f: &Fleet, edit_fork: impl FnOnce(&Path)) -> Adoption {
        let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
        let before = snapshot(&f.ws.root);
        let fork = f.dir("winner");
        f.run(&["fork", &v1, fork.to_str().unwrap()]).ok();
        edit_fork(&fork);
        f.save(&fork);
        let won = snapshot(&fork);
        Adoption {
            v1,
            before,
            fork,
            won,
        }
    }

    /// After an adopt that may have been killed (`what`): the parent is
    /// unchanged or exactly the fork's checkpoint (an interrupted one is
    /// finished first), the fork is untouched and both stores are intact;
    /// then the parent is reset to `v1`.
    fn check_and_reset(&self, f: &Fleet, what: &str) {
        let st = f.run(&["status", "--json"]).ok().json();
        if let Some(target) = st["interrupted_restore"].as_str() {
            f.run(&["restore", target]).ok();
            assert_same(
                &self.won,
                &snapshot(&f.ws.root),
                &format!("{what}: interrupted adopt, finished"),
            );
        } else {
            let now = snapshot(&f.ws.root);
            assert!(
                now == self.before || now == self.won,
                "{what}: left a state that is neither before nor adopted"
            );
        }
        assert_same(&self.won, &snapshot(&self.fork), "the fork during adopt");
        f.verify_store(&f.ws.root);
        f.verify_store(&self.fork);
        f.run(&["restore", &self.v1]).ok();
        assert_same(&self.before, &snapshot(&f.ws.root), "reset");
    }
}

fn state_at(f: &Fleet, dir: &Path, key: &str) -> Option<String> {
    let r = f.at(dir, &["state", "get", key]);
    match r.code {
        Some(0) => Some(r.stdout.trim_end().to_string()),
        _ => None,
    }
}

/// `ckpt adopt DIR` of a fork whose directory name holds a `#` adopts that
/// fork's head (the name is not split into DIR#ID), and `DIR#ID` still
/// names a checkpoint of it.
#[test]
fn adopt_names_a_fork_whose_directory_holds_a_hash() {
    let f = Fleet::new();
    write(&f.ws.root, "a.txt", b"parent\n");
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let d = f.dir("x#1");
    f.run(&["fork", &v1, d.to_str().unwrap()]).ok();
    write(&d, "a.txt", b"fork edit\n");
    let fv = f.save(&d)["id"].as_str().unwrap().to_string();
    let dry = f
        .run(&["adopt", "--dry-run", "--json", d.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(dry["fork_checkpoint"], fv.as_str(), "{dry}");
    f.run(&["adopt", d.to_str().unwrap()]).ok();
    assert_eq!(
        std::fs::read(f.ws.root.join("a.txt")).unwrap(),
        b"fork edit\n"
    );
    let with_id = format!("{}#{v1}", d.display());
    let r = f
        .run(&["adopt", "--dry-run", "--json", &with_id])
        .ok()
        .json();
    assert_eq!(r["fork_checkpoint"], v1.as_str(), "{r}");
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
        (
            vec!["fork", &v1, busy.to_str().unwrap()],
            "is not empty; a fork needs a new or empty directory",
        ),
        (
            vec!["fork", &v1, inside.to_str().unwrap()],
            "inside the workspace",
        ),
        (
            vec!["fork", &v1, f.ws.root.to_str().unwrap()],
            "inside the workspace",
        ),
        (vec!["adopt", busy.to_str().unwrap()], "is not a fork"),
        (
            vec!["diff", "--fork", busy.to_str().unwrap()],
            "is not a fork",
        ),
        (
            vec!["adopt", f.ws.root.to_str().unwrap()],
            "this workspace itself",
        ),
        (
            vec!["fork", "--remove", busy.to_str().unwrap()],
            "is not a fork",
        ),
    ] {
        let r = f.run(&args);
        assert_ne!(r.code, Some(0), "{}", r.dump());
        // A directory that is no workspace is a bad argument here.
        if what == "is not a fork" {
            assert_eq!(r.code, Some(2), "{}", r.dump());
        }
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

/// `fork --count` that runs out of space part way, on a small tmpfs: the
/// forks made stay, each complete, and the error names them; the one that
/// failed leaves nothing; the exit code is the cause's (1: an I/O error),
/// not a usage error's.
#[test]
fn count_out_of_space_keeps_the_forks_made_and_exits_with_the_cause() {
    let Some(fs) = Tmpfs::mount_or_skip("5m") else {
        return;
    };
    let mut rng = Rng::new("count_out_of_space", 22);
    let f = Fleet::new();
    write(&f.ws.root, "big.bin", &rng.bytes(1_200_000));
    build_tree(&f.ws.root, 4, 8, &mut rng);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let base = snapshot(&f.ws.root);
    let prefix = fs.path().join("f");
    let r = f.run(&["fork", &v1, "--count", "6", prefix.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(r.stderr.contains("No space left"), "{}", r.dump());
    let made: Vec<PathBuf> = (1..=6)
        .map(|i| fs.path().join(format!("f{i}")))
        .take_while(|d| d.exists())
        .collect();
    assert!(
        !made.is_empty() && made.len() < 6,
        "{} forks made:\n{}",
        made.len(),
        r.dump()
    );
    assert!(r.stderr.contains("the forks made stay"), "{}", r.dump());
    for d in &made {
        assert!(r.stderr.contains(d.to_str().unwrap()), "{}", r.dump());
        assert_same(&base, &snapshot(d), "a fork made before the failure");
        f.verify_store(d);
    }
    // Nothing else under the forks' names: no partial fork, no staging.
    let mut left: Vec<String> = std::fs::read_dir(fs.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".ckpt-stores")
        .collect();
    left.sort();
    let want: Vec<String> = (1..=made.len()).map(|i| format!("f{i}")).collect();
    assert_eq!(left, want, "{}", r.dump());
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
    let a = Adoption::new(&f, |d| {
        build_tree(&d.join("more"), 10, 20, &mut rng);
        edit(d, &mut rng, "w");
    });
    for i in 0..8u64 {
        let mut child = f
            .cmd(&f.ws.root, &["adopt", a.fork.to_str().unwrap()])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(i * 25));
        let _ = child.kill();
        let _ = child.wait();
        a.check_and_reset(&f, &format!("adopt killed after {} ms", i * 25));
    }
}

/// Kills `ckpt ARGS` (run in `cwd` with the fleet's data home) at the
/// crash point `fault`; returns whether it was killed there (false: the
/// command finished without reaching it).
fn killed_at(f: &Fleet, cwd: &Path, args: &[&str], fault: &str) -> bool {
    let mut c = f.cmd(cwd, args);
    c.env("CKPT_FAULT", fault);
    let r = run_command(c, format!("CKPT_FAULT={fault} ckpt {}", args.join(" ")));
    match r.code {
        None => true,
        Some(0) => false,
        _ => panic!("{}", r.dump()),
    }
}

/// A fork killed at each durable step (its store's commits, its index):
/// the fork directory is missing (nothing under its name), the parent is
/// unchanged, and the same fork then succeeds and cleans up.
fn fork_killed_at_durable_steps(f: &Fleet, extra: &[&str], faults: &[&str]) {
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let base = snapshot(&f.ws.root);
    write(&f.ws.root, "unsaved.txt", b"not in v1");
    let parent = snapshot(&f.ws.root);
    let mut killed = 0;
    for (i, fault) in faults.iter().enumerate() {
        let d = f.dir(&format!("crash{i}"));
        let mut args = vec!["fork", v1.as_str(), d.to_str().unwrap()];
        args.extend_from_slice(extra);
        if killed_at(f, &f.ws.root, &args, fault) {
            killed += 1;
            // Nothing under its name (the empty directory the fork made
            // for it at most, which a fork into it accepts).
            let n = std::fs::read_dir(&d).map_or(0, |r| r.count());
            assert_eq!(n, 0, "CKPT_FAULT={fault}: half a fork at {}", d.display());
        } else {
            f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
        }
        assert_same(
            &parent,
            &snapshot(&f.ws.root),
            "the parent after a killed fork",
        );
        f.run(&args).ok();
        assert_same(&base, &snapshot(&d), "a fork after a killed one");
        f.verify_store(&d);
        let st = f.at(&d, &["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "{st}");
        let stale: Vec<String> = std::fs::read_dir(d.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(&format!("crash{i}.ckpt-fork")))
            .collect();
        assert!(
            stale.is_empty(),
            "CKPT_FAULT={fault}: staging left: {stale:?}"
        );
    }
    assert!(
        killed >= 2,
        "only {killed} of {faults:?} were reached by a fork"
    );
    f.verify_store(&f.ws.root);
    std::fs::remove_file(f.ws.root.join("unsaved.txt")).unwrap();
}

const FORK_FAULTS: &[&str] = &[
    "catalog.before_commit",
    "catalog.after_commit",
    "state.before_commit",
    "state.after_commit",
    "index.after_tmp_write",
    "index.after_rename",
];

#[test]
fn fork_killed_at_each_durable_step_leaves_nothing() {
    let mut rng = Rng::new("fork_faults", 13);
    let f = Fleet::new();
    build_tree(&f.ws.root, 4, 6, &mut rng);
    f.run(&["state", "put", "plan", "base"]).ok();
    fork_killed_at_durable_steps(&f, &[], FORK_FAULTS);
}

#[test]
fn adopt_killed_at_each_restore_step_is_unchanged_or_finished() {
    let mut rng = Rng::new("adopt_faults", 17);
    let f = Fleet::new();
    build_tree(&f.ws.root, 4, 6, &mut rng);
    let a = Adoption::new(&f, |d| {
        edit(d, &mut rng, "w");
        write(d, "won.txt", b"the winner");
    });
    let mut killed = 0;
    for fault in [
        "catalog.after_commit",
        "restore.after_pre_save",
        "restore.after_journal",
        "restore.after_state",
        "restore.after_rename",
        "restore.before_journal_end",
        "restore.after_journal_end",
    ] {
        let log_before = f.run(&["log", "--json"]).ok().json();
        if killed_at(&f, &f.ws.root, &["adopt", a.fork.to_str().unwrap()], fault) {
            killed += 1;
        }
        a.check_and_reset(&f, &format!("CKPT_FAULT={fault}"));
        assert_ne!(log_before, serde_json::Value::Null);
    }
    assert!(killed >= 5, "only {killed} adopt crash points were reached");
}

/// Every backend `ckpt doctor` says cannot work here is refused by
/// `--backend` with a clear error and nothing changed; an unknown name is
/// refused too.
#[test]
fn forced_backend_that_cannot_work_changes_nothing() {
    let mut rng = Rng::new("forced_backend", 4);
    let f = Fleet::new();
    build_tree(&f.ws.root, 2, 3, &mut rng);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let before = snapshot(&f.ws.root);
    let log = f.run(&["log", "--json"]).ok().json();
    let doc = f.run(&["doctor", "--json"]).ok().json();
    let probes = doc["fork_backend"]["probes"].as_array().unwrap().clone();
    assert_eq!(probes.len(), 4, "{doc}");
    let d = f.dir("forced");
    let mut refused = 0;
    for p in &probes {
        let name = p["backend"].as_str().unwrap();
        let r = f.run(&[
            "fork",
            &v1,
            d.to_str().unwrap(),
            "--backend",
            name,
            "--json",
        ]);
        if p["works"] == true {
            assert_eq!(r.code, Some(0), "{}", r.dump());
            assert_eq!(r.json()["backend"], name);
            let mut want = before.clone();
            want.retain(|k, _| k.as_slice() != b".ckpt");
            let mut got = snapshot(&d);
            got.retain(|k, _| k.as_slice() != b".ckpt");
            assert_same(&want, &got, "a forced-backend fork");
            f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
        } else {
            refused += 1;
            assert_ne!(r.code, Some(0), "{}", r.dump());
            assert!(
                r.stderr.contains(&format!("--backend {name} cannot fork"))
                    && r.stderr.contains("nothing was changed"),
                "{}",
                r.dump()
            );
            assert!(!d.exists(), "--backend {name} left {}", d.display());
        }
        assert_same(
            &before,
            &snapshot(&f.ws.root),
            "the parent after a forced backend",
        );
    }
    assert!(
        refused >= 1,
        "off btrfs the subvolume backend at least is refused"
    );
    let r = f.run(&["fork", &v1, d.to_str().unwrap(), "--backend", "zfs"]);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("unknown fork backend"), "{}", r.dump());
    if doc["workspace"]["fs_type"] != "btrfs" {
        let r = f.run(&["init", "--subvolume"]);
        assert_ne!(r.code, Some(0), "{}", r.dump());
        assert!(
            r.stderr.contains("not on btrfs") && r.stderr.contains("nothing was changed"),
            "{}",
            r.dump()
        );
    }
    assert_same(&before, &snapshot(&f.ws.root), "the parent at the end");
    assert_eq!(f.run(&["log", "--json"]).ok().json(), log);
}

/// The same on loop btrfs, with the workspace and its store subvolumes:
/// the fork is a snapshot whose store is a snapshot too, written without
/// an `fdatasync` per commit until it is closed (`Catalog::open_unsynced`).
/// A kill at any of its store's commits or index writes leaves nothing
/// under DIR's name, and the next fork is complete and verifies.
#[test]
fn subvolume_fork_killed_at_each_durable_step_leaves_nothing() {
    on_subvolume_fleet("subvolume_fork_faults", 17, (3, 5), |f, _| {
        f.run(&["state", "put", "plan", "base"]).ok();
        fork_killed_at_durable_steps(f, &["--backend", "btrfs-subvolume"], FORK_FAULTS);
    });
}

/// On loop btrfs, `fork --count 2` killed after each index write (the
/// template's, then each copy's): every fork directory is missing or a
/// complete fork, and the next `fork --count` into the same prefix leaves
/// no template, and no template store, behind.
#[test]
fn fork_count_killed_leaves_no_template_behind() {
    on_subvolume_fleet("fork_count_killed", 3, (3, 5), |f, _| {
        let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
        let base = snapshot(&f.ws.root);
        let stores = f.xdg.join("ckpt/stores");
        let leftovers = || -> Vec<String> {
            [f.ws.root.parent().unwrap(), stores.as_path()]
                .iter()
                .filter_map(|d| std::fs::read_dir(d).ok())
                .flat_map(|r| r.flatten())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("ckpt-template") || n.contains("ckpt-fork"))
                .collect()
        };
        let mut killed = 0;
        for n in 1..40 {
            let p = f.dir("k");
            let args = ["fork", v1.as_str(), "--count", "2", p.to_str().unwrap()];
            let was_killed = killed_at(f, &f.ws.root, &args, &format!("index.after_rename:{n}"));
            for i in 1..=2 {
                let d = f.dir(&format!("k{i}"));
                if std::fs::read_dir(&d).is_ok_and(|mut r| r.next().is_some()) {
                    assert_same(&base, &snapshot(&d), "a fork of a killed --count");
                    f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
                } else {
                    let _ = std::fs::remove_dir(&d);
                }
            }
            if !was_killed {
                assert!(leftovers().is_empty(), "{:?}", leftovers());
                break;
            }
            killed += 1;
            f.run(&args).ok();
            assert!(leftovers().is_empty(), "after kill {n}: {:?}", leftovers());
            for i in 1..=2 {
                let d = f.dir(&format!("k{i}"));
                assert_same(&base, &snapshot(&d), "a fork after a killed --count");
                f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
            }
        }
        assert!(killed >= 3, "only {killed} index writes were reached");
    });
}

/// The parent's `ckpt watch --daemon`, ready (its initial walk done),
/// stopped when dropped.
struct Watching<'a>(&'a Fleet);

impl Watching<'_> {
    fn start(f: &Fleet) -> Watching<'_> {
        let w = f.run(&["watch", "--daemon", "--json"]).ok().json();
        assert_eq!(w["complete"], true, "{w}");
        Watching(f)
    }
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["watch", "--stop"]);
    }
}

/// Checkpoint `rev` restored into the new directory `name` of the fleet:
/// what a fork of it must be.
fn materialised(f: &Fleet, rev: &str, name: &str) -> Snapshot {
    let dest = f.dir(name);
    f.run(&["restore", rev, "--to", dest.to_str().unwrap()])
        .ok();
    snapshot(&dest)
}

/// On loop btrfs with the parent's watcher running: a subvolume fork scans
/// only what the watcher names (and the directories whose records do not
/// claim every name), and is still exactly the checkpoint: unsaved edits
/// and new files undone, a nested workspace that was there at the save
/// left out, the checkpoint's agent state; a full scan in it finds nothing
/// to save.
#[test]
fn subvolume_fork_through_the_parents_watcher() {
    on_subvolume_fleet("fork_watcher", 5, (4, 6), |f, rng| {
        write(
            &f.ws.root,
            "d01/inner/.ckpt",
            b"another workspace's marker\n",
        );
        write(&f.ws.root, "d01/inner/theirs.txt", b"not ours");
        f.run(&["state", "put", "plan", "base"]).ok();
        let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
        let want = materialised(f, &v1, "want");
        let _watching = Watching::start(f);
        // The first save after the watcher started records its position
        // with the index; from then on it vouches.
        write(&f.ws.root, "after-watch.txt", b"saved as v2");
        f.save(&f.ws.root);
        edit(&f.ws.root, rng, "unsaved");
        write(&f.ws.root, "d02/new/deep.txt", b"not in v1");
        f.run(&["state", "put", "plan", "later"]).ok();

        let d = f.dir("through");
        let run = f
            .run(&["-v", "fork", &v1, d.to_str().unwrap(), "--json"])
            .ok();
        let r = run.json();
        assert_eq!(r["backend"], "btrfs-subvolume", "{r}");
        assert_eq!(r["store_snapshot"], true, "{r}");
        assert_eq!(r["restored"]["watcher"], true, "{}", run.dump());
        let x = &r["restored"];
        assert!(
            x["written"].as_u64().unwrap() + x["removed"].as_u64().unwrap() > 0,
            "{r}"
        );
        assert!(
            !d.join("d01/inner").exists(),
            "the nested workspace came along"
        );
        assert_same(&want, &snapshot(&d), "a fork through the parent's watcher");
        let st = f.at(&d, &["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "{st}");
        let full = f.at(&d, &["--full-scan", "save", "--json"]).ok().json();
        assert_eq!(full["saved"], false, "{full}");
        assert_eq!(state_at(f, &d, "plan").as_deref(), Some("base"));
        f.verify_store(&d);
        // The parent is untouched: its edits and its nested workspace.
        assert!(f.ws.root.join("d01/inner/theirs.txt").exists());
        assert!(f.ws.root.join("d02/new/deep.txt").exists());
    });
}

/// Property, on loop btrfs with the parent's watcher running: rounds of
/// random edits in the parent (modify, add, delete, chmod, and a rewrite
/// that keeps the size and mtime), some saved, each followed at once, with
/// no save, by a fork of a random checkpoint (one fork, or `--count 3`
/// through the template): every fork is made through the watcher and is
/// exactly that checkpoint, byte for byte with modes and mtimes, and a
/// full scan in it finds nothing to save.
#[test]
fn subvolume_forks_right_after_edits_through_the_watcher_are_exact() {
    on_subvolume_fleet("fork_watcher_rounds", 9, (4, 6), |f, rng| {
        let id = |v: serde_json::Value| v["id"].as_str().unwrap().to_string();
        let mut ids = vec![id(f.save(&f.ws.root))];
        let _watching = Watching::start(f);
        // The first save through the watcher records its position.
        write(&f.ws.root, "after-watch.txt", b"through the watcher");
        ids.push(id(f.save(&f.ws.root)));
        let mut wants = std::collections::HashMap::new();
        for round in 0..8 {
            edit(&f.ws.root, rng, &format!("r{round}"));
            if rng.below(3) == 0 {
                ids.push(id(f.save(&f.ws.root)));
                edit(&f.ws.root, rng, &format!("r{round}b"));
            }
            same_size_same_mtime(&f.ws.root, rng);
            let rev = ids[rng.below(ids.len() as u64) as usize].clone();
            let want = wants
                .entry(rev.clone())
                .or_insert_with(|| materialised(f, &rev, &format!("want-{rev}")));
            let count = if round % 3 == 2 { 3 } else { 1 };
            let p = f.dir(&format!("w{round}-"));
            let r = f
                .run(&[
                    "-v",
                    "fork",
                    &rev,
                    "--count",
                    &count.to_string(),
                    p.to_str().unwrap(),
                    "--json",
                ])
                .ok()
                .json();
            let forks = r["forks"].as_array().unwrap();
            assert_eq!(forks.len(), count, "{r}");
            for (i, x) in forks.iter().enumerate() {
                assert_eq!(x["backend"], "btrfs-subvolume", "{x}");
                assert_eq!(x["restored"]["watcher"], true, "round {round}: {x}");
                let d = f.dir(&format!("w{round}-{}", i + 1));
                let what = format!("round {round}: fork {} of {rev} through the watcher", i + 1);
                assert_same(want, &snapshot(&d), &what);
                let full = f.at(&d, &["--full-scan", "save", "--json"]).ok().json();
                assert_eq!(full["saved"], false, "{what}: {full}");
                f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
            }
        }
    });
}

/// A subvolume fork made through the watcher, and every copy of `fork
/// --count`, is not scanned, so the parent's watcher warms it
/// (`crate::daemon::warm`): it `lstat`s every entry of each such fork once,
/// counted by the watcher's status, and changes nothing in it.
#[test]
fn the_watcher_warms_every_entry_of_the_forks_it_spared_a_scan() {
    on_subvolume_fleet("fork_warm", 10, (3, 5), |f, _| {
        f.save(&f.ws.root);
        let _watching = Watching::start(f);
        write(&f.ws.root, "through.txt", b"the watcher");
        f.save(&f.ws.root);
        let one = f.dir("warm-one");
        let r = f
            .run(&["fork", "HEAD", one.to_str().unwrap(), "--json"])
            .ok()
            .json();
        assert_eq!(r["restored"]["watcher"], true, "{r}");
        let prefix = f.dir("warm-");
        f.run(&["fork", "HEAD", "--count", "3", prefix.to_str().unwrap()])
            .ok();
        let forks: Vec<PathBuf> = std::iter::once(one)
            .chain((1..=3).map(|i| f.dir(&format!("warm-{i}"))))
            .collect();
        let before: Vec<Snapshot> = forks.iter().map(|d| snapshot(d)).collect();
        let entries: u64 = forks.iter().map(|d| count_entries(d)).sum();
        // The walks run in the background: wait for them (a bound on a
        // stuck walk, not a timing).
        let mut status = serde_json::Value::Null;
        for _ in 0..2400 {
            status = f.run(&["watch", "--status", "--json"]).ok().json();
            if status["warming"] == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(status["warming"], 0, "{status}");
        assert_eq!(status["warmed_entries"], entries, "{status}");
        for (d, b) in forks.iter().zip(&before) {
            assert_same(b, &snapshot(d), "a warmed fork");
        }
    });
}

/// Every entry below `root` (not `root` itself), without following links.
fn count_entries(root: &Path) -> u64 {
    let mut n = 0;
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            n += 1;
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            }
        }
    }
    n
}

/// Rewrites a random file of `root` with other bytes of the same length and
/// puts its mtime back: only its ctime says it changed.
fn same_size_same_mtime(root: &Path, rng: &mut Rng) {
    let snap = snapshot(root);
    let files: Vec<&Vec<u8>> = snap
        .iter()
        .filter(|(_, s)| matches!(&s.what, What::File(b) if !b.is_empty()))
        .map(|(k, _)| k)
        .collect();
    let Some(rel) = files.get(rng.below(files.len().max(1) as u64) as usize) else {
        return;
    };
    let p = root.join(String::from_utf8_lossy(rel).as_ref());
    let old = std::fs::metadata(&p).unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    for b in bytes.iter_mut() {
        *b = b.wrapping_add(1);
    }
    let f = std::fs::OpenOptions::new().write(true).open(&p);
    let Ok(mut f) = f else { return }; // read-only after a chmod
    std::io::Write::write_all(&mut f, &bytes).unwrap();
    f.set_modified(old.modified().unwrap()).unwrap();
}

/// On loop btrfs: `init --subvolume` keeps every file and the workspace,
/// a subvolume fork is refused into another filesystem or a non-empty
/// directory, a fork killed at each durable step (including the restore
/// inside the snapshot) leaves nothing, and `fork --remove` deletes the
/// subvolume.
#[test]
fn subvolume_backend_on_loop_btrfs() {
    with_loop("btrfs", &[], |mnt| {
        let mut rng = Rng::new("subvolume_backend", 19);
        let f = Fleet::new_in(mnt);
        build_tree(&f.ws.root, 4, 6, &mut rng);
        let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
        let before = snapshot(&f.ws.root);
        let d = f.dir("sv");
        let r = f.run(&[
            "fork",
            &v1,
            d.to_str().unwrap(),
            "--backend",
            "btrfs-subvolume",
        ]);
        assert_ne!(r.code, Some(0), "{}", r.dump());
        assert!(
            r.stderr.contains("not a btrfs subvolume") && r.stderr.contains("init --subvolume"),
            "{}",
            r.dump()
        );
        assert!(!d.exists());

        let r = f.run(&["init", "--subvolume", "--json"]).ok().json();
        assert_eq!(r["subvolume"]["already"], false, "{r}");
        assert_eq!(r["store_subvolume"]["already"], false, "{r}");
        assert_same(
            &before,
            &snapshot(&f.ws.root),
            "the workspace after init --subvolume",
        );
        let st = f.run(&["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "{st}");
        f.verify_store(&f.ws.root);
        let r = f.run(&["init", "--subvolume", "--json"]).ok().json();
        assert_eq!(r["subvolume"]["already"], true, "{r}");
        let left: Vec<_> = std::fs::read_dir(f.ws.root.parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("ckpt-subvol"))
            .collect();
        assert!(left.is_empty(), "conversion leftovers: {left:?}");
        let doc = f.run(&["doctor", "--json"]).ok().json();
        assert_eq!(doc["fork_backend"]["backend"], "btrfs-subvolume", "{doc}");
        assert!(
            doc.to_string().contains("the store is a subvolume too"),
            "{doc}"
        );

        // Onto another filesystem than a snapshot can reach.
        let other = tempfile::tempdir_in(test_base()).unwrap();
        let far = other.path().join("far");
        let r = f.run(&[
            "fork",
            &v1,
            far.to_str().unwrap(),
            "--backend",
            "btrfs-subvolume",
        ]);
        assert_ne!(r.code, Some(0), "{}", r.dump());
        assert!(
            r.stderr.contains("not on the workspace's btrfs filesystem")
                && r.stderr.contains("nothing was changed"),
            "{}",
            r.dump()
        );
        assert!(!far.exists());
        // Automatic mode there: the next backend that works.
        let r = f
            .run(&["fork", &v1, far.to_str().unwrap(), "--json"])
            .ok()
            .json();
        assert_ne!(r["backend"], "btrfs-subvolume", "{r}");
        // A fork's store on another filesystem cannot be a snapshot of
        // ours: it is made, and the checkpoint's objects are copied in.
        let near = f.dir("near");
        let far_store = other.path().join("store");
        let r = f
            .run(&[
                "fork",
                &v1,
                near.to_str().unwrap(),
                "--store",
                far_store.to_str().unwrap(),
                "--json",
            ])
            .ok()
            .json();
        assert_eq!(r["backend"], "btrfs-subvolume", "{r}");
        assert_eq!(r["store_snapshot"], false, "{r}");
        assert!(r["objects"]["copied"].as_u64().unwrap() > 0, "{r}");
        assert_same(&before, &snapshot(&near), "a fork with its store elsewhere");
        let st = f.at(&near, &["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "{st}");
        f.verify_store(&near);
        f.run(&["fork", "--remove", near.to_str().unwrap()]).ok();
        assert!(!near.exists() && !far_store.exists());
        // Into a non-empty directory.
        write(&d, "mine.txt", b"keep");
        let r = f.run(&[
            "fork",
            &v1,
            d.to_str().unwrap(),
            "--backend",
            "btrfs-subvolume",
        ]);
        assert_ne!(r.code, Some(0));
        assert!(r.stderr.contains("not empty"), "{}", r.dump());
        assert_eq!(std::fs::read(d.join("mine.txt")).unwrap(), b"keep");
        remove_tree(&d);

        let r = f
            .run(&["fork", &v1, d.to_str().unwrap(), "--json"])
            .ok()
            .json();
        assert_eq!(r["backend"], "btrfs-subvolume", "{r}");
        assert_eq!(r["store_snapshot"], true, "{r}");
        assert_same(&before, &snapshot(&d), "a fork whose store is a snapshot");
        let st = f.at(&d, &["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "{st}");
        f.verify_store(&d);
        let r = f
            .run(&["fork", "--remove", d.to_str().unwrap(), "--json"])
            .ok()
            .json();
        assert_eq!(r["subvolume"], true, "{r}");
        assert!(!d.exists());

        let mut faults = FORK_FAULTS.to_vec();
        faults.extend([
            "restore.after_journal",
            "restore.after_rename",
            "restore.before_journal_end",
        ]);
        fork_killed_at_durable_steps(&f, &["--backend", "btrfs-subvolume"], &faults);
        assert_same(&before, &snapshot(&f.ws.root), "the workspace at the end");
    });
}
