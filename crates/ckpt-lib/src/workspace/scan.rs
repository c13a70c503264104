//! The workspace scan: a parallel walk that turns the directory into trees.
//!
//! Every entry is `lstat`ed relative to its directory's descriptor;
//! subdirectories are walked in parallel with rayon. A directory is listed
//! with `getdents64` unless its index record has exact names
//! ([`DirRecord::exact_names`]) and its fresh `lstat` equals the one its
//! parent's record holds for it: then its names are known not to have
//! changed, it is opened `O_PATH` and the recorded names are `lstat`ed
//! (if one has vanished after all, it is listed). On ext4 a listing costs
//! about as much as `lstat`ing every entry in it. Such a directory that is
//! also a small leaf (its link count says it has no subdirectories) is not
//! even opened: its entries are `lstat`ed as `name/entry` through the
//! parent, and it is opened and scanned as above only if one differs from
//! its record ([`ScanResult::dirs_unopened`]). An entry whose stat equals
//! its [`Index`] entry (and is not racy) is taken from the index without
//! being read. A directory whose
//! entries all match and whose subdirectories' trees are unchanged reuses its
//! old record — and tree hash — as is, without allocating. Only files whose
//! stat changed are read: in [`Mode::Capture`] they are stored as objects, in
//! [`Mode::HashOnly`] (status, diff) they are only hashed.
//!
//! The result is the root tree hash, the trees that were (re)built, and
//! what changed in the index: the records made anew and the directories
//! gone. [`Scanned::apply`] makes those changes to the index the scan was
//! made against, in place, so that a scan of an unchanged tree costs its
//! `lstat`s and comparisons, not a copy of the index. Nothing is written
//! to the catalog here.
//!
//! [`scan_partial`] is the same scan restricted to the directories a watcher
//! reported dirty (see [`crate::watch`]): those are listed and every entry
//! re-stated as above; directories on the path from the root to one of them
//! keep their old listing but re-stat the subdirectories on that path; every
//! other directory keeps its index record and tree without being opened.
//! Its result is applied the same way: nothing in a partial scan costs more
//! than the dirty directories, the path to each and the records whose tree
//! is unknown.
//!
//! ## Scans that store nothing
//! The index may only name content and trees the store holds (see
//! [`crate::store::index`]). A [`Mode::HashKeep`] scan stores neither, yet
//! its index is kept: each file it read whose content the store lacks is
//! recorded racy, so the next scan reads it again, and each directory
//! record it built anew gets [`UNKNOWN_TREE`], so the next scan rebuilds
//! that tree (and, a partial scan, lists the directory) instead of reusing
//! it. The scan's own result (root, trees) is exact, as in the other modes.
//!
//! What is never captured: the workspace marker `.ckpt` at the root, the
//! store if it lies inside the workspace, ckpt's own temporary files
//! ([`is_temp_name`]), paths matched by `.ckptignore`, and sockets, FIFOs and
//! devices (reported as skipped). Nor is another workspace inside this one:
//! a subdirectory holding a `.ckpt` marker file is left out whole, marker
//! and all, and reported as skipped (kind [`NESTED_WORKSPACE`]), so a
//! restore, which only acts on what the scan saw, never touches it.
//!
//! ## Entries it may not read
//! A file that cannot be opened for reading or a directory that cannot be
//! listed (`EACCES`/`EPERM`: e.g. `chmod 000` as a user other than root) does
//! not stop the scan ([`OnUnreadable::Record`]; `ckpt verify` and `ckpt hash`,
//! which promise to re-read everything, use [`OnUnreadable::Fail`]). It is
//! reported in [`ScanResult::unreadable`], and recorded as follows; a
//! checkpoint only holds content that was read, or that the stat index proves
//! unchanged since it was read:
//! - a file whose index entry is a file with the same device, inode, size and
//!   mtime (and was not racy) keeps that entry's content, with its fresh mode
//!   and mtime ([`Unreadable::kept`]): the same rule that lets every scan take
//!   an unchanged file from the index without reading it (its ctime changed,
//!   which is what a `chmod` does). The index keeps the stat the content was
//!   read under, so every later scan tries to read it again and re-applies
//!   the rule;
//! - any other unreadable file, and every unreadable directory, is left out of
//!   the tree and reported as skipped (kind [`UNREADABLE`]). A directory's
//!   stat cannot vouch for its children's content (an in-place write changes
//!   only the file), so its previous children are not carried over; nor is an
//!   empty tree recorded, which a restore would apply by deleting them. Like a
//!   FIFO, a left-out entry is not part of the checkpoint: a restore leaves it
//!   alone unless the target has that path (then the target's entry replaces
//!   it; see [`crate::engine::restore`]).
//!
//! A directory record holding or missing such an entry is kept with an
//! unknown tree ([`UNKNOWN_TREE`]) and no exact-names bit, so every scan,
//! partial ones included, lists it again and reports the entry again.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustix::fs::FileType;
use rustix::io::Errno;

use crate::error::IoContext;
use crate::store::catalog::Skipped;
use crate::store::index::{
    DirRecord, Dirs, EntryView, Index, IndexEntry, RACY_WINDOW_NS, UNKNOWN_TREE,
};
use crate::store::objects::{hash_file, CaptureError, Objects};
use crate::store::tree::{self, Entry, Node, NodeRef, Tree, MAX_DEPTH};
use crate::workspace::ignore::Ignore;
use crate::{Error, Hash, Result};
use ckpt_fs::fs::{self, display_path, join, parent_of, Meta};

/// The workspace marker file name (at the root only).
pub const MARKER: &[u8] = b".ckpt";
/// The [`Skipped::kind`] of a subdirectory that is another workspace.
pub const NESTED_WORKSPACE: &str = "workspace";
/// The [`Skipped::kind`] of an entry left out because it may not be read.
pub const UNREADABLE: &str = "unreadable";

/// An entry the scan was not allowed to read (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unreadable {
    /// Workspace-relative path bytes.
    pub path: Vec<u8>,
    /// A directory that could not be listed; else a regular file.
    pub dir: bool,
    /// Recorded with the content the index proves unchanged since it was
    /// read; false: left out (and also listed in [`ScanResult::skipped`]).
    pub kept: bool,
}

/// What a scan does with an entry it may not read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnUnreadable {
    /// Record what can be recorded and report it (save, status, restore).
    #[default]
    Record,
    /// Fail naming it (`verify` and `hash` re-read every file).
    Fail,
}

/// The most entries of a leaf directory checked through its parent (see
/// the module doc): where one more name lookup per entry costs what the
/// `open` and `close` it saves cost.
pub const LEAF_MAX_ENTRIES: usize = 32;

/// Prefix of temporary files ckpt creates inside the workspace.
pub const TEMP_PREFIX: &[u8] = b".ckpt-tmp.";

/// Whether a name is one of ckpt's own in-workspace temporary files.
pub fn is_temp_name(name: &[u8]) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// What to do with files whose stat changed.
#[derive(Clone, Copy)]
pub enum Mode<'a> {
    /// Store their content as objects (save).
    Capture(&'a Objects),
    /// Only hash them (status, diff); the index of the result is not kept.
    HashOnly,
    /// Only hash them, for an index that is kept though nothing was stored
    /// (`restore --no-save`, which never writes to the store): see "Scans
    /// that store nothing" above.
    HashKeep(&'a Objects),
}

/// Inputs of a scan.
pub struct ScanInput<'a> {
    /// The workspace root.
    pub root: &'a Path,
    /// The previous index (may be empty).
    pub index: &'a Index,
    /// `.ckptignore`.
    pub ignore: &'a Ignore,
    /// Relative paths never captured (the store, if inside the workspace).
    pub exclude: &'a [Vec<u8>],
    /// Capture or hash only.
    pub mode: Mode<'a>,
    /// Record or refuse entries it may not read.
    pub on_unreadable: OnUnreadable,
    /// Called once, by the thread that stores the scan's first new object
    /// ([`Mode::Capture`]): a save, which then knows it will commit, starts
    /// opening its catalog writable (see `crate::store::catalog`).
    pub on_first_new_object: Option<&'a (dyn Fn() + Sync)>,
}

