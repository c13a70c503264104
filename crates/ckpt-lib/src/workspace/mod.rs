//! Workspaces: a directory with a `.ckpt` marker at its root that names its
//! store.
//!
//! `ckpt` finds the workspace by walking up from the current directory until
//! it finds the marker, as git finds `.git`. The marker is a small JSON file
//! (`{"version":1,"store":"/abs/path"}`) and is never captured or restored.
//!
//! ## Where the store lives
//! The store must survive deletion of the workspace, so it is outside it, and
//! it should be on the same filesystem so reflinks work. The rule:
//! 1. `--store DIR` if given;
//! 2. else `$XDG_DATA_HOME/ckpt/stores/<name>-<id>` (default
//!    `~/.local/share/...`) when there is a data directory (the caller
//!    passes none when there is no usable home), it is on the workspace's
//!    filesystem, not inside the workspace, and can be created (its nearest
//!    existing ancestor is a directory this user may write to);
//! 3. else `<parent>/.ckpt-stores/<name>-<id>` beside the workspace.
//!
//! When the default place cannot be created after all, the error says to
//! pass `--store DIR`.
//!
//! ## Finding a store again
//! A store records the root of its workspace (catalog meta `workspace`), and
//! [`known`] keeps a list of the stores made on this machine, so a store
//! outlives its workspace and can be found again: `ckpt stores` lists them,
//! `ckpt restore --store S ID --to DIR` copies a checkpoint out of one, and
//! [`Workspace::attach`] (`ckpt init --attach --store S DIR`) makes a
//! directory its workspace again after the old one was deleted.
//!
//! ## No workspace inside another
//! [`Workspace::plan`] refuses a directory inside an existing workspace
//! ([`Error::InsideAWorkspace`]). A workspace that gets inside another by
//! other means (moved there, or a marker written by hand) is left alone by
//! the outer one: its scan skips any subdirectory holding a `.ckpt` marker
//! and reports it as skipped (kind `workspace`), and its restore never
//! writes into or removes such a directory (see [`scan`]).

pub mod git;
pub mod ignore;
pub mod known;
pub mod scan;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::IoContext;
use crate::store::state::LazyState;
use crate::store::Store;
use crate::workspace::ignore::Ignore;
use crate::{Config, Error, Hash, Result};
use ckpt_fs::fs;

/// File name of the workspace marker.
pub const MARKER_NAME: &str = ".ckpt";

#[derive(Serialize, Deserialize)]
struct Marker {
    version: u32,
    store: PathBuf,
}

/// A workspace: its root and the location of its store.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// Absolute, canonical workspace root.
    pub root: PathBuf,
    /// Absolute store directory.
    pub store_path: PathBuf,
}

impl Workspace {
    /// Makes `dir` a workspace, creating its store: at `store`, else in the
    /// default location ([`default_store_location`] under `data_home`).
    pub fn init(dir: &Path, store: Option<&Path>, data_home: Option<&Path>) -> Result<Workspace> {
        let ws = Workspace::plan(dir, store, data_home)?;
        Store::create_for(&ws.store_path, Some(&ws.root)).map_err(|e| match e {
            // The default place could not be made: say how to choose another.
            Error::Io(mut io)
                if store.is_none()
                    && matches!(
                        io.source.kind(),
                        std::io::ErrorKind::PermissionDenied
                            | std::io::ErrorKind::ReadOnlyFilesystem
                    ) =>
            {
                io.op = "create store (pass --store DIR to keep it elsewhere)";
                Error::Io(io)
            }
            e => e,
        })?;
        ws.write_marker()?;
        Ok(ws)
    }

    /// The first step of [`init`](Self::init): creates `dir` if needed and
    /// decides where its store goes, refusing a directory that already is a
    /// workspace or is inside one. Creates nothing else.
    pub fn plan(dir: &Path, store: Option<&Path>, data_home: Option<&Path>) -> Result<Workspace> {
        Workspace::plan_with(dir, store, data_home, false)
    }

    /// [`plan`](Self::plan); with `stale_ok`, a directory whose own marker
    /// names a store that no longer exists is accepted ([`attach`]
    /// re-points it).
    ///
    /// [`attach`]: Self::attach
    fn plan_with(
        dir: &Path,
        store: Option<&Path>,
        data_home: Option<&Path>,
        stale_ok: bool,
    ) -> Result<Workspace> {
        // Refused before anything is created.
        if let Some(outer) = enclosing_workspace(&absolute(dir)?) {
            return Err(Error::InsideAWorkspace {
                dir: dir.to_path_buf(),
                outer,
            });
        }
        std::fs::create_dir_all(dir).ctx("create", dir)?;
        let root = dir.canonicalize().ctx("resolve", dir)?;
        if root.join(MARKER_NAME).exists() && !(stale_ok && stale_marker(&root)) {
            return Err(Error::AlreadyAWorkspace(root));
        }
        // Again on the resolved path (a symlink may lead inside a workspace).
        if let Some(outer) = enclosing_workspace(&root) {
            return Err(Error::InsideAWorkspace { dir: root, outer });
        }
        let store_path = match store {
            Some(s) => absolute(s)?,
            None => default_store_location(&root, data_home)?,
        };
        if store_path.starts_with(&root) && store_path != root {
            // Allowed (it is excluded from scans), but it will not survive
            // deleting the workspace; that is the user's explicit choice.
        } else if root.starts_with(&store_path) {
            return Err(Error::Usage(format!(
                "store {} cannot contain the workspace {}",
                store_path.display(),
                root.display()
            )));
        }
        Ok(Workspace { root, store_path })
    }

