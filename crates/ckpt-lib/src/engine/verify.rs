//! State digests and verification: "is this directory exactly the state that
//! was saved?" and "is my store intact?".
//!
//! Every checkpoint carries a state digest ([`crate::engine::digest`]).
//!
//! [`verify_workspace`] re-reads every file from disk (ignoring the stat
//! index), hashing in parallel, and compares digests; on a mismatch the trees
//! say which paths differ. [`verify_store`] re-hashes every object, tree and
//! record and reports what is missing or damaged and which checkpoints are
//! affected.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use ckpt_lthash::Digest;
use rayon::prelude::*;
use serde::Serialize;

use crate::engine::diff::{self, Change, ChangeKind, PathFilter, TreeSource};
use crate::engine::digest::{insert, stored_digest, tree_digest};
use crate::store::catalog::Checkpoint;
use crate::store::index::Index;
use crate::store::tree::Node;
use crate::store::Store;
use crate::workspace::ignore::Ignore;
use crate::workspace::scan::{self, Mode, OnUnreadable, ScanInput, ScanResult};
use crate::workspace::Workspace;
use crate::{Hash, Result};
use ckpt_fs::fs::join;

/// The digest of the state a [`full_scan`] saw and its bytes of file
/// content, from the scan's directory records: with an empty index every
/// directory is listed and recorded exactly once, holding exactly its tree's
/// entries, so this equals [`tree_digest`] of `scan.root` without decoding
/// the trees again. Elements are computed in parallel.
fn scanned_digest(scan: &ScanResult) -> (Digest, u64) {
    let _t = crate::trace::span("digest elements");
    scan.index
        .dirs
        .par_iter()
        .fold(
            || (Digest::new(), 0u64),
            |(mut d, mut bytes), (rel, rec)| {
                for e in &rec.entries {
                    insert(&mut d, &join(rel, &e.entry.name), &e.entry);
                    if let Node::File { size, .. } = e.entry.node {
                        bytes += size;
                    }
                }
                (d, bytes)
            },
        )
        .reduce(
            || (Digest::new(), 0),
            |(mut a, x), (b, y)| {
                a.merge(&b);
                (a, x + y)
            },
        )
}

/// Scans `root` reading every file (no stat cache), hashing only.
fn full_scan(root: &Path, exclude: &[Vec<u8>]) -> Result<ScanResult> {
    let _t = crate::trace::span("full scan");
    let ignore = Ignore::load(root)?;
    scan::scan(&ScanInput {
        root,
        index: &Index::default(),
        ignore: &ignore,
        exclude,
        mode: Mode::HashOnly,
        on_unreadable: OnUnreadable::Fail,
        on_first_new_object: None,
    })
    .map(|s| s.apply(Index::default()))
}

/// The result of comparing a directory with a checkpoint.
#[derive(Debug)]
pub struct Comparison {
    /// The checkpoint compared against.
    pub checkpoint: Checkpoint,
    /// Its stored digest's checksum.
    pub expected: [u8; 32],
    /// The directory's digest checksum.
    pub actual: [u8; 32],
    /// Paths that differ in content, kind or mode (empty when they match).
    pub differences: Vec<Change>,
    /// Files read.
    pub files: u64,
    /// Bytes of file content read.
    pub bytes: u64,
}

impl Comparison {
    /// Whether the directory is exactly the checkpoint's state.
    pub fn matches(&self) -> bool {
        self.expected == self.actual
    }
}

/// Re-reads the workspace and compares it with checkpoint `rev`.
pub fn verify_workspace(ws: &Workspace, store: &Store, rev: &str) -> Result<Comparison> {
    let scan = full_scan(&ws.root, &ws.excluded())?;
    let reader = store.catalog.reader()?;
    let cp = reader.resolve(rev)?;
    let src = TreeSource {
        fresh: Some(&scan.new_trees),
        catalog: &reader,
    };
    let expected = match stored_digest(&cp)? {
        Some(d) => d,
        None => tree_digest(&src, cp.root)?,
    };
    let (actual, bytes) = scanned_digest(&scan);
    let differences = if expected == actual {
        Vec::new()
    } else {
        diff::diff_trees(&src, Some(cp.root), Some(scan.root), &PathFilter::default())?
            .into_iter()
            .filter(|c| c.kind != ChangeKind::Touched)
            .collect()
    };
    Ok(Comparison {
        checkpoint: cp,
        expected: expected.checksum(),
        actual: actual.checksum(),
        differences,
        files: scan.files_read,
        bytes,
    })
}

