//! The catalog: checkpoint records, trees and refs in one redb database
//! (`<store>/catalog.redb`).
//!
//! redb gives us atomic, durable, crash-safe transactions (copy-on-write
//! B-trees with checksummed commits); we write no WAL of our own. A save
//! commits its new trees, its checkpoint record and the new head in a single
//! write transaction, durable before the save reports it (at its commit or
//! at the catalog's close, [`Durable`]), after the objects it
//! references are durable (see [`crate::store::objects`]). So after a crash either
//! the whole checkpoint is visible or none of it is.
//!
//! Tables:
//! - `meta`: `&str → bytes` — `head` (u64 LE), `next_seq` (u64 LE),
//!   `generation` (u64 LE, bumped by gc), `caps` (JSON), `journal` (JSON of
//!   an in-progress restore), `origin` (JSON [`Origin`], a fork's store only).
//! - `checkpoints`: `u64 seq → JSON` [`Checkpoint`].
//! - `by_hash`: `[u8;32] checkpoint hash → u64 seq`, for hash-prefix ids.
//! - `trees`: `[u8;32] tree hash → encoded` [`Tree`].
//! - `annotations`: `u64 seq → JSON` [`Annotation`]: tags and a note added
//!   to a checkpoint after it was saved (`ckpt annotate`).
//!
//! Annotations are not part of the checkpoint record: a record's `hash`
//! covers what was saved (its save-time tags included) and never changes,
//! so `by_hash` and every id stay valid when a checkpoint is annotated.
//! Invariant: every key of `annotations` is the `seq` of a record in
//! `checkpoints`. [`Catalog::annotate`] writes an annotation only in a
//! transaction that finds its record, and [`Catalog::delete_checkpoint`]
//! (delete and retention) removes it in the transaction that removes the
//! record. Sequence numbers are never reused (`next_seq` only grows), so
//! even an entry left behind by a ckpt that predates annotations (which
//! deletes records without them) names no other checkpoint: readers only
//! look annotations up by the `seq` of a record they hold. A catalog made
//! before annotations existed has no such table, which reads as "none";
//! the first annotation creates it (no format bump).
//!
//! ## Opened writable only when a commit is due
//! Opening a redb database writable costs an `fdatasync` (it marks the file
//! as needing a repair if the process dies), and closing it four more (a
//! commit of the allocator state, then the clean-shutdown header),
//! whether anything was committed or not. A save that records
//! nothing (the common case for hooks that save after every tool call)
//! commits nothing, so [`Catalog::open_lazily`] opens the file read-only
//! and only the first write transaction (`Catalog::begin_write`) closes that
//! handle and opens the file writable. Why that is sound:
//! - Every opener of a catalog holds the store lock
//!   ([`crate::store::lock`]), so no other process opens the file between
//!   the read-only handle's close and the writable open, and what the
//!   read-only handle read is still the latest commit.
//! - redb refuses a writable open while a read-only handle of the same
//!   file is open in the process, even one with no live transaction:
//!   hence the close. Closing releases the file at once; a read
//!   transaction still alive then fails its next read of the file
//!   (`DatabaseClosed`), and what it read before stays the snapshot it
//!   began with. The save path that uses this
//!   ([`crate::engine::save::capture_scanned`]) drops its reader before it
//!   commits.
//! - If the writable open fails (a read-only filesystem, a full disk),
//!   the commit fails with that error and nothing was written; the
//!   objects the save stored are unreferenced, as after any failed save.
//! - The read-only handle writes nothing, so a crash at any point before
//!   the writable open (crash point `catalog.before_writable_open`) leaves
//!   the file exactly as the last writer left it.
//!
//! ## Opened writable while the scan goes on
//! A save whose scan stores new content will commit: content the store
//! did not hold is in no checkpoint, so the tree differs from the head's.
//! The scan then calls [`Catalog::open_writable_in_background`] as it
//! stores its first new object, and a thread of the catalog's own closes
//! the read-only handle and opens the file writable while the scan goes on,
//! so the open's `fdatasync` no longer comes before the commit. A save
//! that stores nothing new (nothing changed, or only deletions and
//! renames) opens the file at its commit, as above. Why that is sound:
//! - The read-only handle is closed only while no [`CatalogReader`] is
//!   alive, since closing it would end their snapshot. Readers are counted
//!   under the lock of the lazy state, and a background open starts under
//!   the same lock, so none begins in between. A restore's pre-restore
//!   save, which scans with a reader alive, opens at its commit.
//! - Every reader or write transaction after it waits for the open
//!   (`Opening`), and a failed open is the error of the commit that needed
//!   it, as for an open at the commit. Dropping or closing the catalog
//!   waits for it too, then closes what it opened.
//! - The open writes only redb's header. A crash after it and before the
//!   commit (the scan is longer than the window it replaces) leaves a file
//!   whose last commit recorded its allocator state (a close's): the next
//!   writable open loads that state, with no walk of the file, and the
//!   read-only open falls back to it as for any file that needs a repair.
//!
//! ## Closed while the caller goes on
//! A save that has committed its checkpoint and has nothing more to commit
//! calls [`Catalog::close_in_background`]: the writable handle closes on a
//! thread of its own while the save writes its index, so the close's four
//! `fdatasync`s no longer add to the save. Why that is sound:
//! - The close records the allocator state and the clean-shutdown header.
//!   A crash during it leaves what a crash during any close leaves: a file
//!   whose next writable open repairs it, with every durable commit in it.
//!   The checkpoint's commit is durable before the close starts, or is
//!   made durable by it (next section).
//! - Whatever uses the catalog next waits for the close first, then opens
//!   the file again (read-only for a reader, writable for a write), so no
//!   two handles of the file are ever open in the process at once.
//! - Dropping the catalog waits for the close (`Closing`), and a
//!   [`Store`](crate::store::Store) drops its catalog before its lock, so
//!   no other process opens the file while the close is still writing it.
//!
//! ## Durable at the close
//! The close is itself a durable commit (of the allocator state), and redb
//! makes every commit before a durable one durable with it. So a save in
//! its own process with nothing more to commit ([`Durable::AtClose`])
//! commits its checkpoint with `Durability::None`, which writes the pages
//! but no header and no `fdatasync`, and starts the close on its thread at
//! once: the commit's `fdatasync` leaves the save's path.
//! Why that is sound:
//! - Nothing is reported, and nothing that names the checkpoint's trees
//!   is written, before the close has ended: the save waits for it
//!   ([`Catalog::wait_durable`]) before it renames its index into place
//!   (an index naming trees a crash took from the catalog would let the
//!   next scan reuse a tree that is not stored) and before it returns.
//! - A crash before the close ends leaves the file as its last durable
//!   commit left it, without the checkpoint: what a crash before any
//!   commit leaves (its objects are unreferenced, for gc). A failed close
//!   is the save's error ([`Catalog::closed`]), and that of whatever uses
//!   the catalog next in the process.
//! - A restore's pre-restore save changes files once it is committed, and
//!   the watcher answers before its catalog closes: both commit
//!   [`Durable::AtCommit`].

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use redb::{
    Database, Durability, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use crate::store::contain::opened;
use crate::store::tree::Tree;
use crate::{Error, Hash, Result};

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// The keys of the `meta` table, and how each value is encoded. Only this
/// module reads or writes them; everyone else goes through the typed
/// accessors ([`Catalog::set_head`], [`CatalogReader::journal`], …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Meta {
    /// The head checkpoint's sequence number (u64 little-endian).
    Head,
    /// The store generation, bumped by gc (u64 little-endian).
    Generation,
    /// The restore in progress ([`Journal`], JSON).
    Journal,
    /// The copy capabilities probed at `init` (`ckpt_fs::copy::Caps`, JSON).
    Caps,
    /// The saved retention policy (`crate::store::retention::Policy`, JSON).
    Retention,
    /// The workspace the store belongs to (JSON string: its absolute root).
    Workspace,
    /// Where a fork's store came from ([`Origin`], JSON).
    Origin,
    /// An overlay fork's layers ([`OverlayLayers`], JSON).
    Overlay,
}

