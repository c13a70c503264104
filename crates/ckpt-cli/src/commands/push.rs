//! `ckpt push [REMOTE] [ID…|--all]`: through [`ckpt_remote::push`].

use ckpt_fs::copytree::Progress;
use ckpt_remote::push::PushOptions;
use ckpt_remote::Result;

use super::remote::TransferArgs;
use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt push`.
#[derive(clap::Args)]
pub struct PushArgs {
    /// A remote name (see `ckpt remote list`) or URL; default: origin, or the only remote.
    remote: Option<String>,
    /// Checkpoints to push (default: the head).
    ids: Vec<String>,
    /// Push every checkpoint.
    #[arg(long, conflicts_with = "ids")]
    all: bool,
    /// The workspace name on the remote (default: the remote's setting, else the directory's name).
    #[arg(long, value_name = "NAME")]
    workspace: Option<String>,
    #[command(flatten)]
    transfer: TransferArgs,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt push`.
pub fn run(ctx: &Ctx, args: &PushArgs) -> Result<()> {
    let settings = args.transfer.settings(ctx)?;
    let progress = Progress::default();
    let opts = PushOptions {
        remote: args.remote.as_deref(),
        workspace: args.workspace.as_deref(),
        revs: &args.ids,
        all: args.all,
        settings: &settings,
        progress: Some(&progress),
    };
    let rep = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
        ckpt_remote::push::push(&ctx.ops, &opts)
    })?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        for (l, r) in &rep.pushed {
            println!("pushed {l} as {}", &r[..12]);
        }
        if rep.pushed.is_empty() {
            println!("{} already has everything ({})", rep.url, rep.workspace);
        }
        println!("{}", render::transfer(&rep.transfer));
    }
    Ok(())
}
