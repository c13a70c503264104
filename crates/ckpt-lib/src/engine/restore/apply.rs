//! Step 3's writes of a restore and step 4's index: the [`Applier`] that
//! applies a plan to the working directory (removals, files through a
//! temporary name and a rename, directory modes), finding target entries
//! with a [`TargetLookup`], and the stat index updated for exactly the
//! paths written ([`updated_index`]). The order and why it is safe are in
//! the module doc of [`crate::engine::restore`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode as FsMode};
use rustix::io::Errno;

use crate::engine::diff::{Change, ChangeKind};
use crate::error::IoContext;
use crate::store::catalog::CatalogReader;
use crate::store::index::{DirRecord, Index, IndexEntry, UNKNOWN_TREE};
use crate::store::objects::Objects;
use crate::store::tree::{Entry, Node, Tree};
use crate::workspace::ignore::Ignore;
use crate::workspace::scan::TEMP_PREFIX;
use crate::{Error, Hash, Result};
use ckpt_fs::fs::is_within;
use ckpt_fs::fs::{self, display_path, join, parent_of, Meta};

pub(super) fn name_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// Finds entries of the target checkpoint by path, caching trees.
pub(super) struct TargetLookup<'a> {
    reader: &'a CatalogReader<'a>,
    root: Hash,
    trees: Mutex<HashMap<Hash, Arc<Tree>>>,
}

impl<'a> TargetLookup<'a> {
    pub(super) fn new(reader: &'a CatalogReader<'a>, root: Hash) -> Self {
        TargetLookup {
            reader,
            root,
            trees: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn tree(&self, h: &Hash) -> Result<Arc<Tree>> {
        if let Some(t) = self.trees.lock().unwrap().get(h) {
            return Ok(Arc::clone(t));
        }
        let t = Arc::new(self.reader.tree(h)?);
        self.trees.lock().unwrap().insert(*h, Arc::clone(&t));
        Ok(t)
    }

    /// The tree hash of the directory at `path` in the target, if it is one.
    fn dir_tree(&self, path: &[u8]) -> Result<Option<Hash>> {
        let mut cur = self.root;
        for comp in path.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            let t = self.tree(&cur)?;
            match t.get(comp).map(|e| &e.node) {
                Some(Node::Dir { tree }) => cur = *tree,
                _ => return Ok(None),
            }
        }
        Ok(Some(cur))
    }

    /// The target entry at `path` (not the root).
    pub(super) fn entry(&self, path: &[u8]) -> Result<Option<Entry>> {
        let Some(parent) = self.dir_tree(parent_of(path))? else {
            return Ok(None);
        };
        Ok(self.tree(&parent)?.get(name_of(path)).cloned())
    }
}

/// A file or symlink operation in one directory.
enum Op<'c> {
    /// Write the entry; the second field is the size of the file it
    /// replaces (0 if none).
    Write(&'c Entry, u64),
    Meta(&'c Entry),
}

impl Op<'_> {
    /// Whether it needs more space than it frees: a write of a file larger
    /// than the one it replaces. Those run after all the others (see the
    /// module doc, "Space").
    fn grows(&self) -> bool {
        match self {
            Op::Write(e, replaced) => match e.node {
                Node::File { size, .. } => size > *replaced,
                _ => false,
            },
            Op::Meta(_) => false,
        }
    }
}

/// The size of the file `e` is, 0 for anything else.
fn file_size(e: Option<&Entry>) -> u64 {
    match e.map(|e| &e.node) {
        Some(Node::File { size, .. }) => *size,
        _ => 0,
    }
}

pub(super) struct Applier<'a> {
    pub(super) root: OwnedFd,
    pub(super) root_path: &'a Path,
    pub(super) objects: &'a Objects,
    pub(super) ignore: Option<&'a Ignore>,
    /// Unreadable entries the scan left out: never removed.
    pub(super) left_out: HashSet<Vec<u8>>,
    pub(super) written: Mutex<HashMap<Vec<u8>, Meta>>,
    pub(super) removed: AtomicU64,
    pub(super) counter: AtomicU64,
}

