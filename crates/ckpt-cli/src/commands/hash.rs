//! `ckpt hash DIR`: the state digest of any directory (no workspace needed).

use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::ops::hash::{HashForm, HashOptions};
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::print_report;

// Arguments of `ckpt hash`.
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
    let opts = HashOptions {
        dir: args.dir.clone(),
        form: if args.full {
            HashForm::Full
        } else {
            HashForm::Checksum
        },
    };
    let rep = ops::hash::hash(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
    } else {
        println!("{}", rep.state.as_ref().unwrap_or(&rep.checksum));
    }
    Ok(())
}
