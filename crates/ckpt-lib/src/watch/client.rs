//! The client side of watch mode: before a scan, ask the workspace's watcher
//! (if one is live) which directories changed since the token recorded with
//! the index, and decide between a partial and a full scan.
//!
//! Invariants: a partial scan is planned only when the watcher answered
//! `complete` for the token's epoch, the token's generation and
//! `.ckptignore` hash match the store's, and the socket is a socket owned by
//! the current user (a socket planted by someone else is never spoken to).
//! Any error, timeout or refusal means a full scan; the reason is kept as a
//! [`Notes`] entry that the CLI prints under `--verbose`. The token is
//! written only after the index of the scan it belongs to was saved
//! ([`Client::record`], called by [`crate::ops`] once the engine has kept
//! the index); see the argument in [`crate::watch`].
//!
//! A [`Client`] carries what used to be process-wide: whether scans are
//! forced full (`--full-scan`) and where notes go. The front door makes one
//! per operation.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use std::sync::Mutex;
use std::time::Duration;

use super::{lock_path, socket_path, token_path, Op, Request, Response, Token, PROTOCOL};
use crate::store::lock::Lock;
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{Error, Result as CkptResult};

/// How long a command waits for the watcher before scanning without it.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What happened with the watcher during one operation, for `--verbose`.
#[derive(Debug, Default)]
pub struct Notes(Mutex<Vec<String>>);

impl Notes {
    /// Adds a note.
    pub fn push(&self, s: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }

    /// Everything noted so far.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A command's side of the watcher: asks it, and notes what happened.
#[derive(Clone, Copy, Debug)]
pub struct Client<'n> {
    /// Never ask the watcher (`--full-scan`): every scan is a full one.
    pub full_scan: bool,
    /// Where the notes go.
    pub notes: &'n Notes,
}

/// How to scan.
#[derive(Debug)]
pub enum Plan {
    /// Scan everything; record `token` (if any) after the index is saved.
    Full {
        /// The watcher's current position, when it is live and complete.
        token: Option<Token>,
    },
    /// Relist only `dirs` (plus the path from the root to each).
    Partial {
        /// Dirty directories.
        dirs: HashSet<Vec<u8>>,
        /// The token to record after the index is saved.
        token: Token,
    },
}

/// Refuses a socket that is not a socket owned by the current user.
pub fn check_socket(path: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if !m.file_type().is_socket() {
        return Err(format!("{} is not a socket; ignoring it", path.display()));
    }
    if m.uid() != me {
        return Err(format!(
            "{} is owned by uid {}, not by you (uid {me}); refusing to use it",
            path.display(),
            m.uid()
        ));
    }
    Ok(())
}

/// Sends one request to the watcher of the store at `store` and reads the
/// answer.
pub fn request(store: &Path, op: Op, epoch: u64, seq: u64) -> Result<Response, String> {
    let req = Request {
        epoch,
        seq,
        ..Request::new(op)
    };
    exchange(store, &req, TIMEOUT)
}

fn exchange(store: &Path, req: &Request, timeout: Duration) -> Result<Response, String> {
    let resp = exchange_any(store, req, timeout)?;
    if resp.v != PROTOCOL {
        return Err(format!(
            "the watcher speaks protocol {}, this ckpt {PROTOCOL}: restart it \
             (`ckpt watch --stop`, then `ckpt watch`)",
            resp.v
        ));
    }
    if let Some(e) = resp.error {
        return Err(format!("watcher refused: {e}"));
    }
    Ok(resp)
}

/// [`exchange`] without the checks of the answer's version and error.
fn exchange_any(store: &Path, req: &Request, timeout: Duration) -> Result<Response, String> {
    let path = socket_path(store);
    let (stream, fail) = send_on(&path, req)?;
    stream.set_read_timeout(Some(timeout)).ok();
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(|e| fail("receive", e))?;
    serde_json::from_str(&answer)
        .map_err(|e| format!("{}: bad answer from watcher: {e}", path.display()))
}

/// Sends `req` to the watcher of the store at `store` and hangs up without
/// reading the answer (the watcher ignores a peer that is gone).
fn send(store: &Path, req: &Request) -> Result<(), String> {
    send_on(&socket_path(store), req).map(drop)
}

