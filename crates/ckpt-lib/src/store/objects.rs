//! The object store: file contents as plain, read-only files named by their
//! BLAKE3-256 hash, `objects/ab/cdef…` (first byte as a shard directory).
//!
//! Contents are plain files so restore can clone them back with a reflink.
//!
//! ## Writing an object (crash safety)
//! An object is first written under a unique name in `tmp/`. Before any
//! object is renamed to its final name its data is durable: the first few
//! objects of an operation are `fsync`ed one by one (cheap for small saves,
//! and placed at once, see "Placed as soon as they are durable"); beyond
//! that one `syncfs` covers them all. Then every pending object is
//! renamed into `objects/` with `RENAME_NOREPLACE`, and the shard directories
//! are synced. Only after [`Objects::commit`] returns may a checkpoint that
//! references them be committed to the catalog. So an object under its final
//! name always holds exactly the bytes its name promises, and a crash leaves
//! at most stray files in `tmp/`, removed when the store is next opened.
//!
//! ## Syncing off the workers
//! The first objects' `fdatasync`s are made on a thread of their own, in
//! the order the objects were written, while the workers that wrote them
//! go on scanning; [`Objects::commit`] waits for them before it renames
//! anything, and fails with the first one that failed. A worker blocked in
//! an `fdatasync` takes its share of the scan's CPU with it, so a save of
//! a few edited files is faster with the syncs off the workers.
//!
//! A large operation (a first save) starts writing its data back early: each
//! time [`FLUSH_AHEAD`] bytes have been written without an `fsync` of their
//! own, a background thread runs `syncfs` while capture goes on, so the disk
//! works while the CPU hashes and copies, and the `syncfs` of
//! [`Objects::commit`] — the one durability relies on — finds little left to
//! write. These early flushes only ever add durability; none is waited for.
//!
//! Temporary files go into one subdirectory per worker thread ("lane",
//! `tmp/<pid>.<ns>/<lane>/<n>`): creating a file holds its directory's lock
//! while the filesystem allocates an inode, so threads sharing one directory
//! wait on each other (on ext4 a first save spent a quarter of its CPU
//! spinning on that lock).
//!
//! ## Placed as soon as they are durable
//! Those first objects are also placed by that thread: right after an
//! object's `fdatasync` it is renamed to its final name and its shard
//! directory is `fsync`ed, and only then is it taken out of the pending
//! objects, so [`Objects::commit`] (which waits for the thread first)
//! finds nothing left to do for it. A save of a few changed files thus
//! makes its objects durable under their names while it scans, instead of
//! after (the rename and the directory `fsync` leave the save's path).
//! The promise above still
//! holds: nothing is named under `objects/` before its data is durable,
//! and nothing is committed to the catalog before its name is. An object
//! whose shard does not exist yet, or that does not rename, stays pending
//! and is placed at commit like the rest; band manifests, which must
//! follow their bands, always are. If the operation then aborts, an object
//! placed early stays, unreferenced (what a crash between placing and
//! committing leaves too; `gc` removes it), and holds exactly its bytes.
//!
//! ## Shard directories
//! A shard directory `objects/ab/` is made when the first object of its
//! shard is placed, with the permissions and owner of `objects/` (so a
//! save run by root in another user's store leaves it theirs); a missing
//! shard holds nothing. (Stores made before this rule have all 256 from `init`,
//! and they work the same.)
//!
//! ## Placing a fresh shard whole
//! Renaming is most of what placing costs: one `rename` per object, each
//! serialised on the filesystem's cross-directory rename lock and each
//! dirtying the object's inode again: placed one by one, a first save's
//! objects took about as long to rename as their data took to be durable.
//! So a large operation (past the objects fsynced one by one) writes each
//! object of a shard that is missing or empty when the operation first
//! stores into it (a *fresh* shard) into a staged copy of that shard,
//! `tmp/<pid>.<ns>/shards/ab/cdef…`, under its final name, instead of a
//! lane. At commit, after the same `syncfs`, each staged shard is renamed
//! onto `objects/ab` in one step (`rename` replaces a missing or empty
//! directory, and fails if anything was placed there since), and the
//! placement is synced as before. The 256 renames of a first save take a
//! few ms. Why this keeps the promise above:
//! - the staged names are below `tmp/`, so nothing under `objects/` names a
//!   file before its data is durable;
//! - a staged shard is moved only if it holds exactly the operation's
//!   pending objects of that shard (counted): a file an error left behind
//!   never gets a name under `objects/`, and its shard's objects are
//!   renamed one by one instead, as they are when `objects/ab` is no longer
//!   empty;
//! - a crash leaves each shard either as it was or whole, never half moved.
//!
//! Content that stays in lanes: the first objects (fsynced one by one),
//! large files (copied before their hash, so their shard, is known), band
//! manifests (placed after all bands) and the objects of a shard that held
//! something. Shard decisions end with the operation (at commit or abort):
//! the next operation on the same open store decides afresh.
//!
//! ## Content the store already holds
//! Capturing content the store already has copies nothing, so a save or a
//! restore's pre-save on a full disk still works when nothing new is in it.
//! A small file is hashed from memory before anything is written. A large
//! file that has kept the size of its last captured content (its index
//! entry: a file re-read because its stat changed, or racy) is hashed where
//! it is first, and is not copied when that content is stored. Otherwise it
//! is copied and the copy hashed (below); if the copy runs out of space, the
//! file is hashed where it is, and a store that holds that content needs no
//! copy. A banded file stores only the bands the store lacks.
//!
//! ## Capturing a file that may be changing
//! Small files (≤ 64 KiB) are read into memory, hashed, and written from
//! that buffer; larger ones are copied with the [`Copier`] first and the
//! *copy* is hashed, so the stored bytes and their name always agree. Either
//! way the source's stat is compared before and after; if it changed the
//! capture is retried, and after [`MAX_ATTEMPTS`] the save fails with
//! [`Error::Unstable`] rather than store a torn mix of two versions.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;
use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use crate::error::IoContext;
use crate::store::bands::{self, Manifest};
use crate::{Error, Hash, Result};
use ckpt_fs::content_hash::hash_whole;
use ckpt_fs::copy::{read_expected, Copier};
use ckpt_fs::fs::{self, Meta};

/// Files up to this size are captured through a memory buffer.
pub const SMALL_FILE: u64 = 64 * 1024;
/// How often a changing file is re-read before giving up.
pub const MAX_ATTEMPTS: usize = 8;
/// How many objects per operation are fsynced one by one before switching to
/// a single `syncfs`.
const FSYNC_EACH_LIMIT: usize = 32;
/// Bytes written without their own `fsync` after which a background
/// `syncfs` is started (at most one at a time).
const FLUSH_AHEAD: u64 = 64 << 20;
/// Temporary-file lanes (subdirectories of an operation's `tmp` directory):
/// lane 0 for threads outside the rayon pool, then one per pool thread
/// (shared round-robin beyond this many). Fixed, so opening a store never
/// starts the thread pool.
const LANES: usize = 16;

/// The result of capturing one file.
#[derive(Debug, Clone, Copy)]
pub struct Captured {
    /// Content hash.
    pub hash: Hash,
    /// The file's stat at capture time (matches the captured bytes).
    pub meta: Meta,
    /// Bytes newly stored (0 if the content was already in the store).
    pub new_bytes: u64,
}

/// Why a file could not be captured as a regular file.
#[derive(Debug)]
pub enum CaptureError {
    /// It vanished or stopped being a regular file; the caller rescans it.
    Gone,
    /// It may not be opened for reading (`EACCES`/`EPERM`, e.g. mode 000
    /// for a user other than root): the caller decides what to record
    /// ([`crate::workspace::scan`]).
    Unreadable,
    /// A real error.
    Err(Error),
}

