//! Test support: random directory trees, random edits, and exact snapshots
//! of a directory (content, kind, mode, mtime, symlink target) to compare.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use proptest::prelude::*;

mod walk;

use walk::{at, join, walk};

/// Names the generator uses: ASCII, UTF-8, not UTF-8, newline, dotfile.
pub const NAMES: &[&[u8]] = &[
    b"a",
    b"b.txt",
    b"node_modules",
    b"\xc3\xa9t\xc3\xa9",
    b"new\nline",
    b"\xff\xfebin",
    b".hidden",
    b"sp ace",
    b"z",
    b"index.js",
];

const MODES: &[u32] = &[0o644, 0o755, 0o600, 0o444, 0o700, 0o640];

/// One random edit.
#[derive(Clone, Debug)]
pub enum Op {
    /// Create or overwrite a file.
    Write {
        dir: usize,
        name: usize,
        content: Vec<u8>,
        mode: usize,
    },
    /// Create a directory.
    Mkdir { dir: usize, name: usize },
    /// Create a symlink.
    Symlink {
        dir: usize,
        name: usize,
        target: usize,
    },
    /// Remove an entry (recursively).
    Delete { pick: usize },
    /// Rename an entry into a directory.
    Rename {
        pick: usize,
        dir: usize,
        name: usize,
    },
    /// chmod a file or directory.
    Chmod { pick: usize, mode: usize },
    /// Set an mtime.
    Touch { pick: usize, secs: i64 },
    /// Append to a file.
    Append { pick: usize, content: Vec<u8> },
}

pub fn arb_op() -> impl Strategy<Value = Op> {
    let content = prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 1..200),
        proptest::collection::vec(any::<u8>(), 70_000..70_100).prop_map(|v| v),
    ];
    prop_oneof![
        4 => (any::<usize>(), any::<usize>(), content.clone(), any::<usize>())
            .prop_map(|(dir, name, content, mode)| Op::Write { dir, name, content, mode }),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(dir, name)| Op::Mkdir { dir, name }),
        1 => (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(dir, name, target)| Op::Symlink { dir, name, target }),
        2 => any::<usize>().prop_map(|pick| Op::Delete { pick }),
        1 => (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(pick, dir, name)| Op::Rename { pick, dir, name }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(pick, mode)| Op::Chmod { pick, mode }),
        1 => (any::<usize>(), 1_000_000_000i64..1_900_000_000).prop_map(|(pick, secs)| Op::Touch { pick, secs }),
        2 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..50)).prop_map(|(pick, content)| Op::Append { pick, content }),
    ]
}

pub fn arb_ops(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(arb_op(), n)
}

/// All entries below root (relative paths, whether a directory), sorted;
/// skips the `.ckpt` marker.
pub fn entries(root: &Path) -> Vec<(Vec<u8>, bool)> {
    walk(root)
        .into_iter()
        .map(|(rel, m)| (rel, m.is_dir()))
        .collect()
}

fn dirs(root: &Path) -> Vec<Vec<u8>> {
    let mut d = vec![Vec::new()];
    d.extend(entries(root).into_iter().filter(|e| e.1).map(|e| e.0));
    d
}

/// Makes every directory writable/searchable again so edits can proceed.
fn ensure_writable_dirs(root: &Path) {
    for d in dirs(root) {
        let path = at(root, &d);
        let mode = std::fs::symlink_metadata(&path).unwrap().mode() & 0o7777;
        if mode & 0o700 != 0o700 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o700)).unwrap();
        }
    }
}

