//! Hostile and odd input: each case asserts a clear error (a documented exit
//! code, a message naming the path, never a panic) or a correct capture, and
//! that nothing changed in the store or the workspace — in particular that
//! no write ever lands outside the workspace, whatever symlinks the
//! workspace or a crafted checkpoint contain.
//!
//! Unreadable files and directories are not hostile: they are saved and
//! restored around (`tests/unreadable.rs`).
//!
//! Cases that need privileges (a tmpfs mount for a full disk or a read-only
//! store, `mknod`) report a skip
//! when the machine does not allow them (`common::skip_needs_root`: a
//! failure under `CI=true` when not root).

mod common;

use ckpt_lib::store::catalog::Durable;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use common::*;

/// A clear failure: the expected exit code, a message on stderr that
/// contains `needle`, and no panic.
#[track_caller]
fn clear_error(r: &Run, code: i32, needle: &str) {
    assert_eq!(
        r.code,
        Some(code),
        "`{}`: wrong exit:\n{}",
        r.what,
        r.dump()
    );
    assert!(
        !r.stderr.contains("panicked"),
        "`{}` panicked:\n{}",
        r.what,
        r.dump()
    );
    assert!(
        r.stderr.contains(needle) || r.stdout.contains(needle),
        "`{}`: message does not mention {needle:?}:\n{}",
        r.what,
        r.dump()
    );
}

/// Everything about a store that a failed command must not change: the
/// log and the set of objects.
fn store_state(ws: &Ws) -> (Vec<String>, Vec<PathBuf>) {
    let mut objs = Vec::new();
    for shard in std::fs::read_dir(ws.store.join("objects")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            objs.push(f.unwrap().path());
        }
    }
    objs.sort();
    (ws.log_ids(), objs)
}

/// Restore never writes through a directory the workspace replaced with a
/// symlink to the outside: the symlink itself is replaced.
#[test]
fn restore_does_not_write_through_a_directory_replaced_by_a_symlink() {
    let ws = Ws::new();
    let outside = ws.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    write(&outside, "keep.txt", b"outside, must not change\n");
    write(&ws.root, "sub/a.txt", b"a\n");
    write(&ws.root, "sub/deep/b.txt", b"b\n");
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    let outside_before = snapshot(&outside);

    // The directory becomes a symlink to outside, with no save in between.
    remove_tree(&ws.root.join("sub"));
    std::os::unix::fs::symlink(&outside, ws.root.join("sub")).unwrap();
    ws.run(&["restore", &v1, "--no-save"]).ok();
    assert_same(&s1, &snapshot(&ws.root), "restore over a symlinked dir");
    assert_same(&outside_before, &snapshot(&outside), "outside directory");

    // And with -- PATHS below the symlink: refused or replaced, never through.
    remove_tree(&ws.root.join("sub"));
    std::os::unix::fs::symlink(&outside, ws.root.join("sub")).unwrap();
    let r = ws.run(&["restore", &v1, "--no-save", "--", "sub/deep/b.txt"]);
    assert!(!r.stderr.contains("panicked"), "{}", r.dump());
    assert_same(
        &outside_before,
        &snapshot(&outside),
        "outside after a path restore",
    );
    assert!(
        !outside.join("deep").exists(),
        "restore wrote through a symlink"
    );
}

/// Symlinks are captured as links (loops, dangling, absolute, `..`
/// escaping): never followed on save, recreated as links on restore.
#[test]
fn symlink_loops_and_escaping_links_are_captured_as_links() {
    let ws = Ws::new();
    let outside = ws.tmp.path().join("outside");
    write(&outside, "secret.txt", b"outside content, never stored\n");
    write(&ws.root, "f.txt", b"inside\n");
    let l = |t: &str, n: &str| std::os::unix::fs::symlink(t, ws.root.join(n)).unwrap();
    l("loop-b", "loop-a");
    l("loop-a", "loop-b");
    l("self", "self");
    l(outside.to_str().unwrap(), "abs-out");
    l("../outside/secret.txt", "rel-out");
    l("../outside", "dir-out");
    l("nowhere", "dangling");
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    // Only f.txt's content is stored: nothing outside was read into the store.
    assert_eq!(ws.object_count(), 1, "save followed a symlink");
    ws.assert_restores(&v1, &s1);
    // Replace everything and restore in place: links come back as links.
    for n in [
        "loop-a", "loop-b", "self", "abs-out", "rel-out", "dir-out", "dangling",
    ] {
        std::fs::remove_file(ws.root.join(n)).unwrap();
    }
    ws.run(&["restore", &v1]).ok();
    assert_same(&s1, &snapshot(&ws.root), "links restored");
    assert_eq!(
        std::fs::read(outside.join("secret.txt")).unwrap(),
        b"outside content, never stored\n"
    );
}