impl From<Error> for CaptureError {
    fn from(e: Error) -> Self {
        CaptureError::Err(e)
    }
}

/// The hash of a whole [`bands::BAND`] of zeros (a hole in a sparse file),
/// computed once per process.
fn zero_band() -> Hash {
    static ZERO: OnceLock<Hash> = OnceLock::new();
    *ZERO.get_or_init(|| Hash::of(&vec![0; bands::BAND as usize]))
}

/// What [`Objects::store_bytes`] writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stored {
    /// A whole file's content.
    Object,
    /// One band of a banded file (written sparse).
    Band,
    /// A band manifest.
    Manifest,
}

/// The object directory of a store.
#[derive(Debug)]
pub struct Objects {
    path: PathBuf,
    dir: Arc<OwnedFd>,
    tmp_path: PathBuf,
    tmp: Arc<OwnedFd>,
    /// The copy engine used to get bytes in and out.
    pub copier: Copier,
    /// Objects written in this operation and not yet under their final
    /// names: hash → temporary name below `tmp`. Shared with the syncing
    /// thread, which places the first ones early (see "Placed as soon as
    /// they are durable").
    pending: Arc<Mutex<HashMap<Hash, Vec<u8>>>>,
    /// Band manifests written in this operation (renamed after the bands).
    pending_manifests: Mutex<HashMap<Hash, Vec<u8>>>,
    /// Files of at least this size are stored as bands when the store
    /// cannot reflink (see [`crate::store::bands`]).
    pub band_min: u64,
    fsynced_each: AtomicUsize,
    /// The `fdatasync`s of those objects, made off the workers (see
    /// "Syncing off the workers").
    syncs: Syncs,
    unsynced: AtomicUsize,
    /// Bytes written without an `fsync` since the last background flush began.
    unflushed: AtomicU64,
    /// Whether a background flush is running.
    flushing: Arc<AtomicBool>,
    counter: AtomicU64,
    /// Whether each lane directory below `tmp` exists (made on first use).
    lanes: Box<[OnceLock<Result<(), Errno>>]>,
    /// Per shard, in the operation under way: whether it is staged whole
    /// (see "Placing a fresh shard whole" in the module doc), one of the
    /// `SHARD_*` states. Back to undecided at each commit and abort.
    staged: Box<[AtomicU8]>,
    /// The permission bits, owner and group of `objects/`, which every
    /// shard directory gets.
    objects_stat: OnceLock<Result<(u32, u32, u32), Errno>>,
    /// Whether this operation changed `objects/` itself (made a shard or
    /// renamed one into place), so its next placement syncs it.
    dir_changed: AtomicBool,
    /// Opened by [`Objects::open_read_only`]: `tmp` is the shared `tmp/`
    /// root, nothing may be written, and nothing is removed on drop.
    read_only: bool,
}

/// The `fdatasync`s of an operation's first objects, made on a thread of
/// their own (see "Syncing off the workers"): [`Syncs::submit`] hands over
/// a written file, [`Syncs::wait`] returns once every file handed over is
/// durable, or with the first error.
#[derive(Debug, Default)]
struct Syncs {
    /// To the syncing thread, started by the first file handed over.
    queue: Mutex<Option<std::sync::mpsc::Sender<SyncJob>>>,
    done: Arc<(Mutex<SyncsDone>, std::sync::Condvar)>,
}

#[derive(Debug, Default)]
struct SyncsDone {
    /// Files handed over and not yet synced.
    in_flight: usize,
    /// The first sync that failed since the last [`Syncs::wait`].
    error: Option<Error>,
}

/// A written temporary file for [`Syncs`]: made durable, then placed
/// when `place` says how.
struct SyncJob {
    file: OwnedFd,
    path: PathBuf,
    place: Option<Early>,
}

/// What placing an object early takes (see "Placed as soon as they are
/// durable" in the module doc).
struct Early {
    hash: Hash,
    tmp_name: Vec<u8>,
    tmp: Arc<OwnedFd>,
    dir: Arc<OwnedFd>,
    /// `objects/`, for messages.
    objects: PathBuf,
    pending: Arc<Mutex<HashMap<Hash, Vec<u8>>>>,
}

impl SyncJob {
    fn run(self) -> Result<()> {
        rustix::fs::fdatasync(&self.file).ctx("fsync", &self.path)?;
        drop(self.file);
        match self.place {
            Some(e) => e.place(),
            None => Ok(()),
        }
    }
}

impl Early {
    /// Renames the (durable) temporary file to the object's name and syncs
    /// its shard directory, then takes it out of the pending objects. An
    /// object whose shard does not exist yet, or that does not rename, is
    /// left pending: [`Objects::commit`] places it as it places the rest.
    fn place(self) -> Result<()> {
        let final_name = object_name(&self.hash);
        ckpt_fault::point("objects.before_rename");
        let renamed = rename_into(
            self.tmp.as_fd(),
            &self.tmp_name,
            self.dir.as_fd(),
            &final_name,
        );
        if renamed.is_err() {
            return Ok(());
        }
        ckpt_fault::point("objects.after_rename");
        sync_shard(self.dir.as_fd(), &self.objects, self.hash.0[0])?;
        ckpt_fault::point("objects.after_dir_fsync");
        self.pending.lock().unwrap().remove(&self.hash);
        Ok(())
    }
}

/// Renames the durable temporary file `tmp_name` (below `tmp`) to
/// `final_name` (below `objects/`, `dir`); when that name is taken (the
/// content is stored already) drops the copy instead.
fn rename_into(
    tmp: BorrowedFd<'_>,
    tmp_name: &[u8],
    dir: BorrowedFd<'_>,
    final_name: &[u8],
) -> rustix::io::Result<()> {
    if !fs::rename_noreplace(tmp, tmp_name, dir, final_name)? {
        let _ = rustix::fs::unlinkat(tmp, tmp_name, AtFlags::empty());
    }
    Ok(())
}

/// `fsync`s the shard directory `objects/<shard>` (`dir`; `objects` names
/// it in messages).
fn sync_shard(dir: BorrowedFd<'_>, objects: &Path, shard: u8) -> Result<()> {
    let name = format!("{shard:02x}");
    let shown = || objects.join(&name);
    let fd = fs::open_dir_at(dir, name.as_bytes()).ctx("open", shown())?;
    rustix::fs::fsync(&fd).ctx("fsync", shown())
}

impl Syncs {
    fn submit(&self, job: SyncJob) {
        self.done.0.lock().unwrap().in_flight += 1;
        let mut queue = self.queue.lock().unwrap();
        if queue.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<SyncJob>();
            let done = self.done.clone();
            let spawned = std::thread::Builder::new()
                .name("ckpt-fsync".into())
                .spawn(move || {
                    for job in rx {
                        Syncs::finish(&done, job.run().err());
                    }
                });
            if spawned.is_ok() {
                *queue = Some(tx);
            }
        }
        // Without a thread (it could not start, or has ended), here.
        let unsent = match queue.as_ref() {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = unsent {
            Syncs::finish(&self.done, job.run().err());
        }
    }

    fn finish(done: &(Mutex<SyncsDone>, std::sync::Condvar), error: Option<Error>) {
        let mut d = done.0.lock().unwrap();
        d.in_flight -= 1;
        if d.error.is_none() {
            d.error = error;
        }
        done.1.notify_all();
    }

