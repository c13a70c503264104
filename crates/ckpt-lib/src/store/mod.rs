//! A store: everything ckpt keeps about one workspace, in one directory
//! outside it.
//!
//! ```text
//! <store>/
//!   CKPT_STORE      format marker ("ckpt store v1")
//!   lock            flock(2) target, see crate::store::lock
//!   catalog.redb    trees, checkpoints, refs (crate::store::catalog)
//!   index           stat cache (crate::store::index)
//!   objects/ab/…    file contents by BLAKE3 (crate::store::objects)
//!   tmp/            objects being written
//!   state.redb      agent state, created on first write (crate::store::state)
//!   state.redb.lock its per-process lock
//!   reserve         space held back for a restore's own commits
//!   verified        objects' stats when last hashed intact (crate::store::verified)
//!   watch.sock, watch.token, watch.lock, watch.log
//!                   a running watcher's (crate::watch), not the store's
//! ```
//!
//! [`Store::open`] takes the lock before anything else and holds it until
//! the `Store` is dropped. The state store is opened lazily, on first use
//! ([`Store::state`]), and closed when the `Store` is dropped.
//!
//! ## The reserve
//! A restore commits small transactions of its own around its file writes
//! (its journal, the head, the agent state), and even `restore --no-save`,
//! which frees space, needs room for those first. On a full disk (the
//! workspace filled it, and the store is on the same filesystem) there is
//! none, and redb may need new pages for any commit. So a writable open
//! makes the file `reserve` [`RESERVE_BYTES`] of allocated space long when
//! at least twice that is free, and before each group of its own commits a
//! restore gives [`RESERVE_CHUNK`] of it back when less than that is free
//! ([`Store::room_for_commit`]): those commits then have room, even when
//! the restore's file writes used up what was free. A save never uses it,
//! so a disk the workspace filled still has room for the undo. A later open
//! makes it whole again once there is space.

pub mod bands;
pub mod catalog;
mod contain;
pub mod gc;
pub mod index;
pub mod lock;
pub mod objects;
pub mod retention;
pub mod state;
pub mod tree;
pub mod usage;
pub mod verified;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::error::IoContext;
use crate::store::catalog::Catalog;
use crate::store::index::Index;
use crate::store::lock::Lock;
use crate::store::objects::Objects;
use crate::store::state::LazyState;
use crate::{Config, Error, Result};
use ckpt_fs::copy::{self, Caps, Copier};
use ckpt_fs::fs;

pub(crate) const MARKER: &str = "CKPT_STORE";
/// The reserve (see "The reserve").
const RESERVE: &str = "reserve";
/// The size of the reserve.
pub const RESERVE_BYTES: u64 = 1 << 20;
/// How much of it [`Store::room_for_commit`] gives back (room for a few
/// small redb commits).
pub const RESERVE_CHUNK: u64 = 256 << 10;
const MARKER_TEXT: &str = "ckpt store v1\n";

/// The watcher's socket, token, lock and log ([`crate::watch`] has what
/// each is for). They belong to a running watcher, not to the store's
/// content, so a copy of the store (a fork's snapshot) leaves them out.
pub const WATCH_FILES: [&str; 4] = [WATCH_SOCKET, WATCH_TOKEN, WATCH_LOCK, WATCH_LOG];
/// See [`WATCH_FILES`].
pub const WATCH_SOCKET: &str = "watch.sock";
/// See [`WATCH_FILES`].
pub const WATCH_TOKEN: &str = "watch.token";
/// See [`WATCH_FILES`].
pub const WATCH_LOCK: &str = "watch.lock";
/// See [`WATCH_FILES`].
pub const WATCH_LOG: &str = "watch.log";

/// How [`Store::open_mode`] opens the catalog.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Write,
    /// [`Mode::Write`] with the catalog opened writable only when a commit
    /// is due ([`Catalog::open_lazily`]).
    Save,
    ReadOnly,
    Unsynced,
}

/// An open, locked store.
pub struct Store {
    /// The store directory.
    pub root: PathBuf,
    /// File contents.
    pub objects: Objects,
    /// What the store's filesystem supports (probed at creation), after any
    /// `CKPT_COPY_STRATEGY` override.
    pub caps: Caps,
    /// Agent state (`state.redb`), opened on first use.
    pub state: LazyState,
    /// Trees, checkpoints, refs. Dropped after the fields above, so that
    /// their drops (the objects' temporary directory removed) overlap with
    /// a close it runs in the background
    /// ([`Catalog::close_in_background`]), and before the lock.
    pub catalog: Catalog,
    _lock: Lock,
}