    /// Makes `dir` the workspace of the existing store `store` (`ckpt init
    /// --attach`), for a store whose workspace was deleted or moved.
    ///
    /// Refused, with nothing changed, when `dir` is or is inside a
    /// workspace (unless `dir`'s own marker names a store that is gone: a
    /// moved store is re-attached the same way), when `store` holds no store, or when the store's recorded
    /// workspace still exists and its marker names this store (two
    /// workspaces sharing a store would each see the other's files as
    /// changes). Otherwise, holding the store lock: the stat index is
    /// removed (it describes the old directory), the store records `dir` as
    /// its workspace, and the marker is written last, so an interrupted
    /// attach leaves `dir` not yet a workspace and can simply be run again.
    /// The files are not touched: `ckpt restore` brings a checkpoint back.
    pub fn attach(dir: &Path, store: &Path, config: &Config) -> Result<Workspace> {
        let store = absolute(store)?;
        if !Store::exists_at(&store) {
            return Err(Error::Usage(format!(
                "{} holds no ckpt store (nothing was changed)\n  `ckpt stores` lists the stores on this machine",
                store.display()
            )));
        }
        let ws = Workspace::plan_with(dir, Some(&store), None, true)?;
        let opened = Store::open(&ws.store_path, config)?;
        if let Some(old) = opened.catalog.reader()?.workspace()? {
            if old != ws.root && marker_names(&old, &ws.store_path) {
                return Err(Error::Usage(format!(
                    "the store {} still belongs to the workspace {}, whose .ckpt names it; \
                     two workspaces cannot share a store (nothing was changed)\n  \
                     for a copy of a checkpoint use `ckpt -C {} fork ID {}`; to move the \
                     workspace, remove {} first",
                    ws.store_path.display(),
                    old.display(),
                    old.display(),
                    ws.root.display(),
                    old.join(MARKER_NAME).display()
                )));
            }
        }
        opened.forget_index()?;
        opened.catalog.set_workspace(&ws.root)?;
        ws.write_marker()?;
        Ok(ws)
    }

    /// The last step of [`init`](Self::init), once the store exists: writes
    /// the marker that makes the directory a workspace.
    pub fn write_marker(&self) -> Result<()> {
        let path = self.root.join(MARKER_NAME);
        let tmp = self.root.join(".ckpt.tmp-init");
        std::fs::write(&tmp, self.marker_bytes()).ctx("write", &tmp)?;
        std::fs::rename(&tmp, &path).ctx("rename", &path)?;
        Ok(())
    }

    /// Writes this workspace's marker into `staging`, the directory that
    /// is to become its root, in place: a `.ckpt` already there (a
    /// snapshot's copy of another workspace's marker) is truncated and
    /// rewritten, not replaced. Only for a directory nobody uses yet and
    /// that any failure removes whole (a fork's staging snapshot), so a
    /// torn write is never seen.
    ///
    /// Why in place: in a btrfs snapshot, the first change to any part of
    /// its tree copies that part and moves hundreds of back-references at
    /// the next commit. Rewriting the marker changes only its own inode; a
    /// new file renamed over it would also change the root directory's
    /// entries, elsewhere in the tree, and cost a subvolume fork's
    /// publishing commit about twice as much (BENCHMARKS.md, "Forks").
    pub fn write_marker_in_place(&self, staging: &Path) -> Result<()> {
        let path = staging.join(MARKER_NAME);
        std::fs::write(&path, self.marker_bytes()).ctx("write", &path)
    }

    fn marker_bytes(&self) -> Vec<u8> {
        let marker = Marker {
            version: 1,
            store: self.store_path.clone(),
        };
        serde_json::to_vec_pretty(&marker).expect("marker serialises")
    }

