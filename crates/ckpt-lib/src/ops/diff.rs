//! `ckpt diff`: two checkpoints, or a checkpoint and the working directory,
//! with content diffs of files and the agent-state changes.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use super::json::{schema_via, ChangeForm, Schema, StateChangeForm};
use super::Context;
use crate::engine::diff::{self, Change, ContentDiff, PathFilter, TreeSource};
use crate::store::catalog::Checkpoint;
use crate::store::state::{self, StateDiff};
use crate::store::tree::{Entry, Node};
use crate::store::Store;
use crate::workspace::Workspace;
use crate::{Error, Hash, Result};

/// What [`diff()`] compares.
#[derive(Clone, Debug, Default)]
pub struct DiffOptions {
    /// From (default `HEAD`).
    pub from: Option<String>,
    /// To (default: the working directory).
    pub to: Option<String>,
    /// Only these paths (relative to the context's directory); all when
    /// empty. The agent state is compared only for the whole workspace.
    pub paths: Vec<PathBuf>,
    /// Also compute the content diff of each changed file.
    pub content: bool,
    /// Compare with this fork's checkpoint (`to`, default the fork's head,
    /// names a checkpoint of the fork's store).
    pub fork: Option<PathBuf>,
}

/// One changed path. JSON: the change (`path`, `status`, `old`, `new`)
/// with `diff`, or `binary` with `old_size` and `new_size`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChangedPath {
    /// What changed.
    #[serde(flatten, serialize_with = "change")]
    #[schemars(with = "ChangeForm<'static>")]
    pub change: Change,
    /// Its content diff, when asked for and when either side is a file.
    #[serde(flatten, serialize_with = "content")]
    #[schemars(with = "ContentForm<'static>")]
    pub content: Option<ContentDiff>,
}

fn change<S: Serializer>(c: &Change, s: S) -> std::result::Result<S::Ok, S::Error> {
    ChangeForm::from(c).serialize(s)
}

/// `{diff}`, `{binary, old_size, new_size}`, or nothing.
/// A content diff: the unified diff of text, the sizes of binary content,
/// or nothing (not asked for, or neither side a file). `None` is a variant,
/// not an `Option`, so that the schema of the flattened choice allows no
/// keys as well.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum ContentForm<'a> {
    Text {
        diff: &'a str,
    },
    Binary {
        binary: bool,
        old_size: u64,
        new_size: u64,
    },
    None {},
}

fn content<S: Serializer>(c: &Option<ContentDiff>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match c {
        None => ContentForm::None {}.serialize(s),
        Some(ContentDiff::Text(t)) => ContentForm::Text { diff: t }.serialize(s),
        Some(ContentDiff::Binary { old_size, new_size }) => ContentForm::Binary {
            binary: true,
            old_size: *old_size,
            new_size: *new_size,
        }
        .serialize(s),
    }
}

/// What [`diff()`] found.
#[derive(Debug)]
pub struct DiffReport {
    /// The `from` checkpoint.
    pub from: Checkpoint,
    /// The `to` checkpoint; `None` for the working directory.
    pub to: Option<Checkpoint>,
    /// The changed paths that matter (see [`Change::is_interesting`]).
    pub changes: Vec<ChangedPath>,
    /// The agent-state side (None: paths were given, or no state store).
    pub state: Option<StateDiff>,
    /// The fork whose checkpoint `to` is (`diff --fork`).
    pub fork: Option<PathBuf>,
}

impl DiffReport {
    /// How the `to` side is named: its id, or `workdir`.
    pub fn to_label(&self) -> String {
        match (&self.fork, &self.to) {
            (Some(f), Some(c)) => format!("{}#{}", f.display(), c.id()),
            _ => self.to.as_ref().map_or("workdir".to_string(), |c| c.id()),
        }
    }
}

/// The JSON form of a [`DiffReport`]: `from`, `to` (its label),
/// `fork`, `changes`, `state_from`, `state_to`, `state_changes`.
#[derive(Serialize, JsonSchema)]
struct DiffForm<'a> {
    schema: Schema,
    from: String,
    to: String,
    fork: Option<String>,
    changes: &'a [ChangedPath],
    state_from: Option<u64>,
    state_to: Option<u64>,
    state_changes: Vec<StateChangeForm<'a>>,
}

schema_via!(DiffReport => DiffForm<'static>);

impl Serialize for DiffReport {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let state_changes = self.state.as_ref().map_or(&[][..], |s| &s.changes[..]);
        DiffForm {
            schema: Schema,
            from: self.from.id(),
            to: self.to_label(),
            fork: self.fork.as_ref().map(|f| f.display().to_string()),
            changes: &self.changes,
            state_from: self.state.as_ref().map(|s| s.from),
            state_to: self.state.as_ref().map(|s| s.to),
            state_changes: state_changes.iter().map(StateChangeForm::from).collect(),
        }
        .serialize(s)
    }
}

