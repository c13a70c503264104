//! Overlay forks (docs/FORK.md, "overlayfs"): `ckpt fork ID DIR --backend
//! overlay` (root: a mount that lasts until `fork --remove` or a reboot),
//! `ckpt fork ID DIR -- CMD` (CMD in a new mount namespace, and a user
//! namespace when not root), `ckpt fork --mount DIR`, and the fleet
//! commands on them.
//!
//! - Two forks of one checkpoint share one lower (same directory, same
//!   inode); edits in each fork and in the parent are seen only there,
//!   byte for byte with modes and mtimes; the lower never changes; each
//!   fork's checkpoints restore exactly; `verify --store` is clean; a
//!   fork's first save after a 1-file edit reads that one file; adopt then
//!   undo gives back the parent's state; `fork --remove` unmounts and
//!   removes the upper, and for the last fork the lower.
//! - Unmounted (as after a reboot): `ckpt forks` says so, `fork --mount`
//!   mounts it again with its edits, and its first save still reads only
//!   the edited file (the index is carried to the new mount's device).
//! - `-- CMD`: CMD runs in DIR over the fork and its writes land in the
//!   upper layer; afterwards DIR has no mount; ckpt exits with CMD's code;
//!   also as an unprivileged user (`setpriv` to nobody) where possible.
//! - Crash points (ckpt-fault) of an overlay fork: nothing under DIR's
//!   name, or a complete fork that is not mounted (as after a reboot); the
//!   parent unchanged; the next fork into DIR works.
//!
//! Every test skips (with the reason) when `ckpt doctor` says overlay
//! mounts do not work here; as root under `CI=true` they must work.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::fleet::{random_edits, Fleet};
use common::*;

/// Unmounts whatever is still mounted below the test's directory when a
/// test fails half way (so its temporary directory can be removed).
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let Ok(mi) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return;
        };
        for line in mi.lines() {
            if let Some(p) = line.split(' ').nth(4) {
                if Path::new(p).starts_with(&self.0) {
                    let _ = std::process::Command::new("umount")
                        .arg("-l")
                        .arg(p)
                        .status();
                }
            }
        }
    }
}

/// The files of the fork `d` (its marker, which lives in its upper layer
/// and names its own store, left out).
fn files(d: &Path) -> Snapshot {
    let mut s = snapshot(d);
    s.retain(|k, _| k.as_slice() != b".ckpt");
    s
}

/// Whether `d` is an overlay mount point (in this namespace).
fn mounted(d: &Path) -> bool {
    let Ok(mi) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let d = d.canonicalize().unwrap_or(d.to_path_buf());
    mi.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.get(4).is_some_and(|p| Path::new(p) == d) && l.contains(" - overlay ")
    })
}

/// Every entry below `root` given an mtime far older than the racy window.
fn old_mtimes(root: &Path) {
    let st = std::process::Command::new("find")
        .arg(root)
        .args(["-exec", "touch", "-h", "-d", "@1700000000", "{}", "+"])
        .status()
        .unwrap();
    assert!(st.success());
}

/// A tree whose files are older than the racy window.
fn build(f: &Fleet, seed: u64) -> Rng {
    let mut rng = Rng::new("fork_overlay", seed);
    build_tree(&f.ws.root, 5, 6, &mut rng);
    chmod(&f.ws.root.join("d00"), 0o750);
    write(&f.ws.root, "run.sh", b"#!/bin/sh\necho hi\n");
    chmod(&f.ws.root.join("run.sh"), 0o755);
    old_mtimes(&f.ws.root);
    rng
}

/// Two to five random edits below `root` ([`random_edits`]).
fn edit(root: &Path, rng: &mut Rng, tag: &str) {
    random_edits(root, rng, tag, 2);
}

/// `ckpt save --verbose` in `d` after writing one file reads that one file.
fn first_save_reads_one_file(f: &Fleet, d: &Path, what: &str) {
    write(d, "d01/f0001.txt", format!("{what}\n").as_bytes());
    let s = f.at(d, &["save", "--verbose"]).ok();
    assert!(
        s.stderr.contains("read 1 files"),
        "{what}: the first save re-read more than the edited file:\n{}",
        s.dump()
    );
}

