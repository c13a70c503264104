//! `ckpt forks` (every fork of this workspace: where, its latest
//! checkpoint, how far it has diverged) and `ckpt fork --remove DIR`.
//!
//! A fork is found through its store: `ckpt fork` records the fork's store
//! in the machine's list of stores ([`crate::workspace::known`]) and its
//! origin in the store's catalog (meta `origin`: this workspace, this
//! store, the checkpoint forked). The listing opens each known store
//! read-only, waiting at most [`super::stores::BUSY_WAIT`] for its lock, as
//! `ckpt stores` does. Divergence is measured between the origin checkpoint
//! and the fork's latest checkpoint, both in the fork's store (it holds its
//! origin's trees), so the fork's files are not scanned.
//!
//! An overlay fork (docs/FORK.md, "overlayfs") is listed whether or not it
//! is mounted (after a reboot it is not: its directory is then an empty
//! mount point and its marker is in its upper layer); `ckpt fork --mount
//! DIR` ([`mount`]) mounts it again, and `ckpt fork --remove` unmounts it
//! first.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{self as j, CheckpointForm, Schema};
use super::stores::{self, Attachment, StoresOptions, BUSY_WAIT};
use super::Context;
use crate::engine::diff::{self, PathFilter, TreeSource};
use crate::engine::fork::overlay::{self, RemovedOverlay};
use crate::error::IoContext;
use crate::store::catalog::{ChangeStats, Checkpoint, Origin, OverlayLayers};
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{Error, Result};

/// One fork of this workspace. JSON: `dir`, `store`, `origin` (`v…` in
/// this workspace's store), `latest` (a checkpoint object of the fork's
/// store), `diverged` (`files_added`, `files_modified`, `files_deleted`,
/// `bytes_added`, `bytes_modified`, `bytes_deleted`), `overlay` (an overlay
/// fork: `lower`, `upper`, `mounted`; else null).
#[derive(Clone, Debug)]
pub struct ForkInfo {
    /// The fork's workspace root.
    pub root: PathBuf,
    /// Its store.
    pub store: PathBuf,
    /// Where it came from.
    pub origin: Origin,
    /// Its newest checkpoint and head.
    pub latest: Option<Checkpoint>,
    /// Its head checkpoint number.
    pub head: Option<u64>,
    /// From the origin checkpoint to `latest`.
    pub diverged: ChangeStats,
    /// An overlay fork: its layers, and whether it is mounted here.
    pub overlay: Option<(OverlayLayers, bool)>,
}

/// The JSON of a [`ForkInfo`] (its `latest` needs its `head`).
#[derive(Serialize, JsonSchema)]
struct ForkInfoForm<'a> {
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    dir: &'a Path,
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    store: &'a Path,
    origin: String,
    latest: Option<CheckpointForm<'a>>,
    diverged: &'a ChangeStats,
    overlay: Option<LayersForm<'a>>,
}

/// An overlay fork's layers in a listing.
#[derive(Serialize, JsonSchema)]
struct LayersForm<'a> {
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    lower: &'a Path,
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    upper: &'a Path,
    mounted: bool,
}

impl Serialize for ForkInfo {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ForkInfoForm {
            dir: &self.root,
            store: &self.store,
            origin: format!("v{}", self.origin.checkpoint),
            latest: self
                .latest
                .as_ref()
                .map(|c| CheckpointForm::new(c, self.head)),
            diverged: &self.diverged,
            overlay: self.overlay.as_ref().map(|(l, mounted)| LayersForm {
                lower: &l.lower,
                upper: &l.upper,
                mounted: *mounted,
            }),
        }
        .serialize(s)
    }
}

j::schema_via!(ForkInfo => ForkInfoForm<'static>);

/// What [`forks`] found. JSON: `workspace`, `forks` (each a [`ForkInfo`]).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ForksReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// This workspace.
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    pub workspace: PathBuf,
    /// Its forks, by directory.
    pub forks: Vec<ForkInfo>,
}

/// Lists this workspace's forks (see the module doc).
pub fn forks(ctx: &Context) -> Result<ForksReport> {
    let ws = ctx.workspace()?;
    let mut config = ctx.config.clone();
    config.lock_timeout = config.lock_timeout.min(BUSY_WAIT);
    let mut found = Vec::new();
    for s in stores::stores(ctx, &StoresOptions::default())?.stores {
        if s.path == ws.store_path {
            continue;
        }
        let attached = s.attachment == Attachment::Attached;
        let Some(root) = s.workspace else { continue };
        if let Ok(Some(info)) = describe(&s.path, root, &ws, &config, attached) {
            found.push(info);
        }
    }
    found.sort_by(|a, b| a.root.cmp(&b.root));
    Ok(ForksReport {
        schema: Schema,
        workspace: ws.root,
        forks: found,
    })
}

