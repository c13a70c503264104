//! State digests: the LtHash16 digest ([`ckpt_lthash`]) every checkpoint
//! carries of its tree, and the arithmetic save uses to keep it.
//!
//! A digest is the sum of one element per entry binding path, kind,
//! permission bits and content hash (mtime is not bound; see the
//! `ckpt-lthash` docs). A save computes it incrementally from its parent's
//! digest ([`apply_changes`]: subtract the element of every entry that went
//! or changed, add the new one), so its cost is O(changes); [`tree_digest`]
//! recomputes it from a whole tree, and [`crate::engine::verify`] from the
//! files on disk. Both must agree: that is what `ckpt verify` checks.

use ckpt_fs::fs::join;
use ckpt_lthash::{Digest, Entry as LtEntry};
use rayon::prelude::*;

use crate::engine::diff::{Change, ChangeKind, TreeSource};
use crate::store::catalog::Checkpoint;
use crate::store::tree::{Entry, Node, Tree};
use crate::{Error, Hash, Result};

/// The LtHash element of one tree entry at `path`.
pub(crate) fn insert(d: &mut Digest, path: &[u8], e: &Entry) {
    match &e.node {
        Node::File { hash, .. } => d.insert_entry(&LtEntry::file(path, e.mode, &hash.0)),
        Node::Dir { .. } => d.insert_entry(&LtEntry::dir(path, e.mode)),
        Node::Symlink { target } => d.insert_entry(&LtEntry::symlink(path, target)),
    }
}

fn remove(d: &mut Digest, path: &[u8], e: &Entry) {
    match &e.node {
        Node::File { hash, .. } => d.remove_entry(&LtEntry::file(path, e.mode, &hash.0)),
        Node::Dir { .. } => d.remove_entry(&LtEntry::dir(path, e.mode)),
        Node::Symlink { target } => d.remove_entry(&LtEntry::symlink(path, target)),
    }
}

/// Every entry below `root` with its full path (the root itself has none),
/// loading trees with `load`.
fn entries_below(
    load: impl Fn(&Hash) -> Result<Tree>,
    root: Hash,
) -> Result<Vec<(Vec<u8>, Entry)>> {
    let mut all = Vec::new();
    let mut stack = vec![(Vec::new(), root)];
    while let Some((rel, h)) = stack.pop() {
        for e in load(&h)?.entries {
            let path = join(&rel, &e.name);
            if let Node::Dir { tree } = e.node {
                stack.push((path.clone(), tree));
            }
            all.push((path, e));
        }
    }
    Ok(all)
}

/// The digest of a set of entries; elements are computed in parallel.
fn digest_of(entries: &[(Vec<u8>, Entry)]) -> Digest {
    entries
        .par_iter()
        .fold(Digest::new, |mut d, (p, e)| {
            insert(&mut d, p, e);
            d
        })
        .reduce(Digest::new, |mut a, b| {
            a.merge(&b);
            a
        })
}

/// The digest of a whole tree (every entry below the root; the root itself
/// has no element).
pub fn tree_digest(src: &TreeSource<'_>, root: Hash) -> Result<Digest> {
    Ok(digest_of(&entries_below(|h| src.tree(h), root)?))
}

/// Applies a full diff (as from [`crate::engine::diff::diff_trees`]) to a digest.
pub fn apply_changes(base: &Digest, changes: &[Change]) -> Digest {
    let mut d = base.clone();
    for c in changes {
        if c.kind == ChangeKind::Touched {
            continue; // mtime is not part of an element
        }
        if let Some(old) = &c.old {
            remove(&mut d, &c.path, old);
        }
        if let Some(new) = &c.new {
            insert(&mut d, &c.path, new);
        }
    }
    d
}

/// Decodes a checkpoint's stored digest.
pub fn stored_digest(cp: &Checkpoint) -> Result<Option<Digest>> {
    match &cp.digest {
        None => Ok(None),
        Some(s) => ckpt_lthash::LtHash::from_base64url(s)
            .map(|l| Some(Digest::from_state(l)))
            .map_err(|e| Error::Corrupt(format!("checkpoint {} has a bad digest: {e}", cp.id()))),
    }
}

/// Encodes a digest for a checkpoint record.
pub fn encode_digest(d: &Digest) -> String {
    d.state().to_base64url()
}
