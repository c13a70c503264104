//! `ckpt save` and `ckpt hook`'s save: through a live watcher when it
//! vouches for the workspace (it keeps the index in memory, takes the store
//! lock and applies the retention policy itself, see [`crate::watch`]);
//! otherwise a scan in this process under the store lock, then the saved
//! retention policy ([`crate::store::retention::apply_due`]).
//!
//! A save in this process that has nothing left to commit (no retention
//! policy is set) commits its checkpoint without an `fdatasync` and closes
//! the catalog on a thread of its own, which makes it durable
//! ([`Durable::AtClose`]), while it writes the index; the index is renamed
//! into place, and the save reported, only once that close has ended. The
//! watcher's saves commit durably ([`Durable::AtCommit`]): it answers
//! before its catalog closes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ckpt_fs::fs;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{schema_via, with, CheckpointForm, Schema, UnreadableForm};
use super::Context;
use crate::engine::save::{self, SaveJob, SaveOutcome, ScanCounts};
use crate::engine::scanner::{ScanKind, Scanner};
use crate::store::catalog::Durable;
use crate::store::retention::{self, Policy, RetentionReport};
use crate::store::Store;
use crate::workspace::scan::Unreadable;
use crate::workspace::Workspace;
use crate::Result;

/// What [`save()`] records.
#[derive(Clone, Debug, Default)]
pub struct SaveOptions {
    /// Message.
    pub message: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Record a checkpoint even if nothing changed.
    pub allow_empty: bool,
}

/// What [`save()`] did.
#[derive(Debug)]
pub struct SaveReport {
    /// The outcome.
    pub outcome: SaveOutcome,
    /// What the scan cost (for `--verbose`).
    pub counts: ScanCounts,
    /// What the saved retention policy dropped after this save, when it
    /// dropped anything (only reported for saves made in this process).
    pub retention: Option<RetentionReport>,
    /// How long the save took, as the caller saw it.
    pub elapsed: Duration,
    /// Entries the scan was not allowed to read (see
    /// [`crate::workspace::scan`]): recorded unchanged, or left out.
    pub unreadable: Vec<Unreadable>,
    /// The live watcher did the save.
    pub through_watcher: bool,
}

/// The JSON form of a [`SaveReport`]: the new checkpoint's record with
/// `saved: true`, or `saved: false` and the head's `id`; `elapsed_ms`,
/// `unreadable`.
#[derive(Serialize, JsonSchema)]
struct SaveForm<'a> {
    schema: Schema,
    saved: bool,
    #[serde(flatten)]
    record: Record<'a>,
    #[serde(serialize_with = "with::ms")]
    #[schemars(with = "f64")]
    elapsed_ms: Duration,
    unreadable: Vec<UnreadableForm<'a>>,
}

/// The new checkpoint's record, or the unchanged head's id.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum Record<'a> {
    Saved(CheckpointForm<'a>),
    Unchanged { id: Option<String> },
}

schema_via!(SaveReport => SaveForm<'static>);

impl Serialize for SaveReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let (saved, record) = match &self.outcome {
            SaveOutcome::Saved(cp) => (true, Record::Saved(CheckpointForm::new(cp, Some(cp.seq)))),
            SaveOutcome::Unchanged(head) => (
                false,
                Record::Unchanged {
                    id: head.as_ref().map(|h| h.id()),
                },
            ),
        };
        SaveForm {
            schema: Schema,
            saved,
            record,
            elapsed_ms: self.elapsed,
            unreadable: self.unreadable.iter().map(UnreadableForm::from).collect(),
        }
        .serialize(s)
    }
}

/// Records a checkpoint of the workspace.
pub fn save(ctx: &Context, opts: &SaveOptions) -> Result<SaveReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let params = crate::watch::SaveParams {
        message: opts.message.clone(),
        tags: opts.tags.clone(),
        allow_empty: opts.allow_empty,
        lock_timeout_ms: ctx.config.lock_timeout.as_millis() as u64,
    };
    if let Some(r) = ctx.client().save(&ws, params) {
        let unreadable = r.unreadable;
        let outcome = match (r.saved, r.checkpoint) {
            (true, Some(cp)) => Some(SaveOutcome::Saved(cp)),
            (false, head) => Some(SaveOutcome::Unchanged(head)),
            (true, None) => None,
        };
        if let Some(outcome) = outcome {
            return Ok(SaveReport {
                outcome,
                counts: ScanCounts {
                    entries: r.entries,
                    files_read: r.files_read,
                    new_objects: r.new_objects,
                    new_bytes: r.new_bytes,
                },
                retention: None,
                elapsed: t0.elapsed(),
                unreadable,
                through_watcher: true,
            });
        }
    }
    let store = ws.open_store_for_save(&ctx.config)?;
    let mut here = ctx.here(&ws, &store);
    let report = save_with(&ws, &store, opts, &mut here.scanner, Durable::AtClose, t0);
    here.finish(&store, report.is_ok());
    let durable = store.catalog.wait_durable();
    report.and_then(|r| durable.map(|()| r))
}

/// The save once the store is open and the scanner chosen: [`save()`]'s
/// "here" path ([`crate::engine::scanner::OnDisk`]), and the watcher's request
/// handler (its in-memory index). Scans, commits, keeps the index, then
/// applies the saved retention policy if a checkpoint was recorded.
///
/// With [`Durable::AtClose`] (and no retention policy, which would commit
/// again), the checkpoint is durable only once the catalog's close ends:
/// the caller must [`wait_durable`] before it reports it (the index is
/// renamed into place after that wait, see [`crate::engine::scanner::save_index`]).
///
/// [`wait_durable`]: crate::store::catalog::Catalog::wait_durable
pub fn save_with(
    ws: &Workspace,
    store: &Store,
    opts: &SaveOptions,
    scanner: &mut dyn Scanner,
    durable: Durable,
    t0: Instant,
) -> Result<SaveReport> {
    // Read before the scan only when it decides how to commit.
    let early = match durable {
        Durable::AtClose => Some(retention::configured(store)?),
        Durable::AtCommit => None,
    };
    let durable = match &early {
        Some(p) if p.is_empty() => Durable::AtClose,
        _ => Durable::AtCommit,
    };
    let job = SaveJob {
        message: opts.message.clone(),
        tags: opts.tags.clone(),
        allow_empty: opts.allow_empty,
        journal: None,
    };
    let scan = scanner.scan(ws, store, ScanKind::Capture)?;
    let captured = save::capture_scanned(ws, store, &job, scan, durable, t0)?;
    let counts = captured.counts();
    let unreadable = captured.scan.unreadable.clone();
    let policy = match (&captured.outcome, early) {
        (SaveOutcome::Saved(_), Some(p)) => p,
        (SaveOutcome::Saved(_), None) => retention::configured(store)?,
        (SaveOutcome::Unchanged(_), _) => Policy::default(),
    };
    if policy.is_empty() {
        // Nothing more to commit: the catalog's writable handle (if this
        // save opened one) closes while the index is written.
        store.catalog.close_in_background();
    }
    {
        let _t = crate::trace::span("index save");
        scanner.keep_index(store, captured.scan)?;
    }
    // If retention runs gc, the generation changes: the next scan is full.
    let retention = retention::apply_due(store, &policy, fs::now_ns())?;
    Ok(SaveReport {
        counts,
        outcome: captured.outcome,
        retention,
        elapsed: t0.elapsed(),
        unreadable,
        through_watcher: false,
    })
}
