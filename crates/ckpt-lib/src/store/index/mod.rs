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
//! ([`Codec::V4`]: varints, times relative to per-record [`Bases`], the
//! `lstat` fields a tree entry implies left out); version 3
//! ([`Codec::V3`], fixed-width) is still read and re-encoded on the next
//! write. Files of any other version are not read (the next scan
//! re-hashes, as for a missing index).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use crate::error::IoContext;
use crate::store::tree::{
    put_varint, unzigzag, valid_name, zigzag, Entry, EntryRef, NodeRef, Reader,
};
use crate::{Error, Hash, Result};
use ckpt_copy::fs::{is_within, join, Meta};

/// The tree hash of a record whose tree must be rebuilt by the next scan
/// (set by restore and gc; never the hash of a real tree).
pub const UNKNOWN_TREE: Hash = Hash([0; 32]);

/// Entries modified this close to the scan start are re-hashed next time.
pub const RACY_WINDOW_NS: i64 = 50_000_000;

const MAGIC: &[u8; 4] = b"CKIX";
/// The version written: compact entries ([`Codec::V4`]).
const VERSION: u32 = 4;
/// The previous version (fixed-width entries, [`Codec::V3`]), still read;
/// its records are re-encoded when the index is next written.
const OLD_VERSION: u32 = 3;
const DELTA_MAGIC: &[u8; 4] = b"CKID";
/// Delta versions: 4 holds version-4 blocks and the base's device map, 3
/// version-4 blocks, 2 version-3 blocks (3 and 2 are still read).
const DELTA_VERSION: u32 = 4;
const DELTA_VERSION_NO_MAP: u32 = 3;
const OLD_DELTA_VERSION: u32 = 2;

/// A base's device map `(from, to)`: its entries on device `from` are on
/// device `to` (the index of a btrfs snapshot of the tree it describes,
/// see "Device map" in the module doc).
pub type DevMap = (u64, u64);

/// `dev` through `map`.
fn remap(map: Option<DevMap>, dev: u64) -> u64 {
    match map {
        Some((from, to)) if dev == from => to,
        _ => dev,
    }
}

/// Whether `rec` is still the bytes of the base file `buf` (in the current
/// encoding): [`Index::remap_dev`] then only changes the map it is read
/// through, and a delta against that base need not repeat it.
fn of_base(rec: &DirRecord, buf: Option<&Buf>) -> bool {
    rec.entries
        .raw
        .as_ref()
        .is_some_and(|r| r.v4 && buf.is_some_and(|b| Arc::ptr_eq(b, &r.buf)))
}

/// A delta is written instead of the whole file while it stays at most
/// this fraction (1/N) of the base's size; beyond, the index is compacted.
const DELTA_MAX_FRACTION: usize = 4;

/// One cached entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The tree entry as last captured.
    pub entry: Entry,
    /// The stat it had.
    pub meta: Meta,
    /// Must be re-hashed on the next scan regardless of its stat.
    pub racy: bool,
}

/// An index entry borrowed from the index file's bytes (or from a decoded
/// [`IndexEntry`]): what a scan compares a fresh `lstat` against without
/// allocating.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryView<'a> {
    pub(crate) entry: EntryRef<'a>,
    pub(crate) meta: Meta,
    pub(crate) racy: bool,
}

impl<'a> EntryView<'a> {
    fn of(e: &'a IndexEntry) -> Self {
        EntryView {
            entry: e.entry.borrowed(),
            meta: e.meta,
            racy: e.racy,
        }
    }

    /// Parses a version-3 `entry meta` (fixed-width meta after the
    /// tree-entry encoding).
    fn decode_v3(r: &mut Reader<'a>) -> Result<Self> {
        let entry = EntryRef::decode_from(r)?;
        let meta = Meta {
            dev: r.u64()?,
            ino: r.u64()?,
            mode: r.u32()?,
            size: r.u64()?,
            mtime_ns: entry.mtime_ns,
            ctime_ns: r.u64()? as i64,
        };
        let racy = match r.take(1)?[0] {
            0 => false,
            1 => true,
            _ => return Err(Error::Corrupt("index entry has unknown flags".into())),
        };
        Ok(EntryView { entry, meta, racy })
    }

    fn to_entry(self) -> IndexEntry {
        IndexEntry {
            entry: self.entry.to_entry(),
            meta: self.meta,
            racy: self.racy,
        }
    }
}

/// What a version-4 record's entries are stored relative to: the device of
/// its first entry, the smallest mtime and the smallest ctime among them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bases {
    dev: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    /// The device map the entries are read through (never encoded: it is
    /// the base file's, from its delta).
    map: Option<DevMap>,
}

// Version-4 entry flags: kind in bits 0-1, then the optional fields.
const E_KIND: u8 = 0b11;
const E_RACY: u8 = 1 << 2;
const E_DEV: u8 = 1 << 3;
const E_MODE: u8 = 1 << 4;
const E_SIZE: u8 = 1 << 5;
const E_KNOWN: u8 = E_KIND | E_RACY | E_DEV | E_MODE | E_SIZE;

impl Bases {
    fn of<'a>(mut views: impl Iterator<Item = EntryView<'a>>) -> Bases {
        let Some(first) = views.next() else {
            return Bases::default();
        };
        views.fold(
            Bases {
                dev: first.meta.dev,
                mtime_ns: first.entry.mtime_ns,
                ctime_ns: first.meta.ctime_ns,
                map: None,
            },
            |b, v| Bases {
                mtime_ns: b.mtime_ns.min(v.entry.mtime_ns),
                ctime_ns: b.ctime_ns.min(v.meta.ctime_ns),
                ..b
            },
        )
    }

    fn decode(r: &mut Reader<'_>) -> Result<Bases> {
        Ok(Bases {
            dev: r.varint()?,
            mtime_ns: unzigzag(r.varint()?),
            ctime_ns: unzigzag(r.varint()?),
            map: None,
        })
    }

    /// These bases read through the device map `map`.
    fn mapped(self, map: Option<DevMap>) -> Bases {
        Bases {
            dev: remap(map, self.dev),
            map,
            ..self
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.dev);
        put_varint(out, zigzag(self.mtime_ns));
        put_varint(out, zigzag(self.ctime_ns));
    }
}

/// The `st_mode` type bits of a node kind.
fn type_bits(node: &NodeRef<'_>) -> u32 {
    match node {
        NodeRef::File { .. } => libc::S_IFREG,
        NodeRef::Dir { .. } => libc::S_IFDIR,
        NodeRef::Symlink { .. } => libc::S_IFLNK,
    }
}

/// The `st_size` a version-4 entry omits: the file's size, the link
/// target's length, 0 for a directory.
fn implied_size(node: &NodeRef<'_>) -> u64 {
    match node {
        NodeRef::File { size, .. } => *size,
        NodeRef::Dir { .. } => 0,
        NodeRef::Symlink { target } => target.len() as u64,
    }
}

/// How a record's entries are encoded: version 3 (the tree-entry encoding
/// plus fixed-width meta) or version 4 (compact, relative to [`Bases`]).
#[derive(Clone, Copy)]
pub(crate) enum Codec {
    V3,
    V4(Bases),
}

/// Fewer bytes than any entry takes in either version (version 4: flags,
/// name length, a name byte, mode, two times, inode and at least a
/// symlink's target length): a record's count is checked against it.
const MIN_ENTRY_BYTES: usize = 8;

impl Codec {
    /// Parses one entry (the one parser of an index entry of each version).
    fn decode<'a>(&self, r: &mut Reader<'a>) -> Result<EntryView<'a>> {
        match self {
            Codec::V3 => EntryView::decode_v3(r),
            Codec::V4(b) => decode_v4(r, b),
        }
    }
}

