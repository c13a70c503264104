//! Saving a checkpoint: capture (scan, store changed contents, commit a
//! checkpoint), on a scan from a [`Scanner`] (see
//! [`crate::engine::scanner`]).
//!
//! Save, in order (each step's durability is what makes the next safe):
//! 1. scan the workspace against the stat index, storing the content of
//!    changed files as pending objects ([`crate::workspace::scan`]);
//! 2. read the agent-state version (only if `state.redb` exists, see
//!    [`crate::store::state`]); if the root tree equals the head's and the state's
//!    content equals the head's, stop: nothing changed;
//! 3. make the pending objects durable under their final names
//!    ([`crate::store::objects::Objects::commit`]);
//! 4. commit trees + checkpoint record + head in one redb transaction;
//! 5. replace the stat index (a cache; see [`crate::store::index`]).
//!
//! A crash before 4 leaves unreferenced objects (removed by gc) and no
//! checkpoint; after 4 the checkpoint is complete.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::IoContext;
use ckpt_fs::fs;
use serde::{Deserialize, Serialize};

use crate::engine::diff::{self, PathFilter, TreeSource};
use crate::engine::digest;
#[cfg(any(test, feature = "internals"))]
use crate::engine::scanner::{save_index, OnDisk, ScanKind, Scanner};
use crate::store::catalog::{ChangeStats, Checkpoint, Durable};
use crate::store::Store;
use crate::workspace::scan::ScanResult;
use crate::workspace::Workspace;
use crate::{trace, Result};

/// Tag key ckpt sets on checkpoints it makes itself (e.g. before a restore).
pub const REASON_TAG: &str = "ckpt.reason";

/// What the engine records: the front door's
/// [`crate::ops::save::SaveOptions`] plus what only the engine sets (the
/// journal of a restore's pre-save).
#[derive(Clone, Debug, Default)]
pub struct SaveJob {
    /// Message.
    pub message: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Record a checkpoint even if nothing changed.
    pub allow_empty: bool,
    /// A restore journal to commit in the checkpoint's own transaction, its
    /// `undo` set to the new checkpoint (the pre-restore save, see
    /// [`crate::engine::restore`]); ignored when no checkpoint is recorded.
    pub journal: Option<crate::store::catalog::Journal>,
}

/// What a save did.
#[derive(Debug)]
pub enum SaveOutcome {
    /// A new checkpoint.
    Saved(Checkpoint),
    /// Nothing changed since the head (which may not exist).
    Unchanged(Option<Checkpoint>),
}

/// A save with the scan behind it (restore reuses the scan).
pub struct Captured {
    /// What happened.
    pub outcome: SaveOutcome,
    /// The scan.
    pub scan: ScanResult,
    /// Files read during the scan, for `--verbose`.
    pub files_read: u64,
}

/// Records a checkpoint of the workspace, scanning all of it in this
/// process (no watcher: that choice is [`crate::ops::save`]'s). For the
/// model tests and benches, which save without the front door's lock.
#[cfg(any(test, feature = "internals"))]
pub fn save(ws: &Workspace, store: &Store, opts: &SaveJob) -> Result<SaveOutcome> {
    let captured = capture(ws, store, opts, &mut OnDisk::default())?;
    Ok(captured.outcome)
}

/// Entries scanned, files read, new objects and their bytes: what a save
/// cost, for `--verbose`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanCounts {
    /// Entries looked at.
    pub entries: u64,
    /// Files whose content was read.
    pub files_read: u64,
    /// Objects added to the store.
    pub new_objects: u64,
    /// Bytes of those objects.
    pub new_bytes: u64,
}

impl Captured {
    /// What the capture cost.
    pub fn counts(&self) -> ScanCounts {
        ScanCounts {
            entries: self.scan.entries,
            files_read: self.files_read,
            new_objects: self.scan.new_objects,
            new_bytes: self.scan.new_bytes,
        }
    }
}

/// Scans with `scanner`, stores and (if anything changed or
/// `allow_empty`) commits a checkpoint, then writes the index file.
#[cfg(any(test, feature = "internals"))]
pub fn capture(
    ws: &Workspace,
    store: &Store,
    opts: &SaveJob,
    scanner: &mut OnDisk,
) -> Result<Captured> {
    let t0 = Instant::now();
    let scan = scanner.scan(ws, store, ScanKind::Capture)?;
    let mut captured = capture_scanned(ws, store, opts, scan, Durable::AtCommit, t0)?;
    let _t = trace::span("index save");
    save_index(store, &mut captured.scan)?;
    Ok(captured)
}

