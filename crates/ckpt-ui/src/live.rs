//! Live updates: "the catalog changed" pushed to every open page as a
//! Server-Sent Event, whoever changed it (a `ckpt save` in a terminal, a
//! hook, the watcher's auto-save, this server's own actions).
//!
//! Every change to the history — a save, a restore, a delete, a gc — is a
//! committed write transaction of the store's catalog
//! (`<store>/catalog.redb`, see `docs/FORMAT.md`), and every write to that
//! file queues an inotify event on its directory synchronously, inside the
//! `write` call. One thread waits on an inotify watch of the store
//! directory and, after each burst of events on the catalog (a commit is a
//! few writes; the burst ends after [`QUIET`] with no event), bumps a
//! counter and broadcasts it. The page then asks the operations layer for
//! the newest page again (`ops::log`): this module decides nothing about
//! what changed.
//!
//! Should inotify be unavailable (no instances left), the thread falls back
//! to comparing the catalog's size and mtime every [`POLL`].

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use ckpt_lib::ops::parts::Inotify;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use tokio::sync::broadcast;

/// The catalog's file name in the store directory.
const CATALOG: &[u8] = b"catalog.redb";
/// A burst of catalog writes has ended after this long without one.
const QUIET: Duration = Duration::from_millis(15);
/// The fallback poll interval.
const POLL: Duration = Duration::from_millis(200);

/// The change counter's channel.
pub struct Live {
    tx: broadcast::Sender<u64>,
}

impl Live {
    /// Starts watching the store at `store`.
    pub fn start(store: PathBuf) -> Live {
        let (tx, _) = broadcast::channel(16);
        let t = tx.clone();
        std::thread::Builder::new()
            .name("ckpt-ui-live".into())
            .spawn(move || watch(store, t))
            .expect("spawn the catalog watcher thread");
        Live { tx }
    }

    /// A new subscriber: receives the counter after each change.
    pub fn subscribe(&self) -> broadcast::Receiver<u64> {
        self.tx.subscribe()
    }
}

fn stamp(store: &std::path::Path) -> Option<(u64, i64, i64)> {
    let m = std::fs::metadata(store.join("catalog.redb")).ok()?;
    Some((m.size(), m.mtime(), m.mtime_nsec()))
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

fn watch(store: PathBuf, tx: broadcast::Sender<u64>) {
    let mut n = 0u64;
    let ino = Inotify::new()
        .ok()
        .and_then(|i| i.add_dir(&store).ok().map(|_| i));
    let Some(mut ino) = ino else {
        let mut last = stamp(&store);
        loop {
            std::thread::sleep(POLL);
            let now = stamp(&store);
            if now != last {
                last = now;
                n += 1;
                let _ = tx.send(n);
            }
        }
    };
    loop {
        // Wait for anything, then for the burst to end.
        let mut dirty = false;
        let mut timeout = None;
        loop {
            let ts = timeout.map(timespec);
            let ready = {
                let fd = ino.fd();
                let mut fds = [PollFd::new(&fd, PollFlags::IN)];
                poll(&mut fds, ts.as_ref())
            };
            match ready {
                Ok(0) => break,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    std::thread::sleep(POLL);
                    break;
                }
            }
            let events = ino.drain().unwrap_or_default();
            if events.iter().any(|e| e.overflow() || e.name == CATALOG) {
                dirty = true;
                timeout = Some(QUIET);
            }
        }
        if dirty {
            n += 1;
            let _ = tx.send(n);
        }
    }
}
