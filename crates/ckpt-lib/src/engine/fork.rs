//! `ckpt fork ID DIR`: materialise a checkpoint as a new, independent
//! workspace for a parallel agent, whose store already knows that
//! checkpoint (docs/FORK.md has the whole design and safety argument).
//!
//! How the files get there is the fork's backend ([`crate::engine::backend`]).
//! A **btrfs-subvolume** fork is a snapshot of the workspace subvolume
//! followed by an in-place restore, in the snapshot, of only the paths that
//! differ from the checkpoint ([`restore_snapshot`] has why its stat index
//! is sound). For **reflink** and **copy** forks, the files are written by
//! the same code path as `restore --to`
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
//! (`.<name>.ckpt-fork.<pid>`; for a subvolume fork, the snapshot): the
//! files, the store when it lives inside DIR, the index, the `.ckpt`
//! marker last; then one `rename` puts it at DIR (replacing DIR if it was
//! an empty directory). A crash before the
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
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::engine::backend::{Backend, Choice};
use crate::engine::diff::ChangeKind;
use crate::engine::inherit::{self, Placement};
use crate::engine::materialize::{self, MaterializeOptions, MaterializeReport};
use crate::engine::restore::{self, RestoreOptions};
use crate::engine::save::{OnDisk, ScanKind, ScanPlan, Scanner};
use crate::error::IoContext;
use crate::platform::btrfs;
use crate::store::catalog::{Checkpoint, Origin};
use crate::store::objects::Imported;
use crate::store::Store;
use crate::workspace::scan::{ScanResult, NESTED_WORKSPACE};
use crate::workspace::Workspace;
use crate::{Config, Error, Result};
use ckpt_copy::copy::{Caps, Copier};

/// What [`fork`] made.
#[derive(Debug)]
pub struct Forked {
    /// What was written.
    pub report: MaterializeReport,
    /// The new workspace.
    pub workspace: Workspace,
    /// How the fork's store got its origin's objects.
    pub objects: Imported,
    /// The backend that made it.
    pub backend: Backend,
    /// A subvolume fork: what the restore after the snapshot changed.
    pub restored: Option<SnapshotRestore>,
    /// Why another backend than the chosen one was used, if one was.
    pub note: Option<String>,
}

/// The hidden sibling `.<name>.<tag>.<pid>` of `root` (a fork's staging
/// directory, tag `ckpt-fork`; a subvolume conversion's, `ckpt-subvol`).
pub fn hidden_sibling(root: &Path, tag: &str, pid: u32) -> Result<PathBuf> {
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return Err(Error::Usage(format!(
            "{} cannot be used: it has no parent directory (nothing was changed)",
            root.display()
        )));
    };
    let mut n = std::ffi::OsString::from(".");
    n.push(name);
    n.push(format!(".{tag}.{pid}"));
    Ok(parent.join(n))
}

/// Removes the [`hidden_sibling`]s of `root` with `tag` whose process is
/// gone (left by a crash).
pub fn remove_dead_siblings(root: &Path, tag: &str) {
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return;
    };
    let prefix = format!(".{}.{tag}.", name.to_string_lossy());
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = n.strip_prefix(&prefix).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            remove_tree(&e.path());
        }
    }
}

