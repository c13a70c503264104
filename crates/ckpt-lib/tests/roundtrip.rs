//! Round-trip property tests: random trees and random edits; save → mutate
//! → restore must give back the saved tree byte for byte, with modes,
//! symlink targets and mtimes — in place, for some paths, and into another
//! directory.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ckpt_lib::engine::diff::PathFilter;
use ckpt_lib::engine::materialize;
use ckpt_lib::engine::restore::{self, RestoreJob};
use ckpt_lib::engine::save::{self, SaveJob, SaveOutcome};
use ckpt_lib::engine::scanner::{OnDisk, ScanKind, Scanner};
use ckpt_lib::engine::status;
use ckpt_lib::store::index::RACY_WINDOW_NS;
use ckpt_lib::workspace::Workspace;
use ckpt_lib::Config;
use common::*;
use proptest::prelude::*;

const T: Duration = Duration::from_secs(10);

fn save(ws: &Workspace) -> Option<u64> {
    let store = ws.open_store(&Config::locking(T)).unwrap();
    match save::save(ws, &store, &SaveJob::default()).unwrap() {
        SaveOutcome::Saved(cp) => Some(cp.seq),
        SaveOutcome::Unchanged(h) => h.map(|h| h.seq),
    }
}

fn restore_ws(ws: &Workspace, seq: u64, paths: Vec<Vec<u8>>) {
    let store = ws.open_store(&Config::locking(T)).unwrap();
    restore::restore(
        ws,
        &store,
        &format!("v{seq}"),
        &RestoreJob {
            paths,
            ..Default::default()
        },
        &mut OnDisk::default(),
    )
    .unwrap();
}

fn assert_clean(ws: &Workspace) {
    let store = ws.open_store(&Config::locking(T)).unwrap();
    let st = status::status(
        &store,
        &PathFilter::default(),
        OnDisk::default()
            .scan(ws, &store, ScanKind::HashOnly)
            .unwrap(),
    )
    .unwrap();
    assert!(
        st.changes.is_empty(),
        "status after restore is not clean: {:?}",
        st.changes
    );
}

fn assert_same(a: &BTreeMap<Vec<u8>, Snap>, b: &BTreeMap<Vec<u8>, Snap>, what: &str) {
    if a != b {
        let keys: std::collections::BTreeSet<_> = a.keys().chain(b.keys()).collect();
        for k in keys {
            if a.get(k) != b.get(k) {
                panic!(
                    "{what}: {:?} differs:\n expected {:?}\n      got {:?}",
                    String::from_utf8_lossy(k),
                    a.get(k),
                    b.get(k)
                );
            }
        }
    }
}

/// The directories a scan of an unchanged, aged tree checks without opening
/// them: those at depth 2 or more whose link count says they have no
/// subdirectories (none on btrfs, which does not count them), with at most
/// `LEAF_MAX_ENTRIES` entries, none of them racy (an mtime in the future).
fn unopened_leaves(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fn walk(dir: &Path, depth: usize, n: &mut u64) {
        let entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        let small = entries.len() <= ckpt_lib::workspace::scan::LEAF_MAX_ENTRIES;
        let now = std::time::SystemTime::now();
        let racy = entries
            .iter()
            .any(|e| e.path().symlink_metadata().unwrap().modified().unwrap() > now);
        let leaf = ckpt_fs::fs::no_subdirs(dir.symlink_metadata().unwrap().nlink());
        if depth >= 2 && small && leaf && !racy {
            *n += 1;
        }
        for e in entries {
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), depth + 1, n);
            }
        }
    }
    let mut n = 0;
    walk(root, 0, &mut n);
    n
}