/// What a scan found.
#[derive(Debug)]
pub struct ScanResult {
    /// The root tree.
    pub root: Hash,
    /// Trees built in this scan (new or changed directories).
    pub new_trees: HashMap<Hash, Vec<u8>>,
    /// The index describing the scanned state (empty after a hash-only
    /// [`scan_partial`], whose result never becomes the index).
    pub index: Index,
    /// Entries that could not be captured.
    pub skipped: Vec<Skipped>,
    /// Entries it was not allowed to read, sorted by path (those left out
    /// are in `skipped` too).
    pub unreadable: Vec<Unreadable>,
    /// ckpt temporary files found (left by an interrupted restore).
    pub temp_files: Vec<Vec<u8>>,
    /// Files whose content was read.
    pub files_read: u64,
    /// Objects newly stored.
    pub new_objects: u64,
    /// Bytes newly stored.
    pub new_bytes: u64,
    /// Entries visited.
    pub entries: u64,
    /// Directories listed (`getdents64`); the others were re-statted from
    /// their exact-names records or, in a partial scan, kept.
    pub dirs_listed: u64,
    /// Leaf directories found unchanged through their parent, without being
    /// opened (see the module doc).
    pub dirs_unopened: u64,
    /// Every directory record was taken over unchanged from the old index,
    /// so writing the index again would change nothing.
    pub index_unchanged: bool,
}

#[derive(Default)]
struct Collector {
    /// The records made anew (see [`IndexUpdate::records`]).
    records: Mutex<Vec<(Vec<u8>, Arc<DirRecord>)>>,
    new_trees: Mutex<HashMap<Hash, Vec<u8>>>,
    skipped: Mutex<Vec<Skipped>>,
    unreadable: Mutex<Vec<Unreadable>>,
    /// Directories holding an entry in `unreadable`.
    unreadable_parents: Mutex<HashSet<Vec<u8>>>,
    temps: Mutex<Vec<Vec<u8>>>,
    files_read: AtomicU64,
    /// Directories whose old record was kept as it is.
    reused_dirs: AtomicU64,
    new_objects: AtomicU64,
    new_bytes: AtomicU64,
    entries: AtomicU64,
    dirs_listed: AtomicU64,
    dirs_unopened: AtomicU64,
}

impl Collector {
    /// The result of a scan that started at `scan_start_ns` and found
    /// `root`, with `dirs` as the new index's records (what was collected
    /// besides them goes into the result as is).
    fn into_result(
        self,
        input: &ScanInput<'_>,
        scan_start_ns: i64,
        root: Hash,
        dirs: Dirs,
        index_unchanged: bool,
    ) -> ScanResult {
        let mut unreadable = self.unreadable.into_inner().unwrap();
        unreadable.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        ScanResult {
            unreadable,
            root,
            new_trees: self.new_trees.into_inner().unwrap(),
            index: Index {
                generation: input.index.generation,
                scan_start_ns,
                dirs,
                base: input.index.base.clone(),
            },
            skipped: self.skipped.into_inner().unwrap(),
            temp_files: self.temps.into_inner().unwrap(),
            files_read: self.files_read.into_inner(),
            new_objects: self.new_objects.into_inner(),
            new_bytes: self.new_bytes.into_inner(),
            entries: self.entries.into_inner(),
            dirs_listed: self.dirs_listed.into_inner(),
            dirs_unopened: self.dirs_unopened.into_inner(),
            index_unchanged,
        }
    }
}

struct Scanner<'a> {
    input: &'a ScanInput<'a>,
    scan_start_ns: i64,
    out: Collector,
    partial: Option<Partial>,
}

/// The restriction of a partial scan.
struct Partial {
    /// Directories to list (dirty, or whose record's tree is unknown).
    listed: HashSet<Vec<u8>>,
    /// `listed` and every ancestor of each.
    affected: HashSet<Vec<u8>>,
}

/// Scans the workspace: every directory. The result's index is the one
/// the scan was made against with the changes applied
/// ([`Scanned::apply`]), for every mode (`verify` reads a hash-only full
/// scan's records).
pub fn scan(input: &ScanInput<'_>) -> Result<Scanned> {
    let scan_start_ns = fs::now_ns();
    let root_fd = fs::open_dir_path(input.root).ctx("open", input.root)?;
    let scanner = Scanner {
        input,
        scan_start_ns,
        out: Collector::default(),
        partial: None,
    };
    let root = scanner
        .scan_dir(root_fd, Vec::new(), DirStat::root(input.index))?
        .expect("the root is never another workspace");
    let mut out = scanner.out;
    let records = std::mem::take(out.records.get_mut().unwrap());
    let visited = *out.reused_dirs.get_mut() + records.len() as u64;
    let (removed, unchanged) = changes(&input.index.dirs, &records);
    let unchanged = unchanged && visited == input.index.dirs.len() as u64;
    let scan = out.into_result(input, scan_start_ns, root, Dirs::default(), unchanged);
    Ok(Scanned {
        scan,
        update: Some(IndexUpdate {
            removed,
            records,
            scan_start_ns: Some(scan_start_ns),
            visited: Some(visited),
        }),
    })
}

/// What `records` (those a scan made anew) change in `old`: the
/// directories that went away (each was a subdirectory in its parent's old
/// record and is not one in the new), and whether nothing changed at all.
fn changes(old: &Dirs, records: &[(Vec<u8>, Arc<DirRecord>)]) -> (Vec<Vec<u8>>, bool) {
    let mut removed: Vec<Vec<u8>> = Vec::new();
    let mut unchanged = true;
    for (path, rec) in records {
        let Some(old) = old.get(path) else {
            unchanged = false;
            continue;
        };
        if Arc::ptr_eq(old, rec) {
            continue;
        }
        unchanged = false;
        for v in old.entries.views() {
            if matches!(v.entry.node, NodeRef::Dir { .. })
                && !rec
                    .get(v.entry.name)
                    .is_some_and(|n| matches!(n.entry.node, Node::Dir { .. }))
            {
                removed.push(join(path, v.entry.name));
            }
        }
    }
    (removed, unchanged)
}

/// What a [`scan`] or [`scan_partial`] found, and what it changes in the
/// index it scanned against.
#[derive(Debug)]
pub struct Scanned {
    /// The result; its index holds no records until [`Scanned::apply`].
    pub scan: ScanResult,
    /// `None` for a hash-only partial scan, whose result never becomes the
    /// index.
    update: Option<IndexUpdate>,
}

/// The change a partial scan makes to the index it scanned against.
#[derive(Debug)]
struct IndexUpdate {
    /// The directories no longer there: each loses its record and those of
    /// every directory below it.
    removed: Vec<Vec<u8>>,
    /// The record of every directory the scan made anew (a record it kept
    /// as the same `Arc` is not here: that is no change).
    records: Vec<(Vec<u8>, Arc<DirRecord>)>,
    /// The scan's start, when it visited anything.
    scan_start_ns: Option<i64>,
    /// A full scan: how many directories it recorded. Once the changes are
    /// made, an index holding more records holds some no directory entry
    /// leads to (an older restore could leave one), and those go.
    visited: Option<u64>,
}

impl Scanned {
    /// The result with its index: `index`, the one the scan was made
    /// against, updated in place (a hash-only partial scan's result keeps
    /// an empty index and `index` is dropped). The cost follows the
    /// records made anew and the directories removed, not the size of
    /// `index` (except to drop records no entry leads to, when a full scan
    /// finds some).
    pub fn apply(self, mut index: Index) -> ScanResult {
        let mut scan = self.scan;
        if let Some(u) = self.update {
            for r in &u.removed {
                index.dirs.remove_subtree(r);
            }
            index.dirs.extend(u.records);
            if let Some(t) = u.scan_start_ns {
                index.scan_start_ns = t;
            }
            if u.visited.is_some_and(|v| v != index.dirs.len() as u64) {
                index.dirs.retain_reachable();
                scan.index_unchanged = false;
            }
            scan.index = index;
        }
        scan
    }
}

