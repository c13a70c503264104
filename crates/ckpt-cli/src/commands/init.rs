//! `ckpt init [DIR]`: make a directory a workspace (and with `--agent`, set up harness hooks).

use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::ops::init::{Existing, InitOptions, Outcome};
use ckpt_lib::Result;

use super::hook;
use crate::context::Ctx;
use crate::render::print_report;

// Arguments of `ckpt init`.
#[derive(clap::Args)]
pub struct InitArgs {
    /// The directory.
    dir: Option<PathBuf>,
    /// Create the directory (and missing parents) if it does not exist.
    #[arg(long)]
    create: bool,
    /// Where to keep the store (default: see docs/CLI.md, "Where the store lives").
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// Make the directory the workspace of the existing store given with
    /// --store (after its workspace was deleted); files are not touched,
    /// `ckpt restore` brings a checkpoint back.
    #[arg(long, requires = "store", conflicts_with = "agent")]
    attach: bool,
    /// Also make the directory a btrfs subvolume (once; an existing
    /// workspace is kept and only converted), so `ckpt fork` snapshots it
    /// (docs/FORK.md, "Making a workspace a subvolume").
    #[arg(long, conflicts_with = "attach")]
    subvolume: bool,
    /// Also set up hooks for an agent harness: print its configuration,
    /// or merge it with --write (an existing workspace is kept).
    #[arg(long, value_enum, value_name = "HARNESS")]
    agent: Option<hook::Agent>,
    /// With --agent: merge the hooks into the harness settings file
    /// (.claude/settings.json), keeping everything already there.
    #[arg(long, requires = "agent")]
    write: bool,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt init`.
pub fn run(ctx: &Ctx, args: &InitArgs) -> Result<()> {
    let opts = InitOptions {
        dir: args.dir.clone(),
        store: args.store.clone(),
        create: args.create,
        attach: args.attach,
        subvolume: args.subvolume,
        existing: if args.agent.is_some() {
            Existing::Keep
        } else {
            Existing::Refuse
        },
    };
    let rep = ops::init::init(&ctx.ops, &opts)?;
    if let Some(agent) = args.agent {
        return hook::init_agent(ctx, &rep.workspace, agent, args.write, args.json);
    }
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        if rep.outcome == Outcome::Attached {
            println!(
                "attached {} to the store {}\nits files are as they were: `ckpt log` lists the checkpoints, `ckpt restore HEAD` brings the latest back",
                rep.workspace.root.display(),
                rep.workspace.store_path.display()
            );
            return Ok(());
        }
        for (c, what) in [
            (&rep.subvolume, "forks of it are snapshots"),
            (&rep.store_subvolume, "forks' stores are snapshots of it"),
        ] {
            match c {
                Some(c) if c.already => {
                    println!("{} already is a btrfs subvolume", c.dir.display())
                }
                Some(c) => println!(
                    "{} is now a btrfs subvolume ({} entries copied as reflinks and verified); {what}",
                    c.dir.display(),
                    c.entries
                ),
                None => {}
            }
        }
        if rep.outcome == Outcome::Kept && rep.subvolume.is_some() {
            return Ok(());
        }
        println!("initialised workspace {}", rep.workspace.root.display());
        if let Outcome::Created { copy_strategy } = rep.outcome {
            println!(
                "store: {} (copy strategy: {:?})",
                rep.workspace.store_path.display(),
                copy_strategy
            );
        }
    }
    Ok(())
}
