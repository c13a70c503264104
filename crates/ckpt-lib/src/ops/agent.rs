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
use serde::{Serialize, Serializer};

use super::json::{with, Schema};
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

/// The JSON form of an [`AgentReport`]: `root`, `detected`, and
/// `harnesses`: per harness `harness`, `path`, `change` (`create`,
/// `update`, `delete`, `unchanged`), `events`, `written`, `approval`, and
/// `text` (what to write, when it was not written and is not a delete).
#[derive(Serialize, schemars::JsonSchema)]
struct AgentForm<'a> {
    schema: Schema,
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    root: &'a std::path::Path,
    detected: bool,
    harnesses: Vec<HarnessForm<'a>>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct HarnessForm<'a> {
    harness: &'static str,
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    path: &'a std::path::Path,
    change: &'static str,
    events: &'a [String],
    written: bool,
    approval: Option<&'static str>,
    text: Option<&'a String>,
}

super::json::schema_via!(AgentReport => AgentForm<'static>);

impl Serialize for AgentReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        AgentForm {
            schema: Schema,
            root: &self.root,
            detected: self.detected,
            harnesses: self
                .changes
                .iter()
                .map(|c| HarnessForm {
                    harness: c.plan.harness.name(),
                    path: &c.plan.path,
                    change: change_name(&c.plan.change),
                    events: &c.plan.events,
                    written: c.written,
                    approval: c.plan.harness.approval(),
                    text: (!c.written && c.plan.change != Change::Delete).then_some(&c.plan.text),
                })
                .collect(),
        }
        .serialize(s)
    }
}

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