impl Store {
    /// Creates a new store directory (which must not exist or be empty).
    pub fn create(root: &Path) -> Result<()> {
        Store::create_for(root, None)
    }

    /// Creates a new store for the workspace at `source`: the copy
    /// capabilities cached in the store are probed for the pair (workspace
    /// filesystem → store filesystem), the direction a save copies in.
    pub fn create_for(root: &Path, source: Option<&Path>) -> Result<()> {
        if root.join(MARKER).exists() {
            return Err(Error::Usage(format!(
                "{} already holds a ckpt store",
                root.display()
            )));
        }
        std::fs::create_dir_all(root).ctx("create store", root)?;
        Objects::create_layout(root)?;
        let dir = fs::open_dir_path(root).ctx("open", root)?;
        let caps = match source {
            Some(src) => {
                let sfd = fs::open_dir_path(src).ctx("open", src)?;
                copy::probe_pair(sfd.as_fd(), dir.as_fd())
            }
            None => copy::probe(dir.as_fd()),
        }
        .ctx("probe copy capabilities", root)?;
        let catalog = Catalog::create(&root.join("catalog.redb"))?;
        catalog.set_caps(&caps)?;
        if let Some(src) = source {
            catalog.set_workspace(src)?;
        }
        let marker = root.join(MARKER);
        std::fs::write(&marker, MARKER_TEXT).ctx("write", &marker)?;
        rustix::fs::fsync(&dir).ctx("fsync", root)?;
        Ok(())
    }

    /// Opens and locks a store.
    pub fn open(root: &Path, config: &Config) -> Result<Store> {
        Store::open_mode(root, config, Mode::Write)
    }

    /// [`Store::open`] for a save, which often records nothing: its
    /// catalog is opened read-only, and writable only by its first commit
    /// ([`Catalog::open_lazily`]), so a save that commits nothing writes
    /// nothing to it, and opening and closing it costs no `fdatasync`. The
    /// caller must hold no [`crate::store::catalog::CatalogReader`] across
    /// a write (one would fail its next read).
    pub fn open_for_save(root: &Path, config: &Config) -> Result<Store> {
        Store::open_mode(root, config, Mode::Save)
    }

    /// Opens and locks the store of a fork that is not published yet: its
    /// catalog's commits are made durable only by [`Store::close`], with
    /// one `fdatasync` ([`Catalog::open_unsynced`]). A crash before that
    /// may leave the catalog unreadable, which is sound only because the
    /// fork is then never published and no workspace names its store.
    pub fn open_unsynced(root: &Path, config: &Config) -> Result<Store> {
        Store::open_mode(root, config, Mode::Unsynced)
    }

    /// Closes the store, reporting what closing its catalog wrote; one
    /// opened with [`Store::open_unsynced`] is durable when this returns.
    pub fn close(self) -> Result<()> {
        let _t = crate::trace::span("close store");
        self.catalog.close()
    }

    /// Opens and locks a store for commands that only read (`status`,
    /// `diff`, `log`, `show`): the catalog is opened read-only and no
    /// temporary directory is made, so nothing is written (not even when the
    /// catalog is closed) beyond removing what crashed processes left.
    /// Writing through it fails (an internal error).
    pub fn open_read_only(root: &Path, config: &Config) -> Result<Store> {
        Store::open_mode(root, config, Mode::ReadOnly)
    }

