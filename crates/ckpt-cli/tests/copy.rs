//! End-to-end tests of the copy engine through `ckpt cp`, `ckpt fork` and
//! `ckpt doctor`, on real files:
//! - every strategy, forced by `--strategy` and by `CKPT_COPY_STRATEGY`,
//!   copies a random tree exactly (contents, modes incl. setuid, mtimes,
//!   symlinks, empty files and directories, hard links, xattrs, FIFOs),
//!   keeps the holes of a sparse file where the filesystem reports them,
//!   and copies a sparse file larger than 4 GiB exactly;
//! - large files copied as parallel ranges are exact (tiny split size);
//! - copies from disk (ext4) to tmpfs and back are exact;
//! - `cp` refuses an existing target and changes nothing;
//! - `fork` gives an independent workspace equal to the checkpoint, and
//!   `fork --link` hard-links non-executable files to store objects.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::*;

const STRATEGIES: [&str; 3] = ["reflink", "copy_file_range", "userspace"];

fn set_xattr(p: &Path, name: &str, value: &[u8]) -> bool {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    unsafe {
        libc::setxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        ) == 0
    }
}

fn get_xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 4096];
    let r = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (r >= 0).then(|| {
        buf.truncate(r as usize);
        buf
    })
}

/// Whether the filesystem at `dir` reports holes (checked, not guessed).
fn reports_holes(dir: &Path) -> bool {
    let p = dir.join(".hole-probe");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(8 << 20).unwrap();
    drop(f);
    let blocks = std::fs::metadata(&p).unwrap().blocks();
    std::fs::remove_file(&p).unwrap();
    blocks == 0
}

/// A random tree with every kind of entry `cp -a` must keep.
fn varied_tree(root: &Path, rng: &mut Rng) -> bool {
    build_tree(root, 3, 20, rng);
    write(root, "empty.txt", b"");
    write(root, "setuid", b"#!/bin/sh\n");
    chmod(&root.join("setuid"), 0o4750);
    write(root, "readonly", b"ro");
    chmod(&root.join("readonly"), 0o400);
    write(root, "big/range.bin", &rng.bytes(3 << 20 | 12345));
    std::fs::hard_link(root.join("d00/f0000.txt"), root.join("d01/hardlink.txt")).unwrap();
    std::fs::create_dir(root.join("locked")).unwrap();
    write(root, "locked/inside", b"x");
    chmod(&root.join("locked"), 0o500);
    // A sparse file: data, a hole, data, a trailing hole.
    let sparse = root.join("sparse.img");
    let f = std::fs::File::create(&sparse).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&rng.bytes(100_000), 0).unwrap();
    f.write_all_at(&rng.bytes(5000), 20 << 20).unwrap();
    f.set_len(40 << 20).unwrap();
    drop(f);
    set_xattr(
        &root.join("d00/f0001.txt"),
        "user.ckpt-test",
        b"value\0with nul",
    )
}

fn check_extras(src: &Path, dst: &Path, xattrs: bool, what: &str) {
    let a = std::fs::metadata(dst.join("d00/f0000.txt")).unwrap();
    let b = std::fs::metadata(dst.join("d01/hardlink.txt")).unwrap();
    assert_eq!(a.ino(), b.ino(), "{what}: hard link not preserved");
    if xattrs {
        assert_eq!(
            get_xattr(&dst.join("d00/f0001.txt"), "user.ckpt-test").as_deref(),
            Some(&b"value\0with nul"[..]),
            "{what}: xattr not copied"
        );
    }
    let s = std::fs::metadata(src.join("sparse.img")).unwrap();
    let d = std::fs::metadata(dst.join("sparse.img")).unwrap();
    assert_eq!(d.len(), s.len(), "{what}: sparse length");
    if reports_holes(src) && reports_holes(dst.parent().unwrap()) {
        assert!(
            d.blocks() * 512 < 4 << 20,
            "{what}: holes filled: {} bytes allocated for 105 kB of data",
            d.blocks() * 512
        );
    }
}

