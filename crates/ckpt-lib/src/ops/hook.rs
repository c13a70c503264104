//! `ckpt hook`: one agent-harness event → at most one checkpoint.
//!
//! The event ([`ckpt_harness::HookEvent`], read from the harness's stdin by
//! the caller) becomes a save through [`super::save::save`], so it goes
//! through the live watcher when there is one, tagged `harness`,
//! `session`, `event` and `tool`, with a one-line message: the prompt
//! text, the shell command or the edited path.
//!
//! What is recorded:
//! - a prompt always records a checkpoint, even when nothing changed: it
//!   marks where a turn began (`ckpt undo --turn` goes back to it);
//! - every other event records one only when something changed since the
//!   head, so a tool call that changed nothing leaves no trace, and the
//!   checkpoint after a tool call exists exactly when the call changed
//!   files ([`super::undo`] relies on that).
//!
//! A hook must never stall the agent: the caller passes a short lock
//! timeout, and a store held by a long operation is an
//! [`Error::LockTimeout`] the caller turns into a warning. Nothing is lost:
//! the next event's checkpoint holds the change.
//!
//! [`HookReport::start_watcher`] says whether the caller should start the
//! workspace's watcher (the configuration asks for it and none answered),
//! so every hook after the first saves at watch-mode cost.

use std::collections::BTreeMap;
use std::time::Duration;

use ckpt_harness::{HookEvent, Kind};
use serde::{Serialize, Serializer};

use super::json::{with, Schema};
use super::save::SaveOptions;
use super::save::SaveReport;
use super::Context;
use crate::engine::save::SaveOutcome;
use crate::Result;

/// What [`hook`] records.
#[derive(Clone, Debug)]
pub struct HookOptions {
    /// The event.
    pub event: HookEvent,
}

/// What [`hook`] did.
#[derive(Debug)]
pub struct HookReport {
    /// The save (its outcome says whether a checkpoint was recorded).
    pub save: SaveReport,
    /// The checkpoint's message.
    pub message: String,
    /// The checkpoint's tags.
    pub tags: BTreeMap<String, String>,
    /// Whether the caller should start the workspace's watcher.
    pub start_watcher: bool,
    /// How long an auto-started watcher waits without a request before it
    /// stops ([`crate::Config::hook_watch`]).
    pub watcher_idle: Option<Duration>,
}

impl HookReport {
    /// The checkpoint recorded, if any.
    pub fn saved(&self) -> Option<&crate::store::catalog::Checkpoint> {
        match &self.save.outcome {
            SaveOutcome::Saved(cp) => Some(cp),
            SaveOutcome::Unchanged(_) => None,
        }
    }
}

/// The JSON form of a [`HookReport`]: `saved`, `id` (null when nothing
/// was recorded), `message`, `tags`, `dropped` (checkpoints the retention
/// policy dropped), `elapsed_ms`, `unreadable`.
#[derive(Serialize, schemars::JsonSchema)]
struct HookForm<'a> {
    schema: Schema,
    saved: bool,
    id: Option<String>,
    message: &'a str,
    tags: &'a BTreeMap<String, String>,
    dropped: &'a [u64],
    #[serde(serialize_with = "with::ms")]
    #[schemars(with = "f64")]
    elapsed_ms: Duration,
    #[serde(serialize_with = "with::unreadable")]
    #[schemars(with = "Vec<super::json::UnreadableForm<'static>>")]
    unreadable: &'a [crate::workspace::scan::Unreadable],
}

super::json::schema_via!(HookReport => HookForm<'static>);

impl Serialize for HookReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        HookForm {
            schema: Schema,
            saved: self.saved().is_some(),
            id: self.saved().map(|c| c.id()),
            message: &self.message,
            tags: &self.tags,
            dropped: self
                .save
                .retention
                .as_ref()
                .map_or(&[][..], |r| &r.selection.drop[..]),
            elapsed_ms: self.save.elapsed,
            unreadable: &self.save.unreadable,
        }
        .serialize(s)
    }
}

/// Records the event (see the module doc).
pub fn hook(ctx: &Context, opts: &HookOptions) -> Result<HookReport> {
    let ev = &opts.event;
    let message = ev.message();
    let tags: BTreeMap<String, String> = ev.tags().into_iter().collect();
    let save = super::save::save(
        ctx,
        &SaveOptions {
            message: message.clone(),
            tags: tags.clone(),
            allow_empty: ev.kind == Kind::Prompt,
        },
    )?;
    let start_watcher = ctx.config.hook_watch.is_some() && !save.through_watcher;
    Ok(HookReport {
        save,
        message,
        tags,
        start_watcher,
        watcher_idle: ctx.config.hook_watch,
    })
}
