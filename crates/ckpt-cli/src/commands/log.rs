//! `ckpt log`: list checkpoints, newest first.

use ckpt_lib::ops;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

/// Arguments of `ckpt log`.
#[derive(clap::Args)]
pub struct LogArgs {
    /// Show at most N.
    #[arg(short = 'n', long)]
    limit: Option<usize>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt log`.
pub fn run(ctx: &Ctx, args: &LogArgs) -> Result<()> {
    let opts = ops::log::LogOptions { limit: args.limit };
    let rep = ops::log::log(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    // Only when there are none: `-n 0` with checkpoints prints nothing.
    if rep.total == 0 && !ctx.quiet {
        println!("no checkpoints yet: run `ckpt save`");
    }
    for c in &rep.checkpoints {
        println!("{}", render::checkpoint_line(c, rep.head));
    }
    Ok(())
}
