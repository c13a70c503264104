//! Pack files and their indexes: how many small blobs travel as one object.
//!
//! ```text
//! pack   := "CKPK" u32:version=1 0x00* blob* index u32:index_len "CKPE"
//! index  := "CKPI" u32:version=1 u32:n entry*n [32]:blake3(all preceding index bytes)
//! entry  := u8:kind [32]:hash u64:offset u64:stored_len u64:raw_len u8:codec
//! ```
//!
//! (little-endian; zero bytes may sit between the header and the first
//! blob, see [`Builder::pad`]). `kind` is 1 for file content, 2 for a tree (a shape,
//! [`crate::trees`]), 3 for an agent-state snapshot, 4 for an mtimes node
//! ([`crate::trees`]); `codec` 0 stores the bytes as
//! they are, 1 stores them zstd-compressed. `offset` counts from the start
//! of the pack. A blob's `hash` is the BLAKE3 of its raw (uncompressed)
//! bytes, the same name the local store gives it, so a reader checks every
//! blob it takes out of a pack against its name and length before using it
//! ([`decode_blob`]). The pack is named by the BLAKE3 of all its bytes and
//! its index is also stored alone as `index/<pack name>` (see
//! [`crate::layout`]); the copy at the end of the pack lets an interrupted
//! push recover an index it never uploaded ([`footer_len`]).
//!
//! Compression is tried per blob and kept only when it saves at least an
//! eighth (source text and JavaScript shrink 3–4×; already-compressed
//! files do not shrink and are stored raw, so pulling them costs no
//! decompression).

use ckpt_lib::Hash;

use crate::crypt::Keys;
use crate::{corrupt, Result};

const PACK_MAGIC: &[u8; 4] = b"CKPK";
const PACK_END: &[u8; 4] = b"CKPE";
const INDEX_MAGIC: &[u8; 4] = b"CKPI";
const VERSION: u32 = 1;
const ENTRY_LEN: usize = 1 + 32 + 8 + 8 + 8 + 1;
/// zstd level: fast, and most of the gain on text.
const ZSTD_LEVEL: i32 = 3;
/// Blobs smaller than this are stored raw (nothing to gain).
const MIN_COMPRESS: usize = 64;

/// What a blob is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// File content (an object of the local store).
    Object = 1,
    /// A tree without mtimes (a shape, [`crate::trees`]).
    Tree = 2,
    /// An agent-state snapshot.
    State = 3,
    /// An mtimes node ([`crate::trees`]).
    Mtimes = 4,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Object),
            2 => Some(Kind::Tree),
            3 => Some(Kind::State),
            4 => Some(Kind::Mtimes),
            _ => None,
        }
    }
}

/// One blob in a pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What it is.
    pub kind: Kind,
    /// BLAKE3 of the raw bytes.
    pub hash: Hash,
    /// Where its stored bytes start in the pack.
    pub offset: u64,
    /// Stored length.
    pub stored_len: u64,
    /// Raw length.
    pub raw_len: u64,
    /// 0 raw, 1 zstd.
    pub codec: u8,
}

/// Builds one pack.
pub struct Builder {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    raw: u64,
}

impl Default for Builder {
    fn default() -> Self {
        let mut bytes = Vec::with_capacity(1 << 20);
        bytes.extend_from_slice(PACK_MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        Builder {
            bytes,
            entries: Vec::new(),
            raw: 0,
        }
    }
}

impl Builder {
    /// Adds a blob (compressed when that pays).
    pub fn add(&mut self, kind: Kind, hash: Hash, raw: &[u8]) {
        let (stored, codec) = compress(raw);
        self.add_stored(
            kind,
            hash,
            raw.len() as u64,
            stored.as_deref().unwrap_or(raw),
            codec,
        );
    }

    /// Puts `n` zero bytes before the next blob (readers find blobs by
    /// their offsets only): the same blobs then make a pack of another
    /// name.
    pub fn pad(&mut self, n: usize) {
        self.bytes.resize(self.bytes.len() + n, 0);
    }

    /// Adds a blob already passed through [`compress`].
    pub fn add_stored(&mut self, kind: Kind, hash: Hash, raw_len: u64, stored: &[u8], codec: u8) {
        let offset = self.bytes.len() as u64;
        self.bytes.extend_from_slice(stored);
        self.raw += raw_len;
        self.entries.push(Entry {
            kind,
            hash,
            offset,
            stored_len: stored.len() as u64,
            raw_len,
            codec,
        });
    }

    /// Raw bytes added so far.
    pub fn raw_len(&self) -> u64 {
        self.raw
    }

