//! `ckpt restore`: in place (whole workspace or some paths), through the
//! live watcher when it takes the job, else here; or `--to DIR`, a
//! checkpoint materialised into a new directory.
//!
//! Before anything else, both refuse a path spelled like one of `ckpt
//! restore`'s own flags ([`flag_like`]: `ckpt restore ID -- src --dry-run`
//! would otherwise really restore), and a path that matches nothing (in
//! place: in the checkpoint nor in the working directory, see
//! [`crate::engine::restore`]; `--to`: in the checkpoint). Either is
//! [`Error::Usage`] with nothing changed.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{with, ChangeForm, Schema, StateChangeForm, UnreadableForm};
use super::{normalize, Context};
use crate::engine::materialize::{self, MaterializeReport};
use crate::engine::restore::{RestoreJob, RestoreOutcome, Scope};
use crate::engine::scanner::Scanner;
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{Error, Result};

/// The in-place restore once the store is open and the scanner chosen:
/// [`restore`]'s "here" path, and the watcher's request handler (its
/// in-memory index), as [`crate::ops::save::save_with`] is for a save. See
/// [`crate::engine::restore`] for the steps and why an interruption is
/// safe.
pub fn restore_with(
    ws: &Workspace,
    store: &Store,
    rev: &str,
    opts: &RestoreJob,
    scanner: &mut dyn Scanner,
) -> Result<RestoreOutcome> {
    crate::engine::restore::restore(ws, store, rev, opts, scanner)
}

/// What [`restore`] brings back.
#[derive(Clone, Debug, Default)]
pub struct RestoreOptions {
    /// The checkpoint (`v12`, `HEAD~1`, a hash prefix, …).
    pub rev: String,
    /// Only these paths (relative to the context's directory); all when
    /// empty.
    pub paths: Vec<PathBuf>,
    /// Only report what would change.
    pub dry_run: bool,
    /// Do not save the current state first.
    pub no_save: bool,
    /// Files, agent state, or both.
    pub scope: Scope,
}

/// What an in-place restore did (or, dry, would do). JSON: `restored`,
/// `dry_run`, `resumed`, `undo`, `pre_save`, `post_save`, `changes`,
/// `state` (`target`, `before`, `after`, `changes`), `elapsed_ms`,
/// `unreadable`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RestoreReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The engine's report.
    #[serde(flatten, serialize_with = "outcome")]
    #[schemars(with = "OutcomeForm<'static>")]
    pub report: RestoreOutcome,
    /// It was a dry run.
    pub dry_run: bool,
    /// How long it took.
    #[serde(rename = "elapsed_ms", serialize_with = "with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// The fields of [`RestoreReport`] that come from the engine's outcome.
/// The JSON of an in-place restore's outcome (flattened into the report).
#[derive(Serialize, JsonSchema)]
struct OutcomeForm<'a> {
    restored: String,
    resumed: bool,
    undo: Option<String>,
    pre_save: Option<String>,
    post_save: Option<String>,
    changes: Vec<ChangeForm<'a>>,
    state: Option<StateForm<'a>>,
    unreadable: Vec<UnreadableForm<'a>>,
}

/// The agent-state part of a restore's outcome.
#[derive(Serialize, JsonSchema)]
struct StateForm<'a> {
    target: u64,
    before: u64,
    after: u64,
    changes: Vec<StateChangeForm<'a>>,
}

fn outcome<S: Serializer>(rep: &RestoreOutcome, s: S) -> std::result::Result<S::Ok, S::Error> {
    OutcomeForm {
        restored: rep.target.id(),
        resumed: rep.resumed,
        undo: rep.undo.map(|u| format!("v{u}")),
        pre_save: rep.pre_save.as_ref().map(|c| c.id()),
        post_save: rep.post_save.as_ref().map(|c| c.id()),
        changes: rep
            .changes
            .iter()
            .filter(|c| c.is_interesting())
            .map(ChangeForm::from)
            .collect(),
        state: rep.state.as_ref().map(|st| StateForm {
            target: st.target,
            before: st.before,
            after: st.after,
            changes: st.changes.iter().map(StateChangeForm::from).collect(),
        }),
        unreadable: rep.unreadable.iter().map(UnreadableForm::from).collect(),
    }
    .serialize(s)
}

/// What `restore --to` did. JSON: `restored`, `to`, `files`, `dirs`,
/// `bytes`, `elapsed_ms`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RestoreToReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The engine's report.
    #[serde(flatten, serialize_with = "materialized")]
    #[schemars(with = "MaterializedForm")]
    pub report: MaterializeReport,
    /// The directory written.
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    pub to: PathBuf,
    /// How long it took.
    #[serde(rename = "elapsed_ms", serialize_with = "with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// The fields of [`RestoreToReport`] that come from the engine's report.
