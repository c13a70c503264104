//! `ckpt delete ID`: delete one checkpoint record under the store lock.
//! Its trees and objects stay until the next `ckpt gc`.

use serde::Serialize;

use super::json::{with, Schema};
use super::Context;
use crate::store::catalog::Checkpoint;
use crate::Result;

/// What [`delete`] deletes.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// The checkpoint (`v12`, a hash prefix, `HEAD`, …).
    pub rev: String,
}

/// What [`delete`] did. JSON: `deleted` (an id).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DeleteReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The checkpoint record deleted.
    #[serde(serialize_with = "with::id")]
    #[schemars(with = "String")]
    pub deleted: Checkpoint,
}

/// Deletes a checkpoint record.
pub fn delete(ctx: &Context, opts: &DeleteOptions) -> Result<DeleteReport> {
    let ws = ctx.workspace()?;
    let store = ws.open_store(&ctx.config)?;
    let deleted = store.catalog.reader()?.resolve(&opts.rev)?;
    store.catalog.delete_checkpoint(&deleted)?;
    Ok(DeleteReport {
        schema: Schema,
        deleted,
    })
}