#[test]
fn overlay_forks_share_a_lower_and_see_only_their_own_edits() {
    let f = Fleet::new();
    let _u = Unmount(f.ws.tmp.path().to_path_buf());
    if !f.overlay_works(false) {
        return;
    }
    let mut rng = build(&f, 1);
    f.run(&["state", "put", "plan", "base"]).ok();
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let base = snapshot(&f.ws.root);

    let (a, b) = (f.dir("a"), f.dir("b"));
    let mut reports = Vec::new();
    for d in [&a, &b] {
        let r = f
            .run(&[
                "fork",
                &v1,
                d.to_str().unwrap(),
                "--backend",
                "overlay",
                "--json",
            ])
            .ok()
            .json();
        assert_eq!(r["backend"], "overlay", "{r}");
        assert_eq!(r["overlay"]["mount"], "persistent", "{r}");
        assert_eq!(r["overlay"]["index_mapped"], true, "{r}");
        assert!(mounted(d), "{} is not an overlay mount: {r}", d.display());
        reports.push(r);
    }
    // One lower, made by the first fork, inside the parent's store.
    assert_eq!(reports[0]["overlay"]["lower_made"], true);
    assert_eq!(reports[1]["overlay"]["lower_made"], false);
    let lower = PathBuf::from(reports[0]["overlay"]["lower"].as_str().unwrap());
    assert_eq!(
        reports[1]["overlay"]["lower"],
        reports[0]["overlay"]["lower"]
    );
    assert!(
        lower.starts_with(f.store_of(&f.ws.root)),
        "{}",
        lower.display()
    );
    let ino = std::fs::metadata(lower.join("tree/run.sh")).unwrap().ino();
    // overlayfs shows a lower file with its own inode number.
    assert_eq!(std::fs::metadata(a.join("run.sh")).unwrap().ino(), ino);
    assert_eq!(std::fs::metadata(b.join("run.sh")).unwrap().ino(), ino);
    let upper = PathBuf::from(reports[0]["overlay"]["upper"].as_str().unwrap());
    assert_eq!(
        upper.parent().unwrap().parent(),
        a.parent(),
        "upper beside the fork"
    );

    for d in [&a, &b] {
        assert_same(&base, &files(d), "a fresh overlay fork");
        let st = f.at(d, &["status", "--json"]).ok().json();
        assert_eq!(st["clean"], true, "{st}");
        assert_eq!(
            f.at(d, &["state", "get", "plan"]).ok().stdout.trim_end(),
            "base"
        );
    }
    first_save_reads_one_file(&f, &a, "fork a");

    // Edits everywhere; each sees its own; the lower never changes.
    edit(&a, &mut rng, "a");
    edit(&b, &mut rng, "b");
    edit(&f.ws.root, &mut rng, "parent");
    let (want_a, want_b, want_p) = (files(&a), files(&b), snapshot(&f.ws.root));
    assert_ne!(want_a, want_b);
    assert_same(
        &base,
        &snapshot(&lower.join("tree")),
        "the lower after edits",
    );
    let mut heads = Vec::new();
    for (d, want) in [(&a, &want_a), (&b, &want_b)] {
        let id = f.save(d)["id"].as_str().unwrap().to_string();
        assert_same(want, &files(d), "a fork after its save");
        let dest = f.dir(&format!(
            "check-{id}-{}",
            d.file_name().unwrap().to_string_lossy()
        ));
        f.at(d, &["restore", &id, "--to", dest.to_str().unwrap()])
            .ok();
        assert_same(want, &snapshot(&dest), "a fork's checkpoint restores");
        remove_tree(&dest);
        f.verify_store(d);
        heads.push(id);
    }
    assert_same(&want_p, &snapshot(&f.ws.root), "the parent after all edits");
    f.verify_store(&f.ws.root);

    let list = f.run(&["forks", "--json"]).ok().json();
    let forks = list["forks"].as_array().unwrap();
    assert_eq!(forks.len(), 2, "{list}");
    for x in forks {
        assert_eq!(x["overlay"]["mounted"], true, "{x}");
    }

    // Adopt fork a, then undo.
    let r = f.run(&["adopt", a.to_str().unwrap(), "--json"]).ok().json();
    assert_same(&want_a, &snapshot(&f.ws.root), "the parent after adopt");
    let undo = r["restore"]["undo"].as_str().unwrap().to_string();
    f.run(&["restore", &undo]).ok();
    assert_same(&want_p, &snapshot(&f.ws.root), "adopt then undo");

    // Remove: the first keeps the shared lower, the last removes it.
    let r = f
        .run(&["fork", "--remove", a.to_str().unwrap(), "--json"])
        .ok()
        .json();
    assert_eq!(r["overlay"]["unmounted"], true, "{r}");
    assert_eq!(r["overlay"]["lower_removed"], false, "{r}");
    assert!(!a.exists() && !upper.parent().unwrap().exists(), "{r}");
    assert!(lower.is_dir());
    assert_same(&want_b, &files(&b), "fork b after removing a");
    let r = f
        .run(&["fork", "--remove", b.to_str().unwrap(), "--json"])
        .ok()
        .json();
    assert_eq!(r["overlay"]["lower_removed"], true, "{r}");
    assert!(!b.exists() && !lower.exists(), "{r}");
    assert!(f.run(&["forks", "--json"]).ok().json()["forks"]
        .as_array()
        .unwrap()
        .is_empty());
    f.verify_store(&f.ws.root);
}

