//! `ckpt undo`: back to before the agent's last step.
//!
//! The harness hooks ([`super::hook`]) record a checkpoint after a tool
//! call exactly when the call changed files, and its parent is the state
//! the workspace was in when the call began (the before-tool event saved
//! whatever had changed until then). So "before the last file-changing
//! tool call of the session" is the parent of the session's newest
//! after-tool checkpoint, and `--turn` ("before the last prompt") is the
//! session's newest prompt checkpoint, which every prompt records.
//!
//! Undo is a restore ([`super::restore::restore`]), so the current state is
//! saved first and the report names the checkpoint that undoes the undo.
//! Undoing again steps further back: only steps recorded at or before the
//! head count (a restore moves the head to the checkpoint it restored),
//! and a step whose "before" is already what the head holds (the same
//! root tree) has been undone, so the next older one is taken.
//!
//! The session is the one named, else the session of the newest
//! checkpoint that has one.

use std::collections::BTreeMap;

use ckpt_harness::Kind;
use serde::{Serialize, Serializer};

use super::json::{CheckpointForm, Schema};
use super::restore::{RestoreOptions, RestoreReport};
use super::Context;
use crate::store::catalog::{CatalogReader, Checkpoint};
use crate::{Error, Result};

/// What [`undo`] undoes.
#[derive(Clone, Debug, Default)]
pub struct UndoOptions {
    /// The session (its `session` tag); the latest session when `None`.
    pub session: Option<String>,
    /// Back to before the last prompt instead of the last tool call.
    pub turn: bool,
    /// Only report what would change.
    pub dry_run: bool,
}

/// What [`undo`] did. JSON: `session`, `step` and `target` (checkpoint
/// records), and `restore` (the restore's report).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct UndoReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The session.
    pub session: String,
    /// The checkpoint that recorded the step undone (the tool call's
    /// after-checkpoint, or the prompt's).
    #[serde(serialize_with = "record")]
    #[schemars(with = "CheckpointForm<'static>")]
    pub step: Checkpoint,
    /// The checkpoint restored.
    #[serde(serialize_with = "record")]
    #[schemars(with = "CheckpointForm<'static>")]
    pub target: Checkpoint,
    /// The restore.
    #[serde(rename = "restore")]
    pub restored: RestoreReport,
}

/// A checkpoint record (not marked as the head).
fn record<S: Serializer>(cp: &Checkpoint, s: S) -> std::result::Result<S::Ok, S::Error> {
    CheckpointForm::new(cp, None).serialize(s)
}

/// Restores the workspace to before the session's last step (see the
/// module doc).
pub fn undo(ctx: &Context, opts: &UndoOptions) -> Result<UndoReport> {
    let ws = ctx.workspace()?;
    let (session, step, target) = {
        let store = ws.open_store_read_only(&ctx.config)?;
        let r = store.catalog.reader()?;
        pick(&r, opts)?
    };
    let restored = super::restore::restore(
        ctx,
        &RestoreOptions {
            rev: target.id(),
            dry_run: opts.dry_run,
            ..Default::default()
        },
    )?;
    Ok(UndoReport {
        schema: Schema,
        session,
        step,
        target,
        restored,
    })
}

fn kind(cp: &Checkpoint) -> Kind {
    cp.tags.get("event").map_or(Kind::Other, |e| Kind::of(e))
}

/// The session, the step to undo and the checkpoint to restore.
fn pick(r: &CatalogReader, opts: &UndoOptions) -> Result<(String, Checkpoint, Checkpoint)> {
    let head = r.head_checkpoint()?;
    let (head_seq, head_root) = (head.as_ref().map(|h| h.seq), head.map(|h| h.root));
    let mut session = opts.session.clone();
    let mut by_seq: BTreeMap<u64, Checkpoint> = BTreeMap::new();
    let mut steps = Vec::new();
    r.for_each_newest(None, |cp| {
        let s = cp.tags.get("session");
        if session.is_none() {
            session = s.cloned();
        }
        if s.is_some() && s == session.as_ref() {
            let k = kind(&cp);
            if (opts.turn && k == Kind::Prompt) || (!opts.turn && k == Kind::AfterTool) {
                steps.push(cp.clone());
            }
        }
        by_seq.insert(cp.seq, cp);
        Ok(true)
    })?;
    let Some(session) = session else {
        return Err(Error::Usage(
            "no checkpoint here was recorded by an agent harness (none has a session tag): \
             `ckpt undo` undoes what the hooks of `ckpt init --agent NAME --write` record; \
             `ckpt log` lists the checkpoints and `ckpt restore ID` goes back to one \
             (nothing was changed)"
                .into(),
        ));
    };
    let what = if opts.turn {
        "prompt"
    } else {
        "file-changing tool call"
    };
    let mut found_any = false;
    // Only steps at or before the head: after an undo the head is the
    // checkpoint restored, and the next undo goes on back from there.
    for step in steps
        .into_iter()
        .filter(|s| head_seq.is_none_or(|h| s.seq <= h))
    {
        found_any = true;
        let target = if opts.turn {
            step.clone()
        } else {
            match step.parent.and_then(|p| by_seq.get(&p)) {
                Some(p) => p.clone(),
                None => continue,
            }
        };
        if head_root != Some(target.root) {
            return Ok((session, step, target));
        }
    }
    Err(Error::Usage(if found_any {
        format!(
            "session {session}: every {what} recorded is undone already (the workspace is at the \
             state before the oldest one); `ckpt log --session {session}` lists its checkpoints \
             (nothing was changed)"
        )
    } else {
        format!(
            "session {session} has no {what} recorded; `ckpt log --session {session}` lists its \
             checkpoints (nothing was changed)"
        )
    }))
}
