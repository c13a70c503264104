//! Banded objects: how the store keeps a large file as fixed-size,
//! content-addressed bands, so a small in-place edit of a 2 GB database
//! stores one new 8 MiB band instead of the whole file.
//!
//! A file's identity does not change: trees, the index and the LtHash state
//! digest still name it by the BLAKE3 of its whole content `H`, so whether a
//! file is banded is invisible outside the object store and `ckpt hash DIR`
//! keeps matching. The store holds, instead of the plain object
//! `objects/ab/cdef…`, a **manifest** `objects/ab/cdef….bands` (this
//! module's format) listing the bands, each of which is an ordinary plain
//! object named by the BLAKE3 of its bytes:
//!
//! ```text
//! manifest := "CKB1" u32:band_size u64:size u32:n [32]:band_hash*n [32]:blake3(all preceding bytes)
//! ```
//!
//! All integers little-endian; band `i` covers bytes
//! `i*band_size .. min((i+1)*band_size, size)`, and `n = ceil(size /
//! band_size)`. A manifest is only renamed into `objects/` after all its
//! bands are durable under their final names (see `Objects::commit`), so a
//! manifest never names a missing band.

use crate::{Error, Hash, Result};

/// The band size: 8 MiB.
pub const BAND: u64 = 8 << 20;
/// Files of at least this size are banded when the store cannot reflink
/// (`CKPT_BAND_MIN` overrides it).
pub const DEFAULT_BAND_MIN: u64 = 64 << 20;
/// The suffix of a manifest's name.
pub const SUFFIX: &[u8] = b".bands";
const MAGIC: &[u8; 4] = b"CKB1";

/// A decoded manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Bytes per band (the last band may be shorter).
    pub band_size: u64,
    /// The file's length.
    pub size: u64,
    /// Each band's hash, in order.
    pub bands: Vec<Hash>,
}

impl Manifest {
    /// `(offset, length)` of band `i`.
    pub fn range(&self, i: usize) -> (u64, u64) {
        let off = i as u64 * self.band_size;
        (off, self.band_size.min(self.size - off))
    }

    /// The encoded form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 4 + 8 + 4 + 32 * self.bands.len() + 32);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.band_size as u32).to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.bands.len() as u32).to_le_bytes());
        for b in &self.bands {
            out.extend_from_slice(&b.0);
        }
        let sum = Hash::of(&out);
        out.extend_from_slice(&sum.0);
        out
    }

    /// Decodes and checks a manifest (`what` names it in errors).
    pub fn decode(bytes: &[u8], what: &str) -> Result<Manifest> {
        let bad = |why: &str| Error::Corrupt(format!("band manifest {what}: {why}"));
        if bytes.len() < 20 + 32 || &bytes[..4] != MAGIC {
            return Err(bad("not a CKB1 manifest"));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if Hash::of(body).0 != sum {
            return Err(bad("checksum mismatch"));
        }
        let band_size = u32::from_le_bytes(body[4..8].try_into().unwrap()) as u64;
        let size = u64::from_le_bytes(body[8..16].try_into().unwrap());
        let n = u32::from_le_bytes(body[16..20].try_into().unwrap()) as usize;
        if body.len() != 20 + 32 * n || band_size == 0 || size.div_ceil(band_size) != n as u64 {
            return Err(bad("inconsistent length"));
        }
        let bands = body[20..]
            .chunks_exact(32)
            .map(|c| Hash(c.try_into().unwrap()))
            .collect();
        Ok(Manifest {
            band_size,
            size,
            bands,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips_and_detects_damage(size in 0u64..1 << 40, flip in any::<usize>()) {
            let band_size = BAND;
            let n = size.div_ceil(band_size).min(64);
            let size = size.min(n * band_size);
            let m = Manifest {
                band_size,
                size,
                bands: (0..n).map(|i| Hash::of(&i.to_le_bytes())).collect(),
            };
            let enc = m.encode();
            prop_assert_eq!(Manifest::decode(&enc, "t").unwrap(), m);
            let mut bad = enc.clone();
            let i = flip % bad.len();
            bad[i] ^= 1;
            prop_assert!(Manifest::decode(&bad, "t").is_err());
        }
    }
}
