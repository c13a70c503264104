//! `ckpt cp SRC DST`: the copy engine as a standalone `cp -a` (see
//! [`ckpt_copy::copytree`] for what is preserved and how).

use std::path::PathBuf;
use std::time::Instant;

use ckpt_copy::copy::Strategy;
use ckpt_copy::copytree::{self, CpOptions, Progress};
use ckpt_lib::{Error, Result};
use serde_json::json;

use crate::context::Ctx;
use crate::render::{self, print_json, SCHEMA};

/// Arguments of `ckpt cp`.
#[derive(clap::Args)]
pub struct CpArgs {
    /// File or directory to copy.
    src: PathBuf,
    /// Destination: a new path, or an existing directory to copy into.
    dst: PathBuf,
    /// Force a copy strategy: reflink, copy_file_range or userspace
    /// (default: the best one the probe found; also CKPT_COPY_STRATEGY).
    #[arg(long, value_name = "STRATEGY", value_parser = parse_strategy)]
    strategy: Option<Strategy>,
    /// Copy files of at least this many bytes as parallel ranges
    /// (default 64 MiB; also CKPT_SPLIT_BYTES).
    #[arg(long, value_name = "BYTES")]
    split_at: Option<u64>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Parses a `--strategy` value.
pub fn parse_strategy(s: &str) -> std::result::Result<Strategy, String> {
    Strategy::parse(s)
        .ok_or_else(|| format!("{s:?} is not one of reflink, copy_file_range, userspace"))
}

/// Runs `ckpt cp`.
pub fn run(ctx: &Ctx, args: &CpArgs) -> Result<()> {
    let t0 = Instant::now();
    if let Some(e) = &ctx.bad_copy_strategy {
        return Err(Error::Usage(format!("{e} (nothing was changed)")));
    }
    let src = ctx.ops.cwd.join(&args.src);
    let dst = ctx.ops.cwd.join(&args.dst);
    let opts = CpOptions {
        strategy: args.strategy.or(ctx.ops.config.copy.strategy),
        split_at: args.split_at.or(ctx.ops.config.copy.split_at),
    };
    let progress = Progress::default();
    let total = std::fs::symlink_metadata(&src)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let rep = crate::progress::with_bar(&progress, total, ctx.quiet || args.json, || {
        copytree::copy_path(&src, &dst, &opts, &progress)
    })?;
    let elapsed = t0.elapsed();
    if args.json {
        print_json(&json!({
            "schema": SCHEMA, "to": rep.target.display().to_string(),
            "files": rep.files, "dirs": rep.dirs, "symlinks": rep.symlinks,
            "hard_links": rep.hard_links, "specials": rep.specials,
            "skipped_sockets": rep.skipped_sockets, "skipped_xattrs": rep.skipped_xattrs,
            "bytes": rep.bytes, "reflinked": rep.reflinked,
            "kernel_copied": rep.kernel_copied, "user_copied": rep.user_copied,
            "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        }));
    } else if !ctx.quiet {
        println!(
            "copied {} → {}: {} files, {} directories, {} symlinks, {} ({})",
            src.display(),
            rep.target.display(),
            rep.files,
            rep.dirs,
            rep.symlinks,
            render::bytes(rep.bytes),
            render::ms(elapsed)
        );
        if ctx.verbose {
            println!(
                "  reflinked {}, copy_file_range {}, userspace {}; hard links {}, special files {}",
                rep.reflinked, rep.kernel_copied, rep.user_copied, rep.hard_links, rep.specials
            );
        }
        if rep.skipped_sockets > 0 {
            eprintln!(
                "ckpt: warning: {} sockets skipped (they cannot be copied)",
                rep.skipped_sockets
            );
        }
        if rep.skipped_xattrs > 0 {
            eprintln!(
                "ckpt: warning: {} extended attributes not supported by the destination were not copied",
                rep.skipped_xattrs
            );
        }
    }
    Ok(())
}
