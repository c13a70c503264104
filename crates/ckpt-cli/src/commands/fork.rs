//! `ckpt fork ID DIR`: a checkpoint as a new, independent workspace, through
//! [`ckpt_lib::ops::fork`] (see [`ckpt_lib::engine::fork`] for the store
//! decision and the `--link` caveat).

use std::path::PathBuf;

use ckpt_copy::copytree::Progress;
use ckpt_lib::ops;
use ckpt_lib::ops::fork::ForkOptions;
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

/// Arguments of `ckpt fork`.
#[derive(clap::Args)]
pub struct ForkArgs {
    /// Checkpoint id.
    id: String,
    /// The new workspace: a new or empty directory outside this workspace.
    dir: PathBuf,
    /// Hard-link files to the store's objects instead of copying them: for
    /// trees you will never modify (they are read-only; see docs/COPY.md).
    #[arg(long)]
    link: bool,
    /// Where to keep the fork's own store (default: the usual rule).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt fork`.
pub fn run(ctx: &Ctx, args: &ForkArgs) -> Result<()> {
    let progress = Progress::default();
    let opts = ForkOptions {
        rev: &args.id,
        dir: &args.dir,
        store: args.store.as_deref(),
        link: args.link,
        progress: Some(&progress),
    };
    let rep = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
        ops::fork::fork(&ctx.ops, &opts)
    })?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        println!(
            "forked {} into workspace {}: {}, {}, {} ({})",
            rep.report.target.id(),
            rep.to.display(),
            render::count(rep.report.files, "file", "files"),
            render::count(rep.report.dirs, "directory", "directories"),
            render::bytes(rep.report.bytes),
            render::ms(rep.elapsed)
        );
        println!("store: {}", rep.store.display());
    }
    Ok(())
}
