//! `ckpt gc`: the plain sweep of data no checkpoint references
//! ([`crate::store::gc`]), or retention ([`crate::store::retention`]): keep
//! rules given now, else the workspace's saved policy; with neither, the
//! plain sweep. Optionally saves the given rules as the workspace's policy
//! first (no rules: removes it).
//!
//! Invariants: a policy is validated before anything is opened or changed
//! (`keep_last: 0` is refused, since it would keep nothing but the head);
//! with `dry_run` nothing changes and the figures are exactly what the real
//! run would remove. The head (and an interrupted restore's checkpoints)
//! always survive any policy.

use serde::Serialize;

use super::json::Schema;
use super::Context;
use crate::store::gc::{self, SweepReport};
use crate::store::retention::{self, Policy, RetentionReport};
use crate::{Error, Result};

/// What [`gc()`] does.
#[derive(Clone, Debug, Default)]
pub struct GcOptions {
    /// Only report what would be removed.
    pub dry_run: bool,
    /// Keep rules given for this run; empty: the saved policy, if any.
    pub keep: Policy,
    /// Save [`GcOptions::keep`] as the workspace's policy, applied after
    /// every save (an empty policy removes the saved one).
    pub save_policy: bool,
}

/// Which kind of collection [`gc()`] ran.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum GcRun {
    /// No policy: removed the data no checkpoint references.
    Sweep(SweepReport),
    /// A policy: dropped the checkpoints it does not keep, then swept.
    Retention(RetentionReport),
}

/// What [`gc()`] did (or, with `dry_run`, would do). JSON: the sweep's or
/// the retention run's report (see [`SweepReport`], [`RetentionReport`])
/// with `dry_run`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct GcReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The policy saved as the workspace's (with `save_policy`; empty when
    /// the saved policy was removed).
    #[serde(skip)]
    pub saved_policy: Option<Policy>,
    /// The sweep or the retention run.
    #[serde(flatten)]
    pub run: GcRun,
    /// It was a dry run.
    pub dry_run: bool,
}

/// Checks a policy given by the user, before anything is changed.
pub fn validate(policy: &Policy) -> Result<()> {
    if policy.keep_last == Some(0) {
        return Err(Error::Usage(
            "--keep-last 0 would keep nothing but HEAD; use `ckpt delete` for that (nothing was changed)"
                .into(),
        ));
    }
    Ok(())
}

/// Collects garbage in the workspace's store, applying the given keep rules
/// or else the saved policy.
pub fn gc(ctx: &Context, opts: &GcOptions) -> Result<GcReport> {
    validate(&opts.keep)?;
    let ws = ctx.workspace()?;
    let store = ws.open_store(&ctx.config)?;
    let saved_policy = if opts.save_policy {
        retention::set_configured(&store, &opts.keep)?;
        Some(opts.keep.clone())
    } else {
        None
    };
    let policy = if opts.keep.is_empty() {
        retention::configured(&store)?
    } else {
        opts.keep.clone()
    };
    let run = if policy.is_empty() {
        GcRun::Sweep(gc::gc(&store, opts.dry_run)?)
    } else {
        GcRun::Retention(retention::apply(
            &store,
            &policy,
            ckpt_fs::fs::now_ns(),
            opts.dry_run,
        )?)
    };
    Ok(GcReport {
        schema: Schema,
        saved_policy,
        run,
        dry_run: opts.dry_run,
    })
}
