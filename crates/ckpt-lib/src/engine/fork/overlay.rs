//! Overlay forks (docs/FORK.md, "overlayfs"): the fork's directory is an
//! overlayfs mount of a read-only **lower** layer, the checkpoint
//! materialised once in the origin's store and shared by every overlay
//! fork of it, and the fork's own **upper** layer, where every change made
//! in the fork lands.
//!
//! On disk (docs/FORMAT.md):
//! - the lower: `<origin store>/lowers/<root tree>/tree`, written by the
//!   restore engine (every object verified as it is written, reflinks
//!   where the store's filesystem has them) into a hidden staging
//!   directory that one `rename` puts in place, so a lower is never seen
//!   half written; beside `tree`, `users/` holds one file per fork using it
//!   (the fork's store and upper directory), and `index` the stat index of
//!   `tree`, which each fork's store starts with ([`lower_index`]);
//! - the fork's layers: `.<name>.ckpt-overlay/{upper,work}` beside the
//!   fork's directory `<name>` (same filesystem), built in the staging
//!   directory `.<name>.ckpt-fork.<pid>` and renamed into place once
//!   complete, the `.ckpt` marker in `upper/` (so it is seen only through
//!   the mount: the bare mount point is never mistaken for the workspace);
//! - the fork's store, as for any fork (it starts at the checkpoint, its
//!   objects hard-linked; a snapshot of the origin's store when that is a
//!   btrfs subvolume, as for a subvolume fork, with the checkpoint's agent
//!   state made its latest), with meta `overlay` naming the layers.
//!
//! Why no fork can change another's files or the origin's store: overlayfs
//! never writes a lower layer (a write copies the file up into the
//! writer's upper first), each fork has its own upper and work
//! directories, and no ckpt code opens a lower's files for writing.
//!
//! The stat index: the fork's index is built from the lower's own `lstat`s
//! ([`inherit::inherited_index`]; the lower was written from verified
//! objects), once per lower, and copied for each later fork ([`lower_index`]). overlayfs, when every layer is on one filesystem, reports a
//! lower file with the lower's inode number, size, mode and times, and the
//! mount's device number; a file copied up keeps its inode number and gets
//! the upper file's ctime. So at each mount the index is read through a
//! device map from the device its entries were taken on to the mount's
//! ([`mount`]): an entry matches exactly when the file is still the one
//! indexed. Layers on different filesystems get no map (overlayfs then
//! reports other device numbers), and the first save hashes every file.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use crate::engine::fork::backend::Backend;
use crate::engine::fork::inherit;
use crate::engine::fork::{self, Forked};
use crate::engine::materialize::{self, MaterializeOptions, MaterializeReport};
use crate::error::IoContext;
use crate::platform::overlay::{self as ovl, Layers, Prepared};
use crate::store::catalog::{Checkpoint, Origin, OverlayLayers};
use crate::store::objects::Imported;
use crate::store::Store;
use crate::workspace::{marker_names, Workspace};
use crate::{Config, Error, Result};

/// The directory of the origin store's lowers.
pub const LOWERS: &str = "lowers";

/// The lower directory of the checkpoint tree `root` in the store at
/// `store_root` (the layer itself is its `tree`).
pub fn lower_dir(store_root: &Path, root: &crate::Hash) -> PathBuf {
    store_root.join(LOWERS).join(root.to_hex())
}

/// The hidden directory beside the fork `root` that holds its upper and
/// work directories: `.<name>.ckpt-overlay`.
pub fn layers_dir(root: &Path) -> Result<PathBuf> {
    fork::hidden_beside(root, ".ckpt-overlay")
}

