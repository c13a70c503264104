//! Bringing a checkpoint from one store into another: a fork's store starts
//! knowing its origin checkpoint ([`crate::engine::fork`]), and `ckpt adopt`
//! brings a fork's checkpoint back into this workspace's store before an
//! ordinary restore ([`crate::ops::adopt`]).
//!
//! What moves, and in which order (nothing durable ever references
//! something that is not yet durable, as everywhere in the store):
//! 1. the objects of every file of the checkpoint that the destination
//!    lacks, hard-linked where both stores share a filesystem, else copied
//!    and re-hashed ([`Objects::import_from`](crate::store::objects::Objects::import_from),
//!    durable on return);
//! 2. the agent state at the checkpoint's `state_version`, as one new
//!    commit of the destination's state store (state versions are per
//!    store, so the record's `state_version` is rewritten to that commit);
//! 3. one catalog transaction with every tree of the checkpoint and the
//!    record (same root tree, message, tags and time; its hash changes when
//!    its number or state version does).
//!
//! A crash before 3 leaves unreferenced objects (gc removes them) and at
//! most an extra state commit, never a record naming something missing.
//!
//! [`inherited_index`] builds the stat index of a freshly materialised
//! checkpoint from the new files' own `lstat`s, so a fork's first save reads
//! only what changed since (see its doc for why that is as safe as the
//! index a restore writes).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::error::IoContext;
use crate::store::catalog::{CatalogReader, Checkpoint};
use crate::store::index::{DirMap, DirRecord, Index, IndexEntry, RACY_WINDOW_NS, UNKNOWN_TREE};
use crate::store::objects::Imported;
use crate::store::state::LazyState;
use crate::store::tree::{Entry, Node, Tree};
use crate::store::Store;
use crate::{Hash, Result};
use ckpt_fs::fs::{self, join, Meta};

/// Every tree of the checkpoint rooted at `root` (hash, encoded bytes) and
/// every file content it names (hash, size), each once.
pub type Closure = (Vec<(Hash, Vec<u8>)>, Vec<(Hash, u64)>);

/// The trees and contents reachable from the tree `root`.
pub fn closure(reader: &CatalogReader<'_>, root: Hash) -> Result<Closure> {
    let mut trees = Vec::new();
    let mut files: HashMap<Hash, u64> = HashMap::new();
    let mut seen = HashSet::new();
    let mut todo = vec![root];
    while let Some(h) = todo.pop() {
        if !seen.insert(h) {
            continue;
        }
        let t = reader.tree(&h)?;
        for e in &t.entries {
            match &e.node {
                Node::Dir { tree } => todo.push(*tree),
                Node::File { size, hash } => {
                    files.insert(*hash, *size);
                }
                Node::Symlink { .. } => {}
            }
        }
        trees.push((h, t.encode_and_hash().1));
    }
    Ok((trees, files.into_iter().collect()))
}

/// The agent state of `cp` in `src` as key → value (`None`: no state at
/// all, which stands for the empty state).
fn state_of(src: &Store, cp: &Checkpoint) -> Result<Option<BTreeMap<Vec<u8>, Vec<u8>>>> {
    let Some(v) = cp.state_version else {
        return Ok(None);
    };
    let Some(s) = src.state.get()? else {
        return Ok(None);
    };
    let snap = s.snapshot(v)?;
    Ok(Some(
        snap.scan(b"")
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect(),
    ))
}

/// Makes the latest agent state of `state` equal to `kv` as one commit and
/// returns its version.
fn set_state(state: &LazyState, kv: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<u64> {
    let s = state.get_or_create()?;
    let mut txn = s.begin();
    for (k, _) in txn.scan(b"") {
        if !kv.contains_key(&k) {
            txn.delete(&k);
        }
    }
    for (k, v) in kv {
        txn.put(k, v);
    }
    Ok(txn.commit()?)
}

/// Makes the latest agent state of `store`, a snapshot of the store `cp`
/// is from (so it holds `cp`'s state version), `cp`'s agent state, as one
/// commit (nothing when neither has any state).
pub fn reset_state(store: &Store, cp: &Checkpoint) -> Result<()> {
    let kv = state_of(store, cp)?.unwrap_or_default();
    if kv.is_empty() && store.state.get()?.is_none() {
        return Ok(());
    }
    set_state(&store.state, &kv)?;
    Ok(())
}

/// How [`import`] records the checkpoint in the destination.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    /// Keep this checkpoint number (a fork's store starts at its origin's).
    pub seq: Option<u64>,
    /// Make it the destination's head (a fork's store: its files are it).
    pub make_head: bool,
    /// Leave the destination's latest agent state as it was (adopt: the
    /// restore that follows changes it, pre-saved and undoable).
    pub keep_latest_state: bool,
}