/// A crafted checkpoint whose tree names try to escape (`..`, `a/b`, empty,
/// NUL) is refused as corrupt (exit 5) before anything is written, both in
/// place and with `--to`.
#[test]
fn crafted_tree_that_escapes_is_refused() {
    let ws = Ws::new();
    write(&ws.root, "f.txt", b"payload\n");
    ws.init();
    let (v1, _) = ws.save();
    let content_hash = *blake3::hash(b"payload\n").as_bytes();
    let s_ws = snapshot(&ws.root);
    let victim_dir = ws.tmp.path().join("victim");
    std::fs::create_dir(&victim_dir).unwrap();

    for bad in [&b".."[..], b"../victim/x", b"a/b", b"", b"x\0y", b"."] {
        // A tree with one file entry named `bad` (docs/FORMAT.md layout).
        let mut t = b"CKT1".to_vec();
        t.extend(1u32.to_le_bytes());
        t.push(1);
        t.extend(0o644u32.to_le_bytes());
        t.extend(0i64.to_le_bytes());
        t.extend((bad.len() as u32).to_le_bytes());
        t.extend_from_slice(bad);
        t.extend(8u64.to_le_bytes());
        t.extend(content_hash);
        let root = ckpt_lib::Hash(*blake3::hash(&t).as_bytes());
        let seq = {
            let ckpt_ws = ckpt_lib::workspace::Workspace::discover(&ws.root).unwrap();
            let store = ckpt_lib::store::Store::open(
                &ckpt_ws.store_path,
                &ckpt_lib::Config::locking(std::time::Duration::from_secs(5)),
            )
            .unwrap();
            let head = store.catalog.reader().unwrap().resolve(&v1).unwrap();
            let mut rec = head.clone();
            rec.root = root;
            rec.digest = None;
            rec.message = "crafted".into();
            let cp = store
                .catalog
                .commit_checkpoint(&[(root, t)], rec, None, Durable::AtCommit)
                .unwrap();
            // Put the head back so the workspace's state is unchanged.
            store.catalog.set_head(Some(head.seq)).unwrap();
            cp.seq
        };
        let id = format!("v{seq}");
        let ctx = format!("tree entry named {:?}", String::from_utf8_lossy(bad));
        let before = store_state(&ws);
        let r = ws.run(&["restore", &id]);
        clear_error(&r, 5, "corrupt");
        assert_same(&s_ws, &snapshot(&ws.root), &ctx);
        let dest = ws.fresh_dir();
        let r = ws.run(&["restore", &id, "--to", dest.to_str().unwrap()]);
        clear_error(&r, 5, "corrupt");
        assert!(!dest.exists(), "{ctx}: --to created its destination");
        assert!(
            std::fs::read_dir(&victim_dir).unwrap().next().is_none(),
            "{ctx}: something was written outside"
        );
        assert_eq!(before, store_state(&ws), "{ctx}: store changed");
        let r = ws.run(&["verify", "--store", "--json"]);
        assert_eq!(
            r.code,
            Some(5),
            "{ctx}: verify --store missed it:\n{}",
            r.dump()
        );
        ws.run(&["delete", &id]).ok();
    }
    assert_store_verifies(&ws, "after deleting the crafted checkpoints");
}

