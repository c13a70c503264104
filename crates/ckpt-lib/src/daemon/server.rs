//! The watcher process (`ckpt watch`): keeps one inotify watch per
//! directory of the workspace and folds events into dirty directory paths,
//! each stamped with the sequence number of its latest mark; answers the
//! clients of `<store>/watch.sock`.
//!
//! Invariants (the argument is in [`crate::watch`]):
//! - a watch is added before its directory is listed;
//! - every request drains the inotify queue before answering;
//! - a directory that appears (created or moved in) is walked, watched and
//!   marked dirty with all its subdirectories; one that goes loses its
//!   watches (deleted: the kernel drops them and reports `IN_IGNORED`;
//!   moved away: the watcher drops them);
//! - an event on a directory itself also marks its parent (where its own
//!   mode and mtime are recorded);
//! - a lost event (`IN_Q_OVERFLOW`) makes it drop every watch, walk the tree
//!   again and draw a new epoch; a watch it could not add makes it
//!   `complete: false` until it is restarted;
//! - only the store owner's uid may talk to it (`SO_PEERCRED`), the socket
//!   is mode 0600, and one watcher per store holds `<store>/watch.lock`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fs::inotify::ReadFlags;
use rustix::io::Errno;

use crate::engine::restore::RestoreOutcome;
use crate::engine::save::SaveOutcome;
use crate::engine::scanner::{scan_against, ScanKind, Scanner};
use crate::error::IoContext;
use crate::ops;
use crate::ops::save::SaveOptions;
use crate::platform::inotify::{peer_uid, Event, Inotify};
use crate::store::catalog::Durable;
use crate::store::index::Index;
use crate::store::lock::Lock;
use crate::store::Store;
use crate::watch::{
    client, lock_path, socket_path, Op, Request, Response, RestoreParams, SaveParams, SaveReply,
    ScanReply, Token, WatchStatus, WatcherFacts, PROTOCOL,
};
use crate::workspace::scan::{self, Mode, OnUnreadable, ScanInput, ScanResult};
use crate::workspace::Workspace;
use crate::{Config, Error, Result};
use ckpt_fs::fs::is_within;
use ckpt_fs::fs::{join, parent_of};

/// How to run the watcher.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// Save a checkpoint after this long without events, if anything changed.
    pub auto_save: Option<Duration>,
    /// Tags for auto-saves.
    pub auto_save_tags: Vec<(String, String)>,
    /// Stop after this long without a request other than `status` (a
    /// watcher started by `ckpt hook`: see [`crate::Config::hook_watch`]);
    /// `None`: run until stopped.
    pub idle_stop: Option<Duration>,
    /// Called once when the watcher is ready (initial walk done).
    pub on_ready: Option<fn(&WatchStatus)>,
    /// How stores are opened (copy strategy, band size); the lock timeout
    /// comes with each request.
    pub config: Config,
}

struct Watcher {
    root: PathBuf,
    store: PathBuf,
    /// Workspace-relative paths never watched (the store, if inside).
    exclude: Vec<Vec<u8>>,
    ino: Inotify,
    /// Watch descriptor → watched directory (the only map of watches: the
    /// rare lookups by path scan it rather than keep a second copy of every
    /// path).
    wd_path: HashMap<i32, Box<[u8]>>,
    dirty: HashMap<Vec<u8>, u64>,
    seq: u64,
    epoch: u64,
    incomplete: Option<String>,
    started: Instant,
    startup_ms: Option<f64>,
    overflows: u64,
    opts: WatchOptions,
    last_event: Option<Instant>,
    auto_saved_through: Option<Instant>,
    auto_child: Option<Child>,
    auto_saves: u64,
    /// Forks being warmed ([`Op::Warm`], [`super::warm`]).
    warming: Arc<super::warm::Progress>,
    uid: u32,
    ws: Workspace,
    /// The in-memory engine's index (see "The in-memory engine").
    mem: Option<MemIndex>,
    /// `mem` is newer than the index file.
    persist_due: bool,
    /// The index was written for a client (`op: persist`), and the memory
    /// freed since is to be given back once idle.
    release_due: bool,
    last_request: Instant,
    /// The last request that was not `status`: what [`WatchOptions::idle_stop`]
    /// counts from.
    last_use: Instant,
    /// Why the next save cannot be partial, when it cannot.
    full_reason: &'static str,
    /// The store of the request being answered, closed (and its lock
    /// released) only after the answer was sent: what a save or restore
    /// promised is durable before it answers, and closing the catalog
    /// (redb records its allocator state, several `fdatasync`s) is
    /// housekeeping the client need not wait for.
    closing: Option<Store>,
}