/// Makes (once) the lower of checkpoint `cp` in `store`, under `store`'s
/// lock (the caller's): returns its directory and, when this call wrote
/// it, what was written.
fn ensure_lower(
    store: &Store,
    cp: &Checkpoint,
    opts: MaterializeOptions<'_>,
) -> Result<(PathBuf, Option<MaterializeReport>)> {
    let dir = lower_dir(&store.root, &cp.root);
    if dir.is_dir() {
        return Ok((dir, None));
    }
    let lowers = store.root.join(LOWERS);
    std::fs::create_dir_all(&lowers).ctx("create", &lowers)?;
    fork::remove_dead_siblings(&dir, "ckpt-lower");
    let staging = fork::hidden_sibling(&dir, "ckpt-lower", std::process::id())?;
    let run = || -> Result<MaterializeReport> {
        std::fs::create_dir(&staging).ctx("create", &staging)?;
        let users = staging.join("users");
        std::fs::create_dir(&users).ctx("create", &users)?;
        let rep = materialize::restore_to_with(store, &cp.id(), &staging.join("tree"), &[], opts)?;
        // The layer is durable before its name is.
        let fd = ckpt_fs::fs::open_dir_path(&staging).ctx("open", &staging)?;
        rustix::fs::syncfs(&fd).ctx("syncfs", &staging)?;
        ckpt_fault::point("overlay.before_lower_rename");
        std::fs::rename(&staging, &dir).ctx("rename", &dir)?;
        let l = ckpt_fs::fs::open_dir_path(&lowers).ctx("open", &lowers)?;
        rustix::fs::fsync(&l).ctx("fsync", &lowers)?;
        Ok(rep)
    };
    match run() {
        Ok(rep) => Ok((dir, Some(rep))),
        Err(e) => {
            fork::remove_tree(&staging);
            Err(e)
        }
    }
}

/// The file in `lower`'s `users/` naming the fork whose store is `store`.
fn user_file(lower: &Path, store: &Path) -> PathBuf {
    let h = blake3::hash(store.as_os_str().as_encoded_bytes());
    lower.join("users").join(h.to_hex().as_str())
}

/// The content of a user file: the fork's store and upper directory.
#[derive(serde::Serialize, serde::Deserialize)]
struct User {
    store: PathBuf,
    upper: PathBuf,
}

/// Whether some fork still uses `lower`: a user file whose upper
/// directory's marker names its store (a file left by a fork that never
/// got published, or whose layers are gone, does not count).
fn in_use(lower: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(lower.join("users")) else {
        return false;
    };
    rd.flatten().any(|e| {
        std::fs::read(e.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<User>(&b).ok())
            .is_some_and(|u| marker_names(&u.upper, &u.store))
    })
}

/// Makes the new or empty directory `dest` an overlay fork of checkpoint
/// `rev` of `store` (the workspace at `origin_root`), its store at
/// `new_store` or by the usual rule; not mounted yet ([`mount`] mounts
/// it). All or nothing: the layers are built in a staging directory, the
/// fork's store is made and filled, and one `rename` of the staging
/// directory to the layers' place publishes the fork; on an error
/// everything made is removed (a lower made for it stays: it is complete,
/// and the next fork of the checkpoint uses it).
pub fn fork(
    store: &Store,
    origin_root: &Path,
    rev: &str,
    dest: &Path,
    new_store: Option<&Path>,
    config: &Config,
    opts: MaterializeOptions<'_>,
) -> Result<(Forked, ForkedOverlay)> {
    let missing = materialize::check_fresh(dest, "a fork")?;
    let cp = store.catalog.reader()?.resolve(rev)?;
    let ws = Workspace::plan(dest, new_store, config.data_home.as_deref())?;
    fork_into(store, origin_root, &cp, &ws, missing, config, opts).inspect_err(|_| {
        if missing {
            let _ = std::fs::remove_dir(&ws.root);
        }
    })
}

