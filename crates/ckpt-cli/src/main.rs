//! `ckpt`: the command-line front end of the `ckpt` library.
//!
//! This crate only parses arguments, calls the library (and `ckpt-remote`)
//! and prints results (text for people, `--json` for programs; see
//! `render`). Exit codes, documented in docs/CLI.md, are all mapped in
//! `exit`.
//! Each subcommand lives in its own file under `commands/`.

mod commands;
mod context;
mod exit;
mod progress;
mod render;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Instant checkpoint, diff and restore for a working directory.
#[derive(Parser)]
#[command(
    name = "ckpt",
    version,
    about = "Instant checkpoints of a whole working directory: save, diff, restore",
    long_about = None,
    after_help = "Start with `ckpt init`, then `ckpt save -m MESSAGE` before anything risky, \
`ckpt log`, `ckpt diff`, `ckpt restore ID` (itself undoable).\n\
Agents: `ckpt init --agent claude --write` (hooks), `ckpt mcp` (MCP server). \
Every command except completions, man, mcp, remote and ui takes --json; exit codes are listed in docs/CLI.md."
)]
struct Cli {
    /// Run as if started in DIR.
    #[arg(short = 'C', global = true, value_name = "DIR", id = "chdir")]
    chdir: Option<PathBuf>,
    /// Seconds to wait for another ckpt process to finish [default: 60; 1 for `ckpt hook`].
    #[arg(long, global = true, value_name = "SECS")]
    lock_timeout: Option<u64>,
    /// Print less.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Print more (timings, what was read).
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Scan the whole workspace even when a watcher could say what changed.
    #[arg(long, global = true)]
    full_scan: bool,
    #[command(subcommand)]
    cmd: commands::Command,
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`ckpt log | head`), like other Unix tools,
    // instead of panicking in println!.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread
    // is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    walk_stack();
    let cli = Cli::parse();
    let globals = context::Globals {
        chdir: cli.chdir.as_ref(),
        lock_timeout: cli.lock_timeout,
        quiet: cli.quiet,
        verbose: cli.verbose,
        full_scan: cli.full_scan,
    };
    let result = context::Ctx::new(globals, |k| std::env::var(k).ok())
        .map_err(exit::Error::from)
        .and_then(|ctx| {
            let r = commands::run(&cli.cmd, &ctx, cli.chdir.is_some());
            if ctx.verbose {
                for n in ctx.ops.notes() {
                    eprintln!("watch: {n}");
                }
            }
            r
        });
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("ckpt: error: {e}");
            exit::code(&e)
        }
    }
}

/// Gives every thread this process starts the stack a tree walk needs
/// ([`ckpt_lib::ops::parts::WALK_STACK`]; the walks recurse), through the
/// size the standard library gives a new thread that names none,
/// `RUST_MIN_STACK`, set before any thread exists (a larger value of the
/// user's is kept). So rayon's global pool can be left to build itself on
/// first use, with that stack: a command a watcher serves starts no thread
/// at all, where building the pool here started two on every command (a
/// measurable part of a command the watcher serves in a few milliseconds).
/// Commands ckpt runs (`fork -- CMD`) inherit the variable.
fn walk_stack() {
    const VAR: &str = "RUST_MIN_STACK";
    let want = ckpt_lib::ops::parts::WALK_STACK;
    let set = std::env::var(VAR).ok().and_then(|v| v.trim().parse().ok());
    if set.is_none_or(|n: usize| n < want) {
        // Sound: no other thread exists yet to read the environment.
        std::env::set_var(VAR, want.to_string());
    }
}

#[cfg(test)]
mod tests {
    use ckpt_lib::ops::restore::{flag_like, RESTORE_LONG_FLAGS, RESTORE_SHORT_FLAGS};
    use clap::CommandFactory;
    use std::path::Path;

    /// The library refuses restore paths spelled like `ckpt restore`'s
    /// flags; its lists must cover every flag clap accepts there.
    #[test]
    fn restore_flag_lists_cover_every_flag_clap_accepts() {
        let mut cmd = super::Cli::command();
        cmd.build();
        let restore = cmd.find_subcommand("restore").expect("restore");
        let mut seen = 0;
        for a in restore.get_arguments().filter(|a| !a.is_positional()) {
            for l in a
                .get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
            {
                assert!(RESTORE_LONG_FLAGS.contains(&l), "--{l} is not listed");
                assert!(flag_like(Path::new(&format!("--{l}"))).is_some(), "--{l}");
                seen += 1;
            }
            for s in a
                .get_short()
                .into_iter()
                .chain(a.get_all_short_aliases().unwrap_or_default())
            {
                assert!(RESTORE_SHORT_FLAGS.contains(&s), "-{s} is not listed");
                assert!(flag_like(Path::new(&format!("-{s}"))).is_some(), "-{s}");
                seen += 1;
            }
        }
        // --to, --dry-run, ..., the global ones and --help.
        assert!(seen >= 14, "only {seen} flags found");
    }
}