    /// Stored bytes so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The finished pack: its name, bytes, and index bytes (sealed with
    /// `keys` on an encrypted remote, like each blob: [`seal_blob`]).
    pub fn finish(mut self, keys: Option<&Keys>) -> (Hash, Vec<u8>, Vec<u8>, Vec<Entry>) {
        let index = encode_index(&self.entries);
        let index = match keys {
            Some(k) => k.seal(INDEX_AAD, &index),
            None => index,
        };
        self.bytes.extend_from_slice(&index);
        self.bytes
            .extend_from_slice(&(index.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(PACK_END);
        let name = Hash::of(&self.bytes);
        (name, self.bytes, index, self.entries)
    }
}

/// How a blob is stored: `(Some(zstd bytes), 1)` when compression saves at
/// least an eighth, else `(None, 0)` (store the raw bytes).
pub fn compress(raw: &[u8]) -> (Option<Vec<u8>>, u8) {
    if raw.len() >= MIN_COMPRESS {
        if let Ok(z) = with_codec(|c| c.compress(raw)) {
            if z.len() <= raw.len() - raw.len() / 8 {
                return (Some(z), 1);
            }
        }
    }
    (None, 0)
}

/// One zstd compressor and decompressor per thread, made on first use:
/// a context per blob cost more than decoding a small blob.
struct Codec {
    c: zstd::bulk::Compressor<'static>,
    d: zstd::bulk::Decompressor<'static>,
}

impl Codec {
    fn compress(&mut self, raw: &[u8]) -> std::io::Result<Vec<u8>> {
        self.c.compress(raw)
    }

    fn decompress(&mut self, stored: &[u8], cap: usize) -> std::io::Result<Vec<u8>> {
        self.d.decompress(stored, cap)
    }
}

fn with_codec<T>(f: impl FnOnce(&mut Codec) -> std::io::Result<T>) -> std::io::Result<T> {
    thread_local!(static CODEC: std::cell::RefCell<Option<Codec>> = const { std::cell::RefCell::new(None) });
    CODEC.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(Codec {
                c: zstd::bulk::Compressor::new(ZSTD_LEVEL)?,
                d: zstd::bulk::Decompressor::new()?,
            });
        }
        f(cell.as_mut().expect("made above"))
    })
}

/// Associated data of a sealed index.
const INDEX_AAD: &[u8] = b"ckpt pack index";

/// Associated data of a sealed blob: its kind and hash, so a blob moved to
/// another entry does not open.
fn blob_aad(kind: Kind, hash: &Hash) -> [u8; 33] {
    let mut a = [0u8; 33];
    a[0] = kind as u8;
    a[1..].copy_from_slice(&hash.0);
    a
}

/// A blob's stored bytes (compressed or not) sealed for an encrypted
/// remote (crate::crypt).
pub fn seal_blob(keys: &Keys, kind: Kind, hash: &Hash, stored: &[u8]) -> Vec<u8> {
    keys.seal(&blob_aad(kind, hash), stored)
}

/// Decodes an index as stored (opened with `keys` on an encrypted remote).
pub fn open_index(keys: Option<&Keys>, b: &[u8], what: &str) -> Result<Vec<Entry>> {
    match keys {
        Some(k) => {
            let plain = k.open(INDEX_AAD, b).ok_or_else(|| {
                crate::Error::Tampered(format!(
                    "pack index {what} does not open with this remote's key: it was damaged or \
                     tampered with"
                ))
            })?;
            decode_index(&plain, what)
        }
        None => decode_index(b, what),
    }
}