/// Compares two checkpoints, or a checkpoint and the working directory.
pub fn diff(ctx: &Context, opts: &DiffOptions) -> Result<DiffReport> {
    let ws = ctx.workspace()?;
    if let Some(dir) = &opts.fork {
        return diff_fork(ctx, &ws, dir, opts);
    }
    let store = ws.open_store_read_only(&ctx.config)?;
    let filter = PathFilter::new(ctx.rel_paths(&ws, &opts.paths)?);
    // Scan first when the working directory is one side (it needs no read txn).
    let scan = match opts.to {
        None => Some(ctx.scan_hash_only(&ws, &store)?),
        Some(_) => None,
    };
    let r = store.catalog.reader()?;
    let from = r.resolve(opts.from.as_deref().unwrap_or("HEAD"))?;
    let to = opts.to.as_deref().map(|b| r.resolve(b)).transpose()?;
    let to_root = match (&to, &scan) {
        (Some(cp), _) => cp.root,
        (None, Some(s)) => s.root,
        (None, None) => unreachable!("the working directory side was scanned"),
    };
    let src = TreeSource {
        fresh: scan.as_ref().map(|s| &s.new_trees),
        catalog: &r,
    };
    let all = diff::diff_trees(&src, Some(from.root), Some(to_root), &filter)?;
    // Agent state is not a path: `-- PATHS` leaves it out.
    let state = match filter.is_all() {
        true => state::diff(&store.state, &from, to.as_ref())?,
        false => None,
    };
    let mut report = DiffReport {
        from,
        to,
        changes: Vec::new(),
        state,
        fork: None,
    };
    let to_label = report.to_label();
    for c in all.into_iter().filter(Change::is_interesting) {
        let content = match opts.content {
            true => content_diff(
                &ws,
                &store,
                &c,
                &report.from.id(),
                &to_label,
                report.to.is_none(),
                None,
            )?,
            false => None,
        };
        report.changes.push(ChangedPath { change: c, content });
    }
    Ok(report)
}

/// The content diff of one change: objects from the store, or (for the
/// working-directory side, when the scan only hashed it) the file itself.
fn content_diff(
    ws: &Workspace,
    store: &Store,
    c: &Change,
    from_label: &str,
    to_label: &str,
    to_workdir: bool,
    other: Option<&Store>,
) -> Result<Option<ContentDiff>> {
    let file = |e: &Option<Entry>| match e.as_ref().map(|e| &e.node) {
        Some(Node::File { hash, .. }) => Some(*hash),
        _ => None,
    };
    let (old, new) = (file(&c.old), file(&c.new));
    if old.is_none() && new.is_none() {
        return Ok(None);
    }
    let read = |h: Option<Hash>, from_workdir: bool| -> Result<Vec<u8>> {
        match h {
            None => Ok(Vec::new()),
            Some(h) if store.objects.contains(&h) => store.objects.read_object(&h),
            Some(h) if other.is_some_and(|o| o.objects.contains(&h)) => {
                other.expect("checked").objects.read_object(&h)
            }
            Some(_) if from_workdir => {
                let p = ws.root.join(ckpt_fs::fs::as_path(&c.path));
                match std::fs::read(&p) {
                    // It vanished after the scan: show it as empty now.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                    r => r.map_err(|e| Error::io("read", p, e)),
                }
            }
            Some(h) => Err(Error::Corrupt(format!("object {h} is missing"))),
        }
    };
    let old_bytes = read(old, false)?;
    let new_bytes = read(new, to_workdir)?;
    let label = String::from_utf8_lossy(&c.path);
    Ok(Some(diff::unified(
        &old_bytes,
        &new_bytes,
        &format!("{from_label}/{label}"),
        &format!("{to_label}/{label}"),
    )))
}

/// `diff --fork DIR`: this workspace's checkpoint `from` (default HEAD)
/// against the fork's checkpoint `to` (default the fork's head). The fork's
/// trees are read from its store (opened read-only); no agent state is
/// compared (state versions are per store).
fn diff_fork(ctx: &Context, ws: &Workspace, dir: &Path, opts: &DiffOptions) -> Result<DiffReport> {
    let fork = super::adopt::fork_workspace(ctx, ws, dir)?;
    let fork_store = fork.open_store_read_only(&ctx.config)?;
    let store = ws.open_store_read_only(&ctx.config)?;
    let filter = PathFilter::new(ctx.rel_paths(ws, &opts.paths)?);
    let fr = fork_store.catalog.reader()?;
    let to = fr.resolve(opts.to.as_deref().unwrap_or("HEAD"))?;
    let fork_trees: std::collections::HashMap<Hash, Vec<u8>> =
        crate::engine::fork::inherit::closure(&fr, to.root)?
            .0
            .into_iter()
            .collect();
    let r = store.catalog.reader()?;
    let from = r.resolve(opts.from.as_deref().unwrap_or("HEAD"))?;
    let src = TreeSource {
        fresh: Some(&fork_trees),
        catalog: &r,
    };
    let all = diff::diff_trees(&src, Some(from.root), Some(to.root), &filter)?;
    let mut report = DiffReport {
        from,
        to: Some(to),
        changes: Vec::new(),
        state: None,
        fork: Some(fork.root.clone()),
    };
    let to_label = report.to_label();
    for c in all.into_iter().filter(Change::is_interesting) {
        let content = match opts.content {
            true => content_diff(
                ws,
                &store,
                &c,
                &report.from.id(),
                &to_label,
                false,
                Some(&fork_store),
            )?,
            false => None,
        };
        report.changes.push(ChangedPath { change: c, content });
    }
    Ok(report)
}
