//! Restore: make a directory exactly a checkpoint's tree.
//!
//! In place ([`restore`]):
//! 0. refuse a restore path that matches nothing, neither in the target nor
//!    in the working directory ([`Error::Usage`], nothing changed: no save,
//!    no journal);
//! 1. unless `--no-save`, save the current state first (its id undoes the
//!    restore); the scan behind that save is also the current state. With
//!    `--no-save`, or when finishing an interrupted restore, the scan only
//!    hashes ([`ScanKind::HashKeep`]): nothing is written to the store. If
//!    the save runs out of space it has committed nothing, and the restore
//!    stops with [`Error::NoSpaceForUndo`], which names the unsaved changes
//!    `--no-save` would lose (see "Space" below);
//! 2. record a journal entry (target, paths) in the catalog, so an
//!    interrupted restore is reported and re-running it finishes it;
//! 3. diff current → target ([`crate::engine::diff`]), skipping `.ckptignore`d paths,
//!    and apply only the differences:
//!    - removals and new directories, in path order (so everything the
//!      restore deletes is gone before anything is written);
//!    - first, every object to be written is re-hashed against its name, in
//!      parallel: a damaged store fails the restore before anything changes;
//!    - file and symlink writes, in parallel per directory, in two passes:
//!      first those that free space or need none (a file no larger than the
//!      one it replaces, symlinks, mode and mtime fixes), then files that
//!      grow or are new. Each is written to a temporary name in its own
//!      directory (`.ckpt-tmp.*`), given its mode and mtime, then renamed
//!      over the old entry, so a reader never sees a half-written file. A
//!      directory whose writes ran out of space while others were written
//!      is done again, alone, after them;
//!    - directory modes and mtimes last, deepest first;
//! 4. update the stat index for exactly the paths written, set the head, and
//!    clear the journal.
//!
//! What HEAD is afterwards: after a whole restore, the target (the workspace
//! is exactly it). After a restore of some `paths`, the workspace is neither
//! the target nor the pre-restore save, so unless `--no-save` it is recorded
//! once more, after the files are written and before the journal is
//! cleared: a checkpoint tagged `ckpt.reason=restore-paths`
//! ([`RestoreReport::post_save`]; nothing when HEAD already equals the
//! workspace), made by relisting only the directories the restore touched.
//! So HEAD is always "the workspace as it is now": `ckpt status` shows the
//! restored paths unchanged, repeating the same restore is a no-op, and the
//! pre-restore save (the `undo` id) still gives back what was there before.
//! With `--no-save` nothing is recorded before or after (nothing is written
//! to the store but the journal and the index): HEAD stays where it was,
//! and the restored paths show in `status` relative to it (unchanged when
//! they were restored from HEAD).
//!
//! ## Space
//! A restore frees space before it uses space: deletions first, then files
//! that shrink, then files that grow (above). It copies nothing into the
//! store that the store already holds (see [`crate::store::objects`]), so
//! on a full disk the pre-restore save only needs room for what is unsaved,
//! and `--no-save` needs none in the store: its few small commits (journal,
//! head, agent state) may use the store's reserve, which saves never touch
//! (see [`crate::store`], "The reserve"). When a file's new content does
//! not fit beside its old content, the old file is removed first and the
//! write retried: a reader may then briefly see the path missing, never a
//! half-written file. A restore that still runs out of space stops as an
//! interrupted restore (journaled, step 2): once space is freed, running it
//! again finishes it.
//!
//! Agent state ([`crate::store::state`]) is restored with the files, after the
//! pre-restore save (which pins the current state version, so the undo id
//! rewinds the state too) and after the journal is written, before any file
//! is touched: one new state commit whose content equals the checkpoint's
//! state version (0, the empty state, when the checkpoint has none). It is
//! idempotent, so re-running an interrupted restore finishes it.
//! [`Scope::FilesOnly`] leaves the state alone, as does restoring only some
//! `paths`; [`Scope::StateOnly`] restores only the state (still after the
//! pre-restore save) and leaves files, head and journal alone.
//!
//! Another workspace inside this one (a subdirectory holding a `.ckpt`
//! marker) is never touched: the scan leaves it out, the plan drops every
//! change at or below it, and removing a directory keeps such a
//! subdirectory (and so the directories above it).
//!
//! An entry the scan was not allowed to read and left out
//! ([`crate::workspace::scan`]: an unreadable file the index cannot vouch
//! for, an unreadable directory) is in no checkpoint, so its content cannot
//! be brought back: like a FIFO, it is left alone, also when the directory
//! holding it is removed (that directory then stays, holding it). Where the
//! target has an entry at its path, the target's entry replaces it: a file
//! is renamed over it (no read permission needed); an unreadable directory is
//! first given owner `rwx` (`chmod`, which its owner may always do), then
//! filled with the target's entries and given the target's mode in the last
//! phase. Its children that the target does not name are left there: never
//! captured, they are not removed. An unreadable file the index vouched for
//! is in the checkpoint like any other; if only its mode differs from the
//! target's, it is rewritten from the store (it cannot be opened to `chmod`).
//!
//! Every path is reached through directory descriptors opened with
//! `O_NOFOLLOW` from the workspace root, so a symlink in the workspace or the
//! checkpoint can never make restore write outside the workspace.
//!
//! Into another directory (`--to DIR`, and `ckpt fork`) is
//! [`crate::engine::materialize`]'s job.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode as FsMode};
use rustix::io::Errno;

use crate::engine::diff::{self, Change, ChangeKind, PathFilter, TreeSource};
use crate::engine::save::{self, SaveOptions, SaveOutcome, REASON_TAG};
use crate::engine::scanner::{scan_against, ScanKind, Scanner};
use crate::error::IoContext;
use crate::error::NoSpaceForUndo;
use crate::store::catalog::{CatalogReader, Checkpoint, Durable, Journal};
use crate::store::index::{DirRecord, Index, IndexEntry, UNKNOWN_TREE};
use crate::store::objects::Objects;
use crate::store::state::{self, StateRestore};
use crate::store::tree::{Entry, Node, Tree};
use crate::store::Store;
use crate::workspace::ignore::Ignore;
use crate::workspace::scan::{ScanResult, Unreadable, TEMP_PREFIX};
use crate::workspace::Workspace;
use crate::{Error, Hash, Result};
use ckpt_copy::fs::is_within;
use ckpt_copy::fs::{self, display_path, join, parent_of, Meta};

