//! `ckpt verify [ID]` and `ckpt verify --store`: re-read the workspace and
//! compare its digest with a checkpoint's, or re-hash every object of the
//! store and check every reference. Both only read (the store is opened
//! read-only).
//!
//! A mismatch or a damaged store is a report, not an error: the report says
//! [`WorkspaceCheck::matches`] / [`StoreCheck::ok`] and the caller
//! decides what that means (the CLI's exit code).

use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

use super::json::{self, with, ChangeForm, Schema};
use super::Context;
use crate::engine::verify::{self as engine, Comparison, Integrity};
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

/// The workspace compared with a checkpoint. JSON: `checkpoint`,
/// `matches`, `expected`, `actual`, `differences`, `files`, `bytes`,
/// `elapsed_ms`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct WorkspaceCheck {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The engine's report.
    #[serde(flatten, serialize_with = "comparison")]
    #[schemars(with = "ComparisonForm<'static>")]
    pub report: Comparison,
    /// How long it took.
    #[serde(rename = "elapsed_ms", serialize_with = "with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// The JSON of a workspace comparison (flattened into the report).
#[derive(Serialize, schemars::JsonSchema)]
struct ComparisonForm<'a> {
    checkpoint: String,
    matches: bool,
    expected: String,
    actual: String,
    differences: Vec<ChangeForm<'a>>,
    files: u64,
    bytes: u64,
}

/// The fields of [`WorkspaceCheck`] that come from the engine's report.
fn comparison<S: Serializer>(rep: &Comparison, s: S) -> std::result::Result<S::Ok, S::Error> {
    ComparisonForm {
        checkpoint: rep.checkpoint.id(),
        matches: rep.matches(),
        expected: json::hex(&rep.expected),
        actual: json::hex(&rep.actual),
        differences: rep
            .differences
            .iter()
            .filter(|c| c.is_interesting())
            .map(ChangeForm::from)
            .collect(),
        files: rep.files,
        bytes: rep.bytes,
    }
    .serialize(s)
}

impl WorkspaceCheck {
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
}

/// The store's integrity check. JSON: `checkpoints`, `trees`, `objects`,
/// `bytes`, `problems` (`what`, `id`, `error`, `checkpoints`), `ok`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct StoreCheck {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The engine's report.
    #[serde(flatten)]
    pub report: Integrity,
    /// Nothing is wrong (see [`StoreCheck::ok`]).
    #[serde(rename = "ok")]
    pub is_ok: bool,
    /// How long it took.
    #[serde(skip)]
    pub elapsed: Duration,
}

impl StoreCheck {
    /// Whether nothing is wrong.
    pub fn ok(&self) -> bool {
        self.is_ok
    }
}

/// What [`verify`] found. JSON: the check's, whichever was made.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum VerifyReport {
    /// The workspace against a checkpoint.
    Workspace(Box<WorkspaceCheck>),
    /// The store.
    Store(StoreCheck),
}

/// Verifies the workspace against a checkpoint, or the store.
pub fn verify(ctx: &Context, opts: &VerifyOptions) -> Result<VerifyReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    let store = ws.open_store_read_only(&ctx.config)?;
    Ok(match &opts.target {
        VerifyTarget::Store => {
            let report = engine::verify_store(&store)?;
            VerifyReport::Store(StoreCheck {
                schema: Schema,
                is_ok: report.problems.is_empty(),
                report,
                elapsed: t0.elapsed(),
            })
        }
        VerifyTarget::Workspace { rev } => {
            let report = engine::verify_workspace(&ws, &store, rev.as_deref().unwrap_or("HEAD"))?;
            VerifyReport::Workspace(Box::new(WorkspaceCheck {
                schema: Schema,
                report,
                elapsed: t0.elapsed(),
            }))
        }
    })
}
