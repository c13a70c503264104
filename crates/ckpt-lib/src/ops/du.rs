//! `ckpt du`: space accounting of the workspace's store
//! ([`crate::store::usage`]): its size, the bytes unique to each checkpoint
//! and what gc would free. Read-only: the store is opened read-only.

use std::path::PathBuf;

use serde::Serialize;

use super::json::{with, Schema};
use super::Context;
use crate::store::usage::{self, Usage};
use crate::Result;

/// What [`du`] found. JSON: the [`Usage`] fields (each checkpoint with its
/// `id`), and `store`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DuReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The store's directory.
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    pub store: PathBuf,
    /// Its space accounting.
    #[serde(flatten)]
    pub usage: Usage,
}

/// Measures the workspace's store.
pub fn du(ctx: &Context) -> Result<DuReport> {
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let usage = usage::usage(&store)?;
    Ok(DuReport {
        schema: Schema,
        store: ws.store_path,
        usage,
    })
}
