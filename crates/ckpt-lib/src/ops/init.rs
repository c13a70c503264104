//! `ckpt init`: make a directory a workspace, with its store (in the
//! default place or `--store`), and report where everything went and which
//! copy strategy the new store prefers.
//!
//! The directory must exist unless [`InitOptions::create`] is set (`ckpt
//! init --create`): a mistyped path is refused rather than made.
//!
//! A directory inside an existing workspace is refused
//! ([`Error::InsideAWorkspace`], exit 3): workspaces do not nest (see
//! [`crate::workspace`], "No workspace inside another").
//!
//! With [`InitOptions::attach`] (`ckpt init --attach --store S DIR`) the
//! store already exists: `DIR` becomes its workspace again
//! ([`Workspace::attach`]), for a workspace that was deleted or moved.
//!
//! Inside a git work tree, every outcome also keeps the marker (and a
//! store inside the work tree) out of `git status`, through the
//! repository's `info/exclude` ([`crate::workspace::git`]).
//!
//! With [`Existing::Keep`] (what `ckpt init --agent` uses) a directory that
//! already is in a workspace, at its root or below, is not an error: that
//! workspace is reported, and its store is not opened.

use std::path::PathBuf;

use ckpt_fs::copy::Strategy;
use serde::{Serialize, Serializer};

use super::json::{with, Schema};
use super::Context;
use crate::engine::fork::subvolume::{make_subvolume, Converted};
use crate::store::Store;
use crate::workspace::git::{self, Excluded};
use crate::workspace::{known, Workspace, MARKER_NAME};
use crate::{Error, Result};

/// What to do when the directory is already in a workspace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Existing {
    /// Fail with [`Error::AlreadyAWorkspace`] (or, below the root,
    /// [`Error::InsideAWorkspace`]).
    #[default]
    Refuse,
    /// Report the workspace that contains the directory.
    Keep,
}

/// What [`init`] sets up.
#[derive(Clone, Debug, Default)]
pub struct InitOptions {
    /// The directory (relative to the context's directory); the context's
    /// directory itself when `None`.
    pub dir: Option<PathBuf>,
    /// Where to keep the store (relative to the context's directory); the
    /// default place when `None`.
    pub store: Option<PathBuf>,
    /// What to do when the directory already is in a workspace.
    pub existing: Existing,
    /// Create the directory (and missing parents) when it does not exist;
    /// otherwise a missing directory is refused (`--create`).
    pub create: bool,
    /// Attach the directory to the existing store [`InitOptions::store`]
    /// instead of making a new one (`--attach`).
    pub attach: bool,
    /// Also make the directory a btrfs subvolume, so forks of it are
    /// snapshots (`--subvolume`; an existing workspace is kept, and only
    /// converted): [`crate::engine::fork::subvolume`].
    pub subvolume: bool,
}

/// How [`init`] came by its workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new workspace and store were made.
    Created {
        /// The copy strategy the new store prefers (what it probed,
        /// as configured).
        copy_strategy: Strategy,
    },
    /// The directory already was in this workspace ([`Existing::Keep`]).
    Kept,
    /// The directory was attached to an existing store
    /// ([`InitOptions::attach`]); its files were not touched.
    Attached,
}

/// What [`init`] did.
#[derive(Clone, Debug)]
pub struct InitReport {
    /// The workspace (root and store directory).
    pub workspace: Workspace,
    /// Made or kept.
    pub outcome: Outcome,
    /// What `--subvolume` did.
    pub subvolume: Option<Converted>,
    /// What `--subvolume` did to the store (None: not asked, or the store
    /// is inside the workspace or on another filesystem).
    pub store_subvolume: Option<Converted>,
    /// Where the workspace's marker (and a store inside the work tree) was
    /// kept out of `git status`, when the workspace is in a git work tree
    /// ([`crate::workspace::git`]).
    pub git_exclude: Option<Excluded>,
}

/// The JSON form of an [`InitReport`]: `root`, `store`, `outcome`
/// (`created`, `kept`, `attached`), `subvolume` (with `--subvolume`: `dir`,
/// `already`, `entries`; else null), `store_subvolume` (the same for the
/// store), `git_exclude` (`file`, `added`; else null).
#[derive(Serialize, schemars::JsonSchema)]
struct InitForm<'a> {
    schema: Schema,
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    root: &'a std::path::Path,
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    store: &'a std::path::Path,
    outcome: &'static str,
    subvolume: &'a Option<Converted>,
    store_subvolume: &'a Option<Converted>,
    git_exclude: Option<ExcludedForm<'a>>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct ExcludedForm<'a> {
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    file: &'a std::path::Path,
    added: &'a [String],
}

super::json::schema_via!(InitReport => InitForm<'static>);

impl Serialize for InitReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        InitForm {
            schema: Schema,
            root: &self.workspace.root,
            store: &self.workspace.store_path,
            outcome: match self.outcome {
                Outcome::Created { .. } => "created",
                Outcome::Kept => "kept",
                Outcome::Attached => "attached",
            },
            subvolume: &self.subvolume,
            store_subvolume: &self.store_subvolume,
            git_exclude: self.git_exclude.as_ref().map(|g| ExcludedForm {
                file: &g.file,
                added: &g.added,
            }),
        }
        .serialize(s)
    }
}

