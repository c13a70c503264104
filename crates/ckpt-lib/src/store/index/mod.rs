//! The stat index: a cache mapping every captured path to the stat it had
//! when its content was last hashed, like git's index.
//!
//! A scan re-reads only entries whose [`Meta`] differs from the index (or
//! that are marked racy), and reuses a directory's tree hash when none of its
//! entries changed. The index is organised by directory: one [`DirRecord`]
//! per directory, holding the directory's tree hash and its entries sorted by
//! name.
//!
//! ## Invariants
//! - Every content hash and tree hash in the index names an object or tree
//!   that exists in the store. Saves and restores only record hashes they
//!   stored or read from the store, and a save whose checkpoint is durable
//!   only once the catalog closes renames its index into place after that
//!   ([`Index::save_when`]). `gc` is the only operation that deletes
//!   objects; it bumps the store's *generation*, and an index whose
//!   generation differs from the catalog's is discarded (see `gc`).
//! - The index is only a cache. Each of its files is replaced atomically
//!   (temp file + rename) and checked by a BLAKE3 trailer; a missing, torn
//!   or stale index costs a full re-hash, never a wrong checkpoint. It is
//!   therefore not fsynced (except by gc, see [`Index::save_durable`]).
//!
//! ## Base file and delta
//! The index is the base file `index` plus, optionally, `index.delta`: the
//! records that differ from the base and the directories gone from it. A
//! save after a small change writes only the delta (a few KB instead of the
//! whole file); once the delta would exceed a quarter of the base, the save
//! writes a whole new base and removes the delta. The delta names the base
//! it applies to by the base's BLAKE3 trailer, so a delta is never applied
//! to any other base: a crash between writing a new base and removing the
//! old delta, or a lost write, leaves either the new state or an older,
//! consistent one (see `docs/FORMAT.md`). A delta is written only while the
//! index path still names the very file (inode, held open) the in-memory
//! index was loaded from or last wrote as a whole base.
//!
//! ## Work that follows the change
//! [`Dirs`] keeps, as records change, which paths changed since the base
//! (and whether the base holds each) and which records have an unknown
//! tree. The delta is built from the changed paths alone and a partial scan
//! lists the unknown ones without looking at the other records, so a
//! watch-mode save, whose index stays in memory, costs what changed, not
//! the size of the index. The sets are exact because every change to the
//! records goes through [`Dirs`]; where they are not known (records made
//! without a base to compare with) the next write is a whole base.
//!
//! ## Device map
//! A btrfs snapshot of the workspace (a fork, docs/FORK.md) keeps every
//! inode's number and times, but its files are on another device. Its
//! index is the workspace's with that one number changed, so instead of a
//! whole new file the fork writes a delta against the (snapshotted) base
//! that says "device `from` reads as `to`" ([`Index::remap_dev`]). Base
//! records are then read through the map; their bytes are reused in every
//! later delta against the same base (each repeats the map), but never
//! copied into a new whole file: that re-encodes them with the devices
//! they read as. A second snapshot composes the maps (`a → b`, then
//! `b → c` is `a → c`).
//!
//! ## Loading without parsing
//! Loading checks the trailer and each record's header (path, tree hash,
//! flags, bases, entry count), but keeps each directory's entries as bytes
//! of the file ([`Entries`]); a scan compares an unchanged directory's
//! fresh `lstat`s against those bytes through [`Entries::views`], and only
//! directories that changed are decoded into [`IndexEntry`]s. Writing a
//! whole base copies unchanged records' bytes.
//!
//! Entries are checked as they are read, once, by whoever reads them
//! first (a scan reads each once anyway): an entry that does not decode, or
//! whose name is not after the one before it, ends its record there, and
//! [`Entries::len`] counts the entries that read. A damaged record thus
//! looks like a directory that changed, which costs a re-read of it, never
//! a wrong tree. (A file whose trailer matches was written whole by ckpt,
//! so only a writer's bug could damage one; checking every entry at load
//! cost a third of loading an index of 400k entries.)
//!
//! ## The racy-mtime rule
//! A file modified within the same timestamp tick in which it was hashed
//! could change again without its mtime changing. Entries whose mtime is
//! within [`RACY_WINDOW_NS`] of the scan start are marked racy and re-hashed
//! on the next scan, whatever their stat says.
//!
//! ## Exact names: listing a directory only when it changed
//! A record with [`DirRecord::exact_names`] holds every name its directory
//! had when it was last listed (nothing was ignored, skipped or vanished),
//! and that directory's ctime was then older than the scan start minus
//! [`RACY_WINDOW_NS`]. Any later change to the directory's names sets its
//! ctime and mtime to the time of the change, so when a fresh `lstat` of the
//! directory equals the one recorded in its parent's entry for it, the names
//! are still these, and a scan stats them without listing the directory
//! (see `crate::workspace::scan`). The parent's entry always holds the stat taken just
//! before the directory's last listing: a scan rebuilds the parent's record
//! whenever a subdirectory's stat differs from it in any field, and clears
//! `exact_names` where it keeps a record under a newer stat.
//!
//! ## Format
//! `docs/FORMAT.md` ("The stat index") has the byte layout. In short: a
//! header, length-prefixed directory blocks (so load and save work on
//! directories in parallel) and a BLAKE3 trailer; the delta adds the base's
//! trailer and the removed paths. Version 4 stores each entry compactly
//! ([`Codec::V4`](entries::Codec::V4): varints, times relative to
//! per-record [`Bases`](entries::Bases), the `lstat` fields a tree entry
//! implies left out); version 3 ([`Codec::V3`](entries::Codec::V3),
//! fixed-width) is still read and re-encoded on the next write. Files of
//! any other version are not read (the next scan re-hashes, as for a
//! missing index).
//!
//! ## Where each part is
//! - `entries.rs`: the records ([`DirRecord`], [`Entries`],
//!   [`IndexEntry`]), the entry codec of both versions, a record's block
//!   (encoded and parsed), and the bytes loaded records read from (the
//!   mapped file). It uses no other part, so the others can all use it.
//! - `dirs.rs`: [`Dirs`], the records in memory with the sets that follow
//!   the change.
//! - `files.rs`: the base and delta files: header, trailer, parse, the
//!   [`Base`] an index was loaded from or written as, and replacing a file.
//! - this file: [`Index`] and what it does with those files: load, apply a
//!   delta, encode, save as a delta or a whole base, device maps.
//! - `tests.rs`: the unit tests.

