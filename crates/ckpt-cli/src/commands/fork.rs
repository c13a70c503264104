//! `ckpt fork ID DIR [-- CMD ARGS…]`, `ckpt fork ID --count N PREFIX`,
//! `ckpt fork --remove DIR`, `ckpt fork --mount DIR [-- CMD ARGS…]`:
//! through [`ckpt_lib::ops::fork`] and [`ckpt_lib::ops::forks`] (see
//! docs/FORK.md). With `-- CMD`, ckpt exits with CMD's exit code.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use ckpt_fs::copytree::Progress;
use ckpt_lib::ops;
use ckpt_lib::ops::fork::{ForkOptions, ForkReport};
use ckpt_lib::ops::parts::{Backend, Mounted};
use ckpt_lib::{Error, Result};

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt fork`.
#[derive(clap::Args)]
pub struct ForkArgs {
    /// Checkpoint id.
    #[arg(required_unless_present_any = ["remove", "mount"])]
    id: Option<String>,
    /// The new workspace: a new or empty directory outside this workspace
    /// (with --count: the prefix of the N directories, PREFIX1…PREFIXN).
    #[arg(required_unless_present_any = ["remove", "mount"])]
    dir: Option<PathBuf>,
    /// Make N forks, PREFIX1 … PREFIXN (all checked fresh before any is made).
    #[arg(long, value_name = "N", conflicts_with_all = ["remove", "mount"])]
    count: Option<usize>,
    /// Remove the fork DIR of this workspace: its files and its store.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["id", "dir", "link", "store", "mount", "cmd"])]
    remove: Option<PathBuf>,
    /// Mount the overlay fork DIR of this workspace again (after a reboot;
    /// root), or with `-- CMD` run CMD over it in a new namespace.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["id", "dir", "link", "store", "backend"])]
    mount: Option<PathBuf>,
    /// Hard-link files to the store's objects instead of copying them: for
    /// trees you will never modify (they are read-only; see docs/COPY.md).
    #[arg(long)]
    link: bool,
    /// Where to keep the fork's own store (default: the usual rule).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Use this backend or fail with nothing changed: btrfs-subvolume,
    /// reflink, overlay or copy (default: the fastest that works, never
    /// overlay; `ckpt doctor` shows which and why).
    #[arg(long, value_name = "NAME", value_parser = Backend::parse, conflicts_with = "remove")]
    backend: Option<Backend>,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// `-- CMD ARGS…`: an overlay fork, mounted in a new (user and) mount
    /// namespace where CMD runs; ckpt exits with CMD's exit code, and the
    /// mount is gone (the fork stays: `ckpt fork --mount DIR -- CMD`).
    #[arg(last = true, value_name = "CMD")]
    cmd: Vec<OsString>,
}

/// The exit code of `-- CMD` (0 without one).
fn exit_with(status: Option<i32>) -> ExitCode {
    ExitCode::from(status.map_or(0, |c| c.clamp(0, 255) as u8))
}

/// Runs `ckpt fork`.
pub fn run(ctx: &Ctx, args: &ForkArgs) -> Result<ExitCode> {
    let command = (!args.cmd.is_empty()).then_some(args.cmd.as_slice());
    if let Some(dir) = &args.mount {
        let opts = ops::forks::MountOptions {
            dir: dir.clone(),
            command: command.map(<[_]>::to_vec),
        };
        let rep = ops::forks::mount(&ctx.ops, &opts)?;
        let status = rep.mounted.status.map(ops::json::exit_code);
        if args.json {
            print_report(&rep);
        } else if !ctx.quiet {
            print_mount(&rep.mounted, &rep.dir);
        }
        return Ok(exit_with(status));
    }
    if let Some(dir) = &args.remove {
        let rep = ops::forks::remove(&ctx.ops, &ops::forks::RemoveOptions { dir: dir.clone() })?;
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
            if let Some(o) = &rep.overlay {
                println!(
                    "overlay: {}its lower {} {}",
                    if o.unmounted { "unmounted; " } else { "" },
                    o.lower.display(),
                    if o.lower_removed {
                        "was removed (no other fork uses it)"
                    } else {
                        "stays (another fork uses it)"
                    }
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
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
        command,
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
        return Ok(ExitCode::SUCCESS);
    }
    let rep = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
        ops::fork::fork(&ctx.ops, &opts)
    })?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        print_one(&rep);
    }
    Ok(exit_with(
        rep.overlay
            .as_ref()
            .and_then(|o| o.mounted.status)
            .map(ops::json::exit_code),
    ))
}

fn print_mount(m: &Mounted, dir: &std::path::Path) {
    match m.status {
        Some(st) => println!(
            "overlay: ran the command over {} in a new namespace; it exited with {} and the mount is gone (the upper layer {} keeps its changes)",
            dir.display(),
            ops::json::exit_code(st),
            m.layers.upper.display()
        ),
        None => println!(
            "overlay: mounted at {} (upper {}); it lasts until `ckpt fork --remove` or a reboot (then `ckpt fork --mount {}`)",
            dir.display(),
            m.layers.upper.display(),
            dir.display()
        ),
    }
    if !m.index_mapped {
        println!("note: the layers are on different filesystems, so the first save there hashes every file");
    }
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
    if let Some(o) = &rep.overlay {
        println!(
            "lower: {} ({})",
            o.lower.display(),
            if o.lower_made {
                "written now, shared by every overlay fork of this checkpoint"
            } else {
                "shared with the other overlay forks of this checkpoint"
            }
        );
        print_mount(&o.mounted, &rep.to);
    }
}
