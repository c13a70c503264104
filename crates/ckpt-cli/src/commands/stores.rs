//! `ckpt stores [DIR…]`: prints [`ckpt_lib::ops::stores`] — the stores on
//! this machine, the workspace each belongs to, and whether it still exists.

use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::ops::stores::{Attachment, StoresOptions};
use ckpt_lib::Result;

use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt stores`.
#[derive(clap::Args)]
pub struct StoresArgs {
    /// Also look here: a store, a directory of stores, or a directory
    /// whose `.ckpt-stores/` holds stores made beside their workspaces.
    dirs: Vec<PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// `ckpt stores`.
pub fn run(ctx: &Ctx, args: &StoresArgs) -> Result<()> {
    let rep = ops::stores::stores(
        &ctx.ops,
        &StoresOptions {
            dirs: args.dirs.clone(),
        },
    )?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    if rep.stores.is_empty() {
        let looked: Vec<String> = rep
            .searched
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        println!(
            "no ckpt stores found (looked in: {}); name a directory to search: `ckpt stores DIR`",
            if looked.is_empty() {
                "nothing: no data home, pass a DIR".to_string()
            } else {
                looked.join(", ")
            }
        );
        return Ok(());
    }
    for s in &rep.stores {
        println!("{}", s.path.display());
        let ws = s
            .workspace
            .as_ref()
            .map_or("(not recorded)".to_string(), |w| w.display().to_string());
        let how = match s.attachment {
            Attachment::Attached => "",
            Attachment::Missing => "  [deleted]",
            Attachment::Detached => "  [no longer its workspace]",
            Attachment::Unknown => "",
        };
        println!("  workspace {ws}{how}");
        match &s.contents {
            Ok(c) => match &c.latest {
                Some(cp) => println!(
                    "  {}, latest {} {} {}",
                    render::count(c.count as u64, "checkpoint", "checkpoints"),
                    cp.id(),
                    render::when(cp.time_ns),
                    cp.message
                ),
                None => println!("  no checkpoints"),
            },
            Err(e) => println!("  could not be read: {e}"),
        }
        if s.attachment == Attachment::Missing && !ctx.quiet {
            println!(
                "  recover: ckpt restore --store {} ID --to DIR, or ckpt init --attach --store {} DIR",
                s.path.display(),
                s.path.display()
            );
        }
    }
    Ok(())
}