/// A capture scan made by the watcher, with what [`Watcher::keep`] needs.
struct MemScan {
    scan: ScanResult,
    /// How it scanned (for `--verbose`).
    how: String,
    /// The sequence number drained before the scan.
    seq: u64,
    /// `.ckptignore` hash at the scan.
    ignore: String,
}

/// The [`Scanner`] of a save or restore run by the watcher: scans from the
/// in-memory index and keeps the result there.
struct InWatcher<'w> {
    w: &'w mut Watcher,
    how: Option<String>,
    /// The sequence number and `.ckptignore` hash of the last scan, for
    /// `keep_index`.
    scanned_at: Option<(u64, String)>,
}

impl Scanner for InWatcher<'_> {
    fn scan(&mut self, _ws: &Workspace, store: &Store, kind: ScanKind) -> Result<ScanResult> {
        if kind == ScanKind::HashOnly {
            return Err(Error::Usage(
                "a dry run is planned by the command itself".into(),
            ));
        }
        let m = self.w.capture_scan(store, kind)?;
        self.how = Some(m.how);
        self.scanned_at = Some((m.seq, m.ignore));
        Ok(m.scan)
    }

    fn keep_index(&mut self, _store: &Store, scan: ScanResult) -> Result<()> {
        let Some((seq, ignore)) = self.scanned_at.take() else {
            return Err(Error::Usage(
                "internal error: a restore scan without its sequence number".into(),
            ));
        };
        self.w.keep(scan.index, seq, ignore);
        Ok(())
    }
}

/// An index held in memory, exact for every directory not marked after `seq`.
struct MemIndex {
    index: Index,
    seq: u64,
    ignore: String,
}

/// Quiet time after which the in-memory index is written to disk.
const PERSIST_AFTER: Duration = Duration::from_secs(1);

fn new_epoch() -> u64 {
    let seed = format!(
        "{}:{}:{:?}",
        std::process::id(),
        ckpt_fs::fs::now_ns(),
        Instant::now()
    );
    let h = crate::Hash::of(seed.as_bytes());
    u64::from_le_bytes(h.0[..8].try_into().expect("8 bytes")) | 1
}