/// Brings checkpoint `cp` of `src` into `dst` (see the module doc); returns
/// the record as stored in `dst` and what moving the objects did.
pub fn import(
    src: &Store,
    cp: &Checkpoint,
    dst: &Store,
    tags: BTreeMap<String, String>,
    place: Placement,
) -> Result<(Checkpoint, Imported)> {
    let _t = crate::trace::span("import checkpoint");
    let (trees, files) = closure(&src.catalog.reader()?, cp.root)?;
    let imported = dst.objects.import_from(&src.objects, &files)?;
    let state_version = match state_of(src, cp)? {
        None => None,
        Some(kv) => {
            let before = match (place.keep_latest_state, dst.state.get()?) {
                (true, Some(s)) => Some(
                    s.snapshot(s.latest_version())?
                        .scan(b"")
                        .into_iter()
                        .map(|e| (e.key, e.value))
                        .collect::<BTreeMap<_, _>>(),
                ),
                (true, None) => Some(BTreeMap::new()),
                (false, _) => None,
            };
            let v = set_state(&dst.state, &kv)?;
            if let Some(before) = before {
                set_state(&dst.state, &before)?;
            }
            Some(v)
        }
    };
    let mut record = cp.clone();
    record.state_version = state_version;
    record.parent = None;
    record.tags.extend(tags);
    let rec = dst
        .catalog
        .import_checkpoint(&trees, record, place.seq, place.make_head)?;
    Ok((rec, imported))
}

/// The stat index of the checkpoint tree `root` just materialised at
/// `dir`, built from `lstat`s of the new files (one parallel pass, no
/// content read), for the store of `generation`.
///
/// Why it is correct: every file below `dir` was just written by this
/// process from a verified object of this tree, and `dir` is not yet a
/// workspace nor visible under its final name. An entry is recorded only
/// when the file's type, permission bits, mtime and size equal the tree
/// entry's; anything else (which nothing should cause) is left out, so the
/// next scan hashes it. The stat recorded is the file's own (device, inode,
/// ctime of the new file), so any later change to it is seen as a change.
/// Files are marked racy by the same rule as a scan's (mtime within
/// [`RACY_WINDOW_NS`] of now), which for files written with their
/// checkpoint's older mtimes is rarely any: exactly the assumption an
/// in-place restore makes for the files it writes. Records never claim
/// exact names, so the first save lists every directory once.
pub fn inherited_index(
    dir: &Path,
    reader: &CatalogReader<'_>,
    root: Hash,
    generation: u64,
) -> Result<Index> {
    let _t = crate::trace::span("inherited index");
    let scan_start_ns = fs::now_ns();
    let root_fd = fs::open_dir_path(dir).ctx("open", dir)?;
    let out: Mutex<DirMap> = Mutex::new(DirMap::default());
    let ctx = IndexBuild {
        root: root_fd.as_fd(),
        reader,
        dir,
        scan_start_ns,
        out: &out,
    };
    ctx.record(Vec::new(), root, &reader.tree(&root)?)?;
    Ok(Index {
        generation,
        scan_start_ns,
        dirs: out.into_inner().unwrap().into(),
        base: None,
    })
}

