//! `ckpt delete ID`: delete a checkpoint record (its data goes at the next gc).

use ckpt_lib::ops;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::print_report;

// Arguments of `ckpt delete`.
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
    let opts = ops::delete::DeleteOptions {
        rev: args.id.clone(),
    };
    let rep = ops::delete::delete(&ctx.ops, &opts)?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        println!(
            "deleted {}; run `ckpt gc` to free its data",
            rep.deleted.id()
        );
    }
    Ok(())
}