/// `u8:flags varint:name_len name varint:perm varint:(mtime - base)
/// varint:(ctime - base) varint:ino [varint:dev] payload [varint:st_mode]
/// [varint:size]` (see docs/FORMAT.md).
fn decode_v4<'a>(r: &mut Reader<'a>, b: &Bases) -> Result<EntryView<'a>> {
    let bad = |why: &str| Error::Corrupt(format!("index entry: {why}"));
    let flags = r.u8()?;
    if flags & !E_KNOWN != 0 {
        return Err(bad("unknown flags"));
    }
    let name_len = usize::try_from(r.varint()?).map_err(|_| bad("name length"))?;
    let name = r.take(name_len)?;
    let perm = r.varint()?;
    if !valid_name(name) || perm & !0o7777 != 0 {
        return Err(bad("invalid name or mode"));
    }
    let mtime_ns = b.mtime_ns.wrapping_add(r.varint()? as i64);
    let ctime_ns = b.ctime_ns.wrapping_add(r.varint()? as i64);
    let ino = r.varint()?;
    let dev = if flags & E_DEV != 0 {
        remap(b.map, r.varint()?)
    } else {
        b.dev
    };
    let node = match flags & E_KIND {
        1 => NodeRef::File {
            size: r.varint()?,
            hash: r.hash()?,
        },
        2 => NodeRef::Dir { tree: r.hash()? },
        3 => {
            let n = usize::try_from(r.varint()?).map_err(|_| bad("target length"))?;
            NodeRef::Symlink { target: r.take(n)? }
        }
        _ => return Err(bad("unknown kind")),
    };
    let mode = match flags & E_MODE {
        0 => type_bits(&node) | perm as u32,
        _ => u32::try_from(r.varint()?).map_err(|_| bad("st_mode"))?,
    };
    let size = match flags & E_SIZE {
        0 => implied_size(&node),
        _ => r.varint()?,
    };
    Ok(EntryView {
        entry: EntryRef {
            name,
            mode: perm as u32,
            mtime_ns,
            node,
        },
        meta: Meta {
            dev,
            ino,
            mode,
            size,
            mtime_ns,
            ctime_ns,
        },
        racy: flags & E_RACY != 0,
    })
}

/// Appends `v` in the version-4 encoding [`decode_v4`] reads. The meta's
/// mtime is the entry's (as in every version: the index keeps one mtime).
fn encode_v4(v: &EntryView<'_>, b: &Bases, out: &mut Vec<u8>) {
    let e = &v.entry;
    let m = &v.meta;
    let mut flags: u8 = match e.node {
        NodeRef::File { .. } => 1,
        NodeRef::Dir { .. } => 2,
        NodeRef::Symlink { .. } => 3,
    };
    let explicit_mode = m.mode != type_bits(&e.node) | e.mode;
    let explicit_size = m.size != implied_size(&e.node);
    flags |= (v.racy as u8 * E_RACY)
        | ((m.dev != b.dev) as u8 * E_DEV)
        | (explicit_mode as u8 * E_MODE)
        | (explicit_size as u8 * E_SIZE);
    out.push(flags);
    put_varint(out, e.name.len() as u64);
    out.extend_from_slice(e.name);
    put_varint(out, u64::from(e.mode));
    put_varint(out, e.mtime_ns.wrapping_sub(b.mtime_ns) as u64);
    put_varint(out, m.ctime_ns.wrapping_sub(b.ctime_ns) as u64);
    put_varint(out, m.ino);
    if m.dev != b.dev {
        put_varint(out, m.dev);
    }
    match e.node {
        NodeRef::File { size, hash } => {
            put_varint(out, size);
            out.extend_from_slice(&hash.0);
        }
        NodeRef::Dir { tree } => out.extend_from_slice(&tree.0),
        NodeRef::Symlink { target } => {
            put_varint(out, target.len() as u64);
            out.extend_from_slice(target);
        }
    }
    if explicit_mode {
        put_varint(out, u64::from(m.mode));
    }
    if explicit_size {
        put_varint(out, m.size);
    }
}

/// Where a loaded record's entries lie in the file it was loaded from (its
/// header checked when loaded; its entries are checked as they are read,
/// [`Checked`]).
#[derive(Clone)]
struct RawEntries {
    /// The whole file.
    buf: Buf,
    /// The `dir` block (from `u32:path_len` to its last entry).
    block: Range<usize>,
    /// Offset within `buf` of what follows the block's flags byte
    /// (version 4: the [`Bases`], then `u32:n`; version 3: `u32:n`).
    at: usize,
    /// Number of entries.
    n: u32,
    /// The block is in the version-4 encoding.
    v4: bool,
    /// The device map its entries are read through (a base record's, see
    /// "Device map"): its bytes are then reused only in a delta against
    /// the same base, never in a new whole file.
    dev_map: Option<DevMap>,
}

impl RawEntries {
    /// The block's path, tree hash and flags byte.
    fn head(&self) -> (&[u8], &[u8], u8) {
        let b = &self.buf[self.block.clone()];
        let len = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        (&b[4..4 + len], &b[4 + len..4 + len + 32], b[4 + len + 32])
    }

    /// Everything after the flags byte (`[bases] u32:n (entry)*n`).
    fn bytes(&self) -> &[u8] {
        &self.buf[self.at..self.block.end]
    }

    /// The entries, each checked as it is read.
    fn checked(&self) -> Checked<'_> {
        let mut rd = Reader::new(self.bytes());
        // Checked when loaded ([`parse_dir`]): these reads cannot fail.
        let codec = match self.v4 {
            true => Codec::V4(
                Bases::decode(&mut rd)
                    .unwrap_or_default()
                    .mapped(self.dev_map),
            ),
            false => Codec::V3,
        };
        let _ = rd.u32();
        Checked {
            rd,
            left: self.n,
            codec,
            prev: None,
        }
    }
}

/// A record's entries read from its bytes, each checked: the first that
/// does not decode, or whose name is not after the one before it (names
/// are sorted and unique), ends them (see "Loading without parsing").
pub(crate) struct Checked<'a> {
    rd: Reader<'a>,
    left: u32,
    codec: Codec,
    prev: Option<&'a [u8]>,
}

impl<'a> Iterator for Checked<'a> {
    type Item = EntryView<'a>;
    fn next(&mut self) -> Option<EntryView<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match self.codec.decode(&mut self.rd) {
            Ok(v) if self.prev.is_none_or(|p| p < v.entry.name) => {
                self.prev = Some(v.entry.name);
                Some(v)
            }
            _ => {
                self.left = 0;
                None
            }
        }
    }
}

/// One directory's entries, sorted by name. Entries loaded from the index
/// file stay undecoded bytes until something asks for them as
/// [`IndexEntry`]s (through `Deref`); a scan compares unchanged directories
/// through [`Entries::views`] without decoding them.
#[derive(Default)]
pub struct Entries {
    raw: Option<RawEntries>,
    decoded: OnceLock<Vec<IndexEntry>>,
    /// How many of `raw`'s entries read ([`Checked`]), once counted.
    read: OnceLock<u32>,
}

impl Entries {
    /// Number of entries: as many as [`Entries::views`] yields. Of entries
    /// loaded from a file this reads them once (not into
    /// [`IndexEntry`]s); [`Entries::claimed`] does not read them.
    pub fn len(&self) -> usize {
        match (&self.raw, self.decoded.get()) {
            (_, Some(d)) => d.len(),
            (Some(r), None) => *self.read.get_or_init(|| r.checked().count() as u32) as usize,
            (None, None) => 0,
        }
    }