/// Materialises checkpoint `rev` of `store` (the workspace at `origin_root`)
/// into the new or empty directory `dest` and makes it a workspace whose
/// own store starts at that checkpoint (see the module doc), with the
/// backend `choice` names (falling back, when it was not forced and a
/// snapshot is refused, to the next one that works).
#[allow(clippy::too_many_arguments)]
pub fn fork(
    store: &Store,
    origin_root: &Path,
    rev: &str,
    dest: &Path,
    new_store: Option<&Path>,
    config: &Config,
    choice: &Choice,
    opts: MaterializeOptions<'_>,
) -> Result<Forked> {
    let missing = materialize::check_fresh(dest)?;
    let cp = store.catalog.reader()?.resolve(rev)?;
    let ws = Workspace::plan(dest, new_store, config.data_home.as_deref())?;
    remove_dead_siblings(&ws.root, "ckpt-fork");
    let staging = hidden_sibling(&ws.root, "ckpt-fork", std::process::id())?;
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
    let mut backend = choice.backend;
    let mut note = None;
    if backend == Backend::BtrfsSubvolume && inner.is_some() {
        let why = format!(
            "the fork's store {} would be inside its snapshot",
            ws.store_path.display()
        );
        if choice.forced {
            return Err(Error::Usage(format!(
                "--backend btrfs-subvolume cannot fork into {}: {why}; give --store outside it (nothing was changed)",
                ws.root.display()
            )));
        }
        backend = choice.after(backend);
        note = Some(format!("{why}: used {} instead", backend.name()));
    }
    let store_made = inner.is_some() || !ws.store_path.exists();
    let undo = || {
        if store_made {
            let _ = std::fs::remove_dir_all(&store_at);
        }
        remove_tree(&staging);
        if missing {
            let _ = std::fs::remove_dir(&ws.root);
        }
    };
    let mut run = || -> Result<Forked> {
        let mut written = None;
        if backend == Backend::BtrfsSubvolume {
            match snapshot_into(origin_root, &staging) {
                Ok(()) => {}
                Err(e) if !choice.forced => {
                    backend = choice.after(backend);
                    note = Some(format!("{e}: used {} instead", backend.name()));
                }
                Err(e) => {
                    return Err(Error::Usage(format!(
                        "--backend btrfs-subvolume: {e} (nothing was changed)\n  \
                         drop --backend to fork with the next backend that works"
                    )))
                }
            }
        }
        if backend != Backend::BtrfsSubvolume {
            std::fs::create_dir(&staging).ctx("create", &staging)?;
        }
        // The store first (outside DIR) while the files are not written
        // yet: its fsyncs then flush a nearly empty filesystem journal.
        if inner.is_none() {
            let _t = crate::trace::span("fork store init");
            Store::create_for(&store_at, Some(&staging))?;
        }
        let report = match backend {
            Backend::BtrfsSubvolume => None,
            Backend::Copy => {
                let copier = Copier::new(Caps {
                    copy_file_range: true,
                    ..Caps::NONE
                });
                let o = MaterializeOptions {
                    copier: Some(&copier),
                    ..opts
                };
                Some(materialize::restore_to_with(store, rev, &staging, &[], o)?)
            }
            _ => Some(materialize::restore_to_with(
                store,
                rev,
                &staging,
                &[],
                opts,
            )?),
        };
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
            if report.is_some() {
                let reader = fork_store.catalog.reader()?;
                let mut index =
                    inherit::inherited_index(&staging, &reader, rec.root, reader.generation()?)?;
                index.save(&fork_store.index_path())?;
            } else {
                written = Some(restore_snapshot(
                    store,
                    origin_root,
                    &fork_store,
                    &staging,
                    &ws.store_path,
                    &rec,
                )?);
            }
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
        let report = match (report, written) {
            (Some(r), _) => r,
            (None, w) => {
                let w = w.unwrap_or_default();
                MaterializeReport {
                    target: cp.clone(),
                    files: w.written,
                    dirs: 0,
                    bytes: w.bytes,
                }
            }
        };
        Ok(Forked {
            report,
            workspace: ws.clone(),
            objects,
            backend,
            restored: written,
            note: note.clone(),
        })
    };
    run().inspect_err(|_| undo())
}

/// What the restore inside a subvolume fork changed.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotRestore {
    /// Files and symlinks written.
    pub written: u64,
    /// Entries removed.
    pub removed: u64,
    /// Bytes of the files written.
    pub bytes: u64,
}

/// Snapshots the workspace subvolume `origin_root` at `staging` (which must
/// not exist) and removes the origin's workspace marker from it. On an
/// error nothing is left at `staging`.
fn snapshot_into(origin_root: &Path, staging: &Path) -> Result<()> {
    let _t = crate::trace::span("btrfs snapshot");
    let (Some(parent), Some(name)) = (staging.parent(), staging.file_name()) else {
        return Err(Error::Usage(format!(
            "{} cannot be forked into (nothing was changed)",
            staging.display()
        )));
    };
    let src = ckpt_copy::fs::open_dir_path(origin_root).ctx("open", origin_root)?;
    let dir = ckpt_copy::fs::open_dir_path(parent).ctx("open", parent)?;
    btrfs::snapshot(src.as_fd(), dir.as_fd(), name.as_bytes()).map_err(|e| {
        Error::io(
            "btrfs snapshot of the workspace to",
            staging,
            std::io::Error::from(e),
        )
    })?;
    let marker = staging.join(crate::workspace::MARKER_NAME);
    match std::fs::remove_file(&marker) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => {
            remove_tree(staging);
            Err(Error::io("remove", marker, e))
        }
    }
}

