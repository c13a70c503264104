//! Agent state and checkpoints: where the state store lives, which state
//! version a checkpoint captures, and how restore, diff and gc treat it.
//!
//! The state itself is a [`ckpt_state::StateStore`] (a transactional,
//! versioned key-value store) in `<store>/state.redb`. This module owns the
//! glue; its invariants:
//!
//! - **Lazy and short-lived.** The state store is opened only when a command
//!   needs it ([`LazyState::get`]): a save in a workspace that has no
//!   `state.redb` never touches redb and records `state_version: None`. Once
//!   open it is held until the [`Store`](crate::store::Store) (or the [`LazyState`]) is dropped,
//!   i.e. for one command; `StateStore` holds an exclusive per-process lock
//!   (`state.redb.lock`) for that long. Lock order is always store lock, then
//!   state lock (`ckpt state …` takes only the state lock), so no deadlock.
//! - **A checkpoint pins one version.** `Checkpoint::state_version` is the
//!   latest state version when the checkpoint was saved. `None` (no state
//!   store existed) means the empty state, version 0: restoring such a
//!   checkpoint empties the state (as a new commit, so it is undoable).
//! - **One fact, one place.** The pins are the `state_version`s of the
//!   checkpoints in the catalog, plus version 0 (the empty state, which costs
//!   nothing to keep). They are derived when gc runs ([`pinned_versions`]),
//!   never stored a second time; deleting a checkpoint unpins its version.
//! - **Save sees state changes.** A save records a new checkpoint when the
//!   files *or* the state differ from the head's ([`changed_since`]): state
//!   compares by content, so a state restored to the head's version (a new
//!   commit with equal content) is not a change.
//! - **Restore writes a new commit** ([`restore_state`]): the state history
//!   is kept, and the pre-restore save (made before, by
//!   [`crate::engine::restore`]) pins the version the state had, so its id undoes
//!   the state too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use ckpt_state::{
    ChangeKind, Error as StateError, Options, ScanEntry, StateChange, StateStore,
    Versioned,
};
use serde::{Deserialize, Serialize};

use crate::store::catalog::Checkpoint;
use crate::{Error, Result};

/// File name of the state store inside the store directory.
pub const STATE_FILE: &str = "state.redb";

/// The state store of one store directory, opened on first use.
pub struct LazyState {
    path: PathBuf,
    lock_timeout: Duration,
    open: Mutex<Option<Arc<StateStore>>>,
}

impl std::fmt::Debug for LazyState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyState")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LazyState {
    /// The state store of the store directory `store_root` (nothing is
    /// opened yet). `lock_timeout` bounds the wait for another process.
    pub fn new(store_root: &Path, lock_timeout: Duration) -> LazyState {
        LazyState {
            path: store_root.join(STATE_FILE),
            lock_timeout,
            open: Mutex::new(None),
        }
    }

    /// Path of `state.redb`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open state store, or `None` when `state.redb` does not exist (no
    /// agent state was ever written). Opens it on the first call.
    pub fn get(&self) -> Result<Option<Arc<StateStore>>> {
        self.open_inner(false)
    }

    /// The open state store, creating `state.redb` if needed.
    pub fn get_or_create(&self) -> Result<Arc<StateStore>> {
        Ok(self
            .open_inner(true)?
            .expect("open_inner(create) returns a store"))
    }

    fn open_inner(&self, create: bool) -> Result<Option<Arc<StateStore>>> {
        let mut slot = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = &*slot {
            return Ok(Some(s.clone()));
        }
        if !create && !self.path.exists() {
            return Ok(None);
        }
        let _t = crate::trace::span("open state");
        let opts = Options {
            lock_timeout: self.lock_timeout,
            ..Options::default()
        };
        let s = Arc::new(StateStore::open(&self.path, opts)?);
        *slot = Some(s.clone());
        Ok(Some(s))
    }

    /// The latest state version, or `None` when there is no state store.
    pub fn current_version(&self) -> Result<Option<u64>> {
        Ok(self.get()?.map(|s| s.latest_version()))
    }
}

/// The state version a checkpoint stands for: its `state_version`, or 0 (the
/// empty state) when no state store existed at the time.
pub fn version_of(cp: &Checkpoint) -> u64 {
    cp.state_version.unwrap_or(0)
}

/// Does the state at `now` differ (by content) from the state at `pinned`
/// (`None` = empty)? `now == None` means there is no state store: it differs
/// only if the pinned state was a real version.
pub fn changed_since(state: &LazyState, pinned: Option<u64>, now: Option<u64>) -> Result<bool> {
    let Some(now) = now else {
        return Ok(pinned.unwrap_or(0) != 0);
    };
    let pinned = pinned.unwrap_or(0);
    if pinned == now {
        return Ok(false);
    }
    let Some(s) = state.get()? else {
        return Ok(true);
    };
    if !s.is_readable(pinned) {
        return Ok(true);
    }
    Ok(!s.diff(pinned, now)?.is_empty())
}

