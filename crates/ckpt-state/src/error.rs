//! Error type of the state store.
//!
//! Owns [`Error`], the single error enum every public function returns. Invariants:
//! - a transaction conflict is always [`Error::Conflict`] (or [`Error::RetriesExhausted`]
//!   wrapping one), so callers can tell "retry me" from "something is broken" with
//!   [`Error::is_conflict`];
//! - every message names what failed and what the user can do about it;
//! - engine (redb) errors are wrapped, never panicked on.

use std::path::PathBuf;
use std::time::Duration;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a transaction could not commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictKind {
    /// A key the transaction read (get/version/cas) was written by a later commit.
    Read,
    /// A key the transaction wrote was also written by a later commit.
    Write,
    /// A key inside a prefix the transaction scanned was written (inserted, changed or
    /// deleted) by a later commit: a phantom.
    Scan,
}

impl std::fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConflictKind::Read => "read",
            ConflictKind::Write => "written",
            ConflictKind::Scan => "scanned (prefix)",
        })
    }
}

/// Every error of the state store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// First committer wins: another transaction committed a change to something this
    /// transaction depended on after this transaction's snapshot. Nothing was written;
    /// re-run the transaction (see `StateStore::transaction_with_retry`).
    #[error(
        "transaction conflict: key {key} that this transaction {kind} was changed by commit {by_version} \
         after its snapshot {snapshot}; nothing was written, retry the transaction"
    )]
    Conflict {
        /// Key (lossy UTF-8, escaped) that caused the conflict.
        key: String,
        /// How the transaction used that key.
        kind: ConflictKind,
        /// Snapshot version of the failed transaction.
        snapshot: u64,
        /// Version of the commit that changed the key (may be a commit of the same group).
        by_version: u64,
    },

    /// `transaction_with_retry` gave up after `attempts` conflicts.
    #[error("transaction still conflicting after {attempts} attempts (last: {last}); raise RetryPolicy::max_attempts or reduce contention")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// The last conflict.
        last: Box<Error>,
    },

    /// `cas` found a different version than expected. Nothing was buffered.
    #[error("compare-and-swap failed on key {key}: expected version {expected}, found version {actual} (0 = absent)")]
    CasMismatch {
        /// Key (lossy UTF-8, escaped).
        key: String,
        /// Version the caller expected (0 = absent).
        expected: u64,
        /// Version the transaction's snapshot holds (0 = absent).
        actual: u64,
    },

    /// The requested version was garbage-collected or never existed.
    #[error("state version {version} is not available: {reason} (latest is {latest})")]
    VersionUnavailable {
        /// Requested version.
        version: u64,
        /// Latest committed version.
        latest: u64,
        /// "garbage-collected" or "not committed yet".
        reason: &'static str,
    },

    /// Another process holds the store and did not release it within the lock timeout.
    #[error(
        "state store {path} is in use by another process (waited {waited:?} for its lock file); \
         wait for the other ckpt process to finish, or raise Options::lock_timeout"
    )]
    Locked {
        /// Path of the database file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },

    /// The caller passed something invalid (message says what).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The file is not a state store of a format this build understands.
    #[error("state store {path}: {reason}")]
    Format {
        /// Database path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// A stored record failed to decode (file damaged or written by a bug).
    #[error("state store is corrupt: {0}; restore the workspace's .ckpt directory from a backup")]
    Corrupt(String),

    /// File-system error around the database (lock file, parent directory).
    #[error("{op} {path}: {source}")]
    Io {
        /// What we were doing.
        op: &'static str,
        /// Path involved.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The commit group this transaction belonged to could not be written (or an earlier
    /// batched flush failed). Nothing of this transaction was applied; fix the cause (disk
    /// space, permissions) and retry.
    #[error("commit not applied, the state store could not write it: {0}")]
    CommitFailed(String),

    /// Error from the storage engine (redb): disk full, I/O error, corruption detected.
    /// When returned by a commit, that commit (and every commit of its group) was not
    /// applied, neither on disk nor in memory.
    #[error("storage engine error: {0}")]
    Storage(#[from] redb::Error),
}

impl Error {
    /// True for [`Error::Conflict`] and [`Error::RetriesExhausted`]: the transaction lost a
    /// race and may be retried; nothing was written.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            Error::Conflict { .. } | Error::RetriesExhausted { .. }
        )
    }
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                Error::Storage(redb::Error::from(e))
            }
        }
    )*};
}
from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

/// Render a key for messages: UTF-8 shown as is (quoted), other bytes escaped.
pub(crate) fn show_key(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len() + 2);
    s.push('"');
    for chunk in key.utf8_chunks() {
        for c in chunk.valid().chars() {
            s.extend(c.escape_debug());
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('"');
    s
}
