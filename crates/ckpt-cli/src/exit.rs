//! Every exit code `ckpt` returns, in one place (documented in docs/CLI.md,
//! "Exit codes").
//!
//! Errors map to codes through [`code`], which is
//! [`ckpt_lib::Error::exit_code`]: 1 failure (I/O, catalog, an unstable
//! file), 2 usage or a bad revision, 3 not a workspace / already one, 4 lock
//! timeout, 5 corrupt store or state, 7 `state cas` version mismatch, 9
//! no space for a restore's pre-restore save
//! ([`ckpt_lib::error::EXIT_NO_SPACE_FOR_UNDO`]), 10 an object-storage
//! request that failed after its retries, or an unusable remote
//! ([`ckpt_lib::error::EXIT_REMOTE`]). The codes below are the ones commands
//! return without an error.

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

/// The exit code for an error.
pub fn code(e: &ckpt_lib::Error) -> ExitCode {
    ExitCode::from(e.exit_code() as u8)
}
