//! Materialising a checkpoint into a fresh directory: `restore --to DIR`
//! ([`restore_to`]) and the writer behind `ckpt fork`.
//!
//! Nothing of the user's is at risk in a directory that was missing or empty,
//! so this path does without what an in-place restore needs (temporary names
//! and renames, the journal, a stat of every written file for the index) and
//! keeps the per-file work to what the result needs:
//! - the checkpoint's trees are walked straight from the catalog, one rayon
//!   task per directory; a directory is created with `mkdirat` and opened
//!   relative to its parent's descriptor, and its mode and mtime are set
//!   through that descriptor once its whole subtree is written (directories
//!   nested deeper than [`HOLD_DEPTH`] are reopened instead, so no more than
//!   that many descriptors are held per branch);
//! - a file is created under its final name (`O_CREAT|O_EXCL|O_NOFOLLOW`,
//!   relative to its directory, with its mode), written, and given its mtime
//!   through the same descriptor; `fchmod` only when the umask or special
//!   bits require it.
//!
//! ## Verification
//! Every byte written comes from an object that was hashed and length-checked
//! in the same step, before the file is created:
//! - where the store cannot reflink to the destination, a small object
//!   (≤ [`SMALL_FILE`]) is read into memory once, hashed, and the file is
//!   written from that buffer, so it holds exactly the verified bytes;
//! - every other object is hashed through its open descriptor, then cloned
//!   (or copied) from that descriptor with the copy engine. On xfs/btrfs
//!   small files are cloned too, although writing them would cost less CPU
//!   (on xfs about half of a `FICLONE`): a fork then shares every block
//!   with the store instead of taking one new block per small file (for
//!   the reference workspace a tenth of the new space: BENCHMARKS.md,
//!   "Rejected experiments");
//! - an object used by several files is hashed once per operation (for
//!   `fork --count N`, once for all N forks: [`MaterializeOptions::verified`]);
//! - a fork does not hash a plain object whose inode, size and mtime are
//!   those the store recorded when it last hashed it and found it intact
//!   ([`MaterializeOptions::trust`]: [`VerifiedStats`] has why that stat
//!   proves no write since, and what it does not catch), and records the
//!   objects it hashes there;
//! - a banded object is checked band by band, then reassembled.
//!
//! A damaged or missing object fails the operation with
//! [`Error::Corrupt`] naming it, before any file holding its bytes exists;
//! the caller removes what was written (the destination is left missing or
//! empty, as it was). A crash (SIGKILL) mid-way can leave a partial
//! destination, but never a file with unverified content, and never a
//! workspace marker (a fork writes that last).

use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::engine::diff::PathFilter;
use crate::engine::fork::inherit::{written_entry, Stats};
use crate::error::IoContext;
use crate::store::catalog::{CatalogReader, Checkpoint};
use crate::store::index::IndexEntry;
use crate::store::objects::{object_name, Objects, SMALL_FILE};
use crate::store::tree::{Entry, Node, Tree};
use crate::store::verified::VerifiedStats;
use crate::store::Store;
use crate::{Error, Hash, Result};
use ckpt_fs::content_hash::hash_whole;
use ckpt_fs::copy::{read_expected, Copier, Strategy};
use ckpt_fs::copytree::Progress;
use ckpt_fs::fs::{self, display_path, join};

/// Directories nested deeper than this do not keep their descriptor open
/// while their subtree is written (they are reopened to set mode and mtime).
pub const HOLD_DEPTH: usize = 64;

/// What was written.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Files and symlinks.
    pub files: u64,
    /// Directories (the destination itself not counted).
    pub dirs: u64,
    /// Bytes of file content.
    pub bytes: u64,
}