fn setup(dir: &Path, start: &[Op]) -> Workspace {
    let root = dir.join("ws");
    populate(&root, start);
    Workspace::init(&root, Some(&dir.join("store")), None).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn save_mutate_restore_in_place(start in arb_ops(5..40), edits in arb_ops(1..25), more in arb_ops(1..15)) {
        let dir = tempfile::tempdir().unwrap();
        let ws = setup(dir.path(), &start);
        let v1 = save(&ws).unwrap_or(0);
        let s1 = snapshot(&ws.root);
        apply(&ws.root, &edits);
        let v2 = save(&ws);
        let s2 = snapshot(&ws.root);
        apply(&ws.root, &more);
        if v1 > 0 {
            restore_ws(&ws, v1, vec![]);
            assert_same(&s1, &snapshot(&ws.root), "restore v1");
            assert_clean(&ws);
        }
        if let Some(v2) = v2 {
            restore_ws(&ws, v2, vec![]);
            assert_same(&s2, &snapshot(&ws.root), "restore v2");
            assert_clean(&ws);
            // The index after restore is exact: saving finds nothing new.
            prop_assert_eq!(save(&ws), Some(v2));
        }
    }

    /// A directory whose stat is as recorded is not listed again (its index
    /// record has exact names); every change to names, kinds, modes and
    /// contents after that must still be captured.
    #[test]
    fn unlisted_directories_still_see_every_change(start in arb_ops(5..40), edits in arb_ops(1..25)) {
        let dir = tempfile::tempdir().unwrap();
        let ws = setup(dir.path(), &start);
        save(&ws);
        // Records made within the racy window of their directory's last
        // change cannot claim exact names: age the tree past it, then scan
        // again (this scan lists everything and records exact names).
        std::thread::sleep(Duration::from_nanos(RACY_WINDOW_NS as u64 + 20_000_000));
        let store = ws.open_store(&Config::locking(T)).unwrap();
        save::capture(&ws, &store, &SaveJob::default(), &mut OnDisk::default()).unwrap();
        // Nothing changed: only the root (whose names include the marker,
        // so never exact) is listed.
        let again = save::capture(&ws, &store, &SaveJob::default(), &mut OnDisk::default()).unwrap();
        prop_assert_eq!(again.scan.dirs_listed, 1);
        // And each small leaf below the root's children is checked through
        // its parent without being opened (the root's children come from
        // its listing, which gives no link counts).
        prop_assert_eq!(again.scan.dirs_unopened, unopened_leaves(&ws.root));
        drop(store);
        apply(&ws.root, &edits);
        let want = snapshot(&ws.root);
        let Some(v) = save(&ws) else { return Ok(()) };
        assert_clean(&ws);
        let store = ws.open_store(&Config::locking(T)).unwrap();
        let dest = dir.path().join("fork");
        materialize::restore_to(&store, &format!("v{v}"), &dest, &[]).unwrap();
        assert_same(&want, &snapshot(&dest), "checkpoint after edits to unlisted directories");
    }

    /// Small leaf directories whose stat is as recorded are checked through
    /// their parent without being opened; every in-place change to one of
    /// their files (content and size, mode, mtime, or content rewritten
    /// with its mtime put back, which only its ctime shows) must still be
    /// captured.
    #[test]
    fn in_place_edits_in_unopened_leaves_are_captured(
        edits in prop::collection::vec((0usize..12, 0u8..4, any::<u8>()), 1..8)
    ) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let file = |i: usize| root.join(format!("p/l{}/f{}", i / 3, i % 3));
        for i in 0..12 {
            std::fs::create_dir_all(file(i).parent().unwrap()).unwrap();
            std::fs::write(file(i), format!("file {i}\n")).unwrap();
        }
        let ws = Workspace::init(&root, Some(&dir.path().join("store")), None).unwrap();
        save(&ws);
        std::thread::sleep(Duration::from_nanos(RACY_WINDOW_NS as u64 + 20_000_000));
        let store = ws.open_store(&Config::locking(T)).unwrap();
        save::capture(&ws, &store, &SaveJob::default(), &mut OnDisk::default()).unwrap();
        let again = save::capture(&ws, &store, &SaveJob::default(), &mut OnDisk::default()).unwrap();
        prop_assert_eq!(again.scan.dirs_unopened, unopened_leaves(&root));
        drop(store);
        for (i, kind, b) in edits {
            let f = file(i);
            match kind {
                0 => {
                    let mut old = std::fs::read(&f).unwrap();
                    old.push(b);
                    std::fs::write(&f, old).unwrap();
                }
                1 => {
                    let mode = if b % 2 == 0 { 0o600 } else { 0o755 };
                    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
                }
                2 => {
                    let t = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000 + b as u64);
                    std::fs::File::options().write(true).open(&f).unwrap().set_modified(t).unwrap();
                }
                _ => {
                    let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
                    let mut old = std::fs::read(&f).unwrap();
                    old[0] = b'a' + b % 26;
                    std::fs::write(&f, old).unwrap();
                    std::fs::File::options().write(true).open(&f).unwrap().set_modified(mtime).unwrap();
                }
            }
        }
        let want = snapshot(&root);
        let v = save(&ws).unwrap();
        let store = ws.open_store(&Config::locking(T)).unwrap();
        let dest = dir.path().join("copy");
        materialize::restore_to(&store, &format!("v{v}"), &dest, &[]).unwrap();
        assert_same(&want, &snapshot(&dest), "checkpoint after in-place edits in unopened leaves");
    }

    #[test]
    fn restore_to_another_directory(start in arb_ops(5..40), edits in arb_ops(1..20)) {
        let dir = tempfile::tempdir().unwrap();
        let ws = setup(dir.path(), &start);
        let Some(v1) = save(&ws) else { return Ok(()) };
        let s1 = snapshot(&ws.root);
        apply(&ws.root, &edits);
        let store = ws.open_store(&Config::locking(T)).unwrap();
        let dest = dir.path().join("fork");
        materialize::restore_to(&store, &format!("v{v1}"), &dest, &[]).unwrap();
        assert_same(&s1, &snapshot(&dest), "restore --to");
    }

    #[test]
    fn restore_some_paths(start in arb_ops(5..40), edits in arb_ops(1..25), pick in any::<usize>()) {
        let dir = tempfile::tempdir().unwrap();
        let ws = setup(dir.path(), &start);
        let Some(v1) = save(&ws) else { return Ok(()) };
        let s1 = snapshot(&ws.root);
        apply(&ws.root, &edits);
        let before = snapshot(&ws.root);
        // A top-level name that exists on either side.
        let tops: Vec<Vec<u8>> = s1.keys().chain(before.keys())
            .filter(|k| !k.contains(&b'/')).cloned().collect();
        if tops.is_empty() { return Ok(()); }
        let chosen = tops[pick % tops.len()].clone();
        restore_ws(&ws, v1, vec![chosen.clone()]);
        let after = snapshot(&ws.root);
        let under = |k: &Vec<u8>| *k == chosen || k.starts_with(&[chosen.as_slice(), b"/"].concat());
        let expect: BTreeMap<_, _> = s1.iter().filter(|(k, _)| under(k))
            .chain(before.iter().filter(|(k, _)| !under(k)))
            .map(|(k, v)| (k.clone(), v.clone())).collect();
        // Directory mtimes of ancestors move when their contents change.
        let strip = |m: &BTreeMap<Vec<u8>, Snap>| -> BTreeMap<Vec<u8>, Snap> {
            m.iter().map(|(k, v)| {
                let mut v = v.clone();
                if v.what == What::Dir && !under(k) { v.mtime_ns = 0; }
                (k.clone(), v)
            }).collect()
        };
        assert_same(&strip(&expect), &strip(&after), "restore -- PATH");
    }
}