/// The fork whose store is at `path` and whose workspace is `root`, when
/// it is a fork of `ws` and is there: `attached` (its directory's marker
/// names the store), or an overlay fork whose upper layer's marker does
/// (mounted or not).
fn describe(
    path: &Path,
    root: PathBuf,
    ws: &Workspace,
    config: &crate::Config,
    attached: bool,
) -> Result<Option<ForkInfo>> {
    let store = Store::open_read_only(path, config)?;
    let r = store.catalog.reader()?;
    let Some(origin) = r.origin()? else {
        return Ok(None);
    };
    if origin.workspace != ws.root {
        return Ok(None);
    }
    let overlay = r
        .overlay()?
        .filter(|l| crate::workspace::marker_names(&l.upper, path));
    if !attached && overlay.is_none() {
        return Ok(None);
    }
    let overlay = overlay.map(|l| (l, attached && crate::platform::overlay::is_overlay(&root)));
    let latest = r.checkpoints()?.into_iter().max_by_key(|c| c.seq);
    let diverged = match &latest {
        Some(cp) => {
            let src = TreeSource {
                fresh: None,
                catalog: &r,
            };
            let changes = diff::diff_trees(
                &src,
                Some(origin.root),
                Some(cp.root),
                &PathFilter::default(),
            )?;
            diff::stats(&changes)
        }
        None => ChangeStats::default(),
    };
    Ok(Some(ForkInfo {
        root,
        store: path.to_path_buf(),
        origin,
        head: r.head()?,
        latest,
        diverged,
        overlay,
    }))
}

/// Which fork [`remove`] removes.
#[derive(Clone, Debug, Default)]
pub struct RemoveOptions {
    /// The fork's directory (relative to the context's directory).
    pub dir: PathBuf,
}

/// What [`remove`] did. JSON: `removed` (the directory), `store`,
/// `subvolume`, `note`, `overlay` (an overlay fork: `unmounted`, `lower`,
/// `lower_removed`; else null), `elapsed_ms`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RemoveReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The fork's directory (gone).
    #[serde(rename = "removed", serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    pub dir: PathBuf,
    /// Its store (gone).
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    pub store: PathBuf,
    /// The fork was a btrfs subvolume, deleted as one.
    pub subvolume: bool,
    /// Why a subvolume was removed file by file instead, if it was.
    pub note: Option<String>,
    /// An overlay fork: what was unmounted and removed.
    #[serde(serialize_with = "removed_overlay")]
    #[schemars(with = "Option<RemovedOverlayForm<'static>>")]
    pub overlay: Option<RemovedOverlay>,
    /// How long it took.
    #[serde(rename = "elapsed_ms", serialize_with = "j::with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// What removing an overlay fork did.
#[derive(Serialize, schemars::JsonSchema)]
struct RemovedOverlayForm<'a> {
    unmounted: bool,
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    lower: &'a Path,
    lower_removed: bool,
}

/// An overlay fork's removal: `unmounted`, `lower`, `lower_removed`; or null.
fn removed_overlay<S: serde::Serializer>(
    o: &Option<RemovedOverlay>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    o.as_ref()
        .map(|o| RemovedOverlayForm {
            unmounted: o.unmounted,
            lower: &o.lower,
            lower_removed: o.lower_removed,
        })
        .serialize(s)
}

