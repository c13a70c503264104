//! Watch mode: a per-workspace watcher process that keeps the set of
//! directories whose listing or entries may have changed, so that save,
//! status, diff and restore stat only those instead of the whole tree.
//!
//! - [`crate::daemon`]: the watcher (`ckpt watch`): one inotify watch per
//!   directory, events folded into dirty directory paths stamped with a
//!   sequence number, a Unix socket `<store>/watch.sock` (mode 0600, peer uid
//!   checked), optional auto-save.
//! - this module: the wire protocol both sides speak.
//! - [`client`]: what a command does before its scan: ask the watcher which
//!   directories are dirty since the token recorded with the index, and fall
//!   back to a full scan (saying why) whenever the watcher cannot vouch.
//! - [`crate::workspace::scan::scan_partial`]: the scan restricted to those directories.
//!
//! ## Protocol (version [`PROTOCOL`])
//! One JSON object per line, one request per connection: the client writes a
//! [`Request`], the watcher answers one [`Response`] and closes.
//!
//! ## The token, and why no change can be missed
//! The *token* `(epoch, seq, generation, ignore)` is stored in
//! `<store>/watch.token` (JSON, temp + rename). `epoch` is a random number
//! the watcher draws when it starts and again whenever it loses events;
//! `seq` counts the dirty marks it has made; `generation` is the catalog
//! generation of the index; `ignore` the hash of `.ckptignore`.
//!
//! 1. The watcher adds the watch on a directory *before* listing it (initial
//!    walk, new and moved-in directories), so every entry is either seen by
//!    the listing or produces an event. It answers `complete: false` until
//!    its initial walk is done, after a watch could not be added (limit hit,
//!    permission, unsupported filesystem) and after the root went away.
//! 2. inotify queues an event inside the system call that makes the change.
//!    On each request the watcher first drains its queue without blocking
//!    and marks every affected directory with `seq += 1`; the `seq` it
//!    answers is taken after that drain. So every change that completed
//!    before the request is marked with a number `≤ seq`, and every change
//!    after it with a number `> seq`.
//! 3. A save through the watcher scans (partially) after the request and
//!    writes the token `seq` only after the index produced by that scan has
//!    been saved; the token therefore never runs ahead of the index. A
//!    directory marked `> token` is relisted next time; one not marked since
//!    the token has not changed since the index's scan, so its index record
//!    is exact. Any other writer of the index (a scan without watcher,
//!    restore) writes a *newer* index and leaves the token older: that only
//!    makes the dirty set larger than needed.
//! 4. The watcher forgets marks `≤ seq` only when told (`ack`) after the
//!    token file holding `seq` was written, under the store lock.
//! 5. A full scan is used (and its token recorded, so the next save is
//!    partial) whenever: the watcher is absent, unreachable, not ready or
//!    incomplete; the epoch differs (the watcher restarted, was killed, or
//!    lost events: `IN_Q_OVERFLOW` makes it re-walk every directory and draw
//!    a new epoch); the catalog generation changed (gc rewrote the index);
//!    `.ckptignore` changed; the index is missing or unreadable.
//! 6. A directory's own mode/mtime live in its parent's record: a change to
//!    a directory marks its parent too, and the partial scan re-stats every
//!    directory on the path from the root to a dirty one.
//!
//! ## The in-memory engine
//! Loading and writing the whole index file costs more than everything else
//! in a small save, so `ckpt save` asks a live watcher to save *in its own
//! process* (`op: save`): it takes the store lock like any command, scans
//! the directories dirty since its in-memory index's sequence number
//! (`mem.seq`, the drain before that index's scan) and commits exactly as
//! `ckpt save` does, but keeps the new index in memory instead of writing
//! it: the scan's records replace the old ones in that index, in place, so
//! a save costs what changed, not the size of the index (see
//! [`crate::workspace::scan::Scanned::apply`]). It writes index and
//! token (`seq = mem.seq`) later, under the store lock, when no request
//! came for a while, when it stops, and when a command that relies on the
//! files asks (`op: persist`: `ckpt fork`, before it takes the lock, so
//! that its snapshot's scan can be partial): usually a delta holding only
//! what changed since the base file (see [`crate::store::index`]). Marks `≤ seq`
//! are forgotten only up to `min(acked seq, mem.seq)`, so the in-memory
//! index always has the marks it needs; the on-disk index and token are
//! older but consistent, so commands that scan themselves stay correct. The
//! in-memory index is dropped (reloaded from disk) when the catalog
//! generation or `.ckptignore` changed. Any failure of the watcher's save
//! makes the command save by itself.
//!
//! `ckpt restore` (in place, not a dry run) likewise runs in the watcher
//! (`op: restore`): [`crate::engine::restore::restore`] with a scanner whose
//! pre-restore scan is the save's partial capture scan and whose resulting
//! index (the scan's, updated with what restore wrote) becomes the in-memory
//! index at the scan's `seq`. Restore's writes happen after that drain, so
//! they are marked `> seq`: their directories are relisted by the next scan
//! and match the index. A failure makes the command restore by itself,
//! which is safe because re-running a restore finishes it.
//!
//! `status`, `diff` and dry-run restore planning (which hold the store lock)
//! ask for a hash-only scan (`op: scan`) at the catalog generation they read; the
//! watcher answers from its in-memory index (loading index file + token if
//! it has none) or refuses, and the command then scans by itself. A
//! hash-only scan never updates the in-memory index (the hashes it computes
//! are not stored objects).
//!
//! Restore's own writes are marked dirty like any others; they stat-match the
//! index restore writes, so they are relisted once and never reported.
//!
//! ## Blind spots (documented in docs/WATCH.md)
//! Writes through a shared `mmap` do not generate `IN_MODIFY`; changes made
//! on another machine (network filesystems) generate no events; a file
//! hard-linked from outside the workspace (or to another directory inside
//! it) changed through the other name produces an event only in that other
//! directory. Use `ckpt save --full-scan` (or `CKPT_FULL_SCAN=1`) where those
//! matter.