    /// The number of entries the record's header gives, without reading
    /// them: [`Entries::len`], unless the record is damaged, when fewer
    /// read. For a caller that reads them through [`Entries::views`] anyway
    /// and treats fewer views than this as a change, or that only needs an
    /// estimate (a buffer's size, a delta's).
    pub(crate) fn claimed(&self) -> usize {
        match (&self.raw, self.decoded.get()) {
            (_, Some(d)) => d.len(),
            (Some(r), None) => r.n as usize,
            (None, None) => 0,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries as borrowed views, decoding nothing.
    pub(crate) fn views(&self) -> Views<'_> {
        match (&self.raw, self.decoded.get()) {
            (Some(r), None) => Views::Raw(r.checked()),
            _ => Views::Decoded(self.iter()),
        }
    }
}

/// Iterator of [`Entries::views`].
pub(crate) enum Views<'a> {
    Raw(Checked<'a>),
    Decoded(std::slice::Iter<'a, IndexEntry>),
}

impl<'a> Iterator for Views<'a> {
    type Item = EntryView<'a>;
    fn next(&mut self) -> Option<EntryView<'a>> {
        match self {
            Views::Raw(c) => c.next(),
            Views::Decoded(it) => it.next().map(EntryView::of),
        }
    }
}

impl std::ops::Deref for Entries {
    type Target = [IndexEntry];
    fn deref(&self) -> &[IndexEntry] {
        self.decoded.get_or_init(|| match &self.raw {
            Some(r) => r.checked().map(EntryView::to_entry).collect(),
            None => Vec::new(),
        })
    }
}

impl From<Vec<IndexEntry>> for Entries {
    fn from(v: Vec<IndexEntry>) -> Self {
        Entries {
            raw: None,
            decoded: OnceLock::from(v),
            read: OnceLock::new(),
        }
    }
}

impl<'a> IntoIterator for &'a Entries {
    type Item = &'a IndexEntry;
    type IntoIter = std::slice::Iter<'a, IndexEntry>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl FromIterator<IndexEntry> for Entries {
    fn from_iter<I: IntoIterator<Item = IndexEntry>>(it: I) -> Self {
        Entries::from(it.into_iter().collect::<Vec<_>>())
    }
}

impl Clone for Entries {
    fn clone(&self) -> Self {
        match &self.raw {
            Some(r) => Entries {
                raw: Some(r.clone()),
                decoded: OnceLock::new(),
                read: OnceLock::new(),
            },
            None => Entries::from(self.to_vec()),
        }
    }
}

impl PartialEq for Entries {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.views().zip(other.views()).all(|(a, b)| a == b)
    }
}

impl Eq for Entries {}

impl PartialEq for EntryView<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.entry == o.entry && self.meta == o.meta && self.racy == o.racy
    }
}

impl std::fmt::Debug for Entries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One directory's cached listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirRecord {
    /// Hash of the directory's tree as last captured.
    pub tree: Hash,
    /// Entries sorted by name.
    pub entries: Entries,
    /// `entries` name everything the directory held when it was last
    /// listed, and its ctime was then outside the racy window: while its
    /// stat stays as recorded in its parent, it need not be listed again
    /// (see the module doc). False for records not made from a listing.
    pub exact_names: bool,
}

impl DirRecord {
    /// Finds an entry by name.
    pub fn get(&self, name: &[u8]) -> Option<&IndexEntry> {
        self.entries
            .binary_search_by(|e| e.entry.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// This record's block as stored in `buf` under `path`, when it is
    /// exactly that (same path, tree and entries).
    /// Bytes read through a device map are reused only in a delta against
    /// their own base (`buf`), which carries the map on.
    fn stored_block(&self, path: &[u8], buf: Option<&Buf>) -> Option<&[u8]> {
        let r = self.entries.raw.as_ref().filter(|r| r.v4)?;
        match buf {
            Some(b) if !Arc::ptr_eq(b, &r.buf) => return None,
            None if r.dev_map.is_some() => return None,
            _ => {}
        }
        let (p, t, flags) = r.head();
        (p == path && t == self.tree.0 && flags == block_flags(self))
            .then(|| &r.buf[r.block.clone()])
    }

    /// This record on the snapshot that [`Index::remap_dev`] moves to:
    /// with `of_base` (see [`of_base`]) the same bytes read through the
    /// base's new `map`, else its entries with device `moved.0` rewritten
    /// as `moved.1`.
    fn remapped(&self, of_base: bool, map: Option<DevMap>, moved: DevMap) -> DirRecord {
        let entries = match self.entries.raw.as_ref().filter(|_| of_base) {
            Some(r) => Entries {
                raw: Some(RawEntries {
                    dev_map: map,
                    ..r.clone()
                }),
                decoded: OnceLock::new(),
                read: OnceLock::new(),
            },
            None => self
                .entries
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    e.meta.dev = remap(Some(moved), e.meta.dev);
                    e
                })
                .collect(),
        };
        DirRecord {
            tree: self.tree,
            entries,
            exact_names: self.exact_names,
        }
    }
}

/// The directory records of an index by path (relative, `""` for the
/// root), with two sets kept up to date as records change, so that what a
/// watch-mode save does follows the change and not the tree:
/// - the paths whose record has [`UNKNOWN_TREE`] (every partial scan lists
///   them, see `crate::workspace::scan`);
/// - the paths whose record was replaced or removed since the base file
///   was loaded or written, each with whether the base holds that path:
///   the delta is made of these alone ([`Index::encode_delta`]).
///
/// Reads go to the map (`Deref`); every change goes through the methods
/// below, which keep both sets exact. A record replaced by the very same
/// `Arc` (a scan keeping it) is not a change.
#[derive(Clone, Debug, Default)]
pub struct Dirs {
    map: DirMap,
    unknown: PathSet,
    /// Path → whether the base holds it, for every path whose record
    /// changed since the base. `None`: not known (records made without a
    /// base to compare with); the next write is then a whole base.
    changed: Option<HashMap<Vec<u8>, bool, PathHasher>>,
}

/// The hasher of the maps and sets keyed by a directory's path. A scan
/// hashes every directory's path four or five times (its record, its
/// subdirectories' records, the new index), so the hash shows in
/// scan-mode saves: foldhash's, seeded anew in every process. SipHash's
/// resistance to chosen keys bought nothing here (the paths are the
/// user's own tree) and showed in a scan's CPU profile.
pub type PathHasher = foldhash::fast::RandomState;
/// Directory path → record.
pub type DirMap = HashMap<Vec<u8>, Arc<DirRecord>, PathHasher>;
/// A set of directory paths.
pub type PathSet = HashSet<Vec<u8>, PathHasher>;

