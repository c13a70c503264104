//! `ckpt du`: prints [`ckpt_lib::ops::du`] — store size, bytes unique to
//! each checkpoint, what gc would free (on-disk bytes, which it says).

use ckpt_lib::ops;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt du`.
#[derive(clap::Args)]
pub struct DuArgs {
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `ckpt du`.
pub fn run(ctx: &Ctx, args: &DuArgs) -> Result<()> {
    let rep = ops::du::du(&ctx.ops)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    let u = &rep.usage;
    println!(
        "store {}: {} on disk ({} objects {}, catalog {}, agent state {})",
        rep.store.display(),
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
    println!(
        "\nunique: on-disk bytes freed by deleting that checkpoint alone, then `ckpt gc` (beyond what gc would free now)\nadded: the data it stored when it was saved"
    );
    Ok(())
}