/// Options of an in-place restore.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RestoreOptions {
    /// Restore only these relative paths (and below); empty = everything.
    pub paths: Vec<Vec<u8>>,
    /// Only report what would change.
    pub dry_run: bool,
    /// Do not save the current state first.
    pub no_save: bool,
    /// Files, agent state, or both (default).
    pub scope: Scope,
}

/// What an in-place restore brings back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Scope {
    /// Files and agent state (state only when no `paths` are given).
    #[default]
    All,
    /// Only files (`--files-only`).
    FilesOnly,
    /// Only agent state (`--state-only`).
    StateOnly,
}

/// What a restore did (or, with `dry_run`, would do).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RestoreReport {
    /// The checkpoint restored.
    pub target: Checkpoint,
    /// The checkpoint that undoes this restore.
    pub undo: Option<u64>,
    /// A checkpoint made of the state before the restore, if one was needed.
    pub pre_save: Option<Checkpoint>,
    /// After a restore of some paths (not `--no-save`): the checkpoint of
    /// the workspace as restored, now HEAD (None when HEAD already was that).
    #[serde(default)]
    pub post_save: Option<Checkpoint>,
    /// Every difference applied.
    pub changes: Vec<Change>,
    /// An interrupted restore of the same target was finished.
    pub resumed: bool,
    /// Files and symlinks written.
    pub written: u64,
    /// Entries removed.
    pub removed: u64,
    /// What happened to the agent state (None: not restored, or there is no
    /// state on either side).
    pub state: Option<StateRestore>,
    /// Entries the scan was not allowed to read (see the module doc).
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
}

impl RestoreReport {
    /// A report in which no file was written or removed (a state-only
    /// restore, or nothing to do).
    fn files_untouched(
        target: Checkpoint,
        undo: Option<u64>,
        pre_save: Option<Checkpoint>,
        state: Option<StateRestore>,
    ) -> RestoreReport {
        RestoreReport {
            target,
            undo,
            pre_save,
            post_save: None,
            changes: Vec::new(),
            resumed: false,
            written: 0,
            removed: 0,
            state,
            unreadable: Vec::new(),
        }
    }

    /// The report of a dry run: what would change (`changes`), nothing
    /// saved, written or removed.
    pub fn dry_run(
        target: Checkpoint,
        changes: Vec<Change>,
        state: Option<StateRestore>,
        unreadable: Vec<Unreadable>,
    ) -> RestoreReport {
        RestoreReport {
            changes,
            state,
            unreadable,
            ..RestoreReport::files_untouched(target, None, None, None)
        }
    }
}