/// FIFOs, sockets and devices are skipped and listed, a FIFO never blocks
/// the save, and restore leaves them alone.
#[test]
fn special_files_are_skipped_and_listed() {
    let ws = Ws::new();
    write(&ws.root, "f.txt", b"x\n");
    let fifo = ws.root.join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let _sock = std::os::unix::net::UnixListener::bind(ws.root.join("sock")).unwrap();
    let dev = ws.root.join("null-dev");
    let cd = std::ffi::CString::new(dev.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string path; makedev(1, 3) is /dev/null.
    let have_dev =
        unsafe { libc::mknod(cd.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) } == 0;
    if !have_dev {
        skip_needs_root("device part: mknod is not permitted here");
    }
    ws.init();
    let r = ws.run(&["save", "--json"]).ok().json();
    let skipped: Vec<String> = r["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap().to_string())
        .collect();
    let mut want = vec!["pipe".to_string(), "sock".to_string()];
    if have_dev {
        want.push("null-dev".into());
    }
    for w in &want {
        assert!(skipped.contains(w), "{w} not listed as skipped: {r}");
    }
    let id = r["id"].as_str().unwrap().to_string();
    let got = ws.materialise(&id);
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        vec![b"f.txt".to_vec()]
    );
    ws.run(&["restore", &id]).ok();
    assert!(
        fifo.exists() && ws.root.join("sock").exists(),
        "restore removed a skipped entry"
    );
}

/// 255-byte names, names with newlines and invalid UTF-8, and a path of
/// about 4000 bytes (near PATH_MAX) round-trip exactly, in place and --to.
#[test]
fn long_names_and_paths_near_path_max_round_trip() {
    let ws = Ws::new();
    let long = "n".repeat(255);
    write(&ws.root, &long, b"long name\n");
    let mut rel = PathBuf::new();
    for i in 0..15 {
        rel.push(format!("{i:02}{}", "d".repeat(250)));
    }
    let deep = ws.root.join(&rel);
    std::fs::create_dir_all(&deep).unwrap();
    let leaf = deep.join(format!("leaf-\n-\u{e9}-{}", "x".repeat(200)));
    std::fs::write(&leaf, b"deep\n").unwrap();
    let bad = deep.join(OsStr::from_bytes(b"bad-\xff\xfe"));
    std::fs::write(&bad, b"not utf-8\n").unwrap();
    assert!(
        leaf.as_os_str().len() > 4000 && leaf.as_os_str().len() < 4096,
        "path is {} bytes",
        leaf.as_os_str().len()
    );
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    ws.assert_restores(&v1, &s1);
    remove_tree(&ws.root.join(rel.components().next().unwrap()));
    std::fs::remove_file(ws.root.join(&long)).unwrap();
    ws.run(&["restore", &v1]).ok();
    assert_same(&s1, &snapshot(&ws.root), "in place");
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");
}

/// A full disk during save, restore and a state commit: exit 1 naming the
/// problem; every earlier checkpoint and state value survives; after
/// space is freed, a re-run succeeds exactly.
#[test]
fn full_disk_during_save_restore_and_state_commit() {
    // 6 MB of room, plus the store's 1 MiB reserve (see `ckpt_lib::store`).
    let Some(fs) = Tmpfs::mount_or_skip("7m") else {
        return;
    };
    let mut rng = Rng::new("full_disk", 3);
    let ws = Ws::new_in(fs.path());
    write(&ws.root, "a.txt", b"small\n");
    write(&ws.root, "b.bin", &rng.bytes(1_000_000));
    ws.init();
    ws.run(&["state", "put", "plan", "one"]).ok();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);

    // Save: a 3 MB new file into a store with ~3.9 MB free after the filler.
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![7u8; 1_400_000]).unwrap();
    write(&ws.root, "huge.bin", &rng.bytes(2_600_000));
    let before = store_state(&ws);
    let r = ws.run(&["save"]);
    clear_error(&r, 1, "No space left");
    assert_eq!(
        before.0,
        ws.log_ids(),
        "save on a full disk changed the log"
    );
    assert!(
        store_leftovers(&ws.store).is_empty(),
        "temporaries left after ENOSPC"
    );
    assert_store_verifies(&ws, "after ENOSPC in save");
    restores_outside(&ws, &v1, &s1);

    // State commit on a full disk: refused, old value kept.
    let pad = fs.path().join("pad");
    let free = free_bytes(fs.path());
    let _ = std::fs::write(&pad, vec![1u8; free as usize]);
    let r = ws.run(&["state", "put", "plan", &"x".repeat(100_000)]);
    assert_ne!(r.code, Some(0), "state put succeeded on a full disk");
    assert!(!r.stderr.contains("panicked"), "{}", r.dump());
    std::fs::remove_file(&pad).unwrap();
    assert_eq!(state_get(&ws, "plan").as_deref(), Some("one"));

    // Restore on a full disk: v1 needs b.bin (1 MB) back.
    std::fs::remove_file(ws.root.join("huge.bin")).unwrap();
    std::fs::remove_file(ws.root.join("b.bin")).unwrap();
    write(&ws.root, "a.txt", b"changed\n");
    let (v2, _) = ws.save();
    let s2 = snapshot(&ws.root);
    // With the store's reserve used up too (it would give the restore the
    // room it needs), and 200 KB free.
    std::fs::remove_file(ws.store.join("reserve")).unwrap();
    let free = free_bytes(fs.path());
    std::fs::write(&pad, vec![1u8; free.saturating_sub(200_000) as usize]).unwrap();
    let r = ws.run(&["restore", &v1, "--no-save"]);
    clear_error(&r, 1, "No space left");
    // A fork into the full filesystem fails and leaves no partial copy.
    let fork = fs.path().join("fork");
    let r = ws.run(&["restore", &v1, "--to", fork.to_str().unwrap()]);
    clear_error(&r, 1, "No space left");
    assert!(
        !fork.exists(),
        "a failed restore --to left a partial directory"
    );
    std::fs::create_dir(&fork).unwrap();
    let r = ws.run(&["restore", &v1, "--to", fork.to_str().unwrap()]);
    clear_error(&r, 1, "No space left");
    assert_eq!(
        std::fs::read_dir(&fork).unwrap().count(),
        0,
        "partial copy left"
    );
    std::fs::remove_dir(&fork).unwrap();
    std::fs::remove_file(&pad).unwrap();
    std::fs::remove_file(&filler).unwrap();
    ws.run(&["restore", &v1, "--no-save"]).ok();
    assert_same(&s1, &snapshot(&ws.root), "restore re-run after ENOSPC");
    assert!(workspace_temps(&ws.root).is_empty());
    restores_outside(&ws, &v2, &s2);
    assert_store_verifies(&ws, "after ENOSPC in restore");
    drop(ws);
}

