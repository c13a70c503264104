//! The one directory walker of both test suites (this crate's and, by
//! `#[path]`, ckpt-cli's): every entry below a root, sorted, depth first.

use std::ffi::OsStr;
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `root/rel` for a byte path (`root` itself for the empty path).
pub fn at(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(rel))
    }
}

/// `rel/name` as a byte path (`name` alone below the root).
pub fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    if rel.is_empty() {
        name.to_vec()
    } else {
        [rel, b"/", name].concat()
    }
}

/// Every entry below `root` as (relative byte path, `symlink_metadata`),
/// names sorted bytewise, each directory followed by its contents; the
/// root's workspace marker `.ckpt` is skipped.
pub fn walk(root: &Path) -> Vec<(Vec<u8>, Metadata)> {
    fn walk_in(root: &Path, rel: &[u8], out: &mut Vec<(Vec<u8>, Metadata)>) {
        let dir = at(root, rel);
        let mut names: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        names.sort();
        for n in names {
            if rel.is_empty() && n == b".ckpt" {
                continue;
            }
            let path = join(rel, &n);
            let m = std::fs::symlink_metadata(at(root, &path)).unwrap();
            let is_dir = m.is_dir();
            out.push((path.clone(), m));
            if is_dir {
                walk_in(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk_in(root, b"", &mut out);
    out
}