/// Restores the workspace in place to checkpoint `rev`, scanning and
/// keeping the index through `scanner` ([`crate::engine::scanner::OnDisk`]
/// in a command, the in-memory index in the watcher).
pub fn restore(
    ws: &Workspace,
    store: &Store,
    rev: &str,
    opts: &RestoreOptions,
    scanner: &mut dyn Scanner,
) -> Result<RestoreReport> {
    let filter = PathFilter::new(opts.paths.clone());
    let state_only = opts.scope == Scope::StateOnly;
    if state_only && !filter.is_all() {
        return Err(Error::Usage(
            "--state-only restores the agent state, not paths; drop the paths (nothing was changed)"
                .into(),
        ));
    }
    let with_state = opts.scope != Scope::FilesOnly && filter.is_all();
    let (target, journal) = {
        let r = store.catalog.reader()?;
        let target = r.resolve(rev)?;
        // A path that names nothing on either side is a typo (or a flag
        // after `--`): refuse it before anything is saved or journaled.
        check_paths_exist(ws, &r, &target, filter.paths())?;
        (target, r.journal()?)
    };
    let ignore = ws.ignore()?;

    if opts.dry_run {
        let state = match with_state {
            true => state::restore_state(&store.state, &target, true)?,
            false => None,
        };
        if state_only {
            return Ok(RestoreReport::files_untouched(target, None, None, state));
        }
        let scan = scanner.scan(ws, store, ScanKind::HashOnly)?;
        let reader = store.catalog.reader()?;
        let changes = plan(&reader, &scan, target.root, &filter, &ignore, &ws.root)?;
        return Ok(RestoreReport::dry_run(
            target,
            changes,
            state,
            scan.unreadable,
        ));
    }

    let resumed = !state_only
        && journal
            .as_ref()
            .is_some_and(|j| j.target == target.seq && j.paths == filter.paths());
    // The pre-restore save, unless `--no-save` or an interrupted restore is
    // being finished: then nothing is written to the store, and the scan
    // only hashes.
    let save_first = !opts.no_save && !resumed;
    let kind = match save_first {
        true => ScanKind::Capture,
        false => ScanKind::HashKeep,
    };
    // The pre-save's index is not written here: the restore writes the index
    // once, updated with what it applied (the index is only a cache, so a
    // crash in between costs re-hashing, nothing else).
    let t0 = std::time::Instant::now();
    let no_room = |scanner: &mut dyn Scanner, e: Error| {
        no_space_for_undo(ws, store, scanner, &target, &filter, &ignore, e)
    };
    let scanned = match scanner.scan(ws, store, kind) {
        Err(e) if save_first && e.is_out_of_space() => return Err(no_room(scanner, e)),
        r => r?,
    };
    // Plan and check before anything is committed: a damaged store fails
    // the restore with nothing changed, and when there is something to do,
    // the journal is committed in the pre-save's own transaction.
    let reader = store.catalog.reader()?;
    let t = crate::trace::span("restore plan");
    let changes = match state_only {
        true => Vec::new(),
        false => plan(&reader, &scanned, target.root, &filter, &ignore, &ws.root)?,
    };
    drop(t);
    drop(reader);
    let full = filter.is_all();
    let new_journal = (!changes.is_empty() && !resumed).then(|| Journal {
        target: target.seq,
        paths: filter.paths().to_vec(),
        undo: None,
    });
    if !changes.is_empty() {
        let _t = crate::trace::span("check objects");
        check_objects(&store.objects, &changes)?;
    }
    let (pre_save, undo, mut scan) = if save_first {
        let save_opts = SaveOptions {
            message: format!("before restore to {}", target.id()),
            tags: [(REASON_TAG.to_string(), "pre-restore".to_string())].into(),
            allow_empty: false,
            journal: new_journal.clone(),
        };
        // Durable before any file changes: it is the restore's undo.
        let captured =
            match save::capture_scanned(ws, store, &save_opts, scanned, Durable::AtCommit, t0) {
                Err(e) if e.is_out_of_space() => return Err(no_room(scanner, e)),
                r => r?,
            };
        match captured.outcome {
            SaveOutcome::Saved(cp) => (Some(cp.clone()), Some(cp.seq), captured.scan),
            SaveOutcome::Unchanged(head) => (None, head.map(|h| h.seq), captured.scan),
        }
    } else {
        save::remove_temp_files(ws, &scanned.temp_files)?;
        let undo = journal.as_ref().filter(|_| resumed).and_then(|j| j.undo);
        (None, undo, scanned)
    };
    let unreadable = scan.unreadable.clone();
    ckpt_fault::point("restore.after_pre_save");
    // The restore's own commits may use the store's reserve (see
    // `crate::store`, "The reserve"): here, and after the files are written.
    store.room_for_commit();
    // Without a pre-save checkpoint the journal gets its own transaction.
    if let (Some(j), None) = (new_journal, &pre_save) {
        let _t = crate::trace::span("journal");
        store.catalog.set_journal(Some(&Journal { undo, ..j }))?;
    }
    ckpt_fault::point("restore.after_journal");

    if state_only {
        scanner.keep_index(store, scan)?;
        let state = state::restore_state(&store.state, &target, false)?;
        return Ok(RestoreReport::files_untouched(
            target, undo, pre_save, state,
        ));
    }

    // After a path restore (unless `--no-save`), the workspace as restored
    // is recorded, so HEAD is what is on disk and the restored paths show as
    // unchanged (see the module doc).
    let record_after = !full && !opts.no_save;
    let reader = store.catalog.reader()?;
    if changes.is_empty() {
        let t = crate::trace::span("state");
        let state = match with_state {
            true => state::restore_state(&store.state, &target, false)?,
            false => None,
        };
        drop(t);
        let post_save = match record_after {
            true => {
                let (cp, rescan) = record_restored(ws, store, &target, &filter, scan, &[])?;
                scan = rescan;
                cp
            }
            false => None,
        };
        scanner.keep_index(store, scan)?;
        let _t = crate::trace::span("journal end");
        // Nothing to record when there is no journal and HEAD is the
        // target already (a fork's restore in its snapshot, most often).
        let at_target = journal.is_none() && reader.head()? == Some(target.seq);
        if full && !at_target {
            store.catalog.finish_restore(Some(target.seq))?;
        } else if journal.is_some() {
            store.catalog.set_journal(None)?;
        }
        return Ok(RestoreReport {
            target,
            undo,
            pre_save,
            post_save,
            changes,
            resumed,
            written: 0,
            removed: 0,
            state,
            unreadable,
        });
    }

    let state = match with_state {
        true => state::restore_state(&store.state, &target, false)?,
        false => None,
    };
    ckpt_fault::point("restore.after_state");

    let root_fd = fs::open_dir_path(&ws.root).ctx("open", &ws.root)?;
    let applier = Applier {
        root: root_fd,
        root_path: &ws.root,
        objects: &store.objects,
        ignore: Some(&ignore),
        left_out: scan
            .unreadable
            .iter()
            .filter(|u| !u.kept)
            .map(|u| u.path.clone())
            .collect(),
        written: Mutex::new(HashMap::new()),
        removed: AtomicU64::new(0),
        counter: AtomicU64::new(0),
    };
    let lookup = TargetLookup::new(&reader, target.root);
    let t = crate::trace::span("apply");
    applier.apply(&changes, &lookup)?;
    drop(t);
    store.room_for_commit();

    let t = crate::trace::span("update index");
    scan.index = updated_index(
        std::mem::take(&mut scan.index),
        &changes,
        &applier.written.into_inner().unwrap(),
        &lookup,
    )?;
    scan.index_unchanged = false;
    drop(t);
    // Recorded before the journal is cleared: if this fails, status still
    // reports the restore as interrupted and re-running it records it.
    let post_save = match record_after {
        true => {
            let _t = crate::trace::span("post-restore save");
            let (cp, rescan) = record_restored(ws, store, &target, &filter, scan, &changes)?;
            scan = rescan;
            cp
        }
        false => None,
    };
    ckpt_fault::point("restore.before_journal_end");
    let t = crate::trace::span("journal end");
    store.catalog.finish_restore(full.then_some(target.seq))?;
    drop(t);
    ckpt_fault::point("restore.after_journal_end");
    // The pre-save scan's watch token is valid for this index too: every
    // directory marked up to it was listed by that scan, and restore's own
    // writes are marked after it (see `crate::watch`).
    scanner.keep_index(store, scan)?;
    let written = changes
        .iter()
        .filter(|c| {
            c.new
                .as_ref()
                .is_some_and(|e| !matches!(e.node, Node::Dir { .. }))
        })
        .count() as u64;
    Ok(RestoreReport {
        target,
        undo,
        pre_save,
        post_save,
        changes,
        resumed,
        written,
        removed: applier.removed.into_inner(),
        state,
        unreadable,
    })
}