/// Connects to the socket at `path` and sends `req`; the stream, and how to
/// word a later failure on it.
fn send_on<'a>(
    path: &'a Path,
    req: &Request,
) -> Result<(UnixStream, impl Fn(&str, std::io::Error) -> String + 'a), String> {
    check_socket(path)?;
    let fail = move |what: &str, e: std::io::Error| format!("{}: {what}: {e}", path.display());
    let stream = match path.parent() {
        Some(store) if path.file_name() == Some(crate::store::WATCH_SOCKET.as_ref()) => {
            super::with_socket_path(store, |p| UnixStream::connect(p))
        }
        _ => UnixStream::connect(path),
    }
    .map_err(|e| fail("connect", e))?;
    stream.set_write_timeout(Some(TIMEOUT)).ok();
    let mut line = serde_json::to_vec(req).expect("request serialises");
    line.push(b'\n');
    (&stream).write_all(&line).map_err(|e| fail("send", e))?;
    Ok((stream, fail))
}

/// Asks the watcher of the store at `store` to stop and waits (up to
/// `timeout`) until it has let go of its lock. `false`: none was running.
/// An error when one holds the lock but does not answer.
///
/// A watcher of another protocol version (one started by the ckpt before
/// an upgrade) refuses the request and names its version; the request is
/// sent again in that version, whose `stop` is the same.
pub fn stop(store: &Path, timeout: Duration) -> CkptResult<bool> {
    let ask = |v| {
        let req = Request {
            v,
            ..Request::new(Op::Stop)
        };
        exchange_any(store, &req, TIMEOUT)
    };
    let answer = match ask(PROTOCOL) {
        Ok(r) if r.v != PROTOCOL => ask(r.v),
        other => other,
    };
    match answer {
        Ok(r) if r.error.is_none() => {}
        _ => {
            // Not answering: is one running at all?
            return match Lock::acquire(&lock_path(store), Duration::ZERO) {
                Ok(_) => Ok(false),
                Err(_) => Err(Error::Usage(format!(
                    "a watcher holds {} but does not answer on {}",
                    lock_path(store).display(),
                    socket_path(store).display()
                ))),
            };
        }
    }
    let _ = Lock::acquire(&lock_path(store), timeout)?;
    Ok(true)
}

/// The BLAKE3 of the workspace's `.ckptignore` (hex; empty when absent).
pub fn ignore_hash(ws: &Workspace) -> String {
    match std::fs::read(ws.root.join(crate::workspace::ignore::IGNORE_FILE)) {
        Ok(b) => crate::Hash::of(&b).to_hex(),
        Err(_) => String::new(),
    }
}

/// The recorded token, if readable.
pub fn read_token(store: &Path) -> Option<Token> {
    serde_json::from_slice(&std::fs::read(token_path(store)).ok()?).ok()
}

