//! `ckpt-state`: a transactional, versioned key-value store for agent state.
//!
//! This file owns the public surface (re-exports) and the crate documentation; the
//! invariants live in the modules: [`StateStore`] (`store`: open/create, the public API),
//! [`Txn`]/[`Snapshot`] (`txn`: read/scan/write sets), `shared` (the state a store shares
//! with its transactions: snapshot registry, commit pipeline, durability, GC), `group`
//! (group commit: queue, leadership, gathering), `mvcc` (in-memory version chains and
//! validation), `storage` (redb layout), `lock` (inter-process lock). The modules' imports
//! form layers without a cycle: `store` → `txn` → `shared` → `group`, with `storage`,
//! `mvcc`, `lock`, `options`, `types` and `error` below them.
//!
//! ```
//! use ckpt_state::{Durability, Options, RetryPolicy, StateStore};
//! let dir = tempfile::tempdir().unwrap();
//! let store = StateStore::open(&dir.path().join("state.redb"), Options::default()).unwrap();
//! let v1 = store.put(b"plan", b"step 1").unwrap();
//! let mut t = store.begin();
//! assert_eq!(t.get(b"plan").as_deref(), Some(&b"step 1"[..]));
//! t.put(b"plan", b"step 2");
//! let v2 = t.commit().unwrap();
//! assert!(v2 > v1);
//! assert_eq!(store.snapshot(v1).unwrap().get(b"plan").as_deref(), Some(&b"step 1"[..]));
//! let v3 = store.restore_to(v1).unwrap(); // a new commit whose state equals v1's
//! assert_eq!(store.get(b"plan").as_deref(), Some(&b"step 1"[..]));
//! assert_eq!(store.diff(v1, v3).unwrap().len(), 0);
//! let (n, _v) = store
//!     .transaction_with_retry(RetryPolicy::default(), |t| Ok(t.scan(b"pl").len()))
//!     .unwrap();
//! assert_eq!(n, 1);
//! # let _ = Durability::Strict;
//! ```
//!
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod error;
mod group;
mod lock;
mod mvcc;
mod options;
mod shared;
mod storage;
mod store;
mod txn;
mod types;

pub use error::{ConflictKind, Error, Result};
pub use options::{Durability, Options, RetryPolicy};
pub use store::StateStore;
pub use txn::{Snapshot, Txn};
pub use types::{ChangeKind, CommitStats, GcStats, ScanEntry, StateChange, Versioned};

/// Decodes one stored value record of `state.redb` (a tombstone or a value)
/// exactly as a load does: `Ok(None)` for a deletion, `Ok(Some(bytes))` for
/// a value, `Err(Corrupt)` for anything else. Public so fuzz targets and
/// property tests reach the decoder.
pub fn decode_value_record(raw: &[u8]) -> Result<Option<Vec<u8>>> {
    storage::decode(raw, b"", 0).map(|v| v.map(|a| a.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<StateStore>();
        assert_send_sync::<Error>();
    }
}
