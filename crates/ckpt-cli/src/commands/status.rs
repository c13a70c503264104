//! `ckpt status`: what changed since the last checkpoint.

use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt status`.
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
    let opts = ops::status::StatusOptions {
        paths: args.paths.clone(),
    };
    let st = ops::status::status(&ctx.ops, &opts)?;
    if args.json {
        print_report(&st);
        return Ok(());
    }
    let shown: Vec<_> = st.changes.iter().filter(|c| c.is_interesting()).collect();
    let state_changes = &st.state_changes;
    let clean = st.clean();
    for w in &st.warnings {
        eprintln!("warning: {w}");
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
    for line in render::skipped_lines(&st.skipped) {
        println!("{line}");
    }
    render::warn_unreadable("", &st.unreadable);
    if ctx.verbose {
        eprintln!("status in {}", render::ms(st.elapsed));
    }
    Ok(())
}
