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

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::json::{self as j, serialize_via_to_json, SCHEMA};
use super::stores::{self, Attachment, StoresOptions, BUSY_WAIT};
use super::Context;
use crate::engine::diff::{self, PathFilter, TreeSource};
use crate::error::IoContext;
use crate::store::catalog::{ChangeStats, Checkpoint, Origin};
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{Error, Result};

/// One fork of this workspace.
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
}

/// What [`forks`] found.
#[derive(Clone, Debug)]
pub struct ForksReport {
    /// This workspace.
    pub workspace: PathBuf,
    /// Its forks, by directory.
    pub forks: Vec<ForkInfo>,
}

impl ForksReport {
    /// The JSON form: `workspace`, `forks` (each `dir`, `store`, `origin`
    /// (`v…` in this workspace's store), `latest` (a checkpoint object of
    /// the fork's store), `diverged` (`files_added`, `files_modified`,
    /// `files_deleted`, `bytes_added`, `bytes_modified`, `bytes_deleted`)).
    pub fn to_json(&self) -> Value {
        let forks: Vec<Value> = self
            .forks
            .iter()
            .map(|f| {
                json!({
                    "dir": f.root.display().to_string(),
                    "store": f.store.display().to_string(),
                    "origin": format!("v{}", f.origin.checkpoint),
                    "latest": f.latest.as_ref().map_or(Value::Null, |c| j::checkpoint(c, f.head)),
                    "diverged": f.diverged,
                })
            })
            .collect();
        json!({
            "schema": SCHEMA,
            "workspace": self.workspace.display().to_string(),
            "forks": forks,
        })
    }
}

/// Lists this workspace's forks (see the module doc).
pub fn forks(ctx: &Context) -> Result<ForksReport> {
    let ws = ctx.workspace()?;
    let mut config = ctx.config.clone();
    config.lock_timeout = config.lock_timeout.min(BUSY_WAIT);
    let mut found = Vec::new();
    for s in stores::stores(ctx, &StoresOptions::default())?.stores {
        if s.attachment != Attachment::Attached || s.path == ws.store_path {
            continue;
        }
        let Some(root) = s.workspace else { continue };
        if let Ok(Some(info)) = describe(&s.path, root, &ws, &config) {
            found.push(info);
        }
    }
    found.sort_by(|a, b| a.root.cmp(&b.root));
    Ok(ForksReport {
        workspace: ws.root,
        forks: found,
    })
}

fn describe(
    path: &Path,
    root: PathBuf,
    ws: &Workspace,
    config: &crate::Config,
) -> Result<Option<ForkInfo>> {
    let store = Store::open_read_only(path, config)?;
    let r = store.catalog.reader()?;
    let Some(origin) = r.origin()? else {
        return Ok(None);
    };
    if origin.workspace != ws.root {
        return Ok(None);
    }
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
    }))
}

/// What [`remove`] did.
#[derive(Clone, Debug)]
pub struct RemovedFork {
    /// The fork's directory (gone).
    pub dir: PathBuf,
    /// Its store (gone).
    pub store: PathBuf,
    /// The fork was a btrfs subvolume, deleted as one.
    pub subvolume: bool,
    /// Why a subvolume was removed file by file instead, if it was.
    pub note: Option<String>,
    /// How long it took.
    pub elapsed: Duration,
}

impl RemovedFork {
    /// The JSON form: `removed` (the directory), `store`, `subvolume`,
    /// `note`, `elapsed_ms`.
    pub fn to_json(&self) -> Value {
        json!({
            "schema": SCHEMA,
            "removed": self.dir.display().to_string(),
            "store": self.store.display().to_string(),
            "subvolume": self.subvolume,
            "note": self.note,
            "elapsed_ms": j::ms(self.elapsed),
        })
    }
}

serialize_via_to_json!(ForksReport, RemovedFork);

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
pub fn remove(ctx: &Context, dir: &Path) -> Result<RemovedFork> {
    let t0 = std::time::Instant::now();
    let ws = ctx.workspace()?;
    let fork = super::adopt::fork_workspace(ctx, &ws, dir)?;
    let origin = {
        let store = fork.open_store_read_only(&ctx.config)?;
        let origin = store.catalog.reader()?.origin()?;
        origin
    };
    if origin.as_ref().map(|o| &o.workspace) != Some(&ws.root) {
        return Err(Error::Usage(format!(
            "{} is not a fork of this workspace {} (`ckpt forks` lists them; nothing was changed)",
            fork.root.display(),
            ws.root.display()
        )));
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
    let subvolume = ckpt_copy::fs::open_dir_path(&hidden)
        .is_ok_and(|fd| crate::platform::btrfs::is_subvolume(std::os::fd::AsFd::as_fd(&fd)));
    let note = crate::engine::fork::remove_tree(&hidden);
    if hidden.exists() {
        return Err(Error::io(
            "remove",
            &hidden,
            std::io::Error::other("some files could not be removed"),
        ));
    }
    Ok(RemovedFork {
        dir: fork.root,
        store: fork.store_path,
        subvolume: subvolume && note.is_none(),
        note,
        elapsed: t0.elapsed(),
    })
}