    /// Finds the workspace containing `start` by walking up.
    pub fn discover(start: &Path) -> Result<Workspace> {
        let start = match start.canonicalize() {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::Usage(format!(
                    "{} does not exist (nothing was changed)\n  if it was a workspace that was \
                     deleted, its store still holds its checkpoints: `ckpt stores` lists them \
                     (docs/CLI.md, \"A deleted workspace\")",
                    start.display()
                )))
            }
            Err(e) => return Err(Error::io("resolve", start, e)),
        };
        let mut dir: &Path = &start;
        loop {
            let m = dir.join(MARKER_NAME);
            match std::fs::read(&m) {
                Ok(bytes) => {
                    let marker: Marker = serde_json::from_slice(&bytes)
                        .map_err(|e| Error::Corrupt(format!("{}: {e}", m.display())))?;
                    return Ok(Workspace {
                        root: dir.to_path_buf(),
                        store_path: marker.store,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {}
                Err(e) => return Err(Error::io("read", m, e)),
            }
            match dir.parent() {
                Some(p) => dir = p,
                None => return Err(Error::NotAWorkspace(start)),
            }
        }
    }

    /// Opens (and locks) the workspace's store.
    pub fn open_store(&self, config: &Config) -> Result<Store> {
        Store::open(&self.store_path, config)
    }

    /// Opens and locks this workspace's store for a save
    /// ([`Store::open_for_save`]).
    pub fn open_store_for_save(&self, config: &Config) -> Result<Store> {
        Store::open_for_save(&self.store_path, config)
    }

    /// Opens (and locks) the workspace's store for reading only
    /// ([`Store::open_read_only`]).
    pub fn open_store_read_only(&self, config: &Config) -> Result<Store> {
        Store::open_read_only(&self.store_path, config)
    }

    /// The agent-state store of this workspace, for `ckpt state …`: checks
    /// that the store directory is a ckpt store (so a vanished store is
    /// reported, not silently re-created) but takes no store lock.
    pub fn state(&self, lock_timeout: Duration) -> Result<LazyState> {
        let marker = self.store_path.join(crate::store::MARKER);
        if !marker.exists() {
            return Err(Error::io(
                "open store (is the workspace's store gone or moved? `ckpt stores` lists the stores; `ckpt init --attach --store S .` points the workspace at one)",
                marker,
                std::io::ErrorKind::NotFound.into(),
            ));
        }
        Ok(LazyState::new(&self.store_path, lock_timeout))
    }

    /// Loads `.ckptignore`.
    pub fn ignore(&self) -> Result<Ignore> {
        Ignore::load(&self.root)
    }

    /// Relative paths inside the workspace that must never be captured (the
    /// store, when the user put it inside).
    pub fn excluded(&self) -> Vec<Vec<u8>> {
        match self.store_path.strip_prefix(&self.root) {
            Ok(rel) if !rel.as_os_str().is_empty() => vec![rel.as_os_str().as_bytes().to_vec()],
            _ => Vec::new(),
        }
    }
}

/// Whether `root`'s marker names a directory that holds no store.
fn stale_marker(root: &Path) -> bool {
    std::fs::read(root.join(MARKER_NAME))
        .ok()
        .and_then(|b| serde_json::from_slice::<Marker>(&b).ok())
        .is_some_and(|m| !Store::exists_at(&m.store))
}

/// Whether `root` holds a workspace marker naming `store` (compared after
/// resolving symlinks, when both exist).
pub fn marker_names(root: &Path, store: &Path) -> bool {
    let resolve = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    std::fs::read(root.join(MARKER_NAME))
        .ok()
        .and_then(|b| serde_json::from_slice::<Marker>(&b).ok())
        .is_some_and(|m| resolve(&m.store) == resolve(store))
}

/// The root of the workspace that `dir` lies strictly inside: the nearest
/// proper ancestor holding a `.ckpt` marker file (`dir` itself and paths
/// that do not exist yet are looked at only through their ancestors).
pub fn enclosing_workspace(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .skip(1)
        .find(|a| a.join(MARKER_NAME).is_file())
        .map(Path::to_path_buf)
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir().ctx("resolve", p)?.join(p))
    }
}

fn device_of_nearest(p: &Path) -> Option<u64> {
    let mut cur = Some(p);
    while let Some(c) = cur {
        if let Ok(m) = std::fs::metadata(c) {
            return Some(std::os::unix::fs::MetadataExt::dev(&m));
        }
        cur = c.parent();
    }
    None
}

/// Whether `p` exists as a directory or could be created: its nearest
/// existing ancestor is a directory this user may write to.
fn can_create(p: &Path) -> bool {
    let Some(nearest) = p.ancestors().find(|a| a.symlink_metadata().is_ok()) else {
        return false;
    };
    nearest.is_dir()
        && rustix::fs::accessat(
            rustix::fs::CWD,
            nearest,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
            rustix::fs::AtFlags::empty(),
        )
        .is_ok()
}

/// The default store location for a workspace root (see the module doc);
/// `data_home` is `$XDG_DATA_HOME` or `~/.local/share`, as the caller found
/// it ([`crate::Config::data_home`]).
pub fn default_store_location(root: &Path, data_home: Option<&Path>) -> Result<PathBuf> {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let seed = format!("{}:{}:{}", root.display(), fs::now_ns(), std::process::id());
    let id = &Hash::of(seed.as_bytes()).to_hex()[..10];
    let leaf = format!("{name}-{id}");
    let ws_dev = device_of_nearest(root);
    if let Some(data) = data_home {
        let stores = known::default_dir(data);
        if ws_dev.is_some()
            && device_of_nearest(&stores) == ws_dev
            && !stores.starts_with(root)
            && can_create(&stores)
        {
            return Ok(stores.join(leaf));
        }
    }
    let parent = root
        .parent()
        .ok_or_else(|| Error::Usage("cannot place a store beside /; pass --store DIR".into()))?;
    Ok(parent.join(".ckpt-stores").join(leaf))
}