/// `restore ID --to` a directory on another filesystem (the small one is
/// full), compared with `want`.
#[track_caller]
fn restores_outside(ws: &Ws, id: &str, want: &Snapshot) {
    let d = tempfile::tempdir_in(test_base()).unwrap();
    let dest = d.path().join("x");
    ws.run(&["restore", id, "--to", dest.to_str().unwrap()])
        .ok();
    assert_same(want, &snapshot(&dest), &format!("restore {id} --to"));
}

/// A store on a read-only filesystem: reading commands work or fail
/// clearly, writing commands fail clearly with exit 1, nothing changes.
#[test]
fn read_only_store_fails_clearly() {
    let Some(fs) = Tmpfs::mount_or_skip("16m") else {
        return;
    };
    let ws = Ws::new();
    write(&ws.root, "a.txt", b"one\n");
    let store = fs.path().join("store");
    ckpt(
        ws.tmp.path(),
        &[
            "init",
            ws.root.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
    )
    .ok();
    ckpt(&ws.root, &["save"]).ok();
    write(&ws.root, "a.txt", b"two\n");
    let ws_before = snapshot(&ws.root);
    fs.remount("ro");
    for args in [
        vec!["save"],
        vec!["log"],
        vec!["restore", "v1"],
        vec!["state", "put", "k", "v"],
        vec!["gc"],
    ] {
        let r = ws.run(&args);
        assert!(r.code.is_some() && r.code != Some(101), "{}", r.dump());
        assert!(!r.stderr.contains("panicked"), "{}", r.dump());
        if r.code != Some(0) {
            assert!(
                r.stderr.contains(store.to_str().unwrap()) || r.stderr.contains("Read-only"),
                "error does not name the store or the cause:\n{}",
                r.dump()
            );
        }
    }
    assert_same(
        &ws_before,
        &snapshot(&ws.root),
        "workspace after read-only store",
    );
    fs.remount("rw");
    let r = ws.run(&["log", "--json"]).ok().json();
    assert_eq!(r["checkpoints"].as_array().unwrap().len(), 1, "{r}");
}

/// Damaged catalog, truncated catalog, damaged index, missing object
/// directory: detected and named (exit 5 or 1), never a panic; a damaged
/// index only costs a re-hash.
#[test]
fn damaged_and_truncated_store_files_are_detected() {
    let mut rng = Rng::new("damaged_store", 5);
    let mk = |rng: &mut Rng| {
        let ws = Ws::new();
        build_tree(&ws.root, 2, 10, rng);
        ws.init();
        let (v1, _) = ws.save();
        let s1 = snapshot(&ws.root);
        (ws, v1, s1)
    };

    // Index: flipped bytes are caught by its trailer hash; the next save is
    // still exact.
    let (ws, _, _) = mk(&mut rng);
    let ix = ws.store.join("index");
    let mut b = std::fs::read(&ix).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0xff;
    std::fs::write(&ix, &b).unwrap();
    write(&ws.root, "d00/f0000.txt", b"edited after index damage\n");
    let (v2, _) = ws.save();
    ws.assert_restores(&v2, &snapshot(&ws.root));

    // Catalog damaged throughout (every Nth byte flipped: where a byte
    // lands decides whether redb errs or panics, so several N), then
    // truncated: never a panic; exit 1 or 5 naming the catalog; the
    // workspace untouched.
    for how in [
        "flip89", "flip97", "flip103", "flip127", "truncate", "empty",
    ] {
        let (ws, v1, s1) = mk(&mut rng);
        let cat = ws.store.join("catalog.redb");
        let mut b = std::fs::read(&cat).unwrap();
        match how
            .strip_prefix("flip")
            .map(|n| n.parse::<usize>().unwrap())
        {
            Some(n) => {
                for i in (4096..b.len()).step_by(n) {
                    b[i] ^= 0x5a;
                }
            }
            None if how == "truncate" => b.truncate(b.len() / 3),
            None => b.clear(),
        }
        std::fs::write(&cat, &b).unwrap();
        for args in [
            vec!["log"],
            vec!["restore", &v1],
            vec!["save"],
            vec!["verify", "--store"],
        ] {
            let r = ws.run(&args);
            assert!(!r.stderr.contains("panicked"), "{how}: {}", r.dump());
            assert!(
                r.code.is_some() && r.code != Some(101),
                "{how}: {}",
                r.dump()
            );
            if r.code != Some(0) {
                assert!(
                    matches!(r.code, Some(1) | Some(5)),
                    "{how}: unexpected exit:\n{}",
                    r.dump()
                );
                assert!(
                    r.stderr.contains("catalog") || r.stderr.contains("corrupt"),
                    "{how}: error does not name the catalog:\n{}",
                    r.dump()
                );
            }
        }
        assert_same(&s1, &snapshot(&ws.root), how);
    }

    // Objects removed wholesale (a truncated store): verify names them,
    // restore refuses before changing anything.
    let (ws, v1, s1) = mk(&mut rng);
    for shard in std::fs::read_dir(ws.store.join("objects")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
    }
    let r = ws.run(&["verify", "--store"]);
    clear_error(&r, 5, "missing");
    std::fs::remove_file(ws.root.join("d00/f0001.txt")).unwrap();
    let before = snapshot(&ws.root);
    let r = ws.run(&["restore", &v1, "--no-save"]);
    clear_error(&r, 5, "missing");
    assert_same(
        &before,
        &snapshot(&ws.root),
        "restore from a truncated store",
    );
    let _ = s1;
}

/// Two workspaces cannot share one store: the second `init` is refused and
/// changes nothing; the first keeps working.
#[test]
fn two_workspaces_cannot_share_a_store() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", b"a\n");
    ws.init();
    let (v1, _) = ws.save();
    let s1 = snapshot(&ws.root);
    let other = ws.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    write(&other, "b.txt", b"b\n");
    let before = store_state(&ws);
    let r = ckpt(
        ws.tmp.path(),
        &[
            "init",
            other.to_str().unwrap(),
            "--store",
            ws.store.to_str().unwrap(),
        ],
    );
    clear_error(&r, 2, "already holds a ckpt store");
    assert!(!other.join(".ckpt").exists(), "marker written anyway");
    assert_eq!(before, store_state(&ws));
    ws.assert_restores(&v1, &s1);

    // A copied marker (the same store from two directories) is worked
    // around by nobody: a save from the copy records the copy, and the
    // first workspace's checkpoints stay exact.
    std::fs::copy(ws.root.join(".ckpt"), other.join(".ckpt")).unwrap();
    let r = ckpt(&other, &["save", "--json"]);
    assert!(!r.stderr.contains("panicked"), "{}", r.dump());
    ws.assert_restores(&v1, &s1);
    assert_store_verifies(&ws, "after a save from a copied marker");
}

