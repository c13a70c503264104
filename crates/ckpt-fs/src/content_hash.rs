//! Reading and hashing the content of one open file whose length is known
//! from its stat: the read path of `ckpt hash`, `ckpt verify` and hash-only
//! scans (status, diff), through `ckpt_lib`'s `store::objects::hash_file`, and of
//! everything that checks a stored object against its name
//! ([`hash_whole`]: `verify --store`, restore and fork before cloning, a
//! large file's copy in the store before it is named).
//!
//! Owns: [`hash_exact`], [`hash_whole`] and the per-thread read buffer they use.
//!
//! Invariants:
//! - The result is exactly `blake3::hash` of bytes `0..len` of the file, or
//!   `None` when fewer than `len` bytes could be read (it shrank under us).
//!   Nothing past `len` is read, not even a zero-length read to see EOF: the
//!   caller compares the stat taken before the read with one taken after it,
//!   which also catches a file that grew.
//! - Reads go through one per-thread 64 KiB buffer (small enough to stay in
//!   the core's L2 cache between `pread` filling it and BLAKE3 reading it);
//!   a file of at most 64 KiB costs exactly one `pread`.
//! - Files larger than [`LEAF`] are split along BLAKE3's own tree
//!   (`blake3::hazmat::left_subtree_len`): every subtree of at most `LEAF`
//!   bytes is read and hashed on its own, the halves run through
//!   `rayon::join` so one large file occupies every core, and the chaining
//!   values are merged up to the root. The result equals `blake3::hash` of
//!   the whole content (tested against it for lengths around every boundary).
//!   No buffer is held across a `rayon::join`.

use std::cell::RefCell;
use std::os::fd::BorrowedFd;

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};
use rustix::io::Errno;

use crate::Hash;

/// Files up to this many bytes are hashed by one thread; larger ones are
/// split into subtrees of at most this size hashed in parallel. A power of
/// two multiple of the BLAKE3 chunk size.
pub const LEAF: u64 = 1 << 20;

/// Size of the per-thread read buffer.
const BUF_LEN: usize = 64 * 1024;

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// BLAKE3 of bytes `0..len` of `fd`; `None` if the file holds fewer bytes.
pub fn hash_exact(fd: BorrowedFd<'_>, len: u64) -> std::io::Result<Option<Hash>> {
    hash_exact_with(fd, len, LEAF)
}

/// BLAKE3 of the whole of a file that nothing else writes (a store object,
/// or a copy only this thread has), and its length: the length is taken
/// from `fstat`, then exactly that many bytes are hashed. Errors if the
/// file holds fewer bytes than its stat says (it was truncated under us).
pub fn hash_whole(fd: BorrowedFd<'_>) -> std::io::Result<(Hash, u64)> {
    let len = crate::fs::stat_fd(fd)?.size;
    match hash_exact(fd, len)? {
        Some(h) => Ok((h, len)),
        None => Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the file is shorter than the {len} bytes its stat reports"),
        )),
    }
}

/// [`hash_exact`] with a chosen leaf size (a power of two, at least one
/// BLAKE3 chunk); tests use small leaves to cover the tree merging.
fn hash_exact_with(fd: BorrowedFd<'_>, len: u64, leaf: u64) -> std::io::Result<Option<Hash>> {
    debug_assert!(leaf.is_power_of_two() && leaf >= blake3::CHUNK_LEN as u64);
    if len <= leaf {
        let mut h = blake3::Hasher::new();
        return Ok(read_into(fd, &mut h, 0, len)?.then(|| h.finalize().into()));
    }
    let left = left_subtree_len(len);
    let (l, r) = rayon::join(
        || subtree(fd, 0, left, leaf),
        || subtree(fd, left, len - left, leaf),
    );
    Ok(match (l?, r?) {
        (Some(l), Some(r)) => Some(merge_subtrees_root(&l, &r, Mode::Hash).into()),
        _ => None,
    })
}