impl Watcher {
    fn abs(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(std::ffi::OsStr::from_bytes(rel))
        }
    }

    fn mark(&mut self, rel: &[u8]) {
        self.seq += 1;
        self.dirty.insert(rel.to_vec(), self.seq);
    }

    /// Watches `rel` and every directory below it (watch first, then list),
    /// marking each dirty when `mark`.
    ///
    /// Past the inotify watch limit it goes on listing without watching, to
    /// count the directories it could not watch, and records advice naming
    /// the sysctl and a value that fits (commands then scan in full).
    fn walk(&mut self, rel: Vec<u8>, mark: bool) {
        let mut unwatched = 0u64;
        let mut stack = vec![rel];
        while let Some(rel) = stack.pop() {
            if self.exclude.iter().any(|x| is_within(&rel, x)) {
                continue;
            }
            let abs = self.abs(&rel);
            match self.ino.add_dir(&abs) {
                Ok(wd) => {
                    self.wd_path.insert(wd, rel.as_slice().into());
                }
                // Gone (or replaced by a non-directory) since it was seen:
                // its parent's event covers it.
                Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => continue,
                Err(Errno::NOSPC) => unwatched += 1,
                Err(e) => {
                    self.incomplete = Some(format!("cannot watch {}: {e}", abs.display()));
                    continue;
                }
            }
            // (An unwatched directory is marked too: harmless, the scan
            // is full anyway.)
            if mark {
                self.mark(&rel);
            }
            let rd = match std::fs::read_dir(&abs) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.incomplete = Some(format!("cannot list {}: {e}", abs.display()));
                    continue;
                }
            };
            for ent in rd.flatten() {
                if ent.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(join(&rel, ent.file_name().as_bytes()));
                }
            }
        }
        if unwatched > 0 {
            let dirs = self.wd_path.len() as u64 + unwatched;
            let limit = crate::platform::doctor::inotify_limits().max_user_watches;
            self.incomplete = Some(
                crate::platform::doctor::watch_limit_advice(limit, dirs).unwrap_or_else(|| {
                    format!(
                        "the inotify watch limit was hit with {unwatched} of {dirs} directories \
                         unwatched (other programs hold watches too): raise \
                         fs.inotify.max_user_watches, then restart the watcher"
                    )
                }),
            );
        }
    }

    fn unwatch_subtree(&mut self, rel: &[u8]) {
        let gone: Vec<i32> = self
            .wd_path
            .iter()
            .filter(|(_, p)| is_within(p, rel))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            self.wd_path.remove(&wd);
            self.ino.remove(wd);
        }
    }

    /// Drops every watch and starts over with a new epoch (events were lost).
    fn rewalk(&mut self) {
        self.overflows += 1;
        for wd in self.wd_path.keys() {
            self.ino.remove(*wd);
        }
        self.wd_path.clear();
        self.dirty.clear();
        self.epoch = new_epoch();
        // The in-memory index relied on the marks just dropped.
        self.mem = None;
        self.persist_due = false;
        self.full_reason = "the watcher lost events (queue overflow) and watched everything again";
        // Discard what is queued (it refers to dropped watches) before the walk.
        let _ = self.ino.drain();
        self.walk(Vec::new(), false);
    }

    fn handle(&mut self, ev: Event) {
        if ev.overflow() {
            self.rewalk();
            return;
        }
        if ev.mask.contains(ReadFlags::UNMOUNT) {
            self.incomplete = Some("a watched filesystem was unmounted".into());
        }
        let Some(base) = self.wd_path.get(&ev.wd).map(|p| p.to_vec()) else {
            // A watch already dropped (its directory moved or went away):
            // whatever it reports is covered by the walk or the parent's
            // event that dropped it.
            return;
        };
        if ev.mask.contains(ReadFlags::IGNORED) {
            self.wd_path.remove(&ev.wd);
            return;
        }
        self.last_event = Some(Instant::now());
        if ev.name.is_empty() {
            // The directory itself.
            if base.is_empty()
                && ev
                    .mask
                    .intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
            {
                self.incomplete = Some("the workspace root was moved or deleted".into());
            }
            self.mark(&base);
            if !base.is_empty() {
                self.mark(parent_of(&base));
            }
            return;
        }
        self.mark(&base);
        if ev.is_dir() {
            let child = join(&base, &ev.name);
            // Moved away, its directories keep their watches: drop them
            // (a scan of every watch, once per directory moved). A deleted
            // directory needs nothing here: the kernel drops its watch and
            // reports `IN_IGNORED` (its subdirectories went before it), so
            // creating or deleting many directories costs each its own
            // events, not a scan of every watch.
            if ev.mask.contains(ReadFlags::MOVED_FROM) {
                self.unwatch_subtree(&child);
            }
            if ev.mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                self.walk(child, true);
            }
        }
    }

    fn drain(&mut self) {
        match self.ino.drain() {
            Ok(evs) => {
                for ev in evs {
                    self.handle(ev);
                }
            }
            Err(e) => self.incomplete = Some(format!("reading inotify events: {e}")),
        }
    }

    fn status(&self) -> WatchStatus {
        WatchStatus {
            epoch: self.epoch,
            facts: WatcherFacts {
                pid: std::process::id(),
                root: self.root.clone(),
                seq: self.seq,
                watches: self.wd_path.len() as u64,
                dirty: self.dirty.len() as u64,
                rss_bytes: rss_bytes(),
                uptime_secs: self.started.elapsed().as_secs_f64(),
                startup_ms: self.startup_ms,
                complete: self.incomplete.is_none(),
                reason: self.incomplete.clone(),
                overflows: self.overflows,
                auto_save_secs: self.opts.auto_save.map(|d| d.as_secs_f64()),
                auto_saves: self.auto_saves,
                idle_stop_secs: self.opts.idle_stop.map(|d| d.as_secs()),
                warming: self.warming.running.load(Ordering::Relaxed),
                warmed_entries: self.warming.entries.load(Ordering::Relaxed),
            },
        }
    }

    fn answer(&mut self, req: &Request) -> Response {
        let mut r = Response {
            v: PROTOCOL,
            ..Default::default()
        };
        if req.v != PROTOCOL {
            r.error = Some(format!(
                "protocol {} not spoken (this watcher speaks {PROTOCOL})",
                req.v
            ));
            return r;
        }
        self.drain();
        r.epoch = self.epoch;
        r.seq = self.seq;
        r.complete = self.incomplete.is_none();
        r.reason = self.incomplete.clone();
        match req.op {
            Op::Dirty => {
                if req.epoch == self.epoch {
                    r.dirs = Some(
                        self.dirty
                            .iter()
                            .filter(|(_, s)| **s > req.seq)
                            .map(|(p, _)| p.clone())
                            .collect(),
                    );
                }
            }
            Op::Ack => {
                if req.epoch == self.epoch {
                    // Keep what the in-memory index still needs.
                    let upto = self.mem.as_ref().map_or(req.seq, |m| m.seq.min(req.seq));
                    self.dirty.retain(|_, s| *s > upto);
                }
            }
            Op::Scan => match self.engine_scan(req.generation) {
                Ok(reply) => r.scanned = Some(reply),
                Err(e) => r.error = Some(e.to_string()),
            },
            Op::Save => match &req.save {
                Some(p) => match self.engine_save(p) {
                    Ok(reply) => r.saved = Some(reply),
                    Err(e) => r.error = Some(e.to_string()),
                },
                None => r.error = Some("save without parameters".into()),
            },
            Op::Restore => match &req.restore {
                Some(p) => match self.engine_restore(p) {
                    Ok(reply) => r.restored = Some(reply),
                    Err(e) => r.error = Some(e.to_string()),
                },
                None => r.error = Some("restore without parameters".into()),
            },
            Op::Status => r.status = Some(self.status()),
            Op::Persist => {
                if self.persist_due {
                    // The client waits: memory is given back once idle.
                    self.write_index();
                }
            }
            Op::Warm => {
                // Absolute paths only: the watcher's own directory means
                // nothing to the client.
                let dirs = req.warm.iter().filter(|d| d.is_absolute()).cloned();
                super::warm::start(dirs.collect(), &self.warming);
            }
            Op::Stop => {}
        }
        r
    }

    /// A scan whose index is kept (`kind` [`ScanKind::Capture`] for a save
    /// or a restore's pre-save, [`ScanKind::HashKeep`] for a restore that
    /// stores nothing): partial from the in-memory index (taken out of
    /// `mem`; the caller puts the index of the result back with
    /// [`Watcher::keep`]), else from the index file and its token, else full.
    fn capture_scan(&mut self, store: &Store, kind: ScanKind) -> Result<MemScan> {
        let generation = store.catalog.reader()?.generation()?;
        let ignore = client::ignore_hash(&self.ws);
        let seq = self.seq;
        let from_disk = !matches!(&self.mem,
            Some(m) if m.index.generation == generation && m.ignore == ignore);
        let (index, base) = match self.mem.take() {
            Some(m) if !from_disk => (m.index, Some(m.seq)),
            _ => {
                let index = store.load_index()?;
                let base = client::read_token(&self.ws.store_path)
                    .filter(|t| {
                        t.epoch == self.epoch
                            && t.generation == generation
                            && t.ignore == ignore
                            && index.dirs.contains_key(&Vec::new())
                    })
                    .map(|t| t.seq);
                (index, base)
            }
        };
        let (dirs, how) = match base {
            Some(b) => {
                let dirs = self.dirty_since(b);
                let how = format!("partial scan: {} dirty directories", dirs.len());
                (Some(dirs), how)
            }
            None => (None, format!("full scan: {}", self.full_reason)),
        };
        let t = crate::trace::span("scan");
        let scan = scan_against(&self.ws, store, index, kind, dirs.as_ref())?;
        drop(t);
        if from_disk {
            // Loading read every page of the mapped index file; from now
            // on a save reads the pages of its dirty directories only.
            scan.index.release_pages();
        }
        Ok(MemScan {
            scan,
            how,
            seq,
            ignore,
        })
    }

    /// Directories marked after `seq`.
    fn dirty_since(&self, seq: u64) -> std::collections::HashSet<Vec<u8>> {
        self.dirty
            .iter()
            .filter(|(_, s)| **s > seq)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Makes `index` (of a scan that started after the drain numbered
    /// `seq`) the in-memory index, to be written later.
    fn keep(&mut self, index: Index, seq: u64, ignore: String) {
        self.mem = Some(MemIndex { index, seq, ignore });
        self.persist_due = true;
    }

    /// Saves from the in-memory index (see "The in-memory engine").
    fn engine_save(&mut self, p: &SaveParams) -> Result<SaveReply> {
        self.vouch()?;
        let t0 = Instant::now();
        let store = self
            .ws
            .open_store_for_save(&self.config_locking(p.lock_timeout_ms))?;
        let opts = SaveOptions {
            message: p.message.clone(),
            tags: p.tags.clone(),
            allow_empty: p.allow_empty,
        };
        // The same save as `ckpt save`'s "here" path, scanning from and
        // keeping into the in-memory index. If the saved retention policy
        // runs gc, the generation changes and the next request reloads the
        // index.
        let ws = self.ws.clone();
        let mut scanner = InWatcher {
            w: self,
            how: None,
            scanned_at: None,
        };
        // Durable at the commit: the reply goes out before the close ends.
        let rep = ops::save::save_with(&ws, &store, &opts, &mut scanner, Durable::AtCommit, t0)?;
        let how = scanner.how.unwrap_or_default();
        let (saved, checkpoint) = match rep.outcome {
            SaveOutcome::Saved(c) => (true, Some(c)),
            SaveOutcome::Unchanged(h) => (false, h),
        };
        self.closing = Some(store);
        Ok(SaveReply {
            saved,
            checkpoint,
            entries: rep.counts.entries,
            files_read: rep.counts.files_read,
            new_objects: rep.counts.new_objects,
            new_bytes: rep.counts.new_bytes,
            unreadable: rep.unreadable,
            scan: how,
        })
    }

    /// Restores in place from and into the in-memory index: the same
    /// [`ops::restore::restore_with`] as `ckpt restore`, whose pre-save
    /// scans like [`Watcher::engine_save`] and whose final index is kept in
    /// memory instead of being written. Restore's own writes are marked
    /// dirty after `seq`, so the next scan relists their directories and
    /// finds them equal to the index.
    fn engine_restore(&mut self, p: &RestoreParams) -> Result<(RestoreOutcome, String)> {
        self.vouch()?;
        if p.opts.dry_run {
            return Err(Error::Usage(
                "a dry run is planned by the command itself".into(),
            ));
        }
        let ws = self.ws.clone();
        let store = ws.open_store(&self.config_locking(p.lock_timeout_ms))?;
        let mut engine = InWatcher {
            w: self,
            how: None,
            scanned_at: None,
        };
        let report = ops::restore::restore_with(&ws, &store, &p.rev, &p.opts, &mut engine)?;
        let how = engine.how.unwrap_or_default();
        self.closing = Some(store);
        Ok((report, how))
    }

    /// The configuration with the lock timeout of a request.
    fn config_locking(&self, lock_timeout_ms: u64) -> Config {
        Config {
            lock_timeout: Duration::from_millis(lock_timeout_ms),
            ..self.opts.config.clone()
        }
    }

    fn vouch(&self) -> Result<()> {
        match &self.incomplete {
            Some(r) => Err(Error::Usage(format!("cannot vouch for completeness: {r}"))),
            None => Ok(()),
        }
    }

    /// Makes sure `mem` is an index for `generation` and the current
    /// `.ckptignore`, loading index file + token when it is not (the caller
    /// of `scan` holds the store lock, so they are not being written).
    fn ensure_mem(&mut self, generation: u64, ignore: &str) -> bool {
        if let Some(m) = &self.mem {
            if m.index.generation == generation && m.ignore == ignore {
                return true;
            }
            if self.persist_due {
                return false; // newer than the file; a save will reconcile
            }
        }
        let Some(t) = client::read_token(&self.ws.store_path) else {
            return false;
        };
        if t.epoch != self.epoch || t.generation != generation || t.ignore != ignore {
            return false;
        }
        let index = Index::load(&self.ws.store_path.join("index"), generation);
        if !index.dirs.contains_key(&Vec::new()) {
            return false;
        }
        self.mem = Some(MemIndex {
            index,
            seq: t.seq,
            ignore: t.ignore,
        });
        true
    }

    /// A hash-only partial scan from the in-memory index.
    fn engine_scan(&mut self, generation: u64) -> Result<ScanReply> {
        self.vouch()?;
        let ignore = client::ignore_hash(&self.ws);
        if !self.ensure_mem(generation, &ignore) {
            return Err(Error::Usage(
                "no index for this epoch and generation yet".into(),
            ));
        }
        let m = self.mem.as_ref().expect("ensured");
        let dirs = self.dirty_since(m.seq);
        let ignore_rules = self.ws.ignore()?;
        let exclude = self.ws.excluded();
        let input = ScanInput {
            root: &self.ws.root,
            index: &m.index,
            ignore: &ignore_rules,
            exclude: &exclude,
            mode: Mode::HashOnly,
            on_unreadable: OnUnreadable::Record,
            on_first_new_object: None,
        };
        let t = crate::trace::span("scan");
        let r = scan::scan_partial(&input, &dirs)?.scan;
        drop(t);
        Ok(ScanReply {
            root: r.root.0,
            new_trees: r.new_trees.into_iter().map(|(h, b)| (h.0, b)).collect(),
            skipped: r.skipped,
            unreadable: r.unreadable,
            entries: r.entries,
            files_read: r.files_read,
            scan: format!("partial scan: {} dirty directories", dirs.len()),
        })
    }

    /// Writes the in-memory index and its token, under the store lock (if
    /// the lock is busy, later), then gives freed memory back.
    fn persist(&mut self) {
        if self.write_index() {
            self.release();
        }
    }

    /// Writes the in-memory index and its token, under the store lock (if
    /// the lock is busy, later); true when written. The store is opened
    /// read-only: only the catalog generation is read, so closing it
    /// writes nothing (a writable catalog's close syncs its allocator
    /// state), and a snapshot of the store taken after it (`ckpt fork`)
    /// holds a cleanly closed catalog.
    fn write_index(&mut self) -> bool {
        if self.mem.is_none() {
            self.persist_due = false;
            return false;
        }
        let Ok(store) = self.ws.open_store_read_only(&self.config_locking(0)) else {
            return false;
        };
        let Some(m) = &mut self.mem else { return false };
        let generation = store.catalog.reader().and_then(|r| r.generation());
        if !matches!(generation, Ok(g) if g == m.index.generation) {
            // gc rewrote the index: ours is stale.
            self.mem = None;
            self.persist_due = false;
            return false;
        }
        self.persist_due = false;
        if let Err(e) = m.index.save(&store.index_path()) {
            eprintln!("ckpt watch: writing the index: {e}");
            return false;
        }
        let token = Token {
            epoch: self.epoch,
            seq: m.seq,
            generation: m.index.generation,
            ignore: m.ignore.clone(),
        };
        if let Err(e) = client::write_token(&store.root, &token) {
            eprintln!("ckpt watch: writing the watch token: {e}");
            return false;
        }
        let upto = m.seq;
        self.dirty.retain(|_, s| *s > upto);
        self.release_due = true;
        true
    }

    /// Gives memory freed since the last write back (see [`Self::persist`]).
    fn release(&mut self) {
        self.release_due = false;
        // Saves through the watcher replace records of the in-memory index
        // (and a full scan or the parallel index load allocates in every
        // worker's arena): give what was freed back now that it is idle,
        // rather than keep it resident for the watcher's lifetime, and
        // with it the pages of the mapped index file (the page cache keeps
        // them; the next save maps the few it reads).
        let _t = crate::trace::span("release memory");
        if let Some(m) = &self.mem {
            m.index.release_pages();
        }
        crate::platform::release_free_memory();
    }

    fn serve(&mut self, stream: UnixStream) -> bool {
        let fail = |stream: &UnixStream, msg: String| {
            let r = Response {
                v: PROTOCOL,
                error: Some(msg),
                ..Default::default()
            };
            let mut line = serde_json::to_vec(&r).expect("response serialises");
            line.push(b'\n');
            let _ = (&*stream).write_all(&line);
        };
        match peer_uid(stream.as_fd()) {
            Ok(uid) if uid == self.uid => {}
            Ok(uid) => {
                eprintln!("ckpt watch: refused a connection from uid {uid}");
                fail(&stream, format!("uid {uid} may not use this watcher"));
                return false;
            }
            Err(e) => {
                fail(&stream, format!("peer credentials: {e}"));
                return false;
            }
        }
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok();
        stream.set_write_timeout(Some(Duration::from_secs(2))).ok();
        let mut line = String::new();
        if BufReader::new(&stream).read_line(&mut line).is_err() {
            return false;
        }
        let req: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                fail(&stream, format!("bad request: {e}"));
                return false;
            }
        };
        self.last_request = Instant::now();
        if !matches!(req.op, Op::Status) {
            self.last_use = self.last_request;
        }
        let resp = self.answer(&req);
        let mut out = serde_json::to_vec(&resp).expect("response serialises");
        out.push(b'\n');
        let _ = (&stream).write_all(&out);
        drop(stream);
        if let Some(store) = self.closing.take() {
            let _t = crate::trace::span("close store");
            drop(store);
        }
        req.op == Op::Stop && resp.error.is_none()
    }

    fn auto_save_tick(&mut self) {
        if let Some(c) = &mut self.auto_child {
            match c.try_wait() {
                Ok(Some(st)) => {
                    if !st.success() {
                        eprintln!("ckpt watch: auto-save exited with {st}");
                    }
                    self.auto_child = None;
                }
                Ok(None) => return,
                Err(_) => self.auto_child = None,
            }
        }
        let Some(quiet) = self.opts.auto_save else {
            return;
        };
        let Some(last) = self.last_event else { return };
        if self.dirty.is_empty()
            || last.elapsed() < quiet
            || self.auto_saved_through.is_some_and(|t| t >= last)
        {
            return;
        }
        self.auto_saved_through = Some(last);
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("ckpt watch: auto-save: cannot find the ckpt binary: {e}");
                return;
            }
        };
        let mut cmd = Command::new(exe);
        cmd.arg("-C")
            .arg(&self.root)
            .args(["-q", "save", "-m", "auto-save", "--tag"])
            .arg(format!("{}=auto-save", crate::engine::save::REASON_TAG));
        for (k, v) in &self.opts.auto_save_tags {
            cmd.arg("--tag").arg(format!("{k}={v}"));
        }
        cmd.stdin(Stdio::null());
        match cmd.spawn() {
            Ok(c) => {
                self.auto_saves += 1;
                self.auto_child = Some(c);
            }
            Err(e) => eprintln!("ckpt watch: auto-save: {e}"),
        }
    }
}

