//! [`StateStore`]: the handle of one open store: opening (and crash-safe creation),
//! reads, transactions with retry, snapshots, history, diff, restore, garbage collection,
//! flush and close.
//!
//! The state the handle shares with its transactions, the commit pipeline, durability and
//! GC live in module `shared`, the group-commit queue in module `group`; this module only
//! builds a `Shared` on open and puts the public API over it. Invariants:
//! - **open**: the process lock is taken before the file is opened or created, and a new
//!   file appears at `path` only complete (`create_new`);
//! - **close**: the batched-mode flusher thread is stopped and every acknowledged commit
//!   is flushed on `close` (reporting an error) and on drop (silently).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use redb::Database;

use crate::error::{Error, Result};
use crate::lock::ProcessLock;
use crate::options::{splitmix, Durability, Options, RetryPolicy};
use crate::shared::{flusher_loop, scan_at, Shared};
use crate::storage;
use crate::txn::{Snapshot, Txn};
use crate::types::{ChangeKind, CommitStats, GcStats, ScanEntry, StateChange, Versioned};

/// A transactional, versioned key-value store. `Send + Sync`; share it with `Arc`.
/// See the crate documentation for semantics.
pub struct StateStore {
    shared: Arc<Shared>,
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
        let shared = Arc::new(Shared::new(
            path.to_path_buf(),
            opts.durability,
            mem,
            latest,
            db,
            lock,
        ));
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
        self.shared.commit_stats()
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
        Txn::new(&self.shared, v)
    }

    /// A read-only view of the state at `version` (0 = the empty initial state). Fails
    /// with [`Error::VersionUnavailable`] if it was garbage-collected or is in the future.
    /// The version stays readable (GC keeps it) while the snapshot lives.
    pub fn snapshot(&self, version: u64) -> Result<Snapshot<'_>> {
        self.shared.register_at(version)?;
        Ok(Snapshot::new(&self.shared, version))
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
        self.shared.gc(keep)
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
            self.shared.shut_down_flusher();
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

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::shared::PANIC_KEY;

    /// Two callers queue behind a held leadership, so they form one batch; its leader
    /// panics in it. The other caller must get a failed result (not wait forever), and
    /// leadership must be free again for the next commit.
    #[test]
    fn a_panicking_batch_fails_its_other_caller_and_releases_leadership() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(StateStore::open(&dir.path().join("state.redb"), Options::default()).unwrap());
        let held = store.shared.group.exclusive();
        let (tx, rx) = mpsc::channel();
        for key in [PANIC_KEY, b"plain".as_slice()] {
            let (store, tx) = (store.clone(), tx.clone());
            std::thread::spawn(move || {
                let outcome = catch_unwind(AssertUnwindSafe(|| store.put(key, b"v")));
                tx.send(outcome.map_err(|_| ())).unwrap();
            });
        }
        while store.shared.group.pending_len() < 2 {
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