    fn open_mode(root: &Path, config: &Config, mode: Mode) -> Result<Store> {
        let read_only = mode == Mode::ReadOnly;
        let lock_timeout = config.lock_timeout;
        match std::fs::read_to_string(root.join(MARKER)) {
            Ok(t) if t == MARKER_TEXT => {}
            Ok(_) => {
                return Err(Error::Corrupt(format!(
                    "{} has an unknown store format",
                    root.display()
                )))
            }
            Err(e) => {
                return Err(Error::io(
                    "open store (is the workspace's store gone or moved? `ckpt stores` lists the stores; `ckpt init --attach --store S .` points the workspace at one)",
                    root.join(MARKER),
                    e,
                ))
            }
        }
        let _t = crate::trace::span("open store");
        let lock = Lock::acquire(&root.join("lock"), lock_timeout)?;
        // A crash between writing the index's (or its delta's) temporary
        // file and renaming it leaves `index.tmp` (`index.delta.tmp`); only
        // a lock holder writes them, so they are stale. (Read-only commands
        // remove them too: every command leaves a store without temporary
        // files.)
        let index_path = root.join("index");
        for tmp in [
            crate::store::index::temp_path(&index_path),
            crate::store::index::temp_path(&crate::store::index::delta_path(&index_path)),
        ] {
            match std::fs::remove_file(&tmp) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove stale temporary file", tmp, e)),
            }
        }
        let catalog = root.join("catalog.redb");
        let catalog = match mode {
            Mode::ReadOnly => Catalog::open_read_only(&catalog)?,
            Mode::Write => Catalog::open(&catalog)?,
            Mode::Save => Catalog::open_lazily(&catalog)?,
            Mode::Unsynced => Catalog::open_unsynced(&catalog)?,
        };
        let caps: Caps = catalog.reader()?.caps()?.unwrap_or(Caps::NONE);
        let caps = caps.configured(&config.copy);
        let copier = Copier::configured(caps, &config.copy);
        let mut objects = if read_only {
            Objects::open_read_only(root, copier)?
        } else {
            Objects::open(root, copier)?
        };
        if let Some(b) = config.band_min.filter(|&b| b > 0) {
            objects.band_min = b;
        }
        if !read_only {
            keep_reserve(root);
        }
        Ok(Store {
            root: root.to_path_buf(),
            catalog,
            objects,
            caps,
            state: LazyState::new(root, lock_timeout),
            _lock: lock,
        })
    }

    /// Gives [`RESERVE_CHUNK`] of the reserve back when less than that is
    /// free on the store's filesystem, so the commits that follow have room
    /// (a restore's own, see "The reserve"). Best effort.
    pub fn room_for_commit(&self) {
        if free_bytes(&self.root).is_none_or(|f| f >= RESERVE_CHUNK) {
            return;
        }
        if let Ok(f) = std::fs::OpenOptions::new()
            .write(true)
            .open(self.root.join(RESERVE))
        {
            if let Ok(m) = f.metadata() {
                let _ = f.set_len(m.len().saturating_sub(RESERVE_CHUNK));
            }
        }
    }

    /// Path of the stat index.
    pub fn index_path(&self) -> PathBuf {
        self.root.join("index")
    }

    /// Removes the stat index and its delta (`init --attach`: it describes
    /// another directory's files), so the next scan hashes everything.
    pub fn forget_index(&self) -> Result<()> {
        let index = self.index_path();
        for p in [crate::store::index::delta_path(&index), index] {
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", p, e)),
            }
        }
        Ok(())
    }

    /// Whether `dir` holds a ckpt store (its format marker).
    pub fn exists_at(dir: &Path) -> bool {
        dir.join(MARKER).is_file()
    }

    /// Loads the stat index (empty if absent, corrupt or stale).
    pub fn load_index(&self) -> Result<Index> {
        let generation = self.catalog.reader()?.generation()?;
        Ok(Index::load(&self.index_path(), generation))
    }
}

/// Makes the reserve (see "The reserve") whole if it is not and at least
/// twice its size is free. Best effort: without room a later open does it.
fn keep_reserve(root: &Path) {
    let path = root.join(RESERVE);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() >= RESERVE_BYTES)
        || free_bytes(root).is_none_or(|f| f < 2 * RESERVE_BYTES)
    {
        return;
    }
    let Ok(f) = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    else {
        return;
    };
    let allocated =
        rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, RESERVE_BYTES);
    if allocated.is_err() {
        // No fallocate on this filesystem: allocate by writing.
        use std::os::unix::fs::FileExt;
        let _ = f.write_all_at(&vec![0u8; RESERVE_BYTES as usize], 0);
    }
}

/// Bytes free for an unprivileged user on the filesystem of `p`.
fn free_bytes(p: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(p).ok()?;
    Some(s.f_bavail * s.f_frsize)
}
