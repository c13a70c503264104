//! The scan interface of the engines: how a save, a restore, a status, a
//! fork and the watcher get the current state of a workspace, and where the
//! stat index a scan leaves behind goes.
//!
//! - [`Scanner`]: a command scans in this process against the index file
//!   and writes the index file ([`OnDisk`]); the watcher scans from its
//!   in-memory index and keeps the result in memory (`crate::daemon`).
//! - [`ScanKind`]: what a scan does with the files whose stat changed
//!   (store them, or only hash them); [`ScanPlan`]: which directories it
//!   lists.
//! - [`scan_against`] runs the scan itself ([`crate::workspace::scan`]);
//!   [`save_index`] writes its index, or removes the index when there is no
//!   room for it (the index is a cache, [`crate::store::index`]).

use std::collections::HashSet;

use crate::store::index::Index;
use crate::store::Store;
use crate::workspace::scan::{self, Mode, OnUnreadable, ScanInput, ScanResult};
use crate::workspace::Workspace;
use crate::{trace, Result};

/// What a scan does with the files whose stat changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanKind {
    /// Store their content as pending objects (save, a restore's pre-save).
    Capture,
    /// Only hash them (status, diff, a dry run); the index is not kept.
    HashOnly,
    /// Only hash them, for an index that is kept though nothing was stored
    /// (`restore --no-save`, and re-running an interrupted restore: neither
    /// writes to the store; see [`crate::workspace::scan`], "Scans that
    /// store nothing").
    HashKeep,
}

/// Which directories a scan lists.
#[derive(Clone, Debug, Default)]
pub enum ScanPlan {
    /// Every directory.
    #[default]
    Full,
    /// Only these (and the path from the root to each): a live watcher
    /// vouched that nothing else changed since the index was saved (see
    /// [`crate::watch`]). Falls back to a full scan when the index has no
    /// root record.
    Partial(HashSet<Vec<u8>>),
}

/// Where the engines get the current state of a workspace, and where the
/// stat index they leave behind goes. A command scans in this process and
/// writes the index file ([`OnDisk`]); the watcher scans from its in-memory
/// index and keeps the result in memory (`crate::daemon`).
pub trait Scanner {
    /// Scans the workspace.
    fn scan(&mut self, ws: &Workspace, store: &Store, kind: ScanKind) -> Result<ScanResult>;
    /// Keeps `scan.index` (unless `scan.index_unchanged`) as the index of
    /// the workspace as it now is.
    fn keep_index(&mut self, store: &Store, scan: ScanResult) -> Result<()>;
}

/// The [`Scanner`] of a command: scan in this process, as its
/// [`ScanPlan`] says, against the index file, and write the index file.
#[derive(Debug, Default)]
pub struct OnDisk {
    /// Which directories to list.
    pub plan: ScanPlan,
    /// Why a planned partial scan became a full one (for `--verbose`).
    pub notes: Vec<String>,
    /// The index files as the caller just loaded (or wrote) them: the next
    /// scan uses it instead of reading them again.
    pub loaded: Option<Index>,
}

impl OnDisk {
    /// A scanner that lists what `plan` says.
    pub fn new(plan: ScanPlan) -> OnDisk {
        OnDisk {
            plan,
            notes: Vec::new(),
            loaded: None,
        }
    }
}

impl Scanner for OnDisk {
    fn scan(&mut self, ws: &Workspace, store: &Store, kind: ScanKind) -> Result<ScanResult> {
        let t = trace::span("load index");
        let index = match self.loaded.take() {
            Some(ix) => ix,
            None => store.load_index()?,
        };
        drop(t);
        let dirty = match &self.plan {
            ScanPlan::Partial(dirs) if index.dirs.contains_key(&Vec::new()) => Some(dirs),
            ScanPlan::Partial(_) => {
                self.notes
                    .push("full scan instead: the index is missing or stale".into());
                None
            }
            ScanPlan::Full => None,
        };
        let _t = trace::span("scan");
        scan_against(ws, store, index, kind, dirty)
    }

    fn keep_index(&mut self, store: &Store, mut scan: ScanResult) -> Result<()> {
        let saved = save_index(store, &mut scan);
        free(scan);
        saved
    }
}

/// Scans the workspace against `index`: only the `dirty` directories (and
/// the path from the root to each) when given, else every directory. The
/// result's index is `index` updated in place (see
/// [`scan::Scanned::apply`]). A failed capture scan drops the pending
/// objects it stored.
pub fn scan_against(
    ws: &Workspace,
    store: &Store,
    index: Index,
    kind: ScanKind,
    dirty: Option<&HashSet<Vec<u8>>>,
) -> Result<ScanResult> {
    let ignore = ws.ignore()?;
    let exclude = ws.excluded();
    // New content means a new checkpoint: its commit opens the catalog
    // writable, so start that now, beside the rest of the scan.
    let open_catalog = || store.catalog.open_writable_in_background();
    let input = ScanInput {
        root: &ws.root,
        index: &index,
        ignore: &ignore,
        exclude: &exclude,
        mode: match kind {
            ScanKind::Capture => Mode::Capture(&store.objects),
            ScanKind::HashOnly => Mode::HashOnly,
            ScanKind::HashKeep => Mode::HashKeep(&store.objects),
        },
        on_unreadable: OnUnreadable::Record,
        on_first_new_object: match kind {
            ScanKind::Capture => Some(&open_catalog),
            ScanKind::HashOnly | ScanKind::HashKeep => None,
        },
    };
    let result = match dirty {
        Some(dirs) => scan::scan_partial(&input, dirs),
        None => scan::scan(&input),
    }
    .map(|s| s.apply(index));
    if result.is_err() {
        store.objects.abort();
    }
    result
}

/// Writes the index file of a scan, unless the scan left it unchanged.
/// The index is a cache: when there is no space for it, the index files
/// are removed instead (the next scan reads everything; an old index left
/// behind would not match the watch token recorded next, see
/// [`crate::watch`]), and what was saved or restored stands.
pub fn save_index(store: &Store, scan: &mut ScanResult) -> Result<()> {
    if scan.index_unchanged {
        return Ok(());
    }
    // Renamed into place once every checkpoint the index may name is
    // durable (`Durable::AtClose`: once the catalog's close has ended).
    match scan
        .index
        .save_when(&store.index_path(), &|| store.catalog.wait_durable())
    {
        Err(e) if e.is_out_of_space() => crate::store::index::remove(&store.index_path()),
        r => r,
    }
}

/// Frees a scan's result. A large one on a thread of its own
/// ([`crate::platform::drop_later`]: a scan-mode command about to exit
/// need not wait for its index to be freed); a small one here, where
/// starting a thread costs more than the free (a status through the
/// watcher, whose hash-only scan keeps no index, started one on every call).
pub(super) fn free(scan: ScanResult) {
    const SMALL_DIRS: usize = 1024;
    if scan.index.dirs.len() > SMALL_DIRS {
        crate::platform::drop_later(scan);
    }
}