pub mod client;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Version of the socket protocol; a mismatch is a refusal (full scan).
/// 2: a scan's trees travel as base64 strings ([`ScanReply::new_trees`]).
pub const PROTOCOL: u32 = 2;

/// The socket beside the store.
pub fn socket_path(store: &Path) -> PathBuf {
    store.join(crate::store::WATCH_SOCKET)
}

/// Longest socket path `bind` and `connect` take (`sockaddr_un.sun_path`,
/// less its NUL).
const SUN_PATH_MAX: usize = 107;

/// Runs `f` (a `bind` or `connect`) with a path naming the store's socket
/// that fits in a `sockaddr_un`: [`socket_path`] when it does, else the
/// same file reached through an open descriptor of the store directory
/// (`/proc/self/fd/N/watch.sock`; the kernel resolves the descriptor's
/// link like any directory). A store under a long home or workspace name
/// (a fork's, in the data directory) would otherwise have no watcher, and
/// every hook would start one that fails.
pub fn with_socket_path<T>(
    store: &Path,
    f: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use std::os::fd::AsRawFd;
    let full = socket_path(store);
    if full.as_os_str().len() <= SUN_PATH_MAX {
        return f(&full);
    }
    let dir = rustix::fs::open(
        store,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let short = PathBuf::from(format!(
        "/proc/self/fd/{}/{}",
        dir.as_raw_fd(),
        crate::store::WATCH_SOCKET
    ));
    f(&short)
}

/// The token file.
pub fn token_path(store: &Path) -> PathBuf {
    store.join(crate::store::WATCH_TOKEN)
}

/// The lock a running watcher holds (one watcher per store).
pub fn lock_path(store: &Path) -> PathBuf {
    store.join(crate::store::WATCH_LOCK)
}

/// The log of a `--daemon` watcher.
pub fn log_path(store: &Path) -> PathBuf {
    store.join(crate::store::WATCH_LOG)
}

/// What a client asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The dirty directories since `seq` of `epoch`.
    Dirty,
    /// Forget marks `≤ seq` of `epoch` (the token was recorded).
    Ack,
    /// Describe yourself.
    Status,
    /// Exit.
    Stop,
    /// Save a checkpoint in the watcher's process, from its in-memory
    /// index (see "The in-memory engine" above).
    Save,
    /// Hash-only scan from the in-memory index (status, diff, restore
    /// planning), for a client that holds the store lock at `generation`.
    Scan,
    /// Restore in place in the watcher's process, from and into its
    /// in-memory index (see "The in-memory engine" above).
    Restore,
    /// Write the in-memory index and its token now, if they are newer than
    /// the files: for a command about to rely on the on-disk index and
    /// token (`ckpt fork` asks before it takes the store lock; with the
    /// lock busy the watcher writes later, as usual).
    Persist,
    /// `lstat` every entry of the trees in [`Request::warm`] in the
    /// background, at the lowest priority, and answer at once: forks that
    /// were made without a scan of their snapshot (see
    /// [`crate::daemon::warm`]).
    Warm,
}

/// What an in-place restore asks (`op: restore`; never a dry run).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RestoreParams {
    /// The checkpoint to restore.
    pub rev: String,
    /// What to restore.
    pub opts: crate::engine::restore::RestoreJob,
    /// How long to wait for the store lock, ms.
    pub lock_timeout_ms: u64,
}

