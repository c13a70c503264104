//! The stat index's files: the base file `index` and its delta
//! `index.delta` (their magic, versions and header, the BLAKE3 trailer
//! checked beside the parse), the [`Base`] an index was loaded from or last
//! written as, and writing them (temp file + rename). The byte layout is in
//! `docs/FORMAT.md` ("The stat index"); what the files promise is in the
//! module doc of [`crate::store::index`].

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::IoContext;
use crate::store::index::dirs::{DirMap, PathHasher};
use crate::store::index::entries::{parse_dir, Buf, DevMap, DirRecord};
use crate::store::tree::Reader;
use crate::{Error, Hash, Result};

pub(super) const MAGIC: &[u8; 4] = b"CKIX";
/// The version written: compact entries ([`Codec::V4`]).
pub(super) const VERSION: u32 = 4;
/// The previous version (fixed-width entries, [`Codec::V3`]), still read;
/// its records are re-encoded when the index is next written.
pub(super) const OLD_VERSION: u32 = 3;
pub(super) const DELTA_MAGIC: &[u8; 4] = b"CKID";
/// Delta versions: 4 holds version-4 blocks and the base's device map, 3
/// version-4 blocks, 2 version-3 blocks (3 and 2 are still read).
pub(super) const DELTA_VERSION: u32 = 4;
const DELTA_VERSION_NO_MAP: u32 = 3;
const OLD_DELTA_VERSION: u32 = 2;

/// A base index file, as loaded or written.
pub struct Base {
    /// The file's bytes, when loaded (records loaded from it point into
    /// them); `None` for a base this process wrote.
    pub(super) buf: Option<Buf>,
    /// Its length.
    pub(super) len: usize,
    /// Its trailer: BLAKE3 of everything before it (what a delta names).
    pub(super) id: Hash,
    pub(super) generation: u64,
    /// Written in the current version: a delta (whose records are always
    /// in the current encoding) is only made against such a base.
    pub(super) current: bool,
    /// The file it was read from or written as, held open so that its
    /// inode cannot be reused: a delta is written only while the path
    /// still names it.
    pub(super) file: Option<File>,
    /// Its device map (from its delta, or [`Index::remap_dev`]), which
    /// every delta against it repeats.
    pub(super) dev_map: Option<DevMap>,
    /// The bytes of the file this index was last loaded from, which its
    /// unchanged records still point into: `buf` for a loaded base, and
    /// carried over to the bases this process writes after it.
    pub(super) loaded: Option<Buf>,
}

impl std::fmt::Debug for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Base({} bytes, {:?})", self.len, self.id)
    }
}

impl Base {
    /// Whether `path` still names the file this base was read from.
    pub(super) fn is_current(&self, path: &Path) -> bool {
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

/// A parsed file: header fields, then `u32:ndirs (u32:block_len dir)*`.
pub(super) struct Parsed<R> {
    pub(super) generation: u64,
    pub(super) scan_start_ns: i64,
    pub(super) base_id: Option<Hash>,
    /// A delta's device map for its base.
    pub(super) dev_map: Option<DevMap>,
    pub(super) removed: Vec<Vec<u8>>,
    /// In the current encoding (version 4 blocks).
    pub(super) v4: bool,
    pub(super) records: R,
}

/// Where [`parse`] puts a file's records: a base's straight into its map,
/// a delta's into a list that is then applied over its base.
pub(super) trait Records: Send {
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
pub(super) fn body_hash(body: &[u8]) -> Hash {
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
pub(super) fn parse<R: Records>(buf: &Buf, delta: bool) -> Result<Parsed<R>> {
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
pub(super) fn corrupt(delta: bool) -> Error {
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
pub(super) fn replace(
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
pub(super) fn trailer(bytes: &[u8]) -> Hash {
    Hash(bytes[bytes.len() - 32..].try_into().expect("32 bytes"))
}

pub(super) fn remove_delta(path: &Path) -> Result<()> {
    let d = delta_path(path);
    match std::fs::remove_file(&d) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", d, e)),
    }
}
