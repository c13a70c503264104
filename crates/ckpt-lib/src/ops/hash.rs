//! `ckpt hash DIR`: the state digest of any directory, by the same rules as
//! checkpoints (`.ckptignore` honoured, a `.ckpt` marker skipped). Needs no
//! workspace and opens no store.

use std::path::PathBuf;

use ckpt_lthash::Digest;
use serde_json::{json, Value};

use super::json::{serialize_via_to_json, SCHEMA};
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

/// A directory's digest.
#[derive(Debug)]
pub struct HashReport {
    /// The directory, absolute against the context's directory.
    pub path: PathBuf,
    /// Its digest.
    pub digest: Digest,
    /// Entries digested.
    pub entries: u64,
    /// Entries skipped (sockets, FIFOs, devices).
    pub skipped: usize,
    /// What was asked for.
    pub form: HashForm,
}

impl HashReport {
    /// The checksum, 64 lowercase hex digits.
    pub fn checksum(&self) -> String {
        self.digest.checksum_hex()
    }

    /// The full state, base64url.
    pub fn state(&self) -> String {
        self.digest.state().to_base64url()
    }

    /// The JSON form: `path`, `checksum`, `entries`, `skipped` (a count),
    /// and `state` with [`HashForm::Full`].
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "schema": SCHEMA,
            "path": self.path.display().to_string(),
            "checksum": self.checksum(),
            "entries": self.entries,
            "skipped": self.skipped,
        });
        if self.form == HashForm::Full {
            v["state"] = json!(self.state());
        }
        v
    }
}

serialize_via_to_json!(HashReport);

/// Digests a directory.
pub fn hash(ctx: &Context, opts: &HashOptions) -> Result<HashReport> {
    let path = ctx.abs(&opts.dir);
    let (digest, scan) = crate::engine::verify::hash_dir(&path)?;
    Ok(HashReport {
        path,
        digest,
        entries: scan.entries,
        skipped: scan.skipped.len(),
        form: opts.form,
    })
}