/// What a hash-only scan in the watcher found (`op: scan`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScanReply {
    /// Root tree hash.
    pub root: [u8; 32],
    /// Trees built (changed directories): hash and encoding, each as a
    /// pair of base64 strings on the wire ([`trees_base64`]).
    #[serde(with = "trees_base64")]
    pub new_trees: Vec<([u8; 32], Vec<u8>)>,
    /// Entries that would be skipped.
    pub skipped: Vec<crate::store::catalog::Skipped>,
    /// Entries it was not allowed to read (absent from older watchers).
    #[serde(default)]
    pub unreadable: Vec<crate::workspace::scan::Unreadable>,
    /// Entries visited.
    pub entries: u64,
    /// Files hashed.
    pub files_read: u64,
    /// How the watcher scanned.
    pub scan: String,
}

/// The trees of a [`ScanReply`] on the wire: `[[hash, encoding], …]`, each
/// a base64 string. As JSON arrays of numbers they took several bytes a
/// byte, and parsing them was a visible part of a `ckpt status` served by
/// the watcher (the trees of the directories on the path to one edited
/// file).
mod trees_base64 {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    type Trees = Vec<([u8; 32], Vec<u8>)>;

    pub fn serialize<S: Serializer>(trees: &Trees, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            trees
                .iter()
                .map(|(h, b)| (STANDARD.encode(h), STANDARD.encode(b))),
        )
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Trees, D::Error> {
        let wire = Vec::<(String, String)>::deserialize(d)?;
        wire.into_iter()
            .map(|(h, b)| {
                let hash = STANDARD.decode(h).map_err(D::Error::custom)?;
                let hash = <[u8; 32]>::try_from(hash)
                    .map_err(|_| D::Error::custom("a tree hash that is not 32 bytes"))?;
                Ok((hash, STANDARD.decode(b).map_err(D::Error::custom)?))
            })
            .collect()
    }
}

/// What `save` records (`op: save`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SaveParams {
    /// Message.
    pub message: String,
    /// Tags.
    pub tags: std::collections::BTreeMap<String, String>,
    /// Record a checkpoint even if nothing changed.
    pub allow_empty: bool,
    /// How long to wait for the store lock, ms.
    pub lock_timeout_ms: u64,
}

/// What a `save` through the watcher did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SaveReply {
    /// A new checkpoint was recorded (`checkpoint` is it); else
    /// `checkpoint` is the unchanged head.
    pub saved: bool,
    /// The new checkpoint, or the head.
    pub checkpoint: Option<crate::store::catalog::Checkpoint>,
    /// Entries visited by the scan.
    pub entries: u64,
    /// Files read.
    pub files_read: u64,
    /// Objects stored.
    pub new_objects: u64,
    /// Bytes stored.
    pub new_bytes: u64,
    /// Entries it was not allowed to read (absent from older watchers).
    #[serde(default)]
    pub unreadable: Vec<crate::workspace::scan::Unreadable>,
    /// How the watcher scanned.
    pub scan: String,
}

/// A request (one line of JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    /// [`PROTOCOL`].
    pub v: u32,
    /// What.
    pub op: Op,
    /// Epoch of the client's token (0: none).
    #[serde(default)]
    pub epoch: u64,
    /// Sequence number of the client's token.
    #[serde(default)]
    pub seq: u64,
    /// For `save`.
    #[serde(default)]
    pub save: Option<SaveParams>,
    /// For `restore`.
    #[serde(default)]
    pub restore: Option<RestoreParams>,
    /// For `scan`: the catalog generation the client holds the lock at.
    #[serde(default)]
    pub generation: u64,
    /// For `warm`: the directories to walk.
    #[serde(default)]
    pub warm: Vec<PathBuf>,
}

impl Request {
    /// A request for `op` with no token and no parameters.
    pub fn new(op: Op) -> Request {
        Request {
            v: PROTOCOL,
            op,
            epoch: 0,
            seq: 0,
            save: None,
            restore: None,
            generation: 0,
            warm: Vec::new(),
        }
    }
}

/// A watcher's description of itself (`ckpt watch --status`): its epoch
/// and the rest, which the wire carries as one flat object.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WatchStatus {
    /// Current epoch (a random u64: `--json` writes it as a decimal string,
    /// which JSON readers that use doubles do not round).
    pub epoch: u64,
    /// Everything else.
    #[serde(flatten)]
    pub facts: WatcherFacts,
}