/// The chaining value of the subtree of `len` bytes at `off` (a subtree of
/// the whole file's BLAKE3 tree, so `off` is aligned to its maximum size).
fn subtree(
    fd: BorrowedFd<'_>,
    off: u64,
    len: u64,
    leaf: u64,
) -> std::io::Result<Option<ChainingValue>> {
    if len <= leaf {
        let mut h = blake3::Hasher::new();
        h.set_input_offset(off);
        return Ok(read_into(fd, &mut h, off, len)?.then(|| h.finalize_non_root()));
    }
    let left = left_subtree_len(len);
    let (l, r) = rayon::join(
        || subtree(fd, off, left, leaf),
        || subtree(fd, off + left, len - left, leaf),
    );
    Ok(match (l?, r?) {
        (Some(l), Some(r)) => Some(merge_subtrees_non_root(&l, &r, Mode::Hash)),
        _ => None,
    })
}

/// Feeds bytes `off..off + len` of `fd` to `h`; false if EOF came first.
fn read_into(
    fd: BorrowedFd<'_>,
    h: &mut blake3::Hasher,
    off: u64,
    len: u64,
) -> std::io::Result<bool> {
    if len == 0 {
        return Ok(true);
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.len() < BUF_LEN {
            buf.resize(BUF_LEN, 0);
        }
        let end = off + len;
        let mut pos = off;
        while pos < end {
            let want = (end - pos).min(BUF_LEN as u64) as usize;
            match rustix::io::pread(fd, &mut buf[..want], pos) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    h.update(&buf[..n]);
                    pos += n as u64;
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn content(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
            .collect()
    }

    fn file_with(data: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(data).unwrap();
        f
    }

    /// Lengths just around every boundary the tree split or the buffer
    /// could get wrong, for a given leaf.
    fn edge_lengths(leaf: usize) -> Vec<usize> {
        let mut v = vec![0, 1, 1023, 1024, 1025, 2048, 3 * 1024 + 7];
        for base in [
            leaf,
            2 * leaf,
            3 * leaf,
            4 * leaf,
            5 * leaf,
            BUF_LEN,
            2 * BUF_LEN,
        ] {
            v.extend([base - 1, base, base + 1, base + 1024]);
        }
        v
    }

    #[test]
    fn equals_blake3_at_every_boundary() {
        for leaf in [1024u64, 4096, 65536, LEAF] {
            for len in edge_lengths(leaf as usize) {
                let data = content(len, 7);
                let f = file_with(&data);
                let got = hash_exact_with(f.as_fd(), len as u64, leaf).unwrap();
                assert_eq!(
                    got,
                    Some(Hash::from(blake3::hash(&data))),
                    "len {len} leaf {leaf}"
                );
            }
        }
    }

    #[test]
    fn whole_file_hash_and_length() {
        for len in edge_lengths(LEAF as usize) {
            let data = content(len, 3);
            let f = file_with(&data);
            assert_eq!(
                hash_whole(f.as_fd()).unwrap(),
                (Hash::from(blake3::hash(&data)), len as u64),
                "len {len}"
            );
        }
    }

    #[test]
    fn short_file_is_none_and_extra_bytes_are_not_read() {
        for (leaf, len) in [(LEAF, 5000usize), (1024, 5000), (1024, 3 * 1024 * 1024)] {
            let data = content(len, 1);
            let f = file_with(&data);
            // Asked for more than there is: the file shrank.
            assert_eq!(
                hash_exact_with(f.as_fd(), len as u64 + 1, leaf).unwrap(),
                None
            );
            // Asked for less: exactly that prefix is hashed.
            assert_eq!(
                hash_exact_with(f.as_fd(), len as u64 - 1, leaf).unwrap(),
                Some(Hash::from(blake3::hash(&data[..len - 1])))
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_length_any_leaf_equals_blake3(
            len in 0usize..300_000,
            leaf_shift in 10u32..17,
            seed in any::<u8>(),
        ) {
            let data = content(len, seed);
            let f = file_with(&data);
            let got = hash_exact_with(f.as_fd(), len as u64, 1u64 << leaf_shift).unwrap();
            prop_assert_eq!(got, Some(Hash::from(blake3::hash(&data))));
        }
    }
}
