//! The sessions a harness has run in a workspace, read from outside, so
//! that `ckpt doctor` and `ckpt status` can say when a harness with ckpt's
//! hooks installed ran a session that no hook recorded anything for (the
//! hooks were not loaded, `ckpt` was not on the harness's PATH, …).
//!
//! Each harness keeps its sessions its own way; where, and how a file
//! names its session, is in that harness's file under `harness/` (the
//! [`Spec::latest_session`](crate::harness::Spec) finder). What is the same
//! for all: only a session whose file changed after ckpt's hooks were
//! written counts (one from before could not have fired them), and the
//! session id is the one the harness's hook payloads carry, so the caller
//! can look for a checkpoint tagged with it.
//!
//! Cheap by construction: directory listings and `stat`s, plus a few
//! kilobytes of one or two files where the harness keeps sessions of every
//! project in one place (Codex, Copilot CLI) and the file says which.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::{setup, Harness, Homes};

/// A session a harness ran in the workspace after ckpt's hooks were
/// written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The harness.
    pub harness: Harness,
    /// The session id as the harness's hook payloads carry it, or its first
    /// characters when the harness's file names only those
    /// ([`Session::prefix`]).
    pub id: String,
    /// Whether [`Session::id`] is only the start of the id.
    pub prefix: bool,
    /// The file the harness keeps the session in.
    pub file: PathBuf,
    /// When that file last changed.
    pub modified: SystemTime,
    /// When ckpt's hooks were written (the configuration file's mtime):
    /// a checkpoint of this session cannot be older.
    pub since: SystemTime,
}

impl Session {
    /// Whether a checkpoint's `session` tag is this session.
    pub fn matches(&self, tag: &str) -> bool {
        if self.prefix {
            tag.starts_with(&self.id)
        } else {
            tag == self.id
        }
    }
}

/// What a finder is given: the workspace root (symbolic links resolved, as
/// the harness sees its working directory), where the harnesses keep their
/// state, and the time ckpt's hooks were written.
pub(crate) struct Query<'a> {
    pub root: &'a Path,
    pub homes: &'a Homes,
    pub since: SystemTime,
}

/// A session file the finder found: (id, prefix, file, mtime).
pub(crate) type Found = (String, bool, PathBuf, SystemTime);

/// For each harness whose hooks call ckpt in `root` and whose sessions ckpt
/// can find, the latest session it ran there after the hooks were written.
pub fn latest(root: &Path, homes: &Homes) -> Vec<Session> {
    let real = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    Harness::ALL
        .into_iter()
        .filter_map(|h| {
            let find = h.spec().latest_session?;
            let since = std::fs::metadata(root.join(h.spec().path))
                .and_then(|m| m.modified())
                .ok()?;
            if !setup::installed(root, h) {
                return None;
            }
            let (id, prefix, file, modified) = find(&Query {
                root: &real,
                homes,
                since,
            })?;
            Some(Session {
                harness: h,
                id,
                prefix,
                file,
                modified,
                since,
            })
        })
        .collect()
}

/// The entries of `dir` whose name passes `keep`, with their mtimes,
/// newer than `since`, newest first.
pub(crate) fn newer_entries(
    dir: &Path,
    since: SystemTime,
    keep: impl Fn(&str) -> bool,
) -> Vec<(PathBuf, SystemTime)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, SystemTime)> = rd
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name();
            if !keep(name.to_str()?) {
                return None;
            }
            let t = e.metadata().ok()?.modified().ok()?;
            (t > since).then(|| (e.path(), t))
        })
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.1));
    out
}

/// The first `n` bytes of a file, as text (lossy).
pub(crate) fn head(path: &Path, n: u64) -> String {
    use std::io::Read;
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(n).read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}