impl std::ops::Deref for Dirs {
    type Target = DirMap;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl PartialEq for Dirs {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl Eq for Dirs {}

/// Records with nothing known about what changed since a base.
impl From<DirMap> for Dirs {
    fn from(map: DirMap) -> Dirs {
        Dirs {
            unknown: unknown_trees(&map),
            map,
            changed: None,
        }
    }
}

/// The paths whose record has [`UNKNOWN_TREE`], by a walk over `map` (the
/// set [`Dirs`] keeps is tested against it).
pub(crate) fn unknown_trees(map: &DirMap) -> PathSet {
    map.iter()
        .filter(|(_, r)| r.tree == UNKNOWN_TREE)
        .map(|(p, _)| p.clone())
        .collect()
}

impl<'a> IntoIterator for &'a Dirs {
    type Item = (&'a Vec<u8>, &'a Arc<DirRecord>);
    type IntoIter = std::collections::hash_map::Iter<'a, Vec<u8>, Arc<DirRecord>>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl FromIterator<(Vec<u8>, Arc<DirRecord>)> for Dirs {
    fn from_iter<I: IntoIterator<Item = (Vec<u8>, Arc<DirRecord>)>>(it: I) -> Dirs {
        Dirs::from(it.into_iter().collect::<DirMap>())
    }
}

impl Dirs {
    /// The records of a base file: nothing changed since it.
    fn of_base(map: DirMap) -> Dirs {
        Dirs {
            changed: Some(HashMap::default()),
            ..Dirs::from(map)
        }
    }

    /// `records` as a whole new set succeeding `old`: what changed since
    /// `old`'s base is carried over and completed when `track`, else left
    /// unknown. (Full scans made their index this way before they updated
    /// it in place; the tests keep it as a model of the tracking.)
    #[cfg(test)]
    pub(crate) fn succeeding(
        old: &Dirs,
        records: Vec<(Vec<u8>, Arc<DirRecord>)>,
        track: bool,
    ) -> Dirs {
        let mut new = Dirs {
            changed: old.changed.clone().filter(|_| track),
            ..Dirs::default()
        };
        new.map.reserve(records.len());
        let mut held = 0;
        for (p, rec) in records {
            match old.map.get(&p) {
                Some(o) => {
                    held += 1;
                    if !Arc::ptr_eq(o, &rec) {
                        new.note(&p, true);
                    }
                }
                None => new.note(&p, false),
            }
            if rec.tree == UNKNOWN_TREE {
                new.unknown.insert(p.clone());
            }
            new.map.insert(p, rec);
        }
        if held != old.map.len() && new.changed.is_some() {
            for p in old.map.keys() {
                if !new.map.contains_key(p) {
                    new.note(p, true);
                }
            }
        }
        new
    }

    /// Notes that `path`'s record changes; `held`: the map holds `path`
    /// before the change (so does the base, if nothing changed it since).
    fn note(&mut self, path: &[u8], held: bool) {
        if let Some(c) = &mut self.changed {
            if !c.contains_key(path) {
                c.insert(path.to_vec(), held);
            }
        }
    }

    /// Sets `path`'s record; returns the one it replaces.
    pub fn insert(&mut self, path: Vec<u8>, rec: Arc<DirRecord>) -> Option<Arc<DirRecord>> {
        let held = match self.map.get(&path) {
            Some(o) if Arc::ptr_eq(o, &rec) => return Some(rec),
            o => o.is_some(),
        };
        self.note(&path, held);
        if rec.tree == UNKNOWN_TREE {
            self.unknown.insert(path.clone());
        } else if !self.unknown.is_empty() {
            self.unknown.remove(&path);
        }
        self.map.insert(path, rec)
    }

    /// Removes `path`'s record and returns it.
    pub fn remove(&mut self, path: &[u8]) -> Option<Arc<DirRecord>> {
        let old = self.map.remove(path)?;
        self.unknown.remove(path);
        self.note(path, true);
        Some(old)
    }

    /// Removes the record of the directory `path` and of every directory
    /// below it: those the records' directory entries lead to, and any
    /// record with an unknown tree within `path` (an index written by an
    /// older restore may hold such a record that no entry leads to). Costs
    /// what the subtree holds, not the whole index.
    pub fn remove_subtree(&mut self, path: &[u8]) {
        let mut todo = vec![path.to_vec()];
        while let Some(p) = todo.pop() {
            let Some(rec) = self.remove(&p) else { continue };
            for v in rec.entries.views() {
                if matches!(v.entry.node, NodeRef::Dir { .. }) {
                    todo.push(join(&p, v.entry.name));
                }
            }
        }
        let stray: Vec<Vec<u8>> = self
            .unknown
            .iter()
            .filter(|u| is_within(u, path))
            .cloned()
            .collect();
        for p in stray {
            self.remove(&p);
        }
    }

    /// Removes every record that no directory entry leads to from the
    /// root's record (an index written by an older restore may hold one):
    /// the records a full scan of the tree would make are then the only
    /// ones. Costs a walk over every record.
    pub fn retain_reachable(&mut self) {
        let mut reached = PathSet::default();
        let mut todo = vec![Vec::new()];
        while let Some(p) = todo.pop() {
            let Some(rec) = self.map.get(&p) else {
                continue;
            };
            for v in rec.entries.views() {
                if matches!(v.entry.node, NodeRef::Dir { .. }) {
                    todo.push(join(&p, v.entry.name));
                }
            }
            reached.insert(p);
        }
        let stray: Vec<Vec<u8>> = self
            .map
            .keys()
            .filter(|p| !reached.contains(*p))
            .cloned()
            .collect();
        for p in stray {
            self.remove(&p);
        }
    }

    /// Sets every record of `records`.
    pub fn extend(&mut self, records: impl IntoIterator<Item = (Vec<u8>, Arc<DirRecord>)>) {
        for (p, rec) in records {
            self.insert(p, rec);
        }
    }

    /// The paths whose record has [`UNKNOWN_TREE`].
    pub fn unknown_trees(&self) -> &PathSet {
        &self.unknown
    }
}

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

/// A base index file, as loaded or written.
pub struct Base {
    /// The file's bytes, when loaded (records loaded from it point into
    /// them); `None` for a base this process wrote.
    buf: Option<Buf>,
    /// Its length.
    len: usize,
    /// Its trailer: BLAKE3 of everything before it (what a delta names).
    id: Hash,
    generation: u64,
    /// Written in the current version: a delta (whose records are always
    /// in the current encoding) is only made against such a base.
    current: bool,
    /// The file it was read from or written as, held open so that its
    /// inode cannot be reused: a delta is written only while the path
    /// still names it.
    file: Option<File>,
    /// Its device map (from its delta, or [`Index::remap_dev`]), which
    /// every delta against it repeats.
    dev_map: Option<DevMap>,
    /// The bytes of the file this index was last loaded from, which its
    /// unchanged records still point into: `buf` for a loaded base, and
    /// carried over to the bases this process writes after it.
    loaded: Option<Buf>,
}

impl std::fmt::Debug for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Base({} bytes, {:?})", self.len, self.id)
    }
}

impl Base {
    /// Whether `path` still names the file this base was read from.
    fn is_current(&self, path: &Path) -> bool {
        let Some(f) = &self.file else { return false };
        match (f.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
}

/// The delta file beside the index file `path` (`index.delta`).
pub fn delta_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".delta");
    PathBuf::from(p)
}

/// An index file's bytes. A loaded base is mapped, not read: records
/// point into it, and a long-lived process (the watcher) can hand its
/// pages back to the page cache when idle ([`Index::release_pages`])
/// instead of keeping a private copy of the whole file for its lifetime.
///
/// Mapping is sound because no index file is ever written in place: every
/// one is written whole under a temporary name and renamed (see the module
/// doc), and the base's file is held open, so the bytes a mapping shows
/// never change while it lives. A file shortened in place by something
/// other than ckpt would fault the process reading it (`SIGBUS`); the
/// index is only a cache, so no checkpoint depends on it.
pub(crate) enum Bytes {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

/// A shared index file's bytes.
type Buf = Arc<Bytes>;

impl Bytes {
    /// Maps `f` read-only (reads it when it cannot be mapped: an empty
    /// file, or a filesystem without `mmap`).
    fn map(f: &File) -> std::io::Result<Bytes> {
        // SAFETY: index files are never modified in place (type doc).
        match unsafe { memmap2::Mmap::map(f) } {
            Ok(m) => Ok(Bytes::Mapped(m)),
            Err(_) => {
                use std::io::Read;
                let mut v = Vec::new();
                (&*f).read_to_end(&mut v)?;
                Ok(Bytes::Owned(v))
            }
        }
    }