/// Files growing (appends), shrinking (truncation to a line boundary),
/// vanishing, and a directory replaced by a file (and back) while saves
/// run: every save exits 0 or fails with "kept changing" recording nothing,
/// and every checkpoint holds, for each file, content it really had (whole
/// lines only). The verdict does not depend on timing.
#[test]
fn files_changing_during_capture_are_captured_whole_or_not_at_all() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let ws = Ws::new();
    for i in 0..20 {
        let rel = format!("g/f{i:02}");
        write(&ws.root, &rel, &line(&rel, 0).repeat(100 + i * 200));
    }
    write(&ws.root, "x/inner", &line("x/inner", 0));
    ws.init();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let root = ws.root.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut rng = Rng::new("changing-writer", 11);
            let mut gen = 1u64;
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                gen += 1;
                let i = rng.below(20);
                let rel = format!("g/f{i:02}");
                let p = root.join(&rel);
                match rng.below(8) {
                    0 => {
                        let _ = std::fs::remove_file(&p);
                    }
                    1 => {
                        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&p) {
                            let len = f.metadata().unwrap().len();
                            let keep = rng.below(len / LINE as u64 + 1) * LINE as u64;
                            let _ = f.set_len(keep);
                        }
                    }
                    2 => {
                        // x: directory <-> file.
                        let x = root.join("x");
                        if x.is_dir() {
                            let _ = std::fs::remove_dir_all(&x);
                            let _ = std::fs::write(&x, line("x", gen));
                        } else {
                            let _ = std::fs::remove_file(&x);
                            let _ = std::fs::create_dir(&x);
                            let _ = std::fs::write(x.join("inner"), line("x/inner", gen));
                        }
                    }
                    _ => {
                        // Grow: whole lines appended in one write each,
                        // sometimes many (a large file growing).
                        let n = if rng.below(4) == 0 {
                            2000
                        } else {
                            1 + rng.below(20) as usize
                        };
                        if let Ok(mut f) = std::fs::OpenOptions::new()
                            .append(true)
                            .create(true)
                            .open(&p)
                        {
                            let _ = f.write_all(&line(&rel, gen).repeat(n));
                        }
                    }
                }
                ops += 1;
            }
            ops
        })
    };
    let mut saved = Vec::new();
    let mut unstable = 0;
    for _ in 0..40 {
        let r = ws.run(&["save", "--json"]);
        match r.code {
            Some(0) => saved.push(r.json()["id"].as_str().map(str::to_string)),
            Some(1) if r.stderr.contains("kept changing") => unstable += 1,
            _ => panic!("save failed during concurrent changes:\n{}", r.dump()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let ops = writer.join().unwrap();
    let ids: Vec<String> = saved.into_iter().flatten().collect();
    eprintln!(
        "{} saves recorded, {unstable} refused as unstable, {ops} writer ops",
        ids.len()
    );
    let log = ws.log_ids();
    assert_untorn(&ws, &ids, &log);
    assert_store_verifies(&ws, "after saves during changes");
    assert!(store_leftovers(&ws.store).is_empty());
}

/// Runs `script` in `root/top` after `cd`ing into `levels` nested `d`
/// directories one at a time (`mkdir` them when `make`): the path is longer
/// than PATH_MAX, so nothing path-based can reach it.
fn at_depth(root: &std::path::Path, top: &str, levels: usize, make: bool, script: &str) -> String {
    let step = if make {
        "mkdir -p d && cd -P d"
    } else {
        "cd -P d"
    };
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd -P {top} && i=0; while [ $i -lt {levels} ]; do {step} || exit 9; i=$((i+1)); done; {script}"
        ))
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Directories nested exactly `MAX_DEPTH` deep are saved, diffed, verified
/// and restored, in place and `--to`, by the same recursive walks that
/// overflowed their stacks at 4,000 levels; one level deeper, every command
/// that scans refuses with exit 1, naming the path and the limit, and
/// nothing is saved, until `.ckptignore` leaves the deep directory out.
#[test]
fn nesting_at_the_depth_limit_works_and_past_it_is_refused() {
    const MAX: usize = ckpt_lib::store::tree::MAX_DEPTH;
    let ws = Ws::new();
    write(&ws.root, "top.txt", b"top\n");
    // `deep` is at depth 1, so MAX - 1 more levels below it.
    std::fs::create_dir(ws.root.join("deep")).unwrap();
    at_depth(&ws.root, "deep", MAX - 1, true, "printf 'v1\\n' > f");
    ws.init();
    let (v1, _) = ws.save();
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");
    ws.run(&["verify"]).ok();

    at_depth(&ws.root, "deep", MAX - 1, false, "printf 'v2\\n' > f");
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], false, "{st}");
    assert_eq!(ws.run(&["verify"]).code, Some(6), "verify sees the edit");
    let (v2, _) = ws.save();
    let d = ws.run(&["diff", &v1, &v2, "--json"]).ok().json();
    assert!(
        d.to_string().contains("/d/f"),
        "diff names the deep file: {d}"
    );

    ws.run(&["restore", &v1]).ok();
    assert_eq!(at_depth(&ws.root, "deep", MAX - 1, false, "cat f"), "v1\n");
    ws.run(&["verify"]).ok();
    let to = ws.root.parent().unwrap().join("restored-deep");
    ws.run(&["restore", &v2, "--to", to.to_str().unwrap()]).ok();
    assert_eq!(at_depth(&to, "deep", MAX - 1, false, "cat f"), "v2\n");

    // One level more, in another directory.
    std::fs::create_dir(ws.root.join("deeper")).unwrap();
    at_depth(&ws.root, "deeper", MAX, true, "printf 'x\\n' > f");
    let before = store_state(&ws);
    for args in [&["save"][..], &["status"], &["diff"]] {
        let r = ws.run(args);
        clear_error(&r, 1, &format!("nested more than {MAX} directories deep"));
        assert!(
            r.stderr.contains("deeper/d/d/d"),
            "names the path:\n{}",
            r.dump()
        );
        assert!(
            r.stderr.contains(".ckptignore"),
            "says what to do:\n{}",
            r.dump()
        );
    }
    assert_eq!(store_state(&ws), before, "a refused scan stored nothing");
    write(&ws.root, ".ckptignore", b"/deeper\n");
    let (v4, _) = ws.save();
    assert_ne!(v4, v2);
}