/// [`capture`] from a capture-mode scan already made, its checkpoint
/// committed durable when `durable` says. The index is left alone: the
/// caller keeps `Captured::scan.index` ([`Scanner::keep_index`]).
pub fn capture_scanned(
    ws: &Workspace,
    store: &Store,
    opts: &SaveJob,
    scan: ScanResult,
    durable: Durable,
    t0: Instant,
) -> Result<Captured> {
    let reader = store.catalog.reader()?;
    let head = reader.head_checkpoint()?;
    remove_temp_files(ws, &scan.temp_files)?;
    ckpt_fault::point("save.after_scan");
    let files_read = scan.files_read;
    let state_version = store.state.current_version()?;
    let changed = head.as_ref().map(|h| h.root) != Some(scan.root)
        || crate::store::state::changed_since(
            &store.state,
            head.as_ref().and_then(|h| h.state_version),
            state_version,
        )?;
    if !changed && !opts.allow_empty {
        store.objects.commit()?;
        return Ok(Captured {
            outcome: SaveOutcome::Unchanged(head),
            scan,
            files_read,
        });
    }
    let t = trace::span("diff");
    let changes = {
        let src = TreeSource {
            fresh: Some(&scan.new_trees),
            catalog: &reader,
        };
        diff::diff_trees(
            &src,
            head.as_ref().map(|h| h.root),
            Some(scan.root),
            &PathFilter::default(),
        )?
    };
    let stats = ChangeStats {
        new_objects: scan.new_objects,
        new_bytes: scan.new_bytes,
        ..diff::stats(&changes)
    };
    drop(t);
    let t = trace::span("digest");
    let parent_digest = match &head {
        Some(h) => digest::stored_digest(h)?,
        None => Some(ckpt_lthash::Digest::new()),
    };
    let digest = match parent_digest {
        Some(d) => digest::apply_changes(&d, &changes),
        None => digest::tree_digest(
            &TreeSource {
                fresh: Some(&scan.new_trees),
                catalog: &reader,
            },
            scan.root,
        )?,
    };
    drop(reader);
    drop(t);
    let t = trace::span("objects commit");
    store.objects.commit()?;
    drop(t);
    let record = Checkpoint {
        seq: 0,
        hash: Default::default(),
        parent: head.as_ref().map(|h| h.seq),
        time_ns: fs::now_ns(),
        message: opts.message.clone(),
        tags: opts.tags.clone(),
        root: scan.root,
        stats,
        skipped: scan.skipped.clone(),
        duration_us: t0.elapsed().as_micros() as u64,
        digest: Some(digest::encode_digest(&digest)),
        state_version,
    };
    let trees: Vec<_> = scan
        .new_trees
        .iter()
        .map(|(h, b)| (*h, b.clone()))
        .collect();
    let t = trace::span("catalog commit");
    ckpt_fault::point("catalog.before_commit");
    let cp = store
        .catalog
        .commit_checkpoint(&trees, record, opts.journal.as_ref(), durable)?;
    ckpt_fault::point("catalog.after_commit");
    drop(t);
    Ok(Captured {
        outcome: SaveOutcome::Saved(cp),
        scan,
        files_read,
    })
}

/// Removes ckpt temporary files left in the workspace by an interrupted
/// restore (the caller holds the store lock, so none is in use).
pub fn remove_temp_files(ws: &Workspace, temps: &[Vec<u8>]) -> Result<()> {
    use std::os::fd::AsFd;
    if temps.is_empty() {
        return Ok(());
    }
    let root = fs::open_dir_path(&ws.root).ctx("open", &ws.root)?;
    for t in temps {
        let (dir, name) = match t.iter().rposition(|&b| b == b'/') {
            Some(i) => (&t[..i], &t[i + 1..]),
            None => (&t[..0], &t[..]),
        };
        let shown = fs::display_path(&ws.root, t);
        let d = fs::open_dir_beneath(root.as_fd(), dir).ctx("open", &shown)?;
        fs::remove_all_at(d.as_fd(), name).ctx("remove stale temporary file", &shown)?;
    }
    Ok(())
}
