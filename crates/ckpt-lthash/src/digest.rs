//! The workspace state digest: an LtHash16 sum of entry elements, maintained
//! incrementally or computed for a whole tree in parallel.
//!
//! Owns: [`Digest`] (insert / remove / replace / merge / checksum) and the
//! parallel helpers [`par_digest`] and [`try_par_digest`].
//!
//! Invariants:
//! - A `Digest` is exactly the sum of the elements inserted minus those removed;
//!   it has no other state, so the order of operations never matters and a
//!   digest maintained incrementally equals one recomputed from scratch.
//! - It is a *multiset* hash: inserting the same entry twice counts twice, and
//!   65,536 copies of one element cancel (2^16 · x ≡ 0). A workspace never
//!   holds the same path twice, so callers must insert each path at most once;
//!   distinct paths give distinct elements.
//! - The parallel helpers fold per-thread partial sums and reduce them; because
//!   addition is commutative and associative the result does not depend on
//!   scheduling.

use rayon::prelude::*;

use crate::entry::{Entry, EntryKind};
use crate::lthash::{LtHash, CHECKSUM_BYTES};

/// The LtHash16 digest of a set of workspace entries.
#[derive(Clone, PartialEq, Eq, Default, Debug, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Digest {
    state: LtHash,
}

impl Digest {
    /// The digest of the empty set.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            state: LtHash::identity(),
        }
    }

    /// Wraps a stored state.
    #[must_use]
    pub const fn from_state(state: LtHash) -> Self {
        Self { state }
    }

    /// The underlying 2048-byte state.
    #[must_use]
    pub fn state(&self) -> &LtHash {
        &self.state
    }

    /// Unwraps the underlying state.
    #[must_use]
    pub fn into_state(self) -> LtHash {
        self.state
    }

    /// Adds one entry (see [`Entry`] for the meaning of the arguments).
    pub fn insert(&mut self, path: &[u8], kind: EntryKind, mode: u32, content: &[u8]) {
        self.insert_entry(&Entry {
            path,
            kind,
            mode,
            content,
        });
    }

    /// Removes one entry previously inserted with the same arguments.
    pub fn remove(&mut self, path: &[u8], kind: EntryKind, mode: u32, content: &[u8]) {
        self.remove_entry(&Entry {
            path,
            kind,
            mode,
            content,
        });
    }

    /// Adds one entry.
    pub fn insert_entry(&mut self, entry: &Entry<'_>) {
        self.state.add_xof(&entry.hasher());
    }

    /// Removes one entry.
    pub fn remove_entry(&mut self, entry: &Entry<'_>) {
        self.state.sub_xof(&entry.hasher());
    }

    /// Replaces `old` by `new` (a modified path: remove then insert).
    pub fn replace(&mut self, old: &Entry<'_>, new: &Entry<'_>) {
        self.remove_entry(old);
        self.insert_entry(new);
    }

    /// Adds a precomputed element (e.g. from [`Entry::element`]).
    pub fn add_element(&mut self, element: &LtHash) {
        self.state.add(element);
    }

    /// Subtracts a precomputed element.
    pub fn sub_element(&mut self, element: &LtHash) {
        self.state.sub(element);
    }

    /// Adds all entries of `other` (union of disjoint sets, e.g. two subtrees).
    pub fn merge(&mut self, other: &Digest) {
        self.state.add(&other.state);
    }

    /// Removes all entries of `other` (e.g. a deleted subtree whose digest is known).
    pub fn unmerge(&mut self, other: &Digest) {
        self.state.sub(&other.state);
    }

    /// The 32-byte checksum of the state; what `ckpt hash` prints.
    #[must_use]
    pub fn checksum(&self) -> [u8; CHECKSUM_BYTES] {
        self.state.checksum()
    }

    /// The checksum as 64 lowercase hex digits.
    #[must_use]
    pub fn checksum_hex(&self) -> String {
        self.state.checksum_hex()
    }
}

impl<'a> Extend<Entry<'a>> for Digest {
    fn extend<I: IntoIterator<Item = Entry<'a>>>(&mut self, iter: I) {
        for e in iter {
            self.insert_entry(&e);
        }
    }
}

impl<'a> FromIterator<Entry<'a>> for Digest {
    fn from_iter<I: IntoIterator<Item = Entry<'a>>>(iter: I) -> Self {
        let mut d = Digest::new();
        d.extend(iter);
        d
    }
}

