//! `ckpt log`: list checkpoints, newest first.

use ckpt_lib::ops;
use std::path::PathBuf;

use ckpt_lib::Error;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt log`.
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
    /// Only the checkpoints an agent harness recorded in this session (its
    /// `session` tag).
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// List the checkpoints of this workspace on a remote (a name or URL).
    #[arg(long, value_name = "REMOTE", conflicts_with_all = ["before", "search", "path", "session"])]
    remote: Option<String>,
    /// With --remote: the workspace name there.
    #[arg(long, value_name = "NAME", requires = "remote")]
    workspace: Option<String>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt log`.
pub fn run(ctx: &Ctx, args: &LogArgs) -> std::result::Result<(), crate::exit::Error> {
    if let Some(remote) = &args.remote {
        return Ok(remote_log(ctx, args, remote)?);
    }
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
        session: args.session.clone(),
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
        && (args.search.is_some() || args.path.is_some() || args.session.is_some())
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

fn remote_log(ctx: &Ctx, args: &LogArgs, remote: &str) -> ckpt_remote::Result<()> {
    let opts = ckpt_remote::log::LogOptions {
        remote: Some(remote),
        workspace: args.workspace.as_deref(),
        limit: args.limit,
        settings: ctx.remote()?,
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