#[test]
fn hard_links_restore_as_independent_files() {
    let dir = tempfile::tempdir().unwrap();
    let ws = setup(dir.path(), &[]);
    std::fs::write(ws.root.join("a"), b"shared").unwrap();
    std::fs::hard_link(ws.root.join("a"), ws.root.join("b")).unwrap();
    let v1 = save(&ws).unwrap();
    std::fs::remove_file(ws.root.join("a")).unwrap();
    std::fs::remove_file(ws.root.join("b")).unwrap();
    restore_ws(&ws, v1, vec![]);
    assert_eq!(std::fs::read(ws.root.join("a")).unwrap(), b"shared");
    assert_eq!(std::fs::read(ws.root.join("b")).unwrap(), b"shared");
    use std::os::unix::fs::MetadataExt;
    let (ia, ib) = (
        std::fs::metadata(ws.root.join("a")).unwrap().ino(),
        std::fs::metadata(ws.root.join("b")).unwrap().ino(),
    );
    assert_ne!(ia, ib, "restored hard links must be independent files");
}

#[test]
fn fifos_and_sockets_are_skipped_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = setup(dir.path(), &[]);
    std::fs::write(ws.root.join("f"), b"x").unwrap();
    let fifo = ws.root.join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let _sock = std::os::unix::net::UnixListener::bind(ws.root.join("sock")).unwrap();
    let store = ws.open_store(&Config::locking(T)).unwrap();
    let SaveOutcome::Saved(cp) = save::save(&ws, &store, &SaveJob::default()).unwrap() else {
        panic!("expected a checkpoint")
    };
    let mut kinds: Vec<_> = cp
        .skipped
        .iter()
        .map(|s| (s.path.clone(), s.kind.clone()))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            (b"pipe".to_vec(), "fifo".to_string()),
            (b"sock".to_vec(), "socket".to_string())
        ]
    );
}

#[test]
fn ckptignore_paths_are_neither_saved_nor_touched() {
    let dir = tempfile::tempdir().unwrap();
    let ws = setup(dir.path(), &[]);
    std::fs::write(ws.root.join(".ckptignore"), "*.log\ncache/\n").unwrap();
    std::fs::write(ws.root.join("keep.txt"), b"1").unwrap();
    std::fs::write(ws.root.join("x.log"), b"log1").unwrap();
    std::fs::create_dir(ws.root.join("cache")).unwrap();
    std::fs::write(ws.root.join("cache/blob"), b"c1").unwrap();
    let v1 = save(&ws).unwrap();
    std::fs::write(ws.root.join("keep.txt"), b"2").unwrap();
    std::fs::write(ws.root.join("x.log"), b"log2").unwrap();
    std::fs::write(ws.root.join("cache/blob"), b"c2").unwrap();
    restore_ws(&ws, v1, vec![]);
    assert_eq!(std::fs::read(ws.root.join("keep.txt")).unwrap(), b"1");
    assert_eq!(std::fs::read(ws.root.join("x.log")).unwrap(), b"log2");
    assert_eq!(std::fs::read(ws.root.join("cache/blob")).unwrap(), b"c2");
}
