//! Transactions ([`Txn`]) and read-only snapshots ([`Snapshot`]).
//!
//! Owns the per-transaction bookkeeping: snapshot version, read set (keys), scan set
//! (prefixes) and the buffered write set. Invariants:
//! - a `Txn`/`Snapshot` registers its version with the store on creation and unregisters
//!   on drop, so GC keeps that version readable for as long as it lives;
//! - reads see exactly the state at the snapshot version plus the transaction's own
//!   buffered writes (read-your-writes); nothing is visible to others before `commit`;
//! - every key read through the snapshot is recorded (get, version, cas), every scanned
//!   prefix is recorded, and every write is buffered: `commit` validates all three against
//!   commits made after the snapshot (see the crate doc for the exact guarantee);
//! - a transaction with no writes commits trivially at its snapshot version.
//!
//! A `Txn`/`Snapshot` borrows the store's [`Shared`] state (module `shared`), not the
//! [`StateStore`](crate::StateStore) handle, so this module sits below `store`, which
//! creates them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{show_key, Error, Result};
use crate::mvcc::{prefix_range, Intent, KeyList, Val};
use crate::shared::{scan_at, Shared};
use crate::types::{ScanEntry, Versioned};

/// An optimistic, serializable transaction. Create with
/// [`StateStore::begin`](crate::StateStore::begin); dropping without `commit` discards it.
pub struct Txn<'s> {
    shared: &'s Shared,
    snapshot: u64,
    reads: KeyList,
    scans: Vec<Vec<u8>>,
    writes: BTreeMap<Vec<u8>, Val>,
}

impl std::fmt::Debug for Txn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("snapshot", &self.snapshot)
            .field("reads", &self.reads.len())
            .field("scans", &self.scans.len())
            .field("writes", &self.writes.len())
            .finish()
    }
}

impl<'s> Txn<'s> {
    pub(crate) fn new(shared: &'s Shared, snapshot: u64) -> Self {
        Txn {
            shared,
            snapshot,
            reads: KeyList::default(),
            scans: Vec::new(),
            writes: BTreeMap::new(),
        }
    }

    /// The version this transaction reads at.
    pub fn snapshot_version(&self) -> u64 {
        self.snapshot
    }

