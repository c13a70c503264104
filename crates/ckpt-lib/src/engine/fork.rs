//! `ckpt fork ID DIR`: materialise a checkpoint as a new, independent
//! workspace for a parallel agent.
//!
//! The files are written by the same code path as `restore --to`
//! ([`crate::engine::materialize::restore_to_with`]): every object is
//! verified as it is written; where the store can reflink to DIR (xfs,
//! btrfs) every file is a reflink of its store object, small ones too, so
//! the fork shares its blocks with the store; elsewhere the copy engine's
//! best strategy (see [`crate::engine::materialize`] for which and why). Then DIR
//! is made a workspace with **its own store**: a
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

use crate::engine::materialize::{self, MaterializeOptions, MaterializeReport};
use crate::store::Store;
use crate::workspace::Workspace;
use crate::Result;

/// Materialises checkpoint `rev` of `store` into the new or empty directory
/// `dest` and makes it a workspace with its own store.
///
/// Order: the new store is created first (while `dest` is still empty), then
/// the files are written, then the workspace marker. The store's own fsyncs
/// then force out a nearly empty filesystem journal, not the metadata of
/// every file the fork just created (on xfs that flush cost more than a
/// tenth of the whole fork). On any error the new store is removed and
/// `dest` is left missing or empty, as it was.
pub fn fork(
    store: &Store,
    rev: &str,
    dest: &Path,
    new_store: Option<&Path>,
    data_home: Option<&Path>,
    opts: MaterializeOptions<'_>,
) -> Result<(MaterializeReport, Workspace)> {
    let missing = crate::engine::materialize::check_fresh(dest)?;
    store.catalog.reader()?.resolve(rev)?;
    let ws = Workspace::plan(dest, new_store, data_home)?;
    // Only a store this call created (its directory did not exist) is removed.
    let undo = |store_made: bool| {
        if store_made {
            let _ = std::fs::remove_dir_all(&ws.store_path);
        }
        crate::engine::materialize::remove_partial(&ws.root, missing);
    };
    // A store inside the fork would make `dest` non-empty: created after.
    let store_first = !ws.store_path.starts_with(&ws.root) && !ws.store_path.exists();
    if store_first {
        let _t = crate::trace::span("fork store init");
        if let Err(e) = Store::create_for(&ws.store_path, Some(&ws.root)) {
            undo(true);
            return Err(e);
        }
    }
    let rep = match materialize::restore_to_with(store, rev, &ws.root, &[], opts) {
        Ok(rep) => rep,
        Err(e) => {
            undo(store_first);
            return Err(e);
        }
    };
    if !store_first {
        Store::create_for(&ws.store_path, Some(&ws.root))?;
    }
    ws.write_marker()?;
    Ok((rep, ws))
}
