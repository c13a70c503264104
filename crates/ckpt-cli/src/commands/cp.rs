//! `ckpt cp SRC DST`: the copy engine as a standalone `cp -a`, through
//! [`ckpt_lib::ops::cp`] (see [`ckpt_fs::copytree`] for what is preserved
//! and how).

use std::path::PathBuf;

use ckpt_fs::copy::Strategy;
use ckpt_fs::copytree::Progress;
use ckpt_lib::ops;
use ckpt_lib::ops::cp::CopyOptions;
use ckpt_lib::{Error, Result};

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt cp`.
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
    if let Some(e) = &ctx.bad_copy_strategy {
        return Err(Error::Usage(format!("{e} (nothing was changed)")));
    }
    let progress = Progress::default();
    // The bar's total, when copying one file.
    let total = std::fs::symlink_metadata(ctx.ops.abs(&args.src))
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let opts = CopyOptions {
        src: &args.src,
        dst: &args.dst,
        strategy: args.strategy,
        split_at: args.split_at,
        progress: Some(&progress),
    };
    let r = crate::progress::with_bar(&progress, total, ctx.quiet || args.json, || {
        ops::cp::cp(&ctx.ops, &opts)
    })?;
    let (rep, elapsed) = (&r.report, r.elapsed);
    if args.json {
        print_report(&r);
    } else if !ctx.quiet {
        println!(
            "copied {} → {}: {}, {}, {}, {} ({})",
            r.src.display(),
            rep.target.display(),
            render::count(rep.files, "file", "files"),
            render::count(rep.dirs, "directory", "directories"),
            render::count(rep.symlinks, "symlink", "symlinks"),
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
