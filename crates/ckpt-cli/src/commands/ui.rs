//! `ckpt ui`: serve the checkpoint timeline to a browser (crate `ckpt-ui`).
//!
//! This file only turns flags into [`ckpt_ui::Options`]: the addresses
//! (loopback, IPv4 and IPv6, unless `--bind` names another, which is warned
//! about), `--read-only`; then prints the URL (token included) and, with
//! `--open`, hands it to `xdg-open`.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ckpt_lib::Result;

use crate::context::Ctx;

// Arguments of `ckpt ui`.
#[derive(clap::Args)]
pub struct UiArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Open the page in the default browser (`xdg-open`).
    #[arg(long)]
    open: bool,
    /// Show only: no restore, fork, delete or gc (refused by the server too).
    #[arg(long)]
    read_only: bool,
    /// Listen on this address instead of loopback. Anyone who can reach it
    /// and learns the URL can restore and delete: prints a warning.
    #[arg(long, value_name = "ADDR")]
    bind: Option<IpAddr>,
}

/// Runs `ckpt ui` until interrupted.
pub fn run(ctx: &Ctx, args: &UiArgs) -> Result<()> {
    let addrs =
        match args.bind {
            Some(ip) => {
                if !ip.is_loopback() {
                    eprintln!(
                    "ckpt ui: warning: listening on {ip}, not loopback: anyone who can reach it \
                     and learns the URL can see the workspace{}",
                    if args.read_only { "" } else { " and restore or delete checkpoints" }
                );
                }
                vec![SocketAddr::new(ip, args.port)]
            }
            None => vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), args.port)],
        };
    let opts = ckpt_ui::Options {
        addrs,
        read_only: args.read_only,
        // Loopback: also [::1] on the same port, when the machine has IPv6.
        also_v6_loopback: args.bind.is_none(),
    };
    let open = args.open;
    ckpt_ui::serve(ctx.ops.cwd.clone(), ctx.ops.config.clone(), opts, |ready| {
        println!("{}", ready.url);
        if !ctx.quiet {
            let all: Vec<String> = ready.addrs.iter().map(|a| a.to_string()).collect();
            eprintln!("ckpt ui: serving on {} (Ctrl-C to stop)", all.join(", "));
        }
        let _ = std::io::stdout().flush();
        if open {
            if let Err(e) = std::process::Command::new("xdg-open")
                .arg(&ready.url)
                .spawn()
            {
                eprintln!("ckpt ui: could not run xdg-open ({e}); open the URL above");
            }
        }
    })
}