    fn wait(&self) -> Result<()> {
        let mut d = self.done.0.lock().unwrap();
        while d.in_flight > 0 {
            d = self.done.1.wait(d).unwrap();
        }
        match d.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Objects {
    fn drop(&mut self) {
        if self.read_only {
            return;
        }
        if let (Some(parent), Some(name)) = (self.tmp_path.parent(), self.tmp_path.file_name()) {
            if let Ok(p) = fs::open_dir_path(parent) {
                let _ = fs::remove_all_at(p.as_fd(), name.as_encoded_bytes());
            }
        }
    }
}

/// Removes everything below the store's `tmp/` (left by crashed processes;
/// the caller holds the store lock) and returns its listing's descriptor.
fn remove_stale_temps(tmp_root: &Path) -> Result<OwnedFd> {
    let root = fs::list_dir_packed(fs::open_dir_path(tmp_root).ctx("open", tmp_root)?)
        .ctx("read", tmp_root)?;
    for i in 0..root.len() {
        let name = root.name(i);
        fs::remove_all_at(root.fd(), name).ctx(
            "remove stale temporary file",
            tmp_root.join(fs::as_path(name)),
        )?;
    }
    Ok(root.into_fd())
}

/// The directory below an operation's `tmp` directory that holds its
/// staged shards (see "Placing a fresh shard whole" in the module doc).
const STAGED: &str = "shards";

/// States of a shard in [`Objects::staged`].
const SHARD_UNDECIDED: u8 = 0;
const SHARD_DECIDING: u8 = 1;
const SHARD_STAGED: u8 = 2;
const SHARD_LANES: u8 = 3;

/// Whether a temporary name is in a staged shard.
fn is_staged(tmp_name: &[u8]) -> bool {
    tmp_name.starts_with(STAGED.as_bytes()) && tmp_name.get(STAGED.len()) == Some(&b'/')
}

/// `ab/cdef….bands`: the path of a band manifest below `objects/`.
pub fn manifest_name(h: &Hash) -> Vec<u8> {
    let mut n = object_name(h);
    n.extend_from_slice(bands::SUFFIX);
    n
}

/// `ab/cdef…`: the path of an object below `objects/`.
pub fn object_name(h: &Hash) -> Vec<u8> {
    let hex = h.to_hex();
    let mut n = Vec::with_capacity(65);
    n.extend_from_slice(&hex.as_bytes()[..2]);
    n.push(b'/');
    n.extend_from_slice(&hex.as_bytes()[2..]);
    n
}

impl Objects {
    /// Opens `objects/` below a store root, removes temporary files left by
    /// a crashed process (the caller holds the lock), and makes this
    /// operation's own temporary directory `tmp/<pid>.<ns>/`, removed again
    /// on drop. (A per-operation directory keeps `tmp/` itself small: ext4
    /// directories never shrink, and a first save writes thousands of
    /// temporary files.)
    pub fn open(store: &Path, copier: Copier) -> Result<Objects> {
        let path = store.join("objects");
        let tmp_root = store.join("tmp");
        let dir = fs::open_dir_path(&path).ctx("open", &path)?;
        let root = remove_stale_temps(&tmp_root)?;
        let own = format!("{}.{}", std::process::id(), fs::now_ns());
        let tmp_path = tmp_root.join(&own);
        rustix::fs::mkdirat(&root, own.as_str(), rustix::fs::Mode::from_raw_mode(0o700))
            .ctx("create", &tmp_path)?;
        let tmp = fs::open_dir_at(root.as_fd(), own.as_bytes()).ctx("open", &tmp_path)?;
        Ok(Objects::new_open(path, dir, tmp_path, tmp, copier, false))
    }

    fn new_open(
        path: PathBuf,
        dir: OwnedFd,
        tmp_path: PathBuf,
        tmp: OwnedFd,
        copier: Copier,
        read_only: bool,
    ) -> Objects {
        Objects {
            path,
            dir: Arc::new(dir),
            tmp_path,
            tmp: Arc::new(tmp),
            copier,
            pending: Default::default(),
            pending_manifests: Mutex::new(HashMap::new()),
            band_min: bands::DEFAULT_BAND_MIN,
            fsynced_each: AtomicUsize::new(0),
            syncs: Syncs::default(),
            unsynced: AtomicUsize::new(0),
            unflushed: AtomicU64::new(0),
            flushing: Default::default(),
            counter: AtomicU64::new(0),
            lanes: (0..LANES).map(|_| OnceLock::new()).collect(),
            staged: (0..256).map(|_| AtomicU8::new(SHARD_UNDECIDED)).collect(),
            objects_stat: OnceLock::new(),
            dir_changed: AtomicBool::new(false),
            read_only,
        }
    }

    /// Opens `objects/` for reading only (`status`, `diff`, `log`, `show`):
    /// temporary files left by a crashed process are removed as by
    /// [`Objects::open`] (the caller holds the lock), but no temporary
    /// directory of its own is made. Nothing may be stored through it.
    pub fn open_read_only(store: &Path, copier: Copier) -> Result<Objects> {
        let path = store.join("objects");
        let tmp_path = store.join("tmp");
        let dir = fs::open_dir_path(&path).ctx("open", &path)?;
        let tmp = remove_stale_temps(&tmp_path)?;
        Ok(Objects::new_open(path, dir, tmp_path, tmp, copier, true))
    }

    /// Creates the directory layout of an empty object store: `objects/`
    /// and `tmp/`. A shard directory is made when its first object is
    /// placed (see "Shard directories" in the module doc).
    pub fn create_layout(store: &Path) -> Result<()> {
        for d in [store.join("objects"), store.join("tmp")] {
            std::fs::create_dir_all(&d).ctx("create", &d)?;
        }
        Ok(())
    }

    /// Makes the directory `name` in `dir` as a shard directory: with the
    /// permissions and owner of `objects/` (whatever the umask, and when
    /// root writes into another user's store). `Ok(false)`: it exists.
    fn mkdir_shard(&self, dir: BorrowedFd<'_>, name: &str) -> Result<bool, Errno> {
        let like = *self.objects_stat.get_or_init(|| {
            rustix::fs::fstat(&self.dir).map(|st| (st.st_mode & 0o7777, st.st_uid, st.st_gid))
        });
        let (mode, uid, gid) = like?;
        let mode = rustix::fs::Mode::from_raw_mode(mode);
        match rustix::fs::mkdirat(dir, name, mode) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Ok(false),
            Err(e) => return Err(e),
        }
        rustix::fs::chmodat(dir, name, mode, AtFlags::empty())?;
        if uid != rustix::process::geteuid().as_raw() {
            let (uid, gid) = (
                rustix::fs::Uid::from_raw(uid),
                rustix::fs::Gid::from_raw(gid),
            );
            rustix::fs::chownat(dir, name, Some(uid), Some(gid), AtFlags::empty())?;
        }
        Ok(true)
    }

    /// Makes the shard directory `objects/<shard>` if it is missing.
    fn make_shard(&self, shard: u8) -> Result<()> {
        let name = format!("{shard:02x}");
        let made = self.mkdir_shard(self.dir.as_fd(), &name);
        if made.ctx("create", self.path.join(&name))? {
            self.dir_changed.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The `objects/` directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory descriptor of `objects/`.
    pub fn dir_fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Path of one object, for messages.
    pub fn object_path(&self, h: &Hash) -> PathBuf {
        self.path.join(fs::as_path(&object_name(h)))
    }

    /// Whether the content is stored, plain or banded (or pending in this
    /// operation).
    pub fn contains(&self, h: &Hash) -> bool {
        self.contains_plain(h) || self.manifest_exists(h)
    }

    /// [`contains`](Self::contains) for content of `size` bytes: a small
    /// file's content is never banded, which saves a `stat` per new file.
    fn contains_sized(&self, h: &Hash, size: u64) -> bool {
        self.contains_plain(h) || (size >= self.band_min && self.manifest_exists(h))
    }

    fn contains_plain(&self, h: &Hash) -> bool {
        self.pending.lock().unwrap().contains_key(h)
            || fs::stat_at(self.dir.as_fd(), &object_name(h)).is_ok()
    }

    fn manifest_exists(&self, h: &Hash) -> bool {
        self.pending_manifests.lock().unwrap().contains_key(h)
            || fs::stat_at(self.dir.as_fd(), &manifest_name(h)).is_ok()
    }

    /// The band manifest of `h`, if the content is stored banded.
    pub fn manifest(&self, h: &Hash) -> Result<Option<Manifest>> {
        let name = manifest_name(h);
        let shown = self.path.join(fs::as_path(&name));
        let fd = match fs::open_file_at(self.dir.as_fd(), &name) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(Error::io("open", shown, e.into())),
        };
        let mut buf = Vec::new();
        let len = fs::stat_fd(fd.as_fd()).ctx("stat", &shown)?.size;
        read_expected(fd.as_fd(), &mut buf, len).ctx("read", &shown)?;
        Manifest::decode(&buf, &shown.display().to_string()).map(Some)
    }

    /// Hashes stored content `h` (plain or banded, every band checked
    /// against its own name too) and returns the hash and length found.
    pub fn hash_object(&self, h: &Hash) -> Result<(Hash, u64)> {
        match fs::open_file_at(self.dir.as_fd(), &object_name(h)) {
            Ok(fd) => return hash_whole(fd.as_fd()).ctx("read", self.object_path(h)),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(Error::io("open", self.object_path(h), e.into())),
        }
        let Some(m) = self.manifest(h)? else {
            return Err(self.missing(h));
        };
        let mut whole = blake3::Hasher::new();
        let mut len = 0u64;
        for (i, band) in m.bands.iter().enumerate() {
            let fd = self.open_object(band)?;
            let mut data = Vec::new();
            read_expected(fd.as_fd(), &mut data, m.range(i).1)
                .ctx("read", self.object_path(band))?;
            if Hash::of(&data) != *band || data.len() as u64 != m.range(i).1 {
                return Err(Error::Corrupt(format!(
                    "band {i} ({}) of {h} is damaged",
                    self.object_path(band).display()
                )));
            }
            whole.update(&data);
            len += data.len() as u64;
        }
        Ok((whole.finalize().into(), len))
    }

    /// The whole content `h` in memory (diff).
    pub fn read_object(&self, h: &Hash) -> Result<Vec<u8>> {
        match std::fs::read(self.object_path(h)) {
            Ok(b) => return Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("read", self.object_path(h), e)),
        }
        let Some(m) = self.manifest(h)? else {
            return Err(self.missing(h));
        };
        let mut out = Vec::with_capacity(m.size as usize);
        for band in &m.bands {
            let p = self.object_path(band);
            out.extend(std::fs::read(&p).map_err(|e| Error::io("read", p, e))?);
        }
        Ok(out)
    }

    fn missing(&self, h: &Hash) -> Error {
        Error::Corrupt(format!(
            "object {h} is missing from {}",
            self.path.display()
        ))
    }

    /// Opens an object for reading.
    pub fn open_object(&self, h: &Hash) -> Result<OwnedFd> {
        fs::open_file_at(self.dir.as_fd(), &object_name(h)).map_err(|e| {
            if e == Errno::NOENT {
                Error::Corrupt(format!(
                    "object {h} is missing from {}",
                    self.path.display()
                ))
            } else {
                Error::io("open", self.object_path(h), e.into())
            }
        })
    }

    /// A fresh temporary name, `<lane>/<n>` below this operation's `tmp`
    /// directory, in the calling thread's lane (made on first use).
    fn tmp_name(&self) -> Result<Vec<u8>> {
        let lane = rayon::current_thread_index().map_or(0, |i| i % (LANES - 1) + 1);
        let made = *self.lanes[lane].get_or_init(|| {
            match rustix::fs::mkdirat(
                self.tmp.as_fd(),
                lane.to_string().as_str(),
                rustix::fs::Mode::from_raw_mode(0o700),
            ) {
                Ok(()) | Err(Errno::EXIST) => Ok(()),
                Err(e) => Err(e),
            }
        });
        made.map_err(|e| Error::io("create", self.tmp_path.join(lane.to_string()), e.into()))?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        Ok(format!("{lane}/{n}").into_bytes())
    }

    /// Creates the temporary file for object `hash` in its staged shard,
    /// `shards/ab/cdef…` below this operation's `tmp` directory, when that
    /// shard is staged (see "Placing a fresh shard whole" in the module
    /// doc). `None`: the caller takes a lane name instead. So does an
    /// object whose shard another thread is deciding on, and one whose
    /// content another thread is storing at the same moment (of the two
    /// copies, the one registered second is dropped).
    fn staged_create(&self, hash: &Hash) -> Result<Option<(Vec<u8>, OwnedFd)>> {
        if self.fsynced_each.load(Ordering::Relaxed) < FSYNC_EACH_LIMIT {
            return Ok(None);
        }
        let state = &self.staged[hash.0[0] as usize];
        match state.compare_exchange(
            SHARD_UNDECIDED,
            SHARD_DECIDING,
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let staged = self.stage_shard(hash.0[0]);
                let to = if staged { SHARD_STAGED } else { SHARD_LANES };
                state.store(to, Ordering::Release);
                if !staged {
                    return Ok(None);
                }
            }
            Err(SHARD_STAGED) => {}
            Err(_) => return Ok(None),
        }
        let mut name = Vec::with_capacity(STAGED.len() + 66);
        name.extend_from_slice(STAGED.as_bytes());
        name.push(b'/');
        name.extend_from_slice(&object_name(hash));
        match fs::create_excl_at(self.tmp.as_fd(), &name, 0o444) {
            Ok(fd) => Ok(Some((name, fd))),
            Err(Errno::EXIST) => Ok(None),
            Err(e) => Err(Error::io(
                "create",
                self.tmp_path.join(fs::as_path(&name)),
                e.into(),
            )),
        }
    }