/// What a watcher says about itself besides its epoch ([`WatchStatus`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WatcherFacts {
    /// Process id.
    pub pid: u32,
    /// The workspace root.
    pub root: PathBuf,
    /// Current sequence number.
    pub seq: u64,
    /// Directories watched.
    pub watches: u64,
    /// Dirty directories not yet acknowledged by a save.
    pub dirty: u64,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Seconds since start.
    pub uptime_secs: f64,
    /// Milliseconds the initial walk took (None until done).
    pub startup_ms: Option<f64>,
    /// Can it vouch for completeness?
    pub complete: bool,
    /// If not, why.
    pub reason: Option<String>,
    /// Queue overflows survived (each forced a re-walk and a new epoch).
    pub overflows: u64,
    /// Auto-save quiet period, seconds.
    pub auto_save_secs: Option<f64>,
    /// Auto-saves started.
    pub auto_saves: u64,
    /// Seconds without a request after which the watcher stops itself
    /// (started by `ckpt hook`); `None`: it runs until stopped.
    #[serde(default)]
    pub idle_stop_secs: Option<u64>,
    /// Trees asked to be warmed ([`Op::Warm`]) whose walk has not ended.
    #[serde(default)]
    pub warming: u64,
    /// Entries `lstat`ed by those walks so far.
    #[serde(default)]
    pub warmed_entries: u64,
}

/// A response (one line of JSON).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Response {
    /// [`PROTOCOL`].
    pub v: u32,
    /// A refusal or failure.
    pub error: Option<String>,
    /// The watcher's epoch.
    pub epoch: u64,
    /// Its sequence number after draining the queue.
    pub seq: u64,
    /// Whether it can vouch for completeness.
    pub complete: bool,
    /// If not, why.
    pub reason: Option<String>,
    /// For `dirty` with a matching epoch: directories (workspace-relative
    /// byte paths, `[]` is the root) marked after the client's `seq`.
    pub dirs: Option<Vec<Vec<u8>>>,
    /// For `status`.
    pub status: Option<WatchStatus>,
    /// For `save`.
    pub saved: Option<SaveReply>,
    /// For `scan`.
    pub scanned: Option<ScanReply>,
    /// For `restore`: what it did, and how the watcher scanned.
    pub restored: Option<(crate::engine::restore::RestoreOutcome, String)>,
}

/// The token recorded with the index (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    /// Watcher epoch.
    pub epoch: u64,
    /// Sequence number drained before the scan started.
    pub seq: u64,
    /// Catalog generation of the index.
    pub generation: u64,
    /// BLAKE3 of `.ckptignore` (hex; empty when absent).
    pub ignore: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan's trees cross the socket as base64 and come back the same
    /// bytes (an empty tree too); a hash that is not 32 bytes is refused.
    #[test]
    fn scan_trees_round_trip_as_base64() {
        let reply = ScanReply {
            root: [7; 32],
            new_trees: vec![([1; 32], (0..=255).collect()), ([2; 32], Vec::new())],
            skipped: Vec::new(),
            unreadable: Vec::new(),
            entries: 3,
            files_read: 1,
            scan: "partial scan".into(),
        };
        let line = serde_json::to_string(&reply).unwrap();
        assert!(
            line.contains("\"AQEB"),
            "base64 strings on the wire: {line}"
        );
        let back: ScanReply = serde_json::from_str(&line).unwrap();
        assert_eq!(back.new_trees, reply.new_trees);
        let short = line.replacen("AQEB", "", 1);
        let err = serde_json::from_str::<ScanReply>(&short).unwrap_err();
        assert!(err.to_string().contains("not 32 bytes"), "{err}");
    }

    /// A store whose socket path is longer than a `sockaddr_un` holds is
    /// still bound and reached (through the directory's descriptor), and a
    /// short one by its own path.
    #[test]
    fn a_socket_under_a_long_path_binds_and_connects() {
        use std::io::{Read, Write};
        use std::os::unix::net::{UnixListener, UnixStream};
        let tmp = tempfile::tempdir().unwrap();
        for name in ["s", &"long-store-name-".repeat(8)] {
            let store = tmp.path().join(name);
            std::fs::create_dir(&store).unwrap();
            assert_eq!(
                socket_path(&store).as_os_str().len() > SUN_PATH_MAX,
                name.len() > 1
            );
            let listener = with_socket_path(&store, |p| UnixListener::bind(p)).unwrap();
            assert!(socket_path(&store).exists(), "the socket is in the store");
            let mut client = with_socket_path(&store, |p| UnixStream::connect(p)).unwrap();
            client.write_all(b"x").unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            let mut got = [0u8; 1];
            conn.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"x");
        }
    }
}