mod dirs;
mod entries;
mod files;

#[cfg(test)]
pub(crate) use dirs::unknown_trees;
pub use dirs::{DirMap, Dirs};
pub(crate) use entries::EntryView;
pub use entries::{DevMap, DirRecord, Entries, IndexEntry, RACY_WINDOW_NS, UNKNOWN_TREE};
pub use files::{delta_path, remove, temp_path, Base};

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::IoContext;
use crate::{Error, Hash, Result};
use entries::{encode_dir, estimated_block, of_base, Buf, Bytes};
use files::{
    body_hash, parse, remove_delta, replace, trailer, DELTA_MAGIC, DELTA_VERSION, MAGIC, VERSION,
};

/// A delta is written instead of the whole file while it stays at most
/// this fraction (1/N) of the base's size; beyond, the index is compacted.
const DELTA_MAX_FRACTION: usize = 4;

/// The whole index.
#[derive(Clone, Debug, Default)]
pub struct Index {
    /// Store generation this index belongs to.
    pub generation: u64,
    /// When the scan that produced it started.
    pub scan_start_ns: i64,
    /// Directory path (relative, `""` for the root) → record.
    pub dirs: Dirs,
    /// The base file this index was loaded from or last written as, so
    /// that saving it again writes only a delta against it (and copies the
    /// bytes of unchanged records when it rewrites the whole file).
    pub base: Option<Arc<Base>>,
}

impl Index {
    /// Loads the index at `path` and applies its delta (see
    /// [`delta_path`]) when that names this very base. A missing, corrupt
    /// or stale (wrong generation) index yields an empty one: the next scan
    /// re-hashes. A missing, corrupt or mismatched delta is ignored: the
    /// base alone is an older but consistent index.
    pub fn load(path: &Path, generation: u64) -> Index {
        let t = crate::trace::span("index read");
        let Ok(f) = File::open(path) else {
            return Index::default();
        };
        let Ok(bytes) = Bytes::map(&f) else {
            return Index::default();
        };
        drop(t);
        let mut ix = match Self::decode_buf(Arc::new(bytes)) {
            Ok(ix) if ix.generation == generation => ix,
            _ => return Index::default(),
        };
        if let Some(b) = ix.base.as_mut().and_then(Arc::get_mut) {
            b.file = Some(f);
        }
        let _t = crate::trace::span("index delta");
        if let Ok(d) = std::fs::read(delta_path(path)) {
            let _ = ix.apply_delta(d);
        }
        ix
    }