fn fork_into(
    store: &Store,
    origin_root: &Path,
    cp: &Checkpoint,
    ws: &Workspace,
    missing: bool,
    config: &Config,
    opts: MaterializeOptions<'_>,
) -> Result<(Forked, ForkedOverlay)> {
    if ws.store_path.starts_with(&ws.root) {
        return Err(Error::Usage(format!(
            "an overlay fork's store cannot be inside the fork ({}); give --store outside it (nothing was changed)",
            ws.store_path.display()
        )));
    }
    let layers = layers_dir(&ws.root)?;
    if layers.exists() {
        return Err(Error::Usage(format!(
            "{} exists (the layers of an earlier overlay fork into {}?); remove it first (nothing was changed)",
            layers.display(),
            ws.root.display()
        )));
    }
    fork::remove_dead_siblings(&ws.root, "ckpt-fork");
    let staging = fork::hidden_sibling(&ws.root, "ckpt-fork", std::process::id())?;
    let store_made = !ws.store_path.exists();
    let (lower, written) = ensure_lower(store, cp, opts)?;
    let user = user_file(&lower, &ws.store_path);
    let undo = || {
        let _ = std::fs::remove_file(&user);
        if store_made {
            fork::remove_tree(&ws.store_path);
        }
        fork::remove_tree(&staging);
        if missing {
            let _ = std::fs::remove_dir(&ws.root);
        }
    };
    let run = || -> Result<(Forked, ForkedOverlay)> {
        for d in [&staging, &staging.join("upper"), &staging.join("work")] {
            std::fs::create_dir(d).ctx("create", d)?;
        }
        // A snapshot of our store when it is a btrfs subvolume (as for a
        // subvolume fork): hard links cannot cross subvolumes, and copying
        // every object took seconds.
        let snapshot = fork::snapshot_store(&store.root, &ws.store_path);
        if !snapshot {
            Store::create_for(&ws.store_path, Some(&staging))?;
        }
        let fork_store = Store::open(&ws.store_path, config)?;
        let origin = Origin {
            workspace: origin_root.to_path_buf(),
            store: store.root.clone(),
            checkpoint: cp.seq,
            root: cp.root,
        };
        let (rec, objects) = if snapshot {
            let _t = crate::trace::span("start fork");
            fork_store.catalog.start_fork(&ws.root, &origin, cp.seq)?;
            inherit::reset_state(&fork_store, cp)?;
            (cp.clone(), Imported::default())
        } else {
            fork::start_store(store, cp, &fork_store, &ws.root, &origin)?
        };
        let tree = lower.join("tree");
        lower_index(&lower, &fork_store, &rec)?;
        fork_store.catalog.set_overlay(&OverlayLayers {
            lower: tree.clone(),
            upper: layers.join("upper"),
            work: layers.join("work"),
            dev: fork::dev_of(&tree)?,
        })?;
        drop(fork_store);
        let u = User {
            store: ws.store_path.clone(),
            upper: layers.join("upper"),
        };
        std::fs::write(&user, serde_json::to_vec(&u).expect("serialisable")).ctx("write", &user)?;
        Workspace {
            root: staging.join("upper"),
            store_path: ws.store_path.clone(),
        }
        .write_marker()?;
        let fd = ckpt_fs::fs::open_dir_path(&staging).ctx("open", &staging)?;
        rustix::fs::syncfs(&fd).ctx("syncfs", &staging)?;
        ckpt_fault::point("overlay.before_publish");
        std::fs::rename(&staging, &layers).ctx("rename", &layers)?;
        fork::sync_parent(&layers)?;
        Ok((
            Forked {
                report: written.clone().unwrap_or(MaterializeReport {
                    target: cp.clone(),
                    files: 0,
                    dirs: 0,
                    bytes: 0,
                }),
                workspace: ws.clone(),
                objects,
                store_snapshot: snapshot,
                backend: Backend::Overlay,
                restored: None,
                note: None,
                index: None,
            },
            ForkedOverlay {
                lower: lower.clone(),
                lower_made: written.is_some(),
            },
        ))
    };
    run().inspect_err(|_| undo())
}

