//! `ckpt verify [ID]` and `ckpt verify --store`: re-read the workspace and
//! compare its digest with a checkpoint's, or re-hash every object of the
//! store and check every reference. Both only read (the store is opened
//! read-only).
//!
//! A mismatch or a damaged store is a report, not an error: the report says
//! [`WorkspaceVerified::matches`] / [`StoreVerified::ok`] and the caller
//! decides what that means (the CLI's exit code).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::json::{self, serialize_via_to_json, with_schema, SCHEMA};
use super::Context;
use crate::engine::verify::{self as engine, StoreReport, VerifyReport};
use crate::Result;

/// What [`verify`] checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyTarget {
    /// The workspace against a checkpoint.
    Workspace {
        /// The checkpoint (`v12`, `HEAD~1`, …); the head when `None`.
        rev: Option<String>,
    },
    /// The store's integrity.
    Store,
}

impl Default for VerifyTarget {
    fn default() -> Self {
        VerifyTarget::Workspace { rev: None }
    }
}

/// What [`verify`] checks.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// The workspace or the store.
    pub target: VerifyTarget,
}

/// The workspace compared with a checkpoint.
#[derive(Debug)]
pub struct WorkspaceVerified {
    /// The engine's report.
    pub report: VerifyReport,
    /// How long it took.
    pub elapsed: Duration,
}

impl WorkspaceVerified {
    /// Whether the workspace is exactly the checkpoint's state.
    pub fn matches(&self) -> bool {
        self.report.matches()
    }

    /// The expected digest's checksum, lowercase hex.
    pub fn expected_hex(&self) -> String {
        json::hex(&self.report.expected)
    }

    /// The differences that matter (see
    /// [`crate::engine::diff::Change::is_interesting`]).
    pub fn differences(&self) -> impl Iterator<Item = &crate::engine::diff::Change> {
        self.report
            .differences
            .iter()
            .filter(|c| c.is_interesting())
    }

    /// The JSON form: `checkpoint`, `matches`, `expected`, `actual`,
    /// `differences`, `files`, `bytes`, `elapsed_ms`.
    pub fn to_json(&self) -> Value {
        let rep = &self.report;
        json!({
            "schema": SCHEMA,
            "checkpoint": rep.checkpoint.id(),
            "matches": self.matches(),
            "expected": json::hex(&rep.expected),
            "actual": json::hex(&rep.actual),
            "differences": json::changes(&rep.differences),
            "files": rep.files,
            "bytes": rep.bytes,
            "elapsed_ms": json::ms(self.elapsed),
        })
    }
}

/// The store's integrity check.
#[derive(Debug)]
pub struct StoreVerified {
    /// The engine's report.
    pub report: StoreReport,
    /// How long it took.
    pub elapsed: Duration,
}

impl StoreVerified {
    /// Whether nothing is wrong.
    pub fn ok(&self) -> bool {
        self.report.problems.is_empty()
    }

    /// The JSON form: `checkpoints`, `trees`, `objects`, `bytes`,
    /// `problems` (`what`, `id`, `error`, `checkpoints`), `ok`.
    pub fn to_json(&self) -> Value {
        let mut v = with_schema(&self.report);
        v["ok"] = json!(self.ok());
        v
    }
}

/// What [`verify`] found.
#[derive(Debug)]
pub enum Verified {
    /// The workspace against a checkpoint.
    Workspace(Box<WorkspaceVerified>),
    /// The store.
    Store(StoreVerified),
}

impl Verified {
    /// The JSON form of whichever was checked.
    pub fn to_json(&self) -> Value {
        match self {
            Verified::Workspace(w) => w.to_json(),
            Verified::Store(s) => s.to_json(),
        }
    }
}

serialize_via_to_json!(WorkspaceVerified, StoreVerified, Verified);

/// Verifies the workspace against a checkpoint, or the store.
pub fn verify(ctx: &Context, opts: &VerifyOptions) -> Result<Verified> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    Ok(match &opts.target {
        VerifyTarget::Store => {
            let report = engine::verify_store(&store)?;
            Verified::Store(StoreVerified {
                report,
                elapsed: t0.elapsed(),
            })
        }
        VerifyTarget::Workspace { rev } => {
            let report = engine::verify_workspace(&ws, &store, rev.as_deref().unwrap_or("HEAD"))?;
            Verified::Workspace(Box::new(WorkspaceVerified {
                report,
                elapsed: t0.elapsed(),
            }))
        }
    })
}
