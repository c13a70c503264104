//! # Checkpoints beyond one machine: push, pull and clone through object storage
//!
//! A *remote* is a bucket and prefix (`s3://bucket/prefix`, `gs://…`,
//! `az://…`, or `file:///path` for a shared filesystem) that any number of
//! workspaces push to. Everything on it is content-addressed, so what two
//! workspaces share (a `node_modules`, an unchanged file across
//! checkpoints) is stored and sent once. The layout and the rules that
//! keep it correct are in [`layout`] and in `docs/FORMAT.md` ("Remotes").
//!
//! | operation | function |
//! |---|---|
//! | `ckpt remote add/list/remove` | [`remotes::add`], [`remotes::list`], [`remotes::remove`] |
//! | `ckpt push` | [`push::push`] (refs: [`refs`]) |
//! | `ckpt pull` | [`pull::pull`] |
//! | `ckpt clone` | [`pull::clone`] |
//! | `ckpt log --remote` | [`log::log`] |
//! | `ckpt gc --remote` | [`gc::gc`] |
//!
//! Like [`ckpt_lib::ops`], each takes the [`ckpt_lib::ops::Context`] and a
//! typed options struct and returns a typed report whose `Serialize` is its
//! `--json` form; the CLI only maps arguments to options and reports to
//! text. This crate reads no environment: credentials, endpoint and region
//! arrive as object_store configuration keys in [`Settings`], built by the
//! CLI (`crates/ckpt-cli/src/context.rs`).
//!
//! **Above `ckpt-lib`, through its front door.** This crate holds the wire
//! formats (packs, refs, records, trees on a remote, encryption) and the
//! requests; whatever touches a store (opening it under its lock, reading
//! checkpoints, trees, objects and state, importing them durably, creating
//! a clone's store and writing its files) is
//! [`ckpt_lib::ops::exchange`]. It names nothing else of `ckpt_lib` but the
//! root re-exports and `ckpt_lib::trace` (timing spans);
//! `crates/ckpt-lib/tests/layers.rs` fails if it does. Its failures are
//! its own [`Error`] (a failed request, a key, a tampered object), which
//! wraps the library's unchanged; the CLI maps both to exit codes.
//!
//! Requests run on a tokio runtime owned by the operation, at most
//! [`Settings::concurrency`] at a time; every request goes through
//! [`client::Client`], which retries transient failures with backoff, names
//! the request and object in permanent ones, and counts requests and bytes
//! for the summary.

pub mod client;
pub mod crypt;
pub mod error;
pub mod gc;
pub mod known;
pub mod layout;
pub mod log;
pub mod pack;
pub mod pull;
pub mod push;
pub mod refs;
pub mod remotes;
pub mod report;
pub mod schema;
pub mod trees;
pub mod url;

use std::time::Duration;

pub use error::{Error, Result};

/// How remote operations reach object storage.
#[derive(Clone, Debug)]
pub struct Settings {
    /// object_store configuration keys and values (`aws_access_key_id`,
    /// `aws_endpoint`, `aws_region`, `google_service_account`,
    /// `azure_storage_account_name`, …), gathered from the environment and
    /// the AWS config files by the CLI. Keys a backend does not know are
    /// ignored.
    pub options: Vec<(String, String)>,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Attempts per request (1 = no retry) for transient failures (5xx,
    /// reset, timeout).
    pub attempts: u32,
    /// First backoff delay; doubled after every failed attempt.
    pub backoff: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Raw bytes per pack a push aims for (a larger blob is a pack of its own).
    pub pack_target: u64,
    /// Raw bytes a pull fetches between two commits of its pending objects
    /// (what a killed pull keeps).
    pub commit_bytes: u64,
    /// The secret of an encrypted remote given for this command
    /// (`CKPT_REMOTE_PASSPHRASE`, `CKPT_REMOTE_KEY_FILE`); before the key
    /// file configured with the remote.
    pub secret: Option<crypt::Secret>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            options: Vec::new(),
            concurrency: 8,
            attempts: 6,
            backoff: Duration::from_millis(100),
            timeout: Duration::from_secs(120),
            pack_target: 16 << 20,
            commit_bytes: 64 << 20,
            secret: None,
        }
    }
}

pub(crate) fn corrupt(msg: String) -> Error {
    Error::corrupt(msg)
}

pub(crate) fn usage(msg: String) -> Error {
    Error::usage(msg)
}

/// A tokio runtime for one operation.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the async runtime", "/", e))
}