/// Digest of many entries, hashed in parallel on the current rayon pool.
pub fn par_digest<'a, I>(entries: I) -> Digest
where
    I: IntoParallelIterator<Item = Entry<'a>>,
{
    entries
        .into_par_iter()
        .fold(Digest::new, |mut acc, e| {
            acc.insert_entry(&e);
            acc
        })
        .reduce(Digest::new, |mut a, b| {
            a.merge(&b);
            a
        })
}

/// Digest of many items hashed in parallel, where each item may fail (e.g. a
/// file that cannot be read). `add` receives a per-thread accumulator and one
/// item and inserts zero or more entries for it. The first error stops the
/// work and is returned.
///
/// ```
/// use ckpt_lthash::{try_par_digest, Entry};
/// let files: Vec<(Vec<u8>, Vec<u8>)> = vec![(b"a".to_vec(), b"hi".to_vec())];
/// let d = try_par_digest(&files, |acc, (path, data)| {
///     let h = blake3::hash(data);
///     acc.insert_entry(&Entry::file(path, 0o644, h.as_bytes()));
///     Ok::<_, std::io::Error>(())
/// })
/// .unwrap();
/// assert_ne!(d, ckpt_lthash::Digest::new());
/// ```
pub fn try_par_digest<T, I, F, E>(items: I, add: F) -> Result<Digest, E>
where
    I: IntoParallelIterator<Item = T>,
    F: Fn(&mut Digest, T) -> Result<(), E> + Sync + Send,
    E: Send,
{
    items
        .into_par_iter()
        .try_fold(Digest::new, |mut acc, item| {
            add(&mut acc, item)?;
            Ok(acc)
        })
        .try_reduce(Digest::new, |mut a, b| {
            a.merge(&b);
            Ok(a)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_is_identity() {
        let mut d = Digest::new();
        d.insert(b"a", EntryKind::File, 0o644, &[1; 32]);
        assert_ne!(d, Digest::new());
        d.remove(b"a", EntryKind::File, 0o644, &[1; 32]);
        assert_eq!(d, Digest::new());
    }

    #[test]
    fn replace_equals_fresh() {
        let old = [1u8; 32];
        let new = [2u8; 32];
        let mut d: Digest = [Entry::file(b"a", 0o644, &old), Entry::dir(b"d", 0o755)]
            .into_iter()
            .collect();
        d.replace(
            &Entry::file(b"a", 0o644, &old),
            &Entry::file(b"a", 0o644, &new),
        );
        let fresh: Digest = [Entry::dir(b"d", 0o755), Entry::file(b"a", 0o644, &new)]
            .into_iter()
            .collect();
        assert_eq!(d, fresh);
    }

    #[test]
    fn par_equals_sequential_and_errors_propagate() {
        let paths: Vec<Vec<u8>> = (0..500).map(|i| format!("f{i}").into_bytes()).collect();
        let digest = [3u8; 32];
        let seq: Digest = paths
            .iter()
            .map(|p| Entry::file(p, 0o644, &digest))
            .collect();
        let par = par_digest(paths.par_iter().map(|p| Entry::file(p, 0o644, &digest)));
        assert_eq!(seq, par);
        let tried = try_par_digest(&paths, |acc, p| {
            acc.insert_entry(&Entry::file(p, 0o644, &digest));
            Ok::<_, String>(())
        });
        assert_eq!(tried, Ok(seq));
        let failed = try_par_digest(&paths, |acc, p| {
            if p == b"f250" {
                return Err("boom".to_string());
            }
            acc.insert_entry(&Entry::file(p, 0o644, &digest));
            Ok(())
        });
        assert_eq!(failed, Err("boom".to_string()));
    }

    #[test]
    fn merge_unmerge() {
        let a: Digest = [Entry::dir(b"x", 0o700)].into_iter().collect();
        let b: Digest = [Entry::dir(b"y", 0o700)].into_iter().collect();
        let mut ab = a.clone();
        ab.merge(&b);
        let both: Digest = [Entry::dir(b"y", 0o700), Entry::dir(b"x", 0o700)]
            .into_iter()
            .collect();
        assert_eq!(ab, both);
        ab.unmerge(&b);
        assert_eq!(ab, a);
    }

    #[test]
    fn serde_roundtrip_is_transparent() {
        let d: Digest = [Entry::dir(b"x", 0o700)].into_iter().collect();
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, serde_json::to_string(d.state()).unwrap());
        assert_eq!(serde_json::from_str::<Digest>(&json).unwrap(), d);
    }
}
