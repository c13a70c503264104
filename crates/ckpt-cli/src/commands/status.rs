//! `ckpt status`: what changed since the last checkpoint.

use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt status`.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Limit to paths.
    #[arg(last = true)]
    paths: Vec<PathBuf>,
}

/// Runs `ckpt status`.
pub fn run(ctx: &Ctx, args: &StatusArgs) -> Result<()> {
    cmd_status(ctx, &args.paths, args.json)
}

fn cmd_status(ctx: &Ctx, paths: &[PathBuf], json: bool) -> Result<()> {
    let opts = ops::status::StatusOptions {
        paths: paths.to_vec(),
    };
    let st = ops::status::status(&ctx.ops, &opts)?;
    let shown: Vec<_> = st.changes.iter().filter(|c| c.is_interesting()).collect();
    let state_changes = &st.state_changes;
    let clean = st.clean();
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "head": st.head.as_ref().map(|h| h.id()),
            "clean": clean,
            "changes": shown.iter().map(|c| render::change_json(c)).collect::<Vec<_>>(),
            "state_changes": state_changes.iter().map(render::state_change_json).collect::<Vec<_>>(),
            "interrupted_restore": st.journal.as_ref().map(|j| format!("v{}", j.target)),
        }));
        return Ok(());
    }
    if let Some(j) = &st.journal {
        println!(
            "warning: a restore to v{} was interrupted; run `ckpt restore v{}` to finish it",
            j.target, j.target
        );
    }
    match &st.head {
        Some(h) => println!(
            "on {}{}",
            h.id(),
            if h.message.is_empty() {
                String::new()
            } else {
                format!(": {}", h.message)
            }
        ),
        None => println!("no checkpoint yet"),
    }
    if clean {
        println!("nothing changed");
    }
    for c in &shown {
        println!("{}", render::change_line(c));
    }
    for c in state_changes {
        println!("state {}", render::state_change_line(c));
    }
    for sk in &st.skipped {
        println!("skipped {} ({})", render::quote(&sk.path), sk.kind);
    }
    if ctx.verbose {
        eprintln!("status in {}", render::ms(st.elapsed));
    }
    Ok(())
}
