//! `ckpt restore`: in place (whole workspace or some paths), through the
//! live watcher when it takes the job, else here; or `--to DIR`, a
//! checkpoint materialised into a new directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{normalize, Context};
use crate::engine::materialize::{self, MaterializeReport};
use crate::engine::restore::{self as engine, RestoreOptions, RestoreReport, Scope};
use crate::{Error, Result};

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

/// Restores the workspace in place (or, with `dry_run`, reports what that
/// would change).
pub fn restore(ctx: &Context, req: &RestoreRequest) -> Result<(RestoreReport, Duration)> {
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
        return Ok((rep, t0.elapsed()));
    }
    let store = ws.open_store(&ctx.config)?;
    let mut here = ctx.here(&ws, &store);
    let rep = engine::restore(&ws, &store, &req.rev, &opts, &mut here.scanner);
    // A dry run and a state-only restore keep no index: their scan's token
    // is not recorded.
    let kept = !req.dry_run && req.scope != Scope::StateOnly;
    here.finish(&store, rep.is_ok() && kept);
    Ok((rep?, t0.elapsed()))
}

/// Materialises checkpoint `rev` (optionally only `paths`) into `dest`, a
/// new or empty directory outside the workspace.
pub fn restore_to(
    ctx: &Context,
    rev: &str,
    dest: &Path,
    paths: &[PathBuf],
) -> Result<(MaterializeReport, PathBuf, Duration)> {
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
    Ok((rep, dest, t0.elapsed()))
}
