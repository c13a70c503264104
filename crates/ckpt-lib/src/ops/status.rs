//! `ckpt status`: what changed since the head, files and agent state.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::json::{with, Schema};
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

/// What changed since the head. JSON: `head`, `clean`, `changes`,
/// `state_changes`, `interrupted_restore`, `unreadable`, `warnings`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct StatusReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The head (None before the first save).
    #[serde(serialize_with = "with::opt_id")]
    #[schemars(with = "Option<String>")]
    pub head: Option<Checkpoint>,
    /// Nothing changed, files or state (see [`StatusReport::clean`]).
    #[serde(rename = "clean")]
    pub is_clean: bool,
    /// Every difference from the head to the working directory.
    #[serde(serialize_with = "with::changes")]
    #[schemars(with = "Vec<super::json::ChangeForm<'static>>")]
    pub changes: Vec<Change>,
    /// Agent-state keys changed since the head.
    #[serde(serialize_with = "with::state_changes")]
    #[schemars(with = "Vec<super::json::StateChangeForm<'static>>")]
    pub state_changes: Vec<StateChange>,
    /// Entries that would be skipped.
    #[serde(skip)]
    pub skipped: Vec<Skipped>,
    /// Entries the scan was not allowed to read.
    #[serde(serialize_with = "with::unreadable")]
    #[schemars(with = "Vec<super::json::UnreadableForm<'static>>")]
    pub unreadable: Vec<Unreadable>,
    /// An interrupted restore, if any (JSON: its target's id).
    #[serde(rename = "interrupted_restore", serialize_with = "journal_target")]
    #[schemars(with = "Option<String>")]
    pub journal: Option<Journal>,
    /// How long it took.
    #[serde(skip)]
    pub elapsed: Duration,
    /// Why an agent harness configured here will not run ckpt's hooks, or
    /// records nothing ([`super::harness_health`]).
    pub warnings: Vec<String>,
}

impl StatusReport {
    /// Nothing changed, files or state.
    pub fn clean(&self) -> bool {
        self.is_clean
    }
}

/// An interrupted restore as its target's id, or null.
fn journal_target<S: serde::Serializer>(
    j: &Option<Journal>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    with::opt_seq(&j.as_ref().map(|j| j.target), s)
}

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
    let is_clean = st.changes.is_empty() && state_changes.is_empty();
    Ok(StatusReport {
        schema: Schema,
        head: st.head,
        is_clean,
        changes: st.changes,
        state_changes,
        skipped: st.skipped,
        journal: st.journal,
        elapsed: t0.elapsed(),
        unreadable,
        warnings,
    })
}