/// The stat index of a btrfs snapshot of a workspace whose own index is
/// `parent`: the same entries, with device `from_dev` (the workspace's)
/// replaced by `to_dev` (the snapshot's), no record claiming exact names,
/// for the store of `generation`; every tree hash is kept when
/// `trees_known` (the snapshot's store is a snapshot of the workspace's
/// store, so it holds every tree the index names), else unknown.
///
/// Why it is correct: a snapshot shares its inodes with the workspace as
/// they were at that instant, so each keeps its number, mode, size, mtime
/// and ctime; an entry therefore matches a file of the snapshot exactly
/// when it would have matched the workspace's file at the moment of the
/// snapshot, which is the trust a scan of the workspace puts in the same
/// entry (a file changed since the parent's last scan has a new ctime and
/// is hashed; racy entries stay racy). Entries on any other device (a
/// nested subvolume, which a snapshot leaves empty) never match. A
/// record's exact-names claim would stay true as well (a snapshot keeps
/// each directory's ctime, which any change to its names moves): the
/// device-mapped index of a store snapshot keeps them
/// (`crate::engine::fork`); this whole rewrite drops them. Unless
/// `trees_known`, the parent's tree hashes name trees the fork's store may
/// not hold, so they are dropped: the scan recomputes each directory's
/// tree from its entries (no file is read for that).
pub fn snapshot_index(
    parent: &Index,
    from_dev: u64,
    to_dev: u64,
    generation: u64,
    trees_known: bool,
) -> Index {
    let dirs = parent
        .dirs
        .iter()
        .map(|(path, rec)| {
            let entries: Vec<IndexEntry> = rec
                .entries
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    if e.meta.dev == from_dev {
                        e.meta.dev = to_dev;
                    }
                    e
                })
                .collect();
            (
                path.clone(),
                Arc::new(DirRecord {
                    tree: if trees_known { rec.tree } else { UNKNOWN_TREE },
                    entries: entries.into(),
                    exact_names: false,
                }),
            )
        })
        .collect();
    Index {
        generation,
        scan_start_ns: parent.scan_start_ns,
        dirs,
        base: None,
    }
}

/// The stats of what a write made, taken by the writer from each new
/// file's and directory's own descriptor once it is complete (after its
/// mtime is set): per directory written, its tree, whether every entry
/// was recorded, and the entries (see
/// [`written_index`] for why they make a sound
/// index). Directories nested deeper than
/// [`HOLD_DEPTH`](crate::engine::materialize::HOLD_DEPTH) are not recorded
/// (the next scan lists them).
#[derive(Debug, Default)]
pub struct Stats(Mutex<Vec<Recorded>>);

/// One directory in [`Stats`]: path, tree, complete, entries by name.
pub type Recorded = (Vec<u8>, Hash, bool, Vec<IndexEntry>);

impl Stats {
    /// Records directory `rel` (tree `hash`): `complete` when every entry
    /// of the tree was written, and the entries whose stat matched it.
    pub(crate) fn record(
        &self,
        rel: &[u8],
        hash: Hash,
        complete: bool,
        entries: impl Iterator<Item = Option<IndexEntry>>,
    ) {
        let mut all = complete;
        let mut got: Vec<IndexEntry> = entries
            .filter_map(|e| {
                all &= e.is_some();
                e
            })
            .collect();
        got.sort_unstable_by(|a, b| a.entry.name.cmp(&b.entry.name));
        self.0.lock().unwrap().push((rel.to_vec(), hash, all, got));
    }