/// The JSON of a restore into a new directory (flattened into the report).
#[derive(Serialize, JsonSchema)]
struct MaterializedForm {
    restored: String,
    files: u64,
    dirs: u64,
    bytes: u64,
}

fn materialized<S: Serializer>(
    rep: &MaterializeReport,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    MaterializedForm {
        restored: rep.target.id(),
        files: rep.files,
        dirs: rep.dirs,
        bytes: rep.bytes,
    }
    .serialize(s)
}

/// Restores the workspace in place (or, with `dry_run`, reports what that
/// would change).
pub fn restore(ctx: &Context, req: &RestoreOptions) -> Result<RestoreReport> {
    let t0 = Instant::now();
    refuse_flag_like(&req.paths)?;
    let ws = ctx.workspace()?;
    let opts = RestoreJob {
        paths: ctx.rel_paths(&ws, &req.paths)?,
        dry_run: req.dry_run,
        no_save: req.no_save,
        scope: req.scope,
    };
    // Through a live watcher when it vouches for the workspace (it keeps
    // the index in memory); otherwise here.
    if let Some(rep) = ctx
        .client()
        .restore(&ws, &req.rev, &opts, ctx.config.lock_timeout)
    {
        return Ok(RestoreReport {
            schema: Schema,
            report: rep,
            dry_run: req.dry_run,
            elapsed: t0.elapsed(),
        });
    }
    let store = ws.open_store(&ctx.config)?;
    let mut here = ctx.here(&ws, &store);
    let rep = restore_with(&ws, &store, &req.rev, &opts, &mut here.scanner);
    // A dry run and a state-only restore keep no index: their scan's token
    // is not recorded.
    let kept = !req.dry_run && req.scope != Scope::StateOnly;
    here.finish(&store, rep.is_ok() && kept);
    Ok(RestoreReport {
        schema: Schema,
        report: rep?,
        dry_run: req.dry_run,
        elapsed: t0.elapsed(),
    })
}

/// Where [`restore_to`] takes the checkpoint from.
#[derive(Clone, Copy, Debug, Default)]
pub enum Source<'a> {
    /// The store of the workspace containing the context's directory;
    /// paths are relative to the context's directory.
    #[default]
    Workspace,
    /// This store directory, with or without a workspace (`restore --store
    /// S ID --to DIR`, for a workspace that was deleted); paths are
    /// relative to the checkpoint's root.
    Store(&'a Path),
}

/// What [`restore_to`] materialises, and where.
#[derive(Clone, Debug, Default)]
pub struct RestoreToOptions<'a> {
    /// The store the checkpoint is taken from.
    pub source: Source<'a>,
    /// The checkpoint (`v12`, `HEAD~1`, a hash prefix, …).
    pub rev: String,
    /// The directory to write: new, or empty; outside the workspace and
    /// the store.
    pub to: PathBuf,
    /// Only these paths (see [`Source`] for what they are relative to);
    /// all when empty.
    pub paths: Vec<PathBuf>,
}

/// Materialises a checkpoint (optionally only some paths) into a new or
/// empty directory outside the workspace (and outside the store).
pub fn restore_to(ctx: &Context, opts: &RestoreToOptions<'_>) -> Result<RestoreToReport> {
    let t0 = Instant::now();
    let (source, rev, paths) = (opts.source, opts.rev.as_str(), &opts.paths[..]);
    refuse_flag_like(paths)?;
    let dest = ctx.abs(&opts.to);
    let (store, rel) = match source {
        Source::Workspace => {
            let ws = ctx.workspace()?;
            let rel = ctx.rel_paths(&ws, paths)?;
            if normalize(&dest).starts_with(&ws.root) {
                return Err(Error::Usage(format!(
                    "--to {} is inside the workspace; choose a directory outside it (nothing was changed)",
                    dest.display()
                )));
            }
            (ws.open_store(&ctx.config)?, rel)
        }
        Source::Store(dir) => {
            let dir = ctx.abs(dir);
            if !crate::store::Store::exists_at(&dir) {
                return Err(Error::Usage(format!(
                    "{} holds no ckpt store (nothing was changed)\n  `ckpt stores` lists the stores on this machine",
                    dir.display()
                )));
            }
            if normalize(&dest).starts_with(normalize(&dir)) {
                return Err(Error::Usage(format!(
                    "--to {} is inside the store {}; choose a directory outside it (nothing was changed)",
                    dest.display(),
                    dir.display()
                )));
            }
            let rel = paths
                .iter()
                .map(|p| checkpoint_path(p))
                .collect::<Result<Vec<_>>>()?;
            (crate::store::Store::open(&dir, &ctx.config)?, rel)
        }
    };
    {
        let reader = store.catalog.reader()?;
        let target = reader.resolve(rev)?;
        let missing = crate::engine::diff::missing_paths(&reader, target.root, &rel)?;
        if !missing.is_empty() {
            let shown: Vec<String> = missing
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            return Err(Error::Usage(format!(
                "{} not in {}; nothing was changed (paths are relative to the current directory; flags go before `--`)",
                shown.join(", "),
                target.id()
            )));
        }
    }
    let rep = materialize::restore_to(&store, rev, &dest, &rel)?;
    Ok(RestoreToReport {
        schema: Schema,
        report: rep,
        to: dest,
        elapsed: t0.elapsed(),
    })
}