impl Applier<'_> {
    pub(super) fn shown(&self, rel: &[u8]) -> PathBuf {
        display_path(self.root_path, rel)
    }

    fn open_dir(&self, rel: &[u8]) -> Result<OwnedFd> {
        fs::open_dir_beneath(self.root.as_fd(), rel).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR => Error::Usage(format!(
                "{}: a path component is not a directory (a symlink or file is in the way); nothing beyond it was written",
                self.shown(rel).display()
            )),
            e => Error::io("open directory", self.shown(rel), e.into()),
        })
    }

    fn temp_name(&self) -> Vec<u8> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut name = TEMP_PREFIX.to_vec();
        name.extend_from_slice(format!("{}.{n}", std::process::id()).as_bytes());
        name
    }

    pub(super) fn apply(&self, changes: &[Change], lookup: &TargetLookup<'_>) -> Result<()> {
        // Phase A: removals and directory creation, in path order.
        let mut removed_dirs: Vec<&[u8]> = Vec::new();
        let mut groups: BTreeMap<&[u8], Vec<(&[u8], Op<'_>)>> = BTreeMap::new();
        let mut finalize: BTreeSet<Vec<u8>> = BTreeSet::new();
        for c in changes {
            let path = c.path.as_slice();
            let mut p = parent_of(path);
            while !p.is_empty() && finalize.insert(p.to_vec()) {
                p = parent_of(p);
            }
            let under_removed = removed_dirs.last().is_some_and(|d| is_within(path, d));
            match c.kind {
                ChangeKind::Deleted => {
                    if !under_removed {
                        self.remove(path)?;
                        if matches!(c.old.as_ref().map(|e| &e.node), Some(Node::Dir { .. })) {
                            removed_dirs.push(path);
                        }
                    }
                }
                ChangeKind::TypeChanged => {
                    self.remove(path)?;
                    if matches!(c.old.as_ref().map(|e| &e.node), Some(Node::Dir { .. })) {
                        removed_dirs.push(path);
                    }
                    self.create(c, &mut groups, &mut finalize)?;
                }
                ChangeKind::Added => self.create(c, &mut groups, &mut finalize)?,
                ChangeKind::Modified => {
                    let e = c.new.as_ref().unwrap();
                    groups
                        .entry(parent_of(path))
                        .or_default()
                        .push((path, Op::Write(e, file_size(c.old.as_ref()))));
                }
                ChangeKind::ModeChanged | ChangeKind::Touched => {
                    let e = c.new.as_ref().unwrap();
                    if matches!(e.node, Node::Dir { .. }) {
                        finalize.insert(path.to_vec());
                    } else {
                        groups
                            .entry(parent_of(path))
                            .or_default()
                            .push((path, Op::Meta(e)));
                    }
                }
            }
        }

        ckpt_fault::point("restore.phase_a");
        // Phase B: files and symlinks, in parallel per directory: first
        // everything that frees space or needs none, then the writes of
        // files that grow.
        let groups: Vec<_> = groups.into_iter().collect();
        for growing in [false, true] {
            // A directory that ran out of space while others were being
            // written is done again once they are, alone.
            let again = Mutex::new(Vec::new());
            groups.par_iter().try_for_each(|(dir, ops)| {
                match self.write_group(dir, ops, growing) {
                    Err(e) if e.is_out_of_space() => {
                        again.lock().unwrap().push((dir, ops));
                        Ok(())
                    }
                    r => r,
                }
            })?;
            for (dir, ops) in again.into_inner().unwrap() {
                self.write_group(dir, ops, growing)?;
            }
        }

        ckpt_fault::point("restore.phase_c");
        // Phase C: directory modes and mtimes, deepest first.
        let mut dirs: Vec<Vec<u8>> = finalize.into_iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.iter().filter(|&&b| b == b'/').count()));
        for d in dirs {
            let Some(e) = lookup.entry(&d)? else { continue };
            if !matches!(e.node, Node::Dir { .. }) {
                continue;
            }
            let fd = self.open_dir(&d)?;
            rustix::fs::fchmod(&fd, FsMode::from_raw_mode(e.mode)).ctx("chmod", self.shown(&d))?;
            fs::set_mtime_fd(fd.as_fd(), e.mtime_ns).ctx("set mtime", self.shown(&d))?;
        }
        Ok(())
    }

    /// Phase B for the directory `dir`: its operations that grow (or, with
    /// `growing` false, do not; see [`Op::grows`]) and are not done yet.
    fn write_group(&self, dir: &[u8], ops: &[(&[u8], Op<'_>)], growing: bool) -> Result<()> {
        let mut ops = ops
            .iter()
            .filter(|(path, op)| {
                op.grows() == growing && !self.written.lock().unwrap().contains_key(*path)
            })
            .peekable();
        if ops.peek().is_none() {
            return Ok(());
        }
        let dfd = self.open_dir(dir)?;
        for (path, op) in ops {
            match op {
                Op::Write(e, _) => self.write_entry(dfd.as_fd(), path, e)?,
                Op::Meta(e) => self.fix_meta(dfd.as_fd(), path, e)?,
            }
        }
        Ok(())
    }

    fn create<'c>(
        &self,
        c: &'c Change,
        groups: &mut BTreeMap<&'c [u8], Vec<(&'c [u8], Op<'c>)>>,
        finalize: &mut BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        let e = c.new.as_ref().unwrap();
        let path = c.path.as_slice();
        if let Node::Dir { .. } = e.node {
            let dfd = self.open_dir(parent_of(path))?;
            match rustix::fs::mkdirat(&dfd, name_of(path), FsMode::from_raw_mode(0o700)) {
                Ok(()) => {}
                Err(Errno::EXIST) => match fs::stat_at(dfd.as_fd(), name_of(path)) {
                    // Not in the scan: one it may not read (see the module
                    // doc). Ours to fill: owner rwx until phase C.
                    Ok(m) if m.file_type() == rustix::fs::FileType::Directory => {
                        if m.perm() & 0o700 != 0o700 {
                            rustix::fs::chmodat(
                                &dfd,
                                name_of(path),
                                FsMode::from_raw_mode(m.perm() | 0o700),
                                AtFlags::empty(),
                            )
                            .ctx("chmod", self.shown(path))?;
                        }
                    }
                    _ => {
                        fs::remove_all_at(dfd.as_fd(), name_of(path))
                            .ctx("remove", self.shown(path))?;
                        rustix::fs::mkdirat(&dfd, name_of(path), FsMode::from_raw_mode(0o700))
                            .ctx("create directory", self.shown(path))?;
                    }
                },
                Err(e) => return Err(Error::io("create directory", self.shown(path), e.into())),
            }
            finalize.insert(path.to_vec());
        } else {
            groups
                .entry(parent_of(path))
                .or_default()
                .push((path, Op::Write(e, 0)));
        }
        Ok(())
    }

    /// Removes `path` (recursively), leaving `.ckptignore`d entries and
    /// other workspaces (directories with a `.ckpt` marker) alone.
    fn remove(&self, path: &[u8]) -> Result<()> {
        let dfd = self.open_dir(parent_of(path))?;
        self.remove_at(dfd.as_fd(), path).map(|_| ())
    }

    /// Removes `path` in `dir`; false when something in it was kept (so it
    /// is still there).
    fn remove_at(&self, dir: BorrowedFd<'_>, path: &[u8]) -> Result<bool> {
        let name = name_of(path);
        let meta = match fs::stat_at(dir, name) {
            Ok(m) => m,
            Err(Errno::NOENT) => return Ok(true),
            Err(e) => return Err(Error::io("stat", self.shown(path), e.into())),
        };
        if meta.file_type() == rustix::fs::FileType::Directory {
            let sub = match fs::open_dir_at(dir, name) {
                Ok(sub) => sub,
                // It may not be read, so it was never captured: keep it.
                Err(Errno::ACCESS | Errno::PERM) => return Ok(false),
                Err(e) => return Err(Error::io("open directory", self.shown(path), e.into())),
            };
            let sub = fs::list_dir(sub).ctx("read directory", self.shown(path))?;
            // Another workspace: not ours to remove.
            let marker = crate::workspace::MARKER_NAME.as_bytes();
            if sub.names.iter().any(|(n, _)| n.as_slice() == marker)
                && fs::stat_at(sub.fd(), marker)
                    .is_ok_and(|m| m.file_type() == rustix::fs::FileType::RegularFile)
            {
                return Ok(false);
            }
            let mut kept = false;
            for (child, _) in &sub.names {
                let cpath = join(path, child);
                let child_is_dir = fs::stat_at(sub.fd(), child)
                    .is_ok_and(|m| m.file_type() == rustix::fs::FileType::Directory);
                if self.left_out.contains(&cpath)
                    || self
                        .ignore
                        .is_some_and(|ig| ig.is_ignored(&cpath, child_is_dir))
                {
                    kept = true;
                    continue;
                }
                if !self.remove_at(sub.fd(), &cpath)? {
                    kept = true;
                }
            }
            if kept {
                // Counted as before: its removable contents went.
                self.removed.fetch_add(1, Ordering::Relaxed);
                return Ok(false);
            }
            rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
                .ctx("remove directory", self.shown(path))?;
        } else {
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(Error::io("remove", self.shown(path), e.into())),
            }
        }
        self.removed.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Writes a file or symlink under a temporary name and renames it into
    /// place.
    fn write_entry(&self, dir: BorrowedFd<'_>, path: &[u8], e: &Entry) -> Result<()> {
        self.write_entry_copy(dir, path, e, self.temp_name())
    }

    /// [`write_entry`](Self::write_entry) by copying (or, for a symlink,
    /// creating) into the temporary name `tmp`.
    fn write_entry_copy(
        &self,
        dir: BorrowedFd<'_>,
        path: &[u8],
        e: &Entry,
        tmp: Vec<u8>,
    ) -> Result<()> {
        let name = name_of(path);
        let shown = || self.shown(path);
        let meta = match &e.node {
            Node::File { size, hash } => {
                let dst = match self.objects.materialize(hash, *size, dir, &tmp, &shown) {
                    // No room for the new file beside the old one: the old
                    // one goes first (see the module doc, "Space").
                    Err(e) if e.is_out_of_space() && self.make_room(dir, path)? => {
                        self.objects.materialize(hash, *size, dir, &tmp, &shown)?
                    }
                    r => r?,
                };
                let done = (|| -> Result<Meta> {
                    rustix::fs::fchmod(&dst, FsMode::from_raw_mode(e.mode))
                        .ctx("chmod", shown())?;
                    fs::set_mtime_fd(dst.as_fd(), e.mtime_ns).ctx("set mtime", shown())?;
                    ckpt_fault::point("restore.after_tmp_write");
                    rustix::fs::renameat(dir, tmp.as_slice(), dir, name).ctx("rename", shown())?;
                    ckpt_fault::point("restore.after_rename");
                    fs::stat_fd(dst.as_fd()).ctx("stat", shown())
                })();
                if done.is_err() {
                    let _ = rustix::fs::unlinkat(dir, tmp.as_slice(), AtFlags::empty());
                }
                done?
            }
            Node::Symlink { target } => {
                rustix::fs::symlinkat(target.as_slice(), dir, tmp.as_slice())
                    .ctx("create symlink", shown())?;
                let done = (|| -> Result<Meta> {
                    fs::set_mtime_at(dir, &tmp, e.mtime_ns).ctx("set mtime", shown())?;
                    rustix::fs::renameat(dir, tmp.as_slice(), dir, name).ctx("rename", shown())?;
                    fs::stat_at(dir, name).ctx("stat", shown())
                })();
                if done.is_err() {
                    let _ = rustix::fs::unlinkat(dir, tmp.as_slice(), AtFlags::empty());
                }
                done?
            }
            Node::Dir { .. } => unreachable!("directories are created in phase A"),
        };
        self.written.lock().unwrap().insert(path.to_vec(), meta);
        Ok(())
    }

    /// Removes the file or symlink `path` (in `dir`) that a write is about
    /// to replace, when there was no room for the new one beside it; false
    /// when there is none.
    fn make_room(&self, dir: BorrowedFd<'_>, path: &[u8]) -> Result<bool> {
        let name = name_of(path);
        match fs::stat_at(dir, name) {
            Ok(m) if m.file_type() != rustix::fs::FileType::Directory => {}
            _ => return Ok(false),
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(Error::io("remove", self.shown(path), e.into())),
        }
    }

    /// Sets mode and mtime of an existing file or symlink whose content is
    /// already right.
    fn fix_meta(&self, dir: BorrowedFd<'_>, path: &[u8], e: &Entry) -> Result<()> {
        let name = name_of(path);
        let shown = || self.shown(path);
        let meta = match &e.node {
            Node::Symlink { .. } => {
                fs::set_mtime_at(dir, name, e.mtime_ns).ctx("set mtime", shown())?;
                fs::stat_at(dir, name).ctx("stat", shown())?
            }
            _ => match fs::open_file_at(dir, name) {
                Ok(fd) => {
                    rustix::fs::fchmod(&fd, FsMode::from_raw_mode(e.mode)).ctx("chmod", shown())?;
                    fs::set_mtime_fd(fd.as_fd(), e.mtime_ns).ctx("set mtime", shown())?;
                    fs::stat_fd(fd.as_fd()).ctx("stat", shown())?
                }
                // Unreadable (e.g. mode 000): rewrite it from the store.
                Err(Errno::ACCESS) => {
                    if let Node::File { hash, size } = &e.node {
                        self.objects.check(hash, *size)?;
                    }
                    return self.write_entry(dir, path, e);
                }
                Err(err) => return Err(Error::io("open", shown(), err.into())),
            },
        };
        self.written.lock().unwrap().insert(path.to_vec(), meta);
        Ok(())
    }
}

