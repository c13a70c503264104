//! `ckpt fork ID DIR`: materialise a checkpoint as a new, independent
//! workspace for a parallel agent, whose store already knows that
//! checkpoint (docs/FORK.md has the whole design and safety argument).
//!
//! How the files get there is the fork's backend ([`crate::engine::fork::backend`]).
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
//! ([`crate::engine::fork::inherit::import`]): the checkpoint's record (same
//! number), its trees, its objects (hard links to the parent store's
//! read-only objects where both are on one filesystem, else copies), its
//! agent state, and a stat index of the new files, each stat taken by the
//! writer through the new file's own descriptor once it is complete
//! ([`crate::engine::fork::inherit::written_index`]: no second pass of
//! `lstat`s). So the fork's first save after a small edit reads only that
//! edit, like the parent's.
//!
//! ## The store of a reflink fork
//! A reflink fork whose store is outside DIR (the usual case) fills that
//! store on a thread of its own (a one-thread rayon pool, so it does not
//! take the writer's threads) while the writer clones the files: the
//! checkpoint's objects hard-linked (one `linkat` each, then a `syncfs`),
//! its agent state and its catalog transaction. Nothing there depends on
//! the files, and nothing in DIR depends on the store until the index,
//! written after both are done. It is still all or nothing: the store is
//! removed on any error, and a crash leaves DIR unpublished whatever the
//! store holds (as before, when the store was filled after the files). The
//! copy backend keeps the old order (its import's `syncfs` then also makes
//! the copied data durable before DIR is published).
//!
//! ## The store of a subvolume fork
//! When the origin's store is itself a btrfs subvolume (`ckpt init
//! --subvolume` makes it one) on the filesystem of the fork's store, a
//! subvolume fork's store is a snapshot of it ([`snapshot_store`]) instead
//! of a new store that imports the checkpoint: no object is linked or
//! copied, every tree and record is shared copy-on-write, and the fork
//! holds the origin's whole history as of the fork. One catalog
//! transaction makes it the fork's ([`Catalog::start_fork`]: workspace,
//! origin, head, no journal), and the restore in the snapshot sets its
//! agent state and stat index. Otherwise (or when the kernel refuses the
//! snapshot) the store is made and imported as above. Either way its
//! catalog is opened with [`Store::open_unsynced`]: its commits are made
//! durable by one `fdatasync` when it is closed, before the publish,
//! instead of six; a crash before that leaves a store no workspace names.
//!
//! [`Catalog::start_fork`]: crate::store::catalog::Catalog::start_fork
//!
//! ## A subvolume fork through the origin's watcher
//! With `ckpt watch` running in the origin and a store snapshot, the
//! restore in the snapshot scans only the directories the watcher names
//! (plus every directory whose index record does not claim all its names,
//! where a nested workspace can be), not the whole snapshot. Why that scan
//! finds everything a full one would:
//!
//! 1. Before taking the origin's store lock the fork asks the watcher to
//!    write its in-memory index `I` and token `T` (`op: persist`). Then it
//!    takes the lock: every writer of the index and token holds it (saves,
//!    restores, the watcher's own writes, which never wait for it), so `I`
//!    and `T` stay the origin's files until the fork ends. If the watcher
//!    could not write them, the files are older and consistent, and marks
//!    after their token are still kept by the watcher (it forgets marks
//!    only up to what was written): the dirty set below is only larger.
//! 2. The workspace is snapshotted (instant `S`) and, at the same time,
//!    the store (holding `I` and `T`, which the lock keeps still, so the
//!    order of the two does not matter; `I` is read meanwhile, from the
//!    origin's store, for the same reason).
//! 3. **Only then** the fork asks which directories are marked after
//!    `T.seq` ([`crate::watch::client::Client::plan`]). The watcher drains
//!    its inotify queue before answering, and inotify queues an event
//!    inside the system call that makes the change, so every change whose
//!    system call returned before `S` is drained and marked, with a number
//!    above `T.seq` when it came after the drain `I`'s scan started from
//!    (the argument of [`crate::watch`]). A directory not named therefore
//!    changed neither in its names nor in its entries between `I`'s scan
//!    and `S`, and a snapshot keeps every inode's number, mode, size,
//!    mtime and ctime: its record in `I`, device number mapped, describes
//!    the snapshot's directory exactly, as a fresh scan would. Asking
//!    before the snapshot would not do: a change between the answer and
//!    the snapshot would be in the snapshot and not named.
//!
//! What the watcher cannot vouch for: a `write` still running while the
//! snapshot is taken (its event is queued when it returns, after the
//! drain) may be partly in the snapshot without its directory being
//! named. Such a write set the file's mtime and ctime before its first
//! byte, so the fork's index entry does not match the file: the fork's
//! first `status` or save reports it, nothing is silently taken for the
//! checkpoint. The watcher's blind spots (docs/WATCH.md: writes through a
//! shared `mmap`, hard links from outside) apply as to a save. `ckpt
//! --full-scan fork` scans the whole snapshot. Without a watcher, or when
//! it cannot vouch (not ready, lost events, no save through it yet), every
//! directory of the snapshot is scanned: its first `lstat` of each inode
//! is the floor of such a fork (BENCHMARKS.md).
//!
//! ## All or nothing
//! Everything is built in a staging directory beside DIR
//! (`.<name>.ckpt-fork.<pid>`; for a subvolume fork, the snapshot): the
//! files, the store when it lives inside DIR, the index, the `.ckpt`
//! marker last (a subvolume fork's snapshot already holds one: it is made
//! the fork's, in place, as soon as the snapshot exists, so the snapshot
//! never names the origin's store); then one `rename` puts it at DIR
//! (replacing DIR if it was an empty directory). A crash before the
//! rename leaves DIR as it was (missing or empty) plus the staging
//! directory, which the next fork into DIR removes; after it, the fork is
//! complete. On an error everything made is removed.
//!
//! With `link`, non-executable files are hard links to the source store's
//! objects (read-only, mode 0444, the object's mtime): for trees the user
//! promises never to modify, such as a read-only `node_modules` fixture.
//! Writing through such a link (after a `chmod`) would damage the source
//! store's object; `ckpt verify --store` on the source store detects it.
//!
//! ## This folder
//! - this file: [`fork`] and what every backend shares (staging, publish,
//!   the fork's store and index);
//! - [`backend`]: which way a fork's files are made (btrfs subvolume,
//!   reflink, copy, overlay);
//! - [`subvolume`]: making a workspace a btrfs subvolume, so that its
//!   forks are snapshots;
//! - [`overlay`]: a fork as an overlayfs mount over a shared read-only
//!   materialised checkpoint;
//! - [`inherit`]: a checkpoint brought from one store into another (a
//!   fork's store starts at its origin; adopt brings a fork's back).

