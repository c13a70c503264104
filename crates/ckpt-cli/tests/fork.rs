//! `ckpt fork` and `restore --to` write into a fresh directory through
//! `ckpt_lib::engine::materialize`, which verifies each object as it writes it instead
//! of in a separate pass first. These tests pin down what that must keep:
//! - a damaged store object (bytes changed, truncated or extended; small
//!   objects, written from memory, and large ones, cloned or copied) makes
//!   the fork fail with exit 5 naming the object, and leaves the destination
//!   missing or empty as it was, with no fork store; once the object is
//!   repaired the same fork succeeds exactly, so the failure was the damage
//!   (with each copy strategy forced, so both the clone path and the
//!   from-memory path see damaged objects);
//! - modes (read-only and setgid directories, setuid, 0444, 0600 files) and
//!   mtimes come out exactly under any umask;
//! - directories nested deeper than `materialize::HOLD_DEPTH` are written
//!   too (the path that does not hold descriptors);
//! - `restore ID --to DIR -- PATH` writes PATH's subtree and the directories
//!   leading to it, nothing else.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::Rng;
use common::*;
use proptest::prelude::*;

/// The object file holding exactly `content`, and its hash (hex).
fn object_with(store: &Path, content: &[u8]) -> (PathBuf, String) {
    for shard in std::fs::read_dir(store.join("objects")).unwrap() {
        let shard = shard.unwrap().path();
        for f in std::fs::read_dir(&shard).unwrap() {
            let p = f.unwrap().path();
            if std::fs::read(&p).unwrap() == content {
                let hex = format!(
                    "{}{}",
                    shard.file_name().unwrap().to_string_lossy(),
                    p.file_name().unwrap().to_string_lossy()
                );
                return (p, hex);
            }
        }
    }
    panic!("no object holds that content");
}

fn overwrite(p: &Path, data: &[u8]) {
    chmod(p, 0o644);
    std::fs::write(p, data).unwrap();
    chmod(p, 0o444);
}

/// How a test damages an object.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// One byte changed, same length.
    Flip,
    /// Cut short.
    Truncate,
    /// Extra bytes at the end.
    Append,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    #[test]
    fn a_damaged_object_fails_the_fork_and_leaves_nothing(
        seed in any::<u64>(),
        large in any::<bool>(),
        damage in prop_oneof![Just(Damage::Flip), Just(Damage::Truncate), Just(Damage::Append)],
        into_empty in any::<bool>(),
        strategy in prop_oneof![Just(""), Just("reflink"), Just("copy_file_range"), Just("userspace")],
    ) {
        let ws = Ws::new();
        let mut rng = Rng::new("fork_damaged", seed);
        build_tree(&ws.root, 2, 6, &mut rng);
        // A read-only directory: cleanup must get through it.
        write(&ws.root, "ro/inner/file.txt", b"inside a read-only directory\n");
        chmod(&ws.root.join("ro/inner"), 0o555);
        chmod(&ws.root.join("ro"), 0o555);
        ws.init();
        let (v1, _) = ws.save();
        let s1 = snapshot(&ws.root);
        // big/blob1.bin is 200 kB (above the 64 KiB small-file limit).
        let victim = if large {
            "big/blob1.bin".to_string()
        } else {
            format!("d0{}/f000{}.txt", rng.below(2), rng.below(6))
        };
        let original = std::fs::read(ws.root.join(&victim)).unwrap();
        let (obj, hex) = object_with(&ws.store, &original);
        let mut bad = original.clone();
        match damage {
            Damage::Flip => {
                let i = rng.below(bad.len() as u64) as usize;
                bad[i] ^= 1 + rng.below(255) as u8;
            }
            Damage::Truncate => bad.truncate(rng.below(bad.len() as u64) as usize),
            Damage::Append => {
                let n = 1 + rng.below(5000) as usize;
                bad.extend(rng.bytes(n));
            }
        }
        overwrite(&obj, &bad);

        let dest = ws.fresh_dir();
        if into_empty {
            std::fs::create_dir(&dest).unwrap();
        }
        let fork_store = ws.tmp.path().join("fork-store");
        // Each copy strategy forced in turn (a forced reflink where the
        // filesystem has none also takes the clone-then-fall-back path).
        let fork = |ws: &Ws| {
            let args = ["fork", &v1, dest.to_str().unwrap(), "--store", fork_store.to_str().unwrap()];
            let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
            let mut c = command(&ws.root, &args);
            if !strategy.is_empty() {
                c.env("CKPT_COPY_STRATEGY", strategy);
            }
            let out = c.output().unwrap();
            Run {
                what: format!("fork with CKPT_COPY_STRATEGY={strategy:?}"),
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        };
        let r = fork(&ws);
        if r.code == Some(0) {
            // Only acceptable when the fork holds exactly the checkpoint:
            // a small object with bytes past its end is read for its
            // length only, so those bytes cannot reach the fork.
            prop_assert!(
                matches!(damage, Damage::Append) && !large,
                "fork of a damaged object ({damage:?}, {victim}) succeeded:\n{}", r.dump()
            );
            assert_same(&s1, &snapshot(&dest), "fork despite an extended small object");
        } else {
            prop_assert_eq!(r.code, Some(5), "{}", r.dump());
            prop_assert!(r.stderr.contains(&hex), "the error does not name object {}:\n{}", hex, r.dump());
            if into_empty {
                prop_assert_eq!(std::fs::read_dir(&dest).unwrap().count(), 0, "partial fork left in {}", dest.display());
            } else {
                prop_assert!(!dest.exists(), "partial fork left at {}", dest.display());
            }
            prop_assert!(!fork_store.exists(), "a failed fork made a store");
            // Repaired, the same fork goes through: the damage was the cause.
            overwrite(&obj, &original);
            fork(&ws).ok();
            assert_same(&s1, &snapshot(&dest), "fork after the repair");
        }
        // Let the temporary directory go (read-only directories inside).
        for d in [&ws.root, &dest] {
            for sub in ["ro/inner", "ro"] {
                if d.join(sub).exists() {
                    chmod(&d.join(sub), 0o755);
                }
            }
        }
    }
}

