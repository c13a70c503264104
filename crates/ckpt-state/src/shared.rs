//! [`Shared`]: the state of one open store that its handle ([`crate::StateStore`], module
//! `store`) and its transactions and snapshots (module `txn`) share, and the commit
//! pipeline that changes it: snapshot registry, validation + write + apply of a commit
//! group, durability (strict writes, batched/none flushing) and garbage collection.
//!
//! Sits below both `store` and `txn` (it names neither), so a `Txn` borrows `Shared`
//! directly. The queue that forms the groups is module `group`. Invariants:
//! - **one leader**: `gc` and every commit group run as the leader of the group queue
//!   (module `group`), so only one thread at a time assigns versions, mutates the
//!   in-memory chains and writes rows;
//! - **visibility after durability**: in strict mode a commit is applied to memory (and
//!   `latest` published) only after its redb transaction is fsync'd; a failed write applies
//!   nothing;
//! - **snapshot registry**: every live `Txn`/`Snapshot` registers its version in `active`;
//!   GC keeps every registered version readable. Registration of old versions and GC
//!   serialise on the `active` lock, so a snapshot can never point at collected data;
//! - **batched/none**: acknowledged-but-unwritten commits sit in `unflushed` in version
//!   order; they are only taken out (and written) under the `flush` lock, so the file
//!   always receives a prefix of the history;
//! - **one process**: the `ProcessLock` is held for the handle's lifetime and dropped after
//!   the redb `Database`, so the memory cache is never stale w.r.t. the file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use redb::Database;

use crate::error::{Error, Result};
use crate::group::GroupQueue;
use crate::lock::ProcessLock;
use crate::mvcc::{CommitRecord, Intent, MemState};
use crate::options::Durability;
use crate::storage;
use crate::types::{CommitStats, GcStats, ScanEntry};

/// In `Durability::None`, write to redb once this many commits are pending.
const NONE_FLUSH_THRESHOLD: usize = 4096;

/// A batch that writes this key panics in `process_batch` (test builds only).
#[cfg(test)]
pub(crate) const PANIC_KEY: &[u8] = b"\xfftest-panic";

#[derive(Default)]
struct Unflushed {
    records: Vec<CommitRecord>,
    /// When the oldest pending record was acknowledged.
    since: Option<Instant>,
    /// Error of the last failed background flush (commits fail until a flush succeeds).
    error: Option<String>,
}

pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    pub(crate) durability: Durability,
    pub(crate) mem: RwLock<MemState>,
    pub(crate) latest: AtomicU64,
    /// version → number of live snapshots/transactions at that version.
    active: Mutex<BTreeMap<u64, usize>>,
    pub(crate) group: GroupQueue,
    unflushed: Mutex<Unflushed>,
    flush_cv: Condvar,
    flush_lock: Mutex<()>,
    shutdown: AtomicBool,
    /// Commits and redb write transactions (groups/flushes) written so far.
    stat_commits: AtomicU64,
    stat_writes: AtomicU64,
    db: Database,
    // Dropped after `db`: the file is closed before another process may open it.
    _lock: ProcessLock,
}

impl Shared {
    /// The state of a store just opened: `db` (with its contents `mem` up to `latest`)
    /// under `lock`.
    pub(crate) fn new(
        path: PathBuf,
        durability: Durability,
        mem: MemState,
        latest: u64,
        db: Database,
        lock: ProcessLock,
    ) -> Shared {
        Shared {
            path,
            durability,
            mem: RwLock::new(mem),
            latest: AtomicU64::new(latest),
            active: Mutex::new(BTreeMap::new()),
            group: GroupQueue::new(durability == Durability::Strict),
            unflushed: Mutex::new(Unflushed::default()),
            flush_cv: Condvar::new(),
            flush_lock: Mutex::new(()),
            shutdown: AtomicBool::new(false),
            stat_commits: AtomicU64::new(0),
            stat_writes: AtomicU64::new(0),
            db,
            _lock: lock,
        }
    }

