//! `ckpt restore ID`: bring the workspace (or some paths, or another directory) back to a checkpoint.

use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::ops::parts::{change_stats, Scope};
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::progress;
use crate::render::{self, print_report};

// Arguments of `ckpt restore`.
#[derive(clap::Args)]
#[command(
    after_help = "Flags go before `--`; everything after it is a path:\n  \
ckpt restore v3                          the whole workspace back to v3\n  \
ckpt restore --dry-run v3 -- src/app.py  only list what restoring src/app.py would change\n  \
ckpt restore v3 -- src/app.py            only src/app.py (then recorded as the new HEAD)\n  \
ckpt restore --to ../old v3              v3 into a new directory\n  \
ckpt restore --store S --to DIR v3       v3 of the store S (a deleted workspace's) into DIR\n\
A path after `--` that is spelled like a flag, or that matches nothing, is refused and nothing is changed."
)]
pub struct RestoreArgs {
    /// Checkpoint id.
    id: String,
    /// Materialise into this new or empty directory instead.
    #[arg(long, value_name = "DIR")]
    to: Option<PathBuf>,
    /// With --to: take the checkpoint from this store instead of the
    /// current workspace's (`ckpt stores` lists them); paths are then
    /// relative to the checkpoint's root.
    #[arg(long, value_name = "STORE", requires = "to")]
    store: Option<PathBuf>,
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
    /// Restore only these paths (after `--`; put every flag before it).
    #[arg(last = true)]
    paths: Vec<PathBuf>,
}

/// Runs `ckpt restore`.
pub fn run(ctx: &Ctx, args: &RestoreArgs) -> Result<()> {
    if let Some(dest) = &args.to {
        let spinner = progress::Spinner::start("materialising", ctx.quiet || args.json);
        let source = match &args.store {
            Some(s) => ops::restore::Source::Store(s),
            None => ops::restore::Source::Workspace,
        };
        let opts = ops::restore::RestoreToOptions {
            source,
            rev: args.id.clone(),
            to: dest.clone(),
            paths: args.paths.clone(),
        };
        let m = ops::restore::restore_to(&ctx.ops, &opts)?;
        drop(spinner);
        if args.json {
            print_report(&m);
        } else if !ctx.quiet {
            let rep = &m.report;
            println!(
                "materialised {} into {}: {}, {}, {} ({})",
                rep.target.id(),
                m.to.display(),
                render::count(rep.files, "file", "files"),
                render::count(rep.dirs, "directory", "directories"),
                render::bytes(rep.bytes),
                render::ms(m.elapsed)
            );
        }
        return Ok(());
    }
    let scope = match (args.files_only, args.state_only) {
        (true, _) => Scope::FilesOnly,
        (_, true) => Scope::StateOnly,
        _ => Scope::All,
    };
    let req = ops::restore::RestoreOptions {
        rev: args.id.clone(),
        paths: args.paths.clone(),
        dry_run: args.dry_run,
        no_save: args.no_save,
        scope,
    };
    let r = ops::restore::restore(&ctx.ops, &req)?;
    if args.json {
        print_report(&r);
        return Ok(());
    }
    print_restored(ctx, &r, scope, ctx.verbose);
    Ok(())
}

/// Prints an in-place restore for people (`list`: every changed path, as
/// `--verbose` asks and `ckpt undo` always does).
pub(super) fn print_restored(ctx: &Ctx, r: &ops::restore::RestoreReport, scope: Scope, list: bool) {
    let (rep, elapsed) = (&r.report, r.elapsed);
    render::warn_unreadable("", &rep.unreadable);
    let shown: Vec<_> = rep.changes.iter().filter(|c| c.is_interesting()).collect();
    if r.dry_run {
        let stats = change_stats(&rep.changes);
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
        return;
    }
    if list {
        for c in &shown {
            println!("{}", render::change_line(c));
        }
        for c in rep.state.iter().flat_map(|s| &s.changes) {
            println!("state {}", render::state_change_line(c));
        }
    }
    if ctx.quiet {
        return;
    }
    if let Some(p) = &rep.pre_save {
        println!("saved the current state as {}", p.id());
    }
    if let Some(p) = &rep.post_save {
        println!("recorded the restored workspace as {} (now HEAD)", p.id());
    }
    if let Some(s) = &rep.state {
        if s.changes.is_empty() {
            println!("agent state: already as at version {}", s.target);
        } else {
            println!(
                "agent state: {} changed, back to version {} as new version {}",
                render::count(s.changes.len() as u64, "key", "keys"),
                s.target,
                s.after
            );
        }
    }
    let undo = rep.undo.map_or(String::new(), |u| {
        format!("; undo with `ckpt restore v{u}`")
    });
    if scope == Scope::StateOnly {
        println!(
            "restored the agent state of {} ({}){undo}",
            rep.target.id(),
            render::ms(elapsed),
        );
        return;
    }
    println!(
        "{} {}: {} written, {} removed ({}){undo}",
        if rep.resumed {
            "finished restoring"
        } else {
            "restored"
        },
        rep.target.id(),
        render::count(rep.written, "file", "files"),
        rep.removed,
        render::ms(elapsed),
    );
}