/// Refuses (with [`Error::Usage`], before anything is changed) restore
/// paths that match nothing: neither in `target` nor in the working
/// directory. The working directory is looked at through directory
/// descriptors, never following a symlink.
fn check_paths_exist(
    ws: &Workspace,
    reader: &CatalogReader<'_>,
    target: &Checkpoint,
    paths: &[Vec<u8>],
) -> Result<()> {
    if paths.is_empty() || paths.iter().any(|p| p.is_empty() || p == b".") {
        return Ok(());
    }
    let lookup = TargetLookup::new(reader, target.root);
    let mut root: Option<OwnedFd> = None;
    let mut missing = Vec::new();
    for p in paths {
        if lookup.entry(p)?.is_some() {
            continue;
        }
        if root.is_none() {
            root = Some(fs::open_dir_path(&ws.root).ctx("open", &ws.root)?);
        }
        let root = root.as_ref().expect("opened");
        let on_disk = fs::open_dir_beneath(root.as_fd(), parent_of(p))
            .ok()
            .is_some_and(|d| fs::stat_at(d.as_fd(), name_of(p)).is_ok());
        if !on_disk {
            missing.push(String::from_utf8_lossy(p).into_owned());
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let (what, verb) = match missing.len() {
        1 => (missing[0].clone(), "matches"),
        _ => (missing.join(", "), "match"),
    };
    Err(Error::Usage(format!(
        "{what} {verb} nothing, neither in {} nor in the working directory; nothing was changed \
         (paths are relative to the current directory; flags go before `--`)",
        target.id()
    )))
}

/// After a restore of `filter`'s paths: records the workspace as it now is
/// (a checkpoint tagged `ckpt.reason=restore-paths`, which becomes HEAD),
/// from `prior` (the pre-restore scan, its index updated with what the
/// restore wrote) by relisting only the directories `changes` touched.
/// Returns the checkpoint (None when HEAD already equals the workspace) and
/// the scan whose index the caller keeps.
fn record_restored(
    ws: &Workspace,
    store: &Store,
    target: &Checkpoint,
    filter: &PathFilter,
    prior: ScanResult,
    changes: &[Change],
) -> Result<(Option<Checkpoint>, ScanResult)> {
    let t0 = std::time::Instant::now();
    let is_dir = |e: &Option<Entry>| {
        e.as_ref()
            .is_some_and(|e| matches!(e.node, Node::Dir { .. }))
    };
    let mut dirty: HashSet<Vec<u8>> = HashSet::new();
    for c in changes {
        dirty.insert(parent_of(&c.path).to_vec());
        if is_dir(&c.new) || is_dir(&c.old) {
            dirty.insert(c.path.clone());
        }
    }
    let mut rescan = scan_against(ws, store, prior.index, ScanKind::Capture, Some(&dirty))?;
    // Unchanged relative to the prior index, which may itself be newer than
    // the index file.
    rescan.index_unchanged &= prior.index_unchanged;
    let shown: Vec<String> = filter
        .paths()
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let opts = SaveOptions {
        message: format!("restored {} from {}", shown.join(", "), target.id()),
        tags: [(REASON_TAG.to_string(), "restore-paths".to_string())].into(),
        allow_empty: false,
        journal: None,
    };
    let captured = save::capture_scanned(ws, store, &opts, rescan, Durable::AtCommit, t0)?;
    let cp = match captured.outcome {
        SaveOutcome::Saved(cp) => Some(cp),
        SaveOutcome::Unchanged(_) => None,
    };
    Ok((cp, captured.scan))
}

/// The error of a restore to `target` whose pre-restore save ran out of
/// space (`cause`, which is returned as it is if it is not an I/O error):
/// [`Error::NoSpaceForUndo`], listing the unsaved changes `--no-save`
/// would lose, found by a scan that stores nothing (and whose index is not
/// kept). Nothing was changed: the failed save committed nothing and its
/// pending objects were dropped.
fn no_space_for_undo(
    ws: &Workspace,
    store: &Store,
    scanner: &mut dyn Scanner,
    target: &Checkpoint,
    filter: &PathFilter,
    ignore: &Ignore,
    cause: Error,
) -> Error {
    let Error::Io(io) = cause else { return cause };
    match unsaved_overwritten(ws, store, scanner, target, filter, ignore) {
        Ok(lost) => Error::NoSpaceForUndo(Box::new(NoSpaceForUndo {
            target: target.id(),
            store: store.root.clone(),
            cause: io,
            lost,
        })),
        Err(_) => Error::Io(io),
    }
}

/// The changes since the head checkpoint (unsaved, within `filter`) that a
/// restore to `target` would overwrite or delete: those at or below a path
/// the restore changes. As name-status lines (`M src/a.py`), in path order.
fn unsaved_overwritten(
    ws: &Workspace,
    store: &Store,
    scanner: &mut dyn Scanner,
    target: &Checkpoint,
    filter: &PathFilter,
    ignore: &Ignore,
) -> Result<Vec<String>> {
    let scan = scanner.scan(ws, store, ScanKind::HashKeep)?;
    let reader = store.catalog.reader()?;
    let changes = plan(&reader, &scan, target.root, filter, ignore, &ws.root)?;
    let touched: HashSet<&[u8]> = changes.iter().map(|c| c.path.as_slice()).collect();
    let unsaved = crate::engine::status::status(store, filter, scan)?.changes;
    let overwritten = |path: &[u8]| {
        let mut p = path;
        while !p.is_empty() {
            if touched.contains(p) {
                return true;
            }
            p = parent_of(p);
        }
        false
    };
    Ok(unsaved
        .iter()
        .filter(|c| c.is_interesting() && overwritten(&c.path))
        .map(|c| format!("{} {}", c.kind.letter(), String::from_utf8_lossy(&c.path)))
        .collect())
}

/// Re-hashes every object `changes` will write, in parallel, so a damaged
/// store fails a restore before anything is changed.
fn check_objects(objects: &Objects, changes: &[Change]) -> Result<()> {
    let mut needed: Vec<(Hash, u64)> = changes
        .iter()
        .filter(|c| {
            matches!(
                c.kind,
                ChangeKind::Added | ChangeKind::Modified | ChangeKind::TypeChanged
            )
        })
        .filter_map(|c| match c.new.as_ref().map(|e| &e.node) {
            Some(Node::File { hash, size }) => Some((*hash, *size)),
            _ => None,
        })
        .collect();
    needed.sort_unstable();
    needed.dedup();
    needed
        .par_iter()
        .try_for_each(|(h, size)| objects.check(h, *size))
}

/// Every difference from the scanned state to the target tree, within
/// `filter`, without `.ckptignore`d paths and without anything at or below
/// another workspace inside `root`: what a restore must do.
fn plan(
    reader: &CatalogReader<'_>,
    scan: &crate::workspace::scan::ScanResult,
    target: Hash,
    filter: &PathFilter,
    ignore: &Ignore,
    root: &Path,
) -> Result<Vec<Change>> {
    let src = TreeSource {
        fresh: Some(&scan.new_trees),
        catalog: reader,
    };
    let mut changes = diff::diff_trees(&src, Some(scan.root), Some(target), filter)?;
    drop_ignored(&mut changes, ignore);
    drop_nested(&mut changes, root);
    Ok(changes)
}

/// What an in-place restore of the whole workspace to the tree `target`
/// would change, where `target` and its subtrees are in `trees` (another
/// store's checkpoint, not brought into this one: `adopt --dry-run`).
/// `scan` is a hash-only scan of the workspace; nothing is changed.
pub fn plan_foreign(
    ws: &Workspace,
    store: &Store,
    scan: &ScanResult,
    target: Hash,
    trees: &HashMap<Hash, Vec<u8>>,
) -> Result<Vec<Change>> {
    let ignore = ws.ignore()?;
    let mut fresh = scan.new_trees.clone();
    fresh.extend(trees.iter().map(|(h, t)| (*h, t.clone())));
    let reader = store.catalog.reader()?;
    let src = TreeSource {
        fresh: Some(&fresh),
        catalog: &reader,
    };
    let all = PathFilter::new(Vec::new());
    let mut changes = diff::diff_trees(&src, Some(scan.root), Some(target), &all)?;
    drop_ignored(&mut changes, &ignore);
    drop_nested(&mut changes, &ws.root);
    Ok(changes)
}

/// Drops every change at or below another workspace inside `root`. The scan
/// never includes one, so only an added directory can be one: a target
/// directory that is on disk a directory with a `.ckpt` marker file.
fn drop_nested(changes: &mut Vec<Change>, root: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let nested: Vec<Vec<u8>> = changes
        .iter()
        .filter(|c| {
            c.kind == ChangeKind::Added
                && matches!(c.new.as_ref().map(|e| &e.node), Some(Node::Dir { .. }))
        })
        .filter(|c| {
            let dir = root.join(std::ffi::OsStr::from_bytes(&c.path));
            dir.symlink_metadata().is_ok_and(|m| m.is_dir())
                && dir
                    .join(crate::workspace::MARKER_NAME)
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_file())
        })
        .map(|c| c.path.clone())
        .collect();
    if !nested.is_empty() {
        changes.retain(|c| !nested.iter().any(|n| is_within(&c.path, n)));
    }
}

fn drop_ignored(changes: &mut Vec<Change>, ignore: &Ignore) {
    if ignore.is_active() {
        changes.retain(|c| {
            let is_dir = |e: &Option<Entry>| {
                e.as_ref()
                    .is_some_and(|e| matches!(e.node, Node::Dir { .. }))
            };
            !ignore.is_ignored(&c.path, is_dir(&c.new) || is_dir(&c.old))
        });
    }
}

fn name_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// Finds entries of the target checkpoint by path, caching trees.
struct TargetLookup<'a> {
    reader: &'a CatalogReader<'a>,
    root: Hash,
    trees: Mutex<HashMap<Hash, Arc<Tree>>>,
}

