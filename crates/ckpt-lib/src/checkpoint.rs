//! Saving a checkpoint, and the read-only views of the workspace state
//! (status) built on the same scan.
//!
//! Save, in order (each step's durability is what makes the next safe):
//! 1. scan the workspace against the stat index, storing the content of
//!    changed files as pending objects ([`crate::scan`]);
//! 2. read the agent-state version (only if `state.redb` exists, see
//!    [`crate::state`]); if the root tree equals the head's and the state's
//!    content equals the head's, stop: nothing changed;
//! 3. make the pending objects durable under their final names
//!    ([`crate::objects::Objects::commit`]);
//! 4. commit trees + checkpoint record + head in one redb transaction;
//! 5. replace the stat index (a cache; see [`crate::index`]).
//!
//! A crash before 4 leaves unreferenced objects (removed by gc) and no
//! checkpoint; after 4 the checkpoint is complete.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::catalog::{ChangeStats, Checkpoint};
use crate::diff::{self, Change, PathFilter, TreeSource};
use crate::error::IoContext;
use crate::platform::fs;
use crate::scan::{self, Mode, ScanInput, ScanResult};
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{trace, verify, Result};

/// Tag key ckpt sets on checkpoints it makes itself (e.g. before a restore).
pub const REASON_TAG: &str = "ckpt.reason";

