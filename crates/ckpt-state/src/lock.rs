//! Inter-process exclusion: an `flock(2)` on a lock file next to the database.
//!
//! Owns [`ProcessLock`]. Invariants:
//! - while a `ProcessLock` exists, this open file description holds `LOCK_EX` on
//!   `<db path>.lock`; no other process (and no other handle in this process) can hold it;
//! - the lock is released by the kernel when the handle is dropped or the process dies
//!   (including SIGKILL), so a crashed holder never blocks the store forever;
//! - acquisition polls with a short, growing sleep until the timeout and then fails with
//!   [`Error::Locked`]: waiting is bounded and the error says what to do.
//!
//! The store holds this lock for the whole lifetime of its handle, which is what makes the
//! in-memory cache safe: no other process can commit while we serve reads from memory.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{flock, FlockOperation};

use crate::error::{Error, Result};

/// An exclusive advisory lock held for the lifetime of the value.
#[derive(Debug)]
pub(crate) struct ProcessLock {
    _file: File,
    #[allow(dead_code)]
    path: PathBuf,
}

/// Path of the lock file for database `db`.
pub(crate) fn lock_path(db: &Path) -> PathBuf {
    sibling(db, ".lock")
}

/// `db`'s file name with `suffix` appended, in the same directory (`state.redb` →
/// `state.redb.lock`, `state.redb.new`).
pub(crate) fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    db.with_file_name(name)
}

impl ProcessLock {
    /// Take the exclusive lock, waiting up to `timeout`.
    pub(crate) fn acquire(db: &Path, timeout: Duration) -> Result<ProcessLock> {
        let path = lock_path(db);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| Error::Io {
                op: "cannot open lock file",
                path: path.clone(),
                source,
            })?;
        let start = Instant::now();
        let mut sleep = Duration::from_micros(200);
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(ProcessLock { _file: file, path }),
                Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => {
                    let waited = start.elapsed();
                    if waited >= timeout {
                        return Err(Error::Locked {
                            path: db.to_path_buf(),
                            waited,
                        });
                    }
                    std::thread::sleep(sleep.min(timeout - waited));
                    sleep = (sleep * 2).min(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(Error::Io {
                        op: "cannot lock",
                        path,
                        source: e.into(),
                    })
                }
            }
        }
    }
}
