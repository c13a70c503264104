//! `ckpt fork ID DIR`, `ckpt fork ID --count N PREFIX`, `ckpt fork --remove
//! DIR`: through [`ckpt_lib::ops::fork`] and [`ckpt_lib::ops::forks`] (see
//! docs/FORK.md).

use std::path::PathBuf;

use ckpt_copy::copytree::Progress;
use ckpt_lib::engine::backend::Backend;
use ckpt_lib::ops;
use ckpt_lib::ops::fork::{ForkOptions, ForkReport};
use ckpt_lib::{Error, Result};

use crate::context::Ctx;
use crate::render::{self, print_report};

/// Arguments of `ckpt fork`.
#[derive(clap::Args)]
pub struct ForkArgs {
    /// Checkpoint id.
    #[arg(required_unless_present = "remove")]
    id: Option<String>,
    /// The new workspace: a new or empty directory outside this workspace
    /// (with --count: the prefix of the N directories, PREFIX1…PREFIXN).
    #[arg(required_unless_present = "remove")]
    dir: Option<PathBuf>,
    /// Make N forks, PREFIX1 … PREFIXN (all checked fresh before any is made).
    #[arg(long, value_name = "N", conflicts_with = "remove")]
    count: Option<usize>,
    /// Remove the fork DIR of this workspace: its files and its store.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["id", "dir", "link", "store"])]
    remove: Option<PathBuf>,
    /// Hard-link files to the store's objects instead of copying them: for
    /// trees you will never modify (they are read-only; see docs/COPY.md).
    #[arg(long)]
    link: bool,
    /// Where to keep the fork's own store (default: the usual rule).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Use this backend or fail with nothing changed: btrfs-subvolume,
    /// reflink or copy (default: the fastest that works; `ckpt doctor`
    /// shows which and why).
    #[arg(long, value_name = "NAME", value_parser = Backend::parse, conflicts_with = "remove")]
    backend: Option<Backend>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt fork`.
pub fn run(ctx: &Ctx, args: &ForkArgs) -> Result<()> {
    if let Some(dir) = &args.remove {
        let rep = ops::forks::remove(&ctx.ops, dir)?;
        if args.json {
            print_report(&rep);
        } else if !ctx.quiet {
            println!(
                "removed fork {}{} and its store {} ({})",
                rep.dir.display(),
                if rep.subvolume {
                    " (subvolume delete)"
                } else {
                    ""
                },
                rep.store.display(),
                render::ms(rep.elapsed)
            );
            if let Some(n) = &rep.note {
                println!("note: {n}");
            }
        }
        return Ok(());
    }
    let (Some(id), Some(dir)) = (&args.id, &args.dir) else {
        return Err(Error::Usage("ckpt fork needs ID and DIR".into()));
    };
    let progress = Progress::default();
    let opts = ForkOptions {
        rev: id,
        dir,
        store: args.store.as_deref(),
        link: args.link,
        progress: Some(&progress),
        backend: args.backend,
    };
    if let Some(n) = args.count {
        let rep = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
            ops::fork::fork_many(&ctx.ops, &opts, n)
        })?;
        if args.json {
            print_report(&rep);
        } else if !ctx.quiet {
            for f in &rep.forks {
                print_one(f);
            }
            println!("{} forks in {}", rep.forks.len(), render::ms(rep.elapsed));
        }
        return Ok(());
    }
    let rep = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
        ops::fork::fork(&ctx.ops, &opts)
    })?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        print_one(&rep);
    }
    Ok(())
}

fn print_one(rep: &ForkReport) {
    println!(
        "forked {} into workspace {}: {}, {}, {} ({})",
        rep.report.target.id(),
        rep.to.display(),
        render::count(rep.report.files, "file", "files"),
        render::count(rep.report.dirs, "directory", "directories"),
        render::bytes(rep.report.bytes),
        render::ms(rep.elapsed)
    );
    println!(
        "store: {}{}",
        rep.store.display(),
        if rep.store_snapshot {
            " (a snapshot of this workspace's store)"
        } else {
            ""
        }
    );
    match rep.restored {
        Some(r) => println!(
            "backend: {} ({}; {} written, {} removed after the snapshot{})",
            rep.backend.name(),
            rep.why,
            render::count(r.written, "file", "files"),
            r.removed,
            if r.watcher {
                "; the watcher vouched for the unchanged directories"
            } else {
                ""
            }
        ),
        None => println!("backend: {} ({})", rep.backend.name(), rep.why),
    }
}