/// What to record.
#[derive(Clone, Debug, Default)]
pub struct SaveOptions {
    /// Message.
    pub message: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Record a checkpoint even if nothing changed.
    pub allow_empty: bool,
    /// A restore journal to commit in the checkpoint's own transaction, its
    /// `undo` set to the new checkpoint (the pre-restore save, see
    /// [`crate::restore`]); ignored when no checkpoint is recorded.
    pub journal: Option<crate::catalog::Journal>,
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

/// Scans the workspace in the given mode: only the directories a live
/// watcher reports dirty when it can vouch for the rest (see
/// [`crate::watch`]), else everything.
pub fn scan_workspace(ws: &Workspace, store: &Store, capture: bool) -> Result<ScanResult> {
    if !capture {
        let _t = trace::span("watcher scan");
        if let Some(r) = crate::watch::client::scan_via_watcher(ws, store) {
            return Ok(r);
        }
    }
    let t = trace::span("watch plan");
    let plan = crate::watch::client::plan(ws, store);
    drop(t);
    let t = trace::span("load index");
    let index = store.load_index()?;
    drop(t);
    let ignore = ws.ignore()?;
    let exclude = ws.excluded();
    let mode = if capture {
        Mode::Capture(&store.objects)
    } else {
        Mode::HashOnly
    };
    let _t = trace::span("scan");
    let input = ScanInput {
        root: &ws.root,
        index: &index,
        ignore: &ignore,
        exclude: &exclude,
        mode,
    };
    let (result, token) = match plan {
        crate::watch::client::Plan::Partial { dirs, token }
            if index.dirs.contains_key(&Vec::new()) =>
        {
            (scan::scan_partial(&input, &dirs), Some(token))
        }
        crate::watch::client::Plan::Partial { token, .. } => {
            crate::watch::client::note_full("the index is missing or stale");
            (scan::scan(&input), Some(token))
        }
        crate::watch::client::Plan::Full { token } => (scan::scan(&input), token),
    };
    match result {
        Ok(mut r) => {
            r.watch = token;
            Ok(r)
        }
        Err(e) => {
            store.objects.abort();
            Err(e)
        }
    }
}

/// Saves the index of a capture scan, then records its watch token.
pub(crate) fn save_index(store: &Store, scan: &ScanResult) -> Result<()> {
    if !scan.index_unchanged {
        scan.index.save(&store.index_path())?;
    }
    if let Some(t) = &scan.watch {
        crate::watch::client::record(store, t);
    }
    Ok(())
}

/// Records a checkpoint of the workspace.
pub fn save(ws: &Workspace, store: &Store, opts: &SaveOptions) -> Result<SaveOutcome> {
    Ok(capture(ws, store, opts, true)?.outcome)
}

/// What [`save_workspace`] did.
#[derive(Debug)]
pub struct Saved {
    /// The outcome.
    pub outcome: SaveOutcome,
    /// Entries scanned, files read, new objects, new bytes (for `--verbose`).
    pub counts: [u64; 4],
    /// What the saved retention policy dropped after this save, when it
    /// dropped anything (only reported for saves made in this process).
    pub retention: Option<crate::retention::RetentionReport>,
}

/// The save of `ckpt save` and `ckpt hook`: through a live watcher when it
/// vouches for the workspace (it keeps the index in memory, takes the store
/// lock and applies the retention policy itself, see [`crate::watch`]);
/// otherwise a scan in this process under the store lock, then the saved
/// retention policy ([`crate::retention::apply_configured`]).
pub fn save_workspace(
    ws: &Workspace,
    opts: &SaveOptions,
    lock_timeout: std::time::Duration,
) -> Result<Saved> {
    if let Some(r) = crate::watch::client::save_via_watcher(ws, opts, lock_timeout) {
        let outcome = match (r.saved, r.checkpoint) {
            (true, Some(cp)) => Some(SaveOutcome::Saved(cp)),
            (false, head) => Some(SaveOutcome::Unchanged(head)),
            (true, None) => None,
        };
        if let Some(outcome) = outcome {
            return Ok(Saved {
                outcome,
                counts: [r.entries, r.files_read, r.new_objects, r.new_bytes],
                retention: None,
            });
        }
    }
    let store = ws.open_store(lock_timeout)?;
    let captured = capture(ws, &store, opts, true)?;
    let retention = match &captured.outcome {
        SaveOutcome::Saved(_) => crate::retention::apply_configured(&store, fs::now_ns())?,
        SaveOutcome::Unchanged(_) => None,
    };
    Ok(Saved {
        outcome: captured.outcome,
        counts: [
            captured.scan.entries,
            captured.files_read,
            captured.scan.new_objects,
            captured.scan.new_bytes,
        ],
        retention,
    })
}

/// Scans, stores and (if anything changed, or `allow_empty`) commits a
/// checkpoint. With `commit_checkpoint == false` objects are stored and the
/// index refreshed but no checkpoint is recorded (`restore --no-save`).
pub fn capture(
    ws: &Workspace,
    store: &Store,
    opts: &SaveOptions,
    commit_checkpoint: bool,
) -> Result<Captured> {
    let t0 = Instant::now();
    let scan = scan_workspace(ws, store, true)?;
    capture_scanned(ws, store, opts, commit_checkpoint, scan, t0, true)
}

/// [`capture`] from a capture-mode scan already made (the watcher's
/// in-memory engine, [`crate::watch`]). With `persist_index == false` the
/// index file and watch token are left alone: the caller keeps
/// `Captured::scan.index` and persists it later.
pub fn capture_scanned(
    ws: &Workspace,
    store: &Store,
    opts: &SaveOptions,
    commit_checkpoint: bool,
    scan: ScanResult,
    t0: Instant,
    persist_index: bool,
) -> Result<Captured> {
    let reader = store.catalog.reader()?;
    let head = match reader.head()? {
        Some(s) => reader.checkpoint(s)?,
        None => None,
    };
    remove_temp_files(ws, &scan.temp_files)?;
    ckpt_fault::point("save.after_scan");
    let files_read = scan.files_read;
    let state_version = if commit_checkpoint {
        store.state.current_version()?
    } else {
        None
    };
    let changed = head.as_ref().map(|h| h.root) != Some(scan.root)
        || (commit_checkpoint
            && crate::state::changed_since(
                &store.state,
                head.as_ref().and_then(|h| h.state_version),
                state_version,
            )?);
    if !commit_checkpoint || (!changed && !opts.allow_empty) {
        store.objects.commit()?;
        if persist_index {
            save_index(store, &scan)?;
        }
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
        Some(h) => verify::stored_digest(h)?,
        None => Some(ckpt_lthash::Digest::new()),
    };
    let digest = match parent_digest {
        Some(d) => verify::apply_changes(&d, &changes),
        None => verify::tree_digest(
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
        digest: Some(verify::encode_digest(&digest)),
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
        .commit_checkpoint(&trees, record, opts.journal.as_ref())?;
    ckpt_fault::point("catalog.after_commit");
    drop(t);
    let _t = trace::span("index save");
    if persist_index {
        save_index(store, &scan)?;
    }
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

/// What changed in the workspace since the head checkpoint.
pub struct Status {
    /// The head (None before the first save).
    pub head: Option<Checkpoint>,
    /// Every difference from the head to the working directory.
    pub changes: Vec<Change>,
    /// Entries that would be skipped.
    pub skipped: Vec<crate::catalog::Skipped>,
    /// An interrupted restore, if any.
    pub journal: Option<crate::catalog::Journal>,
}

/// Computes [`Status`] without writing anything.
pub fn status(ws: &Workspace, store: &Store, filter: &PathFilter) -> Result<Status> {
    let reader = store.catalog.reader()?;
    let head = match reader.head()? {
        Some(s) => reader.checkpoint(s)?,
        None => None,
    };
    let scan = scan_workspace(ws, store, false)?;
    let src = TreeSource {
        fresh: Some(&scan.new_trees),
        catalog: &reader,
    };
    let changes = diff::diff_trees(&src, head.as_ref().map(|h| h.root), Some(scan.root), filter)?;
    Ok(Status {
        head,
        changes,
        skipped: scan.skipped,
        journal: reader.journal()?,
    })
}
