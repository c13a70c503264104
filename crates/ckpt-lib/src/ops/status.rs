//! `ckpt status`: what changed since the head, files and agent state.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::json::{self, serialize_via_to_json, SCHEMA};
use super::Context;
use crate::engine::diff::{Change, PathFilter};
use crate::store::catalog::{Checkpoint, Journal, Skipped};
use crate::store::state::{self, StateChange};
use crate::workspace::scan::Unreadable;
use crate::Result;

/// What [`status`] looks at.
#[derive(Clone, Debug, Default)]
pub struct StatusOptions {
    /// Only these paths (relative to the context's directory); all when
    /// empty. The agent state is reported only for the whole workspace.
    pub paths: Vec<PathBuf>,
}

/// What changed since the head.
#[derive(Debug)]
pub struct StatusReport {
    /// The head (None before the first save).
    pub head: Option<Checkpoint>,
    /// Every difference from the head to the working directory.
    pub changes: Vec<Change>,
    /// Agent-state keys changed since the head.
    pub state_changes: Vec<StateChange>,
    /// Entries that would be skipped.
    pub skipped: Vec<Skipped>,
    /// Entries the scan was not allowed to read.
    pub unreadable: Vec<Unreadable>,
    /// An interrupted restore, if any.
    pub journal: Option<Journal>,
    /// How long it took.
    pub elapsed: Duration,
    /// Why an agent harness configured here will not run ckpt's hooks, or
    /// records nothing ([`super::harness_health`]).
    pub warnings: Vec<String>,
}

impl StatusReport {
    /// Nothing changed, files or state.
    pub fn clean(&self) -> bool {
        self.changes.is_empty() && self.state_changes.is_empty()
    }
}

impl StatusReport {
    /// The JSON form: `head`, `clean`, `changes`, `state_changes`,
    /// `interrupted_restore`, `unreadable`, `warnings`.
    pub fn to_json(&self) -> Value {
        json!({
            "schema": SCHEMA,
            "head": self.head.as_ref().map(|h| h.id()),
            "clean": self.clean(),
            "changes": json::changes(&self.changes),
            "state_changes": json::state_changes(&self.state_changes),
            "interrupted_restore": self.journal.as_ref().map(|j| format!("v{}", j.target)),
            "unreadable": json::unreadable(&self.unreadable),
            "warnings": self.warnings,
        })
    }
}

serialize_via_to_json!(StatusReport);

/// Compares the workspace with its head, writing nothing.
pub fn status(ctx: &Context, opts: &StatusOptions) -> Result<StatusReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let filter = PathFilter::new(ctx.rel_paths(&ws, &opts.paths)?);
    let scan = ctx.scan_hash_only(&ws, &store)?;
    let unreadable = scan.unreadable.clone();
    let st = crate::engine::status::status(&store, &filter, scan)?;
    let state_changes = match (&st.head, filter.is_all()) {
        (Some(h), true) => state::diff(&store.state, h, None)?.map_or_else(Vec::new, |d| d.changes),
        _ => Vec::new(),
    };
    let warnings = {
        let r = store.catalog.reader()?;
        super::harness_health::warnings(&ws.root, &ctx.config.harness_homes, &r)?
            .into_iter()
            .map(|w| w.problem)
            .collect()
    };
    Ok(StatusReport {
        head: st.head,
        changes: st.changes,
        state_changes,
        skipped: st.skipped,
        journal: st.journal,
        elapsed: t0.elapsed(),
        unreadable,
        warnings,
    })
}