/// Writes the tree `root` (only what `filter` selects, plus the directories
/// leading to it) into the empty directory `dest`, open as `dest_fd`.
/// `opts.link` hard-links objects where it can (`fork --link`). Leaves the
/// destination directory's own mode and mtime alone. On error,
/// what was written stays for the caller to remove.
pub fn write_tree(
    objects: &Objects,
    reader: &CatalogReader<'_>,
    root: Hash,
    dest_fd: OwnedFd,
    dest: &Path,
    filter: &PathFilter,
    opts: MaterializeOptions<'_>,
) -> Result<Counts> {
    let _t = crate::trace::span("materialize");
    let own = Verified::default();
    let w = Writer {
        objects,
        reader,
        root: &dest_fd,
        root_path: dest,
        filter,
        link: AtomicBool::new(opts.link),
        copier: opts.copier.unwrap_or(&objects.copier),
        progress: opts.progress,
        umask: current_umask(),
        verified: opts.verified.unwrap_or(&own),
        stats: opts.stats,
        trust: opts.trust,
        files: AtomicU64::new(0),
        dirs: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    };
    let tree = reader.tree(&root)?;
    w.dir_contents(dest_fd.as_fd(), b"", root, &tree, 0)?;
    Ok(Counts {
        files: w.files.into_inner(),
        dirs: w.dirs.into_inner(),
        bytes: w.bytes.into_inner(),
    })
}

fn current_umask() -> u32 {
    let old = rustix::process::umask(Mode::from_raw_mode(0o022));
    rustix::process::umask(old);
    old.bits()
}

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Writer<'a> {
    objects: &'a Objects,
    reader: &'a CatalogReader<'a>,
    root: &'a OwnedFd,
    root_path: &'a Path,
    filter: &'a PathFilter,
    /// Hard-link objects (`fork --link`); turned off when the store is on
    /// another filesystem.
    link: AtomicBool,
    /// Writes file contents: the store's own, or the one the fork's backend
    /// chose.
    copier: &'a Copier,
    progress: Option<&'a Progress>,
    umask: u32,
    /// Objects already hashed and found intact in this operation (or, for
    /// `fork --count`, by an earlier fork of the same run).
    verified: &'a Verified,
    /// Where to record the stat of everything written (a fork's index).
    stats: Option<&'a Stats>,
    /// The store's record of objects found intact (see [`VerifiedStats`]).
    trust: Option<&'a VerifiedStats>,
    files: AtomicU64,
    dirs: AtomicU64,
    bytes: AtomicU64,
}

