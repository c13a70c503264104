//! `verified`: the stat each object had when this store last hashed it and
//! found it intact, so that writing a checkpoint's files from its objects
//! (a fork) does not hash again an object that has not changed since
//! ([`VerifiedStats::vouches`]). Only a cache: a missing, torn or foreign
//! file costs hashing every object again, never a wrong file.
//!
//! Why a matching stat is enough. An object is a read-only (0444) file
//! named by its content that no ckpt code opens for writing; a save only
//! adds new names with `RENAME_NOREPLACE`, gc only unlinks names. What
//! could still change an object's bytes is someone else writing it (after
//! a `chmod`, or as root): every write through `write(2)`, `truncate(2)`
//! or a shared `mmap` sets the file's mtime to the current time, and
//! replacing the object by another file changes its inode. An entry holds
//! the object's inode, size and mtime as `fstat` gave them on the open
//! descriptor just before the hash that found it intact, and is kept only
//! when that mtime was older than [`RACY_WINDOW_NS`] at that moment (so a
//! later write in the same timestamp tick cannot leave the mtime equal).
//! An object whose inode, size and mtime still equal its entry has
//! therefore not been written since it was hashed: the trust the stat
//! index puts in a workspace file's stat, without the ctime, which a hard
//! link to the object (every fork's store has one) changes.
//!
//! What it does not catch: damage below the filesystem (bit rot, which on
//! a filesystem without data checksums only a re-read finds) and a write
//! followed by a deliberate `utimensat` back to the old mtime. `ckpt
//! verify --store` re-hashes every object whatever this file says.
//!
//! Format: docs/FORMAT.md ("Verified objects"). Written by a process
//! holding the store's lock, so one fixed temporary name serves.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::IoContext;
use crate::store::index::RACY_WINDOW_NS;
use crate::{Hash, Result};
use ckpt_fs::fs::Meta;

/// The file's name in a store.
pub const FILE: &str = "verified";
const MAGIC: &[u8; 4] = b"CKVF";
const VERSION: u32 = 1;
const ENTRY: usize = 32 + 8 + 8 + 8;

/// What an entry holds of an object's stat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    ino: u64,
    size: u64,
    mtime_ns: i64,
}

impl Seen {
    fn of(m: &Meta) -> Seen {
        Seen {
            ino: m.ino,
            size: m.size,
            mtime_ns: m.mtime_ns,
        }
    }
}

/// The entries of one store's `verified` file, as loaded, and those added
/// since (objects hashed and found intact by this operation).
#[derive(Debug, Default)]
pub struct VerifiedStats {
    loaded: HashMap<Hash, Seen>,
    added: Mutex<HashMap<Hash, Seen>>,
}

impl VerifiedStats {
    /// The entries of the store at `store` (none when its file is missing,
    /// torn or of another version).
    pub fn load(store: &Path) -> VerifiedStats {
        let _t = crate::trace::span("verified load");
        let loaded = std::fs::read(store.join(FILE))
            .ok()
            .and_then(|b| decode(&b))
            .unwrap_or_default();
        VerifiedStats {
            loaded,
            added: Mutex::default(),
        }
    }

    /// Whether the object `h` of `size` bytes, now open with stat `m`, is
    /// the file an entry recorded when it was found intact: same inode,
    /// size and mtime (see the module doc).
    pub fn vouches(&self, h: &Hash, size: u64, m: &Meta) -> bool {
        m.size == size && self.loaded.get(h) == Some(&Seen::of(m))
    }

    /// Records that the object `h`, whose stat was `m` just before it was
    /// hashed, was found intact; `now_ns`: the time of that stat. An object
    /// modified within [`RACY_WINDOW_NS`] of it is not recorded.
    pub fn add(&self, h: Hash, m: &Meta, now_ns: i64) {
        if m.mtime_ns < now_ns - RACY_WINDOW_NS {
            self.added.lock().unwrap().insert(h, Seen::of(m));
        }
    }