/// What a restore did (or would do) to the state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StateRestore {
    /// The version restored to (the checkpoint's, 0 when it had none).
    pub target: u64,
    /// Latest version before the restore.
    pub before: u64,
    /// Latest version after it: a new commit whose state equals `target`'s,
    /// or `before` when nothing differed (or on a dry run).
    pub after: u64,
    /// Keys changed, from `before` to `target`.
    pub changes: Vec<StateChange>,
}

/// Brings the state back to checkpoint `cp`'s version as a new commit (with
/// `dry_run`, only computes the changes). `None` when there is no state store
/// and the checkpoint has no state either: nothing to do.
pub fn restore_state(
    state: &LazyState,
    cp: &Checkpoint,
    dry_run: bool,
) -> Result<Option<StateRestore>> {
    let target = version_of(cp);
    let Some(s) = state.get()? else {
        if target == 0 {
            return Ok(None);
        }
        return Err(Error::Corrupt(format!(
            "{} recorded agent state version {target} but {} is missing; \
             restore with --files-only to leave the state alone",
            cp.id(),
            state.path().display()
        )));
    };
    if !s.is_readable(target) {
        return Err(Error::Corrupt(format!(
            "agent state version {target} of {} is not available in {} (latest is {}); \
             restore with --files-only to leave the state alone",
            cp.id(),
            state.path().display(),
            s.latest_version()
        )));
    }
    let before = s.latest_version();
    let changes = s.diff(before, target)?;
    let after = if dry_run || changes.is_empty() {
        before
    } else {
        let _t = crate::trace::span("state restore");
        s.restore_to(target)?
    };
    Ok(Some(StateRestore {
        target,
        before,
        after,
        changes,
    }))
}

/// The state versions the catalog pins: every checkpoint's `state_version`,
/// plus 0 (the empty state that checkpoints without one stand for).
pub fn pinned_versions(checkpoints: &[Checkpoint]) -> BTreeSet<u64> {
    let mut keep: BTreeSet<u64> = checkpoints.iter().filter_map(|c| c.state_version).collect();
    keep.insert(0);
    keep
}

/// What gc did to the state store.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct StateGcReport {
    /// Distinct state versions pinned by checkpoints (including 0).
    pub pinned: u64,
    /// Latest state version (always kept).
    pub latest: u64,
    /// Versions made unreadable (0 on a dry run: not computed).
    pub versions_collected: u64,
    /// Stored entries deleted.
    pub entries_removed: u64,
    /// Keys left without any entry.
    pub keys_removed: u64,
}

/// Collects every state version that no checkpoint pins and that is not the
/// latest. `None` when there is no state store. The caller holds the store
/// lock, so no checkpoint can be added meanwhile.
pub fn gc(
    state: &LazyState,
    checkpoints: &[Checkpoint],
    dry_run: bool,
) -> Result<Option<StateGcReport>> {
    let Some(s) = state.get()? else {
        return Ok(None);
    };
    let keep = pinned_versions(checkpoints);
    let mut report = StateGcReport {
        pinned: keep.len() as u64,
        latest: s.latest_version(),
        ..Default::default()
    };
    if !dry_run {
        let _t = crate::trace::span("state gc");
        let st = s.gc(&keep)?;
        report.versions_collected = st.versions_collected;
        report.entries_removed = st.entries_removed;
        report.keys_removed = st.keys_removed;
    }
    Ok(Some(report))
}

/// The state side of a diff.
#[derive(Clone, Debug)]
pub struct StateDiff {
    /// Version of the `from` side.
    pub from: u64,
    /// Version of the `to` side.
    pub to: u64,
    /// Keys added, changed and removed, in key order.
    pub changes: Vec<StateChange>,
}

/// Keys added, changed and removed between `from`'s state and `to`'s (`to ==
/// None`, the working directory side: the latest state). `None` when there
/// is no state store (both sides are empty).
pub fn diff(
    state: &LazyState,
    from: &Checkpoint,
    to: Option<&Checkpoint>,
) -> Result<Option<StateDiff>> {
    let Some(s) = state.get()? else {
        return Ok(None);
    };
    let a = version_of(from);
    let b = to.map_or_else(|| s.latest_version(), version_of);
    Ok(Some(StateDiff {
        from: a,
        to: b,
        changes: s.diff(a, b)?,
    }))
}
