//! [`StateStore`]: opening, the commit pipeline (validation + group commit), durability,
//! snapshots, history, diff, restore and garbage collection.
//!
//! Owns the shared state of one open store. Invariants:
//! - **one leader**: at most one thread at a time (the group-commit leader, or `gc`) is
//!   "leader" (`Queue::leader`); only the leader assigns versions, mutates the in-memory
//!   chains and writes commit rows, so versions are assigned, validated, written and
//!   applied in the same strictly increasing order;
//! - **visibility after durability**: in strict mode a commit is applied to memory (and
//!   `latest` published) only after its redb transaction is fsync'd; a failed write applies
//!   nothing;
//! - **snapshot registry**: every live `Txn`/`Snapshot` registers its version in `active`;
//!   GC keeps every registered version readable. Registration of old versions and GC
//!   serialise on the `active` lock, so a snapshot can never point at collected data;
//! - **batched/none**: acknowledged-but-unwritten commits sit in `unflushed` in version
//!   order; they are only taken out (and written) under the `flush` lock, so the file
//!   always receives a prefix of the history;
//! - **panic safety**: if a leader panics while running a batch (a bug), every other
//!   caller of that batch gets `CommitFailed` and leadership is released (`BatchGuard`),
//!   so no committer waits forever;
//! - **one process**: the `ProcessLock` is held for the handle's lifetime and dropped after
//!   the redb `Database`, so the memory cache is never stale w.r.t. the file.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use redb::Database;

use crate::error::{Error, Result};
use crate::lock::ProcessLock;
use crate::mvcc::{CommitRecord, Intent, MemState};
use crate::options::{splitmix, Durability, Options, RetryPolicy};
use crate::storage;
use crate::txn::{Snapshot, Txn};
use crate::types::{ChangeKind, CommitStats, GcStats, ScanEntry, StateChange, Versioned};

/// In `Durability::None`, write to redb once this many commits are pending.
const NONE_FLUSH_THRESHOLD: usize = 4096;

#[derive(Default)]
struct Queue {
    pending: Vec<(u64, Intent)>,
    results: HashMap<u64, Result<u64>, foldhash::fast::RandomState>,
    leader: bool,
    next_ticket: u64,
    /// Size of the last strict group and how long writing it took (for gathering).
    last_group: usize,
    last_write: Duration,
}

#[derive(Default)]
struct Unflushed {
    records: Vec<CommitRecord>,
    /// When the oldest pending record was acknowledged.
    since: Option<Instant>,
    /// Error of the last failed background flush (commits fail until a flush succeeds).
    error: Option<String>,
}

pub(crate) struct Shared {
    path: PathBuf,
    durability: Durability,
    pub(crate) mem: RwLock<MemState>,
    pub(crate) latest: AtomicU64,
    /// version → number of live snapshots/transactions at that version.
    active: Mutex<BTreeMap<u64, usize>>,
    queue: Mutex<Queue>,
    queue_cv: Condvar,
    /// Signalled when a commit is queued (a gathering leader waits on it).
    gather_cv: Condvar,
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

/// A transactional, versioned key-value store. `Send + Sync`; share it with `Arc`.
/// See the crate documentation for semantics.
pub struct StateStore {
    pub(crate) shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStore")
            .field("path", &self.shared.path)
            .field("durability", &self.shared.durability)
            .field("latest", &self.latest_version())
            .finish()
    }
}

/// Releases leadership on drop.
struct LeaderGuard<'a>(&'a Shared);

/// Armed while a leader runs a batch. If the leader unwinds instead of delivering (a panic
/// in `process_batch`, which is a bug), it gives every other caller of the batch a failed
/// result and releases leadership, so no caller waits forever.
struct BatchGuard<'a> {
    shared: &'a Shared,
    /// The batch's tickets (a batch is all of `pending`, whose tickets are consecutive).
    batch: std::ops::Range<u64>,
    /// The leader's own tickets: nobody will wait for them.
    own: std::ops::Range<u64>,
    armed: bool,
}

impl Drop for BatchGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut q = self.shared.queue.lock();
        for t in self.batch.clone().filter(|t| !self.own.contains(t)) {
            q.results.insert(
                t,
                Err(Error::CommitFailed(
                    "the thread committing this group panicked (a bug in ckpt-state); the \
                     commit may or may not be on disk: reopen the store to see"
                        .into(),
                )),
            );
        }
        q.leader = false;
        self.shared.queue_cv.notify_all();
    }
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        let mut q = self.0.queue.lock();
        q.leader = false;
        self.0.queue_cv.notify_all();
    }
}

