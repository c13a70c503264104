//! The status of a workspace: every difference from the head checkpoint
//! to the working directory, computed from a hash-only scan
//! ([`crate::engine::scanner`]) without writing anything.

use crate::engine::diff::{self, Change, PathFilter, TreeSource};
use crate::engine::scanner::free;
use crate::store::catalog::Checkpoint;
use crate::store::Store;
use crate::workspace::scan::ScanResult;
use crate::Result;

/// What changed in the workspace since the head checkpoint.
pub struct Status {
    /// The head (None before the first save).
    pub head: Option<Checkpoint>,
    /// Every difference from the head to the working directory.
    pub changes: Vec<Change>,
    /// Entries that would be skipped.
    pub skipped: Vec<crate::store::catalog::Skipped>,
    /// An interrupted restore, if any.
    pub journal: Option<crate::store::catalog::Journal>,
}

/// Computes [`Status`] from a hash-only scan, without writing anything.
pub fn status(store: &Store, filter: &PathFilter, mut scan: ScanResult) -> Result<Status> {
    let reader = store.catalog.reader()?;
    let head = reader.head_checkpoint()?;
    let src = TreeSource {
        fresh: Some(&scan.new_trees),
        catalog: &reader,
    };
    let changes = diff::diff_trees(&src, head.as_ref().map(|h| h.root), Some(scan.root), filter)?;
    let status = Status {
        head,
        changes,
        skipped: std::mem::take(&mut scan.skipped),
        journal: reader.journal()?,
    };
    free(scan);
    Ok(status)
}