pub mod backend;
pub mod inherit;
pub mod overlay;
pub mod subvolume;

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::engine::diff::ChangeKind;
use crate::engine::fork::backend::{Backend, Choice};
use crate::engine::fork::inherit::{Placement, Stats};
use crate::engine::materialize::{self, MaterializeOptions, MaterializeReport};
use crate::engine::restore::{self, RestoreJob};
use crate::engine::scanner::{OnDisk, ScanKind, ScanPlan, Scanner};
use crate::error::IoContext;
use crate::platform::btrfs;
use crate::store::catalog::{Checkpoint, Origin};
use crate::store::index::Index;
use crate::store::objects::Imported;
use crate::store::verified::VerifiedStats;
use crate::store::Store;
use crate::workspace::scan::{ScanResult, NESTED_WORKSPACE};
use crate::workspace::Workspace;
use crate::{Config, Error, Result};
use ckpt_fs::copy::{Caps, Copier};

/// What [`fork`] made.
#[derive(Debug)]
pub struct Forked {
    /// What was written.
    pub report: MaterializeReport,
    /// The new workspace.
    pub workspace: Workspace,
    /// How the fork's store got its origin's objects (none moved when it
    /// is a snapshot of the origin's store).
    pub objects: Imported,
    /// The fork's store is a btrfs snapshot of the origin's store.
    pub store_snapshot: bool,
    /// The backend that made it.
    pub backend: Backend,
    /// A subvolume fork: what the restore after the snapshot changed.
    pub restored: Option<SnapshotRestore>,
    /// Why another backend than the chosen one was used, if one was.
    pub note: Option<String>,
    /// A subvolume fork whose store is a snapshot: its stat index as the
    /// restore in the snapshot left it (and wrote it), so that `fork
    /// --count`'s copies start from it instead of reading it again.
    pub index: Option<Index>,
}

/// The hidden sibling `.<name>.<tag>.<pid>` of `root` (a fork's staging
/// directory, tag `ckpt-fork`; a subvolume conversion's, `ckpt-subvol`).
pub fn hidden_sibling(root: &Path, tag: &str, pid: u32) -> Result<PathBuf> {
    hidden_beside(root, &format!(".{tag}.{pid}"))
}