impl Shared {
    /// Register a snapshot at the latest version.
    pub(crate) fn register_latest(&self) -> u64 {
        let mut active = self.active.lock();
        let v = self.latest.load(Ordering::Acquire);
        *active.entry(v).or_insert(0) += 1;
        v
    }

    /// Register a snapshot at `version` if it is readable.
    fn register_at(&self, version: u64) -> Result<()> {
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

    /// Become leader, waiting for the current one (used by gc).
    fn exclusive(&self) -> LeaderGuard<'_> {
        let mut q = self.queue.lock();
        while q.leader {
            self.queue_cv.wait(&mut q);
        }
        q.leader = true;
        LeaderGuard(self)
    }

    /// Submit intents as one group (in order) and wait for their results.
    pub(crate) fn submit(&self, intents: Vec<Intent>) -> Vec<Result<u64>> {
        let mut q = self.queue.lock();
        let first = q.next_ticket;
        let n = intents.len() as u64;
        q.next_ticket += n;
        for (i, intent) in intents.into_iter().enumerate() {
            q.pending.push((first + i as u64, intent));
        }
        self.gather_cv.notify_one();
        let mut out: Vec<Option<Result<u64>>> = (0..n).map(|_| None).collect();
        let mut missing = n;
        loop {
            for t in first..first + n {
                let slot = &mut out[(t - first) as usize];
                if slot.is_none() {
                    if let Some(r) = q.results.remove(&t) {
                        *slot = Some(r);
                        missing -= 1;
                    }
                }
            }
            if missing == 0 {
                return out.into_iter().map(|r| r.expect("result")).collect();
            }
            if !q.leader && !q.pending.is_empty() {
                q.leader = true;
                if self.durability == Durability::Strict {
                    self.gather(&mut q);
                }
                let batch = std::mem::take(&mut q.pending);
                let group = batch.len();
                let mut guard = BatchGuard {
                    shared: self,
                    batch: batch[0].0..batch[group - 1].0 + 1,
                    own: first..first + n,
                    armed: true,
                };
                debug_assert_eq!(guard.batch.end - guard.batch.start, group as u64);
                drop(q);
                let started = Instant::now();
                let results = self.process_batch(batch);
                let took = started.elapsed();
                guard.armed = false;
                q = self.queue.lock();
                q.last_group = group;
                q.last_write = took;
                q.results.extend(results);
                q.leader = false;
                self.queue_cv.notify_all();
                continue;
            }
            self.queue_cv.wait(&mut q);
        }
    }

    /// Strict-mode group forming: when the previous group had several members, the leader
    /// waits (at most the previous write's duration, capped at 4 ms) until as many
    /// commits are queued as were in that group. Without this, closed-loop writers fall
    /// into alternating groups of 1 and N-1 (the first to come back leads alone while the
    /// others are still waking up). The wait ends as soon as the group is full, and costs
    /// nothing for a lone writer (previous group of 1).
    fn gather(&self, q: &mut parking_lot::MutexGuard<'_, Queue>) {
        if q.last_group <= 1 || q.pending.len() >= q.last_group {
            return;
        }
        let max = q.last_write.min(Duration::from_millis(4));
        let deadline = Instant::now() + max;
        while q.pending.len() < q.last_group {
            if self.gather_cv.wait_until(q, deadline).timed_out() {
                break;
            }
        }
    }

