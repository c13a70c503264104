//! `ckpt adopt DIR[#ID]`: through [`ckpt_lib::ops::adopt`] — this workspace
//! becomes a fork's checkpoint (files and agent state), as an ordinary,
//! undoable restore.

use ckpt_lib::ops;
use ckpt_lib::ops::adopt::AdoptOptions;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt adopt`.
#[derive(clap::Args)]
pub struct AdoptArgs {
    /// The fork's directory, optionally with a checkpoint: DIR or DIR#v7
    /// (default: the fork's head).
    fork: String,
    /// Only show what would change.
    #[arg(long)]
    dry_run: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `ckpt adopt`.
pub fn run(ctx: &Ctx, args: &AdoptArgs) -> Result<()> {
    let rep = ops::adopt::adopt(
        &ctx.ops,
        &AdoptOptions {
            fork: args.fork.clone(),
            dry_run: args.dry_run,
        },
    )?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        let r = &rep.restored.report;
        println!(
            "adopted {}#{}{}: {} paths changed{} ({})",
            rep.fork.display(),
            rep.fork_checkpoint.id(),
            rep.adopted
                .as_ref()
                .map(|a| format!(" as {}", a.id()))
                .unwrap_or_default(),
            r.changes.len(),
            match (&r.pre_save, rep.restored.dry_run) {
                (_, true) => " (dry run)".to_string(),
                (Some(p), false) => format!("; undo with `ckpt restore {}`", p.id()),
                (None, false) => r
                    .undo
                    .map(|u| format!("; undo with `ckpt restore v{u}`"))
                    .unwrap_or_default(),
            },
            render::ms(rep.elapsed)
        );
    }
    Ok(())
}