/// Makes a directory a workspace (see [`InitOptions`]), and with
/// `subvolume` a btrfs subvolume (an existing workspace root is kept and
/// only converted).
pub fn init(ctx: &Context, opts: &InitOptions) -> Result<InitReport> {
    let mut rep = init_subvolume(ctx, opts)?;
    let ws = &rep.workspace;
    rep.git_exclude = git::exclude(&ws.root, MARKER_NAME, &ws.store_path);
    Ok(rep)
}

fn init_subvolume(ctx: &Context, opts: &InitOptions) -> Result<InitReport> {
    if !opts.subvolume {
        return init_workspace(ctx, opts);
    }
    let mut rep = init_workspace(
        ctx,
        &InitOptions {
            existing: Existing::Keep,
            ..opts.clone()
        },
    )?;
    let dir = opts
        .dir
        .as_deref()
        .map_or_else(|| ctx.cwd.clone(), |d| ctx.abs(d));
    if rep.outcome == Outcome::Kept && dir.canonicalize().ok().as_ref() != Some(&rep.workspace.root)
    {
        return Err(Error::Usage(format!(
            "{} is inside the workspace {}; --subvolume converts a workspace's root (nothing was changed)",
            dir.display(),
            rep.workspace.root.display()
        )));
    }
    rep.subvolume = Some(make_subvolume(&rep.workspace.root)?);
    rep.store_subvolume = store_subvolume(ctx, &rep.workspace)?;
    Ok(rep)
}

/// Makes the store of `ws` a subvolume too, under its lock, when it is
/// outside the workspace on the same btrfs filesystem, so that a fork's
/// store is a snapshot of it (docs/FORK.md). Its files are copied as
/// reflinks and verified like the workspace's (nothing else writes the
/// store while its lock is held).
fn store_subvolume(ctx: &Context, ws: &Workspace) -> Result<Option<Converted>> {
    use std::os::fd::AsFd;
    if ws.store_path.starts_with(&ws.root) {
        return Ok(None);
    }
    let fsid = |p: &std::path::Path| {
        ckpt_fs::fs::open_dir_path(p)
            .ok()
            .and_then(|fd| crate::platform::btrfs::fsid(fd.as_fd()).ok())
    };
    if fsid(&ws.store_path).is_none() || fsid(&ws.store_path) != fsid(&ws.root) {
        return Ok(None);
    }
    let _lock = Store::open_read_only(&ws.store_path, &ctx.config)?;
    make_subvolume(&ws.store_path).map(Some)
}

fn init_workspace(ctx: &Context, opts: &InitOptions) -> Result<InitReport> {
    let dir = opts
        .dir
        .as_deref()
        .map_or_else(|| ctx.cwd.clone(), |d| ctx.abs(d));
    let store = opts.store.as_deref().map(|s| ctx.abs(s));
    let data_home = ctx.config.data_home.as_deref();
    if !opts.create && std::fs::symlink_metadata(&dir).is_err() {
        return Err(Error::Usage(format!(
            "{} does not exist; create it first, or pass --create (nothing was created)",
            dir.display()
        )));
    }
    if opts.attach {
        let Some(store) = store else {
            return Err(Error::Usage(
                "--attach needs --store DIR: the store to attach to (`ckpt stores` lists them)"
                    .into(),
            ));
        };
        if opts.create {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
        }
        let workspace = Workspace::attach(&dir, &store, &ctx.config)?;
        known::record(data_home, &workspace.store_path);
        return Ok(InitReport {
            workspace,
            outcome: Outcome::Attached,
            subvolume: None,
            store_subvolume: None,
            git_exclude: None,
        });
    }
    if let Some(s) = store.as_deref().filter(|s| Store::exists_at(s)) {
        return Err(Error::Usage(format!(
            "{} already holds a ckpt store (nothing was created)\n  to make {} its workspace \
             again: `ckpt init --attach{} --store {} {}`; to copy a checkpoint out of it: \
             `ckpt restore --store {} ID --to DIR`",
            s.display(),
            dir.display(),
            if dir.exists() { "" } else { " --create" },
            s.display(),
            dir.display(),
            s.display()
        )));
    }
    let workspace = match (
        Workspace::init(&dir, store.as_deref(), data_home),
        opts.existing,
    ) {
        (Err(Error::AlreadyAWorkspace(_) | Error::InsideAWorkspace { .. }), Existing::Keep) => {
            return Ok(InitReport {
                workspace: Workspace::discover(&dir)?,
                outcome: Outcome::Kept,
                subvolume: None,
                store_subvolume: None,
                git_exclude: None,
            });
        }
        (r, _) => r?,
    };
    known::record(data_home, &workspace.store_path);
    let copy_strategy = workspace.open_store(&ctx.config)?.caps.preferred();
    Ok(InitReport {
        workspace,
        outcome: Outcome::Created { copy_strategy },
        subvolume: None,
        store_subvolume: None,
        git_exclude: None,
    })
}