    /// Validate a group in order, persist the accepted commits, apply them, return results.
    fn process_batch(&self, batch: Vec<(u64, Intent)>) -> Vec<(u64, Result<u64>)> {
        #[cfg(test)]
        if batch
            .iter()
            .any(|(_, i)| i.writes.contains_key(tests::PANIC_KEY))
        {
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
}

fn flusher_loop(shared: Arc<Shared>, window: Duration) {
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

impl StateStore {
    /// Open (creating if missing) the store at `path` (a redb file, e.g.
    /// `.ckpt/state.redb`). Waits up to `opts.lock_timeout` for another process holding it,
    /// then fails with [`Error::Locked`]. The parent directory is created if missing.
    /// Loads every retained version into memory (O(state size)).
    pub fn open(path: &Path, opts: Options) -> Result<StateStore> {
        if let Durability::Batched { window_ms: 0 } = opts.durability {
            return Err(Error::InvalidArgument(
                "Durability::Batched window_ms must be at least 1".into(),
            ));
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|source| Error::Io {
            op: "cannot create directory",
            path: parent.to_path_buf(),
            source,
        })?;
        let lock = ProcessLock::acquire(path, opts.lock_timeout)?;
        let db = if path.exists() {
            open_db(path, opts.cache_size)?
        } else {
            create_new(path, parent, opts.cache_size)?
        };
        let (mem, latest) = storage::load(&db)?;
        let shared = Arc::new(Shared {
            path: path.to_path_buf(),
            durability: opts.durability,
            mem: RwLock::new(mem),
            latest: AtomicU64::new(latest),
            active: Mutex::new(BTreeMap::new()),
            queue: Mutex::new(Queue::default()),
            queue_cv: Condvar::new(),
            gather_cv: Condvar::new(),
            unflushed: Mutex::new(Unflushed::default()),
            flush_cv: Condvar::new(),
            flush_lock: Mutex::new(()),
            shutdown: AtomicBool::new(false),
            stat_commits: AtomicU64::new(0),
            stat_writes: AtomicU64::new(0),
            db,
            _lock: lock,
        });
        let flusher = match opts.durability {
            Durability::Batched { window_ms } => {
                let s = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name("ckpt-state-flush".into())
                        .spawn(move || flusher_loop(s, Duration::from_millis(window_ms)))
                        .map_err(|source| Error::Io {
                            op: "cannot start flusher thread for",
                            path: path.to_path_buf(),
                            source,
                        })?,
                )
            }
            _ => None,
        };
        Ok(StateStore { shared, flusher })
    }

    /// Commits written to disk by this handle and the number of fsync'd redb write
    /// transactions that carried them: `commits / fsyncs` is the mean group size.
    pub fn commit_stats(&self) -> CommitStats {
        CommitStats {
            commits_written: self.shared.stat_commits.load(Ordering::Relaxed),
            fsyncs: self.shared.stat_writes.load(Ordering::Relaxed),
        }
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Durability mode this handle was opened with.
    pub fn durability(&self) -> Durability {
        self.shared.durability
    }

    /// Latest committed (and, in strict mode, durable) version; 0 for an empty store.
    pub fn latest_version(&self) -> u64 {
        self.shared.latest.load(Ordering::Acquire)
    }

    /// Start a transaction with a snapshot at the latest version. O(1).
    pub fn begin(&self) -> Txn<'_> {
        let v = self.shared.register_latest();
        Txn::new(self, v)
    }

    /// A read-only view of the state at `version` (0 = the empty initial state). Fails
    /// with [`Error::VersionUnavailable`] if it was garbage-collected or is in the future.
    /// The version stays readable (GC keeps it) while the snapshot lives.
    pub fn snapshot(&self, version: u64) -> Result<Snapshot<'_>> {
        self.shared.register_at(version)?;
        Ok(Snapshot::new(self, version))
    }

    /// Latest value of `key` (no transaction; never touches the disk).
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mem = self.shared.mem.read();
        mem.chain(key)
            .and_then(|c| c.latest().1.as_deref().map(<[u8]>::to_vec))
    }

    /// Latest value of `key` with the version that wrote it.
    pub fn get_versioned(&self, key: &[u8]) -> Option<Versioned> {
        let mem = self.shared.mem.read();
        mem.chain(key).and_then(|c| {
            let (v, val) = c.latest();
            val.as_deref().map(|b| Versioned {
                version: *v,
                value: b.to_vec(),
            })
        })
    }

    /// Latest live entries whose key starts with `prefix`, in key order.
    pub fn scan(&self, prefix: &[u8]) -> Vec<ScanEntry> {
        let latest = self.latest_version();
        let mem = self.shared.mem.read();
        scan_at(&mem, prefix, latest)
    }

