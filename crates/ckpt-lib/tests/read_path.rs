//! The full-read scan of `ckpt verify` and `ckpt hash` (and of a first save):
//! a regular file is not `lstat`ed before it is read (its stat comes from the
//! open descriptor), the files of a directory are read in parallel, and files
//! over `content_hash::LEAF` are hashed as BLAKE3 subtrees in parallel. These
//! tests pin that what such a scan records is exactly what is on disk: every
//! stat field of every entry, every content hash (against `blake3::hash` of
//! the bytes) and the set of paths.

mod common;

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use ckpt_fs::content_hash::LEAF;
use ckpt_lib::store::index::Index;
use ckpt_lib::store::tree::Node;
use ckpt_lib::workspace::ignore::Ignore;
use ckpt_lib::workspace::scan::{self, Mode, OnUnreadable, ScanInput, ScanResult};
use common::*;
use proptest::prelude::*;

fn full_scan(root: &Path) -> ScanResult {
    scan::scan(&ScanInput {
        root,
        index: &Index::default(),
        ignore: &Ignore::load(root).unwrap(),
        exclude: &[],
        mode: Mode::HashOnly,
        on_unreadable: OnUnreadable::Record,
        on_first_new_object: None,
    })
    .unwrap()
    .apply(Index::default())
}

fn rel_join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    if rel.is_empty() {
        name.to_vec()
    } else {
        [rel, b"/", name].concat()
    }
}

/// Checks every recorded entry against `lstat` and the bytes on disk and
/// returns the recorded paths.
fn check_against_disk(root: &Path, scan: &ScanResult) -> BTreeSet<Vec<u8>> {
    let mut seen = BTreeSet::new();
    for (rel, rec) in &scan.index.dirs {
        for e in &rec.entries {
            let rel_path = rel_join(rel, &e.entry.name);
            let path = root.join(std::ffi::OsStr::from_bytes(&rel_path));
            let st = std::fs::symlink_metadata(&path).unwrap();
            let shown = String::from_utf8_lossy(&rel_path).into_owned();
            assert_eq!(e.meta.ino, st.ino(), "{shown}: ino");
            assert_eq!(e.meta.dev, st.dev(), "{shown}: dev");
            assert_eq!(e.meta.mode, st.mode(), "{shown}: mode");
            assert_eq!(e.meta.size, st.size(), "{shown}: size");
            assert_eq!(
                e.meta.mtime_ns,
                st.mtime() * 1_000_000_000 + st.mtime_nsec(),
                "{shown}: mtime"
            );
            assert_eq!(
                e.meta.ctime_ns,
                st.ctime() * 1_000_000_000 + st.ctime_nsec(),
                "{shown}: ctime"
            );
            assert_eq!(e.entry.mode, st.mode() & 0o7777, "{shown}: tree mode");
            match &e.entry.node {
                Node::File { hash, size } => {
                    let bytes = std::fs::read(&path).unwrap();
                    assert!(st.is_file(), "{shown}: recorded as a file");
                    assert_eq!(*size, bytes.len() as u64, "{shown}: size");
                    assert_eq!(
                        hash.0,
                        *blake3::hash(&bytes).as_bytes(),
                        "{shown}: content hash"
                    );
                }
                Node::Dir { .. } => assert!(st.is_dir(), "{shown}: recorded as a dir"),
                Node::Symlink { target } => {
                    assert!(st.file_type().is_symlink(), "{shown}: recorded as a link");
                    assert_eq!(
                        std::fs::read_link(&path).unwrap().as_os_str().as_bytes(),
                        &target[..],
                        "{shown}: target"
                    );
                }
            }
            assert!(seen.insert(rel_path), "{shown} recorded twice");
        }
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random trees plus up to two files on each side of the subtree split:
    /// the scan's records equal `lstat` and the content on disk, entry for
    /// entry, and name every path once.
    #[test]
    fn full_scan_records_exactly_what_is_on_disk(ops in arb_ops(5..40), big in 0usize..3) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        populate(&root, &ops);
        for i in 0..big {
            let len = LEAF as usize * (i + 1) + 1024 * i + 7;
            let data: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
            std::fs::write(root.join(format!("big{i}")), data).unwrap();
        }
        let scan = full_scan(&root);
        let seen = check_against_disk(&root, &scan);
        let on_disk: BTreeSet<Vec<u8>> = snapshot(&root).into_keys().collect();
        prop_assert_eq!(seen, on_disk);
    }
}

/// One directory of many files of assorted sizes (the parallel branch of
/// the per-directory read), including empty ones and one exactly at LEAF.
#[test]
fn many_files_in_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("d")).unwrap();
    for i in 0..300usize {
        let len = match i % 5 {
            0 => 0,
            1 => i,
            2 => 64 * 1024 + i,
            3 => 1024 * (i % 9),
            _ => 3 * i + 1,
        };
        let data: Vec<u8> = (0..len).map(|j| (j ^ i) as u8).collect();
        std::fs::write(root.join(format!("d/f{i:03}")), data).unwrap();
    }
    std::fs::write(root.join("d/leaf"), vec![5u8; LEAF as usize]).unwrap();
    let scan = full_scan(&root);
    let seen = check_against_disk(&root, &scan);
    assert_eq!(seen.len(), 1 + 300 + 1);
    assert_eq!(scan.files_read, 301);
}