    /// Value of `key`: this transaction's own write if any, else the snapshot's value.
    /// Records the key in the read set.
    pub fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        if let Some(v) = self.writes.get(key) {
            return v.as_deref().map(<[u8]>::to_vec);
        }
        self.reads.push(key);
        let mem = self.shared.mem.read();
        mem.chain(key)
            .and_then(|c| c.visible(self.snapshot))
            .map(|(_, v)| v.to_vec())
    }

    /// Committed version of `key` at the snapshot (0 = absent), ignoring this
    /// transaction's own writes. Records the key in the read set.
    pub fn version(&mut self, key: &[u8]) -> u64 {
        self.reads.push(key);
        let mem = self.shared.mem.read();
        mem.chain(key)
            .and_then(|c| c.visible(self.snapshot))
            .map_or(0, |(v, _)| v)
    }

    /// Buffer a write of `value` to `key`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.writes.insert(key.to_vec(), Some(Arc::from(value)));
    }

    /// Buffer a delete of `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.writes.insert(key.to_vec(), None);
    }

    /// Compare-and-swap: buffer a write of `value` iff the key's committed version at the
    /// snapshot is `expected_version` (0 = absent: insert-if-absent). On mismatch returns
    /// [`Error::CasMismatch`] and buffers nothing. The key joins the read set, so the
    /// commit also fails if someone changes it after the snapshot. Not allowed on a key
    /// this transaction already wrote.
    pub fn cas(&mut self, key: &[u8], expected_version: u64, value: &[u8]) -> Result<()> {
        if self.writes.contains_key(key) {
            return Err(Error::InvalidArgument(format!(
                "cas on key {} which this transaction already wrote; its version is not known until commit",
                show_key(key)
            )));
        }
        let actual = self.version(key);
        if actual != expected_version {
            return Err(Error::CasMismatch {
                key: show_key(key),
                expected: expected_version,
                actual,
            });
        }
        self.put(key, value);
        Ok(())
    }

    /// Live `(key, value)` pairs whose key starts with `prefix`, in key order, including
    /// this transaction's own writes. Records the prefix: any commit after the snapshot that
    /// writes a key under it (insert, change or delete) makes this transaction conflict.
    pub fn scan(&mut self, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.scans.push(prefix.to_vec());
        let base = {
            let mem = self.shared.mem.read();
            scan_at(&mem, prefix, self.snapshot)
        };
        if !prefix_range(&self.writes, prefix).any(|_| true) {
            return base.into_iter().map(|e| (e.key, e.value)).collect();
        }
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> =
            base.into_iter().map(|e| (e.key, e.value)).collect();
        for (k, v) in prefix_range(&self.writes, prefix) {
            match v {
                Some(v) => {
                    merged.insert(k.clone(), v.to_vec());
                }
                None => {
                    merged.remove(k);
                }
            }
        }
        merged.into_iter().collect()
    }

    /// Number of buffered writes.
    pub fn write_count(&self) -> usize {
        self.writes.len()
    }

    /// Commit. Returns the new commit version, or the snapshot version if the transaction
    /// wrote nothing. Fails with [`Error::Conflict`] if, after the snapshot, another commit
    /// wrote a key this transaction read or wrote, or a key under a prefix it scanned; then
    /// nothing was written.
    pub fn commit(mut self) -> Result<u64> {
        if self.writes.is_empty() {
            return Ok(self.snapshot);
        }
        let intent = self.take_intent();
        self.shared
            .submit(vec![intent])
            .pop()
            .expect("one result per intent")
        // `self` (and its snapshot registration) is dropped only now.
    }

    /// Discard the transaction (same as dropping it).
    pub fn rollback(self) {}

    fn take_intent(&mut self) -> Intent {
        Intent {
            snapshot: self.snapshot,
            reads: std::mem::take(&mut self.reads),
            scans: std::mem::take(&mut self.scans),
            writes: std::mem::take(&mut self.writes),
        }
    }

    pub(crate) fn into_intent(mut self) -> Intent {
        self.take_intent()
    }

    /// Buffer the writes that make the state equal to `target`'s, and depend on the whole
    /// key space (so any concurrent commit conflicts).
    pub(crate) fn restore_from(&mut self, target: &Snapshot<'_>) {
        self.scans.push(Vec::new());
        let mem = self.shared.mem.read();
        for (k, c) in mem.iter() {
            let cur = c.visible(self.snapshot).map(|(_, v)| v);
            let tgt = c.visible(target.version()).map(|(_, v)| v);
            match (cur, tgt) {
                (None, None) => {}
                (Some(_), None) => {
                    self.writes.insert(k.to_vec(), None);
                }
                (None, Some(b)) => {
                    self.writes.insert(k.to_vec(), Some(b.clone()));
                }
                (Some(a), Some(b)) => {
                    if a != b {
                        self.writes.insert(k.to_vec(), Some(b.clone()));
                    }
                }
            }
        }
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        self.shared.unregister(self.snapshot);
    }
}

/// A read-only view of one retained version. Keeps that version from being collected while
/// it lives. Reads never conflict and never touch the disk.
pub struct Snapshot<'s> {
    shared: &'s Shared,
    version: u64,
}

impl std::fmt::Debug for Snapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("version", &self.version)
            .finish()
    }
}

impl<'s> Snapshot<'s> {
    pub(crate) fn new(shared: &'s Shared, version: u64) -> Self {
        Snapshot { shared, version }
    }

    /// The version this snapshot shows.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Value of `key` at this version.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mem = self.shared.mem.read();
        mem.chain(key)
            .and_then(|c| c.visible(self.version))
            .map(|(_, v)| v.to_vec())
    }

    /// Value of `key` at this version with the version that wrote it.
    pub fn get_versioned(&self, key: &[u8]) -> Option<Versioned> {
        let mem = self.shared.mem.read();
        mem.chain(key)
            .and_then(|c| c.visible(self.version))
            .map(|(v, val)| Versioned {
                version: v,
                value: val.to_vec(),
            })
    }

    /// Live entries under `prefix` at this version, in key order.
    pub fn scan(&self, prefix: &[u8]) -> Vec<ScanEntry> {
        let mem = self.shared.mem.read();
        scan_at(&mem, prefix, self.version)
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        self.shared.unregister(self.version);
    }
}
