//! The store lock: one `flock(2)` on `<store>/lock`.
//!
//! Every command holds it exclusively for its whole run, so two ckpt
//! processes on one store serialise. A second process polls with back-off
//! until the lock is free or its timeout expires, then fails with
//! [`Error::LockTimeout`] having changed nothing. The kernel drops the lock
//! when the holder exits or is killed, so a crash never leaves it stuck.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::error::IoContext;
use crate::{Error, Result};

/// A held lock; released on drop.
#[derive(Debug)]
pub struct Lock {
    _fd: OwnedFd,
}

impl Lock {
    /// Takes the lock on `path`, waiting up to `timeout`.
    pub fn acquire(path: &Path, timeout: Duration) -> Result<Lock> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .ctx("open lock file", path)?;
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Lock { _fd: fd }),
                Err(Errno::WOULDBLOCK) | Err(Errno::INTR) => {}
                Err(e) => return Err(Error::io("lock", path, e.into())),
            }
            if start.elapsed() >= timeout {
                return Err(Error::LockTimeout {
                    path: path.to_path_buf(),
                    waited_secs: timeout.as_secs(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}