    /// Drops this process's mapping of the pages (they stay in the page
    /// cache, and are mapped again on the next read).
    fn release(&self) {
        if let Bytes::Mapped(m) = self {
            // SAFETY: a read-only shared mapping of a file never modified
            // in place: dropping its pages loses nothing, and the next
            // read maps the same bytes again.
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Mapped(m) => m,
        }
    }
}

/// A parsed file: header fields, then `u32:ndirs (u32:block_len dir)*`.
struct Parsed<R> {
    generation: u64,
    scan_start_ns: i64,
    base_id: Option<Hash>,
    /// A delta's device map for its base.
    dev_map: Option<DevMap>,
    removed: Vec<Vec<u8>>,
    /// In the current encoding (version 4 blocks).
    v4: bool,
    records: R,
}

/// Where [`parse`] puts a file's records: a base's straight into its map,
/// a delta's into a list that is then applied over its base.
trait Records: Send {
    fn with_capacity(n: usize) -> Self;
    fn add(&mut self, path: Vec<u8>, rec: Arc<DirRecord>);
}

impl Records for Vec<(Vec<u8>, Arc<DirRecord>)> {
    fn with_capacity(n: usize) -> Self {
        Vec::with_capacity(n)
    }
    fn add(&mut self, path: Vec<u8>, rec: Arc<DirRecord>) {
        self.push((path, rec));
    }
}

impl Records for DirMap {
    fn with_capacity(n: usize) -> Self {
        DirMap::with_capacity_and_hasher(n, PathHasher::default())
    }
    fn add(&mut self, path: Vec<u8>, rec: Arc<DirRecord>) {
        self.insert(path, rec);
    }
}

/// The BLAKE3 of an index or delta file's body: its trailer.
fn body_hash(body: &[u8]) -> Hash {
    let mut hasher = blake3::Hasher::new();
    if body.len() > 256 * 1024 {
        hasher.update_rayon(body);
    } else {
        hasher.update(body);
    }
    Hash(*hasher.finalize().as_bytes())
}

/// Up to this size (a delta after a small change) an index file is hashed
/// and parsed on the caller's thread: handing half of it to another thread
/// costs more than it saves.
const SMALL_INDEX_FILE: usize = 64 * 1024;

/// Checks the trailer and every record's header of an index (`delta ==
/// false`) or delta file (the entries are checked as they are read).
///
/// Above [`SMALL_INDEX_FILE`], the records are parsed on the calling
/// thread while rayon's pool hashes the trailer, and what was parsed is
/// returned only if the hash matches: a file that fails its trailer is
/// refused whole, as if the hash had come first.
/// - The parse is one loop: on two threads it was hardly faster (the
///   records share one buffer's reference count and the allocator), and
///   beside the hash it takes the time the hash took before it.
/// - It runs on the caller's thread, not the pool's: in a command that
///   scans, this is the pool's first use, and the parse hides the pool's
///   start instead of waiting for it (both halves handed to the pool with
///   `rayon::join` loaded the index measurably slower).
fn parse<R: Records>(buf: &Buf, delta: bool) -> Result<Parsed<R>> {
    let bad = || corrupt(delta);
    let bytes: &[u8] = buf;
    if bytes.len() < 32 + 28 {
        return Err(bad());
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 32);
    let check = || {
        let _t = crate::trace::span("index check");
        body_hash(body).0 == trailer
    };
    let records = || {
        let _t = crate::trace::span("index parse");
        parse_body(buf, body, delta)
    };
    let (whole, parsed) = match body.len() > SMALL_INDEX_FILE {
        true => {
            let mut whole = false;
            let parsed = rayon::in_place_scope(|s| {
                s.spawn(|_| whole = check());
                records()
            });
            (whole, parsed)
        }
        false => (check(), records()),
    };
    match whole {
        true => parsed,
        false => Err(bad()),
    }
}

/// The error of an index (`delta == false`) or delta file that does not
/// read.
fn corrupt(delta: bool) -> Error {
    Error::Corrupt(if delta { "index delta" } else { "index" }.into())
}

/// [`parse`]'s records and header fields from an index or delta file's
/// `body` (`buf` without its trailer).
fn parse_body<R: Records>(buf: &Buf, body: &[u8], delta: bool) -> Result<Parsed<R>> {
    let bad = || corrupt(delta);
    let mut r = Reader::new(body);
    let magic = if delta { DELTA_MAGIC } else { MAGIC };
    if r.take(4)? != magic {
        return Err(bad());
    }
    // (blocks in version 4, a device map follows the base id)
    let (v4, has_map) = match (delta, r.u32()?) {
        (false, VERSION) => (true, false),
        (false, OLD_VERSION) => (false, false),
        (true, DELTA_VERSION) => (true, true),
        (true, DELTA_VERSION_NO_MAP) => (true, false),
        (true, OLD_DELTA_VERSION) => (false, false),
        _ => return Err(bad()),
    };
    let generation = r.u64()?;
    let scan_start_ns = r.u64()? as i64;
    let mut base_id = None;
    let mut dev_map = None;
    let mut removed = Vec::new();
    if delta {
        base_id = Some(r.hash()?);
        if has_map {
            dev_map = match r.u8()? {
                0 => None,
                1 => Some((r.u64()?, r.u64()?)),
                _ => return Err(bad()),
            };
        }
        let n = r.u32()? as usize;
        removed.reserve(n.min(body.len() / 4));
        for _ in 0..n {
            let len = r.u32()? as usize;
            removed.push(r.take(len)?.to_vec());
        }
    }
    let ndirs = r.u32()? as usize;
    let mut records = R::with_capacity(ndirs.min(body.len() / 4));
    for _ in 0..ndirs {
        let len = r.u32()? as usize;
        let start = r.position();
        r.take(len)?;
        let (path, rec) = parse_dir(buf, start..start + len, v4)?;
        records.add(path, rec);
    }
    if !r.at_end() {
        return Err(bad());
    }
    Ok(Parsed {
        generation,
        scan_start_ns,
        base_id,
        dev_map,
        removed,
        v4,
        records,
    })
}

/// Checks one `dir` block's header (path, tree hash, flags, bases and an
/// entry count the block has room for) and makes its record, leaving the
/// entries unread: they are checked as they are read ([`Checked`]).
fn parse_dir(buf: &Buf, block: Range<usize>, v4: bool) -> Result<(Vec<u8>, Arc<DirRecord>)> {
    let mut r = Reader::new(&buf[block.clone()]);
    let len = r.u32()? as usize;
    let path = r.take(len)?.to_vec();
    let tree = r.hash()?;
    let exact_names = match r.take(1)?[0] {
        0 => false,
        FLAG_EXACT_NAMES => true,
        _ => return Err(Error::Corrupt("index record has unknown flags".into())),
    };
    let at = block.start + r.position();
    if v4 {
        Bases::decode(&mut r)?;
    }
    let n = r.u32()?;
    let room = block.len() - r.position();
    if n as usize > room / MIN_ENTRY_BYTES {
        return Err(Error::Corrupt("index record count".into()));
    }
    let entries = Entries {
        raw: Some(RawEntries {
            buf: Arc::clone(buf),
            block,
            at,
            n,
            v4,
            dev_map: None,
        }),
        decoded: OnceLock::new(),
        read: OnceLock::new(),
    };
    Ok((
        path,
        Arc::new(DirRecord {
            tree,
            entries,
            exact_names,
        }),
    ))
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

/// The temporary name of the index file or its delta.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tmp");
    PathBuf::from(p)
}

/// Removes the index at `path`: the base file, its delta and their
/// temporary files (when there is no space to write it, see
/// [`crate::engine::scanner::save_index`]); the next scan reads everything.
pub fn remove(path: &Path) -> Result<()> {
    let d = delta_path(path);
    for p in [temp_path(path), temp_path(&d), d, path.to_path_buf()] {
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("remove", p, e))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Replaces `path` with `bytes` (temp file + rename, fsynced first when
/// `durable`, renamed once `ready` returns); returns the new file, open.
fn replace(
    path: &Path,
    bytes: &[u8],
    durable: bool,
    ready: &dyn Fn() -> Result<()>,
) -> Result<File> {
    use std::io::Write;
    let tmp = temp_path(path);
    let mut f = File::create(&tmp).ctx("create", &tmp)?;
    let written = f
        .write_all(bytes)
        .ctx("write", &tmp)
        .and_then(|()| match durable {
            true => f.sync_all().ctx("fsync", &tmp),
            false => Ok(()),
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    ckpt_fault::point("index.after_tmp_write");
    if let Err(e) = ready() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).ctx("rename", path)?;
    ckpt_fault::point("index.after_rename");
    Ok(f)
}

/// The trailer of an index or delta file (BLAKE3 of what precedes it).
fn trailer(bytes: &[u8]) -> Hash {
    Hash(bytes[bytes.len() - 32..].try_into().expect("32 bytes"))
}

fn remove_delta(path: &Path) -> Result<()> {
    let d = delta_path(path);
    match std::fs::remove_file(&d) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", d, e)),
    }
}

/// Block flag: [`DirRecord::exact_names`].
const FLAG_EXACT_NAMES: u8 = 1;

fn block_flags(d: &DirRecord) -> u8 {
    if d.exact_names {
        FLAG_EXACT_NAMES
    } else {
        0
    }
}

/// An estimate of the bytes `rec`'s block takes in a delta, without reading
/// its entries (a file or directory entry holds a 32-byte hash).
fn estimated_block(path: &[u8], rec: &DirRecord) -> usize {
    40 + path.len() + rec.entries.claimed() * 40
}

/// A record's block; what is not its own bytes copied is re-encoded from
/// the entries that read (their count written after them, so that they are
/// read once here).
fn encode_dir(path: &[u8], d: &DirRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + path.len() + d.entries.claimed() * 80);
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path);
    out.extend_from_slice(&d.tree.0);
    out.push(block_flags(d));
    match &d.entries.raw {
        Some(r) if r.v4 && r.dev_map.is_none() => out.extend_from_slice(r.bytes()),
        _ => {
            let bases = Bases::of(d.entries.views());
            bases.encode(&mut out);
            let count_at = out.len();
            out.extend_from_slice(&0u32.to_le_bytes());
            let mut n = 0u32;
            for v in d.entries.views() {
                encode_v4(&v, &bases, &mut out);
                n += 1;
            }
            out[count_at..count_at + 4].copy_from_slice(&n.to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tree::Node;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn round_trip_and_corruption_detected() {
        let mut ix = Index {
            generation: 3,
            scan_start_ns: 42,
            ..Default::default()
        };
        ix.dirs.insert(
            b"a/b".to_vec(),
            Arc::new(DirRecord {
                tree: Hash::of(b"t"),
                entries: vec![file_entry(b"f\n\xff", 0o755, true)].into(),
                exact_names: true,
            }),
        );
        let bytes = ix.encode();
        let back = Index::decode(&bytes).unwrap();
        assert_eq!(back.dirs, ix.dirs);
        assert_eq!(back.generation, 3);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 1;
            assert!(Index::decode(&b).is_err(), "flip at {i} undetected");
        }
    }

    /// A 3-byte file's entry (content `abc`, device 1, inode 2).
    fn file_entry(name: &[u8], perm: u32, racy: bool) -> IndexEntry {
        IndexEntry {
            entry: Entry {
                name: name.to_vec(),
                mode: perm,
                mtime_ns: 7,
                node: Node::File {
                    size: 3,
                    hash: Hash::of(b"abc"),
                },
            },
            meta: Meta {
                dev: 1,
                ino: 2,
                mode: 0o100000 | perm,
                size: 3,
                mtime_ns: 7,
                ctime_ns: 9,
            },
            racy,
        }
    }

    /// Entries damaged behind a matching trailer (only a writer's bug could
    /// make such a file): the index loads, the damaged record's entries read
    /// up to the damage, and every way of counting or reading them agrees.
    /// A record that claims more entries than its block has room for is
    /// refused when loaded.
    #[test]
    fn damaged_entries_end_their_record() {
        let e = |name: &[u8]| file_entry(name, 0o644, false);
        let mut ix = Index::default();
        let names: [&[u8]; 3] = [b"name-a", b"name-b", b"name-c"];
        ix.dirs.insert(
            b"d".to_vec(),
            Arc::new(DirRecord {
                tree: Hash::of(b"t"),
                entries: names.iter().map(|n| e(n)).collect(),
                exact_names: true,
            }),
        );
        let good = ix.encode();
        let resealed = |mut b: Vec<u8>| {
            let n = b.len() - 32;
            let h = Hash::of(&b[..n]);
            b[n..].copy_from_slice(&h.0);
            b
        };
        let at = |name: &[u8]| good.windows(name.len()).position(|w| w == name).unwrap();
        let b = at(b"name-b");
        let reads = |bytes: Vec<u8>| {
            let ix = Index::decode(&resealed(bytes)).unwrap();
            let rec = &ix.dirs[b"d".as_slice()];
            assert_eq!(rec.entries.claimed(), 3);
            let (len, views) = (rec.entries.len(), rec.entries.views().count());
            assert_eq!(len, views);
            assert_eq!(rec.entries.to_vec().len(), len);
            len
        };
        assert_eq!(reads(good.clone()), 3);
        // The second entry's flags unknown, or its name equal to the first's.
        let mut flags = good.clone();
        flags[b - 2] = 0xff;
        assert_eq!(reads(flags), 1);
        let mut order = good.clone();
        order[b + 5] = b'a';
        assert_eq!(reads(order), 1);
        // The third's name before the second's: two read.
        let mut last = good.clone();
        last[at(b"name-c") + 5] = b'a';
        assert_eq!(reads(last), 2);
        // The count (u32 before the first entry's flags and name length).
        let mut count = good.clone();
        let n = at(b"name-a") - 6;
        assert_eq!(count[n..n + 4], 3u32.to_le_bytes());
        count[n..n + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Index::decode(&resealed(count)).is_err());
    }

    /// A version-3 file, as the previous release wrote it: the tree-entry
    /// encoding plus fixed-width meta (test-only writer).
    fn encode_v3(ix: &Index) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&OLD_VERSION.to_le_bytes());
        out.extend_from_slice(&ix.generation.to_le_bytes());
        out.extend_from_slice(&ix.scan_start_ns.to_le_bytes());
        let mut paths: Vec<_> = ix.dirs.keys().collect();
        paths.sort();
        out.extend_from_slice(&(paths.len() as u32).to_le_bytes());
        for p in paths {
            let d = &ix.dirs[p];
            let mut b = Vec::new();
            b.extend_from_slice(&(p.len() as u32).to_le_bytes());
            b.extend_from_slice(p);
            b.extend_from_slice(&d.tree.0);
            b.push(block_flags(d));
            b.extend_from_slice(&(d.entries.len() as u32).to_le_bytes());
            for e in d.entries.iter() {
                e.entry.encode_into(&mut b);
                b.extend_from_slice(&e.meta.dev.to_le_bytes());
                b.extend_from_slice(&e.meta.ino.to_le_bytes());
                b.extend_from_slice(&e.meta.mode.to_le_bytes());
                b.extend_from_slice(&e.meta.size.to_le_bytes());
                b.extend_from_slice(&e.meta.ctime_ns.to_le_bytes());
                b.push(e.racy as u8);
            }
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(&b);
        }
        let h = blake3::hash(&out);
        out.extend_from_slice(h.as_bytes());
        out
    }

    fn arb_entry() -> impl Strategy<Value = IndexEntry> {
        let node = crate::store::tree::arb_node();
        // Small pools for dev, times and sizes, so that both the implied
        // and the explicit encodings of each field come up.
        let dev = prop_oneof![Just(7u64), any::<u64>()];
        let time = prop_oneof![Just(1_700_000_000_000_000_000i64), any::<i64>()];
        (
            node,
            0u32..=0o7777,
            time.clone(),
            time,
            dev,
            any::<u64>(),
            prop_oneof![Just(None), any::<u32>().prop_map(Some)],
            prop_oneof![Just(None), any::<u64>().prop_map(Some)],
            any::<bool>(),
        )
            .prop_map(|(node, perm, mtime, ctime, dev, ino, mode, size, racy)| {
                let entry = Entry {
                    name: Vec::new(),
                    mode: perm,
                    mtime_ns: mtime,
                    node,
                };
                let n = entry.borrowed().node;
                let (mode, size) = (
                    mode.unwrap_or(type_bits(&n) | perm),
                    size.unwrap_or(implied_size(&n)),
                );
                IndexEntry {
                    entry,
                    meta: Meta {
                        dev,
                        ino,
                        mode,
                        size,
                        mtime_ns: mtime,
                        ctime_ns: ctime,
                    },
                    racy,
                }
            })
    }

    /// The model of a device map: `dirs` with every entry on device `from`
    /// on device `to`.
    fn moved(dirs: &DirMap, from: u64, to: u64) -> DirMap {
        dirs.iter()
            .map(|(p, r)| {
                let entries = r.entries.iter().map(|e| {
                    let mut e = e.clone();
                    e.meta.dev = remap(Some((from, to)), e.meta.dev);
                    e
                });
                let rec = DirRecord {
                    tree: r.tree,
                    entries: entries.collect(),
                    exact_names: r.exact_names,
                };
                (p.clone(), Arc::new(rec))
            })
            .collect()
    }

    fn arb_index() -> impl Strategy<Value = Index> {
        let dir = (
            proptest::collection::vec(arb_entry(), 0..12),
            any::<[u8; 32]>(),
            any::<bool>(),
        )
            .prop_map(|(mut entries, tree, exact_names)| {
                for (i, e) in entries.iter_mut().enumerate() {
                    e.entry.name = format!("n{i:02}").into_bytes();
                }
                Arc::new(DirRecord {
                    tree: Hash(tree),
                    entries: entries.into(),
                    exact_names,
                })
            });
        (
            proptest::collection::vec(dir, 1..6),
            any::<u64>(),
            any::<i64>(),
        )
            .prop_map(|(dirs, generation, scan_start_ns)| Index {
                generation,
                scan_start_ns,
                dirs: dirs
                    .into_iter()
                    .enumerate()
                    .map(|(i, d)| (format!("d{i}").into_bytes(), d))
                    .collect(),
                base: None,
            })
    }

    /// A device map on a real-sized index is a delta of a few bytes, and
    /// the base file is left as it was.
    #[test]
    fn a_device_map_is_a_small_delta() {
        let entry = |i: u32| IndexEntry {
            entry: Entry {
                name: format!("f{i:04}").into_bytes(),
                mode: 0o644,
                mtime_ns: 1_700_000_000_000_000_000,
                node: Node::File {
                    size: 10,
                    hash: Hash([i as u8; 32]),
                },
            },
            meta: Meta {
                dev: 7,
                ino: u64::from(i),
                mode: libc::S_IFREG | 0o644,
                size: 10,
                mtime_ns: 1_700_000_000_000_000_000,
                ctime_ns: 1_700_000_000_000_000_000,
            },
            racy: false,
        };
        let ix = Index {
            generation: 3,
            scan_start_ns: 0,
            dirs: (0..100)
                .map(|d| {
                    let rec = DirRecord {
                        tree: Hash([d as u8; 32]),
                        entries: (0..20).map(entry).collect(),
                        exact_names: true,
                    };
                    (format!("d{d}").into_bytes(), Arc::new(rec))
                })
                .collect(),
            base: None,
        };
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("index");
        let mut ix = ix;
        ix.save(&path).unwrap();
        let base = std::fs::read(&path).unwrap();
        let mut a = Index::load(&path, 3);
        assert!(a.remap_dev(7, 8));
        a.save(&path).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            base,
            "the base was rewritten"
        );
        let delta = std::fs::metadata(delta_path(&path)).unwrap().len();
        assert!(delta < 200, "a device map took {delta} bytes");
        let b = Index::load(&path, 3);
        assert!(b
            .dirs
            .values()
            .all(|r| r.exact_names && r.entries.iter().all(|e| e.meta.dev == 8)));
        index_at_a_snapshot(&path);
    }