    /// Single-operation transaction: set `key` to `value` (retries on conflict, so
    /// concurrent blind puts are ordered, last committer's value stays). Returns the
    /// commit version.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        self.transaction_with_retry(RetryPolicy::default(), |t| {
            t.put(key, value);
            Ok(())
        })
        .map(|(_, v)| v)
    }

    /// Single-operation transaction: delete `key`. Returns the commit version (a delete of
    /// an absent key still commits a tombstone).
    pub fn delete(&self, key: &[u8]) -> Result<u64> {
        self.transaction_with_retry(RetryPolicy::default(), |t| {
            t.delete(key);
            Ok(())
        })
        .map(|(_, v)| v)
    }

    /// Single-operation compare-and-swap: write `value` iff the key's version is
    /// `expected_version` (0 = absent). Returns the commit version or
    /// [`Error::CasMismatch`].
    pub fn cas(&self, key: &[u8], expected_version: u64, value: &[u8]) -> Result<u64> {
        self.transaction_with_retry(RetryPolicy::default(), |t| {
            t.cas(key, expected_version, value)
        })
        .map(|(_, v)| v)
    }

    /// Run `f` in a fresh transaction and commit; on conflict run it again (with backoff)
    /// up to `policy.max_attempts` times. Errors returned by `f` other than conflicts abort
    /// immediately. Returns `f`'s value and the commit version (for a read-only run, its
    /// snapshot version).
    pub fn transaction_with_retry<T>(
        &self,
        policy: RetryPolicy,
        mut f: impl FnMut(&mut Txn<'_>) -> Result<T>,
    ) -> Result<(T, u64)> {
        let attempts = policy.max_attempts.max(1);
        let seed = self as *const _ as u64 ^ std::process::id() as u64;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut txn = self.begin();
            let r = f(&mut txn).and_then(|t| txn.commit().map(|v| (t, v)));
            match r {
                Err(e) if e.is_conflict() => {
                    if attempt >= attempts {
                        return Err(Error::RetriesExhausted {
                            attempts,
                            last: Box::new(e),
                        });
                    }
                    let d = policy.backoff(attempt, splitmix(seed ^ attempt as u64 ^ nanos()));
                    if !d.is_zero() {
                        std::thread::sleep(d);
                    }
                }
                other => return other,
            }
        }
    }

    /// Make the latest state equal to the state at `version`, as a new commit (history is
    /// kept; the restored-from versions stay readable while retained). Returns the version
    /// whose state now equals `version`'s: the new commit, or the current latest if the
    /// state already was equal (no empty commit is made). Conflicts with concurrent
    /// commits are retried.
    pub fn restore_to(&self, version: u64) -> Result<u64> {
        let target = self.snapshot(version)?;
        self.transaction_with_retry(RetryPolicy::default(), |txn| {
            txn.restore_from(&target);
            Ok(())
        })
        .map(|(_, v)| v)
    }

    /// Keys whose live value differs between versions `from` and `to` (both readable), in
    /// key order. `Added`: absent at `from`; `Removed`: absent at `to`; `Changed`: values
    /// differ. A key rewritten with identical bytes is not reported.
    pub fn diff(&self, from: u64, to: u64) -> Result<Vec<StateChange>> {
        let a = self.snapshot(from)?;
        let b = self.snapshot(to)?;
        let mem = self.shared.mem.read();
        let mut out = Vec::new();
        for (key, chain) in mem.iter() {
            let old = chain.visible(a.version());
            let new = chain.visible(b.version());
            let kind = match (old, new) {
                (None, None) => continue,
                (None, Some(_)) => ChangeKind::Added,
                (Some(_), None) => ChangeKind::Removed,
                (Some((_, x)), Some((_, y))) => {
                    if x == y {
                        continue;
                    }
                    ChangeKind::Changed
                }
            };
            let conv = |e: Option<(u64, &Arc<[u8]>)>| {
                e.map(|(v, b)| Versioned {
                    version: v,
                    value: b.to_vec(),
                })
            };
            out.push(StateChange {
                key: key.to_vec(),
                kind,
                old: conv(old),
                new: conv(new),
            });
        }
        Ok(out)
    }

    /// Every retained entry of `key`, oldest first: `(version, Some(value))` for a write,
    /// `(version, None)` for a delete. Empty if the key has no retained entry.
    pub fn history(&self, key: &[u8]) -> Vec<(u64, Option<Vec<u8>>)> {
        let mem = self.shared.mem.read();
        mem.chain(key)
            .map(|c| {
                c.entries
                    .iter()
                    .map(|(v, val)| (*v, val.as_deref().map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Is `version` readable (≤ latest and not garbage-collected)?
    pub fn is_readable(&self, version: u64) -> bool {
        version <= self.latest_version() && !self.shared.mem.read().is_collected(version)
    }

    /// Garbage-collect every version that is not in `keep`, not the latest and not held by
    /// a live `Txn`/`Snapshot`. `keep` is owned by the caller (the checkpoint catalog's
    /// pins); versions in `keep` that are already collected or in the future are ignored.
    /// Flushes pending batched commits first; the on-disk change is one fsync'd redb
    /// transaction. Collected versions become unreadable ([`Error::VersionUnavailable`]).
    pub fn gc(&self, keep: &BTreeSet<u64>) -> Result<GcStats> {
        let s = &*self.shared;
        let _leader = s.exclusive();
        s.flush_pending()?;
        let active = s.active.lock();
        let latest = self.latest_version();
        let plan = {
            let mem = s.mem.read();
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
            let _f = s.flush_lock.lock();
            storage::write_gc(&s.db, &plan)?;
        }
        s.mem.write().apply_gc(&plan);
        drop(active);
        Ok(GcStats {
            versions_collected: plan.versions_collected,
            entries_removed: plan.removals.len() as u64,
            keys_removed: plan.keys_removed as u64,
        })
    }

    /// Write every acknowledged commit to disk now (fsync). A no-op in strict mode.
    pub fn flush(&self) -> Result<()> {
        self.shared.flush_pending()
    }

    /// Flush and close, reporting a final flush error (dropping also flushes, silently).
    pub fn close(mut self) -> Result<()> {
        self.stop_flusher();
        self.shared.flush_pending()
    }

    fn stop_flusher(&mut self) {
        if let Some(h) = self.flusher.take() {
            {
                let _u = self.shared.unflushed.lock();
                self.shared.shutdown.store(true, Ordering::Release);
                self.shared.flush_cv.notify_all();
            }
            let _ = h.join();
        }
    }

    /// Commit several transactions as one group, validated in the given order (testing
    /// hook for group-commit semantics; normal code just calls `Txn::commit`).
    #[doc(hidden)]
    pub fn commit_group(&self, txns: Vec<Txn<'_>>) -> Vec<Result<u64>> {
        let intents = txns.into_iter().map(Txn::into_intent).collect();
        self.shared.submit(intents)
    }
}

impl Drop for StateStore {
    fn drop(&mut self) {
        self.stop_flusher();
        let _ = self.shared.flush_pending();
    }
}

/// Create a new, empty store at `path` (which does not exist) so that a crash at any
/// moment leaves either no file at `path` or a complete one: the database is built and
/// committed (fsync) under a temporary name, renamed into place, and the directory is
/// fsync'd. Creating it in place could leave, after a SIGKILL inside redb's `create`, a
/// file without a valid header that no later open accepts. A temporary file left by such
/// a crash is replaced by the next creation. Runs under the process lock. Returns the
/// open database (its descriptor follows the rename), so it is not opened twice.
fn create_new(path: &Path, parent: &Path, cache_size: usize) -> Result<Database> {
    let tmp = crate::lock::sibling(path, ".new");
    let io = |op: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| Error::Io {
            op,
            path: p,
            source,
        }
    };
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io(
                "cannot remove the leftover of an interrupted creation",
                &tmp,
            )(e))
        }
        _ => {}
    }
    let db = open_db(&tmp, cache_size)?;
    std::fs::rename(&tmp, path).map_err(io("cannot move the new store into place at", path))?;
    std::fs::File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(io("cannot fsync the directory of", path))?;
    Ok(db)
}

