//! `ckpt delete ID`: delete one checkpoint record under the store lock.
//! Its trees and objects stay until the next `ckpt gc`.

use serde_json::{json, Value};

use super::json::{serialize_via_to_json, SCHEMA};
use super::Context;
use crate::store::catalog::Checkpoint;
use crate::Result;

/// What [`delete`] deletes.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// The checkpoint (`v12`, a hash prefix, `HEAD`, …).
    pub rev: String,
}

/// What [`delete`] did.
#[derive(Debug)]
pub struct DeleteReport {
    /// The checkpoint record deleted.
    pub deleted: Checkpoint,
}

impl DeleteReport {
    /// The JSON form: `deleted` (an id).
    pub fn to_json(&self) -> Value {
        json!({ "schema": SCHEMA, "deleted": self.deleted.id() })
    }
}

serialize_via_to_json!(DeleteReport);

/// Deletes a checkpoint record.
pub fn delete(ctx: &Context, opts: &DeleteOptions) -> Result<DeleteReport> {
    let ws = ctx.workspace()?;
    let store = ws.open_store(&ctx.config)?;
    let deleted = store.catalog.reader()?.resolve(&opts.rev)?;
    store.catalog.delete_checkpoint(&deleted)?;
    Ok(DeleteReport { deleted })
}