    /// Register a snapshot at the latest version.
    pub(crate) fn register_latest(&self) -> u64 {
        let mut active = self.active.lock();
        let v = self.latest.load(Ordering::Acquire);
        *active.entry(v).or_insert(0) += 1;
        v
    }

    /// Register a snapshot at `version` if it is readable.
    pub(crate) fn register_at(&self, version: u64) -> Result<()> {
        let mut active = self.active.lock();
        let latest = self.latest.load(Ordering::Acquire);
        if version > latest {
            return Err(Error::VersionUnavailable {
                version,
                latest,
                reason: "not committed yet",
            });
        }
        if self.mem.read().is_collected(version) {
            return Err(Error::VersionUnavailable {
                version,
                latest,
                reason: "garbage-collected (no checkpoint pins it)",
            });
        }
        *active.entry(version).or_insert(0) += 1;
        Ok(())
    }

    pub(crate) fn unregister(&self, version: u64) {
        let mut active = self.active.lock();
        if let Some(n) = active.get_mut(&version) {
            *n -= 1;
            if *n == 0 {
                active.remove(&version);
            }
        }
    }

    /// Submit intents as one group (in order) and wait for their results.
    pub(crate) fn submit(&self, intents: Vec<Intent>) -> Vec<Result<u64>> {
        self.group
            .submit(intents, |batch| self.process_batch(batch))
    }

    /// Validate a group in order, persist the accepted commits, apply them, return results.
    fn process_batch(&self, batch: Vec<(u64, Intent)>) -> Vec<(u64, Result<u64>)> {
        #[cfg(test)]
        if batch.iter().any(|(_, i)| i.writes.contains_key(PANIC_KEY)) {
            panic!("test: a batch that panics");
        }
        let mut results = Vec::with_capacity(batch.len());
        let mut accepted: Vec<CommitRecord> = Vec::new();
        let flush_error = self.unflushed.lock().error.clone();
        if let Some(e) = flush_error {
            return batch
                .into_iter()
                .map(|(t, _)| {
                    (
                        t,
                        Err(Error::CommitFailed(format!(
                            "an earlier background flush failed and is not yet retried successfully: {e}"
                        ))),
                    )
                })
                .collect();
        }
        {
            let mem = self.mem.read();
            let mut next = self.latest.load(Ordering::Acquire) + 1;
            let mut overlay: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
            for (ticket, intent) in batch {
                match mem.validate(&intent, &overlay) {
                    Err(e) => results.push((ticket, Err(e))),
                    Ok(()) => {
                        let version = next;
                        next += 1;
                        let writes: Vec<_> = intent.writes.into_iter().collect();
                        for (k, _) in &writes {
                            overlay.insert(k.clone(), version);
                        }
                        accepted.push(CommitRecord { version, writes });
                        results.push((ticket, Ok(version)));
                    }
                }
            }
        }
        if accepted.is_empty() {
            return results;
        }
        let fail_all = |results: &mut Vec<(u64, Result<u64>)>, e: Error| {
            let msg = e.to_string();
            for (_, r) in results.iter_mut() {
                if r.is_ok() {
                    *r = Err(Error::CommitFailed(msg.clone()));
                }
            }
        };
        match self.durability {
            Durability::Strict => {
                let _f = self.flush_lock.lock();
                if let Err(e) = storage::write_commits(&self.db, &accepted, true) {
                    fail_all(&mut results, e);
                    return results;
                }
                self.count_write(accepted.len());
                self.apply(&accepted);
            }
            Durability::Batched { .. } | Durability::None => {
                self.apply(&accepted);
                let n = {
                    let mut u = self.unflushed.lock();
                    if u.since.is_none() {
                        u.since = Some(Instant::now());
                        self.flush_cv.notify_all();
                    }
                    u.records.extend(accepted);
                    u.records.len()
                };
                if self.durability == Durability::None && n >= NONE_FLUSH_THRESHOLD {
                    // Acknowledged already; a failure is recorded and fails later commits.
                    let _ = self.flush_pending();
                }
            }
        }
        results
    }

