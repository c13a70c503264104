//! `ckpt fork ID DIR`: a checkpoint materialised as a new, independent
//! workspace with its own store ([`crate::engine::fork`] has the store
//! decision and the `link` caveat).
//!
//! Invariant: the fork is never inside the source workspace (refused before
//! anything is written). Its store goes where `store` says, else by the
//! usual rule under the configured data home.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ckpt_copy::copytree::Progress;
use serde_json::{json, Value};

use super::json::{self, serialize_via_to_json, SCHEMA};
use super::{normalize, Context};
use crate::engine::fork;
use crate::engine::materialize::{MaterializeOptions, MaterializeReport};
use crate::{Error, Result};

/// What [`fork()`] makes.
#[derive(Clone, Copy, Debug)]
pub struct ForkOptions<'a> {
    /// The checkpoint (`v12`, `HEAD~1`, a hash prefix, …).
    pub rev: &'a str,
    /// The new workspace (relative to the context's directory): a new or
    /// empty directory outside this workspace.
    pub dir: &'a std::path::Path,
    /// Where to keep the fork's store (relative to the context's
    /// directory); None: the usual rule.
    pub store: Option<&'a std::path::Path>,
    /// Hard-link files to the store's objects instead of copying them.
    pub link: bool,
    /// Counters advanced as files are written (for a progress bar).
    pub progress: Option<&'a Progress>,
}

/// What [`fork()`] did.
#[derive(Debug)]
pub struct ForkReport {
    /// What was written.
    pub report: MaterializeReport,
    /// The new workspace's root.
    pub to: PathBuf,
    /// The new workspace's store.
    pub store: PathBuf,
    /// Files were hard-linked to the source store's objects.
    pub link: bool,
    /// How long it took.
    pub elapsed: Duration,
}

impl ForkReport {
    /// The JSON form: `forked`, `to`, `store`, `files`, `dirs`, `bytes`,
    /// `link`, `elapsed_ms`.
    pub fn to_json(&self) -> Value {
        let rep = &self.report;
        json!({
            "schema": SCHEMA,
            "forked": rep.target.id(),
            "to": self.to.display().to_string(),
            "store": self.store.display().to_string(),
            "files": rep.files,
            "dirs": rep.dirs,
            "bytes": rep.bytes,
            "link": self.link,
            "elapsed_ms": json::ms(self.elapsed),
        })
    }
}

serialize_via_to_json!(ForkReport);

/// Forks checkpoint `opts.rev` of the workspace into `opts.dir`.
pub fn fork(ctx: &Context, opts: &ForkOptions<'_>) -> Result<ForkReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let store = ws.open_store(&ctx.config)?;
    let dest = normalize(&ctx.abs(opts.dir));
    if dest.starts_with(&ws.root) {
        return Err(Error::Usage(format!(
            "{} is inside the workspace {}; fork into a directory outside it (nothing was changed)",
            dest.display(),
            ws.root.display()
        )));
    }
    let new_store = opts.store.map(|s| ctx.abs(s));
    let (report, forked) = fork::fork(
        &store,
        opts.rev,
        &dest,
        new_store.as_deref(),
        ctx.config.data_home.as_deref(),
        MaterializeOptions {
            link: opts.link,
            progress: opts.progress,
        },
    )?;
    crate::workspace::known::record(ctx.config.data_home.as_deref(), &forked.store_path);
    Ok(ForkReport {
        report,
        to: forked.root,
        store: forked.store_path,
        link: opts.link,
        elapsed: t0.elapsed(),
    })
}
