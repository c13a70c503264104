//! The LtHash16 state: 1024 lanes of `u16`, combined lane-wise with wrapping
//! (mod 2^16) addition and subtraction.
//!
//! Owns: the [`LtHash`] type, the mapping "element bytes → contribution" (BLAKE3
//! XOF, 2048 bytes, read as 1024 little-endian `u16`), the 32-byte checksum
//! (BLAKE3-256 of the 2048-byte little-endian state), and the byte / base64url /
//! serde encodings of a state.
//!
//! Invariants:
//! - The in-memory lanes are plain numbers; every external byte form (XOF input,
//!   `to_bytes`, checksum input, base64url, serde) is little-endian, so results
//!   are identical on every host.
//! - `identity()` is the all-zero state, the digest of the empty multiset.
//! - `add`/`sub` form an abelian group: commutative, associative, `x + y - y == x`.
//! - The lane loops run over fixed-size arrays with no data-dependent control
//!   flow, so LLVM vectorises them (SSE2 `paddw`/`psubw` on baseline x86-64,
//!   NEON on aarch64); see `BENCH_RESULTS.md` for the measured cost.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// Number of `u16` lanes in a state.
pub const LANES: usize = 1024;
/// Size in bytes of a serialised state (`LANES * 2`).
pub const STATE_BYTES: usize = LANES * 2;
/// Size in bytes of a [`LtHash::checksum`].
pub const CHECKSUM_BYTES: usize = 32;

/// Errors from decoding a serialised [`LtHash`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The input decoded to the wrong number of bytes.
    #[error("LtHash state must be {STATE_BYTES} bytes, got {0}")]
    Length(usize),
    /// The input is not valid unpadded (or padded) URL-safe base64.
    #[error("invalid base64url LtHash state: {0}")]
    Base64(#[from] base64::DecodeError),
}

/// An LtHash16 state: 1024 lanes of `u16`.
///
/// It is the sum (mod 2^16, lane-wise) of the contributions of a multiset of
/// elements. Not `Copy` on purpose: it is 2 KiB.
#[derive(Clone, PartialEq, Eq)]
pub struct LtHash([u16; LANES]);

impl LtHash {
    /// The identity (all-zero) state: the digest of the empty multiset.
    #[must_use]
    pub const fn identity() -> Self {
        Self([0; LANES])
    }

    /// Whether this is the identity state.
    #[must_use]
    pub fn is_identity(&self) -> bool {
        self.0.iter().all(|&l| l == 0)
    }

    /// The contribution of one element: BLAKE3 XOF of `bytes`, 2048 bytes,
    /// read as 1024 little-endian `u16`.
    #[must_use]
    pub fn of_element(bytes: &[u8]) -> Self {
        let mut hasher = blake3::Hasher::new();
        hasher.update(bytes);
        Self::of_hasher(&hasher)
    }

    /// The contribution of the element whose bytes were already fed to
    /// `hasher` (a plain `blake3::Hasher::new()`), for callers that stream an
    /// element in pieces. Equal to `of_element(concatenation of the pieces)`.
    #[must_use]
    pub fn of_hasher(hasher: &blake3::Hasher) -> Self {
        let mut out = Self::identity();
        out.add_xof(hasher);
        out
    }