/// The index after a restore: the pre-restore scan's index with every
/// written path replaced. A directory keeps a known tree hash only when its
/// entries equal the target's exactly; otherwise its tree is marked unknown
/// and the next scan rebuilds it from the entries (no file is re-read).
pub(super) fn updated_index(
    mut index: Index,
    changes: &[Change],
    written: &HashMap<Vec<u8>, Meta>,
    lookup: &TargetLookup<'_>,
) -> Result<Index> {
    // Directories that went away take their records with them (and get
    // none back below).
    let mut gone: Vec<&[u8]> = Vec::new();
    for c in changes {
        let old_dir = matches!(c.old.as_ref().map(|e| &e.node), Some(Node::Dir { .. }));
        let new_dir = matches!(c.new.as_ref().map(|e| &e.node), Some(Node::Dir { .. }));
        if old_dir && (!new_dir || c.kind == ChangeKind::TypeChanged) {
            index.dirs.remove_subtree(&c.path);
            gone.push(&c.path);
        }
    }
    // Changes grouped by parent directory.
    let mut by_dir: BTreeMap<Vec<u8>, Vec<&Change>> = BTreeMap::new();
    for c in changes {
        let mut p = parent_of(&c.path);
        by_dir.entry(p.to_vec()).or_default().push(c);
        while !p.is_empty() {
            p = parent_of(p);
            by_dir.entry(p.to_vec()).or_default();
        }
    }
    let mut dirs: Vec<Vec<u8>> = by_dir.keys().cloned().collect();
    dirs.sort_by_key(|d| {
        std::cmp::Reverse(if d.is_empty() {
            0
        } else {
            1 + d.iter().filter(|&&b| b == b'/').count()
        })
    });
    for d in dirs {
        if gone.iter().any(|g| is_within(&d, g)) {
            continue;
        }
        let mut entries: BTreeMap<Vec<u8>, IndexEntry> = index
            .dirs
            .get(&d)
            .map(|r| {
                r.entries
                    .iter()
                    .map(|e| (e.entry.name.clone(), e.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for c in &by_dir[&d] {
            let name = name_of(&c.path).to_vec();
            match &c.new {
                None => {
                    entries.remove(&name);
                }
                Some(e) if matches!(e.node, Node::Dir { .. }) => {
                    entries.insert(name, dir_entry(e));
                }
                Some(e) => {
                    if let Some(m) = written.get(&c.path) {
                        entries.insert(
                            name,
                            IndexEntry {
                                entry: e.clone(),
                                meta: *m,
                                racy: false,
                            },
                        );
                    }
                }
            }
        }
        // Subdirectories: their records (processed first, deeper) give the
        // tree; their mode and mtime are the target's (set in phase C).
        for (name, ie) in entries.iter_mut() {
            if let Node::Dir { .. } = ie.entry.node {
                let child = join(&d, name);
                if let Some(rec) = index.dirs.get(&child) {
                    ie.entry.node = Node::Dir { tree: rec.tree };
                    if by_dir.contains_key(&child) {
                        if let Some(t) = lookup.entry(&child)? {
                            ie.entry.mode = t.mode;
                            ie.entry.mtime_ns = t.mtime_ns;
                        }
                    }
                }
            }
        }
        let entries: crate::store::index::Entries = entries.into_values().collect();
        let tree = match lookup.dir_tree(&d)? {
            Some(h) => {
                let t = lookup.tree(&h)?;
                let same = t.entries.len() == entries.len()
                    && t.entries.iter().zip(&entries).all(|(a, b)| *a == b.entry);
                if same {
                    h
                } else {
                    UNKNOWN_TREE
                }
            }
            None => UNKNOWN_TREE,
        };
        index.dirs.insert(
            d,
            Arc::new(DirRecord {
                tree,
                entries,
                exact_names: false,
            }),
        );
    }
    Ok(index)
}

fn dir_entry(e: &Entry) -> IndexEntry {
    IndexEntry {
        entry: e.clone(),
        meta: Meta {
            mode: rustix::fs::FileType::Directory.as_raw_mode() | e.mode,
            mtime_ns: e.mtime_ns,
            ..Meta::default()
        },
        racy: false,
    }
}