impl Meta {
    const fn key(self) -> &'static str {
        match self {
            Meta::Head => "head",
            Meta::Generation => "generation",
            Meta::Journal => "journal",
            Meta::Caps => "caps",
            Meta::Retention => "retention",
            Meta::Workspace => "workspace",
            Meta::Origin => "origin",
            Meta::Overlay => "overlay",
        }
    }
}

fn json_bytes<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("meta values serialise")
}
const CHECKPOINTS: TableDefinition<u64, &[u8]> = TableDefinition::new("checkpoints");
const BY_HASH: TableDefinition<&[u8], u64> = TableDefinition::new("by_hash");
const TREES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("trees");
const ANNOTATIONS: TableDefinition<u64, &[u8]> = TableDefinition::new("annotations");

/// Counts of what a checkpoint changed relative to its parent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChangeStats {
    /// Files (and symlinks) that appeared.
    pub files_added: u64,
    /// Files whose content, mode or kind changed.
    pub files_modified: u64,
    /// Files that disappeared.
    pub files_deleted: u64,
    /// Bytes in added files.
    pub bytes_added: u64,
    /// Bytes (new size) in modified files.
    pub bytes_modified: u64,
    /// Bytes in deleted files.
    pub bytes_deleted: u64,
    /// Objects newly written to the store.
    pub new_objects: u64,
    /// Bytes newly written to the store (what this checkpoint cost).
    pub new_bytes: u64,
}

/// An entry the scan could not capture (socket, FIFO, device).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Workspace-relative path bytes.
    pub path: Vec<u8>,
    /// What it was.
    pub kind: String,
}

/// One checkpoint record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Sequence number: the checkpoint is shown as `v{seq}`.
    pub seq: u64,
    /// BLAKE3 of this record's JSON with `hash` zeroed.
    pub hash: Hash,
    /// The checkpoint the workspace was at when this one was made.
    pub parent: Option<u64>,
    /// Creation time, ns since the epoch.
    pub time_ns: i64,
    /// User message.
    pub message: String,
    /// `KEY=VALUE` tags (agent session, tool, reason, ...).
    pub tags: BTreeMap<String, String>,
    /// Root tree.
    pub root: Hash,
    /// What changed relative to `parent`.
    pub stats: ChangeStats,
    /// Entries that were not captured.
    pub skipped: Vec<Skipped>,
    /// How long the save took, in microseconds.
    pub duration_us: u64,
    /// LtHash16 state digest of the tree, base64url (see [`crate::engine::verify`]).
    /// Optional fields are left out of the JSON when absent so that records
    /// written before a field existed keep their hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The agent-state version captured (latest commit of `state.redb` at
    /// save time); `None` when no state store existed, which stands for the
    /// empty state (see [`crate::store::state`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_version: Option<u64>,
}

impl Checkpoint {
    /// The short id, `v{seq}`.
    pub fn id(&self) -> String {
        format!("v{}", self.seq)
    }

    fn compute_hash(&self) -> Hash {
        let mut c = self.clone();
        c.hash = Hash::default();
        Hash::of(&serde_json::to_vec(&c).expect("checkpoint serialises"))
    }
}

/// Tags and a note added to a checkpoint after it was saved (table
/// `annotations`). Not covered by the record's hash; see the module doc.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotation {
    /// `KEY=VALUE` tags added later (never a key of the save-time tags).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Free text (never empty when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When the annotation last changed, ns since the epoch.
    pub time_ns: i64,
}

impl Annotation {
    /// Nothing left: the entry is removed rather than stored empty.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.note.is_none()
    }
}

/// Where a fork came from (meta `origin` of a fork's store, written once
/// by `ckpt fork`): `ckpt forks` finds a workspace's forks by it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The workspace it was forked from.
    pub workspace: PathBuf,
    /// That workspace's store.
    pub store: PathBuf,
    /// The checkpoint forked (its number in that store; the fork's store
    /// holds it under the same number).
    pub checkpoint: u64,
    /// That checkpoint's root tree.
    pub root: Hash,
}

/// The layers of an overlay fork (meta `overlay` of its store, written by
/// `ckpt fork --backend overlay`, its `dev` again at each mount;
/// docs/FORMAT.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlayLayers {
    /// The shared read-only lower layer: `tree` of a directory
    /// `lowers/<root tree>` in the origin's store.
    pub lower: PathBuf,
    /// This fork's upper layer (hidden, beside the fork's directory).
    pub upper: PathBuf,
    /// overlayfs's work directory for it.
    pub work: PathBuf,
    /// The device number the stat index's entries were taken on (the
    /// lower's filesystem for a fresh fork, then the last mount's): a new
    /// mount reads them through a device map to its own.
    pub dev: u64,
}

/// A restore that was started and may not have finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// Target checkpoint.
    pub target: u64,
    /// Restricting paths (empty: whole tree).
    pub paths: Vec<Vec<u8>>,
    /// The checkpoint that undoes the restore.
    pub undo: Option<u64>,
}

/// When a checkpoint's commit is durable ([`Catalog::commit_checkpoint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durable {
    /// When the commit returns (`Durability::Immediate`): for a caller
    /// that goes on using the catalog, acts on the checkpoint (a restore
    /// changes files once its pre-restore save is committed) or answers
    /// before the catalog closes (the watcher).
    AtCommit,
    /// When the catalog's close ends: the commit writes without an
    /// `fdatasync` (`Durability::None`), and the close, started on a thread
    /// of its own as the commit returns, makes it durable with its own
    /// (see "Durable at the close" in the module doc). For a save with
    /// nothing more to commit, which then waits with
    /// [`Catalog::wait_durable`] before it writes an index that names the
    /// checkpoint's trees, or reports the checkpoint. A catalog not opened
    /// lazily commits as [`Durable::AtCommit`].
    AtClose,
}

/// The open catalog.
pub struct Catalog {
    db: Db,
    path: PathBuf,
    /// Live [`CatalogReader`]s: a handle with one is never closed under it
    /// ([`Catalog::open_writable_in_background`]). Counted under the lock
    /// of [`Db::Lazy`].
    readers: AtomicUsize,
    /// Opened with [`Catalog::open_unsynced`]: the file, made durable once
    /// by [`Catalog::close`].
    unsynced: Option<std::fs::File>,
}