/// Resident set size of this process (bytes), from `/proc/self/statm`.
pub fn rss_bytes() -> u64 {
    let page = rustix::param::page_size() as u64;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |p| p * page)
}

/// Runs the watcher in this process until `ckpt watch --stop` (or a
/// signal). Returns an error, changing nothing, when another watcher holds
/// the store's watch lock or the socket cannot be created.
pub fn run(ws: &Workspace, opts: WatchOptions) -> Result<()> {
    let store = ws.store_path.clone();
    if !store.join(crate::store::MARKER).exists() {
        return Err(Error::io(
            "open store",
            store.join(crate::store::MARKER),
            std::io::ErrorKind::NotFound.into(),
        ));
    }
    let _lock = Lock::acquire(&lock_path(&store), Duration::ZERO).map_err(|e| match e {
        Error::LockTimeout { .. } => Error::Usage(format!(
            "a watcher is already running for {} (see `ckpt watch --status`)",
            ws.root.display()
        )),
        e => e,
    })?;
    let uid = rustix::process::geteuid().as_raw();
    let store_uid = std::fs::metadata(&store).ctx("stat", &store)?.uid();
    if store_uid != uid {
        return Err(Error::Usage(format!(
            "the store {} belongs to uid {store_uid}; only its owner may watch it",
            store.display()
        )));
    }
    let sock = socket_path(&store);
    // We hold the watch lock: a socket file left here is stale.
    match std::fs::remove_file(&sock) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove stale socket", &sock, e)),
    }
    let old_mask = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let listener = crate::watch::with_socket_path(&store, |p| UnixListener::bind(p));
    rustix::process::umask(old_mask);
    let listener = listener.ctx("bind", &sock)?;
    listener.set_nonblocking(true).ctx("configure", &sock)?;
    let sock_ino = std::fs::symlink_metadata(&sock).ctx("stat", &sock)?.ino();

    let ino = Inotify::new().map_err(|e| {
        Error::io(
            "inotify_init (is inotify available here?)",
            &ws.root,
            e.into(),
        )
    })?;
    let mut w = Watcher {
        root: ws.root.clone(),
        store: store.clone(),
        exclude: ws.excluded(),
        ino,
        wd_path: HashMap::new(),
        dirty: HashMap::new(),
        seq: 0,
        epoch: new_epoch(),
        incomplete: None,
        started: Instant::now(),
        startup_ms: None,
        overflows: 0,
        opts,
        last_event: None,
        auto_saved_through: None,
        auto_child: None,
        auto_saves: 0,
        warming: Arc::default(),
        uid,
        ws: ws.clone(),
        mem: None,
        persist_due: false,
        release_due: false,
        last_request: Instant::now(),
        last_use: Instant::now(),
        full_reason: "the watcher restarted or started after the last save",
        closing: None,
    };
    w.walk(Vec::new(), false);
    w.startup_ms = Some(w.started.elapsed().as_secs_f64() * 1e3);
    if let Some(f) = w.opts.on_ready {
        f(&w.status());
    }
    let result = event_loop(&mut w, &listener);
    if w.persist_due {
        w.persist();
    }
    // Remove the socket only if it is still ours.
    if std::fs::symlink_metadata(&sock).is_ok_and(|m| m.ino() == sock_ino) {
        let _ = std::fs::remove_file(&sock);
    }
    let _ = &w.store;
    result
}