    /// Parses an index file's bytes, checking its trailer hash and every
    /// record's header; entries are checked as they are read (see "Loading
    /// without parsing"). Public so fuzz targets and property tests reach
    /// it.
    pub fn decode(bytes: &[u8]) -> Result<Index> {
        Self::decode_buf(Arc::new(Bytes::Owned(bytes.to_vec())))
    }

    fn decode_buf(buf: Buf) -> Result<Index> {
        let p = parse::<DirMap>(&buf, false)?;
        Ok(Index {
            generation: p.generation,
            scan_start_ns: p.scan_start_ns,
            dirs: Dirs::of_base(p.records),
            base: Some(Arc::new(Base {
                len: buf.len(),
                id: trailer(&buf),
                generation: p.generation,
                current: p.v4,
                file: None,
                loaded: Some(buf.clone()),
                buf: Some(buf),
                dev_map: None,
            })),
        })
    }

    /// Applies a delta file's bytes to this index, which must be the base
    /// the delta names (by its BLAKE3) and of the same generation. On any
    /// error the index is left unchanged.
    pub fn apply_delta(&mut self, bytes: Vec<u8>) -> Result<()> {
        let bad = |why: &str| Error::Corrupt(format!("index delta: {why}"));
        let base_id = self.base.as_ref().ok_or_else(|| bad("no base"))?.id;
        let buf = Arc::new(Bytes::Owned(bytes));
        let p = parse::<Vec<_>>(&buf, true)?;
        if p.base_id != Some(base_id) {
            return Err(bad("made for another index"));
        }
        if p.generation != self.generation {
            return Err(bad("wrong generation"));
        }
        if let Some((from, to)) = p.dev_map {
            if !self.remap_dev(from, to) {
                return Err(bad("a device map on a base that has one"));
            }
        }
        for r in &p.removed {
            self.dirs.remove(r);
        }
        self.dirs.extend(p.records);
        self.scan_start_ns = p.scan_start_ns;
        Ok(())
    }

    /// This index as if loaded from `path` instead of its base file: a copy
    /// whose base is the file at `path`, so that saving it writes a delta
    /// beside `path`. `path` must hold the base's very bytes, as a btrfs
    /// snapshot of the base file does ([`Index::snapshot_base`]). None
    /// when it does not, or when this index's base is not a file it was
    /// loaded from.
    ///
    /// A fork reads the origin's index while it snapshots the origin's
    /// store and takes the copy at the fork's store's `index`.
    pub fn at_snapshot(&self, path: &Path) -> Option<Index> {
        let b = self.base.as_ref()?;
        let (buf, f) = (b.buf.clone()?, self.snapshot_base(path)?);
        Some(Index {
            base: Some(Arc::new(Base {
                buf: Some(buf),
                len: b.len,
                id: b.id,
                generation: b.generation,
                current: b.current,
                file: Some(f),
                dev_map: b.dev_map,
                loaded: b.loaded.clone(),
            })),
            ..self.clone()
        })
    }

    /// The file at `path`, opened, when it holds this index's base file's
    /// very bytes, as a btrfs snapshot of it does: checked by its inode
    /// number (a snapshot keeps it), its length and its trailer (BLAKE3 of
    /// all the bytes before it). None when it does not, or when the base
    /// is not a file this index was loaded from.
    pub fn snapshot_base(&self, path: &Path) -> Option<File> {
        use std::os::unix::fs::FileExt;
        let b = self.base.as_ref()?;
        let held = b.file.as_ref().filter(|_| b.buf.is_some())?;
        let f = File::open(path).ok()?;
        let (m, h) = (f.metadata().ok()?, held.metadata().ok()?);
        let mut t = [0u8; 32];
        if m.ino() != h.ino() || m.len() != b.len as u64 || b.len < 32 {
            return None;
        }
        f.read_exact_at(&mut t, (b.len - 32) as u64).ok()?;
        (Hash(t) == b.id).then_some(f)
    }