/// Removes the fork at `dir` (relative to the context's directory): its
/// files and its store. Refused, with nothing changed, unless `dir` is a
/// workspace whose store records this workspace as its origin.
///
/// The directory is first renamed to a hidden sibling, so it disappears
/// from its name at once (a crash later leaves only that hidden directory
/// and possibly the store, never a half-deleted fork under its name); then
/// the store is removed (under its lock), then the files: one subvolume
/// delete for a subvolume fork (file by file, with a note, when the
/// kernel refuses it: that needs root or `user_subvol_rm_allowed`).
pub fn remove(ctx: &Context, opts: &RemoveOptions) -> Result<RemoveReport> {
    let t0 = std::time::Instant::now();
    let dir = opts.dir.as_path();
    let ws = ctx.workspace()?;
    let (fork, overlay) = find(ctx, &ws, dir)?;
    if overlay {
        let o = remove_overlay(ctx, &ws, &fork.root, &fork.store_path)?;
        return Ok(RemoveReport {
            schema: Schema,
            dir: fork.root,
            store: fork.store_path,
            subvolume: false,
            note: None,
            overlay: Some(o),
            elapsed: t0.elapsed(),
        });
    }
    let (Some(parent), Some(name)) = (fork.root.parent(), fork.root.file_name()) else {
        return Err(Error::Usage(format!(
            "{} cannot be removed (nothing was changed)",
            fork.root.display()
        )));
    };
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(format!(".ckpt-remove.{}", std::process::id()));
    let hidden = parent.join(hidden);
    std::fs::rename(&fork.root, &hidden).ctx("rename", &fork.root)?;
    if !fork.store_path.starts_with(&fork.root) {
        // Under its lock, so no command of the fork is halfway through.
        // A store that is a snapshot of ours goes as one subvolume delete.
        let lock = Store::open_read_only(&fork.store_path, &ctx.config)?;
        crate::engine::fork::remove_tree(&fork.store_path);
        drop(lock);
        if fork.store_path.exists() {
            std::fs::remove_dir_all(&fork.store_path).ctx("remove", &fork.store_path)?;
        }
    }
    let subvolume = ckpt_fs::fs::open_dir_path(&hidden)
        .is_ok_and(|fd| crate::platform::btrfs::is_subvolume(std::os::fd::AsFd::as_fd(&fd)));
    let note = crate::engine::fork::remove_tree(&hidden);
    if hidden.exists() {
        return Err(Error::io(
            "remove",
            &hidden,
            std::io::Error::other("some files could not be removed"),
        ));
    }
    Ok(RemoveReport {
        schema: Schema,
        dir: fork.root,
        store: fork.store_path,
        subvolume: subvolume && note.is_none(),
        note,
        overlay: None,
        elapsed: t0.elapsed(),
    })
}

/// The fork of `ws` at `dir` (relative to the context's directory), and
/// whether it is an overlay fork: a workspace there whose store records
/// `ws` as its origin, or an overlay fork of `ws` whose mount is gone
/// (found through the machine's list of stores). Refused, nothing
/// changed, otherwise.
fn find(ctx: &Context, ws: &Workspace, dir: &Path) -> Result<(Workspace, bool)> {
    let not_a_fork = |d: &Path| {
        Error::Usage(format!(
            "{} is not a fork of this workspace {} (`ckpt forks` lists them; nothing was changed)",
            d.display(),
            ws.root.display()
        ))
    };
    let fork = match super::adopt::fork_workspace(ctx, ws, dir) {
        Ok(f) => f,
        Err(e) => {
            // An overlay fork that is not mounted has no marker at `dir`.
            let abs = super::normalize(&ctx.abs(dir));
            let abs = abs.canonicalize().unwrap_or(abs);
            let listed = forks(ctx)?
                .forks
                .into_iter()
                .find(|f| f.root == abs && f.overlay.is_some());
            match listed {
                Some(f) => Workspace {
                    root: f.root,
                    store_path: f.store,
                },
                None => return Err(e),
            }
        }
    };
    let (origin, overlay) = {
        let store = fork.open_store_read_only(&ctx.config)?;
        let r = store.catalog.reader()?;
        (r.origin()?, r.overlay()?)
    };
    if origin.as_ref().map(|o| &o.workspace) != Some(&ws.root) {
        return Err(not_a_fork(&fork.root));
    }
    Ok((fork, overlay.is_some()))
}