    /// An index read at `path` is taken at another path only where that
    /// file is its base file (here a hard link, as a snapshot keeps the
    /// inode): saved there, it writes a delta there, and leaves `path`
    /// and its delta alone. A copy (another inode) or another index is
    /// refused.
    fn index_at_a_snapshot(path: &Path) {
        let tmp = tempfile::tempdir().unwrap();
        let (link, copy, other) = (
            tmp.path().join("link"),
            tmp.path().join("copy"),
            tmp.path().join("other"),
        );
        std::fs::hard_link(path, &link).unwrap();
        std::fs::copy(path, &copy).unwrap();
        let read = Index::load(path, 3);
        let before = (
            std::fs::read(path).unwrap(),
            std::fs::read(delta_path(path)).unwrap(),
        );
        assert!(read.at_snapshot(&copy).is_none(), "another inode was taken");
        assert!(
            !read.save_snapshot_delta(&copy, 8, 9).unwrap() && !delta_path(&copy).exists(),
            "a delta was written beside another inode"
        );
        let mut changed = Index {
            base: None,
            ..read.clone()
        };
        assert!(changed.remap_dev(8, 9));
        changed.save(&other).unwrap();
        assert!(
            read.at_snapshot(&other).is_none(),
            "another index was taken"
        );

        let mut at = read.at_snapshot(&link).expect("the same file is taken");
        assert!(at.remap_dev(8, 10));
        at.save(&link).unwrap();
        assert!(delta_path(&link).exists(), "no delta beside the link");
        assert_eq!(
            std::fs::read(&link).unwrap(),
            before.0,
            "the base was rewritten"
        );
        assert_eq!(
            std::fs::read(delta_path(path)).unwrap(),
            before.1,
            "the original's delta changed"
        );
        let devs = |p: &Path| -> HashSet<u64> {
            Index::load(p, 3)
                .dirs
                .values()
                .flat_map(|r| r.entries.iter().map(|e| e.meta.dev).collect::<Vec<_>>())
                .collect()
        };
        assert_eq!(devs(&link), HashSet::from([10]));
        assert_eq!(devs(path), HashSet::from([8]));
    }