/// The hidden sibling `.<name><suffix>` of `root`.
pub fn hidden_beside(root: &Path, suffix: &str) -> Result<PathBuf> {
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        return Err(Error::Usage(format!(
            "{} cannot be used: it has no parent directory (nothing was changed)",
            root.display()
        )));
    };
    let mut n = std::ffi::OsString::from(".");
    n.push(name);
    n.push(suffix);
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
/// snapshot is refused, to the next one that works). With `durable`, the
/// fork is durable when this returns (the publishing rename is synced);
/// without, it is not (`fork --count`'s hidden template, which is removed
/// after use, and which each copy's own sync makes durable with it).
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
    watcher_plan: &dyn Fn() -> ScanPlan,
    durable: bool,
) -> Result<Forked> {
    let missing = materialize::check_fresh(dest, "a fork")?;
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
    let mut store_snapshot = false;
    let undo = || {
        if store_made {
            remove_tree(&store_at);
        }
        remove_tree(&staging);
        if missing {
            let _ = std::fs::remove_dir(&ws.root);
        }
    };
    let mut run = || -> Result<Forked> {
        let mut written = None;
        let mut kept = None;
        // The origin's stat index, read while the snapshots are taken.
        let mut known = None;
        if backend == Backend::BtrfsSubvolume {
            let (snapped, store_snapped, index) = snapshot_all(
                store,
                origin_root,
                &staging,
                &ws,
                &store_at,
                inner.is_none(),
            );
            store_snapshot = store_snapped;
            known = index;
            if snapped.is_err() && store_snapshot {
                remove_tree(&store_at);
                store_snapshot = false;
            }
            match snapped {
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
        // yet: its fsyncs then flush a nearly empty filesystem journal
        // (unless it is already a snapshot of the origin's store: "The
        // store of a subvolume fork").
        if inner.is_none() && !store_snapshot {
            let _t = crate::trace::span("fork store init");
            Store::create_for(&store_at, Some(&staging))?;
        }
        let origin = Origin {
            workspace: origin_root.to_path_buf(),
            store: store.root.clone(),
            checkpoint: cp.seq,
            root: cp.root,
        };
        // A reflink fork whose store is outside DIR fills that store
        // while the files are written ("The store of a reflink fork" in
        // the module doc).
        let early = (backend == Backend::Reflink && inner.is_none())
            .then(|| Store::open(&store_at, config))
            .transpose()?;
        // The writer takes each new file's stat for the fork's index, and
        // hashes only the objects the origin's record does not vouch for.
        let stats = Stats::default();
        let trust = match backend {
            Backend::BtrfsSubvolume => VerifiedStats::default(),
            _ => VerifiedStats::load(&store.root),
        };
        let opts = MaterializeOptions {
            stats: Some(&stats),
            trust: Some(&trust),
            ..opts
        };
        let write = || -> Result<Option<MaterializeReport>> {
            Ok(match backend {
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
            })
        };
        let (report, started) = match &early {
            Some(fork_store) => std::thread::scope(|s| {
                let fill = s.spawn(|| {
                    on_a_thread_of_its_own(|| {
                        start_store(store, &cp, fork_store, &ws.root, &origin)
                    })
                });
                let report = write();
                let started = joined(fill);
                (report, Some(started))
            }),
            None => (write(), None),
        };
        let (report, started) = (report?, started.transpose()?);
        if inner.is_some() {
            Store::create_for(&store_at, Some(&staging))?;
        }
        let objects = {
            let fork_store = match early {
                Some(s) => s,
                // Durable once, when closed ("The store of a subvolume fork").
                None if backend == Backend::BtrfsSubvolume => {
                    Store::open_unsynced(&store_at, config)?
                }
                None => Store::open(&store_at, config)?,
            };
            let (rec, objects) = match started {
                Some(done) => done,
                None if store_snapshot => {
                    let _t = crate::trace::span("start fork");
                    fork_store.catalog.start_fork(&ws.root, &origin, cp.seq)?;
                    (cp.clone(), Imported::default())
                }
                None => start_store(store, &cp, &fork_store, &ws.root, &origin)?,
            };
            if report.is_some() {
                // The fork's objects are the origin's inodes where linked.
                // Best effort: without the record the next fork hashes.
                let _ = trust.save(&[&store.root, &fork_store.root]);
                let generation = fork_store.catalog.reader()?.generation()?;
                let mut index = inherit::written_index(&stats, generation);
                index.save(&fork_store.index_path())?;
            } else {
                let (w, ix) = restore_snapshot(
                    store,
                    origin_root,
                    &fork_store,
                    &staging,
                    &ws.store_path,
                    &rec,
                    store_snapshot,
                    known.take(),
                    watcher_plan,
                )?;
                (written, kept) = (Some(w), ix);
            }
            fork_store.close()?;
            objects
        };
        // A snapshot's marker is already the fork's (`snapshot_into`).
        if backend != Backend::BtrfsSubvolume {
            ws.write_marker_in_place(&staging)?;
        }
        let t = crate::trace::span("publish");
        publish(&staging, &ws, durable)?;
        drop(t);
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
            store_snapshot,
            backend,
            restored: written,
            note: note.clone(),
            index: kept,
        })
    };
    run().inspect_err(|_| undo())
}