/// The redb backend of [`Catalog::open_unsynced`]: redb's own file backend
/// (its reads, writes and locks), except that `sync_data` does nothing.
/// redb syncs the file when it is opened for writing, at each durable
/// commit and twice when it is closed; each `fdatasync` of a file in a
/// fresh btrfs snapshot also adds to the transaction commit that
/// publishes a fork, so a fork paid for six. Its
/// commits are still atomic for readers in this process; what they lose
/// is only their order on disk, which matters only to a reader after a
/// crash: no workspace names the store of an unpublished fork, and
/// `ckpt stores`, which lists every store under the data home, reports
/// one it cannot read as such.
#[derive(Debug)]
struct Unsynced(redb::backends::FileBackend);

impl redb::StorageBackend for Unsynced {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        self.0.close()
    }
    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> LockResult<bool> {
        self.0.try_lock_range(start, end)
    }
    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> LockResult<bool> {
        self.0.try_lock_shared_range(start, end)
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> LockResult<()> {
        self.0.lock_range(start, end)
    }
    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> LockResult<()> {
        self.0.lock_shared_range(start, end)
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> LockResult<()> {
        self.0.unlock_range(start, end)
    }
    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> LockResult<bool> {
        self.0.query_lock_range(start, end)
    }
}

type LockResult<T> = std::result::Result<T, redb::BackendError>;

/// How the catalog is open. A writable redb database records its allocator
/// state in a final commit when it is closed (several `fdatasync`s); a
/// read-only handle writes nothing, so commands that only read
/// ([`Catalog::open_read_only`]) do not pay for it.
enum Db {
    Write(Database),
    Read(ReadOnlyDatabase),
    /// Read-only until the first write transaction ("Opened writable only
    /// when a commit is due", in the module doc), and closed on a thread of
    /// its own once the caller is done writing ("Closed while the caller
    /// goes on").
    Lazy(std::sync::Mutex<Lazy>),
}

/// The states of [`Db::Lazy`].
enum Lazy {
    /// Until the first write transaction.
    Read(ReadOnlyDatabase),
    /// Being opened writable on a thread of its own
    /// ([`Catalog::open_writable_in_background`]).
    Opening(Opening),
    /// Opened writable by a write transaction (the read-only handle closed
    /// first).
    Write(Database),
    /// Closing on a thread of its own ([`Catalog::close_in_background`]).
    Closing(Closing),
    /// A failed writable open or reopen: the error said so.
    Gone,
}

impl Lazy {
    /// The file opened read-only, or writable when it needs the repair a
    /// writable open makes (its last writer crashed, or its close failed).
    fn open(path: &Path) -> std::result::Result<Lazy, redb::DatabaseError> {
        match opened(|| Database::builder().open_read_only(path)) {
            Ok(db) => Ok(Lazy::Read(db)),
            Err(_) => opened(|| Database::open(path)).map(Lazy::Write),
        }
    }
}

/// A writable handle closing on a thread of its own. Dropping this waits
/// for the close, so it ends before the store lock, which the [`Store`]
/// drops after its catalog, is released (see "Closed while the caller goes
/// on").
///
/// [`Store`]: crate::store::Store
struct Closing {
    thread: Option<std::thread::JoinHandle<std::result::Result<(), redb::DatabaseError>>>,
    /// The last commit was made with [`Durable::AtClose`]: only this close
    /// makes it durable, so its failure is that commit's (see
    /// [`Catalog::closed`]).
    durable: bool,
}

impl Closing {
    /// Closes `db` on a thread of its own. If the thread does not start,
    /// here: a failure is then kept for [`Catalog::closed`] to report
    /// when `durable` (a waited-for close still `durable` has failed).
    fn start(db: Database, durable: bool) -> Closing {
        let (give, take) = std::sync::mpsc::sync_channel::<Database>(1);
        let spawned = std::thread::Builder::new()
            .name("ckpt-catalog-close".into())
            .spawn(move || {
                take.recv().map_or(Ok(()), |db| {
                    if durable {
                        ckpt_fault::point("catalog.before_durable_close");
                    }
                    db.close()
                })
            });
        match spawned {
            // (the thread waits for the handle, so the send succeeds)
            Ok(thread) => {
                let _ = give.send(db);
                Closing {
                    thread: Some(thread),
                    durable,
                }
            }
            Err(_) => Closing {
                thread: None,
                durable: durable && db.close().is_err(),
            },
        }
    }

    /// Waits for the close; its error, if it failed (the file then needs
    /// the repair its next writable open makes).
    fn wait(&mut self) -> std::result::Result<(), redb::DatabaseError> {
        match self.thread.take().map(|h| h.join()) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            // The close panicked (a redb bug): the file is left as after a
            // crash, for the next open to repair.
            Some(Err(_)) => Err(redb::DatabaseError::Storage(redb::StorageError::Io(
                std::io::Error::other("closing the catalog panicked"),
            ))),
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        let _ = self.wait();
    }
}

/// The file being opened writable on a thread of its own (its read-only
/// handle closed there first). Dropping this waits for the open and closes
/// what it opened.
struct Opening(Option<std::thread::JoinHandle<std::result::Result<Database, redb::DatabaseError>>>);

impl Opening {
    /// Closes `ro` and opens `path` writable on a thread of its own; if the
    /// thread does not start, here.
    fn start(path: &Path, ro: ReadOnlyDatabase) -> Lazy {
        let open = {
            let path = path.to_path_buf();
            move || {
                ro.close()?;
                ckpt_fault::point("catalog.before_writable_open");
                opened(|| Database::open(&path))
            }
        };
        let spawned = std::thread::Builder::new()
            .name("ckpt-catalog-open".into())
            .spawn(open);
        match spawned {
            Ok(h) => Lazy::Opening(Opening(Some(h))),
            // A thread that does not start drops the closure, and with it
            // the read-only handle, which closes it: open here instead (a
            // failed open leaves `Gone`, and the commit opens again).
            Err(_) => match opened(|| Database::open(path)) {
                Ok(db) => Lazy::Write(db),
                Err(_) => Lazy::Gone,
            },
        }
    }

    /// Waits for the open: the writable handle, or why it failed.
    fn wait(&mut self) -> std::result::Result<Database, redb::DatabaseError> {
        match self.0.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            // Waited for already (never: callers take the state out
            // first), or the open panicked (a redb bug): nothing was
            // committed.
            None | Some(Err(_)) => Err(redb::DatabaseError::Storage(redb::StorageError::Io(
                std::io::Error::other("opening the catalog for writing panicked"),
            ))),
        }
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if self.0.is_some() {
            let _ = self.wait();
        }
    }
}

