//! `ckpt du`: prints [`ckpt_lib::store::usage`] — store size, bytes unique to each
//! checkpoint, what gc would free.

use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt du`.
#[derive(clap::Args)]
pub struct DuArgs {
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `ckpt du`.
pub fn run(ctx: &Ctx, args: &DuArgs) -> Result<()> {
    let json_out = args.json;
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store_read_only(&ctx.ops.config)?;
    let u = ckpt_lib::store::usage::usage(&store)?;
    if json_out {
        let mut v = serde_json::to_value(&u).expect("json");
        v["schema"] = json!(SCHEMA);
        v["store"] = json!(ws.store_path.display().to_string());
        for c in v["checkpoints"].as_array_mut().expect("array") {
            let seq = c["seq"].as_u64().unwrap_or(0);
            c["id"] = json!(format!("v{seq}"));
        }
        print_json(&v);
        return Ok(());
    }
    println!(
        "store {}: {} ({} objects {}, catalog {}, agent state {})",
        ws.store_path.display(),
        render::bytes(u.store_bytes),
        u.objects,
        render::bytes(u.object_bytes),
        render::bytes(u.catalog_bytes),
        render::bytes(u.state_bytes),
    );
    println!(
        "gc would free: {} ({} unreferenced objects)",
        render::bytes(u.unreferenced_bytes),
        u.unreferenced_objects
    );
    if ctx.quiet || u.checkpoints.is_empty() {
        return Ok(());
    }
    println!(
        "\n{:<8} {:>12} {:>9} {:>12}",
        "id", "unique", "objects", "added"
    );
    for c in u.checkpoints.iter().rev() {
        println!(
            "{:<8} {:>12} {:>9} {:>12}",
            format!("v{}", c.seq),
            render::bytes(c.unique_bytes),
            c.unique_objects,
            render::bytes(c.new_bytes)
        );
    }
    println!("\nunique: freed by deleting that checkpoint alone (then `ckpt gc`); added: new data when it was saved");
    Ok(())
}
