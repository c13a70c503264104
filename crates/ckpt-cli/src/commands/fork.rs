//! `ckpt fork ID DIR`: a checkpoint as a new, independent workspace (see
//! [`ckpt_lib::engine::fork`] for the store decision and the `--link` caveat).

use std::path::PathBuf;
use std::time::Instant;

use ckpt_copy::copytree::Progress;
use ckpt_lib::{Error, Result};
use serde_json::json;

use ckpt_lib::engine::materialize::MaterializeOptions;
use ckpt_lib::ops::normalize;

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt fork`.
#[derive(clap::Args)]
pub struct ForkArgs {
    /// Checkpoint id.
    id: String,
    /// The new workspace: a new or empty directory outside this workspace.
    dir: PathBuf,
    /// Hard-link files to the store's objects instead of copying them: for
    /// trees you will never modify (they are read-only; see README).
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
    let t0 = Instant::now();
    let ws = ctx.ops.workspace()?;
    let store = ws.open_store(&ctx.ops.config)?;
    let dest = normalize(&ctx.ops.cwd.join(&args.dir));
    if dest.starts_with(&ws.root) {
        return Err(Error::Usage(format!(
            "{} is inside the workspace {}; fork into a directory outside it (nothing was changed)",
            dest.display(),
            ws.root.display()
        )));
    }
    let new_store = args.store.as_ref().map(|s| ctx.ops.cwd.join(s));
    let progress = Progress::default();
    let (rep, fork) = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
        ckpt_lib::engine::fork::fork(
            &store,
            &args.id,
            &dest,
            new_store.as_deref(),
            ctx.ops.config.data_home.as_deref(),
            MaterializeOptions {
                link: args.link,
                progress: Some(&progress),
            },
        )
    })?;
    let elapsed = t0.elapsed();
    if args.json {
        print_json(&json!({
            "schema": SCHEMA, "forked": rep.target.id(), "to": fork.root.display().to_string(),
            "store": fork.store_path.display().to_string(),
            "files": rep.files, "dirs": rep.dirs, "bytes": rep.bytes, "link": args.link,
            "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        }));
    } else if !ctx.quiet {
        println!(
            "forked {} into workspace {}: {} files, {} directories, {} ({})",
            rep.target.id(),
            fork.root.display(),
            rep.files,
            rep.dirs,
            render::bytes(rep.bytes),
            render::ms(elapsed)
        );
        println!("store: {}", fork.store_path.display());
    }
    Ok(())
}