#[test]
fn every_strategy_copies_exactly() {
    let base = tempfile::Builder::new()
        .prefix("ckpt-cp-")
        .tempdir_in(test_base())
        .unwrap();
    let src = base.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let mut rng = Rng::new("every_strategy_copies_exactly", Rng::time_seed());
    let xattrs = varied_tree(&src, &mut rng);
    if !xattrs {
        skip_env(&format!(
            "xattr check: user xattrs unsupported on {}",
            src.display()
        ));
    }
    let want = snapshot(&src);
    for (i, s) in STRATEGIES.iter().enumerate() {
        for via_env in [false, true] {
            let dst = base.path().join(format!("dst-{i}-{via_env}"));
            let mut c = command(
                base.path(),
                &[
                    "cp".as_ref(),
                    src.as_os_str(),
                    dst.as_os_str(),
                    // Tiny ranges: exercises the parallel split on small files.
                    "--split-at".as_ref(),
                    "1000000".as_ref(),
                ],
            );
            if via_env {
                c.env("CKPT_COPY_STRATEGY", s);
            } else {
                c.args(["--strategy", s]);
            }
            let out = c.output().unwrap();
            assert!(
                out.status.success(),
                "cp --strategy {s}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let what = format!("strategy {s} (env: {via_env})");
            assert_same(&want, &snapshot(&dst), &what);
            check_extras(&src, &dst, xattrs, &what);
        }
    }
}

#[test]
fn cp_recreates_fifos() {
    // (Not in the snapshot-compared tree: reading a FIFO would block.)
    let base = tempfile::tempdir_in(test_base()).unwrap();
    write(base.path(), "src/file", b"f");
    let st = Command::new("mkfifo")
        .arg(base.path().join("src/fifo"))
        .status()
        .unwrap();
    assert!(st.success());
    chmod(&base.path().join("src/fifo"), 0o640);
    let v = ckpt(base.path(), &["cp", "src", "dst", "--json"])
        .ok()
        .json();
    assert_eq!(v["specials"].as_u64(), Some(1), "{v}");
    let m = std::fs::symlink_metadata(base.path().join("dst/fifo")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()));
    assert_eq!(m.mode() & 0o7777, 0o640);
}

#[test]
fn bad_strategy_is_a_usage_error() {
    let base = tempfile::tempdir_in(test_base()).unwrap();
    write(base.path(), "a", b"a");
    let r = ckpt(base.path(), &["cp", "a", "b", "--strategy", "teleport"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    let out = command(base.path(), &["cp".as_ref(), "a".as_ref(), "b".as_ref()])
        .env("CKPT_COPY_STRATEGY", "teleport")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!base.path().join("b").exists(), "a refused copy created b");
}

#[test]
fn sparse_file_over_4_gib() {
    let base = tempfile::Builder::new()
        .prefix("ckpt-cp-big-")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    if !reports_holes(base.path()) {
        skip_env(&format!("{} does not report holes", base.path().display()));
        return;
    }
    let src = base.path().join("huge.img");
    let f = std::fs::File::create(&src).unwrap();
    use std::os::unix::fs::FileExt;
    let marks: [(u64, &[u8]); 3] = [
        (0, b"head"),
        ((4 << 30) + 12345, b"beyond four gib"),
        ((5 << 30) - 3, b"end"),
    ];
    for (off, data) in marks {
        f.write_all_at(data, off).unwrap();
    }
    drop(f);
    for s in STRATEGIES {
        let dst = base.path().join(format!("copy-{s}.img"));
        ckpt(
            base.path(),
            &["cp", "huge.img", dst.to_str().unwrap(), "--strategy", s],
        )
        .ok();
        let m = std::fs::metadata(&dst).unwrap();
        assert_eq!(m.len(), 5 << 30, "{s}: length");
        assert!(m.blocks() * 512 < 64 << 20, "{s}: holes were written out");
        let f = std::fs::File::open(&dst).unwrap();
        for (off, data) in marks {
            let mut buf = vec![0u8; data.len()];
            f.read_exact_at(&mut buf, off).unwrap();
            assert_eq!(buf, data, "{s}: bytes at {off}");
        }
        let mut buf = vec![1u8; 4096];
        f.read_exact_at(&mut buf, 3 << 30).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "{s}: hole not zero");
        assert_eq!(
            m.mtime(),
            std::fs::metadata(&src).unwrap().mtime(),
            "{s}: mtime"
        );
        std::fs::remove_file(&dst).unwrap();
    }
}

fn fs_magic(p: &Path) -> i64 {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut st) }, 0);
    st.f_type as i64
}

#[test]
fn disk_to_tmpfs_and_back() {
    let shm = Path::new("/dev/shm");
    let disk = tempfile::Builder::new()
        .prefix("ckpt-cp-disk-")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    let Ok(mem) = tempfile::Builder::new()
        .prefix("ckpt-cp-mem-")
        .tempdir_in(shm)
    else {
        skip_env("/dev/shm is not writable");
        return;
    };
    if fs_magic(disk.path()) == fs_magic(mem.path()) {
        skip_env("the temp dir is on the same filesystem type as /dev/shm");
        return;
    }
    let src = disk.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let mut rng = Rng::new("disk_to_tmpfs_and_back", Rng::time_seed());
    varied_tree(&src, &mut rng);
    let want = snapshot(&src);
    let there = mem.path().join("there");
    ckpt(disk.path(), &["cp", "src", there.to_str().unwrap()]).ok();
    assert_same(&want, &snapshot(&there), "disk → tmpfs");
    check_extras(&src, &there, false, "disk → tmpfs");
    let back = disk.path().join("back");
    ckpt(disk.path(), &["cp", there.to_str().unwrap(), "back"]).ok();
    assert_same(&want, &snapshot(&back), "tmpfs → disk");
    check_extras(&src, &back, false, "tmpfs → disk");
}

