//! `ckpt fork ID DIR`: materialise a checkpoint as a new, independent
//! workspace for a parallel agent.
//!
//! The files are written by the same code path as `restore --to`
//! ([`restore::restore_to_with`]), so on xfs/btrfs every file is a reflink
//! of its store object (no data is copied), elsewhere the copy engine's
//! best strategy. Then DIR is made a workspace with **its own store**: a
//! store has one head, one stat index and one restore journal, all of which
//! belong to exactly one directory, so two workspaces cannot share one.
//! The fork's store is placed by the usual rule (or `store`), on DIR's
//! filesystem when possible, so its first save reflinks again where the
//! filesystem allows.
//!
//! With `link`, non-executable files are hard links to the source store's
//! objects (read-only, mode 0444, the object's mtime): for trees the user
//! promises never to modify, such as a read-only `node_modules` fixture.
//! Writing through such a link (after a `chmod`) would damage the source
//! store's object; `ckpt verify --store` on the source store detects it.

use std::path::Path;

use crate::copytree::Progress;
use crate::restore::{self, MaterializeOptions, MaterializeReport};
use crate::store::Store;
use crate::workspace::Workspace;
use crate::Result;

/// Materialises checkpoint `rev` of `store` into the new or empty directory
/// `dest` and makes it a workspace with its own store.
pub fn fork(
    store: &Store,
    rev: &str,
    dest: &Path,
    new_store: Option<&Path>,
    link: bool,
    progress: Option<&Progress>,
) -> Result<(MaterializeReport, Workspace)> {
    let rep =
        restore::restore_to_with(store, rev, dest, &[], MaterializeOptions { link, progress })?;
    let ws = Workspace::init(dest, new_store)?;
    Ok((rep, ws))
}
