//! The records of the stat index and the codec of their entries: one
//! [`DirRecord`] per directory (tree hash, flags, [`Entries`]); an
//! [`IndexEntry`] per name, encoded in version 4 (compact, relative to
//! per-record [`Bases`]) or read from version 3 ([`Codec`]); and the bytes
//! a loaded record's entries are read from in place ([`Bytes`]: the mapped
//! or read index file). A record's block is encoded here ([`encode_dir`])
//! and parsed here ([`parse_dir`]), so the files ([`super::files`]) and the
//! in-memory records ([`super::dirs`]) both build on this module and it on
//! neither. See the module doc of [`crate::store::index`] for the format
//! and the rules these follow.

use std::fs::File;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::store::tree::{
    put_varint, unzigzag, valid_name, zigzag, Entry, EntryRef, NodeRef, Reader,
};
use crate::{Error, Hash, Result};
use ckpt_fs::fs::Meta;

/// The tree hash of a record whose tree must be rebuilt by the next scan
/// (set by restore and gc; never the hash of a real tree).
pub const UNKNOWN_TREE: Hash = Hash([0; 32]);

/// Entries modified this close to the scan start are re-hashed next time.
pub const RACY_WINDOW_NS: i64 = 50_000_000;

/// A base's device map `(from, to)`: its entries on device `from` are on
/// device `to` (the index of a btrfs snapshot of the tree it describes,
/// see "Device map" in the module doc).
pub type DevMap = (u64, u64);

/// `dev` through `map`.
pub(super) fn remap(map: Option<DevMap>, dev: u64) -> u64 {
    match map {
        Some((from, to)) if dev == from => to,
        _ => dev,
    }
}

/// Whether `rec` is still the bytes of the base file `buf` (in the current
/// encoding): [`Index::remap_dev`] then only changes the map it is read
/// through, and a delta against that base need not repeat it.
pub(super) fn of_base(rec: &DirRecord, buf: Option<&Buf>) -> bool {
    rec.entries
        .raw
        .as_ref()
        .is_some_and(|r| r.v4 && buf.is_some_and(|b| Arc::ptr_eq(b, &r.buf)))
}

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
pub(super) fn type_bits(node: &NodeRef<'_>) -> u32 {
    match node {
        NodeRef::File { .. } => libc::S_IFREG,
        NodeRef::Dir { .. } => libc::S_IFDIR,
        NodeRef::Symlink { .. } => libc::S_IFLNK,
    }
}

/// The `st_size` a version-4 entry omits: the file's size, the link
/// target's length, 0 for a directory.
pub(super) fn implied_size(node: &NodeRef<'_>) -> u64 {
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
    pub(super) fn stored_block(&self, path: &[u8], buf: Option<&Buf>) -> Option<&[u8]> {
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
    pub(super) fn remapped(&self, of_base: bool, map: Option<DevMap>, moved: DevMap) -> DirRecord {
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
pub(super) type Buf = Arc<Bytes>;

impl Bytes {
    /// Maps `f` read-only (reads it when it cannot be mapped: an empty
    /// file, or a filesystem without `mmap`).
    pub(super) fn map(f: &File) -> std::io::Result<Bytes> {
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
    pub(super) fn release(&self) {
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

/// Checks one `dir` block's header (path, tree hash, flags, bases and an
/// entry count the block has room for) and makes its record, leaving the
/// entries unread: they are checked as they are read ([`Checked`]).
pub(super) fn parse_dir(
    buf: &Buf,
    block: Range<usize>,
    v4: bool,
) -> Result<(Vec<u8>, Arc<DirRecord>)> {
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

/// Block flag: [`DirRecord::exact_names`].
const FLAG_EXACT_NAMES: u8 = 1;

pub(super) fn block_flags(d: &DirRecord) -> u8 {
    if d.exact_names {
        FLAG_EXACT_NAMES
    } else {
        0
    }
}

/// An estimate of the bytes `rec`'s block takes in a delta, without reading
/// its entries (a file or directory entry holds a 32-byte hash).
pub(super) fn estimated_block(path: &[u8], rec: &DirRecord) -> usize {
    40 + path.len() + rec.entries.claimed() * 40
}

/// A record's block; what is not its own bytes copied is re-encoded from
/// the entries that read (their count written after them, so that they are
/// read once here).
pub(super) fn encode_dir(path: &[u8], d: &DirRecord) -> Vec<u8> {
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
