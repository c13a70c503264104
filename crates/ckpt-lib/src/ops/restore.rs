//! `ckpt restore`: in place (whole workspace or some paths), through the
//! live watcher when it takes the job, else here; or `--to DIR`, a
//! checkpoint materialised into a new directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::json::{self, serialize_via_to_json, SCHEMA};
use super::{normalize, Context};
use crate::engine::materialize::{self, MaterializeReport};
use crate::engine::restore::{RestoreOptions, RestoreReport, Scope};
use crate::{Error, Result};

/// The in-place restore once the store is open and the scanner chosen:
/// [`restore`]'s "here" path, and the watcher's request handler (its
/// in-memory index). See [`crate::engine::restore`] for the steps and why
/// an interruption is safe.
pub use crate::engine::restore::restore as restore_with;

/// What [`restore`] brings back.
#[derive(Clone, Debug, Default)]
pub struct RestoreRequest {
    /// The checkpoint (`v12`, `HEAD~1`, a hash prefix, …).
    pub rev: String,
    /// Only these paths (relative to the context's directory); all when
    /// empty.
    pub paths: Vec<PathBuf>,
    /// Only report what would change.
    pub dry_run: bool,
    /// Do not save the current state first.
    pub no_save: bool,
    /// Files, agent state, or both.
    pub scope: Scope,
}

/// What an in-place restore did (or, dry, would do).
#[derive(Debug)]
pub struct Restored {
    /// The engine's report.
    pub report: RestoreReport,
    /// It was a dry run.
    pub dry_run: bool,
    /// How long it took.
    pub elapsed: Duration,
}

impl Restored {
    /// The JSON form: `restored`, `dry_run`, `resumed`, `undo`, `pre_save`,
    /// `changes`, `state` (`target`, `before`, `after`, `changes`),
    /// `elapsed_ms`.
    pub fn to_json(&self) -> Value {
        let rep = &self.report;
        json!({
            "schema": SCHEMA,
            "restored": rep.target.id(),
            "dry_run": self.dry_run,
            "resumed": rep.resumed,
            "undo": rep.undo.map(|u| format!("v{u}")),
            "pre_save": rep.pre_save.as_ref().map(|c| c.id()),
            "changes": json::changes(&rep.changes),
            "state": rep.state.as_ref().map(|s| json!({
                "target": s.target,
                "before": s.before,
                "after": s.after,
                "changes": json::state_changes(&s.changes),
            })),
            "elapsed_ms": json::ms(self.elapsed),
        })
    }
}

/// What `restore --to` did.
#[derive(Debug)]
pub struct Materialized {
    /// The engine's report.
    pub report: MaterializeReport,
    /// The directory written.
    pub to: PathBuf,
    /// How long it took.
    pub elapsed: Duration,
}

impl Materialized {
    /// The JSON form: `restored`, `to`, `files`, `dirs`, `bytes`,
    /// `elapsed_ms`.
    pub fn to_json(&self) -> Value {
        let rep = &self.report;
        json!({
            "schema": SCHEMA,
            "restored": rep.target.id(),
            "to": self.to.display().to_string(),
            "files": rep.files,
            "dirs": rep.dirs,
            "bytes": rep.bytes,
            "elapsed_ms": json::ms(self.elapsed),
        })
    }
}

serialize_via_to_json!(Restored, Materialized);

/// Restores the workspace in place (or, with `dry_run`, reports what that
/// would change).
pub fn restore(ctx: &Context, req: &RestoreRequest) -> Result<Restored> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let opts = RestoreOptions {
        paths: ctx.rel_paths(&ws, &req.paths)?,
        dry_run: req.dry_run,
        no_save: req.no_save,
        scope: req.scope,
    };
    // Through a live watcher when it vouches for the workspace (it keeps
    // the index in memory); otherwise here.
    if let Some(rep) = ctx
        .client()
        .restore(&ws, &req.rev, &opts, ctx.config.lock_timeout)
    {
        return Ok(Restored {
            report: rep,
            dry_run: req.dry_run,
            elapsed: t0.elapsed(),
        });
    }
    let store = ws.open_store(&ctx.config)?;
    let mut here = ctx.here(&ws, &store);
    let rep = restore_with(&ws, &store, &req.rev, &opts, &mut here.scanner);
    // A dry run and a state-only restore keep no index: their scan's token
    // is not recorded.
    let kept = !req.dry_run && req.scope != Scope::StateOnly;
    here.finish(&store, rep.is_ok() && kept);
    Ok(Restored {
        report: rep?,
        dry_run: req.dry_run,
        elapsed: t0.elapsed(),
    })
}

/// Materialises checkpoint `rev` (optionally only `paths`) into `dest`, a
/// new or empty directory outside the workspace.
pub fn restore_to(
    ctx: &Context,
    rev: &str,
    dest: &Path,
    paths: &[PathBuf],
) -> Result<Materialized> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let rel = ctx.rel_paths(&ws, paths)?;
    let store = ws.open_store(&ctx.config)?;
    let dest = ctx.abs(dest);
    if normalize(&dest).starts_with(&ws.root) {
        return Err(Error::Usage(format!(
            "--to {} is inside the workspace; choose a directory outside it (nothing was changed)",
            dest.display()
        )));
    }
    let rep = materialize::restore_to(&store, rev, &dest, &rel)?;
    Ok(Materialized {
        report: rep,
        to: dest,
        elapsed: t0.elapsed(),
    })
}
