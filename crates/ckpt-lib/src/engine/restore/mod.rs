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
//! ([`RestoreOutcome::post_save`]; nothing when HEAD already equals the
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
//!
//! ## This folder
//! - this file: the options and report, and [`restore`], whose body is
//!   steps 0 to 4 above: `Request::new` (0), `pre_save` (1; it also plans
//!   step 3's differences and checks their objects, so a damaged store
//!   fails the restore before anything is committed), the journal (2),
//!   the agent state and `apply_changes` (3), and the end (4); `dry_run`
//!   is steps 1 and 3 with nothing written;
//! - `plan.rs`: step 3's plan: the differences to apply, without nested
//!   workspaces and ignored paths, and the check of every object to write;
//! - `apply.rs`: step 3's writes (the `Applier`) and step 4's index.

mod apply;
mod plan;

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use crate::engine::diff::{Change, PathFilter};
use crate::engine::save::{self, SaveJob, SaveOutcome, REASON_TAG};
use crate::engine::scanner::{scan_against, ScanKind, Scanner};
use crate::error::IoContext;
use crate::error::NoSpaceForUndo;
use crate::store::catalog::{CatalogReader, Checkpoint, Durable, Journal};
use crate::store::state::{self, StateRestore};
use crate::store::tree::{Entry, Node};
use crate::store::Store;
use crate::workspace::ignore::Ignore;
use crate::workspace::scan::{ScanResult, Unreadable};
use crate::workspace::Workspace;
use crate::{Error, Result};
use ckpt_fs::fs::{self, parent_of};

use apply::{name_of, updated_index, Applier, TargetLookup};
pub use plan::plan_foreign;
use plan::{check_objects, plan};

/// Options of an in-place restore.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RestoreJob {
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
pub struct RestoreOutcome {
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

impl RestoreOutcome {
    /// A report in which no file was written or removed (a state-only
    /// restore, or nothing to do).
    fn files_untouched(
        target: Checkpoint,
        undo: Option<u64>,
        pre_save: Option<Checkpoint>,
        state: Option<StateRestore>,
    ) -> RestoreOutcome {
        RestoreOutcome {
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
    ) -> RestoreOutcome {
        RestoreOutcome {
            changes,
            state,
            unreadable,
            ..RestoreOutcome::files_untouched(target, None, None, None)
        }
    }
}

/// Restores the workspace in place to checkpoint `rev`, scanning and
/// keeping the index through `scanner` ([`crate::engine::scanner::OnDisk`]
/// in a command, the in-memory index in the watcher). The body is the
/// numbered steps of the module doc, one function each.
///
/// Each step opens its own catalog reader and drops it before anything is
/// committed: a live reader keeps a lazily opened catalog read-only (see
/// [`crate::store::catalog`]), and a save's commit must be free to reopen it.
pub fn restore(
    ws: &Workspace,
    store: &Store,
    rev: &str,
    opts: &RestoreJob,
    scanner: &mut dyn Scanner,
) -> Result<RestoreOutcome> {
    // 0. What to restore; paths that match nothing are refused.
    let req = Request::new(ws, store, rev, opts)?;
    if opts.dry_run {
        return dry_run(ws, store, &req, scanner);
    }
    // 1. The current state: scanned, planned against the target, every
    //    object to write checked, and saved unless `--no-save`.
    let mut now = pre_save(ws, store, &req, opts.no_save, scanner)?;
    ckpt_fault::point("restore.after_pre_save");
    // The restore's own commits may use the store's reserve (see
    // `crate::store`, "The reserve"): here, and after the files are written.
    store.room_for_commit();
    // 2. The journal, unless the pre-save's transaction held it.
    if let (Some(j), None) = (&now.new_journal, &now.pre_save) {
        let _t = crate::trace::span("journal");
        store.catalog.set_journal(Some(&Journal {
            undo: now.undo,
            ..j.clone()
        }))?;
    }
    ckpt_fault::point("restore.after_journal");
    if req.state_only {
        scanner.keep_index(store, now.scan)?;
        let state = state::restore_state(&store.state, &req.target, false)?;
        return Ok(RestoreOutcome::files_untouched(
            req.target,
            now.undo,
            now.pre_save,
            state,
        ));
    }
    // 3. The agent state, then the differences.
    let state = match req.with_state {
        true => state::restore_state(&store.state, &req.target, false)?,
        false => None,
    };
    ckpt_fault::point("restore.after_state");
    let removed = apply_changes(ws, store, &req, &mut now)?;
    // 4. The workspace as restored recorded after a path restore, HEAD
    //    set, the journal cleared, the index kept.
    let post_save = match !req.filter.is_all() && !opts.no_save {
        true => {
            let _t = crate::trace::span("post-restore save");
            let (cp, rescan) =
                record_restored(ws, store, &req.target, &req.filter, now.scan, &now.changes)?;
            now.scan = rescan;
            cp
        }
        false => None,
    };
    ckpt_fault::point("restore.before_journal_end");
    // Nothing to record when nothing was applied, no journal is open and
    // HEAD is the target already (a fork's restore in its snapshot, most
    // often).
    let at_target =
        req.journal.is_none() && now.pre_save.is_none() && req.head == Some(req.target.seq);
    let t = crate::trace::span("journal end");
    if !now.changes.is_empty() || req.journal.is_some() || (req.filter.is_all() && !at_target) {
        store
            .catalog
            .finish_restore(req.filter.is_all().then_some(req.target.seq))?;
    }
    drop(t);
    ckpt_fault::point("restore.after_journal_end");
    // The pre-save scan's watch token is valid for this index too: every
    // directory marked up to it was listed by that scan, and restore's own
    // writes are marked after it (see `crate::watch`).
    scanner.keep_index(store, now.scan)?;
    let written = now
        .changes
        .iter()
        .filter(|c| {
            c.new
                .as_ref()
                .is_some_and(|e| !matches!(e.node, Node::Dir { .. }))
        })
        .count() as u64;
    Ok(RestoreOutcome {
        target: req.target,
        undo: now.undo,
        pre_save: now.pre_save,
        post_save,
        changes: now.changes,
        resumed: now.resumed,
        written,
        removed,
        state,
        unreadable: now.unreadable,
    })
}

/// Step 0: what a restore brings back, read from one catalog snapshot.
struct Request {
    target: Checkpoint,
    filter: PathFilter,
    /// The journal of an interrupted restore, if one is open.
    journal: Option<Journal>,
    /// HEAD before the restore.
    head: Option<u64>,
    ignore: Ignore,
    /// Only the agent state (`--state-only`).
    state_only: bool,
    /// The agent state too: not `--files-only`, and no paths.
    with_state: bool,
}

impl Request {
    fn new(ws: &Workspace, store: &Store, rev: &str, opts: &RestoreJob) -> Result<Request> {
        let filter = PathFilter::new(opts.paths.clone());
        let state_only = opts.scope == Scope::StateOnly;
        if state_only && !filter.is_all() {
            return Err(Error::Usage(
                "--state-only restores the agent state, not paths; drop the paths (nothing was changed)"
                    .into(),
            ));
        }
        let r = store.catalog.reader()?;
        let target = r.resolve(rev)?;
        // A path that names nothing on either side is a typo (or a flag
        // after `--`): refuse it before anything is saved or journaled.
        check_paths_exist(ws, &r, &target, filter.paths())?;
        Ok(Request {
            journal: r.journal()?,
            head: r.head()?,
            with_state: opts.scope != Scope::FilesOnly && filter.is_all(),
            ignore: ws.ignore()?,
            target,
            filter,
            state_only,
        })
    }

