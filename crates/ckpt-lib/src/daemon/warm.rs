//! Warming a fork: the watcher `lstat`s every entry of a fork's tree in the
//! background ([`crate::watch::Op::Warm`]), so that the fork's first save
//! finds every inode in memory.
//!
//! Why: a btrfs-subvolume fork made through the watcher, or by `fork
//! --count`, does not scan its snapshot (docs/FORK.md). The first `lstat` of
//! an inode of a fresh snapshot reads it from the snapshot's tree, several
//! times the cost of a cached one, so that fork's first save would pay a
//! whole walk of cold inodes: several times the parent's save. An agent
//! starts working in a fork long before it saves there, so the walk is
//! done then, on a thread of the watcher, a process that is running anyway.
//!
//! What it may do: it only reads. It never follows a symbolic link, it
//! stays on the device of the tree's root (another filesystem mounted
//! inside is not walked), and it runs in `SCHED_IDLE`, so it takes only
//! what the agents leave. An error in a directory only ends the
//! walk of that directory: warming saves time, and nothing depends on it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ckpt_fs::fs::{self, Listing};
use rustix::fs::FileType;

/// Walks in progress and entries `lstat`ed, for the watcher's status.
#[derive(Default)]
pub struct Progress {
    /// Trees asked for whose walk has not ended.
    pub running: AtomicU64,
    /// Entries `lstat`ed by every walk so far.
    pub entries: AtomicU64,
}

/// Walks `dirs`, one after the other, on a thread of its own at the
/// lowest priority; returns at once.
pub fn start(dirs: Vec<PathBuf>, progress: &Arc<Progress>) {
    let n = dirs.len() as u64;
    progress.running.fetch_add(n, Ordering::Relaxed);
    let p = Arc::clone(progress);
    let spawned = std::thread::Builder::new()
        .name("ckpt-warm".into())
        .spawn(move || {
            idle_priority();
            for d in &dirs {
                walk(d, &p);
                p.running.fetch_sub(1, Ordering::Relaxed);
            }
        });
    if spawned.is_err() {
        progress.running.fetch_sub(n, Ordering::Relaxed);
    }
}

/// Puts the calling thread in `SCHED_IDLE`: it runs only when a core has
/// nothing else to run. (A save of the fork started meanwhile is still
/// slower than without the walk: both read the same cold inodes;
/// BENCHMARKS.md, "Forks".) Best effort.
fn idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the duration of the
    // call; pid 0 is the calling thread, and SCHED_IDLE needs no privilege.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

/// `lstat`s every entry below `root` on its device, depth first, holding
/// one directory open per level, and counts each in `progress`.
fn walk(root: &Path, progress: &Progress) {
    let Ok(fd) = fs::open_dir_path(root) else {
        return;
    };
    let Ok(dev) = rustix::fs::fstat(&fd).map(|s| s.st_dev) else {
        return;
    };
    let Ok(listing) = fs::list_dir(fd) else {
        return;
    };
    let mut stack: Vec<(Listing, usize)> = vec![(listing, 0)];
    while let Some((listing, i)) = stack.last_mut() {
        let Some((name, _)) = listing.names.get(*i) else {
            stack.pop();
            continue;
        };
        *i += 1;
        let Ok(meta) = fs::stat_at(listing.fd(), name) else {
            continue;
        };
        progress.entries.fetch_add(1, Ordering::Relaxed);
        if meta.file_type() != FileType::Directory || meta.dev != dev {
            continue;
        }
        let sub = fs::open_dir_at(listing.fd(), name).and_then(fs::list_dir);
        if let Ok(sub) = sub {
            stack.push((sub, 0));
        }
    }
}
