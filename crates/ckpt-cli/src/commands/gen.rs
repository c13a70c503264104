//! `ckpt completions SHELL` and `ckpt man`: generated from the clap
//! definition of the CLI, so they never drift from it.

use std::io::Write;

use ckpt_lib::{Error, Result};
use clap::CommandFactory;

// Arguments of `ckpt completions`.
#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// Prints a completion script for `shell` to stdout.
pub fn completions<C: CommandFactory>(shell: clap_complete::Shell) -> Result<()> {
    let mut cmd = C::command();
    clap_complete::generate(shell, &mut cmd, "ckpt", &mut std::io::stdout());
    Ok(())
}

/// Prints the man page (roff) to stdout: `ckpt man > ckpt.1`.
pub fn man<C: CommandFactory>() -> Result<()> {
    let mut out = Vec::new();
    clap_mangen::Man::new(C::command())
        .render(&mut out)
        .map_err(|e| Error::io("render", "man page", e))?;
    std::io::stdout()
        .write_all(&out)
        .map_err(|e| Error::io("write", "<stdout>", e))
}