/// Scans only what may have changed: the directories in `dirty` (and those
/// whose index record has no known tree), re-statting the path from the root
/// to each; every other directory keeps its index record. The caller
/// guarantees (see [`crate::watch`]) that no directory outside `dirty` has
/// changed since `input.index` was produced, and that the index holds the
/// root's record. Nothing here costs more than the dirty directories, the
/// path to each and the records with unknown trees: the index is updated in
/// place by [`Scanned::apply`], never copied.
pub fn scan_partial(input: &ScanInput<'_>, dirty: &HashSet<Vec<u8>>) -> Result<Scanned> {
    let scan_start_ns = fs::now_ns();
    let old_dirs = &input.index.dirs;
    let mut listed: HashSet<Vec<u8>> = dirty.clone();
    listed.extend(old_dirs.unknown_trees().iter().cloned());
    if !old_dirs.contains_key(&Vec::new()) {
        listed.insert(Vec::new());
    }
    let mut affected = HashSet::with_capacity(listed.len() * 2);
    for p in &listed {
        let mut p: &[u8] = p;
        while affected.insert(p.to_vec()) && !p.is_empty() {
            p = parent_of(p);
        }
    }
    let keeps_index = !matches!(input.mode, Mode::HashOnly);
    if !affected.contains(&Vec::new()) {
        let root = old_dirs[&Vec::new()].tree;
        let scan = Collector::default().into_result(
            input,
            input.index.scan_start_ns,
            root,
            Dirs::default(),
            true,
        );
        return Ok(Scanned {
            scan,
            update: keeps_index.then(|| IndexUpdate {
                removed: Vec::new(),
                records: Vec::new(),
                scan_start_ns: None,
                visited: None,
            }),
        });
    }
    let root_fd = fs::open_dir_path(input.root).ctx("open", input.root)?;
    let scanner = Scanner {
        input,
        scan_start_ns,
        out: Collector::default(),
        partial: Some(Partial { listed, affected }),
    };
    let root = scanner
        .scan_dir(root_fd, Vec::new(), DirStat::root(input.index))?
        .expect("the root is never another workspace");
    let mut out = scanner.out;
    let records = std::mem::take(out.records.get_mut().unwrap());
    // Subdirectories that went away take their records with them.
    let (removed, unchanged) = changes(old_dirs, &records);
    let mut scan = out.into_result(input, scan_start_ns, root, Dirs::default(), unchanged);
    // A hash-only scan (status, diff, restore planning) never becomes the
    // index: it leaves the index it scanned against as it is.
    let update = match keeps_index {
        true => Some(IndexUpdate {
            removed,
            records,
            scan_start_ns: Some(scan_start_ns),
            visited: None,
        }),
        false => {
            scan.index_unchanged = true;
            None
        }
    };
    Ok(Scanned { scan, update })
}

/// What the parent knows of a directory it hands to [`Scanner::scan_dir`].
#[derive(Clone, Copy, Default)]
struct DirStat<'i> {
    /// Its record in the index scanned against, looked up once, by the
    /// parent.
    old: Option<&'i Arc<DirRecord>>,
    /// Its fresh `lstat` (none for the workspace root).
    meta: Option<Meta>,
    /// The fresh `lstat` equals the one in the parent's index entry for it.
    as_recorded: bool,
    /// It was opened `O_PATH` to be re-statted from its exact-names record
    /// without listing (`as_recorded` and the record has exact names).
    unlisted: bool,
}

impl<'i> DirStat<'i> {
    /// The workspace root's: its record, and no stat from a parent.
    fn root(index: &'i Index) -> DirStat<'i> {
        DirStat {
            old: index.dirs.get(&Vec::new()),
            ..DirStat::default()
        }
    }
}

/// An entry's node, the stat its tree entry takes mode and mtime from, and
/// the stat its index entry records (the same, except for an unreadable
/// file kept from the index: see the module doc).
type Item = (Node, Meta, Meta);

/// What [`Scanner::listed`] found in a directory.
enum Names<'l> {
    /// Its entries.
    Entries(Vec<Listed<'l>>),
    /// It is another workspace.
    Nested,
    /// Its entries may not be `lstat`ed (no search permission).
    Unreadable,
}

/// An entry as listed, before its content is known.
struct Listed<'a> {
    name: &'a [u8],
    /// Its `lstat`; when `deferred`, only the file type (regular) is known.
    meta: Meta,
    /// Its entry in the directory's old index record, if any (borrowed,
    /// decoded once: the scan compares against it, never looks it up).
    old: Option<EntryView<'a>>,
    /// A regular file (per the directory entry's type) in a directory
    /// without an index record: it is read whatever its stat says, so it is
    /// not `lstat`ed here and its stat comes from the open descriptor.
    deferred: bool,
    /// A directory whose link count says it has no subdirectories
    /// ([`fs::no_subdirs`]; only known when re-statted from a record): it
    /// may be checked through its parent ([`Scanner::unchanged_leaf`]).
    leaf: bool,
}

impl Listed<'_> {
    /// Its old entry's stat, if that was a directory too.
    fn recorded_dir(&self) -> Option<Meta> {
        self.old
            .filter(|o| matches!(o.entry.node, NodeRef::Dir { .. }))
            .map(|o| o.meta)
    }

    /// A regular file whose content the scan reads (it cannot be taken
    /// from the index).
    fn is_read(&self) -> bool {
        self.meta.file_type() == FileType::RegularFile
            && (self.deferred || self.cached(|n| matches!(n, NodeRef::File { .. })).is_none())
    }

    /// The content (hash, size) of its old entry, if that was a file.
    fn old_content(&self) -> Option<(Hash, u64)> {
        match self.old?.entry.node {
            NodeRef::File { size, hash } => Some((hash, size)),
            _ => None,
        }
    }

    /// The old entry's node when it is of the kind `is_kind` accepts, not
    /// racy and its stat unchanged, so the content need not be read.
    fn cached(&self, is_kind: fn(&NodeRef) -> bool) -> Option<Node> {
        self.old
            .filter(|o| is_kind(&o.entry.node) && file_as_recorded(o, &self.meta))
            .map(|o| o.entry.node.to_node())
    }
}

/// What [`Scanner::restat`] found.
struct Restated<'r> {
    /// The entries, or only the subdirectories when `only_dirs`.
    listed: Vec<Listed<'r>>,
    /// Every entry other than a directory is as its record says (see
    /// [`file_as_recorded`]): `listed` holds only the subdirectories, and
    /// [`with_files`] completes it.
    only_dirs: bool,
}

/// Whether an entry that is not a directory is as recorded: not racy, and
/// its fresh `lstat` is the one recorded (in every field, so its kind too).
fn file_as_recorded(o: &EntryView<'_>, meta: &Meta) -> bool {
    !o.racy && o.meta == *meta
}

/// Whether every entry of `listed` is as recorded ([`file_as_recorded`];
/// a subdirectory also with its tree, the next of `child_trees`).
fn as_recorded<'h>(listed: &[Listed], mut child_trees: impl Iterator<Item = &'h Hash>) -> bool {
    listed.iter().all(|l| {
        let Some(o) = l.old else { return false };
        match o.entry.node {
            // The full stat, not only mode and mtime: the entry must hold
            // the stat taken before the subdirectory's last listing (see
            // `crate::store::index`).
            NodeRef::Dir { tree } => {
                l.meta.file_type() == FileType::Directory
                    && o.meta == l.meta
                    && o.entry.mode == l.meta.perm()
                    && o.entry.mtime_ns == l.meta.mtime_ns
                    && child_trees.next() == Some(&tree)
            }
            _ => file_as_recorded(&o, &l.meta),
        }
    })
}

/// The listing of `old`'s first `n` entries from `dirs`, its subdirectories
/// among them as [`Scanner::restat`] found them, and every other entry as
/// recorded (`restat` found each so).
fn with_files<'r>(old: &'r DirRecord, dirs: Vec<Listed<'r>>, n: usize) -> Vec<Listed<'r>> {
    let mut dirs = dirs.into_iter();
    let mut listed = Vec::with_capacity(old.entries.claimed());
    for v in old.entries.views().take(n) {
        listed.push(match v.entry.node {
            NodeRef::Dir { .. } => dirs.next().expect("a listing per subdirectory"),
            _ => Listed {
                name: v.entry.name,
                meta: v.meta,
                old: Some(v),
                deferred: false,
                leaf: false,
            },
        });
    }
    listed
}

impl<'a> Scanner<'a> {
    fn shown(&self, rel: &[u8]) -> PathBuf {
        display_path(self.input.root, rel)
    }