/// Runs `f` on a rayon pool of one thread made for it, so that its
/// parallel loops do not take the threads of the global pool (the
/// writer's); directly when no thread can be made.
fn on_a_thread_of_its_own<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match rayon::ThreadPoolBuilder::new().num_threads(1).build() {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

/// Starts the new store `fork_store` of the fork `root` at checkpoint `cp`
/// of `store` ([`inherit::import`]: same number, made its head) and
/// records the fork's workspace and `origin`; returns the record as
/// stored there and how the objects moved.
pub(crate) fn start_store(
    store: &Store,
    cp: &Checkpoint,
    fork_store: &Store,
    root: &Path,
    origin: &Origin,
) -> Result<(Checkpoint, Imported)> {
    let imported = inherit::import(
        store,
        cp,
        fork_store,
        BTreeMap::new(),
        Placement {
            seq: Some(cp.seq),
            make_head: true,
            keep_latest_state: false,
        },
    )?;
    fork_store.catalog.set_workspace(root)?;
    fork_store.catalog.set_origin(origin)?;
    Ok(imported)
}

/// Makes the fork's store at `at` (which must not exist) a btrfs snapshot
/// of the store at `store`, when `store` is a subvolume and `at` is on its filesystem;
/// false, with nothing left at `at`, when it is not or the kernel refuses
/// (the caller then makes a new store and imports the checkpoint).
///
/// Why the snapshot is a sound store: the caller holds `store`'s lock, so
/// no other process is writing it, and everything this process wrote is
/// in it (a snapshot first flushes the subvolume's dirty data); every redb
/// commit and every object is therefore whole in the snapshot, as after a
/// clean stop. The snapshot is a separate tree of inodes: a write or a
/// delete on either side (a save, `gc`, even deleting the whole origin
/// store) never reaches the other, and no object is writable on either.
/// The watcher's files ([`crate::store::WATCH_FILES`]) are removed from it:
/// they belong to the origin's running watcher.
pub(crate) fn snapshot_store(store: &Path, at: &Path) -> bool {
    let _t = crate::trace::span("store snapshot");
    let Ok(src) = ckpt_fs::fs::open_dir_path(store) else {
        return false;
    };
    if !btrfs::is_subvolume(src.as_fd()) || at.exists() {
        return false;
    }
    let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
        return false;
    };
    if !ensure_dir(parent) {
        return false;
    }
    let Ok(dir) = ckpt_fs::fs::open_dir_path(parent) else {
        return false;
    };
    if btrfs::snapshot(src.as_fd(), dir.as_fd(), name.as_bytes()).is_err() {
        return false;
    }
    for f in crate::store::WATCH_FILES {
        match std::fs::remove_file(at.join(f)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => {
                remove_tree(at);
                return false;
            }
        }
    }
    true
}

/// Makes the directory `dir` (and its parents) unless it is one already.
/// It looks first: a `mkdir` takes its parent directory's lock even when
/// the name exists, and btrfs holds that lock while it commits a snapshot
/// made in that directory, so a `mkdir` of the fork's store directory
/// beside a workspace snapshot being made would wait for that commit.
fn ensure_dir(dir: &Path) -> bool {
    dir.is_dir() || std::fs::create_dir_all(dir).is_ok()
}