/// `sudo ckpt save` in another user's workspace: the shard directories the
/// save makes (staged whole, or one by one) get the owner and permissions
/// of `objects/`, so the store's owner can still place objects in them.
#[test]
fn root_saving_into_another_users_store_keeps_its_shards_theirs() {
    use std::os::unix::fs::MetadataExt;
    if !is_root() {
        skip_needs_root("chown to another user");
        return;
    }
    const NOBODY: u32 = 65534;
    let mut rng = Rng::new("root_saving_into_another_users_store", 5);
    let ws = Ws::new();
    ws.init();
    // More than the 32 objects fsynced one by one, so shards are staged.
    fill_dir(&ws.root, "many", 1000, &mut rng);
    let objects = ws.store.join("objects");
    std::os::unix::fs::chown(&objects, Some(NOBODY), Some(NOBODY)).unwrap();
    ws.save();
    let want = std::fs::metadata(&objects).unwrap();
    let mut shards = 0;
    for shard in std::fs::read_dir(&objects).unwrap() {
        let m = shard.unwrap().metadata().unwrap();
        assert_eq!((m.uid(), m.gid()), (NOBODY, NOBODY), "a shard made by root");
        assert_eq!(m.mode(), want.mode());
        shards += 1;
    }
    assert!(shards > 200, "only {shards} shards");
    assert_store_verifies(&ws, "after root's save");
}
