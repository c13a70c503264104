//! `ckpt init [DIR]`: make a directory a workspace (and with `--agent`, set up harness hooks).

use std::path::{Path, PathBuf};

use ckpt_lib::workspace::Workspace;
use ckpt_lib::{Error, Result};
use serde_json::json;

use super::hook;
use crate::context::Ctx;
use crate::render::{print_json, SCHEMA};

/// Arguments of `ckpt init`.
#[derive(clap::Args)]
pub struct InitArgs {
    /// The directory.
    dir: Option<PathBuf>,
    /// Where to keep the store (default: see README, "Where the store lives").
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
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
    cmd_init(
        ctx,
        args.dir.as_deref(),
        args.store.as_deref(),
        args.agent,
        args.write,
        args.json,
    )
}

fn cmd_init(
    ctx: &Ctx,
    dir: Option<&Path>,
    store: Option<&Path>,
    agent: Option<hook::Agent>,
    write: bool,
    json: bool,
) -> Result<()> {
    let dir = dir.map_or_else(|| ctx.ops.cwd.clone(), |d| ctx.ops.cwd.join(d));
    let store = store.map(|s| ctx.ops.cwd.join(s));
    if let Some(agent) = agent {
        let ws = match Workspace::init(&dir, store.as_deref(), ctx.ops.config.data_home.as_deref())
        {
            Err(Error::AlreadyAWorkspace(_)) => Workspace::discover(&dir)?,
            r => r?,
        };
        return hook::init_agent(ctx, &ws, agent, write, json);
    }
    let ws = Workspace::init(&dir, store.as_deref(), ctx.ops.config.data_home.as_deref())?;
    if json {
        print_json(&json!({
            "schema": SCHEMA,
            "root": ws.root.display().to_string(),
            "store": ws.store_path.display().to_string(),
        }));
    } else if !ctx.quiet {
        let s = ws.open_store(&ctx.ops.config)?;
        println!("initialised workspace {}", ws.root.display());
        println!(
            "store: {} (copy strategy: {:?})",
            ws.store_path.display(),
            s.caps.preferred()
        );
    }
    Ok(())
}
