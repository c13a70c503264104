//! `ckpt cat ID PATH`: print one file as a checkpoint saved it.

use std::io::Write;
use std::path::PathBuf;

use ckpt_lib::{ops, Error, Result};

use crate::context::Ctx;
use crate::render::print_report;

// Arguments of `ckpt cat`.
#[derive(clap::Args)]
pub struct CatArgs {
    /// Checkpoint id.
    id: String,
    /// The file (relative to the current directory).
    path: PathBuf,
    /// JSON output (`content`, or `content_hex` when it is not UTF-8).
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt cat`.
pub fn run(ctx: &Ctx, args: &CatArgs) -> Result<()> {
    let opts = ops::cat::CatOptions {
        rev: args.id.clone(),
        path: args.path.clone(),
    };
    let rep = ops::cat::cat(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&rep.bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("write", "stdout", e))
}
