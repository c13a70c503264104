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
//!   stored or read from the store. `gc` is the only operation that deletes
//!   objects; it bumps the store's *generation*, and an index whose
//!   generation differs from the catalog's is discarded (see `gc`).
//! - The index is only a cache. It is replaced atomically (temp file +
//!   rename) and checked by a BLAKE3 trailer; a missing, torn or stale index
//!   costs a full re-hash, never a wrong checkpoint. It is therefore not
//!   fsynced.
//!
//! ## The racy-mtime rule
//! A file modified within the same timestamp tick in which it was hashed
//! could change again without its mtime changing. Entries whose mtime is
//! within [`RACY_WINDOW_NS`] of the scan start are marked racy and re-hashed
//! on the next scan, whatever their stat says.
//!
//! Format (little-endian): `"CKIX" u32:version=2 u64:generation
//! i64:scan_start u32:ndirs (u32:block_len block)* [32]:blake3(all preceding
//! bytes)`, where `block := u32:len path [32]:tree u32:n (entry meta)*n`,
//! `entry` is the tree-entry encoding of [`crate::tree`] and `meta := u64:dev
//! u64:ino u32:st_mode u64:size i64:ctime_ns u8:flags`. Length-prefixed
//! blocks let load and save work on directories in parallel.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::IoContext;
use crate::platform::fs::Meta;
use crate::tree::{Entry, Reader};
use crate::{Error, Hash, Result};

/// The tree hash of a record whose tree must be rebuilt by the next scan
/// (set by restore and gc; never the hash of a real tree).
pub const UNKNOWN_TREE: Hash = Hash([0; 32]);

/// Entries modified this close to the scan start are re-hashed next time.
pub const RACY_WINDOW_NS: i64 = 50_000_000;

const MAGIC: &[u8; 4] = b"CKIX";
const VERSION: u32 = 2;

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

/// One directory's cached listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirRecord {
    /// Hash of the directory's tree as last captured.
    pub tree: Hash,
    /// Entries sorted by name.
    pub entries: Vec<IndexEntry>,
}