    /// What was recorded (taken out: the records are empty after).
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// The index entry of the tree entry `e` just written, whose file now has
/// stat `meta`: None unless its type, permission bits, mtime and size are
/// the entry's (see [`inherited_index`]). Not racy: [`with_racy`] decides
/// that once the time the index stands for is known.
pub fn written_entry(e: &Entry, meta: Meta) -> Option<IndexEntry> {
    use rustix::fs::FileType as T;
    let same = meta.mtime_ns == e.mtime_ns
        && match &e.node {
            Node::File { size, .. } => {
                meta.file_type() == T::RegularFile && meta.size == *size && meta.perm() == e.mode
            }
            Node::Dir { .. } => meta.file_type() == T::Directory && meta.perm() == e.mode,
            Node::Symlink { .. } => meta.file_type() == T::Symlink,
        };
    same.then(|| IndexEntry {
        entry: e.clone(),
        meta,
        racy: false,
    })
}

/// `x` marked racy by a scan's rule (a file or symlink modified within
/// [`RACY_WINDOW_NS`] of `scan_start_ns`).
fn with_racy(mut x: IndexEntry, scan_start_ns: i64) -> IndexEntry {
    x.racy = !matches!(x.entry.node, Node::Dir { .. })
        && x.meta.mtime_ns >= scan_start_ns - RACY_WINDOW_NS;
    x
}

/// The stat index of a checkpoint tree just written by
/// [`crate::engine::materialize::write_tree`] with [`Stats`] on, for the
/// store of `generation`: what [`inherited_index`] would build, without
/// a second pass of `lstat`s. Each stat was taken by the writer through
/// the new file's or directory's own descriptor after its last change (a
/// directory's once its whole subtree and its mtime were written), so it
/// is the stat the same `lstat` would see now; the same entry rule and
/// racy rule apply, with the time the index stands for taken now, after
/// every write (as [`inherited_index`] takes it before its pass). A
/// directory whose entries were not all recorded keeps no tree hash, one
/// that was not recorded at all (nested deeper than the writer records)
/// has no record: the next scan lists and hashes those, as after any scan
/// that could not vouch for them.
pub fn written_index(stats: &Stats, generation: u64) -> Index {
    let _t = crate::trace::span("written index");
    let scan_start_ns = fs::now_ns();
    let dirs: DirMap = stats
        .take()
        .into_iter()
        .map(|(rel, tree, complete, entries)| {
            let entries: Vec<IndexEntry> = entries
                .into_iter()
                .map(|x| with_racy(x, scan_start_ns))
                .collect();
            let rec = DirRecord {
                tree: if complete { tree } else { UNKNOWN_TREE },
                entries: entries.into(),
                exact_names: false,
            };
            (rel, Arc::new(rec))
        })
        .collect();
    Index {
        generation,
        scan_start_ns,
        dirs: dirs.into(),
        base: None,
    }
}

struct IndexBuild<'a> {
    root: BorrowedFd<'a>,
    reader: &'a CatalogReader<'a>,
    dir: &'a Path,
    scan_start_ns: i64,
    out: &'a Mutex<DirMap>,
}

impl IndexBuild<'_> {
    /// Records directory `rel` (tree `hash`) and, in parallel, its
    /// subdirectories. Each directory is opened from the root (so no chain
    /// of descriptors is held however deep the tree).
    fn record(&self, rel: Vec<u8>, hash: Hash, tree: &Tree) -> Result<()> {
        let shown = |name: &[u8]| fs::display_path(self.dir, &join(&rel, name));
        let fd = if rel.is_empty() {
            None
        } else {
            Some(fs::open_dir_beneath(self.root, &rel).ctx("open directory", shown(b""))?)
        };
        let fd = fd.as_ref().map_or(self.root, |f| f.as_fd());
        let entries: Vec<Option<IndexEntry>> = tree
            .entries
            .par_iter()
            .with_min_len(16)
            .map(|e| -> Result<Option<IndexEntry>> {
                let meta = match fs::stat_at(fd, &e.name) {
                    Ok(m) => m,
                    Err(err) => return Err(crate::Error::io("stat", shown(&e.name), err.into())),
                };
                Ok(written_entry(e, meta).map(|x| with_racy(x, self.scan_start_ns)))
            })
            .collect::<Result<_>>()?;
        let complete = entries.iter().all(Option::is_some);
        let entries: Vec<IndexEntry> = entries.into_iter().flatten().collect();
        tree.entries.par_iter().try_for_each(|e| -> Result<()> {
            let Node::Dir { tree: sub } = &e.node else {
                return Ok(());
            };
            self.record(join(&rel, &e.name), *sub, &self.reader.tree(sub)?)
        })?;
        self.out.lock().unwrap().insert(
            rel,
            Arc::new(DirRecord {
                tree: if complete { hash } else { UNKNOWN_TREE },
                entries: entries.into(),
                exact_names: false,
            }),
        );
        Ok(())
    }
}
