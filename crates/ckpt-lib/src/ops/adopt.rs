//! `ckpt adopt DIR[#ID]`: make this workspace exactly a fork's checkpoint,
//! files and agent state.
//!
//! Two steps, each one already safe on its own:
//! 1. the fork's checkpoint (ID, default the fork's head) is brought into
//!    this workspace's store ([`crate::engine::fork::inherit::import`]: objects
//!    hard-linked or copied, its agent state committed and this store's
//!    latest state put back as it was, then one catalog transaction adding
//!    the record, tagged `adopted_from=DIR#vN`, without moving the head);
//! 2. an ordinary in-place restore to that record ([`super::restore`]):
//!    pre-saved, journalled, undoable with `ckpt restore <pre_save>`, and
//!    named in the log by the adopted record.
//!
//! A crash in 1 leaves unreferenced objects (gc) or an extra record nobody
//! restored to; a crash in 2 is a crash during a restore (the journal
//! finishes it). The fork is only read (its store opened read-only), so it
//! is unchanged either way.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::json::{with, Schema};
use super::restore::{RestoreOptions, RestoreReport};
use super::{normalize, Context};
use crate::engine::fork::inherit::{self, Placement};
use crate::engine::restore::{self, RestoreOutcome};
use crate::store::catalog::Checkpoint;
use crate::store::objects::Imported;
use crate::workspace::Workspace;
use crate::{Error, Result};

/// What [`adopt`] takes.
#[derive(Clone, Debug)]
pub struct AdoptOptions {
    /// `DIR` or `DIR#ID`: the fork (relative to the context's directory) and
    /// its checkpoint (default its head).
    pub fork: String,
    /// Only report what the restore would change: nothing is written, not
    /// even to this store (the fork's checkpoint is compared where it is).
    pub dry_run: bool,
}

/// What [`adopt`] did. JSON: `adopted` (id here; null in a dry run),
/// `fork`, `fork_checkpoint`, `objects` (`linked`, `copied`, `present`),
/// `restore` (the restore's report, with `undo` and `pre_save`; in a dry
/// run `restored` is the fork's checkpoint id), `elapsed_ms`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AdoptReport {
    /// `"schema": 1`.
    pub schema: Schema,
    /// The fork's workspace root.
    #[serde(serialize_with = "with::path")]
    #[schemars(with = "String")]
    pub fork: PathBuf,
    /// The fork's checkpoint adopted (its id in the fork's store).
    #[serde(serialize_with = "with::id")]
    #[schemars(with = "String")]
    pub fork_checkpoint: Checkpoint,
    /// The same checkpoint as recorded in this store (None in a dry run,
    /// which records nothing).
    #[serde(serialize_with = "with::opt_id")]
    #[schemars(with = "Option<String>")]
    pub adopted: Option<Checkpoint>,
    /// How its objects came over.
    #[serde(serialize_with = "with::imported")]
    #[schemars(with = "super::json::ImportedForm")]
    pub objects: Imported,
    /// The restore.
    #[serde(rename = "restore")]
    pub restored: RestoreReport,
    /// How long it took.
    #[serde(rename = "elapsed_ms", serialize_with = "with::ms")]
    #[schemars(with = "f64")]
    pub elapsed: Duration,
}

/// Splits `DIR#ID` (the last `#`, when what follows is non-empty and has
/// no `/`) into the directory and the checkpoint. [`adopt`] first takes
/// the whole argument as the directory when it names one.
pub fn split_fork_arg(arg: &str) -> (&str, Option<&str>) {
    match arg.rsplit_once('#') {
        Some((dir, id)) if !id.is_empty() && !id.contains('/') && !dir.is_empty() => {
            (dir, Some(id))
        }
        _ => (arg, None),
    }
}

