//! `ckpt log`: list checkpoints, newest first.

use ckpt_lib::ops;
use std::path::PathBuf;

use ckpt_lib::{Error, Result};

use crate::context::Ctx;
use crate::render::{self, print_report};

/// Arguments of `ckpt log`.
#[derive(clap::Args)]
pub struct LogArgs {
    /// Show at most N.
    #[arg(short = 'n', long)]
    limit: Option<usize>,
    /// Only checkpoints older than this one (`v12` or `12`): the next page.
    #[arg(long, value_name = "ID")]
    before: Option<String>,
    /// Only checkpoints whose id, message, a tag (KEY=VALUE, save-time or
    /// annotation) or note contains TEXT (ignoring case).
    #[arg(long, value_name = "TEXT")]
    search: Option<String>,
    /// Only checkpoints that changed PATH (or something below it): its
    /// history.
    #[arg(long, value_name = "PATH")]
    path: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt log`.
pub fn run(ctx: &Ctx, args: &LogArgs) -> Result<()> {
    let before = match &args.before {
        Some(b) => Some(
            b.strip_prefix('v')
                .unwrap_or(b)
                .parse::<u64>()
                .map_err(|_| {
                    Error::Usage(format!(
                        "--before {b:?}: expected a checkpoint number like v12 (nothing was read)"
                    ))
                })?,
        ),
        None => None,
    };
    let opts = ops::log::LogOptions {
        limit: args.limit,
        before,
        search: args.search.clone(),
        path: args.path.clone(),
    };
    let rep = ops::log::log(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    // Only when there are none: `-n 0` with checkpoints prints nothing.
    if rep.total == 0 && !ctx.quiet {
        println!("no checkpoints yet: run `ckpt save`");
    } else if rep.checkpoints.is_empty()
        && (args.search.is_some() || args.path.is_some())
        && !ctx.quiet
    {
        println!("no checkpoint matches");
    }
    for c in &rep.checkpoints {
        println!(
            "{}",
            render::checkpoint_line(c, rep.head, rep.annotations.get(&c.seq))
        );
    }
    Ok(())
}