    /// Lane-wise wrapping add (multiset union).
    #[inline]
    pub fn add(&mut self, other: &Self) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a = a.wrapping_add(*b);
        }
    }

    /// Lane-wise wrapping subtract (multiset difference).
    #[inline]
    pub fn sub(&mut self, other: &Self) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a = a.wrapping_sub(*b);
        }
    }

    /// Adds the contribution of the element `bytes`, without materialising it
    /// as a separate `LtHash`.
    pub fn add_element(&mut self, bytes: &[u8]) {
        let mut hasher = blake3::Hasher::new();
        hasher.update(bytes);
        self.add_xof(&hasher);
    }

    /// Subtracts the contribution of the element `bytes`.
    pub fn remove_element(&mut self, bytes: &[u8]) {
        let mut hasher = blake3::Hasher::new();
        hasher.update(bytes);
        self.sub_xof(&hasher);
    }

    /// Adds the contribution of the element already fed to `hasher`.
    pub fn add_xof(&mut self, hasher: &blake3::Hasher) {
        self.apply_xof(hasher, u16::wrapping_add);
    }

    /// Subtracts the contribution of the element already fed to `hasher`.
    pub fn sub_xof(&mut self, hasher: &blake3::Hasher) {
        self.apply_xof(hasher, u16::wrapping_sub);
    }

    /// Combines the XOF output of `hasher` into the lanes with `op`. The
    /// whole 2048-byte output is asked for in one `fill`, so blake3 can
    /// compute its 32 output blocks in one batch (`xof_many`, several blocks
    /// per SIMD pass where the CPU has it: AVX-512 in blake3 1.8) instead of
    /// one compression call per block; the buffer stays in L1. The
    /// compressions themselves are the cost (see `BENCH_RESULTS.md`).
    #[inline]
    fn apply_xof(&mut self, hasher: &blake3::Hasher, op: impl Fn(u16, u16) -> u16) {
        let mut out = [0u8; STATE_BYTES];
        hasher.finalize_xof().fill(&mut out);
        for (lane, b) in self.0.iter_mut().zip(out.chunks_exact(2)) {
            *lane = op(*lane, u16::from_le_bytes([b[0], b[1]]));
        }
    }

    /// BLAKE3-256 of the 2048-byte little-endian state.
    #[must_use]
    pub fn checksum(&self) -> [u8; CHECKSUM_BYTES] {
        *blake3::hash(&self.to_bytes()).as_bytes()
    }

    /// The checksum as 64 lowercase hex digits.
    #[must_use]
    pub fn checksum_hex(&self) -> String {
        blake3::hash(&self.to_bytes()).to_hex().to_string()
    }

    /// The 2048-byte state, lanes little-endian.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; STATE_BYTES] {
        let mut out = [0u8; STATE_BYTES];
        for (i, lane) in self.0.iter().enumerate() {
            let b = lane.to_le_bytes();
            out[2 * i] = b[0];
            out[2 * i + 1] = b[1];
        }
        out
    }

    /// Inverse of [`to_bytes`](Self::to_bytes). Every 2048-byte string is a valid state.
    #[must_use]
    pub fn from_bytes(bytes: &[u8; STATE_BYTES]) -> Self {
        let mut out = Self::identity();
        for (i, lane) in out.0.iter_mut().enumerate() {
            *lane = u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
        }
        out
    }

    /// Like [`from_bytes`](Self::from_bytes) for a slice; errors unless it is exactly 2048 bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, DecodeError> {
        let arr: &[u8; STATE_BYTES] = bytes
            .try_into()
            .map_err(|_| DecodeError::Length(bytes.len()))?;
        Ok(Self::from_bytes(arr))
    }

    /// The state as URL-safe base64 without padding (2731 characters), the
    /// form printed by `ckpt hash --full`.
    #[must_use]
    pub fn to_base64url(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.to_bytes())
    }

    /// Parses [`to_base64url`](Self::to_base64url) output; trailing `=`
    /// padding is accepted, surrounding whitespace is not.
    pub fn from_base64url(s: &str) -> Result<Self, DecodeError> {
        let bytes = URL_SAFE_NO_PAD.decode(s.trim_end_matches('='))?;
        Self::from_slice(&bytes)
    }

    /// The lanes.
    #[must_use]
    pub fn lanes(&self) -> &[u16; LANES] {
        &self.0
    }

    /// A state from raw lanes.
    #[must_use]
    pub const fn from_lanes(lanes: [u16; LANES]) -> Self {
        Self(lanes)
    }
}

impl Default for LtHash {
    /// The identity.
    fn default() -> Self {
        Self::identity()
    }
}

impl fmt::Debug for LtHash {
    /// Short form: the first 8 bytes of the checksum.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.checksum_hex();
        write!(f, "LtHash({}…)", &hex[..16])
    }
}

impl std::ops::AddAssign<&LtHash> for LtHash {
    fn add_assign(&mut self, rhs: &LtHash) {
        self.add(rhs);
    }
}

impl std::ops::SubAssign<&LtHash> for LtHash {
    fn sub_assign(&mut self, rhs: &LtHash) {
        self.sub(rhs);
    }
}

impl<'a> std::iter::Sum<&'a LtHash> for LtHash {
    fn sum<I: Iterator<Item = &'a LtHash>>(iter: I) -> Self {
        let mut acc = Self::identity();
        for h in iter {
            acc.add(h);
        }
        acc
    }
}

/// Human-readable formats (JSON, TOML) get the base64url string; binary
/// formats get the 2048 raw bytes.
impl serde::Serialize for LtHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_base64url())
        } else {
            s.serialize_bytes(&self.to_bytes())
        }
    }
}