/// Applies edits; edits that make no sense on the current tree are skipped.
pub fn apply(root: &Path, ops: &[Op]) {
    for op in ops {
        ensure_writable_dirs(root);
        let all = entries(root);
        let ds = dirs(root);
        match op {
            Op::Write {
                dir,
                name,
                content,
                mode,
            } => {
                let path = at(root, &join(&ds[dir % ds.len()], NAMES[name % NAMES.len()]));
                if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                    continue;
                }
                let _ = std::fs::remove_file(&path);
                std::fs::write(&path, content).unwrap();
                std::fs::set_permissions(
                    &path,
                    std::fs::Permissions::from_mode(MODES[mode % MODES.len()]),
                )
                .unwrap();
            }
            Op::Mkdir { dir, name } => {
                let path = at(root, &join(&ds[dir % ds.len()], NAMES[name % NAMES.len()]));
                if std::fs::symlink_metadata(&path).is_err() {
                    std::fs::create_dir(&path).unwrap();
                }
            }
            Op::Symlink { dir, name, target } => {
                let path = at(root, &join(&ds[dir % ds.len()], NAMES[name % NAMES.len()]));
                if std::fs::symlink_metadata(&path).is_err() {
                    let targets: [&[u8]; 4] = [b"a", b"../b.txt", b"/etc/passwd", b"dangling\xff"];
                    std::os::unix::fs::symlink(OsStr::from_bytes(targets[target % 4]), &path)
                        .unwrap();
                }
            }
            Op::Delete { pick } if !all.is_empty() => {
                let (rel, is_dir) = &all[pick % all.len()];
                let path = at(root, rel);
                if *is_dir {
                    std::fs::remove_dir_all(&path).unwrap();
                } else {
                    std::fs::remove_file(&path).unwrap();
                }
            }
            Op::Rename { pick, dir, name } if !all.is_empty() => {
                let (rel, _) = &all[pick % all.len()];
                let to_dir = &ds[dir % ds.len()];
                if to_dir.starts_with(rel) {
                    continue;
                }
                let to = at(root, &join(to_dir, NAMES[name % NAMES.len()]));
                if std::fs::symlink_metadata(&to).is_err() {
                    std::fs::rename(at(root, rel), to).unwrap();
                }
            }
            Op::Chmod { pick, mode } if !all.is_empty() => {
                let (rel, _) = &all[pick % all.len()];
                let path = at(root, rel);
                if !std::fs::symlink_metadata(&path)
                    .unwrap()
                    .file_type()
                    .is_symlink()
                {
                    std::fs::set_permissions(
                        &path,
                        std::fs::Permissions::from_mode(MODES[mode % MODES.len()]),
                    )
                    .unwrap();
                }
            }
            Op::Touch { pick, secs } if !all.is_empty() => {
                let (rel, _) = &all[pick % all.len()];
                let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(*secs as u64);
                let f = std::fs::File::options()
                    .write(false)
                    .read(true)
                    .open(at(root, rel));
                if let Ok(f) = f {
                    if !std::fs::symlink_metadata(at(root, rel))
                        .unwrap()
                        .file_type()
                        .is_symlink()
                    {
                        let _ = f.set_modified(t);
                    }
                }
            }
            Op::Append { pick, content } if !all.is_empty() => {
                let (rel, is_dir) = &all[pick % all.len()];
                let path = at(root, rel);
                if !*is_dir && std::fs::symlink_metadata(&path).unwrap().is_file() {
                    let mut old = std::fs::read(&path).unwrap_or_default();
                    old.extend_from_slice(content);
                    let mode = std::fs::symlink_metadata(&path).unwrap().mode();
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                        .unwrap();
                    std::fs::write(&path, old).unwrap();
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
                        .unwrap();
                }
            }
            _ => {}
        }
    }
}

/// What a path is, exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    File { content: Vec<u8> },
    Dir,
    Symlink { target: Vec<u8> },
}

/// kind + content, mode, mtime of one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snap {
    pub what: What,
    pub mode: u32,
    pub mtime_ns: i64,
}

/// An exact picture of a directory (the root's own metadata excluded).
pub fn snapshot(root: &Path) -> BTreeMap<Vec<u8>, Snap> {
    let mut out = BTreeMap::new();
    for (rel, m) in walk(root) {
        let path = at(root, &rel);
        let what = if m.file_type().is_symlink() {
            What::Symlink {
                target: std::fs::read_link(&path)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec(),
            }
        } else if m.is_dir() {
            What::Dir
        } else {
            What::File {
                content: std::fs::read(&path).unwrap(),
            }
        };
        let is_link = m.file_type().is_symlink();
        out.insert(
            rel,
            Snap {
                what,
                mode: if is_link { 0 } else { m.mode() & 0o7777 },
                mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            },
        );
    }
    out
}

/// Builds a random starting tree.
pub fn populate(root: &Path, ops: &[Op]) {
    std::fs::create_dir_all(root).unwrap();
    apply(root, ops);
}

/// A checkpoint record with only its number, time, message and tags set
/// (its parent the number before it), for tests that write records into a
/// catalog themselves.
pub fn record(
    seq: u64,
    time_ns: i64,
    message: &str,
    tags: &[(&str, &str)],
) -> ckpt_lib::store::catalog::Checkpoint {
    ckpt_lib::store::catalog::Checkpoint {
        seq,
        hash: Default::default(),
        parent: seq.checked_sub(1).filter(|&p| p > 0),
        time_ns,
        message: message.into(),
        tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        root: Default::default(),
        stats: Default::default(),
        skipped: Vec::new(),
        duration_us: 0,
        digest: None,
        state_version: None,
    }
}
