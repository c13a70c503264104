//! `ckpt show ID`: one checkpoint and what it changed.

use ckpt_lib::engine::diff::{self, PathFilter, TreeSource};
use ckpt_lib::Result;
use serde_json::{json, Value};

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt show`.
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
    cmd_show(ctx, &args.id, args.json)
}

fn cmd_show(ctx: &Ctx, id: &str, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store_read_only(&ctx.ops.config)?;
    let r = store.catalog.reader()?;
    let cp = r.resolve(id)?;
    let head = r.head()?;
    let parent_root = match cp.parent {
        Some(p) => r.checkpoint(p)?.map(|c| c.root),
        None => None,
    };
    let src = TreeSource {
        fresh: None,
        catalog: &r,
    };
    let changes = diff::diff_trees(&src, parent_root, Some(cp.root), &PathFilter::default())?;
    let shown: Vec<_> = changes.iter().filter(|c| c.is_interesting()).collect();
    if json {
        let mut v = render::checkpoint_json(&cp, head);
        v["schema"] = json!(SCHEMA);
        v["changes"] = Value::Array(shown.iter().map(|c| render::change_json(c)).collect());
        print_json(&v);
        return Ok(());
    }
    println!(
        "checkpoint {}{}",
        cp.id(),
        if head == Some(cp.seq) { " (HEAD)" } else { "" }
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
    for c in shown {
        println!("{}", render::change_line(c));
    }
    Ok(())
}
