//! `ckpt pull [REMOTE] [ID…]`: through [`ckpt_remote::pull::pull`].

use ckpt_fs::copytree::Progress;
use ckpt_remote::pull::PullOptions;
use ckpt_remote::Result;

use super::remote::TransferArgs;
use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt pull`.
#[derive(clap::Args)]
pub struct PullArgs {
    /// A remote name or URL; default: origin, or the only remote.
    remote: Option<String>,
    /// Checkpoints: remote-id prefixes, v<seq> (as numbered where they were made), latest (default: all this store lacks).
    ids: Vec<String>,
    /// The workspace name on the remote.
    #[arg(long, value_name = "NAME")]
    workspace: Option<String>,
    #[command(flatten)]
    transfer: TransferArgs,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt pull`.
pub fn run(ctx: &Ctx, args: &PullArgs) -> Result<()> {
    let settings = args.transfer.settings(ctx)?;
    let progress = Progress::default();
    let opts = PullOptions {
        remote: args.remote.as_deref(),
        workspace: args.workspace.as_deref(),
        revs: &args.ids,
        settings: &settings,
        progress: Some(&progress),
    };
    let rep = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
        ckpt_remote::pull::pull(&ctx.ops, &opts)
    })?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        for (r, l) in &rep.pulled {
            println!("pulled {} as {l}", &r[..12]);
        }
        if rep.pulled.is_empty() {
            println!("nothing new on {} ({})", rep.url, rep.workspace);
        }
        println!("{}", render::transfer(&rep.transfer));
    }
    Ok(())
}