/// The snapshots of a subvolume fork, taken at once: the workspace
/// `origin_root` at `staging` with the marker of `ws`, the fork
/// ([`snapshot_into`]) and, when `with_store`, the origin's store at
/// `store_at` ([`snapshot_store`]), while the origin's stat index is read
/// (the store lock, held by the caller, keeps it still, so it is the
/// snapshot's too: [`Index::at_snapshot`] checks). Each snapshot ends with
/// a btrfs transaction commit, most of its cost; taken at once, the two
/// share one when the second joins the transaction before the first
/// commits, and else overlap. Returns the workspace snapshot's outcome,
/// whether the store was snapshotted (left to the caller to undo), and the
/// index (used either way: taken at the store's snapshot, or device-mapped
/// into the fork's new store).
fn snapshot_all(
    store: &Store,
    origin_root: &Path,
    staging: &Path,
    ws: &Workspace,
    store_at: &Path,
    with_store: bool,
) -> (Result<()>, bool, Option<Index>) {
    if !with_store {
        return (snapshot_into(origin_root, staging, ws), false, None);
    }
    // The store's directory exists before either snapshot starts (see
    // `ensure_dir`), so that neither waits for the other.
    if let Some(parent) = store_at.parent() {
        ensure_dir(parent);
    }
    std::thread::scope(|s| {
        let st = s.spawn(|| snapshot_store(&store.root, store_at));
        let ix = s.spawn(|| store.load_index().ok());
        let snapped_ws = snapshot_into(origin_root, staging, ws);
        let snapped = joined(st);
        (snapped_ws, snapped, joined(ix))
    })
}

/// What the scoped thread `h` returned (its panic, passed on).
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Puts `staging`, whose marker is already `ws`'s, at `ws.root` with one
/// `rename` and, when `durable`, makes that durable.
fn publish(staging: &Path, ws: &Workspace, durable: bool) -> Result<()> {
    std::fs::rename(staging, &ws.root).ctx("rename", &ws.root)?;
    if durable {
        sync_parent(&ws.root)?;
    }
    Ok(())
}

/// `fsync`s the directory holding `path`, which makes a rename into it
/// durable.
pub(crate) fn sync_parent(path: &Path) -> Result<()> {
    path.parent().map_or(Ok(()), sync_dir)
}

/// `fsync`s the directory `dir`.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let d = ckpt_fs::fs::open_dir_path(dir).ctx("open", dir)?;
    rustix::fs::fsync(&d).ctx("fsync", dir)
}

/// The device number of the directory `p`.
pub(crate) fn dev_of(p: &Path) -> Result<u64> {
    let fd = ckpt_fs::fs::open_dir_path(p).ctx("open", p)?;
    Ok(ckpt_fs::fs::stat_fd(fd.as_fd()).ctx("stat", p)?.dev)
}

/// Gives `fork_store`, a snapshot of the store whose stat index describes
/// the tree on device `from`, the index of that tree's snapshot on device
/// `to`: the same index read through a device map, written as a small
/// delta against the snapshotted base file ([`Index::remap_dev`]), tree
/// hashes and exact-names claims kept (the store holds every tree; a
/// snapshot keeps every directory's stat, see [`inherit::snapshot_index`]
/// for why the entries stay true); or, when the map cannot be composed, the
/// same index rewritten whole.
///
/// [`Index::remap_dev`]: crate::store::index::Index::remap_dev
///
/// `known`, when given, is the snapshotted store's index as already read
/// (the origin's, or the template's): used instead of reading the fork's
/// copy when that copy holds the same bytes ([`Index::at_snapshot`]).
pub(crate) fn snapshot_store_index(
    fork_store: &Store,
    from: u64,
    to: u64,
    known: Option<&Index>,
) -> Result<Index> {
    let _t = crate::trace::span("snapshot index");
    let mut ix = match known.and_then(|k| k.at_snapshot(&fork_store.index_path())) {
        Some(ix) => ix,
        None => fork_store.load_index()?,
    };
    if !ix.remap_dev(from, to) {
        let g = ix.generation;
        ix = inherit::snapshot_index(&ix, from, to, g, true);
    }
    ix.save(&fork_store.index_path())?;
    Ok(ix)
}

/// Whether [`clone_fork`] can copy the fork `template`: its store is a
/// btrfs subvolume outside it.
pub fn can_clone(template: &Workspace) -> bool {
    !template.store_path.starts_with(&template.root)
        && ckpt_fs::fs::open_dir_path(&template.store_path)
            .is_ok_and(|fd| btrfs::is_subvolume(fd.as_fd()))
}

