//! `ckpt watch --status` and `ckpt watch --stop`: the client side of the
//! workspace's watcher ([`crate::watch::client`]).
//!
//! Both talk to the watcher over `<store>/watch.sock` and open neither the
//! store nor its lock (`stop` waits on the watcher's own `watch.lock`).
//! Running a watcher is not here: the watcher is the daemon layer above.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::json::{serialize_via_to_json, with_schema, Schema, SCHEMA};
use super::Context;
use crate::watch::{client, Op, WatchStatus};
use crate::Result;

/// What [`status`] asks (nothing yet).
#[derive(Clone, Debug, Default)]
pub struct WatchStatusOptions {}

/// The running watcher's description of itself, if one answered.
#[derive(Clone, Debug)]
pub struct WatchStatusReport {
    /// The workspace root.
    pub root: PathBuf,
    /// What the watcher said; `None`: no watcher answered.
    pub status: Option<WatchStatus>,
    /// Why no watcher answered (for `--verbose`).
    pub error: Option<String>,
}

impl WatchStatusReport {
    /// The JSON form: `running`, and when running the watcher's
    /// [`WatchStatus`] fields, with `epoch` as a decimal string (a full
    /// u64: JSON readers that use doubles would round it).
    pub fn to_json(&self) -> Value {
        match &self.status {
            None => json!({"schema": SCHEMA, "running": false}),
            Some(st) => {
                let mut v = with_schema(st);
                v["running"] = json!(true);
                v["epoch"] = json!(st.epoch.to_string());
                v
            }
        }
    }
}

/// Asks the workspace's watcher to describe itself.
pub fn status(ctx: &Context, _opts: &WatchStatusOptions) -> Result<WatchStatusReport> {
    let ws = ctx.workspace()?;
    let (status, error) = match client::request(&ws.store_path, Op::Status, 0, 0) {
        Ok(r) => (r.status, None),
        Err(e) => (None, Some(e)),
    };
    Ok(WatchStatusReport {
        root: ws.root,
        status,
        error,
    })
}

/// What [`stop`] asks (nothing yet; it waits up to the configured lock
/// timeout for the watcher to exit).
#[derive(Clone, Debug, Default)]
pub struct StopOptions {}

/// Whether a watcher was stopped. JSON: `stopped`.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct StopReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The workspace root.
    #[serde(skip)]
    pub root: PathBuf,
    /// A watcher was running and has exited; `false`: none was running.
    pub stopped: bool,
}

/// Stops the workspace's watcher, waiting until it has exited. An error
/// when one holds its lock but does not answer.
pub fn stop(ctx: &Context, _opts: &StopOptions) -> Result<StopReport> {
    let ws = ctx.workspace()?;
    let stopped = client::stop(&ws.store_path, ctx.config.lock_timeout)?;
    Ok(StopReport {
        schema: Schema,
        root: ws.root,
        stopped,
    })
}

serialize_via_to_json!(WatchStatusReport);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_epoch_is_a_string() {
        let st = WatchStatus {
            epoch: (1 << 53) + 1,
            ..WatchStatus::default()
        };
        let r = WatchStatusReport {
            root: PathBuf::from("/w"),
            status: Some(st),
            error: None,
        };
        let v = r.to_json();
        assert_eq!(v["epoch"], json!("9007199254740993"));
        assert_eq!(v["running"], json!(true));
    }
}