#[test]
fn cp_refuses_an_existing_target_and_changes_nothing() {
    let base = tempfile::tempdir_in(test_base()).unwrap();
    write(base.path(), "src/a", b"new");
    write(base.path(), "dst/src/a", b"old");
    write(base.path(), "file", b"old file");
    let before = snapshot(base.path());
    let r = ckpt(base.path(), &["cp", "src", "dst"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    assert!(r.stderr.contains("already exists"), "{}", r.dump());
    let r = ckpt(base.path(), &["cp", "src/a", "file"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    let r = ckpt(base.path(), &["cp", "src", "src/inner"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    let r = ckpt(base.path(), &["cp", "missing", "x"]);
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(r.stderr.contains("missing"), "{}", r.dump());
    assert_same(&before, &snapshot(base.path()), "refused copies");
    // Into an existing directory: like cp, the copy goes inside it.
    ckpt(base.path(), &["cp", "src/a", "dst"]).ok();
    assert_eq!(std::fs::read(base.path().join("dst/a")).unwrap(), b"new");
}

#[test]
fn fork_is_an_independent_workspace_equal_to_the_checkpoint() {
    let ws = Ws::new();
    let mut rng = Rng::new("fork_independent", Rng::time_seed());
    build_tree(&ws.root, 3, 30, &mut rng);
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    write(&ws.root, "d00/f0000.txt", b"changed after v1");
    ws.save();
    let fork = ws.fresh_dir();
    let fork_store = ws.tmp.path().join("fork-store");
    let r = ws
        .run(&[
            "fork",
            &v1,
            fork.to_str().unwrap(),
            "--store",
            fork_store.to_str().unwrap(),
            "--json",
        ])
        .ok();
    let v = r.json();
    assert_eq!(v["forked"].as_str(), Some(v1.as_str()));
    assert_same(&s1, &snapshot(&fork), "fork of v1");
    // The fork is a workspace with its own store: saving there leaves the
    // source's history alone, and editing it leaves the source's files alone.
    let source_log = ws.log_ids();
    write(&fork, "d01/f0001.txt", b"edited in the fork");
    let out = ckpt(&fork, &["save", "--json"]).ok();
    assert_eq!(out.json()["saved"].as_bool(), Some(true));
    assert_eq!(
        ws.log_ids(),
        source_log,
        "fork's save changed the source log"
    );
    assert_ne!(
        std::fs::read(ws.root.join("d01/f0001.txt")).unwrap(),
        b"edited in the fork"
    );
    ckpt(&fork, &["verify"]).ok();
    // Refused inside the workspace, and into a non-empty directory.
    let r = ws.run(&["fork", &v1, "inner"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    assert!(!ws.root.join("inner").exists());
    let r = ws.run(&["fork", &v1, fork.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
}

#[test]
fn fork_link_hard_links_store_objects() {
    let ws = Ws::new();
    let mut rng = Rng::new("fork_link", Rng::time_seed());
    build_tree(&ws.root, 2, 10, &mut rng);
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    let fork = ws.fresh_dir();
    let fork_store = ws.tmp.path().join("fork-store");
    ws.run(&[
        "fork",
        &v1,
        fork.to_str().unwrap(),
        "--link",
        "--store",
        fork_store.to_str().unwrap(),
    ])
    .ok();
    let got = snapshot(&fork);
    assert_eq!(got.len(), s1.len());
    for (path, want) in &s1 {
        let g = &got[path];
        let full = at(&fork, path);
        let m = std::fs::symlink_metadata(&full).unwrap();
        match &want.what {
            What::File(data) if !data.is_empty() && want.mode & 0o111 == 0 => {
                assert_eq!(g.what, want.what, "{}", full.display());
                assert!(
                    m.nlink() >= 2,
                    "{} is not a link to an object",
                    full.display()
                );
                assert_eq!(m.mode() & 0o222, 0, "{} is writable", full.display());
            }
            _ => assert_eq!(g, want, "{}", full.display()),
        }
    }
    // The store is intact: linking did not change any object.
    ws.run(&["verify", "--store"]).ok();
}

#[test]
fn doctor_reports_probed_capabilities() {
    let ws = Ws::new();
    ws.init();
    let r = ws.run(&["doctor"]).ok();
    for needle in [
        "workspace:",
        "store:",
        "probed workspace → store",
        "inotify",
        "copy strategy:",
    ] {
        assert!(
            r.stdout.contains(needle),
            "doctor lacks {needle:?}:\n{}",
            r.dump()
        );
    }
    let v = ws.run(&["doctor", "--json"]).ok().json();
    assert!(v["save_caps"]["copy_file_range"].is_boolean(), "{v}");
    assert!(v["store"]["free_bytes"].as_u64().unwrap() > 0, "{v}");
    // Same filesystem: hard links must have worked in the probe.
    assert_eq!(v["save_caps"]["hard_link"].as_bool(), Some(true), "{v}");
    let out = command(&ws.root, &["doctor".as_ref()])
        .env("CKPT_COPY_STRATEGY", "userspace")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("copy strategy: userspace"), "{text}");
}