/// Makes the new or empty directory `dest` another fork equal to the
/// subvolume fork `template` (`ckpt fork --count N`: the template is made
/// once, then copied N times), with two snapshots and no scan: its files
/// are a snapshot of the template's, its store a snapshot of the
/// template's store ([`can_clone`]), made this fork's in one catalog
/// transaction, and its stat index is the template's with the device
/// number replaced, tree hashes kept (both stores hold the same trees).
/// `head` and `origin` are the template store's, read once by the caller,
/// which holds that store's lock for all the copies (several may be made
/// at once: each touches only its own `dest` and store).
///
/// Why no scan is needed: the template is a hidden directory that only
/// this process knows, and it is exactly its head checkpoint with an index
/// written by the restore that made it so; a snapshot keeps every inode's
/// number, mode, size, mtime and ctime (see [`inherit::snapshot_index`]).
/// All or nothing as [`fork`]: built in staging snapshots, published by
/// [`StagedCopy::publish`]. `known` is the template store's index, as the
/// template's restore left it in memory (or read once by the caller): each
/// copy writes its one delta from it ([`Index::save_snapshot_delta`]: the
/// device map, and the records changed since the base with their devices
/// replaced) without copying it, else takes the general way
/// ([`snapshot_store_index`]).
///
/// Two steps, so that a caller making several copies at once can finish
/// every copy's store before it publishes any: renaming a subvolume (both
/// steps of a publish do) makes every later fsync of the same btrfs
/// transaction a whole commit, and the stores' catalog commits would pay
/// for one each.
pub fn clone_fork(
    template: &Workspace,
    head: &Checkpoint,
    origin: &Origin,
    dest: &Path,
    config: &Config,
    known: Option<&Index>,
) -> Result<StagedCopy> {
    let missing = materialize::check_fresh(dest, "a fork")?;
    let ws = Workspace::plan(dest, None, config.data_home.as_deref())?;
    // The store's staging directory is named after the fork, not after
    // its store (whose name is new each time), so that the next fork of
    // the same name removes one a crash left.
    let store_twin = ws
        .store_path
        .with_file_name(ws.root.file_name().unwrap_or_default());
    remove_dead_siblings(&ws.root, "ckpt-fork");
    remove_dead_siblings(&store_twin, "ckpt-fork");
    if ws.store_path.starts_with(&ws.root) || ws.store_path.exists() {
        return Err(Error::Usage(format!(
            "{} cannot be the store of a copied fork: it exists or is inside the fork (nothing was changed)",
            ws.store_path.display()
        )));
    }
    // Each snapshot is made in a directory of its own and renamed into
    // place: btrfs holds a directory's lock while it commits a snapshot
    // made in it, so the copies' snapshots, all beside one another, would
    // commit one by one instead of together.
    let pid = std::process::id();
    let made = StagedCopy {
        tree_dir: hidden_sibling(&ws.root, "ckpt-fork", pid)?,
        store_dir: hidden_sibling(&store_twin, "ckpt-fork", pid)?,
        ws,
        missing,
        head: head.clone(),
    };
    let (staging, store_staging) = (made.staging(), made.store_staging());
    let run = || -> Result<()> {
        std::fs::create_dir(&made.tree_dir).ctx("create", &made.tree_dir)?;
        // Both at once, so that their commits overlap (`snapshot_all`).
        let (snapped, store_snapped) = std::thread::scope(|s| {
            let st = s.spawn(|| snapshot_store(&template.store_path, &store_staging));
            (
                snapshot_into(&template.root, &staging, &made.ws),
                joined(st),
            )
        });
        if !store_snapped {
            return Err(Error::io(
                "btrfs snapshot of the store",
                &template.store_path,
                std::io::Error::other(format!(
                    "refused, or {} is on another filesystem",
                    made.ws.store_path.display()
                )),
            ));
        }
        snapped?;
        let fork_store = Store::open_unsynced(&store_staging, config)?;
        fork_store
            .catalog
            .start_fork(&made.ws.root, origin, head.seq)?;
        let (from, to) = (dev_of(&template.root)?, dev_of(&staging)?);
        let written = match known {
            Some(k) => {
                let _t = crate::trace::span("snapshot delta");
                k.save_snapshot_delta(&fork_store.index_path(), from, to)?
            }
            None => false,
        };
        if !written {
            snapshot_store_index(&fork_store, from, to, known)?;
        }
        fork_store.close()
    };
    match run() {
        Ok(()) => Ok(made),
        Err(e) => {
            made.undo();
            Err(e)
        }
    }
}

/// A copy of a `fork --count` template made by [`clone_fork`], its
/// workspace and store still in their staging directories.
pub struct StagedCopy {
    ws: Workspace,
    /// `.<name>.ckpt-fork.<pid>` beside the fork, holding its snapshot `tree`.
    tree_dir: PathBuf,
    /// `.<name>.ckpt-fork.<pid>` beside its store, holding the store's
    /// snapshot `store`.
    store_dir: PathBuf,
    missing: bool,
    head: Checkpoint,
}

