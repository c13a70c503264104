//! # The front door
//!
//! One function per user operation. Each takes the [`Context`] (where it
//! runs, with which [`Config`]) and a typed options struct, and returns a
//! typed report. This layer alone:
//!
//! - finds the workspace and turns user paths into workspace paths;
//! - opens the store and so takes its lock (read-only where it can);
//! - decides between "through the live watcher" and "here"
//!   ([`crate::watch::client`]), and records the watch token once the
//!   engine has kept the index its scan produced.
//!
//! The CLI, `ckpt mcp`, `ckpt hook` and the watcher's own request handler
//! (which runs [`crate::engine`] against its in-memory index) sit on top;
//! none of them opens a store or chooses a scan.
//!
//! | operation | function |
//! |---|---|
//! | init (new, or attached to an existing store) | [`init::init`] |
//! | save | [`save::save`] ([`save::save_with`]: the part after the choice) |
//! | log (pages, search, history of a path), show | [`log::log`], [`show::show`] |
//! | one file of a checkpoint | [`cat::cat`] |
//! | status | [`status::status`] |
//! | diff, with content diffs | [`diff::diff`] |
//! | restore in place or of paths; `--to` | [`restore::restore`] ([`restore::restore_with`]); [`restore::restore_to`] |
//! | delete | [`delete::delete`] |
//! | undo an agent's last step or turn | [`undo::undo`] |
//! | a harness hook event; harness hook configuration | [`hook::hook`]; [`agent::agent`] |
//! | tags and a note added after the save | [`annotate::annotate`] |
//! | gc and retention | [`gc::gc`] |
//! | verify (workspace or store), hash | [`verify::verify`], [`hash::hash`] |
//! | du | [`du::du`] |
//! | fork, cp | [`fork::fork`] ([`fork::fork_many`]: `--count`), [`cp::cp`] |
//! | the forks of a workspace, removing or mounting one, adopting one | [`forks::forks`], [`forks::remove`], [`forks::mount`], [`adopt::adopt`] |
//! | doctor | [`doctor::doctor`] |
//! | stores on this machine | [`stores::stores`] |
//! | agent state | [`state::get`], [`state::put`], [`state::del`], [`state::ls`], [`state::history`], [`state::cas`] |
//! | watcher status and stop | [`watch::status`], [`watch::stop`] |
//! | checkpoints out of a store and into one, for `ckpt-remote` (push, pull, clone) | [`exchange::Local`], [`exchange::Import`], [`exchange::clone_into`] |
//!
//! ## Names
//!
//! One rule for every type of the front door, so that a front end finds an
//! operation's types from its name alone:
//!
//! - The operation `ops::x::y` takes `YOptions` and returns `YReport`
//!   (`restore::restore_to`: [`restore::RestoreToOptions`] →
//!   [`restore::RestoreToReport`]). An operation with nothing to choose
//!   takes no options ([`du::du`], [`forks::forks`]).
//! - When two modules have an operation of the same name, the one outside
//!   its own module is prefixed with its module (`watch::status`:
//!   [`watch::WatchStatusOptions`], [`watch::WatchStatusReport`], beside
//!   [`status::StatusOptions`]).
//! - The parts inside options and reports are plain nouns ([`forks::ForkInfo`],
//!   [`verify::WorkspaceCheck`], [`state::Swap`], [`init::Outcome`]), never
//!   `…Options`/`…Report`.
//! - No two front-door types share a name. An engine or store type that
//!   would is renamed for what it is (`engine::save::SaveJob`,
//!   `engine::restore::RestoreJob`/`RestoreOutcome`,
//!   `engine::verify::Comparison`/`Integrity`, `store::gc::SweepReport`).
//! - Options hold what a user chooses, nothing engine-internal: a front end
//!   fills every field (e.g. [`save::SaveOptions`] has no restore journal;
//!   [`save::save_with`] makes the engine's job from it).
//!
//! Exceptions, each for a reason: `cp::cp` takes [`cp::CopyOptions`] and
//! returns [`cp::CopyReport`] because the copy engine it wraps
//! (`ckpt_fs::copytree`, a crate of its own) owns `CpOptions`/`CpReport`;
//! `fork::fork_many` takes a fork's [`fork::ForkOptions`] and a count, as
//! it makes that fork `count` times.
//!
//! ## JSON
//!
//! Every report derives `Serialize` (its JSON form: schema 1, documented
//! in `docs/CLI.md`, "JSON output") and `JsonSchema` ([`schema`]); [`json`]
//! has the shared encodings. `--json`, MCP results and (later) HTTP answers
//! are the same bytes.