/// Open (creating if missing) the redb file at `path` and bring its tables up to the
/// current format.
fn open_db(path: &Path, cache_size: usize) -> Result<Database> {
    let db = Database::builder()
        .set_cache_size(cache_size)
        .create(path)
        .map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => Error::Locked {
                path: path.to_path_buf(),
                waited: Duration::ZERO,
            },
            other => Error::from(other),
        })?;
    storage::init(&db, path)?;
    Ok(db)
}

fn nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
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

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// A batch that writes this key panics in `process_batch` (test builds only).
    pub(super) const PANIC_KEY: &[u8] = b"\xfftest-panic";

    /// Two callers queue behind a held leadership, so they form one batch; its leader
    /// panics in it. The other caller must get a failed result (not wait forever), and
    /// leadership must be free again for the next commit.
    #[test]
    fn a_panicking_batch_fails_its_other_caller_and_releases_leadership() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(StateStore::open(&dir.path().join("state.redb"), Options::default()).unwrap());
        let held = store.shared.exclusive();
        let (tx, rx) = mpsc::channel();
        for key in [PANIC_KEY, b"plain".as_slice()] {
            let (store, tx) = (store.clone(), tx.clone());
            std::thread::spawn(move || {
                let outcome = catch_unwind(AssertUnwindSafe(|| store.put(key, b"v")));
                tx.send(outcome.map_err(|_| ())).unwrap();
            });
        }
        while store.shared.queue.lock().pending.len() < 2 {
            std::thread::yield_now();
        }
        drop(held);
        let watchdog = Duration::from_secs(60);
        let outcomes: Vec<_> = (0..2)
            .map(|_| {
                rx.recv_timeout(watchdog)
                    .expect("a caller of the batch hung")
            })
            .collect();
        assert_eq!(
            outcomes.iter().filter(|o| o.is_err()).count(),
            1,
            "the leader panics"
        );
        let other = outcomes.into_iter().find_map(|o| o.ok()).unwrap();
        match other {
            Err(Error::CommitFailed(msg)) => assert!(msg.contains("panicked"), "{msg}"),
            other => panic!("expected CommitFailed, got {other:?}"),
        }
        assert_eq!(
            store.put(b"after", b"v").unwrap(),
            1,
            "leadership was released"
        );
    }
}
