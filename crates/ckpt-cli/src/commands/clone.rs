//! `ckpt clone URL[#ID] DIR`: through [`ckpt_remote::pull::clone`].

use std::path::PathBuf;

use ckpt_fs::copytree::Progress;
use ckpt_remote::pull::CloneOptions;
use ckpt_remote::Result;

use super::remote::TransferArgs;
use crate::context::Ctx;
use crate::render::{self, print_report};

// Arguments of `ckpt clone`.
#[derive(clap::Args)]
pub struct CloneArgs {
    /// The remote URL, optionally with #ID (a remote-id prefix, v<seq>, latest; default latest).
    source: String,
    /// The new workspace: a new or empty directory.
    dir: PathBuf,
    /// The workspace name on the remote (default: the only one there).
    #[arg(long, value_name = "NAME")]
    workspace: Option<String>,
    /// Where to keep the new workspace's store (default: the usual rule).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// The key file of an encrypted remote (recorded with `origin`; or $CKPT_REMOTE_PASSPHRASE, $CKPT_REMOTE_KEY_FILE).
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    #[command(flatten)]
    transfer: TransferArgs,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Runs `ckpt clone`.
pub fn run(ctx: &Ctx, args: &CloneArgs) -> Result<()> {
    let settings = args.transfer.settings(ctx)?;
    let progress = Progress::default();
    let opts = CloneOptions {
        source: &args.source,
        dir: &args.dir,
        workspace: args.workspace.as_deref(),
        store: args.store.as_deref(),
        key_file: args.key_file.as_deref(),
        settings: &settings,
        progress: Some(&progress),
    };
    let rep = crate::progress::with_bar(&progress, None, ctx.quiet || args.json, || {
        ckpt_remote::pull::clone(&ctx.ops, &opts)
    })?;
    if args.json {
        print_report(&rep);
    } else if !ctx.quiet {
        println!(
            "cloned {} ({}) of {} into {} as {}: {}, {}",
            &rep.record.id[..12],
            rep.workspace,
            rep.url,
            rep.to.display(),
            rep.id,
            render::count(rep.files, "file", "files"),
            render::bytes(rep.bytes),
        );
        println!("{}", render::transfer(&rep.transfer));
    }
    Ok(())
}