impl StagedCopy {
    fn staging(&self) -> PathBuf {
        self.tree_dir.join("tree")
    }

    fn store_staging(&self) -> PathBuf {
        self.store_dir.join("store")
    }

    fn undo(&self) {
        remove_tree(&self.ws.store_path);
        remove_tree(&self.store_dir);
        remove_tree(&self.tree_dir);
        if self.missing {
            let _ = std::fs::remove_dir(&self.ws.root);
        }
    }

    /// Puts the store, then the workspace, in place ([`publish`]), not
    /// yet durably: the caller then calls [`sync_dir`] once for each
    /// directory that holds a published fork or its store. One such
    /// `fsync` after all the renames commits them all: renaming a
    /// subvolume makes the next `fsync` a whole btrfs commit, so one per
    /// copy would commit again and again.
    pub fn publish(self) -> Result<Forked> {
        let ws = &self.ws;
        let run = || -> Result<()> {
            std::fs::rename(self.store_staging(), &ws.store_path).ctx("rename", &ws.store_path)?;
            let _ = std::fs::remove_dir(&self.store_dir);
            publish(&self.staging(), ws, false)?;
            let _ = std::fs::remove_dir(&self.tree_dir);
            Ok(())
        };
        if let Err(e) = run() {
            self.undo();
            return Err(e);
        }
        Ok(Forked {
            report: MaterializeReport {
                target: self.head.clone(),
                files: 0,
                dirs: 0,
                bytes: 0,
            },
            workspace: self.ws.clone(),
            objects: Imported::default(),
            store_snapshot: true,
            backend: Backend::BtrfsSubvolume,
            restored: Some(SnapshotRestore::default()),
            note: None,
            index: None,
        })
    }
}

/// What the restore inside a subvolume fork changed (a fork's `restored`;
/// its bytes are the fork's `bytes`).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, schemars::JsonSchema)]
pub struct SnapshotRestore {
    /// Files and symlinks written.
    pub written: u64,
    /// Entries removed.
    pub removed: u64,
    /// Bytes of the files written.
    #[serde(skip)]
    pub bytes: u64,
    /// The origin's live watcher vouched for every directory it did not
    /// name, so only those (and the records that do not claim every name)
    /// were scanned in the snapshot.
    pub watcher: bool,
}

/// Snapshots the workspace subvolume `origin_root` at `staging` (which must
/// not exist) and makes the marker there the fork `ws`'s, in place
/// ([`Workspace::write_marker_in_place`]): from then on the snapshot names
/// the fork's store, never the origin's. On an error nothing is left at
/// `staging`.
fn snapshot_into(origin_root: &Path, staging: &Path, ws: &Workspace) -> Result<()> {
    let _t = crate::trace::span("btrfs snapshot");
    let (Some(parent), Some(name)) = (staging.parent(), staging.file_name()) else {
        return Err(Error::Usage(format!(
            "{} cannot be forked into (nothing was changed)",
            staging.display()
        )));
    };
    let src = ckpt_fs::fs::open_dir_path(origin_root).ctx("open", origin_root)?;
    let dir = ckpt_fs::fs::open_dir_path(parent).ctx("open", parent)?;
    btrfs::snapshot(src.as_fd(), dir.as_fd(), name.as_bytes()).map_err(|e| {
        Error::io(
            "btrfs snapshot of the workspace to",
            staging,
            std::io::Error::from(e),
        )
    })?;
    ws.write_marker_in_place(staging).inspect_err(|_| {
        remove_tree(staging);
    })
}

