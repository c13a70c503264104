//! The canonical element of one workspace entry: the exact bytes whose LtHash16
//! contribution represents "this path exists, with this kind, these permission
//! bits and this content".
//!
//! Owns: [`EntryKind`], [`Entry`], the element encoding ([`encode_entry`]) and
//! [`entry_element`].
//!
//! Invariants:
//! - The encoding is injective: a fixed tag, three fixed-width fields, then two
//!   variable fields each preceded by its u64 little-endian length. Two entries
//!   that differ in any encoded field have different element bytes (a decoder
//!   in the tests recovers every field and requires all bytes consumed).
//! - Only `mode & 0o7777` is encoded; for symlinks the mode is encoded as 0
//!   (Linux cannot set a symlink's mode, so it cannot be restored or compared).
//! - [`entry_element`] streams exactly the bytes of [`encode_entry`] into BLAKE3;
//!   no allocation, and the two can never disagree (tested).
//! - mtime, ctime, inode, owner, size-on-disk are not encoded (see crate docs).

use crate::lthash::LtHash;

/// Domain-separation tag at the start of every entry element (22 bytes, ASCII).
pub const ENTRY_TAG: &[u8; 22] = b"ckpt-lthash16-entry-v1";

/// Permission bits that are bound into an element.
pub const PERM_MASK: u32 = 0o7777;

/// Byte length of the fixed-width prefix: tag, kind (1), mode (4).
const FIXED_LEN: usize = ENTRY_TAG.len() + 1 + 4;

/// Elements up to this many bytes (paths up to ~430 bytes for a file) are
/// assembled on the stack and absorbed with one `update`, which is cheaper
/// than five small ones; longer ones are streamed piece by piece.
const INLINE_LEN: usize = 512;

/// The kind of a workspace entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    /// A regular file; content = 32-byte BLAKE3 of its bytes.
    File,
    /// A directory; content = empty.
    Dir,
    /// A symbolic link; content = the raw target bytes.
    Symlink,
}

impl EntryKind {
    /// The kind byte in the element encoding.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Dir => 2,
            EntryKind::Symlink => 3,
        }
    }

    /// Inverse of [`code`](Self::code).
    #[must_use]
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(EntryKind::File),
            2 => Some(EntryKind::Dir),
            3 => Some(EntryKind::Symlink),
            _ => None,
        }
    }
}

/// The mode actually encoded for `kind`: `mode & 0o7777`, or 0 for symlinks.
#[must_use]
pub const fn encoded_mode(kind: EntryKind, mode: u32) -> u32 {
    match kind {
        EntryKind::Symlink => 0,
        EntryKind::File | EntryKind::Dir => mode & PERM_MASK,
    }
}

/// One workspace entry, borrowed.
///
/// `path` is the path relative to the workspace root as raw bytes
/// (any bytes, including non-UTF-8, newlines and NUL; the caller's canonical
/// form, e.g. `/`-separated without `./` or a trailing `/`). `mode` may be a
/// full `st_mode`; only the permission bits are used. `content` is, by
/// convention: File → the 32-byte BLAKE3 of the file's bytes; Dir → empty;
/// Symlink → the link target bytes. The typed constructors enforce it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry<'a> {
    /// Relative path bytes.
    pub path: &'a [u8],
    /// Entry kind.
    pub kind: EntryKind,
    /// Mode (only `& 0o7777` is bound; ignored for symlinks).
    pub mode: u32,
    /// Content digest / symlink target / empty.
    pub content: &'a [u8],
}

impl<'a> Entry<'a> {
    /// A regular file with the BLAKE3 digest of its content.
    #[must_use]
    pub const fn file(path: &'a [u8], mode: u32, content_digest: &'a [u8; 32]) -> Self {
        Self {
            path,
            kind: EntryKind::File,
            mode,
            content: content_digest,
        }
    }

    /// A directory.
    #[must_use]
    pub const fn dir(path: &'a [u8], mode: u32) -> Self {
        Self {
            path,
            kind: EntryKind::Dir,
            mode,
            content: &[],
        }
    }

    /// A symbolic link with its raw target bytes.
    #[must_use]
    pub const fn symlink(path: &'a [u8], target: &'a [u8]) -> Self {
        Self {
            path,
            kind: EntryKind::Symlink,
            mode: 0o777,
            content: target,
        }
    }

    /// The canonical element bytes (see [`encode_entry`]).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        encode_entry(self.path, self.kind, self.mode, self.content)
    }

    /// The LtHash16 contribution of this entry (see [`entry_element`]).
    #[must_use]
    pub fn element(&self) -> LtHash {
        entry_element(self.path, self.kind, self.mode, self.content)
    }

    /// Length of the element bytes.
    fn encoded_len(&self) -> usize {
        FIXED_LEN + 8 + self.path.len() + 8 + self.content.len()
    }

    /// Passes the element bytes to `f` in order, in pieces: the one
    /// definition of the layout that [`encode_entry`] and the hasher share.
    fn pieces(&self, mut f: impl FnMut(&[u8])) {
        let mut fixed = [0u8; FIXED_LEN];
        fixed[..ENTRY_TAG.len()].copy_from_slice(ENTRY_TAG);
        fixed[ENTRY_TAG.len()] = self.kind.code();
        fixed[ENTRY_TAG.len() + 1..]
            .copy_from_slice(&encoded_mode(self.kind, self.mode).to_le_bytes());
        f(&fixed);
        f(&(self.path.len() as u64).to_le_bytes());
        f(self.path);
        f(&(self.content.len() as u64).to_le_bytes());
        f(self.content);
    }

    /// A BLAKE3 hasher that has absorbed the element bytes.
    pub(crate) fn hasher(&self) -> blake3::Hasher {
        let mut h = blake3::Hasher::new();
        if self.encoded_len() <= INLINE_LEN {
            let mut buf = [0u8; INLINE_LEN];
            let mut n = 0;
            self.pieces(|p| {
                buf[n..n + p.len()].copy_from_slice(p);
                n += p.len();
            });
            h.update(&buf[..n]);
        } else {
            self.pieces(|p| {
                h.update(p);
            });
        }
        h
    }
}