impl Client<'_> {
    /// Decides how to scan (called under the store lock, before the scan).
    pub fn plan(&self, ws: &Workspace, store: &Store) -> Plan {
        if self.full_scan {
            self.notes
                .push("full scan: forced (--full-scan or CKPT_FULL_SCAN)".into());
            return Plan::Full { token: None };
        }
        if !socket_path(&store.root).exists() {
            self.notes
                .push("full scan: no watcher for this workspace".into());
            return Plan::Full { token: None };
        }
        let generation = match store.catalog.reader().and_then(|r| r.generation()) {
            Ok(g) => g,
            Err(e) => {
                self.notes.push(format!("full scan: {e}"));
                return Plan::Full { token: None };
            }
        };
        let old = read_token(&store.root);
        let (epoch, seq) = old.as_ref().map_or((0, 0), |t| (t.epoch, t.seq));
        let resp = match request(&store.root, Op::Dirty, epoch, seq) {
            Ok(r) => r,
            Err(e) => {
                self.notes
                    .push(format!("full scan: watcher unavailable: {e}"));
                return Plan::Full { token: None };
            }
        };
        if !resp.complete {
            self.notes.push(format!(
                "full scan: the watcher cannot vouch for completeness: {}",
                resp.reason.as_deref().unwrap_or("unknown")
            ));
            return Plan::Full { token: None };
        }
        let token = Token {
            epoch: resp.epoch,
            seq: resp.seq,
            generation,
            ignore: ignore_hash(ws),
        };
        let why = match (&old, &resp.dirs) {
            (None, _) => Some("no save has been made through this watcher yet"),
            (Some(o), _) if o.epoch != resp.epoch => {
                Some("the watcher restarted or lost events since the last save")
            }
            (Some(o), _) if o.generation != generation => Some("gc rewrote the index"),
            (Some(o), _) if o.ignore != token.ignore => Some(".ckptignore changed"),
            (_, None) => Some("the watcher sent no dirty set"),
            _ => None,
        };
        if let Some(why) = why {
            self.notes.push(format!("full scan: {why}"));
            return Plan::Full { token: Some(token) };
        }
        let dirs: HashSet<Vec<u8>> = resp.dirs.unwrap_or_default().into_iter().collect();
        self.notes
            .push(format!("partial scan: {} dirty directories", dirs.len()));
        Plan::Partial { dirs, token }
    }

    /// Asks a live watcher to write its in-memory index and token now
    /// ([`Op::Persist`]), so that a [`plan`](Self::plan) made afterwards can
    /// vouch for them. Best effort; call it without holding the store lock.
    pub fn persist(&self, store: &Path) {
        if self.full_scan || !socket_path(store).exists() {
            return;
        }
        if let Err(e) = request(store, Op::Persist, 0, 0) {
            self.notes.push(format!("watcher persist failed: {e}"));
        }
    }

    /// Asks a live watcher to warm `dirs` ([`Op::Warm`]): forks made
    /// without a scan of their snapshot. Best effort: it sends the request
    /// and waits neither for the walk nor for the answer (which only says
    /// the walk started). The watcher serves connections in the order they
    /// were made, so a command run after this one returns finds the walk
    /// started.
    pub fn warm(&self, store: &Path, dirs: &[PathBuf]) {
        if dirs.is_empty() || !socket_path(store).exists() {
            return;
        }
        let req = Request {
            warm: dirs.to_vec(),
            ..Request::new(Op::Warm)
        };
        if let Err(e) = send(store, &req) {
            self.notes.push(format!("watcher warm failed: {e}"));
        }
    }

    /// Records `token` after the index of its scan was saved, then lets the
    /// watcher forget what it covers. Failures only cost a full scan later.
    pub fn record(&self, store: &Store, token: &Token) {
        if let Err(e) = write_token(&store.root, token) {
            self.notes
                .push(format!("could not record the watch token: {e}"));
            return;
        }
        if let Err(e) = request(&store.root, Op::Ack, token.epoch, token.seq) {
            self.notes.push(format!("watcher ack failed: {e}"));
        }
    }
}