    /// Scans the directory `rel` (open as `dir`) and returns its tree hash;
    /// `None` when it is another workspace (it holds a `.ckpt` marker): then
    /// it is reported as skipped and nothing of it is recorded.
    fn scan_dir(&self, dir: OwnedFd, rel: Vec<u8>, stat: DirStat<'_>) -> Result<Option<Hash>> {
        // A name takes at least two bytes of `rel` with its `/`, so only a
        // long path can be too deep.
        if rel.len() >= 2 * MAX_DEPTH && tree::depth(&rel) > MAX_DEPTH {
            return Err(Error::TooDeep {
                path: self.shown(&rel),
                max: MAX_DEPTH,
            });
        }
        let old = stat.old;
        if let (Some(p), Some(o)) = (&self.partial, old) {
            if !p.listed.contains(&rel) {
                if let Some(h) = self.scan_ancestor(&dir, &rel, o, stat)? {
                    return Ok(Some(h));
                }
            }
        }
        // The names: the exact-names record's, re-statted, when the
        // directory's stat says they are unchanged; else a listing.
        let restated = match old {
            Some(o) if stat.unlisted && o.exact_names => self.restat(dir.as_fd(), &rel, o)?,
            _ => None,
        };
        let listing: fs::PackedListing;
        let (dirfd, mut listed, names_seen, only_dirs) = match restated {
            // (restat read every entry the record claims)
            Some(r) => (
                dir.as_fd(),
                r.listed,
                old.map_or(0, |o| o.entries.claimed()),
                r.only_dirs,
            ),
            None => {
                let fd = match stat.unlisted {
                    true => match fs::reopen_dir(dir.as_fd()) {
                        Ok(fd) => fd,
                        Err(Errno::ACCESS | Errno::PERM) => return self.unreadable_dir(rel),
                        Err(e) => {
                            return Err(Error::io("open directory", self.shown(&rel), e.into()))
                        }
                    },
                    false => dir,
                };
                listing = match fs::list_dir_packed(fd) {
                    Ok(l) => l,
                    Err(Errno::ACCESS | Errno::PERM) => return self.unreadable_dir(rel),
                    Err(e) => return Err(Error::io("read directory", self.shown(&rel), e.into())),
                };
                self.out.dirs_listed.fetch_add(1, Ordering::Relaxed);
                let listed = match self.listed(&listing, &rel, old.map(|o| &**o))? {
                    Names::Entries(listed) => listed,
                    Names::Nested => {
                        self.out.skipped.lock().unwrap().push(Skipped {
                            path: rel,
                            kind: NESTED_WORKSPACE.into(),
                        });
                        return Ok(None);
                    }
                    Names::Unreadable => return self.unreadable_dir(rel),
                };
                (listing.fd(), listed, listing.len(), false)
            }
        };
        // (only the subdirectories listed: every name the record has kept)
        let entries_seen = if only_dirs { names_seen } else { listed.len() };
        self.out
            .entries
            .fetch_add(entries_seen as u64, Ordering::Relaxed);

        // Subdirectories first: their tree hashes are inputs. In parallel
        // only when more than one must be opened: a partial scan keeps most
        // subtrees as they are, and handing one directory to the thread pool
        // costs more than it saves.
        let subdirs: Vec<&Listed> = listed
            .iter()
            .filter(|l| l.meta.file_type() == FileType::Directory)
            .collect();
        let scan_child = |l: &&Listed| -> Result<Option<Hash>> {
            let child_rel = join(&rel, l.name);
            if let Some(h) = self.clean_subtree(&child_rel) {
                return Ok(Some(h));
            }
            let stat = self.child_stat(&child_rel, l.meta, l.recorded_dir());
            if l.leaf && stat.unlisted {
                if let Some(h) = self.unchanged_leaf(dirfd, l.name, &child_rel, stat)? {
                    return Ok(Some(h));
                }
            }
            match fs::open_dir_for(dirfd, l.name, stat.unlisted) {
                // `None` also when it is another workspace: left out.
                Ok(fd) => self.scan_dir(fd, child_rel, stat),
                // Removed since it was listed: it is simply not there.
                Err(Errno::NOENT) => Ok(None),
                Err(Errno::ACCESS | Errno::PERM) => self.unreadable_dir(child_rel),
                Err(Errno::LOOP | Errno::NOTDIR) => Err(Error::Unstable(self.shown(&child_rel))),
                Err(e) => Err(Error::io(
                    "open directory",
                    self.shown(&child_rel),
                    e.into(),
                )),
            }
        };
        let to_open = match self.partial {
            None => subdirs.len(),
            Some(_) => subdirs
                .iter()
                .filter(|l| self.clean_subtree(&join(&rel, l.name)).is_none())
                .count(),
        };
        let child_trees: Vec<Option<Hash>> = if to_open > 1 {
            subdirs.par_iter().map(scan_child).collect::<Result<_>>()?
        } else {
            subdirs.iter().map(scan_child).collect::<Result<_>>()?
        };
        drop(subdirs);
        if only_dirs {
            // Every other entry is as recorded: the record is kept when the
            // subdirectories are too, else the listing is completed.
            let old = old.expect("re-statted from a record");
            if old.tree != UNKNOWN_TREE
                && child_trees.iter().all(Option::is_some)
                && as_recorded(&listed, child_trees.iter().flatten())
            {
                let exact = self.exact_names(stat, true);
                return Ok(Some(self.keep_record(&rel, old, exact)));
            }
            listed = with_files(old, listed, old.entries.claimed());
        }
        if child_trees.iter().any(Option::is_none) {
            let mut keep = child_trees.iter().map(Option::is_some);
            listed.retain(|l| {
                l.meta.file_type() != FileType::Directory || keep.next().unwrap_or(true)
            });
        }
        let child_trees: Vec<Hash> = child_trees.into_iter().flatten().collect();

        if let Some(old) = old {
            if self.unchanged(old, &listed, &child_trees) {
                let exact = self.exact_names(stat, listed.len() == names_seen);
                return Ok(Some(self.keep_record(&rel, old, exact)));
            }
        }

        // Reading file contents (and symlink targets) runs in parallel when
        // more than one file must be read, so a directory of many files
        // does not leave the other cores idle; taking an entry from the
        // index is too cheap to be worth a task.
        let to_read = listed.iter().filter(|l| l.is_read()).take(2).count();
        let content = |l: &Listed| match l.meta.file_type() {
            FileType::RegularFile => self.file_node(dirfd, &rel, l),
            FileType::Symlink => self.symlink_node(dirfd, &rel, l),
            _ => Ok(None), // directories: below; others are skipped
        };
        let items: Vec<Option<Item>> = if to_read > 1 {
            listed.par_iter().map(content).collect::<Result<_>>()?
        } else {
            listed.iter().map(content).collect::<Result<_>>()?
        };

        let mut entries = Vec::with_capacity(listed.len());
        let mut child = child_trees.into_iter();
        for (l, item) in listed.into_iter().zip(items) {
            let ft = l.meta.file_type();
            let item = match ft {
                FileType::Directory => {
                    let tree = child.next().expect("one tree per subdirectory");
                    Some((Node::Dir { tree }, l.meta, l.meta))
                }
                FileType::RegularFile | FileType::Symlink => item,
                other => {
                    self.out.skipped.lock().unwrap().push(Skipped {
                        path: join(&rel, l.name),
                        kind: kind_name(other).into(),
                    });
                    None
                }
            };
            let Some((node, meta, index_meta)) = item else {
                continue;
            };
            let racy = (!matches!(node, Node::Dir { .. })
                && meta.mtime_ns >= self.scan_start_ns - RACY_WINDOW_NS)
                || self.unstored(&l, &node);
            entries.push(IndexEntry {
                entry: Entry {
                    name: l.name.to_vec(),
                    mode: meta.perm(),
                    mtime_ns: meta.mtime_ns,
                    node,
                },
                meta: index_meta,
                racy,
            });
        }
        let exact = self.exact_names(stat, entries.len() == names_seen);
        Ok(Some(self.record_dir(
            rel,
            old.map(|o| &**o),
            entries,
            exact,
        )))
    }

