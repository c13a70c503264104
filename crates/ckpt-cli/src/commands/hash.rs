//! `ckpt hash DIR`: the state digest of any directory (no workspace needed).

use std::path::{Path, PathBuf};

use ckpt_lib::Result;
use serde_json::json;

use crate::context::Ctx;
use crate::render::{hex, print_json, SCHEMA};

/// Arguments of `ckpt hash`.
#[derive(clap::Args)]
pub struct HashArgs {
    /// The directory.
    dir: PathBuf,
    /// Print the full 2048-byte LtHash state (base64url) instead of the checksum.
    #[arg(long)]
    full: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt hash`.
pub fn run(ctx: &Ctx, args: &HashArgs) -> Result<()> {
    cmd_hash(ctx, &args.dir, args.full, args.json)
}

fn cmd_hash(ctx: &Ctx, dir: &Path, full: bool, json: bool) -> Result<()> {
    let dir = ctx.ops.cwd.join(dir);
    let (digest, scan) = ckpt_lib::engine::verify::hash_dir(&dir)?;
    let checksum = hex(&digest.checksum());
    if json {
        let mut v = json!({
            "schema": SCHEMA,
            "path": dir.display().to_string(),
            "checksum": checksum,
            "entries": scan.entries,
            "skipped": scan.skipped.len(),
        });
        if full {
            v["state"] = json!(digest.state().to_base64url());
        }
        print_json(&v);
    } else if full {
        println!("{}", digest.state().to_base64url());
    } else {
        println!("{checksum}");
    }
    Ok(())
}
