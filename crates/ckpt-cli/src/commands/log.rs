//! `ckpt log`: list checkpoints, newest first.

use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

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
    cmd_log(ctx, args.limit, args.json)
}

fn cmd_log(ctx: &Ctx, limit: Option<usize>, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store_read_only(&ctx.ops.config)?;
    let r = store.catalog.reader()?;
    let head = r.head()?;
    let mut cps = r.checkpoints()?;
    cps.reverse();
    cps.truncate(limit.unwrap_or(usize::MAX));
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "head": head.map(|h| format!("v{h}")),
            "checkpoints": cps.iter().map(|c| render::checkpoint_json(c, head)).collect::<Vec<_>>(),
        }));
    } else {
        if cps.is_empty() && !ctx.quiet {
            println!("no checkpoints yet: run `ckpt save`");
        }
        for c in &cps {
            println!("{}", render::checkpoint_line(c, head));
        }
    }
    Ok(())
}
