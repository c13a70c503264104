//! `ckpt log`: the checkpoints, newest first, and which one is the head.
//! Reads only (the store is opened read-only).

use serde_json::{json, Value};

use super::json::{self, serialize_via_to_json, SCHEMA};
use super::Context;
use crate::store::catalog::Checkpoint;
use crate::Result;

/// What [`log`] lists.
#[derive(Clone, Debug, Default)]
pub struct LogOptions {
    /// At most this many checkpoints (the newest); all when `None`.
    pub limit: Option<usize>,
}

/// The checkpoints.
#[derive(Debug)]
pub struct LogReport {
    /// The head's sequence number (None before the first save).
    pub head: Option<u64>,
    /// The checkpoints, newest first.
    pub checkpoints: Vec<Checkpoint>,
    /// How many checkpoints the workspace has (more than `checkpoints`
    /// holds when a limit cut the list).
    pub total: usize,
}

impl LogReport {
    /// The JSON form: `head` (an id), `checkpoints` (records) and `total`.
    pub fn to_json(&self) -> Value {
        json!({
            "schema": SCHEMA,
            "head": self.head.map(|h| format!("v{h}")),
            "checkpoints": self
                .checkpoints
                .iter()
                .map(|c| json::checkpoint(c, self.head))
                .collect::<Vec<_>>(),
            "total": self.total,
        })
    }
}

serialize_via_to_json!(LogReport);

/// Lists the workspace's checkpoints, newest first.
pub fn log(ctx: &Context, opts: &LogOptions) -> Result<LogReport> {
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let r = store.catalog.reader()?;
    let head = r.head()?;
    let mut checkpoints = r.checkpoints()?;
    checkpoints.reverse();
    let total = checkpoints.len();
    checkpoints.truncate(opts.limit.unwrap_or(usize::MAX));
    Ok(LogReport {
        head,
        checkpoints,
        total,
    })
}