    proptest! {
        /// Every entry survives the compact encoding, whatever its fields;
        /// an index written by the previous version (3) loads to the same
        /// records, and written again (version 4) still does.
        #[test]
        fn compact_records_round_trip_and_version_3_is_still_read(ix in arb_index()) {
            let v4 = Index::decode(&ix.encode()).unwrap();
            prop_assert_eq!(&v4.dirs, &ix.dirs);
            let v3 = Index::decode(&encode_v3(&ix)).unwrap();
            prop_assert_eq!(&v3.dirs, &ix.dirs);
            prop_assert_eq!(v3.generation, ix.generation);
            let again = v3.encode();
            prop_assert_eq!(&again[4..8], &VERSION.to_le_bytes()[..]);
            prop_assert_eq!(&Index::decode(&again).unwrap().dirs, &ix.dirs);
        }

        /// A loaded index maps its file, and after its pages are handed
        /// back (what the idle watcher does) it reads the same records.
        #[test]
        fn a_mapped_index_reads_the_same_after_its_pages_are_released(ix in arb_index()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("index");
            std::fs::write(&path, ix.encode()).unwrap();
            let loaded = Index::load(&path, ix.generation);
            let base = loaded.base.as_ref().unwrap();
            prop_assert!(matches!(base.loaded.as_deref(), Some(Bytes::Mapped(_))));
            loaded.release_pages();
            prop_assert_eq!(&loaded.dirs, &ix.dirs);
        }

        /// An index moved to another device by a device map reads as the
        /// same index with every entry on that device rewritten: from the
        /// base and a delta, after a further change (the
        /// next delta carries the map on), after a second map (composed
        /// with the first), and written whole (no map left).
        #[test]
        fn a_device_map_reads_as_the_rewritten_devices(
            ix in arb_index(),
            to in any::<u64>(),
            to2 in any::<u64>(),
        ) {
            let from = 7u64;
            let devs: HashSet<u64> = ix.dirs.values().flat_map(|r| r.entries.iter().map(|e| e.meta.dev)).collect();
            prop_assume!(to != from && to2 != to && !devs.contains(&to) && !devs.contains(&to2));
            let tmp = tempfile::tempdir().unwrap();
            let path = tmp.path().join("index");
            let g = ix.generation;
            let mut ix = ix;
            ix.save(&path).unwrap();
            let mut a = Index::load(&path, g);
            prop_assert!(a.remap_dev(from, to));
            a.save(&path).unwrap();
            let want = moved(&ix.dirs, from, to);
            let mut b = Index::load(&path, g);
            prop_assert_eq!(&*b.dirs, &want);

            let added = Arc::new(DirRecord { tree: Hash([9; 32]), ..DirRecord::default() });
            b.dirs.insert(b"zz".to_vec(), Arc::clone(&added));
            b.save(&path).unwrap();
            let mut want = want;
            want.insert(b"zz".to_vec(), added);
            let mut c = Index::load(&path, g);
            prop_assert_eq!(&*c.dirs, &want);

            prop_assert!(c.remap_dev(to, to2));
            c.save(&path).unwrap();
            let want = moved(&want, to, to2);
            let d = Index::load(&path, g);
            prop_assert_eq!(&*d.dirs, &want);

            let whole = Index::decode(&d.encode()).unwrap();
            prop_assert_eq!(&*whole.dirs, &want);
            prop_assert!(whole.base.as_ref().unwrap().dev_map.is_none());
        }
    }

