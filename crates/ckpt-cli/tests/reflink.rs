//! The reflink path on real copy-on-write filesystems: a loop-mounted xfs
//! (`mkfs.xfs -m reflink=1`) and, if `mkfs.btrfs` exists, btrfs. On each,
//! `ckpt init` must report "copy strategy: Reflink", a tree with multi-MB
//! files must round-trip exactly (in place and with `--to`), and storing a
//! 48 MiB file must cost far less than 48 MiB of disk space (the object
//! shares its extents with the workspace file).
//!
//! Then `ckpt fork` and `ckpt cp` of that workspace must share extents
//! (free space barely changes) and editing the fork must leave the source
//! alone.
//!
//! Needs root, the mkfs tool and loop mounts. When any is missing the test
//! reports a skip and returns (`common::skip`: under `CI=true`, a missing
//! mkfs tool or root fails the test; a refused loop mount does not).

mod common;

use std::path::Path;
use std::process::Command;

use common::loopfs::*;
use common::*;

/// Used bytes of the filesystem holding `p`.
fn used_bytes(p: &Path) -> u64 {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    (st.f_blocks - st.f_bfree) as u64 * st.f_frsize as u64
}

fn sync() {
    unsafe { libc::sync() };
}

fn reflink_round_trip(fs: &str, mkfs_args: &[&str]) {
    let lfs = match mount(fs, mkfs_args) {
        Ok(l) => l,
        Err(NoFs::Missing(why)) => {
            skip(&format!("reflink test ({fs}): {why}"));
            return;
        }
        Err(NoFs::Refused(why)) => {
            skip_env(&format!("reflink test ({fs}): {why}"));
            return;
        }
    };
    let ws = Ws::new_in(&lfs.mnt);
    let mut rng = Rng::new(&format!("reflink_{fs}"), Rng::time_seed());
    build_tree(&ws.root, 4, 50, &mut rng);
    for (i, mb) in [3usize, 5, 9].iter().enumerate() {
        write(
            &ws.root,
            &format!("large/file{i}.bin"),
            &rng.bytes(mb << 20),
        );
    }
    let init = ws.init();
    assert!(
        init.stdout.contains("copy strategy: Reflink"),
        "{fs}: init did not pick reflink:\n{}",
        init.dump()
    );
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    ws.assert_restores(&v1, &s1);

    // Change things, restore in place, exactly.
    write(&ws.root, "large/file1.bin", &rng.bytes(4 << 20));
    std::fs::remove_file(ws.root.join("large/file2.bin")).unwrap();
    write(&ws.root, "d00/f0000.txt", b"edited");
    let (v2, _) = ws.save();
    let s2 = snapshot(&ws.root);
    ws.run(&["restore", &v1]).ok();
    assert_same(
        &s1,
        &snapshot(&ws.root),
        &format!("{fs}: restore {v1} in place"),
    );
    ws.assert_restores(&v2, &s2);

    // Space: a 48 MiB file stored by reflink costs (almost) nothing more.
    let big = rng.bytes(48 << 20);
    write(&ws.root, "huge.bin", &big);
    drop(big);
    sync();
    let before = used_bytes(&lfs.mnt);
    let (v3, _) = ws.save();
    sync();
    let after = used_bytes(&lfs.mnt);
    let grew = after.saturating_sub(before);
    eprintln!("{fs}: saving a 48 MiB file used {} KiB more", grew >> 10);
    assert!(
        grew < 8 << 20,
        "{fs}: saving a 48 MiB file used {} MiB: the object does not share extents",
        grew >> 20
    );
    let s3 = snapshot(&ws.root);
    ws.assert_restores(&v3, &s3);
    if let Some(filefrag) = which("filefrag") {
        let out = Command::new(filefrag)
            .arg("-v")
            .arg(ws.root.join("huge.bin"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("shared"),
            "{fs}: filefrag shows no shared extents:\n{text}"
        );
    }
    fork_and_cp_share_extents(fs, &lfs, &ws, &v3);
    drop(ws);
    drop(lfs);
}

/// `ckpt fork` and `ckpt cp` on a reflink filesystem: the new tree shares
/// extents with the source (free space barely changes), and editing the
/// copy leaves the source alone.
fn fork_and_cp_share_extents(fs: &str, lfs: &LoopFs, ws: &Ws, id: &str) {
    let want = snapshot(&ws.root);
    let fork = lfs.mnt.join("fork");
    let fork_store = lfs.mnt.join("fork-store");
    sync();
    let before = used_bytes(&lfs.mnt);
    ws.run(&[
        "fork",
        id,
        fork.to_str().unwrap(),
        "--store",
        fork_store.to_str().unwrap(),
    ])
    .ok();
    sync();
    let grew = used_bytes(&lfs.mnt).saturating_sub(before);
    eprintln!("{fs}: forking ~70 MiB used {} KiB more", grew >> 10);
    assert!(
        grew < 8 << 20,
        "{fs}: fork used {} MiB: files do not share extents",
        grew >> 20
    );
    assert_same(&want, &snapshot(&fork), &format!("{fs}: fork"));
    // Edit the fork in place (not by rename): the source must not change.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(fork.join("huge.bin"))
            .unwrap();
        f.write_all_at(b"edited in the fork", 1 << 20).unwrap();
    }
    assert_same(
        &want,
        &snapshot(&ws.root),
        &format!("{fs}: source after editing the fork"),
    );

    let copy = lfs.mnt.join("copy");
    sync();
    let before = used_bytes(&lfs.mnt);
    let v = ckpt(
        &lfs.mnt,
        &[
            "cp",
            ws.root.to_str().unwrap(),
            copy.to_str().unwrap(),
            "--json",
        ],
    )
    .ok()
    .json();
    sync();
    let grew = used_bytes(&lfs.mnt).saturating_sub(before);
    assert!(
        v["reflinked"].as_u64().unwrap() > 0,
        "{fs}: cp did not reflink: {v}"
    );
    assert!(
        grew < 8 << 20,
        "{fs}: cp used {} MiB: files do not share extents",
        grew >> 20
    );
    assert_same(&want, &snapshot(&copy), &format!("{fs}: cp"));
}

#[test]
fn reflink_on_xfs() {
    reflink_round_trip("xfs", &["-q", "-f", "-m", "reflink=1"]);
}

#[test]
fn reflink_on_btrfs() {
    reflink_round_trip("btrfs", &["-q", "-f"]);
}