impl<'a> TargetLookup<'a> {
    fn new(reader: &'a CatalogReader<'a>, root: Hash) -> Self {
        TargetLookup {
            reader,
            root,
            trees: Mutex::new(HashMap::new()),
        }
    }

    fn tree(&self, h: &Hash) -> Result<Arc<Tree>> {
        if let Some(t) = self.trees.lock().unwrap().get(h) {
            return Ok(Arc::clone(t));
        }
        let t = Arc::new(self.reader.tree(h)?);
        self.trees.lock().unwrap().insert(*h, Arc::clone(&t));
        Ok(t)
    }

    /// The tree hash of the directory at `path` in the target, if it is one.
    fn dir_tree(&self, path: &[u8]) -> Result<Option<Hash>> {
        let mut cur = self.root;
        for comp in path.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            let t = self.tree(&cur)?;
            match t.get(comp).map(|e| &e.node) {
                Some(Node::Dir { tree }) => cur = *tree,
                _ => return Ok(None),
            }
        }
        Ok(Some(cur))
    }

    /// The target entry at `path` (not the root).
    fn entry(&self, path: &[u8]) -> Result<Option<Entry>> {
        let Some(parent) = self.dir_tree(parent_of(path))? else {
            return Ok(None);
        };
        Ok(self.tree(&parent)?.get(name_of(path)).cloned())
    }
}

/// A file or symlink operation in one directory.
enum Op<'c> {
    /// Write the entry; the second field is the size of the file it
    /// replaces (0 if none).
    Write(&'c Entry, u64),
    Meta(&'c Entry),
}

impl Op<'_> {
    /// Whether it needs more space than it frees: a write of a file larger
    /// than the one it replaces. Those run after all the others (see the
    /// module doc, "Space").
    fn grows(&self) -> bool {
        match self {
            Op::Write(e, replaced) => match e.node {
                Node::File { size, .. } => size > *replaced,
                _ => false,
            },
            Op::Meta(_) => false,
        }
    }
}

/// The size of the file `e` is, 0 for anything else.
fn file_size(e: Option<&Entry>) -> u64 {
    match e.map(|e| &e.node) {
        Some(Node::File { size, .. }) => *size,
        _ => 0,
    }
}

struct Applier<'a> {
    root: OwnedFd,
    root_path: &'a Path,
    objects: &'a Objects,
    ignore: Option<&'a Ignore>,
    /// Unreadable entries the scan left out: never removed.
    left_out: HashSet<Vec<u8>>,
    written: Mutex<HashMap<Vec<u8>, Meta>>,
    removed: AtomicU64,
    counter: AtomicU64,
}