    /// Writes beside `path`, a btrfs snapshot of this index's base file
    /// ([`Index::snapshot_base`]) on device `to`, the delta that taking
    /// this index there, moving it from device `from` and saving it would
    /// write ([`Index::at_snapshot`], [`Index::remap_dev`], [`Index::save`]),
    /// without copying or changing this index: `fork --count` writes one
    /// into every copy's store, all from its template's index. Costs a
    /// look at every record (no allocation) and the encoding of those
    /// changed since the base, not a copy of the index. Returns false,
    /// having written nothing, when that way would not write a delta there
    /// ([`Index::snapshot_delta`]) or `path` is not the base: the caller
    /// then takes it.
    pub fn save_snapshot_delta(&self, path: &Path, from: u64, to: u64) -> Result<bool> {
        let Some(delta) = self
            .snapshot_base(path)
            .and_then(|_| self.snapshot_delta(from, to))
        else {
            return Ok(false);
        };
        let _t = crate::trace::span("index write delta");
        replace(&delta_path(path), &delta, false, &|| Ok(()))?;
        Ok(true)
    }

    /// The bytes of [`Index::save_snapshot_delta`]'s delta. None when the
    /// base is not a loaded file of this generation and version, its map
    /// does not end at `from`, what changed since it is not known, a
    /// record is neither the base's bytes nor among the changes (moving it
    /// would make it one), or the delta would be too large.
    fn snapshot_delta(&self, from: u64, to: u64) -> Option<Vec<u8>> {
        let b = self.base.as_ref()?;
        let buf = b.buf.as_ref()?;
        let map = match b.dev_map {
            None => (from, to),
            Some((first, last)) if last == from => (first, to),
            Some(_) => return None,
        };
        let since = self.dirs.changed.as_ref()?;
        if self
            .dirs
            .iter()
            .any(|(p, rec)| !of_base(rec, Some(buf)) && !since.contains_key(p))
        {
            return None;
        }
        self.delta_with(b, Some(map), |rec| {
            Cow::Owned(rec.remapped(of_base(rec, Some(buf)), Some(map), (from, to)))
        })
    }

    /// Makes this index describe a btrfs snapshot of the tree it was made
    /// for (see "Device map" in the module doc): every entry on device
    /// `from` is on device `to`. Records of the base file stay its bytes,
    /// read through the base's device map (composed with the map it
    /// already has), so that saving this index writes only a delta, which
    /// carries the map; other records are re-encoded. Returns false, with
    /// nothing changed, when the base is shared or its map does not end at
    /// `from`.
    pub fn remap_dev(&mut self, from: u64, to: u64) -> bool {
        // A base this process wrote holds no record's bytes: rewrite whole.
        if self.base.as_ref().is_some_and(|b| b.buf.is_none()) {
            self.base = None;
        }
        let mut map = None;
        if let Some(base) = self.base.as_mut() {
            let Some(b) = Arc::get_mut(base) else {
                return false;
            };
            map = match b.dev_map {
                None => Some((from, to)),
                Some((first, last)) if last == from => Some((first, to)),
                Some(_) => return false,
            };
            b.dev_map = map;
        }
        let base_buf = self.base.as_ref().and_then(|b| b.buf.clone());
        let mut moved = Vec::new();
        for (p, rec) in self.dirs.map.iter_mut() {
            if of_base(rec, base_buf.as_ref()) {
                // Still the base's bytes, read through its map: not a
                // change since the base (the next delta carries the map).
                *rec = Arc::new(rec.remapped(true, map, (from, to)));
            } else {
                moved.push(p.clone());
            }
        }
        for p in moved {
            let rec = self.dirs[&p].remapped(false, map, (from, to));
            self.dirs.insert(p, Arc::new(rec));
        }
        true
    }