impl DirRecord {
    /// Finds an entry by name.
    pub fn get(&self, name: &[u8]) -> Option<&IndexEntry> {
        self.entries
            .binary_search_by(|e| e.entry.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
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
    pub dirs: HashMap<Vec<u8>, Arc<DirRecord>>,
    /// The file this index was loaded from, so that saving it again copies
    /// the bytes of unchanged records instead of re-encoding them.
    pub raw: Option<Arc<RawBlocks>>,
}

/// The encoded bytes of loaded records, keyed by record identity. Each key
/// holds its record alive, so an address is never reused for another record
/// while it is in this table.
#[derive(Debug, Default)]
pub struct RawBlocks {
    buf: Vec<u8>,
    blocks: HashMap<usize, (Arc<DirRecord>, std::ops::Range<usize>)>,
}

impl RawBlocks {
    fn block_of(&self, rec: &Arc<DirRecord>) -> Option<&[u8]> {
        let (held, range) = self.blocks.get(&(Arc::as_ptr(rec) as usize))?;
        Arc::ptr_eq(held, rec).then(|| &self.buf[range.clone()])
    }
}

impl Index {
    /// Loads the index at `path`. A missing, corrupt or stale (wrong
    /// generation) index yields an empty one: the next scan re-hashes.
    pub fn load(path: &Path, generation: u64) -> Index {
        let t = crate::trace::span("index read");
        let Ok(bytes) = std::fs::read(path) else {
            return Index::default();
        };
        drop(t);
        match Self::decode(&bytes) {
            Ok(ix) if ix.generation == generation => ix,
            _ => Index::default(),
        }
    }

    /// Parses an index file's bytes, checking its trailer hash and every
    /// length (public so fuzz targets and property tests reach it).
    pub fn decode(bytes: &[u8]) -> Result<Index> {
        let bad = || Error::Corrupt("index".into());
        if bytes.len() < 32 + 28 {
            return Err(bad());
        }
        let (body, trailer) = bytes.split_at(bytes.len() - 32);
        let t = crate::trace::span("index check");
        let mut hasher = blake3::Hasher::new();
        hasher.update_rayon(body);
        if hasher.finalize().as_bytes() != trailer {
            return Err(bad());
        }
        drop(t);
        let _t = crate::trace::span("index parse");
        let mut r = Reader::new(body);
        if r.take(4)? != MAGIC || r.u32()? != VERSION {
            return Err(bad());
        }
        let generation = r.u64()?;
        let scan_start_ns = r.u64()? as i64;
        let ndirs = r.u32()? as usize;
        // Find the directory blocks, then decode them in parallel.
        let mut blocks = Vec::with_capacity(ndirs.min(body.len() / 4));
        for _ in 0..ndirs {
            let len = r.u32()? as usize;
            let start = r.position();
            r.take(len)?;
            blocks.push(start..start + len);
        }
        if !r.at_end() {
            return Err(bad());
        }
        let decoded = blocks
            .par_iter()
            .map(|range| {
                decode_dir(&body[range.clone()]).map(|(p, d)| (p, Arc::new(d), range.clone()))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut dirs = HashMap::with_capacity(decoded.len());
        let mut raw = HashMap::with_capacity(decoded.len());
        for (path, rec, range) in decoded {
            raw.insert(Arc::as_ptr(&rec) as usize, (Arc::clone(&rec), range));
            dirs.insert(path, rec);
        }
        Ok(Index {
            generation,
            scan_start_ns,
            dirs,
            raw: Some(Arc::new(RawBlocks {
                buf: body.to_vec(),
                blocks: raw,
            })),
        })
    }

    /// Serialises the index (directory blocks encoded in parallel).
    pub fn encode(&self) -> Vec<u8> {
        let mut paths: Vec<&Vec<u8>> = self.dirs.keys().collect();
        paths.sort_unstable();
        let raw = self.raw.as_deref();
        let blocks: Vec<std::borrow::Cow<'_, [u8]>> = paths
            .par_iter()
            .map(|p| {
                let rec = &self.dirs[*p];
                match raw.and_then(|r| r.block_of(rec)) {
                    Some(b) => std::borrow::Cow::Borrowed(b),
                    None => std::borrow::Cow::Owned(encode_dir(p, rec)),
                }
            })
            .collect();
        let total: usize = blocks.iter().map(|b| b.len() + 4).sum();
        let mut out = Vec::with_capacity(total + 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.scan_start_ns.to_le_bytes());
        out.extend_from_slice(&(self.dirs.len() as u32).to_le_bytes());
        for b in &blocks {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        }
        drop(blocks);
        let mut hasher = blake3::Hasher::new();
        hasher.update_rayon(&out);
        out.extend_from_slice(hasher.finalize().as_bytes());
        out
    }

    /// Replaces the index file atomically (temp + rename, no fsync: it is a
    /// cache, see the module doc).
    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("tmp");
        let t = crate::trace::span("index encode");
        let bytes = self.encode();
        drop(t);
        let _t = crate::trace::span("index write");
        std::fs::write(&tmp, bytes).ctx("write", &tmp)?;
        ckpt_fault::point("index.after_tmp_write");
        std::fs::rename(&tmp, path).ctx("rename", path)?;
        ckpt_fault::point("index.after_rename");
        Ok(())
    }

    /// Replaces the index file durably (temp + fsync + rename + fsync of the
    /// directory), for gc, which must not let an old index survive a crash.
    pub fn save_durable(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).ctx("create", &tmp)?;
        f.write_all(&self.encode()).ctx("write", &tmp)?;
        f.sync_all().ctx("fsync", &tmp)?;
        ckpt_fault::point("index.after_tmp_write");
        std::fs::rename(&tmp, path).ctx("rename", path)?;
        ckpt_fault::point("index.after_rename");
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .ctx("fsync", dir)
    }
}

fn encode_dir(path: &[u8], d: &DirRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(40 + path.len() + d.entries.len() * 112);
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path);
    out.extend_from_slice(&d.tree.0);
    out.extend_from_slice(&(d.entries.len() as u32).to_le_bytes());
    for e in &d.entries {
        e.entry.encode_into(&mut out);
        out.extend_from_slice(&e.meta.dev.to_le_bytes());
        out.extend_from_slice(&e.meta.ino.to_le_bytes());
        out.extend_from_slice(&e.meta.mode.to_le_bytes());
        out.extend_from_slice(&e.meta.size.to_le_bytes());
        out.extend_from_slice(&e.meta.ctime_ns.to_le_bytes());
        out.push(e.racy as u8);
    }
    out
}

fn decode_dir(block: &[u8]) -> Result<(Vec<u8>, DirRecord)> {
    let mut r = Reader::new(block);
    let len = r.u32()? as usize;
    let path = r.take(len)?.to_vec();
    let tree = r.hash()?;
    let n = r.u32()? as usize;
    let mut entries = Vec::with_capacity(n.min(block.len() / 17));
    for _ in 0..n {
        let entry = Entry::decode_from(&mut r)?;
        let meta = Meta {
            dev: r.u64()?,
            ino: r.u64()?,
            mode: r.u32()?,
            size: r.u64()?,
            mtime_ns: entry.mtime_ns,
            ctime_ns: r.u64()? as i64,
        };
        let racy = r.take(1)?[0] & 1 != 0;
        entries.push(IndexEntry { entry, meta, racy });
    }
    if !r.at_end() {
        return Err(Error::Corrupt("index".into()));
    }
    Ok((path, DirRecord { tree, entries }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Node;

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
                entries: vec![IndexEntry {
                    entry: Entry {
                        name: b"f\n\xff".to_vec(),
                        mode: 0o755,
                        mtime_ns: 7,
                        node: Node::File {
                            size: 3,
                            hash: Hash::of(b"abc"),
                        },
                    },
                    meta: Meta {
                        dev: 1,
                        ino: 2,
                        mode: 0o100755,
                        size: 3,
                        mtime_ns: 7,
                        ctime_ns: 9,
                    },
                    racy: true,
                }],
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
}