/// Makes the snapshot at `staging` exactly checkpoint `rec` of `fork_store`
/// with an ordinary in-place restore (no pre-save: nothing there is
/// anyone's work). The snapshot starts from the parent's stat index with
/// the parent's device number replaced by the snapshot's: a snapshot keeps
/// every inode's number, size, mode, mtime and ctime, so an entry matches
/// exactly when the parent's would have matched the same file (a file
/// changed after the parent's last scan has another ctime and is hashed).
/// Tree hashes are not carried over (the fork's store holds only the
/// checkpoint's trees), so every directory's tree is recomputed from its
/// entries, without reading files.
fn restore_snapshot(
    store: &Store,
    origin_root: &Path,
    fork_store: &Store,
    staging: &Path,
    store_path: &Path,
    rec: &Checkpoint,
) -> Result<SnapshotRestore> {
    let dev_of = |p: &Path| -> Result<u64> {
        let fd = ckpt_copy::fs::open_dir_path(p).ctx("open", p)?;
        Ok(ckpt_copy::fs::stat_fd(fd.as_fd()).ctx("stat", p)?.dev)
    };
    let generation = fork_store.catalog.reader()?.generation()?;
    let mut index = inherit::snapshot_index(
        &store.load_index()?,
        dev_of(origin_root)?,
        dev_of(staging)?,
        generation,
    );
    index.save(&fork_store.index_path())?;
    let ws = Workspace {
        root: staging.to_path_buf(),
        store_path: store_path.to_path_buf(),
    };
    let mut scanner = SnapshotScanner {
        inner: OnDisk::new(ScanPlan::Full),
        root: staging,
    };
    let rep = restore::restore(
        &ws,
        fork_store,
        &rec.id(),
        &RestoreOptions {
            no_save: true,
            ..RestoreOptions::default()
        },
        &mut scanner,
    )?;
    let bytes = rep
        .changes
        .iter()
        .filter(|c| {
            matches!(
                c.kind,
                ChangeKind::Added | ChangeKind::Modified | ChangeKind::TypeChanged
            )
        })
        .map(|c| c.new.as_ref().map_or(0, |n| n.node.size()))
        .sum();
    Ok(SnapshotRestore {
        written: rep.written,
        removed: rep.removed,
        bytes,
    })
}

/// The scanner of the restore inside a snapshot: a workspace nested in the
/// parent (a subdirectory holding its own `.ckpt` marker) came along in the
/// snapshot, and a restore never touches one; it is not part of the
/// checkpoint and its marker names another store, so it is removed from
/// the snapshot and the snapshot scanned again.
struct SnapshotScanner<'a> {
    inner: OnDisk,
    root: &'a Path,
}

impl Scanner for SnapshotScanner<'_> {
    fn scan(&mut self, ws: &Workspace, store: &Store, kind: ScanKind) -> Result<ScanResult> {
        let scan = self.inner.scan(ws, store, kind)?;
        let nested: Vec<&Vec<u8>> = scan
            .skipped
            .iter()
            .filter(|s| s.kind == NESTED_WORKSPACE)
            .map(|s| &s.path)
            .collect();
        if nested.is_empty() {
            return Ok(scan);
        }
        for rel in nested {
            remove_tree(&self.root.join(std::ffi::OsStr::from_bytes(rel)));
        }
        self.inner.scan(ws, store, kind)
    }

    fn keep_index(&mut self, store: &Store, scan: ScanResult) -> Result<()> {
        self.inner.keep_index(store, scan)
    }
}

/// Removes the directory tree at `path`: one subvolume delete when it is a
/// btrfs subvolume and that is permitted, else file by file. Best effort
/// (callers check what is left when it matters); returns a note when a
/// subvolume had to be removed file by file.
pub fn remove_tree(path: &Path) -> Option<String> {
    let is_subvol =
        ckpt_copy::fs::open_dir_path(path).is_ok_and(|fd| btrfs::is_subvolume(fd.as_fd()));
    if is_subvol {
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            let r = ckpt_copy::fs::open_dir_path(parent)
                .and_then(|d| btrfs::delete_subvolume(d.as_fd(), name.as_bytes()));
            match r {
                Ok(()) => return None,
                Err(e) => {
                    materialize::remove_partial(path, true);
                    return Some(format!(
                        "deleting the btrfs subvolume {} was refused ({e}; it needs root or the \
                         user_subvol_rm_allowed mount option), so it was removed file by file",
                        path.display()
                    ));
                }
            }
        }
    }
    materialize::remove_partial(path, true);
    None
}