impl Applier<'_> {
    fn shown(&self, rel: &[u8]) -> PathBuf {
        display_path(self.root_path, rel)
    }

    fn open_dir(&self, rel: &[u8]) -> Result<OwnedFd> {
        fs::open_dir_beneath(self.root.as_fd(), rel).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR => Error::Usage(format!(
                "{}: a path component is not a directory (a symlink or file is in the way); nothing beyond it was written",
                self.shown(rel).display()
            )),
            e => Error::io("open directory", self.shown(rel), e.into()),
        })
    }

    fn temp_name(&self) -> Vec<u8> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut name = TEMP_PREFIX.to_vec();
        name.extend_from_slice(format!("{}.{n}", std::process::id()).as_bytes());
        name
    }

    fn apply(&self, changes: &[Change], lookup: &TargetLookup<'_>) -> Result<()> {
        // Phase A: removals and directory creation, in path order.
        let mut removed_dirs: Vec<&[u8]> = Vec::new();
        let mut groups: BTreeMap<&[u8], Vec<(&[u8], Op<'_>)>> = BTreeMap::new();
        let mut finalize: BTreeSet<Vec<u8>> = BTreeSet::new();
        for c in changes {
            let path = c.path.as_slice();
            let mut p = parent_of(path);
            while !p.is_empty() && finalize.insert(p.to_vec()) {
                p = parent_of(p);
            }
            let under_removed = removed_dirs.last().is_some_and(|d| is_within(path, d));
            match c.kind {
                ChangeKind::Deleted => {
                    if !under_removed {
                        self.remove(path)?;
                        if matches!(c.old.as_ref().map(|e| &e.node), Some(Node::Dir { .. })) {
                            removed_dirs.push(path);
                        }
                    }
                }
                ChangeKind::TypeChanged => {
                    self.remove(path)?;
                    if matches!(c.old.as_ref().map(|e| &e.node), Some(Node::Dir { .. })) {
                        removed_dirs.push(path);
                    }
                    self.create(c, &mut groups, &mut finalize)?;
                }
                ChangeKind::Added => self.create(c, &mut groups, &mut finalize)?,
                ChangeKind::Modified => {
                    let e = c.new.as_ref().unwrap();
                    groups
                        .entry(parent_of(path))
                        .or_default()
                        .push((path, Op::Write(e, file_size(c.old.as_ref()))));
                }
                ChangeKind::ModeChanged | ChangeKind::Touched => {
                    let e = c.new.as_ref().unwrap();
                    if matches!(e.node, Node::Dir { .. }) {
                        finalize.insert(path.to_vec());
                    } else {
                        groups
                            .entry(parent_of(path))
                            .or_default()
                            .push((path, Op::Meta(e)));
                    }
                }
            }
        }

        ckpt_fault::point("restore.phase_a");
        // Phase B: files and symlinks, in parallel per directory: first
        // everything that frees space or needs none, then the writes of
        // files that grow.
        let groups: Vec<_> = groups.into_iter().collect();
        for growing in [false, true] {
            // A directory that ran out of space while others were being
            // written is done again once they are, alone.
            let again = Mutex::new(Vec::new());
            groups.par_iter().try_for_each(|(dir, ops)| {
                match self.write_group(dir, ops, growing) {
                    Err(e) if e.is_out_of_space() => {
                        again.lock().unwrap().push((dir, ops));
                        Ok(())
                    }
                    r => r,
                }
            })?;
            for (dir, ops) in again.into_inner().unwrap() {
                self.write_group(dir, ops, growing)?;
            }
        }

        ckpt_fault::point("restore.phase_c");
        // Phase C: directory modes and mtimes, deepest first.
        let mut dirs: Vec<Vec<u8>> = finalize.into_iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.iter().filter(|&&b| b == b'/').count()));
        for d in dirs {
            let Some(e) = lookup.entry(&d)? else { continue };
            if !matches!(e.node, Node::Dir { .. }) {
                continue;
            }
            let fd = self.open_dir(&d)?;
            rustix::fs::fchmod(&fd, FsMode::from_raw_mode(e.mode)).ctx("chmod", self.shown(&d))?;
            fs::set_mtime_fd(fd.as_fd(), e.mtime_ns).ctx("set mtime", self.shown(&d))?;
        }
        Ok(())
    }

    /// Phase B for the directory `dir`: its operations that grow (or, with
    /// `growing` false, do not; see [`Op::grows`]) and are not done yet.
    fn write_group(&self, dir: &[u8], ops: &[(&[u8], Op<'_>)], growing: bool) -> Result<()> {
        let mut ops = ops
            .iter()
            .filter(|(path, op)| {
                op.grows() == growing && !self.written.lock().unwrap().contains_key(*path)
            })
            .peekable();
        if ops.peek().is_none() {
            return Ok(());
        }
        let dfd = self.open_dir(dir)?;
        for (path, op) in ops {
            match op {
                Op::Write(e, _) => self.write_entry(dfd.as_fd(), path, e)?,
                Op::Meta(e) => self.fix_meta(dfd.as_fd(), path, e)?,
            }
        }
        Ok(())
    }

    fn create<'c>(
        &self,
        c: &'c Change,
        groups: &mut BTreeMap<&'c [u8], Vec<(&'c [u8], Op<'c>)>>,
        finalize: &mut BTreeSet<Vec<u8>>,
    ) -> Result<()> {
        let e = c.new.as_ref().unwrap();
        let path = c.path.as_slice();
        if let Node::Dir { .. } = e.node {
            let dfd = self.open_dir(parent_of(path))?;
            match rustix::fs::mkdirat(&dfd, name_of(path), FsMode::from_raw_mode(0o700)) {
                Ok(()) => {}
                Err(Errno::EXIST) => match fs::stat_at(dfd.as_fd(), name_of(path)) {
                    // Not in the scan: one it may not read (see the module
                    // doc). Ours to fill: owner rwx until phase C.
                    Ok(m) if m.file_type() == rustix::fs::FileType::Directory => {
                        if m.perm() & 0o700 != 0o700 {
                            rustix::fs::chmodat(
                                &dfd,
                                name_of(path),
                                FsMode::from_raw_mode(m.perm() | 0o700),
                                AtFlags::empty(),
                            )
                            .ctx("chmod", self.shown(path))?;
                        }
                    }
                    _ => {
                        fs::remove_all_at(dfd.as_fd(), name_of(path))
                            .ctx("remove", self.shown(path))?;
                        rustix::fs::mkdirat(&dfd, name_of(path), FsMode::from_raw_mode(0o700))
                            .ctx("create directory", self.shown(path))?;
                    }
                },
                Err(e) => return Err(Error::io("create directory", self.shown(path), e.into())),
            }
            finalize.insert(path.to_vec());
        } else {
            groups
                .entry(parent_of(path))
                .or_default()
                .push((path, Op::Write(e, 0)));
        }
        Ok(())
    }

    /// Removes `path` (recursively), leaving `.ckptignore`d entries and
    /// other workspaces (directories with a `.ckpt` marker) alone.
    fn remove(&self, path: &[u8]) -> Result<()> {
        let dfd = self.open_dir(parent_of(path))?;
        self.remove_at(dfd.as_fd(), path).map(|_| ())
    }

    /// Removes `path` in `dir`; false when something in it was kept (so it
    /// is still there).
    fn remove_at(&self, dir: BorrowedFd<'_>, path: &[u8]) -> Result<bool> {
        let name = name_of(path);
        let meta = match fs::stat_at(dir, name) {
            Ok(m) => m,
            Err(Errno::NOENT) => return Ok(true),
            Err(e) => return Err(Error::io("stat", self.shown(path), e.into())),
        };
        if meta.file_type() == rustix::fs::FileType::Directory {
            let sub = match fs::open_dir_at(dir, name) {
                Ok(sub) => sub,
                // It may not be read, so it was never captured: keep it.
                Err(Errno::ACCESS | Errno::PERM) => return Ok(false),
                Err(e) => return Err(Error::io("open directory", self.shown(path), e.into())),
            };
            let sub = fs::list_dir(sub).ctx("read directory", self.shown(path))?;
            // Another workspace: not ours to remove.
            let marker = crate::workspace::MARKER_NAME.as_bytes();
            if sub.names.iter().any(|(n, _)| n.as_slice() == marker)
                && fs::stat_at(sub.fd(), marker)
                    .is_ok_and(|m| m.file_type() == rustix::fs::FileType::RegularFile)
            {
                return Ok(false);
            }
            let mut kept = false;
            for (child, _) in &sub.names {
                let cpath = join(path, child);
                let child_is_dir = fs::stat_at(sub.fd(), child)
                    .is_ok_and(|m| m.file_type() == rustix::fs::FileType::Directory);
                if self.left_out.contains(&cpath)
                    || self
                        .ignore
                        .is_some_and(|ig| ig.is_ignored(&cpath, child_is_dir))
                {
                    kept = true;
                    continue;
                }
                if !self.remove_at(sub.fd(), &cpath)? {
                    kept = true;
                }
            }
            if kept {
                // Counted as before: its removable contents went.
                self.removed.fetch_add(1, Ordering::Relaxed);
                return Ok(false);
            }
            rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
                .ctx("remove directory", self.shown(path))?;
        } else {
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(Error::io("remove", self.shown(path), e.into())),
            }
        }
        self.removed.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Writes a file or symlink under a temporary name and renames it into
    /// place.
    fn write_entry(&self, dir: BorrowedFd<'_>, path: &[u8], e: &Entry) -> Result<()> {
        self.write_entry_copy(dir, path, e, self.temp_name())
    }

    /// [`write_entry`](Self::write_entry) by copying (or, for a symlink,
    /// creating) into the temporary name `tmp`.
    fn write_entry_copy(
        &self,
        dir: BorrowedFd<'_>,
        path: &[u8],
        e: &Entry,
        tmp: Vec<u8>,
    ) -> Result<()> {
        let name = name_of(path);
        let shown = || self.shown(path);
        let meta = match &e.node {
            Node::File { size, hash } => {
                let dst = match self.objects.materialize(hash, *size, dir, &tmp, &shown) {
                    // No room for the new file beside the old one: the old
                    // one goes first (see the module doc, "Space").
                    Err(e) if e.is_out_of_space() && self.make_room(dir, path)? => {
                        self.objects.materialize(hash, *size, dir, &tmp, &shown)?
                    }
                    r => r?,
                };
                let done = (|| -> Result<Meta> {
                    rustix::fs::fchmod(&dst, FsMode::from_raw_mode(e.mode))
                        .ctx("chmod", shown())?;
                    fs::set_mtime_fd(dst.as_fd(), e.mtime_ns).ctx("set mtime", shown())?;
                    ckpt_fault::point("restore.after_tmp_write");
                    rustix::fs::renameat(dir, tmp.as_slice(), dir, name).ctx("rename", shown())?;
                    ckpt_fault::point("restore.after_rename");
                    fs::stat_fd(dst.as_fd()).ctx("stat", shown())
                })();
                if done.is_err() {
                    let _ = rustix::fs::unlinkat(dir, tmp.as_slice(), AtFlags::empty());
                }
                done?
            }
            Node::Symlink { target } => {
                rustix::fs::symlinkat(target.as_slice(), dir, tmp.as_slice())
                    .ctx("create symlink", shown())?;
                let done = (|| -> Result<Meta> {
                    fs::set_mtime_at(dir, &tmp, e.mtime_ns).ctx("set mtime", shown())?;
                    rustix::fs::renameat(dir, tmp.as_slice(), dir, name).ctx("rename", shown())?;
                    fs::stat_at(dir, name).ctx("stat", shown())
                })();
                if done.is_err() {
                    let _ = rustix::fs::unlinkat(dir, tmp.as_slice(), AtFlags::empty());
                }
                done?
            }
            Node::Dir { .. } => unreachable!("directories are created in phase A"),
        };
        self.written.lock().unwrap().insert(path.to_vec(), meta);
        Ok(())
    }

    /// Removes the file or symlink `path` (in `dir`) that a write is about
    /// to replace, when there was no room for the new one beside it; false
    /// when there is none.
    fn make_room(&self, dir: BorrowedFd<'_>, path: &[u8]) -> Result<bool> {
        let name = name_of(path);
        match fs::stat_at(dir, name) {
            Ok(m) if m.file_type() != rustix::fs::FileType::Directory => {}
            _ => return Ok(false),
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(Error::io("remove", self.shown(path), e.into())),
        }
    }

    /// Sets mode and mtime of an existing file or symlink whose content is
    /// already right.
    fn fix_meta(&self, dir: BorrowedFd<'_>, path: &[u8], e: &Entry) -> Result<()> {
        let name = name_of(path);
        let shown = || self.shown(path);
        let meta = match &e.node {
            Node::Symlink { .. } => {
                fs::set_mtime_at(dir, name, e.mtime_ns).ctx("set mtime", shown())?;
                fs::stat_at(dir, name).ctx("stat", shown())?
            }
            _ => match fs::open_file_at(dir, name) {
                Ok(fd) => {
                    rustix::fs::fchmod(&fd, FsMode::from_raw_mode(e.mode)).ctx("chmod", shown())?;
                    fs::set_mtime_fd(fd.as_fd(), e.mtime_ns).ctx("set mtime", shown())?;
                    fs::stat_fd(fd.as_fd()).ctx("stat", shown())?
                }
                // Unreadable (e.g. mode 000): rewrite it from the store.
                Err(Errno::ACCESS) => {
                    if let Node::File { hash, size } = &e.node {
                        self.objects.check(hash, *size)?;
                    }
                    return self.write_entry(dir, path, e);
                }
                Err(err) => return Err(Error::io("open", shown(), err.into())),
            },
        };
        self.written.lock().unwrap().insert(path.to_vec(), meta);
        Ok(())
    }
}