    /// Whether this finishes an interrupted restore of the same target and
    /// paths (its journal is open).
    fn resumes(&self) -> bool {
        !self.state_only
            && self
                .journal
                .as_ref()
                .is_some_and(|j| j.target == self.target.seq && j.paths == self.filter.paths())
    }
}

/// A dry run: what steps 1 and 3 would change, with nothing saved, journaled
/// or written.
fn dry_run(
    ws: &Workspace,
    store: &Store,
    req: &Request,
    scanner: &mut dyn Scanner,
) -> Result<RestoreOutcome> {
    let state = match req.with_state {
        true => state::restore_state(&store.state, &req.target, true)?,
        false => None,
    };
    if req.state_only {
        return Ok(RestoreOutcome::files_untouched(
            req.target.clone(),
            None,
            None,
            state,
        ));
    }
    let scan = scanner.scan(ws, store, ScanKind::HashOnly)?;
    let reader = store.catalog.reader()?;
    let changes = plan(
        &reader,
        &scan,
        req.target.root,
        &req.filter,
        &req.ignore,
        &ws.root,
    )?;
    Ok(RestoreOutcome::dry_run(
        req.target.clone(),
        changes,
        state,
        scan.unreadable,
    ))
}

/// The workspace as step 1 leaves it: scanned, planned, and saved.
struct Before {
    /// The differences to apply (none for a state-only restore).
    changes: Vec<Change>,
    /// The scan behind the pre-save, whose index the restore updates.
    scan: ScanResult,
    /// The pre-restore save's checkpoint, if one was recorded.
    pre_save: Option<Checkpoint>,
    /// The checkpoint that undoes the restore.
    undo: Option<u64>,
    /// The journal this restore opens (None when there is nothing to do, or
    /// when it finishes an interrupted restore whose journal is open).
    new_journal: Option<Journal>,
    /// This finishes an interrupted restore.
    resumed: bool,
    /// What the scan was not allowed to read.
    unreadable: Vec<Unreadable>,
}

/// Step 1: scans the workspace, plans the differences and checks every
/// object to write (a damaged store fails the restore with nothing
/// changed), then, unless `no_save` or an interrupted restore is being
/// finished, saves it: durable before any file changes, since it is the
/// restore's undo, with the journal in its own transaction. Otherwise the
/// scan only hashes and nothing is written to the store. A pre-save that
/// runs out of space committed nothing: [`Error::NoSpaceForUndo`].
fn pre_save(
    ws: &Workspace,
    store: &Store,
    req: &Request,
    no_save: bool,
    scanner: &mut dyn Scanner,
) -> Result<Before> {
    let resumed = req.resumes();
    let save_first = !no_save && !resumed;
    let kind = match save_first {
        true => ScanKind::Capture,
        false => ScanKind::HashKeep,
    };
    // The pre-save's index is not written here: the restore writes the index
    // once, updated with what it applied (the index is only a cache, so a
    // crash in between costs re-hashing, nothing else).
    let t0 = std::time::Instant::now();
    let no_room = |scanner: &mut dyn Scanner, e: Error| {
        no_space_for_undo(ws, store, scanner, &req.target, &req.filter, &req.ignore, e)
    };
    let scanned = match scanner.scan(ws, store, kind) {
        Err(e) if save_first && e.is_out_of_space() => return Err(no_room(scanner, e)),
        r => r?,
    };
    let changes = match req.state_only {
        true => Vec::new(),
        false => {
            let _t = crate::trace::span("restore plan");
            let reader = store.catalog.reader()?;
            plan(
                &reader,
                &scanned,
                req.target.root,
                &req.filter,
                &req.ignore,
                &ws.root,
            )?
        }
    };
    let new_journal = (!changes.is_empty() && !resumed).then(|| Journal {
        target: req.target.seq,
        paths: req.filter.paths().to_vec(),
        undo: None,
    });
    if !changes.is_empty() {
        let _t = crate::trace::span("check objects");
        check_objects(&store.objects, &changes)?;
    }
    let unreadable = scanned.unreadable.clone();
    if !save_first {
        save::remove_temp_files(ws, &scanned.temp_files)?;
        let undo = req
            .journal
            .as_ref()
            .filter(|_| resumed)
            .and_then(|j| j.undo);
        return Ok(Before {
            changes,
            scan: scanned,
            pre_save: None,
            undo,
            new_journal,
            resumed,
            unreadable,
        });
    }
    let save_opts = SaveJob {
        message: format!("before restore to {}", req.target.id()),
        tags: [(REASON_TAG.to_string(), "pre-restore".to_string())].into(),
        allow_empty: false,
        journal: new_journal.clone(),
    };
    let captured =
        match save::capture_scanned(ws, store, &save_opts, scanned, Durable::AtCommit, t0) {
            Err(e) if e.is_out_of_space() => return Err(no_room(scanner, e)),
            r => r?,
        };
    let (pre_save, undo) = match captured.outcome {
        SaveOutcome::Saved(cp) => (Some(cp.clone()), Some(cp.seq)),
        SaveOutcome::Unchanged(head) => (None, head.map(|h| h.seq)),
    };
    Ok(Before {
        changes,
        scan: captured.scan,
        pre_save,
        undo,
        new_journal,
        resumed,
        unreadable,
    })
}

/// Step 3's writes: applies `now.changes` (see the module doc for their
/// order) and updates the scan's index for exactly the paths written.
/// Returns the number of entries removed.
fn apply_changes(ws: &Workspace, store: &Store, req: &Request, now: &mut Before) -> Result<u64> {
    if now.changes.is_empty() {
        return Ok(0);
    }
    let root_fd = fs::open_dir_path(&ws.root).ctx("open", &ws.root)?;
    let applier = Applier {
        root: root_fd,
        root_path: &ws.root,
        objects: &store.objects,
        ignore: Some(&req.ignore),
        left_out: now
            .scan
            .unreadable
            .iter()
            .filter(|u| !u.kept)
            .map(|u| u.path.clone())
            .collect(),
        written: Mutex::new(HashMap::new()),
        removed: AtomicU64::new(0),
        counter: AtomicU64::new(0),
    };
    let reader = store.catalog.reader()?;
    let lookup = TargetLookup::new(&reader, req.target.root);
    let t = crate::trace::span("apply");
    applier.apply(&now.changes, &lookup)?;
    drop(t);
    store.room_for_commit();
    let _t = crate::trace::span("update index");
    now.scan.index = updated_index(
        std::mem::take(&mut now.scan.index),
        &now.changes,
        &applier.written.into_inner().unwrap(),
        &lookup,
    )?;
    now.scan.index_unchanged = false;
    Ok(applier.removed.into_inner())
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
    let opts = SaveJob {
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