fn u64_bytes(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

fn bytes_u64(b: &[u8]) -> Option<u64> {
    b.try_into().ok().map(u64::from_le_bytes)
}

impl Catalog {
    fn err(&self, e: impl Into<redb::Error>) -> Error {
        catalog_error(&self.path, e)
    }

    /// Creates a new, empty catalog.
    pub fn create(path: &Path) -> Result<Catalog> {
        let db = Database::create(path).map_err(|e| catalog_error(path, e))?;
        let cat = Catalog {
            db: Db::Write(db),
            path: path.to_path_buf(),
            readers: AtomicUsize::new(0),
            unsynced: None,
        };
        let txn = cat.begin_write()?;
        {
            let mut meta = txn.open_table(META).map_err(|e| cat.err(e))?;
            meta.insert("format", u64_bytes(1).as_slice())
                .map_err(|e| cat.err(e))?;
            meta.insert("next_seq", u64_bytes(1).as_slice())
                .map_err(|e| cat.err(e))?;
            meta.insert(Meta::Generation.key(), u64_bytes(0).as_slice())
                .map_err(|e| cat.err(e))?;
            txn.open_table(CHECKPOINTS).map_err(|e| cat.err(e))?;
            txn.open_table(BY_HASH).map_err(|e| cat.err(e))?;
            txn.open_table(TREES).map_err(|e| cat.err(e))?;
        }
        txn.commit().map_err(|e| cat.err(e))?;
        Ok(cat)
    }

    /// Opens an existing catalog.
    pub fn open(path: &Path) -> Result<Catalog> {
        if !path.exists() {
            return Err(Error::Corrupt(format!("{} is missing", path.display())));
        }
        let db = opened(|| Database::open(path)).map_err(|e| catalog_error(path, e))?;
        Ok(Catalog {
            db: Db::Write(db),
            path: path.to_path_buf(),
            readers: AtomicUsize::new(0),
            unsynced: None,
        })
    }

    /// Opens an existing catalog for writing without making anything
    /// durable until [`Catalog::close`], which does it with one
    /// `fdatasync` ([`Unsynced`]). Only for the store of a fork that is not
    /// published yet: after a crash before that close, the file may be
    /// unreadable, and no workspace names it (the fork is not published).
    pub fn open_unsynced(path: &Path) -> Result<Catalog> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        // An empty file would be made a new, empty catalog.
        if file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len()
            == 0
        {
            return Err(Error::Corrupt(format!("{} is empty", path.display())));
        }
        let keep = file.try_clone().map_err(|e| Error::io("open", path, e))?;
        let backend = redb::backends::FileBackend::new(file).map_err(|e| catalog_error(path, e))?;
        let db = opened(|| Database::builder().create_with_backend(Unsynced(backend)))
            .map_err(|e| catalog_error(path, e))?;
        Ok(Catalog {
            db: Db::Write(db),
            path: path.to_path_buf(),
            readers: AtomicUsize::new(0),
            unsynced: Some(keep),
        })
    }

    /// Closes the catalog, reporting what closing it wrote; one opened
    /// with [`Catalog::open_unsynced`] is durable when this returns.
    pub fn close(self) -> Result<()> {
        match self.db {
            Db::Write(db) => db.close(),
            Db::Read(db) => db.close(),
            Db::Lazy(lazy) => match lazy.into_inner().unwrap_or_else(|p| p.into_inner()) {
                Lazy::Read(db) => db.close(),
                Lazy::Opening(mut o) => o.wait().and_then(|db| db.close()),
                Lazy::Write(db) => db.close(),
                Lazy::Closing(mut c) => c.wait(),
                Lazy::Gone => Ok(()),
            },
        }
        .map_err(|e| catalog_error(&self.path, e))?;
        match self.unsynced {
            Some(f) => f
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &self.path, e)),
            None => Ok(()),
        }
    }

    /// Opens an existing catalog for reading only: nothing is written, not
    /// even when it is closed. A catalog that needs a repair (the last
    /// writer crashed) cannot be read without one, so it is then opened
    /// writable, which repairs it.
    pub fn open_read_only(path: &Path) -> Result<Catalog> {
        if !path.exists() {
            return Err(Error::Corrupt(format!("{} is missing", path.display())));
        }
        match opened(|| Database::builder().open_read_only(path)) {
            Ok(db) => Ok(Catalog {
                db: Db::Read(db),
                path: path.to_path_buf(),
                readers: AtomicUsize::new(0),
                unsynced: None,
            }),
            Err(_) => Catalog::open(path),
        }
    }

    /// Opens an existing catalog read-only, to be reopened writable by its
    /// first write transaction (see "Opened writable only when a commit is
    /// due" in the module doc): for a save, which often commits nothing.
    /// A catalog that needs a repair is opened writable at once, which
    /// repairs it.
    pub fn open_lazily(path: &Path) -> Result<Catalog> {
        if !path.exists() {
            return Err(Error::Corrupt(format!("{} is missing", path.display())));
        }
        let lazy = Lazy::open(path).map_err(|e| catalog_error(path, e))?;
        Ok(Catalog {
            db: Db::Lazy(std::sync::Mutex::new(lazy)),
            path: path.to_path_buf(),
            readers: AtomicUsize::new(0),
            unsynced: None,
        })
    }

    /// Begins a write transaction: for a lazily opened catalog, through a
    /// handle opened writable now if it is not yet (its read-only handle
    /// closed first, or its background close waited for).
    fn begin_write(&self) -> Result<WriteTransaction> {
        let txn = match &self.db {
            Db::Write(db) => db.begin_write(),
            Db::Lazy(lazy) => {
                let mut state = lazy.lock().unwrap_or_else(|p| p.into_inner());
                // The writable handle, if there is one or one is being
                // opened (a failed open leaves `Gone`).
                let writable = match std::mem::replace(&mut *state, Lazy::Gone) {
                    Lazy::Write(db) => Some(db),
                    Lazy::Opening(mut o) => Some(o.wait().map_err(|e| self.err(e))?),
                    Lazy::Read(ro) => {
                        ro.close().map_err(|e| self.err(e))?;
                        None
                    }
                    // A failed close leaves the file for this open to
                    // repair, with every durable commit in it.
                    Lazy::Closing(mut c) => {
                        Catalog::closed(&self.path, &mut c)?;
                        None
                    }
                    Lazy::Gone => None,
                };
                let db = match writable {
                    Some(db) => db,
                    None => {
                        ckpt_fault::point("catalog.before_writable_open");
                        opened(|| Database::open(&self.path)).map_err(|e| self.err(e))?
                    }
                };
                let txn = db.begin_write();
                *state = Lazy::Write(db);
                txn
            }
            Db::Read(_) => {
                return Err(Error::Usage(format!(
                "internal error: a write to {} through a read-only handle (nothing was changed)",
                self.path.display()
            )))
            }
        };
        txn.map_err(|e| self.err(e))
    }

    /// Closes a lazily opened catalog's writable handle on a thread of its
    /// own, so that what the caller does next (a save writes its index)
    /// overlaps with the close's `fdatasync`s. For a caller done with the
    /// catalog: its next use waits for the close and opens the file again.
    /// Does nothing to a catalog opened any other way, or not opened
    /// writable (see "Closed while the caller goes on" in the module doc).
    pub fn close_in_background(&self) {
        self.close_on_thread(false);
    }

    /// [`Catalog::close_in_background`], for a close that `durable`
    /// makes the last commit durable ([`Durable::AtClose`]).
    fn close_on_thread(&self, durable: bool) {
        let Db::Lazy(lazy) = &self.db else {
            return;
        };
        let mut state = lazy.lock().unwrap_or_else(|p| p.into_inner());
        let taken = match std::mem::replace(&mut *state, Lazy::Gone) {
            Lazy::Opening(mut o) => match o.wait() {
                Ok(db) => Lazy::Write(db),
                Err(_) => Lazy::Gone,
            },
            other => other,
        };
        *state = match taken {
            Lazy::Write(db) => Lazy::Closing(Closing::start(db, durable)),
            other => other,
        };
    }

    /// Waits for a background close. Its failure is an error only when
    /// that close was to make the last commit durable
    /// ([`Durable::AtClose`]): that commit may then be lost. Any other
    /// failed close leaves the file for the next writable open to repair,
    /// with every commit in it, and the caller goes on.
    fn closed(path: &Path, c: &mut Closing) -> Result<()> {
        let waited = c.thread.is_none();
        let closed = c.wait();
        if !c.durable {
            return Ok(());
        }
        let why = match (waited, closed) {
            (false, Ok(())) => {
                c.durable = false;
                return Ok(());
            }
            (_, Err(e)) => e.to_string(),
            // Waited for before, and failed then.
            (true, Ok(())) => "it failed".to_string(),
        };
        Err(Error::Catalog {
            path: path.to_path_buf(),
            message: format!(
                "the new checkpoint was written, but closing the catalog, which makes it \
                 durable, failed ({why}): it may be lost in a crash, and no index names it; \
                 nothing else was changed\n  run `ckpt save` again (`ckpt doctor` checks the disk)"
            ),
        })
    }

    /// Waits until every checkpoint this catalog committed is durable: for
    /// one committed with [`Durable::AtClose`], until its close ends (its
    /// failure is then this error, see [`Catalog::closed`]). Returns at
    /// once otherwise.
    pub fn wait_durable(&self) -> Result<()> {
        let Db::Lazy(lazy) = &self.db else {
            return Ok(());
        };
        let mut state = lazy.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *state {
            Lazy::Closing(c) if c.durable => Catalog::closed(&self.path, c),
            _ => Ok(()),
        }
    }

    /// Begins a read transaction (a consistent snapshot).
    pub fn reader(&self) -> Result<CatalogReader<'_>> {
        let txn = match &self.db {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
            Db::Lazy(lazy) => {
                let mut state = lazy.lock().unwrap_or_else(|p| p.into_inner());
                // (a failed reopen or open leaves `Gone`)
                match std::mem::replace(&mut *state, Lazy::Gone) {
                    Lazy::Closing(mut c) => {
                        Catalog::closed(&self.path, &mut c)?;
                        *state = Lazy::open(&self.path).map_err(|e| self.err(e))?;
                    }
                    Lazy::Opening(mut o) => {
                        *state = Lazy::Write(o.wait().map_err(|e| self.err(e))?);
                    }
                    other => *state = other,
                }
                let txn = match &*state {
                    Lazy::Read(db) => db.begin_read(),
                    Lazy::Write(db) => db.begin_read(),
                    Lazy::Opening(_) | Lazy::Closing(_) | Lazy::Gone => Err(
                        redb::TransactionError::Storage(redb::StorageError::DatabaseClosed),
                    ),
                };
                // Counted before the lock is released: a background open
                // that takes the lock next sees this reader.
                let txn = txn.map_err(|e| self.err(e))?;
                return Ok(CatalogReader::new(txn, self));
            }
        };
        Ok(CatalogReader::new(txn.map_err(|e| self.err(e))?, self))
    }

    /// Starts opening a lazily opened catalog writable on a thread of its
    /// own, for a save that now knows it will commit (its scan stored new
    /// content): the open's `fdatasync` then overlaps with the rest of the
    /// scan instead of coming before the commit (see "Opened writable
    /// while the scan goes on" in the module doc). The next write
    /// transaction or reader waits for the open, and a failed open is its
    /// error. Does nothing while a reader is alive (closing the read-only
    /// handle would end its snapshot), once the catalog is writable, or to
    /// a catalog opened any other way.
    pub fn open_writable_in_background(&self) {
        let Db::Lazy(lazy) = &self.db else {
            return;
        };
        let mut state = lazy.lock().unwrap_or_else(|p| p.into_inner());
        if self.readers.load(Ordering::SeqCst) > 0 {
            return;
        }
        *state = match std::mem::replace(&mut *state, Lazy::Gone) {
            Lazy::Read(ro) => Opening::start(&self.path, ro),
            other => other,
        };
    }

    /// Commits a new checkpoint with its new trees, making it the head,
    /// durable when `durable` says. Fills in `seq` and `hash`. With
    /// `journal`, that restore journal is recorded in the same
    /// transaction, its `undo` set to the new checkpoint.
    pub fn commit_checkpoint(
        &self,
        new_trees: &[(Hash, Vec<u8>)],
        record: Checkpoint,
        journal: Option<&Journal>,
        durable: Durable,
    ) -> Result<Checkpoint> {
        self.commit_record(new_trees, record, journal, None, true, durable)
    }

    /// Records a checkpoint brought from another store (`ckpt fork`,
    /// `ckpt adopt`, a remote pull or clone) with the trees it needs, in one durable transaction.
    /// Its number is `seq` when given (it must not be below `next_seq`: a
    /// fork's store starts at its origin's number), else the next one; it
    /// becomes the head only with `make_head` (an adopted checkpoint is
    /// only the target of the restore that follows). Fills in `seq` and
    /// `hash`.
    pub fn import_checkpoint(
        &self,
        trees: &[(Hash, Vec<u8>)],
        record: Checkpoint,
        seq: Option<u64>,
        make_head: bool,
    ) -> Result<Checkpoint> {
        self.commit_record(trees, record, None, seq, make_head, Durable::AtCommit)
    }

    fn commit_record(
        &self,
        new_trees: &[(Hash, Vec<u8>)],
        mut record: Checkpoint,
        journal: Option<&Journal>,
        want_seq: Option<u64>,
        make_head: bool,
        durable: Durable,
    ) -> Result<Checkpoint> {
        // Made durable by the close that starts right after, for a lazily
        // opened catalog (the only kind closed in the background).
        let at_close = matches!((durable, &self.db), (Durable::AtClose, Db::Lazy(_)));
        let mut txn = self.begin_write()?;
        txn.set_durability(match at_close {
            true => Durability::None,
            false => Durability::Immediate,
        })
        .map_err(|e| self.err(redb::Error::from(e)))?;
        {
            let mut meta = txn.open_table(META).map_err(|e| self.err(e))?;
            let next = meta
                .get("next_seq")
                .map_err(|e| self.err(e))?
                .and_then(|v| bytes_u64(v.value()))
                .ok_or_else(|| Error::Corrupt("catalog has no next_seq".into()))?;
            let seq = want_seq.unwrap_or(next).max(next);
            record.seq = seq;
            record.hash = record.compute_hash();
            meta.insert("next_seq", u64_bytes(seq + 1).as_slice())
                .map_err(|e| self.err(e))?;
            if make_head {
                meta.insert(Meta::Head.key(), u64_bytes(seq).as_slice())
                    .map_err(|e| self.err(e))?;
            }
            if let Some(j) = journal {
                let j = Journal {
                    undo: Some(seq),
                    ..j.clone()
                };
                let json = serde_json::to_vec(&j).expect("journal serialises");
                meta.insert(Meta::Journal.key(), json.as_slice())
                    .map_err(|e| self.err(e))?;
            }
            let mut trees = txn.open_table(TREES).map_err(|e| self.err(e))?;
            for (h, bytes) in new_trees {
                trees
                    .insert(h.0.as_slice(), bytes.as_slice())
                    .map_err(|e| self.err(e))?;
            }
            let json = serde_json::to_vec(&record).expect("checkpoint serialises");
            txn.open_table(CHECKPOINTS)
                .map_err(|e| self.err(e))?
                .insert(seq, json.as_slice())
                .map_err(|e| self.err(e))?;
            txn.open_table(BY_HASH)
                .map_err(|e| self.err(e))?
                .insert(record.hash.0.as_slice(), seq)
                .map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))?;
        if at_close {
            self.close_on_thread(true);
        }
        Ok(record)
    }

    /// Whether the catalog holds tree `h` (unverified; a pull skips the
    /// trees it already has).
    pub fn has_tree(&self, h: &Hash) -> Result<bool> {
        let r = self.reader()?;
        let t = r.txn.open_table(TREES).map_err(|e| self.err(e))?;
        Ok(t.get(h.0.as_slice()).map_err(|e| self.err(e))?.is_some())
    }

    /// Writes (or with `None` removes) meta values in one durable transaction.
    fn set_meta(&self, entries: &[(Meta, Option<Vec<u8>>)]) -> Result<()> {
        let txn = self.begin_write()?;
        {
            let mut meta = txn.open_table(META).map_err(|e| self.err(e))?;
            for (k, v) in entries {
                match v {
                    Some(v) => meta.insert(k.key(), v.as_slice()).map(|_| ()),
                    None => meta.remove(k.key()).map(|_| ()),
                }
                .map_err(|e| self.err(e))?;
            }
        }
        txn.commit().map_err(|e| self.err(e))
    }

    /// Sets the head checkpoint.
    pub fn set_head(&self, seq: Option<u64>) -> Result<()> {
        self.set_meta(&[(Meta::Head, seq.map(|s| u64_bytes(s).to_vec()))])
    }

    /// Ends a restore in one transaction: clears the journal and, when the
    /// whole workspace was restored, sets the head to `head`.
    pub fn finish_restore(&self, head: Option<u64>) -> Result<()> {
        let mut entries = vec![(Meta::Journal, None)];
        if let Some(h) = head {
            entries.push((Meta::Head, Some(u64_bytes(h).to_vec())));
        }
        self.set_meta(&entries)
    }

    /// Records the copy capabilities probed at `init`.
    pub fn set_caps(&self, caps: &ckpt_fs::copy::Caps) -> Result<()> {
        self.set_meta(&[(Meta::Caps, Some(json_bytes(caps)))])
    }

    /// Stores the retention policy (`None` removes it).
    pub fn set_retention<T: Serialize>(&self, policy: Option<&T>) -> Result<()> {
        self.set_meta(&[(Meta::Retention, policy.map(json_bytes))])
    }

    /// Records the root of the workspace the store belongs to (`init`,
    /// `init --attach`), so `ckpt stores` can say whose store it is.
    pub fn set_workspace(&self, root: &std::path::Path) -> Result<()> {
        self.set_meta(&[(Meta::Workspace, Some(json_bytes(&root)))])
    }

    /// Records where this fork's store came from.
    pub fn set_origin(&self, origin: &Origin) -> Result<()> {
        self.set_meta(&[(Meta::Origin, Some(json_bytes(origin)))])
    }

    /// Records an overlay fork's layers.
    pub fn set_overlay(&self, layers: &OverlayLayers) -> Result<()> {
        self.set_meta(&[(Meta::Overlay, Some(json_bytes(layers)))])
    }

    /// Makes a snapshot of another store the store of the fork `root`, in
    /// one transaction: its workspace, its origin, checkpoint `head` as its
    /// head, and no restore journal (the fork is restored to `head` next,
    /// whatever the origin was doing).
    pub fn start_fork(&self, root: &std::path::Path, origin: &Origin, head: u64) -> Result<()> {
        self.set_meta(&[
            (Meta::Workspace, Some(json_bytes(&root))),
            (Meta::Origin, Some(json_bytes(origin))),
            (Meta::Head, Some(u64_bytes(head).to_vec())),
            (Meta::Journal, None),
        ])
    }

    /// Records (or clears) the restore journal.
    pub fn set_journal(&self, journal: Option<&Journal>) -> Result<()> {
        self.set_meta(&[(Meta::Journal, journal.map(json_bytes))])
    }

    /// Deletes a checkpoint record. If it was the head, the head moves to its
    /// parent. Objects and trees stay until `gc`.
    pub fn delete_checkpoint(&self, cp: &Checkpoint) -> Result<()> {
        let txn = self.begin_write()?;
        {
            let mut meta = txn.open_table(META).map_err(|e| self.err(e))?;
            let head = meta
                .get(Meta::Head.key())
                .map_err(|e| self.err(e))?
                .and_then(|v| bytes_u64(v.value()));
            if head == Some(cp.seq) {
                match cp.parent {
                    Some(p) => meta
                        .insert(Meta::Head.key(), u64_bytes(p).as_slice())
                        .map(|_| ()),
                    None => meta.remove(Meta::Head.key()).map(|_| ()),
                }
                .map_err(|e| self.err(e))?;
            }
            txn.open_table(CHECKPOINTS)
                .map_err(|e| self.err(e))?
                .remove(cp.seq)
                .map_err(|e| self.err(e))?;
            txn.open_table(BY_HASH)
                .map_err(|e| self.err(e))?
                .remove(cp.hash.0.as_slice())
                .map_err(|e| self.err(e))?;
            txn.open_table(ANNOTATIONS)
                .map_err(|e| self.err(e))?
                .remove(cp.seq)
                .map_err(|e| self.err(e))?;
        }
        ckpt_fault::point("delete.before_commit");
        txn.commit().map_err(|e| self.err(e))?;
        ckpt_fault::point("delete.after_commit");
        Ok(())
    }

    /// Changes checkpoint `seq`'s annotation in one durable transaction
    /// that also reads its record, so an annotation never outlives or
    /// precedes its checkpoint (module doc). `edit` gets the record and the
    /// current annotation and returns the new one; an empty result removes
    /// the entry. Returns what was stored (`None`: nothing).
    pub fn annotate(
        &self,
        seq: u64,
        edit: impl FnOnce(&Checkpoint, Option<Annotation>) -> Result<Annotation>,
    ) -> Result<Option<Annotation>> {
        let txn = self.begin_write()?;
        let stored = {
            let records = txn.open_table(CHECKPOINTS).map_err(|e| self.err(e))?;
            let cp = match records.get(seq).map_err(|e| self.err(e))? {
                Some(v) => decode_checkpoint(seq, v.value())?,
                None => {
                    return Err(Error::BadRevision(format!(
                        "no checkpoint v{seq} (it was deleted; see `ckpt log`)"
                    )))
                }
            };
            let mut table = txn.open_table(ANNOTATIONS).map_err(|e| self.err(e))?;
            let old = match table.get(seq).map_err(|e| self.err(e))? {
                Some(v) => Some(decode_annotation(seq, v.value())?),
                None => None,
            };
            let new = edit(&cp, old)?;
            if new.is_empty() {
                table.remove(seq).map_err(|e| self.err(e))?;
                None
            } else {
                let json = serde_json::to_vec(&new).expect("annotation serialises");
                table
                    .insert(seq, json.as_slice())
                    .map_err(|e| self.err(e))?;
                Some(new)
            }
        };
        txn.commit().map_err(|e| self.err(e))?;
        Ok(stored)
    }

    /// Removes trees and bumps the generation in one transaction (gc).
    pub fn remove_trees(&self, dead: &[Hash], generation: u64) -> Result<()> {
        let txn = self.begin_write()?;
        {
            let mut trees = txn.open_table(TREES).map_err(|e| self.err(e))?;
            for h in dead {
                trees.remove(h.0.as_slice()).map_err(|e| self.err(e))?;
            }
            txn.open_table(META)
                .map_err(|e| self.err(e))?
                .insert(Meta::Generation.key(), u64_bytes(generation).as_slice())
                .map_err(|e| self.err(e))?;
        }
        txn.commit().map_err(|e| self.err(e))
    }
}