impl<'de> serde::Deserialize<'de> for LtHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = LtHash;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "a base64url string or {STATE_BYTES} bytes of LtHash state"
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<LtHash, E> {
                LtHash::from_base64url(v).map_err(E::custom)
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<LtHash, E> {
                LtHash::from_slice(v).map_err(E::custom)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<LtHash, A::Error> {
                let mut bytes = Vec::with_capacity(STATE_BYTES);
                while let Some(b) = seq.next_element::<u8>()? {
                    if bytes.len() == STATE_BYTES {
                        return Err(serde::de::Error::invalid_length(STATE_BYTES + 1, &self));
                    }
                    bytes.push(b);
                }
                LtHash::from_slice(&bytes).map_err(serde::de::Error::custom)
            }
        }
        if d.is_human_readable() {
            d.deserialize_str(V)
        } else {
            d.deserialize_bytes(V)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_zero_and_neutral() {
        let id = LtHash::identity();
        assert!(id.is_identity());
        let mut x = LtHash::of_element(b"x");
        let before = x.clone();
        x.add(&id);
        assert_eq!(x, before);
        x.sub(&id);
        assert_eq!(x, before);
        assert!(!x.is_identity());
    }

    #[test]
    fn xof_lanes_are_little_endian() {
        let mut xof = [0u8; STATE_BYTES];
        blake3::Hasher::new()
            .update(b"abc")
            .finalize_xof()
            .fill(&mut xof);
        let h = LtHash::of_element(b"abc");
        assert_eq!(h.lanes()[0], u16::from(xof[0]) | (u16::from(xof[1]) << 8));
        assert_eq!(h.lanes()[1023], u16::from_le_bytes([xof[2046], xof[2047]]));
        assert_eq!(h.to_bytes(), xof);
    }

    #[test]
    fn wrapping_at_lane_boundaries() {
        let mut a = LtHash::from_lanes([0xffff; LANES]);
        let mut one = [0u16; LANES];
        one[7] = 1;
        a.add(&LtHash::from_lanes(one));
        assert_eq!(a.lanes()[7], 0);
        assert_eq!(a.lanes()[6], 0xffff);
        a.sub(&LtHash::from_lanes(one));
        assert_eq!(a.lanes()[7], 0xffff);
        let mut z = LtHash::identity();
        z.sub(&LtHash::from_lanes(one));
        assert_eq!(z.lanes()[7], 0xffff);
    }

    #[test]
    fn add_element_matches_of_element_and_hasher() {
        let mut a = LtHash::identity();
        a.add_element(b"hello world");
        assert_eq!(a, LtHash::of_element(b"hello world"));
        let mut h = blake3::Hasher::new();
        h.update(b"hello ");
        h.update(b"world");
        assert_eq!(LtHash::of_hasher(&h), a);
        a.remove_element(b"hello world");
        assert!(a.is_identity());
    }

    #[test]
    fn byte_and_base64_roundtrip() {
        let mut s = LtHash::of_element(b"a");
        s.add_element(b"b");
        assert_eq!(LtHash::from_bytes(&s.to_bytes()), s);
        let b64 = s.to_base64url();
        assert_eq!(b64.len(), 2731);
        assert!(b64
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_eq!(LtHash::from_base64url(&b64).unwrap(), s);
        assert_eq!(LtHash::from_base64url(&format!("{b64}=")).unwrap(), s);
        assert_eq!(LtHash::from_base64url("AAAA"), Err(DecodeError::Length(3)));
        assert!(matches!(
            LtHash::from_base64url("!!!!"),
            Err(DecodeError::Base64(_))
        ));
        assert_eq!(
            LtHash::from_slice(&[0u8; 2047]),
            Err(DecodeError::Length(2047))
        );
    }

    #[test]
    fn checksum_is_blake3_of_le_state() {
        let s = LtHash::of_element(b"q");
        assert_eq!(s.checksum(), *blake3::hash(&s.to_bytes()).as_bytes());
        assert_eq!(
            s.checksum_hex(),
            blake3::hash(&s.to_bytes()).to_hex().as_str()
        );
    }

    #[test]
    fn debug_is_short() {
        let d = format!("{:?}", LtHash::identity());
        assert!(d.starts_with("LtHash(") && d.len() < 40, "{d}");
    }

    #[test]
    fn serde_json_is_base64url_string() {
        let s = LtHash::of_element(b"serde");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, format!("\"{}\"", s.to_base64url()));
        let back: LtHash = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        assert!(serde_json::from_str::<LtHash>("\"AAAA\"").is_err());
    }
}