/// Writes the token file (temp + rename; a cache, not fsynced).
pub fn write_token(store: &Path, token: &Token) -> std::io::Result<()> {
    let path = token_path(store);
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec(token).expect("token serialises");
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// How one kind of work handed to the watcher is named in `--verbose` notes.
struct Job {
    /// "saved", as in "saved by the watcher".
    done: &'static str,
    /// "save", as in "the watcher did not save".
    verb: &'static str,
    /// "saving", as in "saving here".
    here: &'static str,
}

impl Client<'_> {
    /// Hands `req` to a live watcher and returns what `pick` takes from its
    /// answer (the result and how the watcher scanned). `None`, with a note
    /// saying why, means the caller does the work itself: forced full scans,
    /// no watcher, a refusal, a failure or an answer without the result.
    fn delegate<T>(
        &self,
        store: &Path,
        req: &Request,
        timeout: Duration,
        job: Job,
        pick: impl FnOnce(Response) -> Option<(T, String)>,
    ) -> Option<T> {
        if self.full_scan || !socket_path(store).exists() {
            return None;
        }
        let Job { done, verb, here } = job;
        match exchange(store, req, timeout).map(pick) {
            Ok(Some((r, how))) => {
                self.notes.push(format!("{done} by the watcher: {how}"));
                Some(r)
            }
            Ok(None) => {
                self.notes
                    .push(format!("the watcher did not {verb}; {here} here"));
                None
            }
            Err(e) => {
                self.notes
                    .push(format!("the watcher did not {verb} ({e}); {here} here"));
                None
            }
        }
    }

    /// Asks a live watcher to save (see "The in-memory engine" in
    /// [`crate::watch`]). `None` (with a note saying why) means: save in this
    /// process instead. Called without holding the store lock.
    pub fn save(&self, ws: &Workspace, params: super::SaveParams) -> Option<super::SaveReply> {
        let lock_timeout = Duration::from_millis(params.lock_timeout_ms);
        let req = Request {
            save: Some(params),
            ..Request::new(Op::Save)
        };
        // The watcher may wait for the lock and then capture many files.
        let timeout = lock_timeout + Duration::from_secs(120);
        let job = Job {
            done: "saved",
            verb: "save",
            here: "saving",
        };
        self.delegate(&ws.store_path, &req, timeout, job, |r| {
            r.saved.map(|s| {
                let how = s.scan.clone();
                (s, how)
            })
        })
    }

    /// Asks a live watcher to restore in place (see "The in-memory engine" in
    /// [`crate::watch`]); never for a dry run. `None` (with a note saying why)
    /// means: restore in this process instead, which is safe whatever the
    /// watcher did, because an interrupted restore is finished by running it
    /// again. Called without holding the store lock.
    pub fn restore(
        &self,
        ws: &Workspace,
        rev: &str,
        opts: &crate::engine::restore::RestoreJob,
        lock_timeout: Duration,
    ) -> Option<crate::engine::restore::RestoreOutcome> {
        if opts.dry_run {
            return None;
        }
        let req = Request {
            restore: Some(super::RestoreParams {
                rev: rev.to_string(),
                opts: opts.clone(),
                lock_timeout_ms: lock_timeout.as_millis() as u64,
            }),
            ..Request::new(Op::Restore)
        };
        // The watcher may wait for the lock, then capture and write many files.
        let timeout = lock_timeout + Duration::from_secs(600);
        let job = Job {
            done: "restored",
            verb: "restore",
            here: "restoring",
        };
        self.delegate(&ws.store_path, &req, timeout, job, |r| r.restored)
    }

    /// Asks a live watcher for a hash-only scan from its in-memory index (the
    /// caller holds the store lock). `None` (with a note) means: scan here.
    pub fn scan(
        &self,
        ws: &Workspace,
        store: &Store,
    ) -> Option<crate::workspace::scan::ScanResult> {
        let generation = store.catalog.reader().and_then(|r| r.generation()).ok()?;
        let req = Request {
            generation,
            ..Request::new(Op::Scan)
        };
        let job = Job {
            done: "scanned",
            verb: "scan",
            here: "scanning",
        };
        let r = self.delegate(&ws.store_path, &req, TIMEOUT, job, |r| {
            r.scanned.map(|s| {
                let how = s.scan.clone();
                (s, how)
            })
        })?;
        Some(crate::workspace::scan::ScanResult {
            root: crate::Hash(r.root),
            new_trees: r
                .new_trees
                .into_iter()
                .map(|(h, b)| (crate::Hash(h), b))
                .collect(),
            // Read-only callers use only root, trees and skipped entries.
            index: crate::store::index::Index::default(),
            skipped: r.skipped,
            unreadable: r.unreadable,
            temp_files: Vec::new(),
            files_read: r.files_read,
            new_objects: 0,
            new_bytes: 0,
            entries: r.entries,
            dirs_listed: 0,
            dirs_unopened: 0,
            index_unchanged: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::os::unix::net::UnixListener;

    /// A watcher started by the ckpt before an upgrade speaks an older
    /// protocol: it refuses this version's `stop`, naming its own, and
    /// `stop` asks again in that version, which it obeys. (The peer here
    /// answers as protocol-1 watchers did: every field, `v: 1`.)
    #[test]
    fn stop_speaks_an_older_watchers_protocol() {
        let store = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(socket_path(store.path())).unwrap();
        let old = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for conn in listener.incoming().take(2) {
                let conn = conn.unwrap();
                let mut line = String::new();
                std::io::BufReader::new(&conn).read_line(&mut line).unwrap();
                let req: serde_json::Value = serde_json::from_str(&line).unwrap();
                let v = req["v"].as_u64().unwrap();
                seen.push((v, req["op"].as_str().unwrap().to_string()));
                let error = (v != 1).then(|| format!("protocol {v} not spoken"));
                let resp = Response {
                    v: 1,
                    error,
                    ..Response::default()
                };
                let mut out = serde_json::to_vec(&resp).unwrap();
                out.push(b'\n');
                (&conn).write_all(&out).unwrap();
            }
            seen
        });
        assert!(stop(store.path(), Duration::from_secs(5)).unwrap());
        let seen = old.join().unwrap();
        assert_eq!(
            seen,
            [(PROTOCOL as u64, "stop".into()), (1, "stop".into())],
            "asked in this version, then in the watcher's"
        );
        assert_ne!(
            PROTOCOL, 1,
            "the test needs another version than the peer's"
        );
    }
}