/// Gives the new overlay fork store `fork_store` (at checkpoint `rec`) the
/// stat index of `lower`'s tree: a copy of the lower's `index` when it has
/// one, else built from the tree's own `lstat`s
/// ([`inherit::inherited_index`]) and kept as the lower's `index` for the
/// next fork (temp + rename; the caller holds the origin store's lock,
/// which every writer of a lower holds).
///
/// Why a copy is right: the lower is never written after its rename into
/// place (module doc), so its files keep the inode numbers, sizes, modes
/// and times the index recorded; the index is of the same tree (the lower
/// is named by it); and a fork's new store has the generation the index
/// was built for ([`Index::load`] takes a stale one for empty, which only
/// costs hashing).
///
/// [`Index::load`]: crate::store::index::Index::load
fn lower_index(lower: &Path, fork_store: &Store, rec: &Checkpoint) -> Result<()> {
    let _t = crate::trace::span("lower index");
    let kept = lower.join(LOWER_INDEX);
    let path = fork_store.index_path();
    // A store snapshot holds our index's delta, which is not of this base.
    let delta = crate::store::index::delta_path(&path);
    match std::fs::remove_file(&delta) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", &delta, e)),
    }
    match std::fs::copy(&kept, &path) {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("copy", &kept, e)),
    }
    let reader = fork_store.catalog.reader()?;
    let mut index =
        inherit::inherited_index(&lower.join("tree"), &reader, rec.root, reader.generation()?)?;
    index.save(&path)?;
    // Best effort: without it the next fork builds it again.
    let tmp = lower.join(".index.tmp");
    if std::fs::copy(&path, &tmp).is_ok() && std::fs::rename(&tmp, &kept).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(())
}

/// The stat index kept beside a lower's `tree` ([`lower_index`]).
const LOWER_INDEX: &str = "index";

/// The lower an overlay fork uses, and whether this fork made it.
#[derive(Clone, Debug)]
pub struct ForkedOverlay {
    /// The lower directory (`lowers/<root tree>` of the origin's store).
    pub lower: PathBuf,
    /// This fork wrote it (else an earlier fork of the same tree had).
    pub lower_made: bool,
}

/// What [`mount`] did.
#[derive(Debug)]
pub struct Mounted {
    /// The layers mounted.
    pub layers: OverlayLayers,
    /// The mount's device number.
    pub dev: u64,
    /// The stat index was carried over to it through a device map (false:
    /// layers on different filesystems, the first save hashes every file).
    pub index_mapped: bool,
    /// With a command: how it exited (the mount is gone).
    pub status: Option<ExitStatus>,
}

/// The overlay fork whose store is at `store_path`: its layers.
pub fn layers_of(store_path: &Path, config: &Config) -> Result<OverlayLayers> {
    let s = Store::open_read_only(store_path, config)?;
    let layers = s.catalog.reader()?.overlay()?;
    layers.ok_or_else(|| {
        Error::Usage(format!(
            "the store {} is not an overlay fork's (nothing was changed)",
            store_path.display()
        ))
    })
}