    /// The entries of a fresh listing: every name `lstat`ed (regular files
    /// deferred in a directory without a record), sorted, without ckpt's
    /// own and ignored names. [`Names::Nested`] when the directory is
    /// another workspace: below the root, it holds a `.ckpt` marker file;
    /// [`Names::Unreadable`] when its entries may not be `lstat`ed.
    fn listed<'l>(
        &self,
        listing: &'l fs::PackedListing,
        rel: &[u8],
        old: Option<&'l DirRecord>,
    ) -> Result<Names<'l>> {
        let dirfd = listing.fd();
        let mut listed = Vec::with_capacity(listing.len());
        // Without an old record no entry can be taken from the index, so
        // every regular file will be opened and read: its stat is taken then.
        let defer_files = old.is_none();
        for i in 0..listing.len() {
            let name = listing.name(i);
            if name == MARKER {
                if rel.is_empty() {
                    continue;
                }
                match fs::stat_at_c(dirfd, listing.c_name(i)) {
                    Ok(m) if m.file_type() == FileType::RegularFile => return Ok(Names::Nested),
                    _ => {}
                }
            }
            if is_temp_name(name) {
                self.out.temps.lock().unwrap().push(join(rel, name));
                continue;
            }
            let deferred = defer_files && listing.file_type(i) == FileType::RegularFile;
            let meta = if deferred {
                Meta {
                    mode: FileType::RegularFile.as_raw_mode(),
                    ..Meta::default()
                }
            } else {
                match fs::stat_at_c(dirfd, listing.c_name(i)) {
                    Ok(m) => m,
                    Err(Errno::NOENT) => continue, // vanished since listed
                    Err(Errno::ACCESS | Errno::PERM) => return Ok(Names::Unreadable),
                    Err(e) => {
                        return Err(Error::io("stat", self.shown(&join(rel, name)), e.into()))
                    }
                }
            };
            if self.is_excluded(rel, name, &meta) {
                continue;
            }
            listed.push(Listed {
                name,
                meta,
                old: None,
                deferred,
                leaf: false,
            });
        }
        listed.sort_unstable_by(|a, b| a.name.cmp(b.name));
        // getdents may return a name twice when it is renamed within the
        // directory during the listing; a tree holds each name once.
        listed.dedup_by(|a, b| a.name == b.name);
        // Pair each with its old entry (both lists sorted by name).
        if let Some(old) = old {
            let mut views = old.entries.views().peekable();
            for l in listed.iter_mut() {
                while views.next_if(|v| v.entry.name < l.name).is_some() {}
                l.old = views.next_if(|v| v.entry.name == l.name);
            }
        }
        Ok(Names::Entries(listed))
    }

    /// Notes that `path` (a directory when `dir`) may not be read, as the
    /// module doc says: an error under [`OnUnreadable::Fail`]; else it is
    /// reported, its directory's record is marked to be listed again, and
    /// unless `kept` it is reported as skipped.
    fn unreadable(&self, path: Vec<u8>, dir: bool, kept: bool) -> Result<()> {
        if self.input.on_unreadable == OnUnreadable::Fail {
            let op = match dir {
                true => "read directory (every file is re-read: make it readable, or list it in .ckptignore)",
                false => "open (every file is re-read: make it readable, or list it in .ckptignore)",
            };
            return Err(Error::io(op, self.shown(&path), Errno::ACCESS.into()));
        }
        self.out
            .unreadable_parents
            .lock()
            .unwrap()
            .insert(parent_of(&path).to_vec());
        if !kept {
            self.out.skipped.lock().unwrap().push(Skipped {
                path: path.clone(),
                kind: UNREADABLE.into(),
            });
        }
        self.out
            .unreadable
            .lock()
            .unwrap()
            .push(Unreadable { path, dir, kept });
        Ok(())
    }

    /// [`Self::scan_dir`]'s result for a directory it may not list: left
    /// out (`None`). The workspace root itself is an error.
    fn unreadable_dir(&self, rel: Vec<u8>) -> Result<Option<Hash>> {
        if rel.is_empty() {
            return Err(Error::io(
                "read directory",
                self.input.root.to_path_buf(),
                Errno::ACCESS.into(),
            ));
        }
        self.unreadable(rel, true, false)?;
        Ok(None)
    }

    /// Whether an entry of directory `rel` was found unreadable.
    fn holds_unreadable(&self, rel: &[u8]) -> bool {
        let parents = self.out.unreadable_parents.lock().unwrap();
        !parents.is_empty() && parents.contains(rel)
    }

    /// The entries of an exact-names record whose directory's stat is as
    /// recorded, each `lstat`ed afresh, without listing the directory
    /// (opened `O_PATH` as `dir`). `None` when a name has vanished: the
    /// directory changed after its stat was taken, so it must be listed.
    ///
    /// While every entry other than a directory is as recorded (the same
    /// stat, not racy: [`as_recorded`]'s rule), only the subdirectories are
    /// kept ([`Restated::only_dirs`]); at the first that is not, the
    /// listing is completed from the record and goes on in full. An
    /// unchanged tree thus makes a [`Listed`] (208 bytes) per subdirectory
    /// instead of one per name. In a new process those are mostly fresh
    /// heap pages, each a page fault, which a status of an unchanged tree
    /// would pay for every name.
    fn restat<'r>(
        &self,
        dir: BorrowedFd<'_>,
        rel: &[u8],
        old: &'r DirRecord,
    ) -> Result<Option<Restated<'r>>> {
        let mut listed = Vec::new();
        let mut only_dirs = true;
        let mut seen = 0;
        for v in old.entries.views() {
            seen += 1;
            let name = v.entry.name;
            // A marker recorded below the root (an index made before nested
            // workspaces were left out): list, so the listing decides.
            if name == MARKER && !rel.is_empty() {
                return Ok(None);
            }
            let (meta, nlink) = match fs::stat_at_links(dir, name) {
                Ok(m) => m,
                // Gone, or no longer searchable: the listing decides.
                Err(Errno::NOENT | Errno::ACCESS | Errno::PERM) => return Ok(None),
                Err(e) => return Err(Error::io("stat", self.shown(&join(rel, name)), e.into())),
            };
            // The rules may have changed since the record was made.
            let excluded = self.is_excluded(rel, name, &meta);
            let was_dir = matches!(v.entry.node, NodeRef::Dir { .. });
            let is_dir = meta.file_type() == FileType::Directory;
            if only_dirs {
                match (was_dir, is_dir) {
                    (false, false) if !excluded && file_as_recorded(&v, &meta) => continue,
                    (true, true) if !excluded => {}
                    _ => {
                        listed = with_files(old, listed, seen - 1);
                        only_dirs = false;
                    }
                }
            }
            if excluded {
                continue;
            }
            listed.push(Listed {
                name,
                meta,
                old: Some(v),
                deferred: false,
                leaf: is_dir && fs::no_subdirs(nlink),
            });
        }
        // Entries are checked as they are read: when fewer read than the
        // record claims, the names are incomplete: list instead.
        Ok((seen == old.entries.claimed()).then_some(Restated { listed, only_dirs }))
    }

    /// Whether `.ckptignore` or the exclusions drop this entry.
    fn is_excluded(&self, rel: &[u8], name: &[u8], meta: &Meta) -> bool {
        if !self.input.ignore.is_active() && self.input.exclude.is_empty() {
            return false;
        }
        let path = join(rel, name);
        self.input.exclude.contains(&path)
            || self
                .input
                .ignore
                .is_ignored(&path, meta.file_type() == FileType::Directory)
    }

    /// How a subdirectory is handed to [`Self::scan_dir`]: whether its stat
    /// is as recorded and, if its record has exact names, that it need not
    /// be listed.
    fn child_stat(&self, child_rel: &[u8], meta: Meta, recorded: Option<Meta>) -> DirStat<'a> {
        let as_recorded = recorded == Some(meta);
        let old = self.input.index.dirs.get(child_rel);
        let unlisted = as_recorded && old.is_some_and(|r| r.exact_names);
        DirStat {
            old,
            meta: Some(meta),
            as_recorded,
            unlisted,
        }
    }

    /// Whether a directory's new record may claim exact names: every name
    /// it returned is in the record (`all_kept`) and its ctime is outside
    /// the racy window of this scan (see [`crate::store::index`]).
    fn exact_names(&self, stat: DirStat<'_>, all_kept: bool) -> bool {
        all_kept
            && stat
                .meta
                .is_some_and(|m| m.ctime_ns < self.scan_start_ns - RACY_WINDOW_NS)
    }

    /// Records `rel`'s new listing and returns its tree hash: `old`'s tree
    /// when the tree entries are the same as its, else the newly encoded one.
    fn record_dir(
        &self,
        rel: Vec<u8>,
        old: Option<&DirRecord>,
        entries: Vec<IndexEntry>,
        exact_names: bool,
    ) -> Hash {
        let tree = match old {
            Some(o)
                if o.tree != UNKNOWN_TREE
                    && o.entries.len() == entries.len()
                    && o.entries
                        .iter()
                        .zip(&entries)
                        .all(|(a, b)| a.entry == b.entry) =>
            {
                o.tree
            }
            _ => {
                let t = Tree {
                    entries: entries.iter().map(|e| e.entry.clone()).collect(),
                };
                let (h, bytes) = t.encode_and_hash();
                self.out.new_trees.lock().unwrap().insert(h, bytes);
                h
            }
        };
        // A directory holding an unreadable entry is listed again by every
        // scan, partial ones too (see the module doc); a tree that is not
        // stored is not recorded (see "Scans that store nothing").
        let relist = self.holds_unreadable(&rel);
        let unstored = matches!(self.input.mode, Mode::HashKeep(_))
            && tree != old.map_or(UNKNOWN_TREE, |o| o.tree);
        self.out.records.lock().unwrap().push((
            rel,
            Arc::new(DirRecord {
                tree: if relist || unstored {
                    UNKNOWN_TREE
                } else {
                    tree
                },
                entries: entries.into(),
                exact_names: exact_names && !relist,
            }),
        ));
        tree
    }

    /// In a [`Mode::HashKeep`] scan, whether `l` was read and its content,
    /// `node`, is not in the store (see "Scans that store nothing").
    fn unstored(&self, l: &Listed, node: &Node) -> bool {
        match (self.input.mode, node) {
            (Mode::HashKeep(objects), Node::File { hash, .. }) => {
                l.is_read() && !objects.contains(hash)
            }
            _ => false,
        }
    }

    /// Records `rel`'s old record as its new one (entries and tree
    /// unchanged) and returns its tree hash: the same record, counted as
    /// reused and not collected (it is no change), or a copy with
    /// `exact_names` changed.
    fn keep_record(&self, rel: &[u8], old: &Arc<DirRecord>, exact_names: bool) -> Hash {
        if exact_names == old.exact_names {
            self.out.reused_dirs.fetch_add(1, Ordering::Relaxed);
        } else {
            let rec = Arc::new(DirRecord {
                exact_names,
                ..DirRecord::clone(old)
            });
            self.out.records.lock().unwrap().push((rel.to_vec(), rec));
        }
        old.tree
    }

    /// A subdirectory `rel` (named `name` in `parent`) whose stat is as
    /// recorded, whose record has exact names and whose link count says it
    /// has no subdirectories, checked without opening it: each recorded
    /// name `lstat`ed as `name/entry` relative to the parent. When every
    /// entry's stat equals its record (and none is racy, a directory, the
    /// marker or now excluded) its record is kept, as [`Self::scan_dir`]
    /// would keep it, and its tree hash returned; `None` otherwise (nothing
    /// was recorded: the caller opens and scans it).
    ///
    /// This saves an `open` and a `close` per directory (a noticeable part
    /// of the `lstat` floor of a tree of small leaf directories, as in
    /// `node_modules`) for one more name lookup per entry, a fraction of an
    /// `lstat`: so only up to [`LEAF_MAX_ENTRIES`] entries. The parent is
    /// held open, but the subdirectory is looked up by name at each
    /// `lstat`: if it is replaced meanwhile (say by a symlink to a moved
    /// copy), an entry can only match its record if it is the very inode
    /// recorded, with the same size, mtime and ctime, so what is kept is
    /// what was read from it; anything else is scanned through the
    /// opened directory, as before. No content is read here.
    ///
    /// It applies [`file_as_recorded`] entry by entry (with the same names
    /// and no subdirectory, that is [`Self::unchanged`]'s rule) instead of
    /// building a listing and calling that: built that way, a full scan
    /// was markedly slower (BENCHMARKS.md, "Rejected experiments").
    fn unchanged_leaf(
        &self,
        parent: BorrowedFd<'_>,
        name: &[u8],
        rel: &[u8],
        stat: DirStat<'_>,
    ) -> Result<Option<Hash>> {
        let Some(old) = stat
            .old
            .filter(|o| o.tree != UNKNOWN_TREE && o.entries.claimed() <= LEAF_MAX_ENTRIES)
        else {
            return Ok(None);
        };
        let mut path = Vec::with_capacity(name.len() + 64);
        path.extend_from_slice(name);
        path.push(b'/');
        let mut seen = 0;
        for v in old.entries.views() {
            if v.racy || v.entry.name == MARKER || matches!(v.entry.node, NodeRef::Dir { .. }) {
                return Ok(None);
            }
            path.truncate(name.len() + 1);
            path.extend_from_slice(v.entry.name);
            match fs::stat_at(parent, &path) {
                Ok(m) if file_as_recorded(&v, &m) && !self.is_excluded(rel, v.entry.name, &m) => {
                    seen += 1
                }
                _ => return Ok(None),
            }
        }
        if seen != old.entries.claimed() {
            return Ok(None);
        }
        self.out.entries.fetch_add(seen as u64, Ordering::Relaxed);
        self.out.dirs_unopened.fetch_add(1, Ordering::Relaxed);
        let exact = self.exact_names(stat, true);
        Ok(Some(self.keep_record(rel, old, exact)))
    }

    /// In a partial scan, the tree of a subdirectory nothing changed in
    /// (its record is kept as is; it is not opened).
    fn clean_subtree(&self, rel: &[u8]) -> Option<Hash> {
        let p = self.partial.as_ref()?;
        if p.affected.contains(rel) {
            return None;
        }
        let rec = self.input.index.dirs.get(rel)?;
        (rec.tree != UNKNOWN_TREE).then_some(rec.tree)
    }

    /// In a partial scan, a directory whose own listing did not change but
    /// that lies on the path to one that did: keep its entries, re-stat and
    /// rescan only the affected subdirectories. `None` when what is on disk
    /// does not match the record (then the caller lists it in full).
    fn scan_ancestor(
        &self,
        dir: &OwnedFd,
        rel: &[u8],
        old: &Arc<DirRecord>,
        stat: DirStat<'_>,
    ) -> Result<Option<Hash>> {
        let p = self.partial.as_ref().expect("partial scan");
        let mut todo = Vec::new();
        for (i, e) in old.entries.iter().enumerate() {
            if !matches!(e.entry.node, Node::Dir { .. }) {
                continue;
            }
            let child = join(rel, &e.entry.name);
            if !p.affected.contains(&child) {
                continue;
            }
            match fs::stat_at(dir.as_fd(), &e.entry.name) {
                Ok(m) if m.file_type() == FileType::Directory => todo.push((i, child, m)),
                _ => return Ok(None),
            }
        }
        let scan_child = |(i, child, m): &(usize, Vec<u8>, Meta)| -> Result<Option<Hash>> {
            let e = &old.entries[*i];
            let stat = self.child_stat(child, *m, Some(e.meta));
            match fs::open_dir_for(dir.as_fd(), &e.entry.name, stat.unlisted) {
                Ok(fd) => self.scan_dir(fd, child.clone(), stat),
                Err(Errno::ACCESS | Errno::PERM) => self.unreadable_dir(child.clone()),
                Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => {
                    Err(Error::Unstable(self.shown(child)))
                }
                Err(e) => Err(Error::io("open directory", self.shown(child), e.into())),
            }
        };
        // In parallel only when more than one directory must be opened.
        let trees: Vec<Option<Hash>> = if todo.len() > 1 {
            todo.par_iter().map(scan_child).collect::<Result<_>>()?
        } else {
            todo.iter().map(scan_child).collect::<Result<_>>()?
        };
        let mut entries = old.entries.to_vec();
        let mut nested = Vec::new();
        for ((i, _, m), tree) in todo.into_iter().zip(trees) {
            // Another workspace now (reported as skipped): left out.
            let Some(tree) = tree else {
                nested.push(i);
                continue;
            };
            let e = &mut entries[i];
            e.entry.mode = m.perm();
            e.entry.mtime_ns = m.mtime_ns;
            e.entry.node = Node::Dir { tree };
            e.meta = m;
        }
        for i in nested.into_iter().rev() {
            entries.remove(i);
        }
        // Kept under a stat newer than its listing, the record can no
        // longer vouch for its names (see `crate::store::index`).
        let exact = old.exact_names && stat.as_recorded;
        if entries[..] == old.entries[..] {
            return Ok(Some(self.keep_record(rel, old, exact)));
        }
        Ok(Some(self.record_dir(
            rel.to_vec(),
            Some(old),
            entries,
            exact,
        )))
    }

    /// True when every listed entry matches the old record exactly (names,
    /// stats, no racy entries, same subtrees).
    fn unchanged(&self, old: &DirRecord, listed: &[Listed], child_trees: &[Hash]) -> bool {
        // Every listed name has an old entry (names are unique on both
        // sides), so equal counts mean the same names. (Of a damaged
        // record fewer entries read than it claims, and a listed name
        // then has none.)
        old.tree != UNKNOWN_TREE
            && old.entries.claimed() == listed.len()
            && as_recorded(listed, child_trees.iter())
    }

    fn file_node(&self, dir: BorrowedFd<'_>, rel: &[u8], l: &Listed) -> Result<Option<Item>> {
        debug_assert!(
            !l.deferred || l.old.is_none(),
            "deferred stat with an index entry"
        );
        if let Some(node) = l.cached(|n| matches!(n, NodeRef::File { .. })) {
            return Ok(Some((node, l.meta, l.meta)));
        }
        let path = join(rel, l.name);
        let shown = || self.shown(&path);
        self.out.files_read.fetch_add(1, Ordering::Relaxed);
        let res =
            match self.input.mode {
                Mode::Capture(objects) => objects
                    .capture(dir, l.name, l.old_content(), &shown)
                    .map(|c| {
                        if c.new_bytes > 0 || c.meta.size == 0 {
                            self.out.new_bytes.fetch_add(c.new_bytes, Ordering::Relaxed);
                        }
                        if c.new_bytes > 0
                            && self.out.new_objects.fetch_add(1, Ordering::Relaxed) == 0
                        {
                            if let Some(f) = self.input.on_first_new_object {
                                f();
                            }
                        }
                        (c.hash, c.meta)
                    }),
                Mode::HashOnly | Mode::HashKeep(_) => hash_file(dir, l.name, &shown),
            };
        match res {
            Ok((hash, meta)) => Ok(Some((
                Node::File {
                    size: meta.size,
                    hash,
                },
                meta,
                meta,
            ))),
            // Not ours to read: the content the index proves unchanged, with
            // the fresh mode and mtime, the index keeping the stat it was
            // read under; else left out (see the module doc).
            Err(CaptureError::Unreadable) => {
                let kept = l.old.filter(|o| {
                    matches!(o.entry.node, NodeRef::File { .. })
                        && !o.racy
                        && !l.deferred
                        && (o.meta.dev, o.meta.ino, o.meta.size, o.meta.mtime_ns)
                            == (l.meta.dev, l.meta.ino, l.meta.size, l.meta.mtime_ns)
                });
                self.unreadable(path, false, kept.is_some())?;
                Ok(kept.map(|o| (o.entry.node.to_node(), l.meta, o.meta)))
            }
            // It changed kind or vanished between listing and reading: the
            // state we saw is gone; report it rather than guess.
            Err(CaptureError::Gone) => match fs::stat_at(dir, l.name) {
                Err(Errno::NOENT) => Ok(None),
                _ => Err(Error::Unstable(shown())),
            },
            Err(CaptureError::Err(e)) => Err(e),
        }
    }

    fn symlink_node(&self, dir: BorrowedFd<'_>, rel: &[u8], l: &Listed) -> Result<Option<Item>> {
        if let Some(node) = l.cached(|n| matches!(n, NodeRef::Symlink { .. })) {
            return Ok(Some((node, l.meta, l.meta)));
        }
        match fs::read_link_at(dir, l.name) {
            Ok(target) => Ok(Some((Node::Symlink { target }, l.meta, l.meta))),
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::INVAL) => Err(Error::Unstable(self.shown(&join(rel, l.name)))),
            Err(e) => Err(Error::io(
                "readlink",
                self.shown(&join(rel, l.name)),
                e.into(),
            )),
        }
    }
}

fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::Socket => "socket",
        FileType::Fifo => "fifo",
        FileType::CharacterDevice => "char-device",
        FileType::BlockDevice => "block-device",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    //! Partial scans applied in place, against the model they replace: the
    //! old index copied, the directories gone filtered out by a walk over
    //! every record, the new records added; and against a full scan of the
    //! same tree. On a real tree, through random edits.

    use super::*;
    use crate::store::Store;
    use crate::Config;
    use ckpt_fs::fs::is_within;
    use proptest::prelude::*;
    use std::os::unix::fs::PermissionsExt;

    /// One edit, its targets picked by index among what exists.
    #[derive(Clone, Debug)]
    enum Op {
        /// Create or append to file `f{n}` in directory `i`.
        Write(usize, u8),
        /// Remove file `i`.
        RemoveFile(usize),
        /// Create directory `s{n}` in directory `i`, with a file and a
        /// subdirectory in it.
        Mkdir(usize, u8),
        /// Remove directory `i` (not the root) and everything in it.
        RemoveDir(usize),
        /// Move directory `i` (not the root) into directory `j` as `m{n}`.
        MoveDir(usize, usize, u8),
        /// Change directory `i`'s permission bits.
        ChmodDir(usize),
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<usize>(), 0u8..6).prop_map(|(i, n)| Op::Write(i, n)),
            2 => any::<usize>().prop_map(Op::RemoveFile),
            2 => (any::<usize>(), 0u8..4).prop_map(|(i, n)| Op::Mkdir(i, n)),
            2 => any::<usize>().prop_map(Op::RemoveDir),
            1 => (any::<usize>(), any::<usize>(), 0u8..4).prop_map(|(i, j, n)| Op::MoveDir(i, j, n)),
            1 => any::<usize>().prop_map(Op::ChmodDir),
        ]
    }

    /// Every directory (`""` first) and every file below `root`, sorted.
    fn listing(root: &Path) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        use std::os::unix::ffi::OsStrExt;
        let (mut dirs, mut files) = (vec![Vec::new()], Vec::new());
        let mut i = 0;
        while i < dirs.len() {
            let rel = dirs[i].clone();
            for e in std::fs::read_dir(display_path(root, &rel)).unwrap() {
                let e = e.unwrap();
                let p = join(&rel, e.file_name().as_bytes());
                match e.file_type().unwrap().is_dir() {
                    true => dirs.push(p),
                    false => files.push(p),
                }
            }
            i += 1;
        }
        dirs.sort();
        files.sort();
        (dirs, files)
    }

    /// Applies `op` and adds to `dirty` what a watcher would mark: the
    /// directory whose entries changed, a directory whose own stat changed
    /// and its parent, and every directory that appeared.
    fn edit(root: &Path, op: &Op, dirty: &mut HashSet<Vec<u8>>) {
        let (dirs, files) = listing(root);
        let abs = |rel: &[u8]| display_path(root, rel);
        let pick = |v: &[Vec<u8>], i: usize| v[i % v.len()].clone();
        let appeared = |rel: &[u8], dirty: &mut HashSet<Vec<u8>>| {
            let (below, _) = listing(&abs(rel));
            dirty.extend(below.iter().map(|b| match b.is_empty() {
                true => rel.to_vec(),
                false => join(rel, b),
            }));
        };
        match *op {
            Op::Write(i, n) => {
                let d = pick(&dirs, i);
                let p = abs(&join(&d, format!("f{n}").as_bytes()));
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .unwrap();
                std::io::Write::write_all(&mut f, b"x\n").unwrap();
                dirty.insert(d);
            }
            Op::RemoveFile(i) if !files.is_empty() => {
                let f = pick(&files, i);
                std::fs::remove_file(abs(&f)).unwrap();
                dirty.insert(parent_of(&f).to_vec());
            }
            Op::Mkdir(i, n) => {
                let d = join(&pick(&dirs, i), format!("s{n}").as_bytes());
                if std::fs::create_dir(abs(&d)).is_ok() {
                    std::fs::write(abs(&join(&d, b"g")), b"g\n").unwrap();
                    std::fs::create_dir(abs(&join(&d, b"t"))).unwrap();
                    dirty.insert(parent_of(&d).to_vec());
                    appeared(&d, dirty);
                }
            }
            Op::RemoveDir(i) if dirs.len() > 1 => {
                let d = pick(&dirs[1..], i);
                std::fs::remove_dir_all(abs(&d)).unwrap();
                dirty.insert(parent_of(&d).to_vec());
                dirty.insert(d);
            }
            Op::MoveDir(i, j, n) if dirs.len() > 1 => {
                let from = pick(&dirs[1..], i);
                let into = pick(&dirs, j);
                let to = join(&into, format!("m{n}").as_bytes());
                if !is_within(&into, &from) && std::fs::rename(abs(&from), abs(&to)).is_ok() {
                    dirty.insert(parent_of(&from).to_vec());
                    dirty.insert(into);
                    appeared(&to, dirty);
                }
            }
            Op::ChmodDir(i) => {
                let d = pick(&dirs, i);
                let m = std::fs::metadata(abs(&d)).unwrap().permissions().mode();
                let m = if m & 0o020 != 0 { 0o755 } else { 0o775 };
                std::fs::set_permissions(abs(&d), std::fs::Permissions::from_mode(m)).unwrap();
                if !d.is_empty() {
                    dirty.insert(parent_of(&d).to_vec());
                }
                dirty.insert(d);
            }
            _ => {}
        }
    }

    /// The index the way a scan's update would make it as a copy: the whole
    /// map copied, the directories gone (and everything within them)
    /// filtered out by a walk over every record, the records it made
    /// added.
    fn copied_update(index: &Index, u: &IndexUpdate) -> crate::store::index::DirMap {
        let mut dirs = (*index.dirs).clone();
        dirs.retain(|p, _| !u.removed.iter().any(|r| is_within(p, r)));
        dirs.extend(u.records.iter().cloned());
        dirs
    }

    /// 31 directories, so that a round's changes usually fit a delta; few
    /// distinct contents, so that capturing stores (and syncs) few objects.
    fn build(root: &Path) {
        for a in 0..6 {
            for b in 0..4 {
                let d = root.join(format!("a{a}/b{b}"));
                std::fs::create_dir_all(&d).unwrap();
                for f in 0..3 {
                    let p = d.join(format!("f{f}"));
                    std::fs::write(&p, b"f").unwrap();
                    // Not racy: a full scan takes it from the index.
                    std::fs::File::options()
                        .write(true)
                        .open(&p)
                        .and_then(|f| f.set_modified(std::time::UNIX_EPOCH))
                        .unwrap();
                }
            }
            std::fs::write(root.join(format!("a{a}/top")), b"t").unwrap();
        }
    }

    /// A record whose entries are damaged behind a matching trailer (see
    /// "Loading without parsing" in [`crate::store::index`]): a scan against
    /// it re-reads that directory's files from the damaged entry on, and
    /// its tree is the one a scan against no index finds, also when a file
    /// after the damage changed (a record counted by its header would
    /// match the entries that read and keep the old tree).
    #[test]
    fn a_damaged_record_is_scanned_as_a_changed_directory() {
        let shared = tempfile::tempdir().unwrap();
        Store::create(&shared.path().join("store")).unwrap();
        let store = Store::open(&shared.path().join("store"), &Config::default()).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        build(&root);
        let ignore = Ignore::default();
        let scan_with = |index: &Index, mode| {
            scan(&ScanInput {
                root: &root,
                index,
                ignore: &ignore,
                exclude: &[],
                mode,
                on_unreadable: OnUnreadable::Record,
                on_first_new_object: None,
            })
            .unwrap()
            .apply(index.clone())
        };
        let first = scan_with(&Index::default(), Mode::Capture(&store.objects)).index;
        std::fs::write(root.join("a2/b1/f2"), b"changed").unwrap();
        let intact = scan_with(&first, Mode::HashOnly);
        let clean = scan_with(&Index::default(), Mode::HashOnly);
        // `a2/b1`'s entry `f1` (name length 2, then the name): its flags
        // byte, just before, made unknown; the trailer made to match.
        let mut bytes = first.encode();
        let dir = bytes.windows(5).position(|w| w == b"a2/b1").unwrap();
        let f1 = dir
            + bytes[dir..]
                .windows(3)
                .position(|w| w == b"\x02f1")
                .unwrap();
        bytes[f1 - 1] = 0xff;
        let body = bytes.len() - 32;
        let h = Hash::of(&bytes[..body]);
        bytes[body..].copy_from_slice(&h.0);
        let damaged = Index::decode(&bytes).unwrap();
        assert_eq!(damaged.dirs[b"a2/b1".as_slice()].entries.len(), 1);

        let again = scan_with(&damaged, Mode::HashOnly);
        assert_eq!(again.root, clean.root);
        assert_eq!(intact.root, clean.root);
        assert_eq!(again.files_read, intact.files_read + 1, "f1 re-read too");
        assert_eq!(again.index.dirs[b"a2/b1".as_slice()].entries.len(), 3);
    }

    /// Each round: random edits, then a partial scan of what a watcher
    /// would mark, applied in place to the index of the round before (kept
    /// in memory, as the watcher does, or loaded from the file the round
    /// before saved, as a command does) — or, some rounds, a full scan
    /// against it. A partial scan's index equals the copying update's; for
    /// both, the unknown-tree set is exact, root and records are those a
    /// full scan of the tree finds, the delta has the bytes the walk over
    /// every record made, and what is saved loads back as the index.
    #[test]
    fn scans_applied_in_place_equal_the_copying_update_and_a_scan_without_index() {
        // One store for every case (making one costs more than a case).
        let shared = tempfile::tempdir().unwrap();
        Store::create(&shared.path().join("store")).unwrap();
        let store = Store::open(&shared.path().join("store"), &Config::default()).unwrap();
        let objects = &store.objects;
        let rounds = proptest::collection::vec(
            (
                proptest::collection::vec(arb_op(), 1..5),
                any::<bool>(),
                any::<bool>(),
                proptest::bool::weighted(0.3),
            ),
            1..7,
        );
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 64,
            ..ProptestConfig::default()
        });
        runner
            .run(&rounds, |rounds| {
                let tmp = tempfile::tempdir().unwrap();
                let root = tmp.path().join("ws");
                build(&root);
                let ignore = Ignore::default();
                let path = tmp.path().join("index");
                let first = scan(&ScanInput {
                    root: &root,
                    index: &Index::default(),
                    ignore: &ignore,
                    exclude: &[],
                    mode: Mode::Capture(objects),
                    on_unreadable: OnUnreadable::Record,
                    on_first_new_object: None,
                })
                .unwrap()
                .apply(Index::default());
                let mut first = first.index;
                first.save(&path).unwrap();
                let mut index = Index::load(&path, 0);
                prop_assert_eq!(&index.dirs, &first.dirs);
                for (i, (ops, capture, reload, whole)) in rounds.iter().enumerate() {
                    let mut dirty = HashSet::new();
                    for op in ops {
                        edit(&root, op, &mut dirty);
                    }
                    let mode = match capture {
                        true => Mode::Capture(objects),
                        false => Mode::HashKeep(objects),
                    };
                    // A record no entry leads to (an older restore could
                    // write one): a full scan drops it.
                    let stray = *whole && i % 2 == 0;
                    if stray {
                        let rec = Arc::clone(&index.dirs[&Vec::new()]);
                        index.dirs.insert(b"gone/stray".to_vec(), rec);
                    }
                    // Against no index: every directory listed, every file
                    // read, every record new.
                    let full = scan(&ScanInput {
                        root: &root,
                        index: &Index::default(),
                        ignore: &ignore,
                        exclude: &[],
                        mode: Mode::HashOnly,
                        on_unreadable: OnUnreadable::Record,
                        on_first_new_object: None,
                    })
                    .unwrap()
                    .apply(Index::default());
                    let input = ScanInput {
                        root: &root,
                        index: &index,
                        ignore: &ignore,
                        exclude: &[],
                        mode,
                        on_unreadable: OnUnreadable::Record,
                        on_first_new_object: None,
                    };
                    let scanned = match whole {
                        true => scan(&input).unwrap(),
                        false => scan_partial(&input, &dirty).unwrap(),
                    };
                    let mut copied = copied_update(&index, scanned.update.as_ref().unwrap());
                    if *whole {
                        copied.retain(|p, _| full.index.dirs.contains_key(p));
                    }
                    let mut scanned = scanned.apply(index);
                    prop_assert!(!stray || !scanned.index_unchanged);
                    prop_assert_eq!(
                        &*scanned.index.dirs,
                        &copied,
                        "round {}: in place vs copied",
                        i
                    );
                    let ix = &mut scanned.index;
                    prop_assert_eq!(
                        ix.dirs.unknown_trees(),
                        &crate::store::index::unknown_trees(&ix.dirs)
                    );

                    prop_assert_eq!(full.root, scanned.root, "round {}: root", i);
                    let mut got: Vec<&Vec<u8>> = ix.dirs.keys().collect();
                    let mut want: Vec<&Vec<u8>> = full.index.dirs.keys().collect();
                    got.sort();
                    want.sort();
                    prop_assert_eq!(got, want, "round {}: directories", i);
                    for (p, rec) in full.index.dirs.iter() {
                        let mine = &ix.dirs[p];
                        prop_assert!(mine.tree == rec.tree || mine.tree == UNKNOWN_TREE);
                        let a: Vec<&Entry> = mine.entries.iter().map(|e| &e.entry).collect();
                        let b: Vec<&Entry> = rec.entries.iter().map(|e| &e.entry).collect();
                        prop_assert_eq!(a, b, "round {}: entries of {:?}", i, p);
                    }

                    if let Some(base) = ix.base.clone() {
                        if let Some(walked) = ix.encode_delta_by_walk(&base) {
                            eprintln!("COMPARED {}", walked.is_some());
                            prop_assert_eq!(ix.encode_delta(&base), walked, "round {}: delta", i);
                        }
                    }
                    ix.save(&path).unwrap();
                    let back = Index::load(&path, 0);
                    prop_assert_eq!(&back.dirs, &ix.dirs, "round {}: saved and loaded", i);
                    prop_assert_eq!(back.scan_start_ns, ix.scan_start_ns);
                    index = match reload {
                        true => back,
                        false => std::mem::take(ix),
                    };
                }
                Ok(())
            })
            .unwrap();
    }
}
