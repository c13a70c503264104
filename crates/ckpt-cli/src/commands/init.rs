//! `ckpt init [DIR]`: make a directory a workspace (and with `--agent`, set up harness hooks).

use std::path::PathBuf;

use ckpt_lib::ops;
use ckpt_lib::ops::init::{Existing, InitOptions, Outcome};
use ckpt_lib::Result;

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
    /// Also set up the hooks of an agent harness (claude, codex, gemini,
    /// copilot, cursor, opencode): say what would be written, or write it
    /// with --write (an existing workspace is kept). Without a name: the
    /// harnesses whose configuration directories are here.
    #[arg(long, value_name = "HARNESS", num_args = 0..=1, default_missing_value = "",
          value_parser = agent_names())]
    agent: Option<String>,
    /// With --agent: merge the hooks into the harness's project
    /// configuration, keeping everything already there.
    #[arg(long, requires = "agent")]
    write: bool,
    /// With --agent: take ckpt's hooks out of the harness's configuration
    /// again (with --write; else say what would be removed).
    #[arg(long, requires = "agent")]
    remove: bool,
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
    if let Some(agent) = &args.agent {
        if !args.json && !ctx.quiet && !matches!(rep.outcome, Outcome::Kept) {
            eprintln!("initialised workspace {}", rep.workspace.root.display());
        }
        if !args.json && !ctx.quiet {
            say_git_exclude(&rep);
        }
        return run_agent(ctx, agent, args);
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
        say_git_exclude(&rep);
    }
    Ok(())
}

/// `ckpt init`'s note on `.git/info/exclude`, when it added anything.
fn say_git_exclude(rep: &ckpt_lib::ops::init::InitReport) {
    if let Some(g) = rep.git_exclude.as_ref().filter(|g| !g.added.is_empty()) {
        eprintln!(
            "kept {} out of `git status` (added to {})",
            g.added.join(", "),
            g.file.display()
        );
    }
}

/// `--agent` values: a harness's name, or empty (detect).
fn agent_names() -> clap::builder::PossibleValuesParser {
    let mut names = ckpt_harness::Harness::names();
    names.push("");
    clap::builder::PossibleValuesParser::new(names)
}

/// `ckpt init --agent [NAME] [--write] [--remove]` once the workspace exists.
fn run_agent(ctx: &Ctx, agent: &str, args: &InitArgs) -> Result<()> {
    use ckpt_harness::setup::Change;
    use ckpt_lib::ops::agent::{AgentOptions, AgentReport};
    let harnesses = ckpt_harness::Harness::from_name(agent).map(|h| vec![h]);
    let here = match &args.dir {
        Some(d) => ckpt_lib::ops::Context::new(ctx.ops.abs(d), ctx.ops.config.clone()),
        None => ckpt_lib::ops::Context::new(ctx.ops.cwd.clone(), ctx.ops.config.clone()),
    };
    let rep: AgentReport = ops::agent::agent(
        &here,
        &AgentOptions {
            harnesses,
            remove: args.remove,
            write: args.write,
        },
    )?;
    if args.json {
        print_report(&rep);
        return Ok(());
    }
    if rep.changes.is_empty() {
        let names = ckpt_harness::Harness::names().join(", ");
        println!(
            "no agent harness is configured in {} (none of their configuration directories is \
             there); name one: `ckpt init --agent NAME --write` ({names})",
            rep.root.display()
        );
        return Ok(());
    }
    for c in &rep.changes {
        let p = &c.plan;
        let title = p.harness.title();
        let path = p.path.display();
        let events = p.events.join(", ");
        match (&p.change, c.written, args.remove) {
            (Change::Unchanged, _, false) => {
                println!("{title}: {path} already runs `ckpt hook`; nothing changed")
            }
            (Change::Unchanged, _, true) => {
                println!("{title}: {path} runs no ckpt hook; nothing changed")
            }
            (Change::Delete, true, _) => {
                println!("{title}: removed {path} (it held only ckpt's hooks)")
            }
            (Change::Delete, false, _) => println!(
                "{title}: would remove {path} (it holds only ckpt's hooks); run again with --write"
            ),
            (_, true, true) => println!("{title}: took `ckpt hook` out of {events} in {path}"),
            (_, true, false) if events.is_empty() => println!("{title}: wrote {path}"),
            (_, true, false) => println!("{title}: added `ckpt hook` for {events} to {path}"),
            (_, false, true) => {
                println!("# {title}: would take `ckpt hook` out of {events} in {path}, leaving (run again with --write):");
                print!("{}", p.text);
            }
            (change, false, false) => {
                let verb = if *change == Change::Create {
                    "create"
                } else {
                    "update"
                };
                println!("# {title}: would {verb} {path} as follows (run again with --write to write it):");
                print!("{}", p.text);
            }
        }
        if let (Some(note), false) = (p.harness.approval(), args.remove) {
            eprintln!("{title}: {note}");
        }
    }
    Ok(())
}
