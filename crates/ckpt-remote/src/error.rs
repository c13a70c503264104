//! What can go wrong in a remote operation: the failures of the remote
//! itself, and, wrapped unchanged, those of the local side
//! ([`ckpt_lib::Error`]: the store, the workspace, a usage error, corrupt
//! data). `ckpt-lib` knows nothing of remotes; the CLI's `exit.rs` maps
//! both types to the exit codes of docs/CLI.md.

use std::path::PathBuf;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A remote operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An object-storage request that retries did not cure (the message
    /// names the request and the object), or a remote that cannot be used
    /// now (another `gc --remote` holds its lock, a gc kept condemning what
    /// a push needs).
    #[error("remote: {0}")]
    Request(String),
    /// No key for an encrypted remote, a key that does not open it, or a
    /// key file that cannot be read; nothing was changed.
    #[error("{0}")]
    Key(String),
    /// An object of an encrypted remote that does not open with its key:
    /// damaged, replaced or moved (the message names it).
    #[error("store corrupt: {0}")]
    Tampered(String),
    /// A failure of the local side, or data that failed a check.
    #[error(transparent)]
    Lib(#[from] ckpt_lib::Error),
}

impl Error {
    /// Data that failed its integrity check ([`ckpt_lib::Error::Corrupt`]).
    pub fn corrupt(msg: impl Into<String>) -> Error {
        Error::Lib(ckpt_lib::Error::Corrupt(msg.into()))
    }

    /// Invalid input ([`ckpt_lib::Error::Usage`]).
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Lib(ckpt_lib::Error::Usage(msg.into()))
    }

    /// A checkpoint id that names nothing, or more than one
    /// ([`ckpt_lib::Error::BadRevision`]).
    pub fn bad_revision(msg: impl Into<String>) -> Error {
        Error::Lib(ckpt_lib::Error::BadRevision(msg.into()))
    }

    /// An OS error with the operation and path it concerns.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Lib(ckpt_lib::Error::io(op, path, source))
    }
}