#[test]
fn an_unmounted_overlay_fork_is_listed_and_mounts_again() {
    let f = Fleet::new();
    let _u = Unmount(f.ws.tmp.path().to_path_buf());
    if !f.overlay_works(false) {
        return;
    }
    let mut rng = build(&f, 2);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let d = f.dir("fork");
    f.run(&["fork", &v1, d.to_str().unwrap(), "--backend", "overlay"])
        .ok();
    edit(&d, &mut rng, "x");
    // Old mtimes (a file saved within 50 ms of its write is re-hashed by
    // the next save, by design); this also copies every file up.
    old_mtimes(&d);
    f.save(&d);
    let want = files(&d);
    // What a reboot does to it.
    let st = std::process::Command::new("umount")
        .arg(&d)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(!mounted(&d));
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    let list = f.run(&["forks", "--json"]).ok().json();
    assert_eq!(list["forks"][0]["overlay"]["mounted"], false, "{list}");
    let text = f.run(&["forks"]).ok().stdout;
    assert!(
        text.contains("not mounted") && text.contains("--mount"),
        "{text}"
    );
    // Mount it again: everything is there, and the index still holds.
    let r = f
        .run(&["fork", "--mount", d.to_str().unwrap(), "--json"])
        .ok()
        .json();
    assert_eq!(r["index_mapped"], true, "{r}");
    assert!(mounted(&d));
    assert_same(&want, &files(&d), "the fork mounted again");
    let st = f.at(&d, &["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");
    first_save_reads_one_file(&f, &d, "after --mount");
    // Mounted already: refused.
    let r = f.run(&["fork", "--mount", d.to_str().unwrap()]);
    assert_ne!(r.code, Some(0));
    assert!(r.stderr.contains("mounted already"), "{}", r.dump());
    // Removing an unmounted one works too.
    std::process::Command::new("umount")
        .arg(&d)
        .status()
        .unwrap();
    f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
    assert!(!d.exists());
    f.verify_store(&f.ws.root);
}

/// `ckpt fork ID DIR -- CMD` for `who` (None: this user), through `run`.
fn command_fork(
    f: &Fleet,
    v1: &str,
    d: &Path,
    wrap: &dyn Fn(std::process::Command) -> std::process::Command,
) {
    let base = files(&f.ws.root);
    let script = format!(
        "test -f run.sh && echo made > made.txt && rm d00/f0000.txt && {} save --verbose && exit 7",
        bin()
    );
    let r = run_command(
        wrap(f.cmd(
            &f.ws.root,
            &["fork", v1, d.to_str().unwrap(), "--", "sh", "-c", &script],
        )),
        "ckpt fork -- sh".into(),
    );
    assert_eq!(r.code, Some(7), "ckpt exits with CMD's code:\n{}", r.dump());
    assert!(
        r.stderr.contains("read 1 files"),
        "the save in the namespace:\n{}",
        r.dump()
    );
    // The mount is gone; the upper layer holds what CMD wrote.
    assert!(!mounted(d));
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
    let name = d.file_name().unwrap().to_string_lossy().into_owned();
    let upper = d
        .parent()
        .unwrap()
        .join(format!(".{name}.ckpt-overlay/upper"));
    assert_eq!(std::fs::read(upper.join("made.txt")).unwrap(), b"made\n");
    let list = run_command(
        wrap(f.cmd(&f.ws.root, &["forks", "--json"])),
        "forks".into(),
    )
    .ok()
    .json();
    assert_eq!(list["forks"][0]["overlay"]["mounted"], false, "{list}");
    // Again over the same fork: its files are there.
    let check = "test \"$(cat made.txt)\" = made && test ! -e d00/f0000.txt";
    let r = run_command(
        wrap(f.cmd(
            &f.ws.root,
            &[
                "fork",
                "--mount",
                d.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                check,
            ],
        )),
        "ckpt fork --mount -- sh".into(),
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert_eq!(base, files(&f.ws.root), "the parent");
    run_command(
        wrap(f.cmd(&f.ws.root, &["fork", "--remove", d.to_str().unwrap()])),
        "remove".into(),
    )
    .ok();
    assert!(!d.exists() && !upper.exists());
}

#[test]
fn a_command_runs_over_an_overlay_fork_in_a_namespace() {
    let f = Fleet::new();
    let _u = Unmount(f.ws.tmp.path().to_path_buf());
    if !f.overlay_works(true) {
        return;
    }
    build(&f, 3);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    command_fork(&f, &v1, &f.dir("cmd"), &|c| c);
    // Bad input: -- CMD with another backend, or with --count.
    let d = f.dir("bad");
    for extra in [&["--backend", "copy"][..], &["--count", "2"][..]] {
        let mut args = vec!["fork", v1.as_str(), d.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        let r = f.run(&args);
        assert_ne!(r.code, Some(0), "{}", r.dump());
        assert!(r.stderr.contains("nothing was changed"), "{}", r.dump());
    }
    assert!(!d.exists() && !f.dir("bad1").exists());
}

/// The same as an unprivileged user (nobody), in a user namespace: the
/// whole test directory is handed to that user.
#[test]
fn a_command_runs_over_an_overlay_fork_as_an_unprivileged_user() {
    if !is_root() {
        // Not root: the test above already ran unprivileged.
        return;
    }
    let Some(setpriv) = loopfs::which("setpriv") else {
        skip("setpriv (util-linux) is missing");
        return;
    };
    let f = Fleet::new();
    let _u = Unmount(f.ws.tmp.path().to_path_buf());
    let st = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(f.ws.tmp.path())
        .status()
        .unwrap();
    assert!(st.success());
    let nobody = |c: std::process::Command| {
        let mut n = std::process::Command::new(&setpriv);
        n.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        n.arg(c.get_program()).args(c.get_args());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => n.env(k, v),
                None => n.env_remove(k),
            };
        }
        n.env("HOME", f.ws.tmp.path());
        if let Some(d) = c.get_current_dir() {
            n.current_dir(d);
        }
        n
    };
    // The binary must be reachable by that user.
    let probe = run_command(
        nobody(f.cmd(&f.ws.root, &["doctor", "--json"])),
        "doctor as nobody".into(),
    );
    if probe.code != Some(0) {
        skip_env(&format!(
            "ckpt does not run as nobody here: {}",
            probe.dump()
        ));
        return;
    }
    let doc = probe.json();
    if doc["overlay_mount"]["namespace"]["works"] != true {
        skip_env(&format!(
            "no overlay in a user namespace: {}",
            doc["overlay_mount"]["namespace"]["why"]
        ));
        return;
    }
    assert_eq!(doc["overlay_mount"]["mount"]["works"], false, "{doc}");
    // Commands as nobody in the workspace (root made the tree: hand it over).
    build(&f, 4);
    std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(f.ws.tmp.path())
        .status()
        .unwrap();
    let r = run_command(
        nobody(f.cmd(&f.ws.root, &["save", "--json"])),
        "save".into(),
    )
    .ok()
    .json();
    let v1 = r["id"].as_str().unwrap().to_string();
    // Without -- CMD nobody cannot mount: refused, nothing changed.
    let d = f.dir("mine");
    let r = run_command(
        nobody(f.cmd(
            &f.ws.root,
            &["fork", &v1, d.to_str().unwrap(), "--backend", "overlay"],
        )),
        "fork as nobody".into(),
    );
    assert_ne!(r.code, Some(0), "{}", r.dump());
    assert!(r.stderr.contains("nothing was changed"), "{}", r.dump());
    assert!(!d.exists());
    command_fork(&f, &v1, &d, &nobody);
}

/// An overlay fork killed at each of its crash points, and at its store's
/// commits and index: nothing under DIR's name (an empty directory at
/// most), or a complete fork that is not mounted yet (as after a reboot),
/// which `fork --mount` completes; the parent unchanged; the next fork
/// into DIR works and leaves no staging directory.
#[test]
fn overlay_fork_killed_at_each_step_is_absent_or_complete() {
    let f = Fleet::new();
    let _u = Unmount(f.ws.tmp.path().to_path_buf());
    if !f.overlay_works(false) {
        return;
    }
    build(&f, 5);
    let v1 = f.save(&f.ws.root)["id"].as_str().unwrap().to_string();
    let base = snapshot(&f.ws.root);
    let mut faults: Vec<&str> = ckpt_fault::OVERLAY_POINTS.to_vec();
    faults.extend(["catalog.after_commit", "index.after_rename"]);
    let mut killed = 0;
    for (i, fault) in faults.iter().enumerate() {
        let d = f.dir(&format!("crash{i}"));
        let args = [
            "fork",
            v1.as_str(),
            d.to_str().unwrap(),
            "--backend",
            "overlay",
        ];
        let mut c = f.cmd(&f.ws.root, &args);
        c.env("CKPT_FAULT", fault);
        let r = run_command(c, format!("CKPT_FAULT={fault} ckpt fork"));
        assert!(r.code.is_none() || r.code == Some(0), "{}", r.dump());
        if r.code.is_none() {
            killed += 1;
            let listed = f.run(&["forks", "--json"]).ok().json();
            let n = listed["forks"].as_array().unwrap().len();
            if *fault == "overlay.before_mount" {
                // Published, not mounted: exactly the state after a reboot.
                assert_eq!(n, 1, "{fault}: {listed}");
                assert_eq!(listed["forks"][0]["overlay"]["mounted"], false);
                f.run(&["fork", "--mount", d.to_str().unwrap()]).ok();
                assert_same(&base, &files(&d), "a killed fork, mounted");
            } else {
                assert_eq!(n, 0, "{fault}: listed a half-made fork: {listed}");
                let left = std::fs::read_dir(&d).map_or(0, |r| r.count());
                assert_eq!(left, 0, "{fault}: half a fork at {}", d.display());
                f.run(&args).ok();
                assert_same(&base, &files(&d), "a fork after a killed one");
            }
        } else {
            assert_same(&base, &files(&d), "a fork not killed");
        }
        assert_same(&base, &snapshot(&f.ws.root), "the parent");
        f.verify_store(&d);
        let stale: Vec<String> = std::fs::read_dir(f.ws.tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".ckpt-fork."))
            .collect();
        assert!(stale.is_empty(), "{fault}: staging left: {stale:?}");
        f.run(&["fork", "--remove", d.to_str().unwrap()]).ok();
    }
    assert!(killed >= 4, "only {killed} of {faults:?} were reached");
    let lowers = f.store_of(&f.ws.root).join("lowers");
    let left: Vec<_> =
        std::fs::read_dir(&lowers).map_or(vec![], |r| r.flatten().map(|e| e.file_name()).collect());
    assert!(
        left.is_empty(),
        "lowers left after every fork was removed: {left:?}"
    );
    f.verify_store(&f.ws.root);
}
