//! `ckpt restore ID`: bring the workspace (or some paths, or another directory) back to a checkpoint.

use std::path::{Path, PathBuf};

use ckpt_lib::engine::{diff, restore};
use ckpt_lib::ops;
use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::progress;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt restore`.
#[derive(clap::Args)]
pub struct RestoreArgs {
    /// Checkpoint id.
    id: String,
    /// Materialise into this new or empty directory instead.
    #[arg(long, value_name = "DIR")]
    to: Option<PathBuf>,
    /// Only show what would change.
    #[arg(long)]
    dry_run: bool,
    /// Do not save the current state first.
    #[arg(long)]
    no_save: bool,
    /// Restore only the files, leave the agent state as it is.
    #[arg(long, conflicts_with = "state_only")]
    files_only: bool,
    /// Restore only the agent state, leave the files as they are.
    #[arg(long, conflicts_with = "to")]
    state_only: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Restore only these paths.
    #[arg(last = true)]
    paths: Vec<PathBuf>,
}

/// Runs `ckpt restore`.
pub fn run(ctx: &Ctx, args: &RestoreArgs) -> Result<()> {
    let scope = match (args.files_only, args.state_only) {
        (true, _) => restore::Scope::FilesOnly,
        (_, true) => restore::Scope::StateOnly,
        _ => restore::Scope::All,
    };
    cmd_restore(
        ctx,
        &args.id,
        args.to.as_deref(),
        args.dry_run,
        args.no_save,
        scope,
        &args.paths,
        args.json,
    )
}

#[allow(clippy::too_many_arguments)]
fn cmd_restore(
    ctx: &Ctx,
    id: &str,
    to: Option<&Path>,
    dry_run: bool,
    no_save: bool,
    scope: restore::Scope,
    paths: &[PathBuf],
    json: bool,
) -> Result<()> {
    if let Some(dest) = to {
        let spinner = progress::Spinner::start("materialising", ctx.quiet || json);
        let (rep, dest, elapsed) = ops::restore::restore_to(&ctx.ops, id, dest, paths)?;
        drop(spinner);
        if json {
            print_json(&json!({
                "schema": SCHEMA, "restored": rep.target.id(), "to": dest.display().to_string(),
                "files": rep.files, "dirs": rep.dirs, "bytes": rep.bytes,
                "elapsed_ms": elapsed.as_secs_f64() * 1e3,
            }));
        } else if !ctx.quiet {
            println!(
                "materialised {} into {}: {} files, {} directories, {} ({})",
                rep.target.id(),
                dest.display(),
                rep.files,
                rep.dirs,
                render::bytes(rep.bytes),
                render::ms(elapsed)
            );
        }
        return Ok(());
    }
    let req = ops::restore::RestoreRequest {
        rev: id.to_string(),
        paths: paths.to_vec(),
        dry_run,
        no_save,
        scope,
    };
    let (rep, elapsed) = ops::restore::restore(&ctx.ops, &req)?;
    let shown: Vec<_> = rep.changes.iter().filter(|c| c.is_interesting()).collect();
    let stats = diff::stats(&rep.changes);
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "restored": rep.target.id(),
            "dry_run": dry_run,
            "resumed": rep.resumed,
            "undo": rep.undo.map(|u| format!("v{u}")),
            "pre_save": rep.pre_save.as_ref().map(|c| c.id()),
            "changes": shown.iter().map(|c| render::change_json(c)).collect::<Vec<_>>(),
            "state": rep.state.as_ref().map(|s| json!({
                "target": s.target,
                "before": s.before,
                "after": s.after,
                "changes": s.changes.iter().map(render::state_change_json).collect::<Vec<_>>(),
            })),
            "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        }));
        return Ok(());
    }
    if dry_run {
        for c in &shown {
            println!("{}", render::change_line(c));
        }
        if let Some(s) = &rep.state {
            for c in &s.changes {
                println!("state {}", render::state_change_line(c));
            }
            println!(
                "dry run: restoring the agent state to version {} would change {} keys",
                s.target,
                s.changes.len()
            );
        }
        println!(
            "dry run: restoring {} would add {}, modify {}, delete {} files",
            rep.target.id(),
            stats.files_added,
            stats.files_modified,
            stats.files_deleted
        );
        return Ok(());
    }
    if ctx.verbose {
        for c in &shown {
            println!("{}", render::change_line(c));
        }
        for c in rep.state.iter().flat_map(|s| &s.changes) {
            println!("state {}", render::state_change_line(c));
        }
    }
    if !ctx.quiet {
        if let Some(p) = &rep.pre_save {
            println!("saved the current state as {}", p.id());
        }
        if let Some(s) = &rep.state {
            if s.changes.is_empty() {
                println!("agent state: already as at version {}", s.target);
            } else {
                println!(
                    "agent state: {} keys changed, back to version {} as new version {}",
                    s.changes.len(),
                    s.target,
                    s.after
                );
            }
        }
        if scope == restore::Scope::StateOnly {
            println!(
                "restored the agent state of {} ({}){}",
                rep.target.id(),
                render::ms(elapsed),
                rep.undo.map_or(String::new(), |u| format!(
                    "; undo with `ckpt restore v{u}`"
                ))
            );
            return Ok(());
        }
        println!(
            "{} {}: {} files written, {} removed ({}){}",
            if rep.resumed {
                "finished restoring"
            } else {
                "restored"
            },
            rep.target.id(),
            rep.written,
            rep.removed,
            render::ms(elapsed),
            rep.undo.map_or(String::new(), |u| format!(
                "; undo with `ckpt restore v{u}`"
            ))
        );
    }
    Ok(())
}
