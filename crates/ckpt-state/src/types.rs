//! Plain data types returned by the public API.
//!
//! Owns [`Versioned`], [`ScanEntry`], [`StateChange`], [`ChangeKind`] and [`GcStats`]. They
//! are owned copies (no borrow of the store), so callers may keep them across commits.

/// A live value with the commit version that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Versioned {
    /// Commit version that last wrote the key (≥ 1).
    pub version: u64,
    /// The value bytes.
    pub value: Vec<u8>,
}

/// One entry returned by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanEntry {
    /// Key.
    pub key: Vec<u8>,
    /// Commit version that last wrote it.
    pub version: u64,
    /// Value.
    pub value: Vec<u8>,
}

/// How a key differs between two versions.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum ChangeKind {
    /// Absent at `from`, present at `to`.
    Added,
    /// Present at both with different bytes.
    Changed,
    /// Present at `from`, absent at `to`.
    Removed,
}

/// One key's difference between two versions (see `StateStore::diff`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StateChange {
    /// Key.
    pub key: Vec<u8>,
    /// Kind of change.
    pub kind: ChangeKind,
    /// Value at `from` (None if absent).
    pub old: Option<Versioned>,
    /// Value at `to` (None if absent).
    pub new: Option<Versioned>,
}

/// What a garbage collection removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Versions that became unreadable.
    pub versions_collected: u64,
    /// Stored (key, version) entries deleted.
    pub entries_removed: u64,
    /// Keys that no longer have any entry.
    pub keys_removed: u64,
}

/// Counters of the commit pipeline (see `StateStore::commit_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Commits written to the database file.
    pub commits_written: u64,
    /// fsync'd redb write transactions that carried them (groups or batched flushes).
    pub fsyncs: u64,
}