    /// Serialises the whole index (directory blocks encoded in parallel;
    /// loaded records are copied as bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut head = Vec::with_capacity(24);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&self.generation.to_le_bytes());
        head.extend_from_slice(&self.scan_start_ns.to_le_bytes());
        let mut paths: Vec<&Vec<u8>> = self.dirs.keys().collect();
        paths.sort_unstable();
        self.finish(head, &paths)
    }

    /// `head`, then `u32:ndirs (u32:block_len dir)*` for `paths` (their
    /// records in this index), then the trailer.
    fn finish(&self, head: Vec<u8>, paths: &[&Vec<u8>]) -> Vec<u8> {
        let recs: Vec<(&[u8], &DirRecord)> = paths
            .iter()
            .map(|p| (p.as_slice(), &*self.dirs[*p]))
            .collect();
        Index::finish_with(head, &recs)
    }

    /// `head`, then `u32:ndirs (u32:block_len dir)*` for `recs` (path,
    /// record), then the trailer.
    fn finish_with<'a>(head: Vec<u8>, recs: &[(&[u8], &'a DirRecord)]) -> Vec<u8> {
        fn encode<'a>(p: &[u8], rec: &'a DirRecord) -> Cow<'a, [u8]> {
            match rec.stored_block(p, None) {
                Some(b) => Cow::Borrowed(b),
                None => Cow::Owned(encode_dir(p, rec)),
            }
        }
        let encode = |&(p, rec): &(&[u8], &'a DirRecord)| encode(p, rec);
        let blocks: Vec<Cow<'_, [u8]>> = if recs.len() > 64 {
            recs.par_iter().map(encode).collect()
        } else {
            recs.iter().map(encode).collect()
        };
        let total: usize = blocks.iter().map(|b| b.len() + 4).sum();
        let mut out = head;
        out.reserve(total + 36);
        out.extend_from_slice(&(recs.len() as u32).to_le_bytes());
        for b in &blocks {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        }
        drop(blocks);
        let trailer = body_hash(&out);
        out.extend_from_slice(&trailer.0);
        out
    }

    /// The delta of this index against `base`: every record changed since
    /// `base` (see [`Dirs`]) that is not `base`'s own block for its path,
    /// and every path of `base` that is gone. `None` when it would be
    /// larger than the base allows, or what changed is not known. Costs
    /// what changed since `base`, not the whole index.
    pub fn encode_delta(&self, base: &Base) -> Option<Vec<u8>> {
        self.delta_with(base, base.dev_map, Cow::Borrowed)
    }

    /// [`Index::encode_delta`] against `base` with device map `dev_map`,
    /// each record changed since it read through `view` (the record as it
    /// is, or as on a snapshot: [`Index::snapshot_delta`]).
    fn delta_with<'a>(
        &'a self,
        base: &Base,
        dev_map: Option<DevMap>,
        view: impl Fn(&'a DirRecord) -> Cow<'a, DirRecord>,
    ) -> Option<Vec<u8>> {
        if base.generation != self.generation || !base.current {
            return None;
        }
        let since = self.dirs.changed.as_ref()?;
        let mut changed: Vec<(&[u8], Cow<'a, DirRecord>)> = Vec::new();
        let mut removed: Vec<&[u8]> = Vec::new();
        let mut size = 0usize;
        let limit = base.len / DELTA_MAX_FRACTION;
        for (p, &in_base) in since {
            match self.dirs.get(p) {
                Some(rec) => {
                    let rec = view(rec);
                    if base
                        .buf
                        .as_ref()
                        .is_some_and(|b| rec.stored_block(p, Some(b)).is_some())
                    {
                        continue;
                    }
                    // The encoded size is checked below.
                    size += estimated_block(p, &rec);
                    if size > limit {
                        return None;
                    }
                    changed.push((p, rec));
                }
                None if in_base => removed.push(p),
                None => {}
            }
        }
        changed.sort_unstable_by(|x, y| x.0.cmp(y.0));
        removed.sort_unstable();
        let recs: Vec<(&[u8], &DirRecord)> = changed.iter().map(|(p, r)| (*p, &**r)).collect();
        let out = Index::finish_with(self.delta_head(base.id, dev_map, &removed), &recs);
        (out.len() <= limit.max(1)).then_some(out)
    }

    /// A delta's header against a base, up to its records: magic, version,
    /// generation, scan start, the base's id and device map, the `removed`
    /// paths (sorted).
    fn delta_head(&self, id: Hash, dev_map: Option<DevMap>, removed: &[&[u8]]) -> Vec<u8> {
        let mut head = Vec::with_capacity(80 + removed.iter().map(|p| p.len() + 4).sum::<usize>());
        head.extend_from_slice(DELTA_MAGIC);
        head.extend_from_slice(&DELTA_VERSION.to_le_bytes());
        head.extend_from_slice(&self.generation.to_le_bytes());
        head.extend_from_slice(&self.scan_start_ns.to_le_bytes());
        head.extend_from_slice(&id.0);
        match dev_map {
            None => head.push(0),
            Some((from, to)) => {
                head.push(1);
                head.extend_from_slice(&from.to_le_bytes());
                head.extend_from_slice(&to.to_le_bytes());
            }
        }
        head.extend_from_slice(&(removed.len() as u32).to_le_bytes());
        for p in removed {
            head.extend_from_slice(&(p.len() as u32).to_le_bytes());
            head.extend_from_slice(p);
        }
        head
    }

    /// Records this index at `path` (a cache, see the module doc): as a
    /// delta against its base when `path` still names that file and the
    /// delta is small, else as a whole new file (which drops any delta) that
    /// becomes its base, so that the next save can again write a delta.
    /// Each file is replaced atomically (temp + rename, no fsync).
    pub fn save(&mut self, path: &Path) -> Result<()> {
        self.save_when(path, &|| Ok(()))
    }

    /// [`Index::save`], its file renamed into place only once `ready`
    /// returns: a save whose checkpoint becomes durable after its commit
    /// waits there for it, so that the index never names trees a crash
    /// could still take from the catalog (see the invariants). When
    /// `ready` fails, nothing is replaced and that is the error.
    pub fn save_when(&mut self, path: &Path, ready: &dyn Fn() -> Result<()>) -> Result<()> {
        let t = crate::trace::span("index encode");
        let delta = self
            .base
            .as_ref()
            .filter(|b| b.is_current(path))
            .and_then(|b| self.encode_delta(b));
        if let Some(d) = delta {
            drop(t);
            let _t = crate::trace::span("index write delta");
            replace(&delta_path(path), &d, false, ready)?;
            return Ok(());
        }
        let bytes = self.encode();
        drop(t);
        let _t = crate::trace::span("index write");
        let file = replace(path, &bytes, false, ready)?;
        remove_delta(path)?;
        let loaded = self.base.as_ref().and_then(|b| b.loaded.clone());
        self.base = Some(Arc::new(Base {
            buf: None,
            len: bytes.len(),
            id: trailer(&bytes),
            generation: self.generation,
            current: true,
            file: Some(file),
            dev_map: None,
            loaded,
        }));
        self.dirs.changed = Some(HashMap::default());
        Ok(())
    }

    /// Hands the pages of the loaded index file back to the page cache
    /// (see [`Bytes`]): a long-lived holder of the index (the watcher)
    /// then keeps resident only the records it decoded, not the file.
    /// The next read of a record maps its page again.
    pub fn release_pages(&self) {
        if let Some(b) = self.base.as_ref().and_then(|b| b.loaded.as_ref()) {
            b.release();
        }
    }

    /// Replaces the index file durably (temp + fsync + rename, the delta
    /// removed, then fsync of the directory), for gc, which must not let an
    /// old index survive a crash.
    pub fn save_durable(&self, path: &Path) -> Result<()> {
        replace(path, &self.encode(), true, &|| Ok(()))?;
        remove_delta(path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        File::open(dir).and_then(|d| d.sync_all()).ctx("fsync", dir)
    }
}

/// The delta as it was made before [`Dirs`] tracked what changed: by a walk
/// over every record and every path of the base (the reference the tracked
/// [`Index::encode_delta`] is tested against). `None` when the base's bytes
/// are not held (a base this process wrote).
#[cfg(test)]
impl Index {
    pub(crate) fn encode_delta_by_walk(&self, base: &Base) -> Option<Option<Vec<u8>>> {
        let buf = base.buf.as_ref()?;
        Some(self.walk_delta(base, buf))
    }

    fn walk_delta(&self, base: &Base, buf: &Buf) -> Option<Vec<u8>> {
        if base.generation != self.generation || !base.current {
            return None;
        }
        let mut changed: Vec<&Vec<u8>> = Vec::new();
        let mut size = 0usize;
        let limit = base.len / DELTA_MAX_FRACTION;
        for (p, rec) in self.dirs.iter() {
            if rec.stored_block(p, Some(buf)).is_none() {
                changed.push(p);
                size += estimated_block(p, rec);
                if size > limit {
                    return None;
                }
            }
        }
        let base_paths: Vec<Vec<u8>> = parse::<Vec<_>>(buf, false)
            .ok()?
            .records
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let mut removed: Vec<&[u8]> = base_paths
            .iter()
            .filter(|p| !self.dirs.contains_key(*p))
            .map(|p| p.as_slice())
            .collect();
        changed.sort_unstable();
        removed.sort_unstable();
        let out = self.finish(self.delta_head(base.id, base.dev_map, &removed), &changed);
        (out.len() <= limit.max(1)).then_some(out)
    }
}

#[cfg(test)]
mod tests;