/// A catalog error; running out of space is an I/O error on the catalog
/// file, like any other write that did not fit (see
/// [`Error::is_out_of_space`]).
fn catalog_error(path: &Path, e: impl Into<redb::Error>) -> Error {
    match e.into() {
        redb::Error::Io(io) if crate::error::no_space(&io) => Error::io("write", path, io),
        e => Error::Catalog {
            path: path.to_path_buf(),
            message: e.to_string(),
        },
    }
}

/// A consistent read snapshot of the catalog.
pub struct CatalogReader<'a> {
    txn: ReadTransaction,
    cat: &'a Catalog,
}

impl<'a> CatalogReader<'a> {
    /// A reader of `cat`, counted among its live readers until dropped.
    fn new(txn: ReadTransaction, cat: &'a Catalog) -> Self {
        cat.readers.fetch_add(1, Ordering::SeqCst);
        CatalogReader { txn, cat }
    }
}

impl Drop for CatalogReader<'_> {
    fn drop(&mut self) {
        self.cat.readers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl CatalogReader<'_> {
    fn meta(&self, key: Meta) -> Result<Option<Vec<u8>>> {
        let t = self.txn.open_table(META).map_err(|e| self.cat.err(e))?;
        Ok(t.get(key.key())
            .map_err(|e| self.cat.err(e))?
            .map(|v| v.value().to_vec()))
    }

    fn meta_u64(&self, key: Meta) -> Result<Option<u64>> {
        Ok(self.meta(key)?.and_then(|v| bytes_u64(&v)))
    }

    /// The head checkpoint's sequence number.
    pub fn head(&self) -> Result<Option<u64>> {
        self.meta_u64(Meta::Head)
    }

    /// The head checkpoint's record (None: no checkpoint yet).
    pub fn head_checkpoint(&self) -> Result<Option<Checkpoint>> {
        match self.head()? {
            Some(s) => self.checkpoint(s),
            None => Ok(None),
        }
    }

    /// The store generation (bumped by gc).
    pub fn generation(&self) -> Result<u64> {
        Ok(self.meta_u64(Meta::Generation)?.unwrap_or(0))
    }

    fn meta_json<T: for<'de> Deserialize<'de>>(&self, key: Meta) -> Result<Option<T>> {
        match self.meta(key)? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| Error::Corrupt(format!("catalog meta {}: {e}", key.key()))),
        }
    }

    /// The in-progress restore, if any.
    pub fn journal(&self) -> Result<Option<Journal>> {
        self.meta_json(Meta::Journal)
    }

    /// The copy capabilities probed at `init` (None: an old store).
    pub fn caps(&self) -> Result<Option<ckpt_fs::copy::Caps>> {
        self.meta_json(Meta::Caps)
    }

    /// The root of the workspace the store belongs to (None: a store made
    /// before ckpt recorded it).
    pub fn workspace(&self) -> Result<Option<std::path::PathBuf>> {
        self.meta_json(Meta::Workspace)
    }

    /// The saved retention policy, if any.
    pub fn retention<T: for<'de> Deserialize<'de>>(&self) -> Result<Option<T>> {
        self.meta_json(Meta::Retention)
    }

    /// One checkpoint by sequence number.
    pub fn checkpoint(&self, seq: u64) -> Result<Option<Checkpoint>> {
        let t = self
            .txn
            .open_table(CHECKPOINTS)
            .map_err(|e| self.cat.err(e))?;
        let Some(v) = t.get(seq).map_err(|e| self.cat.err(e))? else {
            return Ok(None);
        };
        decode_checkpoint(seq, v.value()).map(Some)
    }

    /// All checkpoints, oldest first.
    pub fn checkpoints(&self) -> Result<Vec<Checkpoint>> {
        let t = self
            .txn
            .open_table(CHECKPOINTS)
            .map_err(|e| self.cat.err(e))?;
        let mut out = Vec::new();
        for item in t.iter().map_err(|e| self.cat.err(e))? {
            let (k, v) = item.map_err(|e| self.cat.err(e))?;
            out.push(decode_checkpoint(k.value(), v.value())?);
        }
        Ok(out)
    }

    /// How many checkpoints there are.
    pub fn count(&self) -> Result<u64> {
        let t = self
            .txn
            .open_table(CHECKPOINTS)
            .map_err(|e| self.cat.err(e))?;
        t.len().map_err(|e| self.cat.err(e))
    }

    /// The checkpoints with a sequence number below `before` (all when
    /// `None`), newest first, handed to `f` one by one until it returns
    /// `false`: a page of the history costs the records it reads, not all
    /// of them.
    pub fn for_each_newest(
        &self,
        before: Option<u64>,
        mut f: impl FnMut(Checkpoint) -> Result<bool>,
    ) -> Result<()> {
        let t = self
            .txn
            .open_table(CHECKPOINTS)
            .map_err(|e| self.cat.err(e))?;
        let range = t
            .range(..before.unwrap_or(u64::MAX))
            .map_err(|e| self.cat.err(e))?;
        for item in range.rev() {
            let (k, v) = item.map_err(|e| self.cat.err(e))?;
            if !f(decode_checkpoint(k.value(), v.value())?)? {
                break;
            }
        }
        Ok(())
    }

    /// Resolves a user-given id: `v12`, `12`, a unique hex prefix of a
    /// checkpoint hash (≥ 4 digits), `HEAD`/`@` (the head), `latest`, each
    /// optionally followed by `~N` (N parents back).
    pub fn resolve(&self, rev: &str) -> Result<Checkpoint> {
        let (base, back) = match rev.split_once('~') {
            Some((b, n)) => (
                b,
                if n.is_empty() {
                    1
                } else {
                    n.parse::<u64>().map_err(|_| {
                        Error::BadRevision(format!(
                            "bad checkpoint id {rev:?}: `~` must be followed by a number"
                        ))
                    })?
                },
            ),
            None => (rev, 0),
        };
        let mut cp = self.resolve_base(base)?;
        for _ in 0..back {
            let p = cp
                .parent
                .ok_or_else(|| Error::BadRevision(format!("{rev}: {} has no parent", cp.id())))?;
            cp = self
                .checkpoint(p)?
                .ok_or_else(|| Error::BadRevision(format!("{rev}: parent v{p} was deleted")))?;
        }
        Ok(cp)
    }

    fn resolve_base(&self, rev: &str) -> Result<Checkpoint> {
        let not_found = || Error::BadRevision(format!("no checkpoint {rev:?} (see `ckpt log`)"));
        let seq = match rev {
            "HEAD" | "@" | "head" => self.head()?.ok_or_else(|| {
                Error::BadRevision("no checkpoint yet: run `ckpt save` first".into())
            })?,
            "latest" => self
                .checkpoints()?
                .last()
                .map(|c| c.seq)
                .ok_or_else(not_found)?,
            _ => {
                let digits = rev.strip_prefix('v').unwrap_or(rev);
                if let Ok(n) = digits.parse::<u64>() {
                    if rev.starts_with('v') || self.checkpoint(n)?.is_some() {
                        n
                    } else {
                        self.by_prefix(rev)?.ok_or_else(not_found)?
                    }
                } else {
                    self.by_prefix(rev)?.ok_or_else(not_found)?
                }
            }
        };
        self.checkpoint(seq)?.ok_or_else(not_found)
    }

    fn by_prefix(&self, prefix: &str) -> Result<Option<u64>> {
        if prefix.len() < 4 || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let prefix = prefix.to_ascii_lowercase();
        let t = self.txn.open_table(BY_HASH).map_err(|e| self.cat.err(e))?;
        // Bytes fully determined by the prefix bound the range.
        let mut lo = Vec::new();
        for pair in prefix.as_bytes().chunks(2) {
            let s = std::str::from_utf8(pair).unwrap();
            let v = u8::from_str_radix(s, 16).unwrap();
            lo.push(if pair.len() == 2 { v } else { v << 4 });
        }
        let mut found = Vec::new();
        for item in t.range(lo.as_slice()..).map_err(|e| self.cat.err(e))? {
            let (k, v) = item.map_err(|e| self.cat.err(e))?;
            let hex = Hash(
                k.value()
                    .try_into()
                    .map_err(|_| Error::Corrupt("by_hash key".into()))?,
            )
            .to_hex();
            if !hex.starts_with(&prefix) {
                break;
            }
            found.push(v.value());
            if found.len() > 1 {
                return Err(Error::BadRevision(format!(
                    "checkpoint id prefix {prefix:?} is ambiguous; give more digits"
                )));
            }
        }
        Ok(found.first().copied())
    }

    /// The annotations, for looking up many checkpoints' in one snapshot
    /// (a catalog from before annotations has none).
    pub fn annotations(&self) -> Result<Annotations> {
        match self.txn.open_table(ANNOTATIONS) {
            Ok(t) => Ok(Annotations {
                table: Some(t),
                path: self.cat.path.clone(),
            }),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(Annotations {
                table: None,
                path: self.cat.path.clone(),
            }),
            Err(e) => Err(self.cat.err(e)),
        }
    }

    /// Where this store's workspace was forked from (`None`: not a fork).
    pub fn origin(&self) -> Result<Option<Origin>> {
        self.meta_json(Meta::Origin)
    }

    /// An overlay fork's layers (`None`: not an overlay fork).
    pub fn overlay(&self) -> Result<Option<OverlayLayers>> {
        self.meta_json(Meta::Overlay)
    }

    /// Loads a tree; a missing tree is store corruption.
    pub fn tree(&self, h: &Hash) -> Result<Tree> {
        let t = self.txn.open_table(TREES).map_err(|e| self.cat.err(e))?;
        let v = t
            .get(h.0.as_slice())
            .map_err(|e| self.cat.err(e))?
            .ok_or_else(|| Error::Corrupt(format!("tree {h} is missing from the catalog")))?;
        let bytes = v.value();
        if Hash::of(bytes) != *h {
            return Err(Error::Corrupt(format!("tree {h} does not match its hash")));
        }
        Tree::decode(bytes).map_err(|e| Error::Corrupt(format!("tree {h}: {e}")))
    }

    /// Every stored tree hash (gc, verify).
    pub fn tree_hashes(&self) -> Result<Vec<Hash>> {
        let t = self.txn.open_table(TREES).map_err(|e| self.cat.err(e))?;
        let mut out = Vec::new();
        for item in t.iter().map_err(|e| self.cat.err(e))? {
            let (k, _) = item.map_err(|e| self.cat.err(e))?;
            out.push(Hash(
                k.value()
                    .try_into()
                    .map_err(|_| Error::Corrupt("tree key".into()))?,
            ));
        }
        Ok(out)
    }
}

