//! `ckpt-lthash`: the LtHash16 homomorphic set hash and the canonical element
//! of one workspace entry, used by `ckpt` for checkpoint state digests
//! (incremental on `ckpt save`, recomputed by `ckpt verify` and `ckpt hash`).
//!
//! Owns: the construction ([`LtHash`]), the entry element encoding
//! ([`encode_entry`], [`entry_element`]) and the digest accumulator
//! ([`Digest`], [`par_digest`], [`try_par_digest`]). It does no I/O: callers
//! read directories and files and pass paths, kinds, modes and content digests.
//!
//! # Construction (LtHash16, 1024 lanes)
//!
//! A state is 1024 lanes of `u16` (2048 bytes). The contribution of an element
//! (a byte string `m`) is `BLAKE3-XOF(m)` truncated to 2048 bytes and read as
//! 1024 little-endian `u16`. The digest of a multiset of elements is the
//! lane-wise sum mod 2^16 of their contributions; removing an element is the
//! lane-wise wrapping subtraction. The empty set is the all-zero state. The
//! 32-byte checksum is `BLAKE3-256(state as 2048 little-endian bytes)`; the
//! full state is exchanged as those 2048 bytes or as unpadded URL-safe base64
//! (2731 characters).
//!
//! This is byte-for-byte the construction of Solana's accounts lattice hash:
//! the unit tests check `LtHash::of_element(b"hello")` against the checksum
//! pinned in `solana-lattice-hash`'s own test suite.
//!
//! ## Why not depend on `solana-lattice-hash`
//!
//! Checked 2026-11 (`cargo info`, source of 3.1.14 and 4.5.0-alpha.4 read): it is exactly this
//! construction, in ~60 lines, but
//! - since 3.1 the crate is marked part of the "Agave Unstable API"; 4.x
//!   compiles only with the `agave-unstable-api` feature, acknowledging an
//!   interface "that may break without warning", and the current 4.5 alpha
//!   needs `rust-version = 1.99.1` and edition 2024 (we build with 1.85+/1.95);
//! - it pulls `bs58`, `bytemuck` and an older `base64` for a `Display` we do
//!   not want (standard base64 / base58, where `ckpt` needs base64url), and its
//!   `Debug` prints all 1024 lanes;
//! - it has no notion of our entry element, serde, or byte round-trips.
//!
//! The arithmetic is ~100 lines over the `blake3` crate, so we own it and pin
//! interoperability with a test vector instead. (4.x also has a Firedancer-style
//! batched AVX2/AVX-512 multi-message kernel; worth revisiting if element
//! hashing ever dominates `ckpt verify`.)
//!
//! # Element of a workspace entry
//!
//! ```text
//! offset  size  field
//! 0       22    tag "ckpt-lthash16-entry-v1" (ASCII, domain separation)
//! 22      1     kind: 1 = file, 2 = dir, 3 = symlink
//! 23      4     mode: u32 little-endian, st_mode & 0o7777; 0 for symlinks
//! 27      8     P: path length, u64 little-endian
//! 35      P     path: relative path bytes (any bytes: non-UTF-8, '\n', NUL)
//! 35+P    8     C: content length, u64 little-endian
//! 43+P    C     content: file → 32-byte BLAKE3 of the file's bytes;
//!                        dir → empty; symlink → raw target bytes
//! ```
//!
//! The element is `LtHash::of_element(those bytes)`. The fixed tag and
//! fixed-width fields followed by length-prefixed variable fields make the
//! encoding injective (it can be parsed back uniquely), so two different
//! entries never share element bytes. Because the path is in every element,
//! a rename, a chmod, swapping the contents of two files, or turning a file
//! into a symlink all change the digest, and many identical files (e.g.
//! 65,536 empty ones, which cancel out in a content-only LtHash16 since
//! 2^16 · x ≡ 0) stay distinct. Symlink modes are not bound because Linux
//! cannot set them and a restore could never reproduce them.
//!
//! ## Why mtime (and owner, inode, ctime) are excluded
//!
//! The digest certifies *what a tree contains*: names, structure, permission
//! bits and bytes. A faithful restore rewrites files and gets new mtimes; a
//! `git checkout`, `cp -r` or another machine holds the same tree with other
//! timestamps. Binding mtime would make `ckpt verify` fail on correct restores
//! and make two machines' digests of the same content disagree. mtime stays a
//! *cache key* (the stat cache decides what to re-hash); it is never evidence.
//! Owner and group are excluded for the same reason (a restore by another user).
//!
//! # Security notes
//!
//! LtHash is the lattice-based homomorphic hash of Bellare and Micciancio
//! ("A New Paradigm for Collision-free Hashing: Incrementality at Reduced
//! Cost", EUROCRYPT 1997), instantiated as in Lewi, Kim, Maykov and Weis
//! ("Securing Update Propagation with Homomorphic Hashing", Facebook, 2019):
//! with n = 1024 lanes of 16 bits, finding a collision reduces to a hard
//! short-vector problem; that paper estimates roughly 200 bits of security for
//! LtHash16 with 1024 lanes (the parameters also used by Solana). Caveats:
//! - it is a *multiset* hash: the same element added 2^16 times vanishes.
//!   Workspaces have unique paths, so each element appears at most once; the
//!   caller must not insert one path twice.
//! - the digest is not a MAC: anyone can compute it; it proves equality of
//!   states, not who produced them.
//! - a 32-byte checksum comparison inherits BLAKE3's 128-bit collision bound.
//!
//! # Performance
//!
//! Lane add/sub of two states is SSE2-vectorised loops. One element is the
//! 2048-byte BLAKE3 XOF (32 compressions of one root block) plus the lane
//! adds: on an AVX-512 CPU blake3 computes the 32 blocks side by side
//! (`xof_many`) because the whole output is asked for in one `fill`; on an
//! AVX2-only CPU one after another, several times slower. Figures:
//! BENCHMARKS.md ("Integrity") and `BENCH_RESULTS.md`.
//!
//! # Example
//!
//! ```
//! use ckpt_lthash::{Digest, Entry, EntryKind};
//! let content = blake3::hash(b"fn main() {}\n");
//! let mut d = Digest::new();
//! d.insert(b"src", EntryKind::Dir, 0o755, &[]);
//! d.insert(b"src/main.rs", EntryKind::File, 0o644, content.as_bytes());
//! let before = d.checksum();
//! // chmod +x src/main.rs: subtract the old element, add the new one.
//! d.replace(
//!     &Entry::file(b"src/main.rs", 0o644, content.as_bytes()),
//!     &Entry::file(b"src/main.rs", 0o755, content.as_bytes()),
//! );
//! assert_ne!(d.checksum(), before);
//! ```

mod digest;
mod entry;
mod lthash;

pub use digest::{par_digest, try_par_digest, Digest};
pub use entry::{
    encode_entry, encoded_mode, entry_element, Entry, EntryKind, ENTRY_TAG, PERM_MASK,
};
pub use lthash::{DecodeError, LtHash, CHECKSUM_BYTES, LANES, STATE_BYTES};

/// Re-exported so callers can stream element bytes into
/// [`LtHash::of_hasher`] / [`LtHash::add_xof`] with the same `blake3` version.
pub use blake3;
