//! inotify, behind a small safe wrapper (rustix's bindings underneath).
//!
//! Owns: one non-blocking, close-on-exec inotify descriptor, adding and
//! removing directory watches, and draining the queued events into owned
//! [`Event`]s. Invariant: [`Inotify::drain`] returns only when the queue was
//! observed empty (`EAGAIN`), so every event the kernel queued before the
//! call — in particular every event caused by a write that had returned to
//! its caller before the call — is in the result.
//!
//! Events are queued synchronously inside the system call that makes the
//! change, which is what lets a client's request act as a barrier (see
//! [`crate::watch`]).

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// One event, copied out of the kernel buffer.
#[derive(Clone, Debug)]
pub struct Event {
    /// Watch descriptor (-1 for a queue overflow).
    pub wd: i32,
    /// What happened.
    pub mask: ReadFlags,
    /// Name of the entry inside the watched directory (empty: the
    /// directory itself).
    pub name: Vec<u8>,
}

impl Event {
    /// The queue overflowed: events were lost.
    pub fn overflow(&self) -> bool {
        self.mask.contains(ReadFlags::QUEUE_OVERFLOW)
    }
    /// The subject is a directory.
    pub fn is_dir(&self) -> bool {
        self.mask.contains(ReadFlags::ISDIR)
    }
}

/// The events every directory watch asks for: any change to the listing,
/// to an entry's content or metadata, or to the directory itself.
pub fn dir_mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

/// An inotify instance.
pub struct Inotify {
    fd: OwnedFd,
    buf: Vec<MaybeUninit<u8>>,
}

impl Inotify {
    /// Creates a non-blocking instance.
    pub fn new() -> rustix::io::Result<Inotify> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        Ok(Inotify {
            fd,
            buf: vec![MaybeUninit::uninit(); 256 * 1024],
        })
    }

    /// The descriptor, for `poll`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Watches the directory at `path` (never following a symlink).
    /// `ENOSPC` means the per-user watch limit was hit.
    pub fn add_dir(&self, path: &Path) -> rustix::io::Result<i32> {
        inotify::add_watch(&self.fd, path, dir_mask())
    }

    /// Stops watching `wd` (an already-gone watch is not an error).
    pub fn remove(&self, wd: i32) {
        let _ = inotify::remove_watch(&self.fd, wd);
    }

    /// Reads every queued event without blocking.
    pub fn drain(&mut self) -> rustix::io::Result<Vec<Event>> {
        let mut out = Vec::new();
        let mut reader = inotify::Reader::new(&self.fd, &mut self.buf);
        loop {
            match reader.next() {
                Ok(ev) => out.push(Event {
                    wd: ev.wd(),
                    mask: ev.events(),
                    name: ev
                        .file_name()
                        .map(|n| n.to_bytes().to_vec())
                        .unwrap_or_default(),
                }),
                Err(Errno::AGAIN) => return Ok(out),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The uid of the process at the other end of a connected Unix socket
/// (`SO_PEERCRED`, filled in by the kernel at connect time).
pub fn peer_uid(sock: BorrowedFd<'_>) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes passed.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}
