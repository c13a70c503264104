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
    /// List the checkpoints of this workspace on a remote (a name or URL).
    #[arg(long, value_name = "REMOTE")]
    remote: Option<String>,
    /// With --remote: the workspace name there.
    #[arg(long, value_name = "NAME", requires = "remote")]
    workspace: Option<String>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt log`.
pub fn run(ctx: &Ctx, args: &LogArgs) -> Result<()> {
    if let Some(remote) = &args.remote {
        return remote_log(ctx, args, remote);
    }
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

fn remote_log(ctx: &Ctx, args: &LogArgs, remote: &str) -> Result<()> {
    let opts = ckpt_remote::log::LogOptions {
        remote: Some(remote),
        workspace: args.workspace.as_deref(),
        limit: args.limit,
        settings: &ctx.remote,
    };
    let rep = ckpt_remote::log::log(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    if rep.total == 0 && !ctx.quiet {
        println!(
            "{} has no checkpoints of workspace {}",
            rep.url, rep.workspace
        );
    }
    for r in &rep.checkpoints {
        println!(
            "{}  v{:<4} {}  {}",
            &r.id[..12],
            r.seq,
            ckpt_lib::ops::json::time(r.identity.time_ns),
            r.identity.message
        );
    }
    Ok(())
}
