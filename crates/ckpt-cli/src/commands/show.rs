//! `ckpt show ID`: one checkpoint and what it changed.

use ckpt_lib::ops;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// Checkpoint id (v12, a hash prefix, HEAD, HEAD~1, latest).
    id: String,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt show`.
pub fn run(ctx: &Ctx, args: &ShowArgs) -> Result<()> {
    let opts = ops::show::ShowOptions {
        rev: args.id.clone(),
    };
    let rep = ops::show::show(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    let cp = &rep.checkpoint;
    println!(
        "checkpoint {}{}",
        cp.id(),
        if rep.is_head() { " (HEAD)" } else { "" }
    );
    println!("hash:     {}", cp.hash);
    println!(
        "parent:   {}",
        cp.parent.map_or("none".into(), |p| format!("v{p}"))
    );
    println!("time:     {}", render::when(cp.time_ns));
    println!("message:  {}", cp.message);
    for (k, v) in &cp.tags {
        println!("tag:      {k}={v}");
    }
    if let Some(a) = &rep.annotation {
        for (k, v) in &a.tags {
            println!("tag:      {k}={v} (annotated {})", render::when(a.time_ns));
        }
        if let Some(n) = &a.note {
            println!(
                "note:     {} (annotated {})",
                n.replace('\n', "\n          "),
                render::when(a.time_ns)
            );
        }
    }
    let s = &cp.stats;
    println!(
        "changes:  +{} ~{} -{} files (+{} ~{} -{}), {} new in store, saved in {:.1} ms",
        s.files_added,
        s.files_modified,
        s.files_deleted,
        render::bytes(s.bytes_added),
        render::bytes(s.bytes_modified),
        render::bytes(s.bytes_deleted),
        render::bytes(s.new_bytes),
        cp.duration_us as f64 / 1e3
    );
    if let Some(v) = cp.state_version {
        println!("state:    version {v}");
    }
    for sk in &cp.skipped {
        println!("skipped:  {} ({})", render::quote(&sk.path), sk.kind);
    }
    println!();
    for c in &rep.changes {
        println!("{}", render::change_line(c));
    }
    Ok(())
}
