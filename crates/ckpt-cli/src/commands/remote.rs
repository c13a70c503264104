//! `ckpt remote add [--encrypt [--key-file F]] NAME URL [--workspace W]`, `remote list`, `remote
//! remove NAME`: the workspace's named remotes, through
//! [`ckpt_remote::remotes`].

use ckpt_remote::Result;
use clap::Subcommand;

use crate::context::Ctx;
use crate::render::print_report;

// The option every transfer (`push`, `pull`, `clone`) takes.
#[derive(clap::Args)]
pub struct TransferArgs {
    /// Requests in flight at once (default 8, or $CKPT_REMOTE_CONCURRENCY).
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
}

impl TransferArgs {
    /// The remote settings from the environment, with this command's
    /// `--concurrency`.
    pub fn settings(&self, ctx: &Ctx) -> ckpt_lib::Result<ckpt_remote::Settings> {
        let mut settings = ctx.remote()?.clone();
        if let Some(n) = self.concurrency {
            settings.concurrency = n.max(1);
        }
        Ok(settings)
    }
}

// `ckpt remote …`.
#[derive(Subcommand)]
pub enum RemoteCmd {
    /// Add a remote: s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///path.
    Add {
        /// Its name (e.g. origin).
        name: String,
        /// Its URL.
        url: String,
        /// The name this workspace pushes as and pulls from (default: the directory's name).
        #[arg(long, value_name = "NAME")]
        workspace: Option<String>,
        /// Encrypt everything stored on it, client-side (docs/REMOTE.md); the key: $CKPT_REMOTE_PASSPHRASE, --key-file or $CKPT_REMOTE_KEY_FILE.
        #[arg(long)]
        encrypt: bool,
        /// A file whose bytes are the key of an encrypted remote (recorded with the remote).
        #[arg(long, value_name = "PATH", requires = "encrypt")]
        key_file: Option<std::path::PathBuf>,
        #[command(flatten)]
        transfer: TransferArgs,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// List the remotes.
    #[command(alias = "ls")]
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Forget a remote (nothing on the remote is touched).
    #[command(alias = "rm")]
    Remove {
        /// Its name.
        name: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `ckpt remote …`.
pub fn run(ctx: &Ctx, cmd: &RemoteCmd) -> Result<()> {
    let (rep, json) = match cmd {
        RemoteCmd::Add {
            name,
            url,
            workspace,
            encrypt,
            key_file,
            transfer,
            json,
        } => {
            // Only an encrypted remote is reached now (its settings read).
            let settings = if *encrypt {
                transfer.settings(ctx)?
            } else {
                ckpt_remote::Settings::default()
            };
            let opts = ckpt_remote::remotes::AddOptions {
                name,
                url,
                workspace: workspace.as_deref(),
                encrypt: *encrypt,
                key_file: key_file.as_deref(),
                settings: &settings,
            };
            (ckpt_remote::remotes::add(&ctx.ops, &opts)?, *json)
        }
        RemoteCmd::List { json } => (ckpt_remote::remotes::list(&ctx.ops)?, *json),
        RemoteCmd::Remove { name, json } => (ckpt_remote::remotes::remove(&ctx.ops, name)?, *json),
    };
    if json {
        print_report(&rep);
        return Ok(());
    }
    let action = match (&rep.added, &rep.removed) {
        (Some(n), _) => Some(("added", n)),
        (_, Some(n)) => Some(("removed", n)),
        _ => None,
    };
    match action {
        Some((what, name)) if !ctx.quiet => println!("{what} remote {name}"),
        Some(_) => {}
        None => {
            for (name, e) in &rep.remotes.remotes {
                let enc = if e.encrypt { "\t(encrypted)" } else { "" };
                match &e.workspace {
                    Some(w) => println!("{name}\t{}\t(workspace {w}){enc}", e.url),
                    None => println!("{name}\t{}{enc}", e.url),
                }
            }
        }
    }
    Ok(())
}
