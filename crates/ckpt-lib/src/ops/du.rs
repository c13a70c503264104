//! `ckpt du`: space accounting of the workspace's store
//! ([`crate::store::usage`]): its size, the bytes unique to each checkpoint
//! and what gc would free. Read-only: the store is opened read-only.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::json::{serialize_via_to_json, with_schema};
use super::Context;
use crate::store::usage::{self, Usage};
use crate::Result;

/// What [`du`] found.
#[derive(Debug)]
pub struct DuReport {
    /// The store's directory.
    pub store: PathBuf,
    /// Its space accounting.
    pub usage: Usage,
}

impl DuReport {
    /// The JSON form: the [`Usage`] fields, `store`, and an `id` on every
    /// checkpoint.
    pub fn to_json(&self) -> Value {
        let mut v = with_schema(&self.usage);
        v["store"] = json!(self.store.display().to_string());
        if let Some(cps) = v["checkpoints"].as_array_mut() {
            for c in cps {
                let seq = c["seq"].as_u64().unwrap_or(0);
                c["id"] = json!(format!("v{seq}"));
            }
        }
        v
    }
}

serialize_via_to_json!(DuReport);

/// Measures the workspace's store.
pub fn du(ctx: &Context) -> Result<DuReport> {
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let usage = usage::usage(&store)?;
    Ok(DuReport {
        store: ws.store_path,
        usage,
    })
}