/// The digest of any directory, by the same rules as checkpoints
/// (`.ckptignore` honoured, a `.ckpt` marker skipped). Needs no workspace.
pub fn hash_dir(dir: &Path) -> Result<(Digest, ScanResult)> {
    let scan = full_scan(dir, &[])?;
    let (d, _) = scanned_digest(&scan);
    Ok((d, scan))
}

/// One problem found by [`verify_store`].
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Problem {
    /// `object`, `tree` or `checkpoint`.
    pub what: &'static str,
    /// Its hash or id.
    pub id: String,
    /// What is wrong.
    pub error: String,
    /// Checkpoints that reference it.
    pub checkpoints: Vec<String>,
}

/// What [`verify_store`] checked.
#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Integrity {
    /// Checkpoint records checked.
    pub checkpoints: u64,
    /// Trees checked.
    pub trees: u64,
    /// Objects re-hashed.
    pub objects: u64,
    /// Bytes re-hashed.
    pub bytes: u64,
    /// Everything wrong.
    pub problems: Vec<Problem>,
}

/// Re-hashes every object and checks every reference.
pub fn verify_store(store: &Store) -> Result<Integrity> {
    let reader = store.catalog.reader()?;
    let mut report = Integrity::default();
    // Records (each read checks its own hash).
    let checkpoints = match reader.checkpoints() {
        Ok(c) => c,
        Err(e) => {
            report.problems.push(Problem {
                what: "checkpoint",
                id: "catalog".into(),
                error: e.to_string(),
                checkpoints: vec![],
            });
            return Ok(report);
        }
    };
    report.checkpoints = checkpoints.len() as u64;
    // Which checkpoints reach each tree and object.
    let mut tree_users: HashMap<Hash, BTreeSet<u64>> = HashMap::new();
    let mut object_users: HashMap<Hash, BTreeSet<u64>> = HashMap::new();
    let mut bad_trees: BTreeMap<Hash, String> = BTreeMap::new();
    let mut object_sizes: HashMap<Hash, u64> = HashMap::new();
    for cp in &checkpoints {
        let mut seen = HashSet::new();
        let mut stack = vec![cp.root];
        while let Some(h) = stack.pop() {
            if !seen.insert(h) {
                continue;
            }
            tree_users.entry(h).or_default().insert(cp.seq);
            match reader.tree(&h) {
                Ok(t) => {
                    for e in t.entries {
                        match e.node {
                            Node::Dir { tree } => stack.push(tree),
                            Node::File { hash, size } => {
                                object_users.entry(hash).or_default().insert(cp.seq);
                                object_sizes.insert(hash, size);
                            }
                            Node::Symlink { .. } => {}
                        }
                    }
                }
                Err(e) => {
                    bad_trees.insert(h, e.to_string());
                }
            }
        }
    }
    report.trees = tree_users.len() as u64;
    let ids = |s: &BTreeSet<u64>| s.iter().map(|v| format!("v{v}")).collect::<Vec<_>>();
    for (h, err) in bad_trees {
        report.problems.push(Problem {
            what: "tree",
            id: h.to_hex(),
            error: err,
            checkpoints: ids(&tree_users[&h]),
        });
    }
    let objects: Vec<(Hash, u64)> = object_sizes.into_iter().collect();
    let results: Vec<(Hash, u64, Option<String>)> = objects
        .par_iter()
        .map(|(h, size)| {
            // Plain or banded (each band is checked against its name too).
            let err = match store.objects.hash_object(h) {
                Err(e) => Some(e.to_string()),
                Ok((got, len)) if got != *h || len != *size => Some(format!(
                    "content hashes to {got} ({len} bytes, expected {size})"
                )),
                Ok(_) => None,
            };
            (*h, *size, err)
        })
        .collect();
    for (h, size, err) in results {
        report.objects += 1;
        report.bytes += size;
        if let Some(err) = err {
            report.problems.push(Problem {
                what: "object",
                id: h.to_hex(),
                error: err,
                checkpoints: ids(&object_users[&h]),
            });
        }
    }
    // Digests: each stored digest must match its tree.
    let src = TreeSource {
        fresh: None,
        catalog: &reader,
    };
    for cp in &checkpoints {
        if let (Ok(Some(stored)), true) = (stored_digest(cp), report.problems.is_empty()) {
            if tree_digest(&src, cp.root)? != stored {
                report.problems.push(Problem {
                    what: "checkpoint",
                    id: cp.id(),
                    error: "stored state digest does not match its tree".into(),
                    checkpoints: vec![cp.id()],
                });
            }
        }
    }
    Ok(report)
}