/// `ckpt fork` run through `sh` with the given umask.
fn fork_with_umask(ws: &Ws, id: &str, dest: &Path, umask: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
        .arg(bin())
        .args(["fork", id, dest.to_str().unwrap(), "--store"])
        .arg(dest.with_extension("store"))
        .current_dir(&ws.root)
        .env("HOME", &ws.root)
        .env_remove("CKPT_COPY_STRATEGY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fork with umask {umask}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn modes_and_mtimes_survive_any_umask() {
    let ws = Ws::new();
    let mut rng = Rng::new("fork_modes", Rng::time_seed());
    build_tree(&ws.root, 2, 5, &mut rng);
    let modes: &[(&str, u32)] = &[
        ("m/readonly.txt", 0o444),
        ("m/private.txt", 0o600),
        ("m/group.txt", 0o664),
        ("m/setuid", 0o4755),
        ("m/sticky-exec", 0o1777),
        ("m/big-private.bin", 0o640),
    ];
    for (i, (p, _)) in modes.iter().enumerate() {
        let len = if p.ends_with(".bin") { 100_000 } else { 10 + i };
        write(&ws.root, p, &rng.bytes(len));
    }
    for (p, m) in modes {
        chmod(&ws.root.join(p), *m);
    }
    std::fs::create_dir_all(ws.root.join("dirs/setgid/sub")).unwrap();
    write(&ws.root, "dirs/ro/f.txt", b"in a 0555 directory\n");
    write(&ws.root, "dirs/open/f.txt", b"in a 0777 directory\n");
    chmod(&ws.root.join("dirs/setgid"), 0o2775);
    chmod(&ws.root.join("dirs/ro"), 0o555);
    chmod(&ws.root.join("dirs/open"), 0o777);
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    for umask in ["077", "000", "022", "777"] {
        let dest = ws.fresh_dir();
        fork_with_umask(&ws, &v1, &dest, umask);
        assert_same(&s1, &snapshot(&dest), &format!("fork with umask {umask}"));
        chmod(&dest.join("dirs/ro"), 0o755);
    }
    chmod(&ws.root.join("dirs/ro"), 0o755);
}

#[test]
fn deeply_nested_directories_are_written() {
    let ws = Ws::new();
    // Deeper than HOLD_DEPTH (64), with files and siblings along the way.
    let mut rel = String::new();
    for i in 0..80 {
        if !rel.is_empty() {
            rel.push('/');
        }
        rel.push_str(&format!("n{}", i % 10));
        write(
            &ws.root,
            &format!("{rel}/file{i}.txt"),
            format!("{i}\n").as_bytes(),
        );
        if i % 7 == 0 {
            write(&ws.root, &format!("{rel}/side{i}/s.txt"), b"side\n");
            chmod(&ws.root.join(format!("{rel}/side{i}")), 0o750);
        }
    }
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    let dest = ws.fresh_dir();
    ws.run(&["fork", &v1, dest.to_str().unwrap()]).ok();
    assert_same(&s1, &snapshot(&dest), "deep fork");
}

#[test]
fn restore_to_with_paths_writes_those_subtrees_and_their_parents() {
    let ws = Ws::new();
    write(&ws.root, "d00/sub/a.txt", b"a\n");
    write(&ws.root, "d00/sub/deeper/b.txt", b"b\n");
    write(&ws.root, "d00/x.txt", b"not selected\n");
    write(&ws.root, "d01/y.txt", b"not selected\n");
    write(&ws.root, "d02/z.txt", b"selected file\n");
    write(&ws.root, "top.txt", b"not selected\n");
    chmod(&ws.root.join("d00"), 0o750);
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    let dest = ws.fresh_dir();
    ws.run(&[
        "restore",
        &v1,
        "--to",
        dest.to_str().unwrap(),
        "--",
        "d00/sub",
        "d02/z.txt",
    ])
    .ok();
    let want: Snapshot = s1
        .into_iter()
        .filter(|(p, _)| {
            let p = String::from_utf8_lossy(p);
            ["d00", "d00/sub", "d02", "d02/z.txt"].contains(&p.as_ref())
                || p.starts_with("d00/sub/")
        })
        .collect();
    assert_same(&want, &snapshot(&dest), "restore --to with paths");
    assert_eq!(
        std::fs::metadata(dest.join("d00"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o750
    );
}

/// A fork hashes each object it writes from unless the store's `verified`
/// record (docs/FORMAT.md) vouches for it: same inode, size and mtime as
/// when an earlier fork hashed it and found it intact. So an object
/// written after that (its mtime changes) is hashed again and the damage
/// caught; one damaged with its mtime set back is, as documented, not
/// (which shows that a fork does skip the hash), and `verify --store`
/// still finds it.
#[test]
fn a_fork_rehashes_an_object_written_since_the_last_fork_verified_it() {
    let ws = Ws::new();
    let mut rng = Rng::new("fork_verified", 3);
    build_tree(&ws.root, 1, 3, &mut rng);
    ws.init();
    let (v1, _) = ws.save();
    // big/blob1.bin: 200 kB, hashed through its descriptor on every
    // filesystem (smaller ones may be read into memory instead).
    let original = std::fs::read(ws.root.join("big/blob1.bin")).unwrap();
    let (obj, hex) = object_with(&ws.store, &original);
    // An old mtime, outside the racy window: the first fork records it.
    let set_old_mtime = || {
        let st = Command::new("touch")
            .args(["-d", "@1700000000"])
            .arg(&obj)
            .status()
            .unwrap();
        assert!(st.success());
    };
    set_old_mtime();
    let fork = |ws: &Ws| {
        let dest = ws.fresh_dir();
        let store = dest.with_extension("store");
        let r = ws.run(&[
            "fork",
            &v1,
            dest.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ]);
        (r, dest)
    };
    let (r, _) = fork(&ws);
    r.ok();
    assert!(
        ws.store.join("verified").exists(),
        "the first fork recorded nothing"
    );

    // Written since (a new mtime): hashed again, the damage is caught.
    let mut bad = original.clone();
    bad[17] ^= 0x5a;
    overwrite(&obj, &bad);
    let (r, _) = fork(&ws);
    assert_eq!(r.code, Some(5), "{}", r.dump());
    assert!(r.stderr.contains(&hex), "{}", r.dump());

    // The same damage with the recorded mtime set back: vouched for.
    set_old_mtime();
    let (r, dest) = fork(&ws);
    r.ok();
    assert_eq!(
        std::fs::read(dest.join("big/blob1.bin")).unwrap(),
        bad,
        "the fork hashed an object the record vouched for"
    );
    let v = ws.run(&["verify", "--store"]);
    assert_ne!(
        v.code,
        Some(0),
        "verify --store trusted the record:\n{}",
        v.dump()
    );
}