/// The canonical element bytes of one entry:
///
/// ```text
/// offset        size  field
/// 0             22    ENTRY_TAG = "ckpt-lthash16-entry-v1" (ASCII)
/// 22            1     kind: 1 = file, 2 = dir, 3 = symlink
/// 23            4     mode: u32 LE, mode & 0o7777 (0 for symlinks)
/// 27            8     P = path length, u64 LE
/// 35            P     path bytes
/// 35+P          8     C = content length, u64 LE
/// 43+P          C     content (file: 32-byte BLAKE3 of content; dir: empty;
///                              symlink: target bytes)
/// ```
#[must_use]
pub fn encode_entry(path: &[u8], kind: EntryKind, mode: u32, content: &[u8]) -> Vec<u8> {
    let e = Entry {
        path,
        kind,
        mode,
        content,
    };
    let mut out = Vec::with_capacity(e.encoded_len());
    e.pieces(|p| out.extend_from_slice(p));
    debug_assert_eq!(out.len(), e.encoded_len());
    out
}

/// The LtHash16 contribution of one entry: `LtHash::of_element(&encode_entry(..))`,
/// computed without allocating.
#[must_use]
pub fn entry_element(path: &[u8], kind: EntryKind, mode: u32, content: &[u8]) -> LtHash {
    LtHash::of_hasher(
        &Entry {
            path,
            kind,
            mode,
            content,
        }
        .hasher(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_exact() {
        let e = encode_entry(b"a/b", EntryKind::File, 0o100_644, &[7u8; 32]);
        assert_eq!(&e[..22], b"ckpt-lthash16-entry-v1");
        assert_eq!(e[22], 1);
        assert_eq!(&e[23..27], &0o644u32.to_le_bytes());
        assert_eq!(&e[27..35], &3u64.to_le_bytes());
        assert_eq!(&e[35..38], b"a/b");
        assert_eq!(&e[38..46], &32u64.to_le_bytes());
        assert_eq!(&e[46..], &[7u8; 32]);
        assert_eq!(e.len(), 43 + 3 + 32);
    }

    #[test]
    fn kind_codes_roundtrip() {
        for k in [EntryKind::File, EntryKind::Dir, EntryKind::Symlink] {
            assert_eq!(EntryKind::from_code(k.code()), Some(k));
        }
        assert_eq!(EntryKind::from_code(0), None);
        assert_eq!(EntryKind::from_code(4), None);
    }

    #[test]
    fn mode_is_masked_and_symlink_mode_ignored() {
        let d = [1u8; 32];
        assert_eq!(
            encode_entry(b"f", EntryKind::File, 0o100_755, &d),
            encode_entry(b"f", EntryKind::File, 0o755, &d)
        );
        assert_ne!(
            encode_entry(b"f", EntryKind::File, 0o4755, &d),
            encode_entry(b"f", EntryKind::File, 0o755, &d)
        );
        assert_eq!(
            entry_element(b"l", EntryKind::Symlink, 0o777, b"t"),
            entry_element(b"l", EntryKind::Symlink, 0o120_000, b"t")
        );
    }

    #[test]
    fn streamed_element_equals_encoded_element() {
        for (p, k, m, c) in [
            (&b""[..], EntryKind::Dir, 0u32, &b""[..]),
            (b"x\0y\n", EntryKind::File, 0o600, &[9u8; 32][..]),
            (b"link", EntryKind::Symlink, 0o777, b"../target"),
        ] {
            assert_eq!(
                entry_element(p, k, m, c),
                LtHash::of_element(&encode_entry(p, k, m, c))
            );
        }
        let long = vec![b'p'; 5000];
        assert_eq!(
            Entry::dir(&long, 0o755).element(),
            LtHash::of_element(&Entry::dir(&long, 0o755).encode())
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Both hasher paths (one stack buffer up to INLINE_LEN, streamed
        /// beyond) absorb exactly the encoded bytes, at every length around
        /// the switch.
        #[test]
        fn element_equals_encoded_around_the_inline_limit(
            path_len in (INLINE_LEN - FIXED_LEN - 16 - 40)..(INLINE_LEN - FIXED_LEN - 16 + 40),
            content in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            kind in 1u8..4,
            mode in proptest::prelude::any::<u32>(),
        ) {
            let path: Vec<u8> = (0..path_len).map(|i| (i % 251) as u8).collect();
            let kind = EntryKind::from_code(kind).unwrap();
            proptest::prop_assert_eq!(
                entry_element(&path, kind, mode, &content),
                LtHash::of_element(&encode_entry(&path, kind, mode, &content))
            );
        }
    }
}