impl Writer<'_> {
    fn shown(&self, rel: &[u8]) -> PathBuf {
        display_path(self.root_path, rel)
    }

    /// The entries of `tree` (at `rel`) to write: subdirectories, then files
    /// and symlinks.
    fn split<'t>(&self, rel: &[u8], tree: &'t Tree) -> (Vec<&'t Entry>, Vec<&'t Entry>) {
        tree.entries
            .iter()
            .filter(|e| {
                let path = join(rel, &e.name);
                self.filter.selects(&path)
                    || (matches!(e.node, Node::Dir { .. }) && self.filter.descends(&path))
            })
            .partition(|e| matches!(e.node, Node::Dir { .. }))
    }

    /// Writes the entries of `tree` (hash `hash`) into the directory `dir`
    /// (`rel` below the destination, at nesting `depth`): files and
    /// subdirectories in parallel; then records their stats when asked to
    /// ([`Stats`]).
    fn dir_contents(
        &self,
        dir: BorrowedFd<'_>,
        rel: &[u8],
        hash: Hash,
        tree: &Tree,
        depth: usize,
    ) -> Result<()> {
        let (subdirs, others) = self.split(rel, tree);
        let (a, b) = rayon::join(
            || {
                others
                    .par_iter()
                    .with_min_len(4)
                    .map(|e| self.entry(dir, rel, e))
                    .collect::<Result<Vec<_>>>()
            },
            || {
                subdirs
                    .par_iter()
                    .map(|e| self.subdir(dir, rel, e, depth + 1))
                    .collect::<Result<Vec<_>>>()
            },
        );
        let (a, b) = (a?, b?);
        if let Some(stats) = self.stats {
            let complete = a.len() + b.len() == tree.entries.len();
            stats.record(rel, hash, complete, a.into_iter().chain(b));
        }
        Ok(())
    }

    /// Creates the directory `e` in `dir` (its parent, `rel`), writes its
    /// subtree, then sets its mode and mtime; its stat when asked to
    /// ([`Stats`]). `depth` is its own nesting.
    fn subdir(
        &self,
        dir: BorrowedFd<'_>,
        rel: &[u8],
        e: &Entry,
        depth: usize,
    ) -> Result<Option<IndexEntry>> {
        let path = join(rel, &e.name);
        let created = self.mkdir(dir, &path, e)?;
        let Node::Dir { tree } = &e.node else {
            unreachable!("split by kind")
        };
        let t = self.reader.tree(tree)?;
        let fd = if depth < HOLD_DEPTH {
            let fd = fs::open_dir_at(dir, &e.name).ctx("open directory", self.shown(&path))?;
            self.dir_contents(fd.as_fd(), &path, *tree, &t, depth)?;
            fd
        } else {
            self.deep(&path, &t)?;
            self.open_beneath(&path)?
        };
        self.finish_dir(fd.as_fd(), &path, e, created)?;
        self.stat_of(e, || fs::stat_fd(fd.as_fd()), &path)
    }

    /// The index entry of `e` (at `path`), just written, from `stat`, when
    /// stats are recorded ([`Stats`]).
    fn stat_of(
        &self,
        e: &Entry,
        stat: impl FnOnce() -> rustix::io::Result<fs::Meta>,
        path: &[u8],
    ) -> Result<Option<IndexEntry>> {
        if self.stats.is_none() {
            return Ok(None);
        }
        let meta = stat().ctx("stat", self.shown(path))?;
        Ok(written_entry(e, meta))
    }

    /// [`dir_contents`](Self::dir_contents) for a deeply nested directory
    /// `rel`: opened by path, closed again before its subdirectories are
    /// written (one at a time), so descriptors do not pile up along a chain.
    fn deep(&self, rel: &[u8], tree: &Tree) -> Result<()> {
        let (subdirs, others) = self.split(rel, tree);
        let mut created = Vec::with_capacity(subdirs.len());
        {
            let fd = self.open_beneath(rel)?;
            for e in others {
                // No record of a deep directory: the next scan lists it.
                self.entry(fd.as_fd(), rel, e)?;
            }
            for e in &subdirs {
                created.push(self.mkdir(fd.as_fd(), &join(rel, &e.name), e)?);
            }
        }
        for (e, created) in subdirs.iter().zip(created) {
            let path = join(rel, &e.name);
            let Node::Dir { tree } = &e.node else {
                unreachable!("split by kind")
            };
            self.deep(&path, &self.reader.tree(tree)?)?;
            let fd = self.open_beneath(&path)?;
            self.finish_dir(fd.as_fd(), &path, e, created)?;
        }
        Ok(())
    }

    /// Creates directory `e` (at `path`) in `dir`, writable and searchable
    /// by us until it is full; returns the mode it has now.
    fn mkdir(&self, dir: BorrowedFd<'_>, path: &[u8], e: &Entry) -> Result<u32> {
        let want = (e.mode & 0o777) | 0o700;
        rustix::fs::mkdirat(dir, e.name.as_slice(), Mode::from_raw_mode(want))
            .ctx("create directory", self.shown(path))?;
        let mut created = want & !self.umask;
        if created & 0o700 != 0o700 {
            // A umask that masks the owner's bits: we must still get in.
            rustix::fs::chmodat(
                dir,
                e.name.as_slice(),
                Mode::from_raw_mode(want),
                AtFlags::empty(),
            )
            .ctx("chmod", self.shown(path))?;
            created = want;
        }
        self.dirs.fetch_add(1, Ordering::Relaxed);
        if let Some(p) = self.progress {
            p.entries.fetch_add(1, Ordering::Relaxed);
        }
        Ok(created)
    }

    fn open_beneath(&self, rel: &[u8]) -> Result<OwnedFd> {
        fs::open_dir_beneath(self.root.as_fd(), rel).ctx("open directory", self.shown(rel))
    }

    /// Sets a directory's mode (if creation did not already give it) and
    /// mtime, once nothing more will be created inside it.
    fn finish_dir(&self, fd: BorrowedFd<'_>, path: &[u8], e: &Entry, created: u32) -> Result<()> {
        if e.mode != created {
            rustix::fs::fchmod(fd, Mode::from_raw_mode(e.mode)).ctx("chmod", self.shown(path))?;
        }
        fs::set_mtime_fd(fd, e.mtime_ns).ctx("set mtime", self.shown(path))
    }

    /// Writes one file or symlink `e` into `dir`; its stat when asked to
    /// ([`Stats`]).
    fn entry(&self, dir: BorrowedFd<'_>, rel: &[u8], e: &Entry) -> Result<Option<IndexEntry>> {
        let path = join(rel, &e.name);
        let shown = || self.shown(&path);
        let stat = match &e.node {
            Node::File { size, hash } => {
                match self.file(dir, &e.name, e, *hash, *size, &shown)? {
                    Some(fd) => self.stat_of(e, || fs::stat_fd(fd.as_fd()), &path)?,
                    // A hard link to an object: not what the tree entry says.
                    None => None,
                }
            }
            Node::Symlink { target } => {
                rustix::fs::symlinkat(target.as_slice(), dir, e.name.as_slice())
                    .ctx("create symlink", shown())?;
                fs::set_mtime_at(dir, &e.name, e.mtime_ns).ctx("set mtime", shown())?;
                self.stat_of(e, || fs::stat_at(dir, &e.name), &path)?
            }
            Node::Dir { .. } => unreachable!("directories are written by subdirs"),
        };
        self.files.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(e.node.size(), Ordering::Relaxed);
        if let Some(p) = self.progress {
            p.entries.fetch_add(1, Ordering::Relaxed);
            p.bytes.fetch_add(e.node.size(), Ordering::Relaxed);
        }
        Ok(stat)
    }

    fn damaged(&self, h: &Hash, size: u64, got: Hash, len: u64) -> Error {
        Error::Corrupt(format!(
            "object {h} ({}) is damaged: {len} bytes hashing to {got}, expected {size} bytes",
            self.objects.object_path(h).display()
        ))
    }

    fn is_verified(&self, h: &Hash) -> bool {
        self.verified.lock().unwrap().contains(h)
    }

    /// Writes the regular file `e` (content `hash`, `size` bytes) as `name`
    /// in `dir`, verifying the object first; returns the new file open, or
    /// None when it is a hard link to the object (`link`).
    fn file(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        e: &Entry,
        hash: Hash,
        size: u64,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<Option<OwnedFd>> {
        if size == 0 && hash == Hash::of(b"") {
            // Nothing to read: the content is known.
            let dst = self.create(dir, name, e, shown)?;
            self.finish_file(dst.as_fd(), e, shown)?;
            return Ok(Some(dst));
        }
        let src = match fs::open_file_at(self.objects.dir_fd(), &object_name(&hash)) {
            Ok(fd) => fd,
            // Not a plain object: stored as bands (or missing, which the
            // check reports).
            Err(Errno::NOENT) => return self.banded(dir, name, e, hash, size, shown).map(Some),
            Err(err) => {
                return Err(Error::io(
                    "open",
                    self.objects.object_path(&hash),
                    err.into(),
                ))
            }
        };
        if size > 0 && e.mode & 0o111 == 0 && self.link.load(Ordering::Relaxed) {
            self.verify_fd(src.as_fd(), &hash, size)?;
            match self.objects.link_to(&hash, dir, name) {
                Ok(()) => return Ok(None),
                Err(Errno::XDEV) | Err(Errno::PERM) | Err(Errno::MLINK) => {
                    self.link.store(false, Ordering::Relaxed);
                }
                Err(err) => return Err(Error::io("link", shown(), err.into())),
            }
        }
        if size <= SMALL_FILE && !self.copier.reflinks() {
            return BUF.with(|buf| {
                let mut buf = buf.borrow_mut();
                // The file is written from exactly the bytes hashed here, so
                // reading `size` bytes (one `read`) is enough: bytes an
                // object should not have past its end never reach the file.
                read_expected(src.as_fd(), &mut buf, size)
                    .ctx("read", self.objects.object_path(&hash))?;
                if buf.len() as u64 != size || !self.is_verified(&hash) {
                    let got = Hash::of(&buf);
                    if got != hash || buf.len() as u64 != size {
                        return Err(self.damaged(&hash, size, got, buf.len() as u64));
                    }
                    self.verified.lock().unwrap().insert(hash);
                }
                let dst = self.create(dir, name, e, shown)?;
                self.copier
                    .write_all(dst.as_fd(), &buf)
                    .ctx("write", shown())?;
                self.finish_file(dst.as_fd(), e, shown)?;
                Ok(Some(dst))
            });
        }
        self.verify_fd(src.as_fd(), &hash, size)?;
        let dst = self.create(dir, name, e, shown)?;
        let how = self
            .copier
            .copy(src.as_fd(), dst.as_fd(), size)
            .ctx("copy", shown())?;
        if how != Strategy::Reflink {
            // A copy could come out short if the object changed meanwhile.
            let got = fs::stat_fd(dst.as_fd()).ctx("stat", shown())?.size;
            if got != size {
                return Err(Error::Corrupt(format!(
                    "object {hash} ({}) changed size while being copied to {}",
                    self.objects.object_path(&hash).display(),
                    shown().display()
                )));
            }
        }
        self.finish_file(dst.as_fd(), e, shown)?;
        Ok(Some(dst))
    }

    /// Hashes the open object `src` unless this operation already did, or
    /// the store's record vouches that it was not written since it was
    /// last found intact ([`VerifiedStats`]); records what it hashed there.
    fn verify_fd(&self, src: BorrowedFd<'_>, hash: &Hash, size: u64) -> Result<()> {
        if self.is_verified(hash) {
            return Ok(());
        }
        let seen = match self.trust {
            Some(t) => {
                let m = fs::stat_fd(src).ctx("stat", self.objects.object_path(hash))?;
                if t.vouches(hash, size, &m) {
                    self.verified.lock().unwrap().insert(*hash);
                    return Ok(());
                }
                Some((t, m, fs::now_ns()))
            }
            None => None,
        };
        let (got, len) = hash_whole(src).ctx("read", self.objects.object_path(hash))?;
        if got != *hash || len != size {
            return Err(self.damaged(hash, size, got, len));
        }
        self.verified.lock().unwrap().insert(*hash);
        if let Some((t, m, now)) = seen {
            t.add(*hash, &m, now);
        }
        Ok(())
    }

    /// A file whose content is stored as bands (or is missing).
    fn banded(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        e: &Entry,
        hash: Hash,
        size: u64,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<OwnedFd> {
        if !self.is_verified(&hash) {
            self.objects.check(&hash, size)?;
            self.verified.lock().unwrap().insert(hash);
        }
        let dst = self.objects.materialize(&hash, size, dir, name, shown)?;
        rustix::fs::fchmod(&dst, Mode::from_raw_mode(e.mode)).ctx("chmod", shown())?;
        fs::set_mtime_fd(dst.as_fd(), e.mtime_ns).ctx("set mtime", shown())?;
        Ok(dst)
    }

    /// Creates `name` in `dir` for writing, with the entry's permission bits.
    fn create(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        e: &Entry,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<OwnedFd> {
        rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(e.mode & 0o777),
        )
        .ctx("create", shown())
    }

    /// Mode (when creation could not give it: umask, special bits) and
    /// mtime of a written file.
    fn finish_file(
        &self,
        fd: BorrowedFd<'_>,
        e: &Entry,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<()> {
        if e.mode & !0o777 != 0 || e.mode & self.umask != 0 {
            rustix::fs::fchmod(fd, Mode::from_raw_mode(e.mode)).ctx("chmod", shown())?;
        }
        fs::set_mtime_fd(fd, e.mtime_ns).ctx("set mtime", shown())
    }
}

/// Checks that `dest` is a new or empty directory for `what` (the command
/// that writes it, as the error names it); returns whether it is missing.
pub fn check_fresh(dest: &Path, what: &str) -> Result<bool> {
    match std::fs::read_dir(dest) {
        Ok(mut it) => {
            if it.next().is_some() {
                return Err(Error::Usage(format!(
                    "{} is not empty; {what} needs a new or empty directory: name one that does not exist yet, or empty this one (nothing was changed)",
                    dest.display()
                )));
            }
            Ok(false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(Error::io("open", dest, e)),
    }
}

/// Removes what a failed [`write_tree`] left in `dest`: `dest` itself too
/// if `remove_dest` (it did not exist before), else only its entries.
/// Directories already given a read-only mode are made writable first.
/// Best effort: the error that stopped the write is the one to report.
pub fn remove_partial(dest: &Path, remove_dest: bool) {
    fn clear(dir: BorrowedFd<'_>) {
        let Ok(fd) = rustix::io::fcntl_dupfd_cloexec(dir, 0) else {
            return;
        };
        let Ok(listing) = fs::list_dir(fd) else {
            return;
        };
        for (name, _) in &listing.names {
            let is_dir = fs::stat_at(listing.fd(), name)
                .is_ok_and(|m| m.file_type() == rustix::fs::FileType::Directory);
            if is_dir {
                if let Ok(sub) = fs::open_dir_at(listing.fd(), name) {
                    let _ = rustix::fs::fchmod(&sub, Mode::from_raw_mode(0o700));
                    clear(sub.as_fd());
                }
                let _ = rustix::fs::unlinkat(listing.fd(), name.as_slice(), AtFlags::REMOVEDIR);
            } else {
                let _ = rustix::fs::unlinkat(listing.fd(), name.as_slice(), AtFlags::empty());
            }
        }
    }
    if let Ok(fd) = fs::open_dir_path(dest) {
        clear(fd.as_fd());
    }
    if remove_dest {
        let _ = std::fs::remove_dir(dest);
    }
}

/// What `restore --to` did.
#[derive(Clone, Debug)]
pub struct MaterializeReport {
    /// The checkpoint materialised.
    pub target: Checkpoint,
    /// Files and symlinks written.
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Bytes of file content.
    pub bytes: u64,
}

/// How [`restore_to_with`] writes files.
#[derive(Clone, Copy, Debug, Default)]
pub struct MaterializeOptions<'p> {
    /// Hard-link non-executable files to their store objects instead of
    /// copying them (`ckpt fork --link`): such files are read-only (mode
    /// 0444) and carry the object's mtime; files with an execute bit, and
    /// every file when the store is on another filesystem, are copied.
    pub link: bool,
    /// Counters to advance as entries are written (progress bars).
    pub progress: Option<&'p Progress>,
    /// Write contents with this copier instead of the store's (a fork whose
    /// backend is `copy` where the store could reflink).
    pub copier: Option<&'p Copier>,
    /// Objects already hashed and found intact by an earlier write of the
    /// same run (`fork --count N`: each object is hashed once for all N
    /// forks, not once per fork); extended with this write's.
    pub verified: Option<&'p Verified>,
    /// Record here the stat of every file and directory written, for the
    /// new tree's stat index (a fork's: no second pass of `lstat`s).
    pub stats: Option<&'p Stats>,
    /// Do not hash an object this record vouches for, and record there the
    /// objects hashed (a fork: [`VerifiedStats`]).
    pub trust: Option<&'p VerifiedStats>,
}

/// The objects an operation has hashed and found intact: never hashed
/// again in it. Objects are immutable (read-only files replaced only by
/// rename), so a second hash within one operation could only catch damage
/// done in the milliseconds between, which the first use of that object in
/// the same fork would not have caught either.
pub type Verified = Mutex<HashSet<Hash>>;

/// Materialises checkpoint `rev` (optionally only `paths`) into `dest`, which
/// must not exist or be an empty directory.
pub fn restore_to(
    store: &Store,
    rev: &str,
    dest: &Path,
    paths: &[Vec<u8>],
) -> Result<MaterializeReport> {
    restore_to_with(store, rev, dest, paths, MaterializeOptions::default())
}

/// [`restore_to`] with options (used by `ckpt fork`).
pub fn restore_to_with(
    store: &Store,
    rev: &str,
    dest: &Path,
    paths: &[Vec<u8>],
    opts: MaterializeOptions<'_>,
) -> Result<MaterializeReport> {
    let reader = store.catalog.reader()?;
    let target = reader.resolve(rev)?;
    // Refuse a non-empty destination before creating anything.
    let missing = check_fresh(dest, "`ckpt restore --to`")?;
    let filter = PathFilter::new(paths.to_vec());
    if missing {
        std::fs::create_dir_all(dest).ctx("create", dest)?;
    }
    // Every object is verified as it is written (see crate::engine::materialize).
    let written = fs::open_dir_path(dest)
        .ctx("open", dest)
        .and_then(|root_fd| {
            write_tree(
                &store.objects,
                &reader,
                target.root,
                root_fd,
                dest,
                &filter,
                opts,
            )
        });
    let counts = match written {
        Ok(c) => c,
        Err(e) => {
            // Leave the destination as it was: gone if we created it, else
            // empty again (it was empty when we started).
            remove_partial(dest, missing);
            return Err(e);
        }
    };
    Ok(MaterializeReport {
        target,
        files: counts.files,
        dirs: counts.dirs,
        bytes: counts.bytes,
    })
}