/// Encodes an index.
pub fn encode_index(entries: &[Entry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(12 + entries.len() * ENTRY_LEN + 32);
    b.extend_from_slice(INDEX_MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        b.push(e.kind as u8);
        b.extend_from_slice(&e.hash.0);
        b.extend_from_slice(&e.offset.to_le_bytes());
        b.extend_from_slice(&e.stored_len.to_le_bytes());
        b.extend_from_slice(&e.raw_len.to_le_bytes());
        b.push(e.codec);
    }
    let sum = Hash::of(&b);
    b.extend_from_slice(&sum.0);
    b
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes an index, checking its checksum and every field; `what` names
/// it in errors.
pub fn decode_index(b: &[u8], what: &str) -> Result<Vec<Entry>> {
    let bad = |why: &str| corrupt(format!("pack index {what}: {why}"));
    if b.len() < 12 + 32 || &b[..4] != INDEX_MAGIC {
        return Err(bad("not a pack index"));
    }
    let (body, sum) = b.split_at(b.len() - 32);
    if Hash::of(body).0 != sum {
        return Err(bad("checksum mismatch"));
    }
    if u32::from_le_bytes(b[4..8].try_into().expect("4")) != VERSION {
        return Err(bad("unknown version (upgrade ckpt)"));
    }
    let n = u32::from_le_bytes(b[8..12].try_into().expect("4")) as usize;
    if body.len() != 12 + n * ENTRY_LEN {
        return Err(bad("wrong length"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let e = &body[12 + i * ENTRY_LEN..12 + (i + 1) * ENTRY_LEN];
        let kind = Kind::from_u8(e[0]).ok_or_else(|| bad("unknown blob kind"))?;
        let codec = e[57];
        if codec > 1 {
            return Err(bad("unknown codec"));
        }
        out.push(Entry {
            kind,
            hash: Hash(e[1..33].try_into().expect("32")),
            offset: u64_at(e, 33),
            stored_len: u64_at(e, 41),
            raw_len: u64_at(e, 49),
            codec,
        });
    }
    Ok(out)
}

/// The length of a pack's index, from the pack's last 8 bytes (`tail`).
pub fn footer_len(tail: &[u8], what: &str) -> Result<u64> {
    if tail.len() != 8 || &tail[4..] != PACK_END {
        return Err(corrupt(format!("pack {what}: no pack footer")));
    }
    Ok(u32::from_le_bytes(tail[..4].try_into().expect("4")) as u64)
}

/// Takes blob `e` out of its stored bytes (opened with `keys` on an
/// encrypted remote), checking its length and hash; `what` names the pack
/// in errors.
pub fn decode_blob(keys: Option<&Keys>, e: &Entry, stored: &[u8], what: &str) -> Result<Vec<u8>> {
    let opened;
    let stored = match keys {
        Some(k) => {
            opened = k.open(&blob_aad(e.kind, &e.hash), stored).ok_or_else(|| {
                crate::Error::Tampered(format!(
                    "blob {} in pack {what} is damaged: it does not open with this remote's key \
                     (damaged or tampered with)",
                    e.hash
                ))
            })?;
            &opened[..]
        }
        None => stored,
    };
    let raw = match e.codec {
        0 => stored.to_vec(),
        _ => with_codec(|c| c.decompress(stored, e.raw_len as usize)).map_err(|err| {
            corrupt(format!(
                "blob {} in pack {what} does not decompress: {err}",
                e.hash
            ))
        })?,
    };
    if raw.len() as u64 != e.raw_len || Hash::of(&raw) != e.hash {
        return Err(corrupt(format!(
            "blob {} in pack {what} is damaged: {} bytes hashing to {}, expected {} bytes",
            e.hash,
            raw.len(),
            Hash::of(&raw),
            e.raw_len
        )));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trip_and_damage_is_named() {
        let mut b = Builder::default();
        let text = b"console.log('hello');\n".repeat(100);
        let mut noise = vec![0u8; 5000];
        blake3::Hasher::new().finalize_xof().fill(&mut noise);
        b.add(Kind::Object, Hash::of(&text), &text);
        b.add(Kind::Tree, Hash::of(&noise), &noise);
        b.add(Kind::State, Hash::of(b"x"), b"x");
        let (name, mut bytes, index, entries) = b.finish(None);
        assert_eq!(name, Hash::of(&bytes));
        assert_eq!(entries[0].codec, 1, "text compresses");
        assert_eq!(entries[1].codec, 0, "noise is stored raw");
        let tail = &bytes[bytes.len() - 8..];
        let n = footer_len(tail, "p").unwrap() as usize;
        let at = bytes.len() - 8 - n;
        assert_eq!(&bytes[at..bytes.len() - 8], index.as_slice());
        let dec = decode_index(&index, "p").unwrap();
        assert_eq!(dec, entries);
        for (e, raw) in dec.iter().zip([&text[..], &noise[..], b"x"]) {
            let s = &bytes[e.offset as usize..(e.offset + e.stored_len) as usize];
            assert_eq!(decode_blob(None, e, s, "p").unwrap(), raw);
        }
        bytes[entries[1].offset as usize + 3] ^= 1;
        let e = &entries[1];
        let s = &bytes[e.offset as usize..(e.offset + e.stored_len) as usize];
        let err = decode_blob(None, e, s, "p").unwrap_err().to_string();
        assert!(
            err.contains(&e.hash.to_hex()) && err.contains("damaged"),
            "{err}"
        );
        let mut idx = index.clone();
        idx[20] ^= 1;
        assert!(decode_index(&idx, "p").is_err());
    }
}