    /// Decides whether shard `shard` is staged in this operation: only if
    /// `objects/<shard>` is missing or empty now, and its staging copy,
    /// with a shard directory's permissions, could be made. Staging only
    /// saves work: whatever stops it, the shard's objects take lanes.
    fn stage_shard(&self, shard: u8) -> bool {
        let name = format!("{shard:02x}");
        match fs::open_dir_at(self.dir.as_fd(), name.as_bytes()) {
            Ok(live) if fs::dir_is_empty(live.as_fd()) == Ok(true) => {}
            Ok(_) => return false,
            Err(Errno::NOENT) => {}
            Err(_) => return false,
        }
        let root = match rustix::fs::mkdirat(self.tmp.as_fd(), STAGED, rustix::fs::Mode::RWXU) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e),
        };
        // A staged shard left by an earlier operation of this process is
        // empty, or the count in `place_staged` keeps it in place.
        root.and_then(|()| self.mkdir_shard(self.tmp.as_fd(), &format!("{STAGED}/{name}")))
            .is_ok()
    }

    /// Captures the regular file `name` in `dir` into the store. `known`
    /// is the content (hash, size) the file had when last captured, if
    /// any: see "Content the store already holds" in the module doc.
    pub fn capture(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        known: Option<(Hash, u64)>,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<Captured, CaptureError> {
        for _ in 0..MAX_ATTEMPTS {
            let (src, m1) = open_regular(dir, name, shown)?;
            if let Some((hash, size)) = known {
                if m1.size == size && size > SMALL_FILE && self.contains_sized(&hash, size) {
                    match hash_in_place(src.as_fd(), &m1, shown)? {
                        Some(h) if h == hash => return Ok(captured(hash, &m1, 0)),
                        Some(_) => {}     // new content: captured below
                        None => continue, // changed while read
                    }
                }
            }
            let attempt = if m1.size <= SMALL_FILE {
                self.capture_small(src.as_fd(), &m1, shown)?
            } else if m1.size >= self.band_min && !self.copier.reflinks() {
                self.capture_banded(src.as_fd(), &m1, shown)?
            } else {
                self.capture_large(src.as_fd(), &m1, shown)?
            };
            if let Some(c) = attempt {
                return Ok(c);
            }
        }
        Err(Error::Unstable(shown()).into())
    }

    fn capture_small(
        &self,
        src: BorrowedFd<'_>,
        m1: &Meta,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<Option<Captured>> {
        BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            read_expected(src, &mut buf, m1.size).ctx("read", shown())?;
            if !unchanged(src, m1, shown)? || buf.len() as u64 != m1.size {
                return Ok(None);
            }
            let hash = Hash::of(&buf);
            let new_bytes = if self.contains_sized(&hash, m1.size) {
                0
            } else {
                self.store_bytes(hash, &buf, Stored::Object)?
            };
            Ok(Some(captured(hash, m1, new_bytes)))
        })
    }

    fn capture_large(
        &self,
        src: BorrowedFd<'_>,
        m1: &Meta,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<Option<Captured>> {
        let tmp_name = self.tmp_name()?;
        let tmp_shown = self.tmp_path.join(fs::as_path(&tmp_name));
        let tmp = rustix::fs::openat(
            self.tmp.as_fd(),
            tmp_name.as_slice(),
            rustix::fs::OFlags::RDWR
                | rustix::fs::OFlags::CREATE
                | rustix::fs::OFlags::EXCL
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::from_raw_mode(0o444),
        )
        .ctx("create", &tmp_shown)?;
        let discard = || {
            let _ = rustix::fs::unlinkat(self.tmp.as_fd(), tmp_name.as_slice(), AtFlags::empty());
        };
        if let Err(e) = self.copier.copy(src, tmp.as_fd(), m1.size) {
            discard();
            // No room for a copy: none is needed if the store already
            // holds the content.
            if crate::error::no_space(&e) {
                if let Some(hash) = hash_in_place(src, m1, shown)? {
                    if self.contains_sized(&hash, m1.size) {
                        return Ok(Some(captured(hash, m1, 0)));
                    }
                }
            }
            return Err(Error::io("copy", shown(), e));
        }
        if !unchanged(src, m1, shown)? {
            discard();
            return Ok(None);
        }
        let (hash, len) = hash_whole(tmp.as_fd()).ctx("read", &tmp_shown)?;
        if len != m1.size {
            discard();
            return Ok(None);
        }
        let new_bytes = if self.contains_sized(&hash, len) {
            discard();
            0
        } else {
            self.add_pending(hash, tmp_name, tmp, len)?
        };
        Ok(Some(captured(hash, m1, new_bytes)))
    }

    /// Captures a large file as bands (see [`crate::store::bands`]): each 8 MiB
    /// band is read once, hashed on its own and into the whole-file hash,
    /// and stored only if no object holds it yet; then the manifest.
    fn capture_banded(
        &self,
        src: BorrowedFd<'_>,
        m1: &Meta,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<Option<Captured>> {
        let mut whole = blake3::Hasher::new();
        let mut m = Manifest {
            band_size: bands::BAND,
            size: m1.size,
            bands: Vec::with_capacity(m1.size.div_ceil(bands::BAND) as usize),
        };
        let mut new_bytes = 0u64;
        let mut buf = vec![0u8; bands::BAND as usize];
        for i in 0..m1.size.div_ceil(bands::BAND) as usize {
            let (off, len) = m.range(i);
            let data = &mut buf[..len as usize];
            let mut got = 0usize;
            while got < data.len() {
                match rustix::io::pread(src, &mut data[got..], off + got as u64) {
                    Ok(0) => return Ok(None), // shrank: retry
                    Ok(n) => got += n,
                    Err(Errno::INTR) => {}
                    Err(e) => return Err(Error::io("read", shown(), e.into())),
                }
            }
            whole.update(data);
            let band = Hash::of(data);
            m.bands.push(band);
            if !self.contains_plain(&band) {
                new_bytes += self.store_bytes(band, data, Stored::Band)?;
            }
        }
        if !unchanged(src, m1, shown)? {
            return Ok(None);
        }
        let hash: Hash = whole.finalize().into();
        if !self.contains_sized(&hash, m1.size) {
            self.store_bytes(hash, &m.encode(), Stored::Manifest)?;
        }
        Ok(Some(captured(hash, m1, new_bytes)))
    }

    /// Writes `data` to a new temp file and records it as pending `hash`
    /// (an object, or a band manifest). Returns the bytes newly stored.
    fn store_bytes(&self, hash: Hash, data: &[u8], what: Stored) -> Result<u64> {
        let staged = match what {
            Stored::Manifest => None,
            Stored::Object | Stored::Band => self.staged_create(&hash)?,
        };
        let (tmp_name, tmp) = match staged {
            Some(made) => made,
            None => {
                let name = self.tmp_name()?;
                let fd = fs::create_excl_at(self.tmp.as_fd(), &name, 0o444)
                    .ctx("create", self.tmp_path.join(fs::as_path(&name)))?;
                (name, fd)
            }
        };
        let tmp_shown = || self.tmp_path.join(fs::as_path(&tmp_name));
        let written = if what == Stored::Band {
            // A band keeps the holes of its all-zero blocks, so a sparse
            // file costs the store only its data, and `assemble` can tell
            // a band that has holes to put back.
            rustix::fs::ftruncate(&tmp, data.len() as u64)
                .ctx("truncate", tmp_shown())
                .and_then(|()| {
                    self.copier
                        .write_sparse_at(tmp.as_fd(), data, 0)
                        .ctx("write", tmp_shown())
                })
        } else {
            self.copier
                .write_all(tmp.as_fd(), data)
                .ctx("write", tmp_shown())
        };
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(self.tmp.as_fd(), tmp_name.as_slice(), AtFlags::empty());
            return Err(e);
        }
        self.add_pending_to(
            hash,
            tmp_name,
            tmp,
            data.len() as u64,
            what == Stored::Manifest,
        )
    }

    /// Adds content that arrived from elsewhere (a remote pull) as the
    /// pending object `hash`; the caller has checked that `data` hashes to
    /// `hash`. Like a capture, it becomes durable under its name only at
    /// [`commit`](Self::commit). Returns the bytes newly stored (0 when the
    /// store already holds the content).
    pub fn put_verified(&self, hash: Hash, data: &[u8]) -> Result<u64> {
        debug_assert_eq!(Hash::of(data), hash);
        if self.contains_sized(&hash, data.len() as u64) {
            return Ok(0);
        }
        self.store_bytes(hash, data, Stored::Object)
    }

    /// [`put_verified`](Self::put_verified) without first asking whether the
    /// store holds `hash`, for a caller that knows it did not (a store it has
    /// just created, filling it with distinct contents): no `stat`s. Were the
    /// object there after all, [`commit`](Self::commit) finds it placed and
    /// drops the new copy, so this is never wrong, only wasted work.
    pub fn put_verified_new(&self, hash: Hash, data: &[u8]) -> Result<u64> {
        debug_assert_eq!(Hash::of(data), hash);
        self.store_bytes(hash, data, Stored::Object)
    }

    /// Records a fully written temp file as the pending object `hash`.
    fn add_pending(&self, hash: Hash, tmp_name: Vec<u8>, tmp: OwnedFd, size: u64) -> Result<u64> {
        self.add_pending_to(hash, tmp_name, tmp, size, false)
    }

    fn add_pending_to(
        &self,
        hash: Hash,
        tmp_name: Vec<u8>,
        tmp: OwnedFd,
        size: u64,
        manifest: bool,
    ) -> Result<u64> {
        let map = if manifest {
            &self.pending_manifests
        } else {
            &*self.pending
        };
        let mut pending = map.lock().unwrap();
        if pending.contains_key(&hash) {
            drop(pending);
            let _ = rustix::fs::unlinkat(self.tmp.as_fd(), tmp_name.as_slice(), AtFlags::empty());
            return Ok(0);
        }
        pending.insert(hash, tmp_name.clone());
        drop(pending);
        if self.fsynced_each.fetch_add(1, Ordering::Relaxed) < FSYNC_EACH_LIMIT {
            let path = self.tmp_path.join(fs::as_path(&tmp_name));
            // Band manifests wait for commit: they are placed after bands.
            let place = (!manifest).then(|| Early {
                hash,
                tmp_name,
                tmp: self.tmp.clone(),
                dir: self.dir.clone(),
                objects: self.path.clone(),
                pending: self.pending.clone(),
            });
            self.syncs.submit(SyncJob {
                file: tmp,
                path,
                place,
            });
        } else {
            self.unsynced.fetch_add(1, Ordering::Relaxed);
            self.flush_ahead(size);
        }
        Ok(size)
    }

    /// Counts `size` unsynced bytes and, every [`FLUSH_AHEAD`] bytes, starts
    /// a background `syncfs` unless one is still running (see the module doc).
    fn flush_ahead(&self, size: u64) {
        let total = self.unflushed.fetch_add(size, Ordering::Relaxed) + size;
        if total < FLUSH_AHEAD || self.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        self.unflushed.store(0, Ordering::Relaxed);
        let Ok(fd) = self.tmp.try_clone() else {
            self.flushing.store(false, Ordering::Release);
            return;
        };
        let flushing = self.flushing.clone();
        let spawned = std::thread::Builder::new()
            .name("ckpt-flush".into())
            .spawn(move || {
                // Best effort: the syncfs in `commit` reports errors.
                let _ = rustix::fs::syncfs(&fd);
                flushing.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.flushing.store(false, Ordering::Release);
        }
    }

    /// Makes every pending object durable under its final name. Must be
    /// called (and succeed) before a catalog commit that references them.
    pub fn commit(&self) -> Result<usize> {
        // An object whose sync failed must never be placed, not even by a
        // later operation on this open store (the watcher's).
        if let Err(e) = self.syncs.wait() {
            self.abort();
            return Err(e);
        }
        let pending = std::mem::take(&mut *self.pending.lock().unwrap());
        let manifests = std::mem::take(&mut *self.pending_manifests.lock().unwrap());
        self.undecide_shards();
        self.fsynced_each.store(0, Ordering::Relaxed);
        self.unflushed.store(0, Ordering::Relaxed);
        if self.unsynced.swap(0, Ordering::Relaxed) > 0 {
            let _t = crate::trace::span("objects syncfs");
            rustix::fs::syncfs(&*self.tmp).ctx("syncfs", &self.tmp_path)?;
        }
        ckpt_fault::point("objects.after_tmp_fsync");
        if pending.is_empty() && manifests.is_empty() {
            return Ok(0);
        }
        // Plain objects (bands included) first and durably; only then the
        // manifests that name them, so no manifest ever names a missing band.
        let _t = crate::trace::span("objects place");
        let n = self.place(pending, object_name)? + self.place(manifests, manifest_name)?;
        Ok(n)
    }

    /// Renames durable temp files to their final names and syncs the shard
    /// directories.
    fn place(&self, pending: HashMap<Hash, Vec<u8>>, name: fn(&Hash) -> Vec<u8>) -> Result<usize> {
        if pending.is_empty() {
            return Ok(0);
        }
        let pending: Vec<(Hash, Vec<u8>)> = pending.into_iter().collect();
        let whole = self.place_staged(&pending)?;
        pending
            .par_iter()
            .filter(|(hash, tmp_name)| !(is_staged(tmp_name) && whole[hash.0[0] as usize]))
            .try_for_each(|(hash, tmp_name)| -> Result<()> {
                let final_name = name(hash);
                ckpt_fault::point("objects.before_rename");
                let rename =
                    || rename_into(self.tmp.as_fd(), tmp_name, self.dir.as_fd(), &final_name);
                // `ENOENT`: the shard is missing (or was, until another
                // thread made it); once it is there, a second `ENOENT` is
                // the temporary file's.
                match rename() {
                    Err(Errno::NOENT) => {
                        self.make_shard(hash.0[0])?;
                        rename()
                    }
                    r => r,
                }
                .ctx("rename", self.path.join(fs::as_path(&final_name)))?;
                ckpt_fault::point("objects.after_rename");
                Ok(())
            })?;
        let mut shards: Vec<u8> = pending.iter().map(|(h, _)| h.0[0]).collect();
        shards.sort_unstable();
        shards.dedup();
        if shards.len() > FSYNC_EACH_LIMIT {
            rustix::fs::syncfs(&self.dir).ctx("syncfs", &self.path)?;
            self.dir_changed.store(false, Ordering::Relaxed);
        } else {
            if self.dir_changed.swap(false, Ordering::Relaxed) {
                rustix::fs::fsync(&self.dir).ctx("fsync", &self.path)?;
            }
            for s in shards {
                sync_shard(self.dir.as_fd(), &self.path, s)?;
            }
        }
        ckpt_fault::point("objects.after_dir_fsync");
        Ok(pending.len())
    }

    /// Renames each staged shard whose every file is pending onto its empty
    /// live shard, in one step. Returns, per shard, whether that happened;
    /// the objects of any other staged shard are renamed one by one, as
    /// lane files are.
    fn place_staged(&self, pending: &[(Hash, Vec<u8>)]) -> Result<Box<[bool; 256]>> {
        let mut whole = Box::new([false; 256]);
        let mut count = [0usize; 256];
        for (hash, tmp_name) in pending {
            if is_staged(tmp_name) {
                count[hash.0[0] as usize] += 1;
            }
        }
        for (shard, &n) in count.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let rel = format!("{STAGED}/{shard:02x}");
            let shown = || self.tmp_path.join(&rel);
            // Only pending files may become names under `objects/`: a shard
            // that holds anything else (a file an error left) is not moved.
            let held = fs::open_dir_at(self.tmp.as_fd(), rel.as_bytes())
                .and_then(fs::list_dir_packed)
                .ctx("read", shown())?
                .len();
            if held != n {
                continue;
            }
            let live = format!("{shard:02x}");
            ckpt_fault::point("objects.before_shard_rename");
            match rustix::fs::renameat(
                self.tmp.as_fd(),
                rel.as_str(),
                self.dir.as_fd(),
                live.as_str(),
            ) {
                Ok(()) => {
                    whole[shard] = true;
                    self.dir_changed.store(true, Ordering::Relaxed);
                }
                // Something was placed there since the shard was staged.
                Err(Errno::NOTEMPTY) | Err(Errno::EXIST) => {}
                Err(e) => return Err(Error::io("rename", shown(), e.into())),
            }
            ckpt_fault::point("objects.after_shard_rename");
        }
        Ok(whole)
    }

    /// Drops pending objects without storing them (an aborted operation).
    pub fn abort(&self) {
        // The operation failed already; a sync's error would say no more.
        let _ = self.syncs.wait();
        let mut pending = std::mem::take(&mut *self.pending.lock().unwrap());
        pending.extend(std::mem::take(&mut *self.pending_manifests.lock().unwrap()));
        for tmp_name in pending.values() {
            let _ = rustix::fs::unlinkat(self.tmp.as_fd(), tmp_name.as_slice(), AtFlags::empty());
        }
        self.undecide_shards();
        self.fsynced_each.store(0, Ordering::Relaxed);
    }

    /// Ends an operation's shard decisions: the next one decides afresh
    /// (its shards may have been placed since).
    fn undecide_shards(&self) {
        for s in self.staged.iter() {
            s.store(SHARD_UNDECIDED, Ordering::Relaxed);
        }
    }

    /// Checks that object `hash` exists and holds exactly `size` bytes that
    /// hash to its name. Restore checks every object it needs before it
    /// changes anything, so a damaged store never reaches a restored tree.
    pub fn check(&self, hash: &Hash, size: u64) -> Result<()> {
        let (got, len) = self.hash_object(hash)?;
        if got != *hash || len != size {
            return Err(Error::Corrupt(format!(
                "object {hash} ({}) is damaged: {len} bytes hashing to {got}, expected {size} bytes",
                self.object_path(hash).display()
            )));
        }
        Ok(())
    }

    /// Writes object `hash` (of `size` bytes, already [`check`](Self::check)ed)
    /// into the new file `name` in `dir` with the copy engine, and returns it
    /// open. On error the new file is removed.
    pub fn materialize(
        &self,
        hash: &Hash,
        size: u64,
        dir: BorrowedFd<'_>,
        name: &[u8],
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<OwnedFd> {
        let plain = match fs::open_file_at(self.dir.as_fd(), &object_name(hash)) {
            Ok(fd) => Some(fd),
            Err(Errno::NOENT) => None,
            Err(e) => return Err(Error::io("open", self.object_path(hash), e.into())),
        };
        let manifest = match plain {
            Some(_) => None,
            None => Some(self.manifest(hash)?.ok_or_else(|| self.missing(hash))?),
        };
        let dst = fs::create_excl_at(dir, name, 0o600).ctx("create", shown())?;
        let copied = match (&plain, &manifest) {
            (Some(src), _) => self
                .copier
                .copy(src.as_fd(), dst.as_fd(), size)
                .map(|_| ())
                .ctx("copy", shown()),
            (None, Some(m)) => self.assemble(m, dst.as_fd(), shown),
            (None, None) => unreachable!("one of the two exists"),
        };
        let copied = copied.and_then(|_| {
            let m = fs::stat_fd(dst.as_fd()).ctx("stat", shown())?;
            if m.size != size {
                return Err(Error::Corrupt(format!(
                    "object {hash} ({}) changed size while being copied to {}",
                    self.object_path(hash).display(),
                    shown().display()
                )));
            }
            Ok(())
        });
        match copied {
            Ok(()) => Ok(dst),
            Err(e) => {
                let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Hard-links object `hash` as the new name `name` in `dir` (`ckpt fork
    /// --link`). The link shares the object's inode: it must never be
    /// written, chmod-ed or touched, which is the caller's promise.
    pub fn link_to(&self, hash: &Hash, dir: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<()> {
        rustix::fs::linkat(
            self.dir.as_fd(),
            object_name(hash).as_slice(),
            dir,
            name,
            AtFlags::empty(),
        )
    }

    /// Writes the bands of `m` into `dst` at their offsets, in parallel,
    /// with `copy_file_range` where it works.
    fn assemble(
        &self,
        m: &Manifest,
        dst: BorrowedFd<'_>,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<()> {
        let target = shown();
        rustix::fs::ftruncate(dst, m.size).ctx("truncate", &target)?;
        (0..m.bands.len())
            .into_par_iter()
            .try_for_each(|i| -> Result<()> {
                let band = &m.bands[i];
                let (off, len) = m.range(i);
                if len == bands::BAND && *band == zero_band() {
                    // Already zeros after the truncate: leave a hole.
                    return Ok(());
                }
                let src = self.open_object(band)?;
                let stored = rustix::fs::fstat(&src).ctx("stat", self.object_path(band))?;
                if (stored.st_blocks as u64) * 512 < len {
                    // The band was stored with holes: keep them.
                    self.copier.copy_sparse_at(src.as_fd(), 0, dst, off, len)
                } else {
                    self.copier
                        .copy_at(src.as_fd(), 0, dst, off, len)
                        .map(|_| ())
                }
                .ctx("copy", &target)?;
                Ok(())
            })
    }

    /// Removes one band manifest (gc; its bands are objects of their own).
    pub fn remove_manifest(&self, h: &Hash) -> Result<()> {
        let name = manifest_name(h);
        match rustix::fs::unlinkat(self.dir.as_fd(), name.as_slice(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(Error::io(
                "remove",
                self.path.join(fs::as_path(&name)),
                e.into(),
            )),
        }
    }

    /// Removes one object (gc).
    pub fn remove(&self, h: &Hash) -> Result<()> {
        match rustix::fs::unlinkat(
            self.dir.as_fd(),
            object_name(h).as_slice(),
            AtFlags::empty(),
        ) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(Error::io("remove", self.object_path(h), e.into())),
        }
    }

    /// Lists every stored object (gc, verify). Names that are not object
    /// names are reported in the second list.
    pub fn list(&self) -> Result<(Vec<Hash>, Vec<PathBuf>)> {
        let (objects, _, strays) = self.list_all()?;
        Ok((objects, strays))
    }

    /// Lists stored plain objects, band manifests (by the hash of the
    /// content they describe) and stray names.
    pub fn list_all(&self) -> Result<(Vec<Hash>, Vec<Hash>, Vec<PathBuf>)> {
        let mut out = Vec::new();
        let mut manifests = Vec::new();
        let mut strays = Vec::new();
        for i in 0..256u32 {
            let shard = format!("{i:02x}");
            let fd =
                match fs::open_dir_at(self.dir.as_fd(), shard.as_bytes()).and_then(fs::list_dir) {
                    Ok(listing) => listing,
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(Error::io("open", self.path.join(&shard), e.into())),
                };
            for (name, _) in &fd.names {
                let (stem, list) = match name.strip_suffix(bands::SUFFIX) {
                    Some(stem) => (stem, &mut manifests),
                    None => (name.as_slice(), &mut out),
                };
                let full = format!("{shard}{}", String::from_utf8_lossy(stem));
                match Hash::from_hex(&full) {
                    Some(h) if full[..2] == shard => list.push(h),
                    _ => strays.push(self.path.join(&shard).join(fs::as_path(name))),
                }
            }
        }
        Ok((out, manifests, strays))
    }
}

/// Whether the file open as `src` still has the metadata `m1` it had
/// before it was read (a capture of a changed file is retried).
fn unchanged(src: BorrowedFd<'_>, m1: &Meta, shown: &dyn Fn() -> PathBuf) -> Result<bool> {
    Ok(fs::stat_fd(src).ctx("stat", shown())? == *m1)
}

/// A finished capture of the file last seen as `m1`, whose content is the
/// object `hash`; `new_bytes` of it were newly stored.
fn captured(hash: Hash, m1: &Meta, new_bytes: u64) -> Captured {
    Captured {
        hash,
        meta: *m1,
        new_bytes,
    }
}

/// Opens `name` for reading if it is (still) a regular file, with its stat;
/// [`CaptureError::Gone`] if it vanished or became something else.
fn open_regular(
    dir: BorrowedFd<'_>,
    name: &[u8],
    shown: &dyn Fn() -> PathBuf,
) -> Result<(OwnedFd, Meta), CaptureError> {
    let src = match fs::open_file_at(dir, name) {
        Ok(fd) => fd,
        Err(Errno::NOENT) | Err(Errno::LOOP) | Err(Errno::NXIO) => return Err(CaptureError::Gone),
        Err(Errno::ACCESS) | Err(Errno::PERM) => return Err(CaptureError::Unreadable),
        Err(e) => return Err(Error::io("open", shown(), e.into()).into()),
    };
    // (`map_err`, not `ctx`: the shown path is built only on error.)
    let meta = fs::stat_fd(src.as_fd()).map_err(|e| Error::io("stat", shown(), e.into()))?;
    if meta.file_type() != FileType::RegularFile {
        return Err(CaptureError::Gone);
    }
    Ok((src, meta))
}

/// Hashes a file's content without storing it (status, diff), with the same
/// stability rule as capture. Returns the hash and the stat it matches.
pub fn hash_file(
    dir: BorrowedFd<'_>,
    name: &[u8],
    shown: &dyn Fn() -> PathBuf,
) -> Result<(Hash, Meta), CaptureError> {
    for _ in 0..MAX_ATTEMPTS {
        let (src, m1) = open_regular(dir, name, shown)?;
        if let Some(hash) = hash_in_place(src.as_fd(), &m1, shown)? {
            return Ok((hash, m1));
        }
    }
    Err(Error::Unstable(shown()).into())
}

/// What [`Objects::import_from`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// Objects (and bands, manifests) hard-linked from the other store.
    pub linked: u64,
    /// Objects copied (another filesystem, or links refused).
    pub copied: u64,
    /// Contents the store already held.
    pub present: u64,
}

impl Objects {
    /// Makes every content of `wanted` (hash, size) that this store lacks
    /// available in it, taken from the store `src` (`ckpt fork` brings its
    /// origin checkpoint's objects into the fork's store, `ckpt adopt` a
    /// fork's objects back). Durable when it returns, so a catalog commit
    /// may then reference them.
    ///
    /// An object is hard-linked where both stores are on one filesystem:
    /// objects are read-only (0444) files named by their content that no
    /// ckpt code ever opens for writing, and gc only unlinks names, so a
    /// shared inode can change for neither store, and deleting either store
    /// (with `rm -rf` too) leaves the other's names intact. Elsewhere (or
    /// when the filesystem refuses a link: `EXDEV`, `EPERM`, `EMLINK`) the
    /// content is captured like a workspace file: copied into `tmp/`,
    /// hashed from the copy, renamed into place. A linked object is not
    /// re-hashed here (the fork wrote its files from the same, verified
    /// objects; a restore re-hashes every object it writes), a copied one
    /// is. Banded contents link their bands first and then their manifest,
    /// with the bands durable in between, so no manifest names a missing
    /// band.
    pub fn import_from(&self, src: &Objects, wanted: &[(Hash, u64)]) -> Result<Imported> {
        use std::sync::atomic::AtomicU64;
        let _t = crate::trace::span("objects import");
        let linked = AtomicU64::new(0);
        let present = AtomicU64::new(0);
        let to_copy: Mutex<Vec<(Hash, u64)>> = Mutex::new(Vec::new());
        let banded: Mutex<Vec<(Hash, u64)>> = Mutex::new(Vec::new());
        let link_once = |name: &[u8]| -> rustix::io::Result<bool> {
            match rustix::fs::linkat(
                src.dir.as_fd(),
                name,
                self.dir.as_fd(),
                name,
                AtFlags::empty(),
            ) {
                Ok(()) => Ok(true),
                Err(Errno::EXIST) => Ok(false),
                Err(e) => Err(e),
            }
        };
        // `ENOENT` is the source's once the target's shard is there.
        let link = |h: &Hash, name: &[u8]| -> Result<rustix::io::Result<bool>> {
            Ok(match link_once(name) {
                Err(Errno::NOENT) => {
                    self.make_shard(h.0[0])?;
                    link_once(name)
                }
                r => r,
            })
        };
        let refused = |e: Errno| matches!(e, Errno::XDEV | Errno::PERM | Errno::MLINK);
        // The link first: one system call whether the object is new here
        // (the usual case: a fork's new store) or present (`EEXIST`).
        wanted.par_iter().try_for_each(|&(h, size)| -> Result<()> {
            match link(&h, &object_name(&h))? {
                Ok(true) => {
                    linked.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {
                    present.fetch_add(1, Ordering::Relaxed);
                }
                // Not plain in `src` (banded there), or no link possible:
                // nothing to do if we have it.
                Err(e) if (e == Errno::NOENT || refused(e)) && self.contains_sized(&h, size) => {
                    present.fetch_add(1, Ordering::Relaxed);
                }
                Err(Errno::NOENT) => banded.lock().unwrap().push((h, size)),
                Err(e) if refused(e) => to_copy.lock().unwrap().push((h, size)),
                Err(e) => return Err(Error::io("link", self.object_path(&h), e.into())),
            }
            Ok(())
        })?;
        // Banded contents: their bands as plain objects, then the manifests.
        let mut manifests = Vec::new();
        for (h, size) in banded.into_inner().unwrap() {
            let Some(m) = src.manifest(&h)? else {
                return Err(src.missing(&h));
            };
            for (i, band) in m.bands.iter().enumerate() {
                if self.contains_plain(band) {
                    continue;
                }
                match link(band, &object_name(band))? {
                    Ok(true) => {
                        linked.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(false) => {}
                    Err(e) if refused(e) => to_copy.lock().unwrap().push((*band, m.range(i).1)),
                    Err(e) => return Err(Error::io("link", self.object_path(band), e.into())),
                }
            }
            manifests.push((h, size));
        }
        let copied = self.import_copies(src, &to_copy.into_inner().unwrap())?;
        if linked.load(Ordering::Relaxed) > 0 {
            rustix::fs::syncfs(&self.dir).ctx("syncfs", &self.path)?;
        }
        let mut linked_manifests = 0u64;
        for (h, _) in &manifests {
            match link(h, &manifest_name(h))? {
                Ok(true) => linked_manifests += 1,
                Ok(false) => {}
                Err(e) if refused(e) => {
                    let m = src.manifest(h)?.ok_or_else(|| src.missing(h))?;
                    self.store_bytes(*h, &m.encode(), Stored::Manifest)?;
                }
                Err(e) => return Err(Error::io("link", self.object_path(h), e.into())),
            }
        }
        self.commit()?;
        if linked_manifests > 0 {
            rustix::fs::syncfs(&self.dir).ctx("syncfs", &self.path)?;
        }
        Ok(Imported {
            linked: linked.into_inner() + linked_manifests,
            copied,
            present: present.into_inner(),
        })
    }

    /// Copies plain objects of `src` into this store (captured from the
    /// source object: copied, hashed from the copy, checked against the
    /// name) and makes them durable.
    fn import_copies(&self, src: &Objects, objects: &[(Hash, u64)]) -> Result<u64> {
        objects.par_iter().try_for_each(|(h, size)| -> Result<()> {
            let name = object_name(h);
            let shown = || src.object_path(h);
            let got = match self.capture(src.dir.as_fd(), &name, None, &shown) {
                Ok(c) => c,
                Err(CaptureError::Gone) => return Err(src.missing(h)),
                Err(CaptureError::Unreadable) => {
                    return Err(Error::io(
                        "open",
                        src.object_path(h),
                        std::io::ErrorKind::PermissionDenied.into(),
                    ))
                }
                Err(CaptureError::Err(e)) => return Err(e),
            };
            if got.hash != *h || got.meta.size != *size {
                return Err(Error::Corrupt(format!(
                    "object {h} ({}) is damaged: it hashes to {}",
                    src.object_path(h).display(),
                    got.hash
                )));
            }
            Ok(())
        })?;
        self.commit()?;
        Ok(objects.len() as u64)
    }
}

/// The hash of the file open as `src`, last seen as `m1`, read where it is;
/// `None` when it changed while being read. Exactly `m1.size` bytes are
/// read (see ckpt_fs::content_hash); a file that grew or changed while
/// read shows up in the second stat.
fn hash_in_place(
    src: BorrowedFd<'_>,
    m1: &Meta,
    shown: &dyn Fn() -> PathBuf,
) -> Result<Option<Hash>> {
    let hash = ckpt_fs::content_hash::hash_exact(src, m1.size)
        .map_err(|e| Error::io("read", shown(), e))?;
    match hash {
        Some(h) => Ok(unchanged(src, m1, shown)?.then_some(h)),
        None => Ok(None),
    }
}