fn event_loop(w: &mut Watcher, listener: &UnixListener) -> Result<()> {
    loop {
        let tick = Duration::from_millis(200);
        let mut wait =
            (w.opts.auto_save.is_some() || w.persist_due || w.release_due).then_some(tick);
        if let Some(idle) = w.opts.idle_stop {
            let left = idle.saturating_sub(w.last_use.elapsed());
            if left.is_zero() {
                eprintln!(
                    "ckpt watch: stopping: no request for {} s (idle stop)",
                    idle.as_secs()
                );
                return Ok(());
            }
            wait = Some(wait.map_or(left, |t| t.min(left)));
        }
        let timeout = wait.map(|d| rustix::time::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as i64,
        });
        let (ino_ready, sock_ready) = {
            let ino_fd = w.ino.fd();
            let mut fds = [
                PollFd::new(&ino_fd, PollFlags::IN),
                PollFd::new(listener, PollFlags::IN),
            ];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(Error::io("poll", &w.root, e.into())),
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        if ino_ready {
            w.drain();
        }
        if sock_ready {
            loop {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        if w.serve(stream) {
                            return Ok(());
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io("accept", socket_path(&w.store), e)),
                }
            }
        }
        w.auto_save_tick();
        if w.persist_due && w.last_request.elapsed() >= PERSIST_AFTER {
            w.persist();
        } else if w.release_due && w.last_request.elapsed() >= PERSIST_AFTER {
            w.release();
        }
    }
}

/// Asks the watcher of `store` to exit and waits (up to `timeout`) until it
/// released its lock. Returns false when no watcher was running (the client
/// side, [`client::stop`]).
pub fn stop(store: &Path, timeout: Duration) -> Result<bool> {
    client::stop(store, timeout)
}