/// The index after a restore: the pre-restore scan's index with every
/// written path replaced. A directory keeps a known tree hash only when its
/// entries equal the target's exactly; otherwise its tree is marked unknown
/// and the next scan rebuilds it from the entries (no file is re-read).
fn updated_index(
    mut index: Index,
    changes: &[Change],
    written: &HashMap<Vec<u8>, Meta>,
    lookup: &TargetLookup<'_>,
) -> Result<Index> {
    // Directories that went away take their records with them (and get
    // none back below).
    let mut gone: Vec<&[u8]> = Vec::new();
    for c in changes {
        let old_dir = matches!(c.old.as_ref().map(|e| &e.node), Some(Node::Dir { .. }));
        let new_dir = matches!(c.new.as_ref().map(|e| &e.node), Some(Node::Dir { .. }));
        if old_dir && (!new_dir || c.kind == ChangeKind::TypeChanged) {
            index.dirs.remove_subtree(&c.path);
            gone.push(&c.path);
        }
    }
    // Changes grouped by parent directory.
    let mut by_dir: BTreeMap<Vec<u8>, Vec<&Change>> = BTreeMap::new();
    for c in changes {
        let mut p = parent_of(&c.path);
        by_dir.entry(p.to_vec()).or_default().push(c);
        while !p.is_empty() {
            p = parent_of(p);
            by_dir.entry(p.to_vec()).or_default();
        }
    }
    let mut dirs: Vec<Vec<u8>> = by_dir.keys().cloned().collect();
    dirs.sort_by_key(|d| {
        std::cmp::Reverse(if d.is_empty() {
            0
        } else {
            1 + d.iter().filter(|&&b| b == b'/').count()
        })
    });
    for d in dirs {
        if gone.iter().any(|g| is_within(&d, g)) {
            continue;
        }
        let mut entries: BTreeMap<Vec<u8>, IndexEntry> = index
            .dirs
            .get(&d)
            .map(|r| {
                r.entries
                    .iter()
                    .map(|e| (e.entry.name.clone(), e.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for c in &by_dir[&d] {
            let name = name_of(&c.path).to_vec();
            match &c.new {
                None => {
                    entries.remove(&name);
                }
                Some(e) if matches!(e.node, Node::Dir { .. }) => {
                    entries.insert(name, dir_entry(e));
                }
                Some(e) => {
                    if let Some(m) = written.get(&c.path) {
                        entries.insert(
                            name,
                            IndexEntry {
                                entry: e.clone(),
                                meta: *m,
                                racy: false,
                            },
                        );
                    }
                }
            }
        }
        // Subdirectories: their records (processed first, deeper) give the
        // tree; their mode and mtime are the target's (set in phase C).
        for (name, ie) in entries.iter_mut() {
            if let Node::Dir { .. } = ie.entry.node {
                let child = join(&d, name);
                if let Some(rec) = index.dirs.get(&child) {
                    ie.entry.node = Node::Dir { tree: rec.tree };
                    if by_dir.contains_key(&child) {
                        if let Some(t) = lookup.entry(&child)? {
                            ie.entry.mode = t.mode;
                            ie.entry.mtime_ns = t.mtime_ns;
                        }
                    }
                }
            }
        }
        let entries: crate::store::index::Entries = entries.into_values().collect();
        let tree = match lookup.dir_tree(&d)? {
            Some(h) => {
                let t = lookup.tree(&h)?;
                let same = t.entries.len() == entries.len()
                    && t.entries.iter().zip(&entries).all(|(a, b)| *a == b.entry);
                if same {
                    h
                } else {
                    UNKNOWN_TREE
                }
            }
            None => UNKNOWN_TREE,
        };
        index.dirs.insert(
            d,
            Arc::new(DirRecord {
                tree,
                entries,
                exact_names: false,
            }),
        );
    }
    Ok(index)
}

fn dir_entry(e: &Entry) -> IndexEntry {
    IndexEntry {
        entry: e.clone(),
        meta: Meta {
            mode: rustix::fs::FileType::Directory.as_raw_mode() | e.mode,
            mtime_ns: e.mtime_ns,
            ..Meta::default()
        },
        racy: false,
    }
}