/// The `annotations` table of a read snapshot ([`CatalogReader::annotations`]).
pub struct Annotations {
    table: Option<redb::ReadOnlyTable<u64, &'static [u8]>>,
    path: PathBuf,
}

impl Annotations {
    /// Checkpoint `seq`'s annotation, if it has one.
    pub fn get(&self, seq: u64) -> Result<Option<Annotation>> {
        let Some(t) = &self.table else {
            return Ok(None);
        };
        match t.get(seq).map_err(|e| catalog_error(&self.path, e))? {
            Some(v) => decode_annotation(seq, v.value()).map(Some),
            None => Ok(None),
        }
    }

    /// The checkpoints that have an annotation, in order (by the module's
    /// invariant, each a record of `checkpoints`; the tests check it).
    pub fn seqs(&self) -> Result<Vec<u64>> {
        let Some(t) = &self.table else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in t.iter().map_err(|e| catalog_error(&self.path, e))? {
            out.push(item.map_err(|e| catalog_error(&self.path, e))?.0.value());
        }
        Ok(out)
    }
}

fn decode_annotation(seq: u64, bytes: &[u8]) -> Result<Annotation> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::Corrupt(format!("annotation of checkpoint v{seq}: {e}")))
}

/// Parses checkpoint record `seq` from its stored JSON, checking its hash
/// (public so fuzz targets and property tests reach it).
pub fn decode_checkpoint(seq: u64, bytes: &[u8]) -> Result<Checkpoint> {
    let cp: Checkpoint = serde_json::from_slice(bytes)
        .map_err(|e| Error::Corrupt(format!("checkpoint v{seq}: {e}")))?;
    if cp.seq != seq || cp.compute_hash() != cp.hash {
        return Err(Error::Corrupt(format!(
            "checkpoint v{seq} does not match its hash"
        )));
    }
    Ok(cp)
}