    fn count_write(&self, commits: usize) {
        self.stat_commits
            .fetch_add(commits as u64, Ordering::Relaxed);
        self.stat_writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Commits written to disk so far and the redb write transactions that carried them.
    pub(crate) fn commit_stats(&self) -> CommitStats {
        CommitStats {
            commits_written: self.stat_commits.load(Ordering::Relaxed),
            fsyncs: self.stat_writes.load(Ordering::Relaxed),
        }
    }

    fn apply(&self, records: &[CommitRecord]) {
        let mut mem = self.mem.write();
        for rec in records {
            mem.apply(rec);
        }
        if let Some(last) = records.last() {
            self.latest.store(last.version, Ordering::Release);
        }
    }

    /// Write every acknowledged-but-unwritten commit to redb with an fsync.
    pub(crate) fn flush_pending(&self) -> Result<()> {
        let _f = self.flush_lock.lock();
        let records = {
            let mut u = self.unflushed.lock();
            u.since = None;
            std::mem::take(&mut u.records)
        };
        if records.is_empty() {
            return Ok(());
        }
        match storage::write_commits(&self.db, &records, true) {
            Ok(()) => {
                self.count_write(records.len());
                self.unflushed.lock().error = None;
                Ok(())
            }
            Err(e) => {
                let mut u = self.unflushed.lock();
                let newer = std::mem::replace(&mut u.records, records);
                u.records.extend(newer);
                u.since = Some(Instant::now());
                u.error = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Tell the flusher thread ([`flusher_loop`]) to return.
    pub(crate) fn shut_down_flusher(&self) {
        let _u = self.unflushed.lock();
        self.shutdown.store(true, Ordering::Release);
        self.flush_cv.notify_all();
    }

    /// The body of [`crate::StateStore::gc`]: as leader, flush, then collect every
    /// version not in `keep`, not the latest and not registered.
    pub(crate) fn gc(&self, keep: &BTreeSet<u64>) -> Result<GcStats> {
        let _leader = self.group.exclusive();
        self.flush_pending()?;
        let active = self.active.lock();
        let latest = self.latest.load(Ordering::Acquire);
        let plan = {
            let mem = self.mem.read();
            let mut retained: BTreeSet<u64> = keep
                .iter()
                .copied()
                .filter(|&v| v <= latest && !mem.is_collected(v))
                .collect();
            retained.extend(active.keys().copied());
            retained.insert(latest);
            let min_active = active.keys().next().copied().unwrap_or(latest).min(latest);
            mem.plan_gc(&retained, latest, min_active)
        };
        {
            let _f = self.flush_lock.lock();
            storage::write_gc(&self.db, &plan)?;
        }
        self.mem.write().apply_gc(&plan);
        drop(active);
        Ok(GcStats {
            versions_collected: plan.versions_collected,
            entries_removed: plan.removals.len() as u64,
            keys_removed: plan.keys_removed as u64,
        })
    }
}

/// The batched-mode flusher thread: writes pending commits `window` after the oldest one
/// was acknowledged, until [`Shared::shut_down_flusher`].
pub(crate) fn flusher_loop(shared: Arc<Shared>, window: Duration) {
    loop {
        {
            let mut u = shared.unflushed.lock();
            while u.since.is_none() && !shared.shutdown.load(Ordering::Acquire) {
                shared.flush_cv.wait(&mut u);
            }
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            let deadline = u.since.expect("dirty") + window;
            while Instant::now() < deadline && !shared.shutdown.load(Ordering::Acquire) {
                shared.flush_cv.wait_until(&mut u, deadline);
            }
        }
        // Errors are recorded in `unflushed.error` and surface on the next commit/flush.
        let _ = shared.flush_pending();
    }
}

/// Live entries at `version` under `prefix`.
pub(crate) fn scan_at(mem: &MemState, prefix: &[u8], version: u64) -> Vec<ScanEntry> {
    mem.prefix(prefix)
        .filter_map(|(k, c)| {
            c.visible(version).map(|(v, val)| ScanEntry {
                key: k.to_vec(),
                version: v,
                value: val.to_vec(),
            })
        })
        .collect()
}
