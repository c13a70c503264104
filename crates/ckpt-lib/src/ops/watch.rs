//! `ckpt watch --status` and `ckpt watch --stop`: the client side of the
//! workspace's watcher ([`crate::watch::client`]).
//!
//! Both talk to the watcher over `<store>/watch.sock` and open neither the
//! store nor its lock (`stop` waits on the watcher's own `watch.lock`).
//! Running a watcher is not here: the watcher is the daemon layer above.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::Schema;
use super::Context;
use crate::watch::{client, Op, WatchStatus, WatcherFacts};
use crate::Result;

/// What [`status`] asks (nothing yet).
#[derive(Clone, Debug, Default)]
pub struct WatchStatusOptions {}

/// The running watcher's description of itself, if one answered. JSON:
/// `running`, and when running the watcher's [`WatchStatus`] fields, with
/// `epoch` as a decimal string (a full u64: JSON readers that use doubles
/// would round it).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct WatchStatusReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The workspace root.
    #[serde(skip)]
    pub root: PathBuf,
    /// What the watcher said; `None`: no watcher answered.
    #[serde(flatten, serialize_with = "running")]
    #[schemars(with = "RunningForm<'static>")]
    pub status: Option<WatchStatus>,
    /// Why no watcher answered (for `--verbose`).
    #[serde(skip)]
    pub error: Option<String>,
}

/// Whether a watcher answered, and what it said (flattened into
/// [`WatchStatusReport`]).
#[derive(Serialize, JsonSchema)]
struct RunningForm<'a> {
    running: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch: Option<String>,
    #[serde(flatten)]
    facts: Option<&'a WatcherFacts>,
}

fn running<S: Serializer>(st: &Option<WatchStatus>, s: S) -> std::result::Result<S::Ok, S::Error> {
    RunningForm {
        running: st.is_some(),
        epoch: st.as_ref().map(|st| st.epoch.to_string()),
        facts: st.as_ref().map(|st| &st.facts),
    }
    .serialize(s)
}

/// Asks the workspace's watcher to describe itself.
pub fn status(ctx: &Context, _opts: &WatchStatusOptions) -> Result<WatchStatusReport> {
    let ws = ctx.workspace()?;
    let (status, error) = match client::request(&ws.store_path, Op::Status, 0, 0) {
        Ok(r) => (r.status, None),
        Err(e) => (None, Some(e)),
    };
    Ok(WatchStatusReport {
        schema: Schema,
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
            schema: Schema,
            root: PathBuf::from("/w"),
            status: Some(st),
            error: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["epoch"], "9007199254740993");
        assert_eq!(v["running"], true);
        // The wire keeps it a number, for the client that reads it back.
        let wire = serde_json::to_value(r.status.as_ref().unwrap()).unwrap();
        assert_eq!(wire["epoch"], (1u64 << 53) + 1);
        let back: WatchStatus = serde_json::from_value(wire).unwrap();
        assert_eq!(back.epoch, (1 << 53) + 1);
    }
}