pub mod adopt;
pub mod agent;
pub mod annotate;
pub mod cat;
pub mod cp;
pub mod delete;
pub mod diff;
pub mod doctor;
pub mod du;
pub mod exchange;
pub mod fork;
pub mod forks;
pub mod gc;
pub mod harness_health;
pub mod hash;
pub mod hook;
pub mod init;
pub mod json;
pub mod log;
pub mod parts;
pub mod restore;
pub mod save;
pub mod schema;
pub mod show;
pub mod state;
pub mod status;
pub mod stores;
pub mod undo;
pub mod verify;
pub mod watch;

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::engine::scanner::{OnDisk, ScanKind, ScanPlan, Scanner};
use crate::store::Store;
use crate::watch::client::{Client, Notes, Plan};
use crate::watch::Token;
use crate::workspace::scan::ScanResult;
use crate::workspace::Workspace;
use crate::{Config, Error, Result};

/// Where an operation runs: the directory it was started in (the workspace
/// is found by walking up from it, and relative paths are relative to it),
/// the configuration, and the notes it leaves for `--verbose`.
#[derive(Debug)]
pub struct Context {
    /// The directory the operation is run from (`-C DIR`).
    pub cwd: PathBuf,
    /// How ckpt runs.
    pub config: Config,
    notes: Notes,
}

impl Context {
    /// A context at `cwd`.
    pub fn new(cwd: PathBuf, config: Config) -> Context {
        Context {
            cwd,
            config,
            notes: Notes::default(),
        }
    }

    /// What happened with the watcher so far, for `--verbose`.
    pub fn notes(&self) -> Vec<String> {
        self.notes.all()
    }

    /// The workspace containing [`Context::cwd`].
    pub fn workspace(&self) -> Result<Workspace> {
        Workspace::discover(&self.cwd)
    }

    /// `path` made absolute against [`Context::cwd`].
    pub fn abs(&self, path: &Path) -> PathBuf {
        self.cwd.join(path)
    }

    /// User paths (relative to [`Context::cwd`]) as workspace-relative
    /// byte paths, lexically.
    pub fn rel_paths(&self, ws: &Workspace, paths: &[PathBuf]) -> Result<Vec<Vec<u8>>> {
        paths
            .iter()
            .map(|p| {
                let abs = normalize(&self.cwd.join(p));
                let rel = abs.strip_prefix(&ws.root).map_err(|_| {
                    Error::Usage(format!(
                        "{} is outside the workspace {}",
                        p.display(),
                        ws.root.display()
                    ))
                })?;
                Ok(rel.as_os_str().as_bytes().to_vec())
            })
            .collect()
    }

    fn client(&self) -> Client<'_> {
        Client {
            full_scan: self.config.full_scan,
            notes: &self.notes,
        }
    }

    /// The scanner of a command in this process: partial when a live
    /// watcher vouches for the rest. Call [`Here::finish`] once the engine
    /// has kept the index.
    fn here(&self, ws: &Workspace, store: &Store) -> Here<'_> {
        let t = crate::trace::span("watch plan");
        let (plan, token) = match self.client().plan(ws, store) {
            Plan::Partial { dirs, token } => (ScanPlan::Partial(dirs), Some(token)),
            Plan::Full { token } => (ScanPlan::Full, token),
        };
        drop(t);
        Here {
            ctx: self,
            scanner: OnDisk::new(plan),
            token,
        }
    }

    /// A hash-only scan of the workspace for status and diff: from a live
    /// watcher's in-memory index when it answers, else here.
    fn scan_hash_only(&self, ws: &Workspace, store: &Store) -> Result<ScanResult> {
        {
            let _t = crate::trace::span("watcher scan");
            if let Some(r) = self.client().scan(ws, store) {
                return Ok(r);
            }
        }
        let mut here = self.here(ws, store);
        let scan = here.scanner.scan(ws, store, ScanKind::HashOnly)?;
        here.finish(store, false);
        Ok(scan)
    }
}

/// A scan in this process, and the watch token to record after its index.
struct Here<'c> {
    ctx: &'c Context,
    scanner: OnDisk,
    token: Option<Token>,
}

impl Here<'_> {
    /// Keeps the scanner's notes and, when `index_kept`, records the watch
    /// token (the token never runs ahead of the index; see
    /// [`crate::watch`]).
    fn finish(self, store: &Store, index_kept: bool) {
        for n in self.scanner.notes {
            self.ctx.notes.push(n);
        }
        if let (true, Some(t)) = (index_kept, &self.token) {
            self.ctx.client().record(store, t);
        }
    }
}

/// Lexical normalisation: `.` dropped, `..` pops.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}
