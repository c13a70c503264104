//! Step 3's plan of a restore: what differs between the working directory
//! (the scan) and the target checkpoint ([`plan`]), without the paths a
//! restore never touches (another workspace inside this one, ignored
//! paths), and the check that every object to be written is intact
//! ([`check_objects`]) before anything changes.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use crate::engine::diff::{self, Change, ChangeKind, PathFilter, TreeSource};
use crate::store::catalog::CatalogReader;
use crate::store::objects::Objects;
use crate::store::tree::{Entry, Node};
use crate::store::Store;
use crate::workspace::ignore::Ignore;
use crate::workspace::scan::ScanResult;
use crate::workspace::Workspace;
use crate::{Hash, Result};
use ckpt_fs::fs::is_within;

/// Re-hashes every object `changes` will write, in parallel, so a damaged
/// store fails a restore before anything is changed.
pub(super) fn check_objects(objects: &Objects, changes: &[Change]) -> Result<()> {
    let mut needed: Vec<(Hash, u64)> = changes
        .iter()
        .filter(|c| {
            matches!(
                c.kind,
                ChangeKind::Added | ChangeKind::Modified | ChangeKind::TypeChanged
            )
        })
        .filter_map(|c| match c.new.as_ref().map(|e| &e.node) {
            Some(Node::File { hash, size }) => Some((*hash, *size)),
            _ => None,
        })
        .collect();
    needed.sort_unstable();
    needed.dedup();
    needed
        .par_iter()
        .try_for_each(|(h, size)| objects.check(h, *size))
}

/// Every difference from the scanned state to the target tree, within
/// `filter`, without `.ckptignore`d paths and without anything at or below
/// another workspace inside `root`: what a restore must do.
pub(super) fn plan(
    reader: &CatalogReader<'_>,
    scan: &crate::workspace::scan::ScanResult,
    target: Hash,
    filter: &PathFilter,
    ignore: &Ignore,
    root: &Path,
) -> Result<Vec<Change>> {
    let src = TreeSource {
        fresh: Some(&scan.new_trees),
        catalog: reader,
    };
    let mut changes = diff::diff_trees(&src, Some(scan.root), Some(target), filter)?;
    drop_ignored(&mut changes, ignore);
    drop_nested(&mut changes, root);
    Ok(changes)
}

/// What an in-place restore of the whole workspace to the tree `target`
/// would change, where `target` and its subtrees are in `trees` (another
/// store's checkpoint, not brought into this one: `adopt --dry-run`).
/// `scan` is a hash-only scan of the workspace; nothing is changed.
pub fn plan_foreign(
    ws: &Workspace,
    store: &Store,
    scan: &ScanResult,
    target: Hash,
    trees: &HashMap<Hash, Vec<u8>>,
) -> Result<Vec<Change>> {
    let ignore = ws.ignore()?;
    let mut fresh = scan.new_trees.clone();
    fresh.extend(trees.iter().map(|(h, t)| (*h, t.clone())));
    let reader = store.catalog.reader()?;
    let src = TreeSource {
        fresh: Some(&fresh),
        catalog: &reader,
    };
    let all = PathFilter::new(Vec::new());
    let mut changes = diff::diff_trees(&src, Some(scan.root), Some(target), &all)?;
    drop_ignored(&mut changes, &ignore);
    drop_nested(&mut changes, &ws.root);
    Ok(changes)
}

/// Drops every change at or below another workspace inside `root`. The scan
/// never includes one, so only an added directory can be one: a target
/// directory that is on disk a directory with a `.ckpt` marker file.
pub(super) fn drop_nested(changes: &mut Vec<Change>, root: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let nested: Vec<Vec<u8>> = changes
        .iter()
        .filter(|c| {
            c.kind == ChangeKind::Added
                && matches!(c.new.as_ref().map(|e| &e.node), Some(Node::Dir { .. }))
        })
        .filter(|c| {
            let dir = root.join(std::ffi::OsStr::from_bytes(&c.path));
            dir.symlink_metadata().is_ok_and(|m| m.is_dir())
                && dir
                    .join(crate::workspace::MARKER_NAME)
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_file())
        })
        .map(|c| c.path.clone())
        .collect();
    if !nested.is_empty() {
        changes.retain(|c| !nested.iter().any(|n| is_within(&c.path, n)));
    }
}

pub(super) fn drop_ignored(changes: &mut Vec<Change>, ignore: &Ignore) {
    if ignore.is_active() {
        changes.retain(|c| {
            let is_dir = |e: &Option<Entry>| {
                e.as_ref()
                    .is_some_and(|e| matches!(e.node, Node::Dir { .. }))
            };
            !ignore.is_ignored(&c.path, is_dir(&c.new) || is_dir(&c.old))
        });
    }
}