    /// Writes the loaded entries and the added ones as the `verified` file
    /// of each store of `stores` (the origin's, and a fork's whose objects
    /// are hard links to the same inodes; an entry that names another
    /// inode than a store's object never vouches for it). Nothing is
    /// written when nothing was added.
    pub fn save(&self, stores: &[&Path]) -> Result<()> {
        let added = self.added.lock().unwrap();
        if added.is_empty() {
            return Ok(());
        }
        let _t = crate::trace::span("verified save");
        let mut all = self.loaded.clone();
        all.extend(added.iter().map(|(h, s)| (*h, *s)));
        let bytes = encode(&all);
        for store in stores {
            replace(&store.join(FILE), &bytes)?;
        }
        Ok(())
    }
}

fn encode(all: &HashMap<Hash, Seen>) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + all.len() * ENTRY + 32);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    for (h, s) in all {
        b.extend_from_slice(&h.0);
        b.extend_from_slice(&s.ino.to_le_bytes());
        b.extend_from_slice(&s.size.to_le_bytes());
        b.extend_from_slice(&s.mtime_ns.to_le_bytes());
    }
    let t = blake3::hash(&b);
    b.extend_from_slice(t.as_bytes());
    b
}

fn decode(b: &[u8]) -> Option<HashMap<Hash, Seen>> {
    let body = b.len().checked_sub(32)?;
    if body < 8
        || (body - 8) % ENTRY != 0
        || &b[..4] != MAGIC
        || b[4..8] != VERSION.to_le_bytes()
        || blake3::hash(&b[..body]).as_bytes() != &b[body..]
    {
        return None;
    }
    let u = |x: &[u8]| u64::from_le_bytes(x.try_into().expect("8 bytes"));
    Some(
        b[8..body]
            .chunks_exact(ENTRY)
            .map(|e| {
                let h = Hash(e[..32].try_into().expect("32 bytes"));
                let s = Seen {
                    ino: u(&e[32..40]),
                    size: u(&e[40..48]),
                    mtime_ns: u(&e[48..56]) as i64,
                };
                (h, s)
            })
            .collect(),
    )
}

/// Replaces `path` with `bytes` (temporary file, rename; not fsynced: a
/// torn file fails its trailer and is taken as empty).
fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = PathBuf::from(path);
    tmp.set_extension("tmp");
    if let Err(e) = std::fs::write(&tmp, bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).ctx("write", &tmp);
    }
    std::fs::rename(&tmp, path).ctx("rename", path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ino: u64, size: u64, mtime_ns: i64) -> Meta {
        Meta {
            ino,
            size,
            mtime_ns,
            ..Meta::default()
        }
    }

    #[test]
    fn saved_entries_vouch_only_for_the_same_inode_size_and_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let now = 10_000_000_000;
        let v = VerifiedStats::default();
        let (a, b) = (Hash::of(b"a"), Hash::of(b"b"));
        v.add(a, &meta(7, 1, 1_000), now);
        // Modified within the racy window: not recorded.
        v.add(b, &meta(8, 1, now - 1), now);
        v.save(&[dir.path()]).unwrap();
        let l = VerifiedStats::load(dir.path());
        assert!(l.vouches(&a, 1, &meta(7, 1, 1_000)));
        assert!(!l.vouches(&a, 1, &meta(7, 1, 1_001)), "another mtime");
        assert!(!l.vouches(&a, 1, &meta(9, 1, 1_000)), "another inode");
        assert!(!l.vouches(&a, 2, &meta(7, 2, 1_000)), "another size");
        assert!(!l.vouches(&b, 1, &meta(8, 1, now - 1)), "racy");
        // A torn file vouches for nothing.
        let p = dir.path().join(FILE);
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
        assert!(!VerifiedStats::load(dir.path()).vouches(&a, 1, &meta(7, 1, 1_000)));
    }
}