/// The fork workspace at `dir` (relative to the context's directory), which
/// must be another workspace than `ws`.
pub fn fork_workspace(ctx: &Context, ws: &Workspace, dir: &Path) -> Result<Workspace> {
    let abs = normalize(&ctx.abs(dir));
    let fork = match Workspace::discover(&abs) {
        // A bad argument, not a command run outside a workspace.
        Err(Error::NotAWorkspace(_)) => {
            return Err(Error::Usage(format!(
                "{} is not a fork: it is not in any ckpt workspace; `ckpt forks` lists the forks of this one (nothing was changed)",
                abs.display()
            )))
        }
        r => r?,
    };
    if fork.root != abs.canonicalize().unwrap_or(abs.clone()) {
        return Err(Error::Usage(format!(
            "{} is not a workspace root (it is inside {}); name the fork's directory (nothing was changed)",
            abs.display(),
            fork.root.display()
        )));
    }
    if fork.root == ws.root || fork.store_path == ws.store_path {
        return Err(Error::Usage(format!(
            "{} is this workspace itself; name a fork (`ckpt forks` lists them; nothing was changed)",
            fork.root.display()
        )));
    }
    Ok(fork)
}

/// Adopts a fork's checkpoint (see the module doc).
pub fn adopt(ctx: &Context, opts: &AdoptOptions) -> Result<AdoptReport> {
    let t0 = Instant::now();
    let ws = ctx.workspace()?;
    // A fork whose directory name holds a `#` is named whole.
    let (dir, id) = match ctx.abs(Path::new(&opts.fork)).is_dir() {
        true => (opts.fork.as_str(), None),
        false => split_fork_arg(&opts.fork),
    };
    let fork = fork_workspace(ctx, &ws, Path::new(dir))?;
    if opts.dry_run {
        return dry_run(ctx, &ws, fork, id, t0);
    }
    let (fork_checkpoint, adopted, objects) = {
        let fork_store = fork.open_store_read_only(&ctx.config)?;
        let cp = fork_store.catalog.reader()?.resolve(id.unwrap_or("HEAD"))?;
        let store = ws.open_store(&ctx.config)?;
        let mut tags = BTreeMap::new();
        tags.insert(
            "adopted_from".to_string(),
            format!("{}#{}", fork.root.display(), cp.id()),
        );
        let (rec, objects) = inherit::import(
            &fork_store,
            &cp,
            &store,
            tags,
            Placement {
                seq: None,
                make_head: false,
                keep_latest_state: true,
            },
        )?;
        (cp, rec, objects)
    };
    let restored = super::restore::restore(
        ctx,
        &RestoreOptions {
            rev: adopted.id(),
            dry_run: false,
            ..RestoreOptions::default()
        },
    )?;
    Ok(AdoptReport {
        schema: Schema,
        fork: fork.root,
        fork_checkpoint,
        adopted: Some(adopted),
        objects,
        restored,
        elapsed: t0.elapsed(),
    })
}

/// `adopt --dry-run`: what the restore would change, with the fork's trees
/// read from its store and nothing written anywhere.
fn dry_run(
    ctx: &Context,
    ws: &Workspace,
    fork: Workspace,
    id: Option<&str>,
    t0: Instant,
) -> Result<AdoptReport> {
    let fork_store = fork.open_store_read_only(&ctx.config)?;
    let fr = fork_store.catalog.reader()?;
    let cp = fr.resolve(id.unwrap_or("HEAD"))?;
    let trees: HashMap<_, _> = inherit::closure(&fr, cp.root)?.0.into_iter().collect();
    let store = ws.open_store_read_only(&ctx.config)?;
    let scan = ctx.scan_hash_only(ws, &store)?;
    let changes = restore::plan_foreign(ws, &store, &scan, cp.root, &trees)?;
    Ok(AdoptReport {
        schema: Schema,
        fork: fork.root,
        fork_checkpoint: cp.clone(),
        adopted: None,
        objects: Imported::default(),
        restored: RestoreReport {
            schema: Schema,
            report: RestoreOutcome::dry_run(cp, changes, None, scan.unreadable),
            dry_run: true,
            elapsed: t0.elapsed(),
        },
        elapsed: t0.elapsed(),
    })
}
