//! `ckpt hash DIR`: the state digest of any directory, by the same rules as
//! checkpoints (`.ckptignore` honoured, a `.ckpt` marker skipped). Needs no
//! workspace and opens no store.

use std::path::PathBuf;

use serde::Serialize;

use super::json::{with, Schema};
use super::Context;
use crate::Result;

/// How much of the digest to report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashForm {
    /// The 32-byte checksum.
    #[default]
    Checksum,
    /// Also the full 2048-byte LtHash state (base64url).
    Full,
}

/// What [`hash`] digests.
#[derive(Clone, Debug, Default)]
pub struct HashOptions {
    /// The directory (relative to the context's directory).
    pub dir: PathBuf,
    /// Checksum only, or the full state too.
    pub form: HashForm,
}

/// A directory's digest. JSON: `path`, `checksum`, `entries`, `skipped`
/// (a count), and `state` with [`HashForm::Full`].
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct HashReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The directory, absolute against the context's directory.
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    pub path: PathBuf,
    /// The digest's checksum, 64 lowercase hex digits.
    pub checksum: String,
    /// The full 2048-byte LtHash state, base64url ([`HashForm::Full`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Entries digested.
    pub entries: u64,
    /// Entries skipped (sockets, FIFOs, devices).
    pub skipped: usize,
}

/// Digests a directory.
pub fn hash(ctx: &Context, opts: &HashOptions) -> Result<HashReport> {
    let path = ctx.abs(&opts.dir);
    let (digest, scan) = crate::engine::verify::hash_dir(&path)?;
    Ok(HashReport {
        schema: Schema,
        path,
        checksum: digest.checksum_hex(),
        state: (opts.form == HashForm::Full).then(|| digest.state().to_base64url()),
        entries: scan.entries,
        skipped: scan.skipped.len(),
    })
}