/// Makes the snapshot at `staging` exactly checkpoint `rec` of `fork_store`
/// with an ordinary in-place restore (no pre-save: nothing there is
/// anyone's work). The snapshot starts from the parent's stat index with
/// the parent's device number replaced by the snapshot's: a snapshot keeps
/// every inode's number, size, mode, mtime and ctime, so an entry matches
/// exactly when the parent's would have matched the same file (a file
/// changed after the parent's last scan has another ctime and is hashed).
/// Tree hashes are carried over only when `store_snapshot` (the fork's
/// store is a snapshot of `store`, so it holds every tree they name); else
/// the fork's store holds only the checkpoint's trees, and every
/// directory's tree is recomputed from its entries, without reading files.
///
/// With a store snapshot, the scan covers only what `watcher_plan` names
/// when the origin's live watcher vouches (asked after the snapshot, so
/// every change made before it is among the directories it names; the
/// index is the origin's, which the watcher's answer is relative to, and
/// the origin's store lock, held throughout, keeps both from moving),
/// plus every directory whose record does not claim all its names: that
/// is where a nested workspace can be (a scan that skips one never claims
/// exact names), and the snapshot holds it, which the scanner must see to
/// remove. Otherwise every directory of the snapshot is scanned. `known`
/// is the origin's index when it was read during the snapshots. Returns
/// what changed and, with a store snapshot, the fork's index as written.
#[allow(clippy::too_many_arguments)]
fn restore_snapshot(
    store: &Store,
    origin_root: &Path,
    fork_store: &Store,
    staging: &Path,
    store_path: &Path,
    rec: &Checkpoint,
    store_snapshot: bool,
    known: Option<Index>,
    watcher_plan: &dyn Fn() -> ScanPlan,
) -> Result<(SnapshotRestore, Option<Index>)> {
    let (from, to) = (dev_of(origin_root)?, dev_of(staging)?);
    let mut plan = ScanPlan::Full;
    let mut loaded = None;
    if store_snapshot {
        let index = snapshot_store_index(fork_store, from, to, known.as_ref())?;
        // Asked after the snapshot: what changed before it is named.
        let t = crate::trace::span("watcher plan");
        let asked = watcher_plan();
        drop(t);
        if let ScanPlan::Partial(mut dirs) = asked {
            dirs.extend(
                index
                    .dirs
                    .iter()
                    .filter(|(_, r)| !r.exact_names)
                    .map(|(p, _)| p.clone()),
            );
            plan = ScanPlan::Partial(dirs);
        }
        loaded = Some(index);
    } else {
        let generation = fork_store.catalog.reader()?.generation()?;
        let origin_index = match known {
            Some(ix) => ix,
            None => store.load_index()?,
        };
        inherit::snapshot_index(&origin_index, from, to, generation, false)
            .save(&fork_store.index_path())?;
    }
    let ws = Workspace {
        root: staging.to_path_buf(),
        store_path: store_path.to_path_buf(),
    };
    let watcher = matches!(plan, ScanPlan::Partial(_));
    let mut scanner = SnapshotScanner {
        inner: OnDisk {
            loaded,
            ..OnDisk::new(plan)
        },
        root: staging,
        keep: store_snapshot,
        kept: None,
    };
    let rep = restore::restore(
        &ws,
        fork_store,
        &rec.id(),
        &RestoreJob {
            no_save: true,
            ..RestoreJob::default()
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
    let restored = SnapshotRestore {
        written: rep.written,
        removed: rep.removed,
        bytes,
        watcher,
    };
    Ok((restored, scanner.kept))
}

/// The scanner of the restore inside a snapshot: a workspace nested in the
/// parent (a subdirectory holding its own `.ckpt` marker) came along in the
/// snapshot, and a restore never touches one; it is not part of the
/// checkpoint and its marker names another store, so it is removed from
/// the snapshot and the snapshot scanned again.
struct SnapshotScanner<'a> {
    inner: OnDisk,
    root: &'a Path,
    /// Whether to hand the index the restore keeps to the caller (`kept`),
    /// once written, instead of freeing it.
    keep: bool,
    kept: Option<Index>,
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

    fn keep_index(&mut self, store: &Store, mut scan: ScanResult) -> Result<()> {
        if !self.keep {
            return self.inner.keep_index(store, scan);
        }
        crate::engine::scanner::save_index(store, &mut scan)?;
        self.kept = Some(scan.index);
        Ok(())
    }
}

/// Removes the directory tree at `path`: one subvolume delete when it is a
/// btrfs subvolume and that is permitted, else file by file, after one
/// subvolume delete for each subvolume directly inside it (a fork's
/// staging directory holds its snapshots: [`Staged`]). Best effort
/// (callers check what is left when it matters); returns a note when a
/// subvolume had to be removed file by file.
pub fn remove_tree(path: &Path) -> Option<String> {
    let Ok(fd) = ckpt_fs::fs::open_dir_path(path) else {
        return None;
    };
    let is_subvol = btrfs::is_subvolume(fd.as_fd());
    if !is_subvol {
        if let Ok(rd) = std::fs::read_dir(path) {
            for e in rd.flatten() {
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir())
                    && ckpt_fs::fs::open_dir_path(&p)
                        .is_ok_and(|fd| btrfs::is_subvolume(fd.as_fd()))
                {
                    remove_tree(&p);
                }
            }
        }
    }
    if is_subvol {
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            let r = ckpt_fs::fs::open_dir_path(parent)
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