/// The long flags of `ckpt restore`, its own and the global ones, as clap
/// spells them (without `--`). A restore path spelled like one of these (or
/// like [`RESTORE_SHORT_FLAGS`]) is refused: after `--` it is a path, and the
/// user almost certainly meant the flag. A test in `ckpt-cli` checks that
/// these lists cover every flag clap accepts there.
pub const RESTORE_LONG_FLAGS: &[&str] = &[
    "to",
    "store",
    "dry-run",
    "no-save",
    "files-only",
    "state-only",
    "json",
    "help",
    "lock-timeout",
    "quiet",
    "verbose",
    "full-scan",
    "version",
];

/// The short flags of `ckpt restore` (with the global ones); `-C` takes a
/// value.
pub const RESTORE_SHORT_FLAGS: &[char] = &['q', 'v', 'h', 'V', 'C'];

/// Short flags whose value may follow in the same argument (`-Cdir`).
const SHORT_WITH_VALUE: &[char] = &['C'];

/// The flag `arg` would be if clap read it as one of `ckpt restore`'s
/// flags (`--dry-run`, `--to=DIR`, `-q`, `-qv`, `-Cdir`), else None. A path
/// such as `./--dry-run` or `-x` is not flag-like.
pub fn flag_like(arg: &Path) -> Option<String> {
    let s = String::from_utf8_lossy(arg.as_os_str().as_bytes());
    if let Some(long) = s.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or_default();
        return RESTORE_LONG_FLAGS
            .contains(&name)
            .then(|| format!("--{name}"));
    }
    let shorts = s.strip_prefix('-')?;
    if shorts.is_empty() {
        return None;
    }
    for c in shorts.chars() {
        if SHORT_WITH_VALUE.contains(&c) {
            break;
        }
        if !RESTORE_SHORT_FLAGS.contains(&c) {
            return None;
        }
    }
    Some(s.into_owned())
}

/// [`Error::Usage`] naming the first flag-like path, with the hint to put
/// flags before `--`.
fn refuse_flag_like(paths: &[PathBuf]) -> Result<()> {
    let Some((p, flag)) = paths.iter().find_map(|p| flag_like(p).map(|f| (p, f))) else {
        return Ok(());
    };
    Err(Error::Usage(format!(
        "`{}` after `--` would be a path to restore, but it is spelled like the flag `{flag}`; \
         put flags before `--` (e.g. `ckpt restore --dry-run ID -- PATHS`), or write `./{}` \
         if it really is a file of that name. Nothing was changed",
        p.display(),
        p.display()
    )))
}

/// A path given with `--store` (no workspace to be relative to): relative
/// to the checkpoint's root, without `..`.
fn checkpoint_path(p: &Path) -> Result<Vec<u8>> {
    if p.is_absolute() || p.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(Error::Usage(format!(
            "{}: with --store, paths are relative to the checkpoint's root, without `..` (nothing was changed)",
            p.display()
        )));
    }
    Ok(normalize(p).as_os_str().as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::flag_like;
    use std::path::Path;

    #[test]
    fn flag_like_paths() {
        let f = |s: &str| flag_like(Path::new(s));
        assert_eq!(f("--dry-run").as_deref(), Some("--dry-run"));
        assert_eq!(f("--to=../x").as_deref(), Some("--to"));
        assert_eq!(f("--json").as_deref(), Some("--json"));
        assert_eq!(f("-q").as_deref(), Some("-q"));
        assert_eq!(f("-qv").as_deref(), Some("-qv"));
        assert_eq!(f("-Cdir").as_deref(), Some("-Cdir"));
        for not in [
            "./--dry-run",
            "-",
            "--",
            "-x",
            "-qx",
            "--dry",
            "src/--json",
            "notes.txt",
        ] {
            assert_eq!(f(not), None, "{not}");
        }
    }
}
