//! `ckpt delete ID`: delete a checkpoint record (its data goes at the next gc).

use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::render::{print_json, SCHEMA};

/// Arguments of `ckpt delete`.
#[derive(clap::Args)]
pub struct DeleteArgs {
    /// Checkpoint id.
    id: String,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt delete`.
pub fn run(ctx: &Ctx, args: &DeleteArgs) -> Result<()> {
    cmd_delete(ctx, &args.id, args.json)
}

fn cmd_delete(ctx: &Ctx, id: &str, json: bool) -> Result<()> {
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store(&ctx.ops.config)?;
    let cp = store.catalog.reader()?.resolve(id)?;
    store.catalog.delete_checkpoint(&cp)?;
    if json {
        print_json(&json!({ "schema": SCHEMA, "deleted": cp.id() }));
    } else if !ctx.quiet {
        println!("deleted {}; run `ckpt gc` to free its data", cp.id());
    }
    Ok(())
}