/// The command `argv` (`-- CMD ARGS…`).
pub(crate) fn command(argv: &[std::ffi::OsString]) -> Command {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

/// Removes the overlay fork at `root` (store `store_path`) of `ws`:
/// unmounts it (refused, nothing changed, while a process uses it), renames
/// the mount point to a hidden sibling (the name goes at once), removes its
/// layers, its lower when no other fork uses it (under this workspace's
/// store lock, which every fork holds while it makes or reuses a lower),
/// its store (under its lock) and the mount point.
pub(crate) fn remove_overlay(
    ctx: &Context,
    ws: &Workspace,
    root: &Path,
    store_path: &Path,
) -> Result<RemovedOverlay> {
    let layers = overlay::layers_of(store_path, &ctx.config)?;
    let unmounted = overlay::unmount_for_remove(root)?;
    let hidden = crate::engine::fork::hidden_sibling(root, "ckpt-remove", std::process::id())?;
    let moved = root.exists();
    if moved {
        std::fs::rename(root, &hidden).ctx("rename", root)?;
    }
    let mut removed = {
        let _origin = ws.open_store(&ctx.config)?;
        overlay::remove_layers(&layers, store_path)?
    };
    removed.unmounted = unmounted;
    {
        let lock = Store::open_read_only(store_path, &ctx.config)?;
        crate::engine::fork::remove_tree(store_path);
        drop(lock);
        if store_path.exists() {
            std::fs::remove_dir_all(store_path).ctx("remove", store_path)?;
        }
    }
    if moved {
        crate::engine::fork::remove_tree(&hidden);
    }
    Ok(removed)
}

/// Which fork [`mount`] mounts, and what runs over it.
#[derive(Clone, Debug, Default)]
pub struct MountOptions {
    /// The overlay fork's directory (relative to the context's directory).
    pub dir: PathBuf,
    /// A command to run over the mount in a new namespace; `None`: mount
    /// here, persistently (root).
    pub command: Option<Vec<std::ffi::OsString>>,
}

/// What [`mount`] did. JSON: `mounted` (the directory), `store`,
/// `lower`, `upper`, `work`, `mount` (`persistent` or `namespace`),
/// `index_mapped`, `command_status`, `elapsed_ms`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MountReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The fork's directory.
    #[serde(rename = "mounted", serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    pub dir: PathBuf,
    /// Its store.
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    pub store: PathBuf,
    /// The mount.
    #[serde(flatten, serialize_with = "mounted_with_lower")]
    #[schemars(with = "MountedWithLower<'static>")]
    pub mounted: overlay::Mounted,
    /// How long it took (with a command: until it exited).
    #[serde(rename = "elapsed_ms", serialize_with = "j::with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// How an overlay fork is mounted: `upper`, `work`, `mount` (`persistent`,
/// or `namespace` for one made for a command), `index_mapped`,
/// `command_status` (flattened into [`MountReport`] and a fork's
/// `overlay`).
#[derive(Serialize, JsonSchema)]
pub(super) struct MountedForm<'a> {
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    upper: &'a Path,
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    work: &'a Path,
    mount: &'static str,
    index_mapped: bool,
    command_status: Option<i32>,
}

impl<'a> From<&'a overlay::Mounted> for MountedForm<'a> {
    fn from(m: &'a overlay::Mounted) -> Self {
        MountedForm {
            upper: &m.layers.upper,
            work: &m.layers.work,
            mount: if m.status.is_some() {
                "namespace"
            } else {
                "persistent"
            },
            index_mapped: m.index_mapped,
            command_status: m.status.map(j::exit_code),
        }
    }
}

/// [`MountedForm`], as a `serialize_with` encoding.
pub(super) fn mounted<S: Serializer>(
    m: &overlay::Mounted,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    MountedForm::from(m).serialize(s)
}

/// A mount with its lower layer (`ckpt fork --mount`).
#[derive(Serialize, JsonSchema)]
struct MountedWithLower<'a> {
    #[serde(serialize_with = "j::with::path")]
    #[schemars(with = "String")]
    lower: &'a Path,
    #[serde(flatten)]
    mounted: MountedForm<'a>,
}

fn mounted_with_lower<S: Serializer>(
    m: &overlay::Mounted,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    MountedWithLower {
        lower: &m.layers.lower,
        mounted: MountedForm::from(m),
    }
    .serialize(s)
}

/// Mounts the overlay fork `dir` of this workspace again (after a reboot,
/// or after a `-- CMD` run): here (root), or with `command` in a new
/// namespace where it runs ([`overlay::mount`]).
pub fn mount(ctx: &Context, opts: &MountOptions) -> Result<MountReport> {
    let t0 = std::time::Instant::now();
    let (dir, command) = (opts.dir.as_path(), opts.command.as_deref());
    let ws = ctx.workspace()?;
    let (fork, is_overlay) = find(ctx, &ws, dir)?;
    if !is_overlay {
        return Err(Error::Usage(format!(
            "{} is not an overlay fork; only those are mounted (nothing was changed)",
            fork.root.display()
        )));
    }
    let mut cmd = command.map(self::command);
    let mounted = overlay::mount(&fork.root, &fork.store_path, &ctx.config, cmd.as_mut())?;
    Ok(MountReport {
        schema: Schema,
        dir: fork.root,
        store: fork.store_path,
        mounted,
        elapsed: t0.elapsed(),
    })
}
