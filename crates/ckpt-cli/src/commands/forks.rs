//! `ckpt forks`: prints [`ckpt_lib::ops::forks`] — this workspace's forks,
//! where they are, their latest checkpoint and how far they diverged.

use ckpt_lib::ops;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt forks`.
#[derive(clap::Args)]
pub struct ForksArgs {
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `ckpt forks`.
pub fn run(ctx: &Ctx, args: &ForksArgs) -> Result<()> {
    let rep = ops::forks::forks(&ctx.ops)?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    if rep.forks.is_empty() {
        println!(
            "no forks of {} (`ckpt fork ID DIR` makes one)",
            rep.workspace.display()
        );
        return Ok(());
    }
    for f in &rep.forks {
        let d = &f.diverged;
        let latest = f.latest.as_ref().map_or("-".to_string(), |c| c.id());
        println!(
            "{}  from v{}  latest {}  +{} ~{} -{} files, +{} ~{} -{}",
            f.root.display(),
            f.origin.checkpoint,
            latest,
            d.files_added,
            d.files_modified,
            d.files_deleted,
            render::bytes(d.bytes_added),
            render::bytes(d.bytes_modified),
            render::bytes(d.bytes_deleted)
        );
        match &f.overlay {
            Some((_, true)) => println!("  overlay, mounted"),
            Some((_, false)) => println!(
                "  overlay, not mounted (after a reboot, or a `-- CMD` run): `ckpt fork --mount {}` mounts it again (root), `ckpt fork --mount {} -- CMD` runs CMD over it",
                f.root.display(),
                f.root.display()
            ),
            None => {}
        }
    }
    Ok(())
}