/// Mounts the overlay fork `root` (store `store_path`): with `command`
/// none, in this mount namespace (root only; it lasts until `fork
/// --remove` or a reboot), else in a new namespace where `command` then
/// runs (see [`ovl::spawn_in_namespace`]; this returns when it exits, and
/// the mount is gone). The fork's stat index is carried to the new mount's
/// device before anything can run in it (see the module doc).
pub fn mount(
    root: &Path,
    store_path: &Path,
    config: &Config,
    command: Option<&mut Command>,
) -> Result<Mounted> {
    let layers = layers_of(store_path, config)?;
    if command.is_none() && ovl::is_overlay(root) {
        return Err(Error::Usage(format!(
            "{} is mounted already (nothing was changed)",
            root.display()
        )));
    }
    let samefs = fork::dev_of(&layers.lower)? == fork::dev_of(&layers.upper)?;
    let l = Layers {
        lower: layers.lower.clone(),
        upper: layers.upper.clone(),
        work: layers.work.clone(),
    };
    let userxattr = command.is_some() && !ovl::is_root();
    let prepared = Prepared::new(&l, root, userxattr).ctx("mount overlay at", root)?;
    let carry = |dev: u64| -> Result<bool> {
        if !samefs {
            return Ok(false);
        }
        let s = Store::open(store_path, config)?;
        fork::snapshot_store_index(&s, layers.dev, dev, None)?;
        s.catalog.set_overlay(&OverlayLayers {
            dev,
            ..layers.clone()
        })?;
        Ok(true)
    };
    let mounted = |dev, index_mapped, status| Mounted {
        layers: layers.clone(),
        dev,
        index_mapped,
        status,
    };
    match command {
        None => {
            ckpt_fault::point("overlay.before_mount");
            prepared.mount().map_err(|e| mount_error(root, e))?;
            let after = || -> Result<(u64, bool)> {
                let dev = fork::dev_of(root)?;
                Ok((dev, carry(dev)?))
            };
            match after() {
                Ok((dev, mapped)) => Ok(mounted(dev, mapped, None)),
                Err(e) => {
                    let _ = ovl::unmount_at(root);
                    Err(e)
                }
            }
        }
        Some(cmd) => {
            let mut result = None;
            let mut hook = |dev: u64| match carry(dev) {
                Ok(m) => {
                    result = Some((dev, m));
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            };
            let program = cmd.get_program().to_string_lossy().into_owned();
            let spawned = ovl::spawn_in_namespace(prepared, cmd, &mut hook);
            let mut child = match spawned {
                Ok(c) => c,
                // Mounted, so it was the command that could not start.
                Err(e) if result.is_some() => {
                    return Err(Error::Usage(format!(
                        "cannot start {program:?} over the overlay fork {}: {e}",
                        root.display()
                    )))
                }
                Err(e) => return Err(mount_error(root, e)),
            };
            let status = child.wait().ctx("wait for the command in", root)?;
            let (dev, mapped) = result.unwrap_or((0, false));
            Ok(mounted(dev, mapped, Some(status)))
        }
    }
}

fn mount_error(root: &Path, e: std::io::Error) -> Error {
    Error::Usage(format!(
        "cannot mount the overlay fork at {}: {e}\n  `ckpt doctor` says whether overlay mounts work here (as root, and in a user namespace)",
        root.display()
    ))
}

/// What [`remove`] did beyond removing the fork's store.
#[derive(Clone, Debug)]
pub struct RemovedOverlay {
    /// The fork was mounted here and was unmounted.
    pub unmounted: bool,
    /// Its lower.
    pub lower: PathBuf,
    /// No fork uses that lower any more, so it was removed.
    pub lower_removed: bool,
}

/// The first step of removing the overlay fork `root`: unmounts it when
/// it is mounted here (refused, nothing changed, while a process uses
/// it); returns whether it was.
pub fn unmount_for_remove(root: &Path) -> Result<bool> {
    if !ovl::is_overlay(root) {
        return Ok(false);
    }
    ovl::unmount_at(root).map_err(|e| {
        Error::Usage(format!(
            "cannot unmount the overlay fork {}: {e} (a process may be using it: stop it and run again; nothing was changed)",
            root.display()
        ))
    })?;
    Ok(true)
}

/// The second step of removing an overlay fork (store `store_path`): its
/// upper and work directories, and its lower when no fork uses it any
/// more (the caller holds the origin store's lock, so no fork of the same
/// checkpoint is being made meanwhile).
pub fn remove_layers(layers: &OverlayLayers, store_path: &Path) -> Result<RemovedOverlay> {
    let lower = layers.lower.parent().unwrap_or(&layers.lower).to_path_buf();
    if let Some(dir) = layers.upper.parent() {
        // overlayfs leaves `work/work` with mode 000.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(
            layers.work.join("work"),
            std::fs::Permissions::from_mode(0o700),
        );
        fork::remove_tree(dir);
        if dir.exists() {
            return Err(Error::io(
                "remove",
                dir,
                std::io::Error::other("some files could not be removed"),
            ));
        }
    }
    let _ = std::fs::remove_file(user_file(&lower, store_path));
    let mut lower_removed = false;
    if lower.is_dir() && !in_use(&lower) {
        // Hidden first, so no fork starts on a half-removed lower.
        let hidden = fork::hidden_sibling(&lower, "ckpt-remove", std::process::id())?;
        std::fs::rename(&lower, &hidden).ctx("rename", &lower)?;
        fork::remove_tree(&hidden);
        lower_removed = true;
    }
    Ok(RemovedOverlay {
        unmounted: false,
        lower,
        lower_removed,
    })
}
