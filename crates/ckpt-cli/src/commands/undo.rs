//! `ckpt undo`: back to before the agent's last file-changing tool call
//! (or, `--turn`, its last prompt), as an undoable restore
//! ([`ckpt_lib::ops::undo`]).

use ckpt_lib::ops::parts::Scope;
use ckpt_lib::ops::undo::UndoOptions;
use ckpt_lib::{ops, Result};

use crate::context::Ctx;
use crate::render::print_report;

// Arguments of `ckpt undo`.
#[derive(clap::Args)]
pub struct UndoArgs {
    /// Back to before the last prompt (the whole turn) instead of the last tool call.
    #[arg(long)]
    turn: bool,
    /// The agent session (its `session` tag; default: the latest).
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// Only list what would change.
    #[arg(long, short = 'n')]
    dry_run: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt undo`.
pub fn run(ctx: &Ctx, args: &UndoArgs) -> Result<()> {
    let r = ops::undo::undo(
        &ctx.ops,
        &UndoOptions {
            session: args.session.clone(),
            turn: args.turn,
            dry_run: args.dry_run,
        },
    )?;
    if args.json {
        print_report(&r);
        return Ok(());
    }
    if !ctx.quiet {
        println!(
            "undoing {} \"{}\" (session {}): back to {}",
            r.step.id(),
            r.step.message,
            r.session,
            r.target.id()
        );
    }
    super::restore::print_restored(ctx, &r.restored, Scope::All, true);
    Ok(())
}
