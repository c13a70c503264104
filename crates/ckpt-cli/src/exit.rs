//! Every exit code `ckpt` returns, in one place (documented in docs/CLI.md,
//! "Exit codes").
//!
//! A command fails with an [`Error`]: the library's ([`ckpt_lib::Error`]) or
//! a remote operation's ([`ckpt_remote::Error`]). [`code`] maps both: the
//! library's through [`ckpt_lib::Error::exit_code`] (1 failure: I/O,
//! catalog, an unstable file; 2 usage or a bad revision; 3 not a workspace
//! / already one; 4 lock timeout; 5 corrupt store or state; 7 `state cas`
//! version mismatch; 9 no space for a restore's pre-restore save,
//! [`ckpt_lib::error::EXIT_NO_SPACE_FOR_UNDO`]), and the remote's here: 10
//! an object-storage request that failed after its retries, or an unusable
//! remote ([`EXIT_REMOTE`]); 2 a missing or wrong key (the user gives
//! another); 5 a tampered object (corrupt data, like a damaged store); its
//! local failures as the library's. The other codes below are the ones
//! commands return without an error.

use std::process::ExitCode;

/// A failure of `ckpt hook`: the harness's non-blocking failure
/// ([`ckpt_harness::Harness::failure_exit`]: 1, or 0 on Copilot CLI, where
/// any other code denies the tool call), 1 when no harness is named. Never
/// 2, which blocks a tool call.
pub fn hook_failure(harness: Option<ckpt_harness::Harness>) -> ExitCode {
    ExitCode::from(harness.map_or(
        ckpt_harness::WARNING_EXIT,
        ckpt_harness::Harness::failure_exit,
    ))
}

/// `ckpt verify --store` found damaged objects, trees or records (the same
/// code as a [`ckpt_lib::Error::Corrupt`] error).
pub const EXIT_STORE_DAMAGED: u8 = 5;

/// `ckpt verify` found the workspace differs from the checkpoint.
pub const EXIT_DIFFERS: u8 = 6;

/// `ckpt state cas` found another version ([`ckpt_lib::error::EXIT_CAS_MISMATCH`]).
pub const EXIT_CAS_MISMATCH: u8 = ckpt_lib::error::EXIT_CAS_MISMATCH as u8;

/// `ckpt state get` found no such key.
pub const EXIT_NOT_FOUND: u8 = 8;

/// An object-storage request that retries did not cure, or a remote that
/// cannot be used now (`ckpt push`, `pull`, `clone`, `log --remote`, `gc
/// --remote`).
pub const EXIT_REMOTE: u8 = 10;

/// What a command fails with.
#[derive(Debug)]
pub enum Error {
    /// The library's error.
    Lib(ckpt_lib::Error),
    /// A remote operation's error.
    Remote(ckpt_remote::Error),
}

impl From<ckpt_lib::Error> for Error {
    fn from(e: ckpt_lib::Error) -> Self {
        Error::Lib(e)
    }
}

impl From<ckpt_remote::Error> for Error {
    fn from(e: ckpt_remote::Error) -> Self {
        Error::Remote(e)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Lib(e) => e.fmt(f),
            Error::Remote(e) => e.fmt(f),
        }
    }
}

/// The exit code for an error.
pub fn code(e: &Error) -> ExitCode {
    ExitCode::from(match e {
        Error::Lib(e) => e.exit_code() as u8,
        Error::Remote(e) => match e {
            ckpt_remote::Error::Request(_) => EXIT_REMOTE,
            ckpt_remote::Error::Key(_) => 2,
            ckpt_remote::Error::Tampered(_) => EXIT_STORE_DAMAGED,
            ckpt_remote::Error::Lib(e) => e.exit_code() as u8,
        },
    })
}
