//! `ckpt fork ID DIR`: materialise a checkpoint as a new, independent
//! workspace for a parallel agent, whose store already knows that
//! checkpoint (docs/FORK.md has the whole design and safety argument).
//!
//! The files are written by the same code path as `restore --to`
//! ([`crate::engine::materialize::write_tree`]): every object is verified as
//! it is written; where the store can reflink to DIR (xfs, btrfs) every file
//! is a reflink of its store object, so the fork shares its blocks with the
//! store; elsewhere the copy engine's best strategy. DIR gets **its own
//! store**: a store has one head, one stat index and one restore journal,
//! all of which belong to exactly one directory, so two workspaces cannot
//! share one.
//!
//! That store starts knowing its origin
//! ([`crate::engine::inherit::import`]): the checkpoint's record (same
//! number), its trees, its objects (hard links to the parent store's
//! read-only objects where both are on one filesystem, else copies), its
//! agent state, and a stat index built from the new files' own stats
//! ([`crate::engine::inherit::inherited_index`]). So the fork's first save
//! after a small edit reads only that edit, like the parent's.
//!
//! ## All or nothing
//! Everything is built in a staging directory beside DIR
//! (`.<name>.ckpt-fork.<pid>`): the files, the store when it lives inside
//! DIR, the index, the `.ckpt` marker last; then one `rename` puts it at
//! DIR (replacing DIR if it was an empty directory). A crash before the
//! rename leaves DIR as it was (missing or empty) plus the staging
//! directory, which the next fork into DIR removes; after it, the fork is
//! complete. On an error everything made is removed.
//!
//! With `link`, non-executable files are hard links to the source store's
//! objects (read-only, mode 0444, the object's mtime): for trees the user
//! promises never to modify, such as a read-only `node_modules` fixture.
//! Writing through such a link (after a `chmod`) would damage the source
//! store's object; `ckpt verify --store` on the source store detects it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::inherit::{self, Placement};
use crate::engine::materialize::{self, MaterializeOptions, MaterializeReport};
use crate::error::IoContext;
use crate::store::catalog::Origin;
use crate::store::objects::Imported;
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{Config, Error, Result};

/// What [`fork`] made.
#[derive(Debug)]
pub struct Forked {
    /// What was written.
    pub report: MaterializeReport,
    /// The new workspace.
    pub workspace: Workspace,
    /// How the fork's store got its origin's objects.
    pub objects: Imported,
}

/// The staging directory of a fork into `root` by this process.
fn staging_for(root: &Path, pid: u32) -> Result<PathBuf> {
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return Err(Error::Usage(format!(
            "{} cannot be forked into (nothing was changed)",
            root.display()
        )));
    };
    let mut n = std::ffi::OsString::from(".");
    n.push(name);
    n.push(format!(".ckpt-fork.{pid}"));
    Ok(parent.join(n))
}

/// Removes staging directories of earlier forks into `root` whose process
/// is gone (a crash before the final rename).
fn remove_stale_staging(root: &Path) {
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return;
    };
    let prefix = format!(".{}.ckpt-fork.", name.to_string_lossy());
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = n.strip_prefix(&prefix).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            materialize::remove_partial(&e.path(), true);
        }
    }
}

/// Materialises checkpoint `rev` of `store` (the workspace at `origin_root`)
/// into the new or empty directory `dest` and makes it a workspace whose
/// own store starts at that checkpoint (see the module doc).
pub fn fork(
    store: &Store,
    origin_root: &Path,
    rev: &str,
    dest: &Path,
    new_store: Option<&Path>,
    config: &Config,
    opts: MaterializeOptions<'_>,
) -> Result<Forked> {
    let missing = materialize::check_fresh(dest)?;
    let cp = store.catalog.reader()?.resolve(rev)?;
    let ws = Workspace::plan(dest, new_store, config.data_home.as_deref())?;
    remove_stale_staging(&ws.root);
    let staging = staging_for(&ws.root, std::process::id())?;
    // A store inside the fork is built inside the staging directory.
    let inner = ws
        .store_path
        .strip_prefix(&ws.root)
        .ok()
        .map(Path::to_path_buf);
    let store_at = match &inner {
        Some(rel) => staging.join(rel),
        None => ws.store_path.clone(),
    };
    let store_made = inner.is_some() || !ws.store_path.exists();
    let undo = || {
        if store_made {
            let _ = std::fs::remove_dir_all(&store_at);
        }
        materialize::remove_partial(&staging, true);
        if missing {
            let _ = std::fs::remove_dir(&ws.root);
        }
    };
    let run = || -> Result<Forked> {
        // The store first (outside DIR) while the files are not written
        // yet: its fsyncs then flush a nearly empty filesystem journal.
        std::fs::create_dir(&staging).ctx("create", &staging)?;
        if inner.is_none() {
            let _t = crate::trace::span("fork store init");
            Store::create_for(&store_at, Some(&staging))?;
        }
        let report = materialize::restore_to_with(store, rev, &staging, &[], opts)?;
        if inner.is_some() {
            Store::create_for(&store_at, Some(&staging))?;
        }
        let objects = {
            let fork_store = Store::open(&store_at, config)?;
            let (rec, objects) = inherit::import(
                store,
                &cp,
                &fork_store,
                BTreeMap::new(),
                Placement {
                    seq: Some(cp.seq),
                    make_head: true,
                    keep_latest_state: false,
                },
            )?;
            fork_store.catalog.set_workspace(&ws.root)?;
            fork_store.catalog.set_origin(&Origin {
                workspace: origin_root.to_path_buf(),
                store: store.root.clone(),
                checkpoint: cp.seq,
                root: cp.root,
            })?;
            let reader = fork_store.catalog.reader()?;
            let index =
                inherit::inherited_index(&staging, &reader, rec.root, reader.generation()?)?;
            index.save(&fork_store.index_path())?;
            objects
        };
        Workspace {
            root: staging.clone(),
            store_path: ws.store_path.clone(),
        }
        .write_marker()?;
        std::fs::rename(&staging, &ws.root).ctx("rename", &ws.root)?;
        if let Some(parent) = ws.root.parent() {
            let d = ckpt_copy::fs::open_dir_path(parent).ctx("open", parent)?;
            rustix::fs::fsync(&d).ctx("fsync", parent)?;
        }
        Ok(Forked {
            report,
            workspace: ws.clone(),
            objects,
        })
    };
    run().inspect_err(|_| undo())
}
