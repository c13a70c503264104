//! `ckpt init --agent`: the hook configuration of agent harnesses.
//!
//! Which file each harness reads, how ckpt's hooks are merged into it and
//! taken out again, and how a directory shows which harnesses it uses are
//! the harness contracts of crate `ckpt_harness`; this operation picks the
//! harnesses, plans every change first and writes only when asked, so a
//! file that cannot be merged stops the whole operation before anything is
//! written.

use std::path::PathBuf;

use ckpt_harness::setup::{self, Action, Change, Plan};
use ckpt_harness::Harness;
use serde_json::{json, Value};

use super::json::{serialize_via_to_json, SCHEMA};
use super::Context;
use crate::{Error, Result};

/// What [`agent`] sets up.
#[derive(Clone, Debug, Default)]
pub struct AgentOptions {
    /// The harnesses; `None`: those whose configuration directories (or
    /// instruction files) the workspace root holds.
    pub harnesses: Option<Vec<Harness>>,
    /// Take ckpt's hooks out instead of merging them in.
    pub remove: bool,
    /// Write the files; otherwise only report what would be written.
    pub write: bool,
}

/// One harness's part of an [`AgentReport`].
#[derive(Debug)]
pub struct AgentChange {
    /// What was (or would be) done.
    pub plan: Plan,
    /// Whether it was written.
    pub written: bool,
}

/// What [`agent`] did.
#[derive(Debug)]
pub struct AgentReport {
    /// The workspace root the files are under.
    pub root: PathBuf,
    /// The harnesses were detected, not named.
    pub detected: bool,
    /// One entry per harness.
    pub changes: Vec<AgentChange>,
}

fn change_name(c: &Change) -> &'static str {
    match c {
        Change::Create => "create",
        Change::Update => "update",
        Change::Delete => "delete",
        Change::Unchanged => "unchanged",
    }
}

impl AgentReport {
    /// The JSON form: `root`, `detected`, and `harnesses`: one object per
    /// harness with `harness`, `path`, `change` (`create`, `update`,
    /// `delete`, `unchanged`), `events`, `written`, `approval` (what the
    /// user must do before the harness runs the hooks, or null) and, when
    /// not written, `text` (the file as it would be).
    pub fn to_json(&self) -> Value {
        json!({
            "schema": SCHEMA,
            "root": self.root.display().to_string(),
            "detected": self.detected,
            "harnesses": self.changes.iter().map(|c| json!({
                "harness": c.plan.harness.name(),
                "path": c.plan.path.display().to_string(),
                "change": change_name(&c.plan.change),
                "events": c.plan.events,
                "written": c.written,
                "approval": c.plan.harness.approval(),
                "text": (!c.written && c.plan.change != Change::Delete).then_some(&c.plan.text),
            })).collect::<Vec<_>>(),
        })
    }
}

serialize_via_to_json!(AgentReport);

/// Plans (and with [`AgentOptions::write`] writes) the hook configuration
/// of each harness under the workspace root.
pub fn agent(ctx: &Context, opts: &AgentOptions) -> Result<AgentReport> {
    let ws = ctx.workspace()?;
    let (harnesses, detected) = match &opts.harnesses {
        Some(h) => (h.clone(), false),
        None => (setup::detect(&ws.root), true),
    };
    let action = if opts.remove {
        Action::Remove
    } else {
        Action::Install
    };
    let plans = harnesses
        .into_iter()
        .map(|h| setup::plan(&ws.root, h, action))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let mut changes = Vec::new();
    for plan in plans {
        let written = opts.write && plan.change != Change::Unchanged;
        if written {
            plan.apply()
                .map_err(|e| Error::io("write", &plan.path, e))?;
        }
        changes.push(AgentChange { plan, written });
    }
    Ok(AgentReport {
        root: ws.root.clone(),
        detected,
        changes,
    })
}
