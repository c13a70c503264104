//! What every command gets: the library's [`Context`] (directory and
//! [`Config`]) and how much to print.
//!
//! This is the one place the CLI turns its global flags and the
//! environment into configuration; the library reads neither. The
//! variables are documented in `docs/CLI.md` ("Environment").

use std::path::PathBuf;
use std::time::Duration;

use ckpt_copy::copy::Strategy;
use ckpt_lib::config::CopyConfig;
use ckpt_lib::ops::Context;
use ckpt_lib::{Config, Error, Result};

/// A command's context.
pub struct Ctx {
    /// Where the operation runs, and its configuration.
    pub ops: Context,
    /// Print less.
    pub quiet: bool,
    /// Print more.
    pub verbose: bool,
    /// `CKPT_COPY_STRATEGY` when it names no strategy: `ckpt cp` refuses
    /// it, `ckpt doctor` shows it, every other command ignores it.
    pub bad_copy_strategy: Option<String>,
}

/// The global flags.
pub struct Globals<'a> {
    /// `-C DIR`.
    pub chdir: Option<&'a PathBuf>,
    /// `--lock-timeout SECS`.
    pub lock_timeout: u64,
    /// `-q`.
    pub quiet: bool,
    /// `-v`.
    pub verbose: bool,
    /// `--full-scan`.
    pub full_scan: bool,
}

impl Ctx {
    /// Builds the context from the global flags and `env` (the process
    /// environment, or a map in tests).
    pub fn new(g: Globals<'_>, env: impl Fn(&str) -> Option<String>) -> Result<Ctx> {
        let cwd = match g.chdir {
            Some(d) => std::env::current_dir()
                .map(|c| c.join(d))
                .unwrap_or_else(|_| d.clone()),
            None => std::env::current_dir().map_err(|e| Error::io("getcwd", ".", e))?,
        };
        let set = |k: &str| env(k).filter(|v| !v.is_empty());
        let positive = |k: &str| {
            set(k)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&v| v > 0)
        };
        if set("CKPT_TRACE").is_some_and(|v| v != "0") {
            ckpt_lib::trace::enable();
        }
        let (strategy, bad_copy_strategy) = match set("CKPT_COPY_STRATEGY") {
            None => (None, None),
            Some(v) => match Strategy::parse(&v) {
                Some(s) => (Some(s), None),
                None => (
                    None,
                    Some(format!(
                        "CKPT_COPY_STRATEGY={v:?} is not one of reflink, copy_file_range, userspace"
                    )),
                ),
            },
        };
        let config = Config {
            lock_timeout: Duration::from_secs(g.lock_timeout),
            full_scan: g.full_scan || set("CKPT_FULL_SCAN").is_some_and(|v| v != "0"),
            copy: CopyConfig {
                strategy,
                split_at: positive("CKPT_SPLIT_BYTES"),
            },
            band_min: positive("CKPT_BAND_MIN"),
            // `$XDG_DATA_HOME` (absolute, as the XDG spec requires), else
            // `$HOME/.local/share` when `$HOME` is a directory that exists
            // (`HOME=/nonexistent` is a common "no home"); else none, and
            // stores go beside the workspace.
            data_home: set("XDG_DATA_HOME")
                .map(PathBuf::from)
                .filter(|d| d.is_absolute())
                .or_else(|| {
                    set("HOME")
                        .map(PathBuf::from)
                        .filter(|h| h.is_absolute() && h.is_dir())
                        .map(|h| h.join(".local/share"))
                }),
        };
        Ok(Ctx {
            ops: Context::new(cwd, config),
            quiet: g.quiet,
            verbose: g.verbose,
            bad_copy_strategy,
        })
    }
}