    /// A change to the records of a loaded index.
    #[derive(Clone, Debug)]
    enum Change {
        /// A fresh record (tree seed) at path `d{n}`, which may be new.
        Put(u8, u8),
        /// Remove the record at `d{n}`.
        Remove(u8),
        /// Replace the records as a full scan does ([`Dirs::succeeding`]):
        /// per record, by bits of the mask, keep it (the same `Arc`), make
        /// it fresh or drop it; and add a fresh record at `d{n}`.
        Rebuild(u64, u8),
    }

    fn arb_change() -> impl Strategy<Value = Change> {
        prop_oneof![
            3 => (0u8..28, any::<u8>()).prop_map(|(n, t)| Change::Put(n, t)),
            2 => (0u8..28).prop_map(Change::Remove),
            1 => (any::<u64>(), 0u8..28).prop_map(|(m, n)| Change::Rebuild(m, n)),
        ]
    }

    fn fresh(seed: u8, unknown: bool) -> Arc<DirRecord> {
        Arc::new(DirRecord {
            tree: match unknown {
                true => UNKNOWN_TREE,
                false => Hash::of(&[seed]),
            },
            entries: Entries::default(),
            exact_names: seed.is_multiple_of(3),
        })
    }

    fn path(n: u8) -> Vec<u8> {
        format!("d{n}").into_bytes()
    }

    proptest! {
        /// Through any changes to a loaded index's records (set, removed,
        /// rebuilt as a full scan does), the delta built from what [`Dirs`]
        /// tracked has the bytes of the walk over every record and every
        /// path of the base, loads back as the index, and the unknown-tree
        /// set is exact.
        #[test]
        fn the_tracked_delta_is_the_walked_one(
            ix in arb_index(),
            more in proptest::collection::vec(arb_index(), 3),
            changes in proptest::collection::vec(arb_change(), 1..12),
        ) {
            // A base of up to 24 directories `d0`…
            let mut big = ix;
            for m in more {
                let n = big.dirs.len();
                for (i, (_, rec)) in m.dirs.iter().enumerate() {
                    big.dirs.insert(path((n + i) as u8), Arc::clone(rec));
                }
            }
            let bytes = big.encode();
            let mut ix = Index::decode(&bytes).unwrap();
            let base = ix.base.clone().unwrap();
            for (i, c) in changes.iter().enumerate() {
                match *c {
                    Change::Put(n, t) => {
                        ix.dirs.insert(path(n), fresh(t, t % 4 == 0));
                    }
                    Change::Remove(n) => {
                        ix.dirs.remove(&path(n));
                    }
                    Change::Rebuild(mask, n) => {
                        let mut records: Vec<(Vec<u8>, Arc<DirRecord>)> = Vec::new();
                        for (p, rec) in ix.dirs.iter() {
                            let k = p.len() as u32 * 7 + u32::from(p.last().copied().unwrap_or(0));
                            let bits = mask.rotate_right(k % 64);
                            match bits & 3 {
                                0 | 1 => records.push((p.clone(), Arc::clone(rec))),
                                2 => records.push((p.clone(), fresh(bits as u8, bits & 4 != 0))),
                                _ => {}
                            }
                        }
                        records.retain(|(p, _)| *p != path(n));
                        records.push((path(n), fresh(n, false)));
                        ix.dirs = Dirs::succeeding(&ix.dirs, records, true);
                    }
                }
                prop_assert_eq!(ix.dirs.unknown_trees(), &unknown_trees(&ix.dirs));
                let delta = ix.encode_delta(&base);
                prop_assert_eq!(&delta, &ix.encode_delta_by_walk(&base).unwrap(), "change {}", i);
                if let Some(d) = delta {
                    let mut back = Index::decode(&bytes).unwrap();
                    back.apply_delta(d).unwrap();
                    prop_assert_eq!(&back.dirs, &ix.dirs, "change {}: loaded", i);
                }
            }
        }
    }

    proptest! {
        /// `fork --count`'s delta for a copy ([`Index::save_snapshot_delta`])
        /// has the bytes of the general way (take the index at the copy's
        /// snapshot of the base, move it to the copy's device, save it)
        /// and is made exactly when that way writes a delta: from a base
        /// with or without a device map, after records were put (entries
        /// on the moved device among them) and removed.
        #[test]
        fn the_snapshot_delta_is_what_remap_and_save_write(
            ix in arb_index(),
            more in proptest::collection::vec(arb_index(), 2),
            puts in proptest::collection::vec((0u8..16, any::<prop::sample::Index>()), 0..5),
            removes in proptest::collection::vec(0u8..16, 0..3),
            mapped in any::<bool>(),
            to in 1u64 << 40..1u64 << 41,
        ) {
            // A base of up to 18 directories `d0`…
            let mut big = ix;
            let pool: Vec<Arc<DirRecord>> =
                more.iter().flat_map(|m| m.dirs.values().cloned()).collect();
            for (i, rec) in pool.iter().enumerate() {
                big.dirs.insert(path((big.dirs.len() + i) as u8), Arc::clone(rec));
            }
            let devs: HashSet<u64> = big.dirs.values().flat_map(|r| r.entries.iter().map(|e| e.meta.dev)).collect();
            prop_assume!(!devs.contains(&to) && !devs.contains(&8));
            let tmp = tempfile::tempdir().unwrap();
            let path_ = tmp.path().join("index");
            let g = big.generation;
            big.save(&path_).unwrap();
            let from = if mapped {
                let mut a = Index::load(&path_, g);
                prop_assert!(a.remap_dev(7, 8));
                a.save(&path_).unwrap();
                8
            } else {
                7
            };
            let mut ix = Index::load(&path_, g);
            for (n, pick) in &puts {
                ix.dirs.insert(path(*n), Arc::clone(pick.get(&pool)));
            }
            for n in &removes {
                ix.dirs.remove(&path(*n));
            }
            let (link, link2) = (tmp.path().join("link"), tmp.path().join("link2"));
            std::fs::hard_link(&path_, &link).unwrap();
            std::fs::hard_link(&path_, &link2).unwrap();
            let mut general = ix.at_snapshot(&link).unwrap();
            prop_assert!(general.remap_dev(from, to));
            general.save(&link).unwrap();
            let same_base = std::fs::metadata(&link).unwrap().ino() == std::fs::metadata(&path_).unwrap().ino();
            let delta = same_base.then(|| std::fs::read(delta_path(&link)).unwrap());
            let want = moved(&ix.dirs, from, to);
            prop_assert_eq!(&*Index::load(&link, g).dirs, &want);
            prop_assert_eq!(&ix.snapshot_delta(from, to), &delta);
            prop_assert_eq!(ix.save_snapshot_delta(&link2, from, to).unwrap(), delta.is_some());
            if delta.is_some() {
                prop_assert_eq!(&*Index::load(&link2, g).dirs, &want);
            }
        }
    }
}
