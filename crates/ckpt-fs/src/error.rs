//! The copy engine's errors: a failed system call on a named path, or a
//! request that makes no sense (copying a directory into itself, …).
//!
//! `ckpt-lib` converts both into its own [`Error`] kinds with the same
//! messages, so a user sees one vocabulary whichever crate failed.

use std::path::PathBuf;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A system call on a path failed: the `Io` kind of this crate's [`Error`]
/// and of ckpt-lib's.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {op}: {source}")]
pub struct IoError {
    /// What we were doing ("open", "read", "rename", ...).
    pub op: &'static str,
    /// The path concerned, as the user would recognise it.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    /// Wraps an OS error with the operation and path it concerns.
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IoError {
            op,
            path: path.into(),
            source,
        }
    }
}

/// What can go wrong while copying or hashing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call on a path failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Invalid input (a destination inside the source, …).
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// Wraps an OS error with the operation and path it concerns.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IoError::new(op, path, source).into()
    }
}

/// Adds path context to `std::io::Result`s and `rustix::io::Result`s.
pub trait IoContext<T> {
    /// Attaches the operation and path to an OS error.
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T, E: Into<std::io::Error>> IoContext<T> for std::result::Result<T, E> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| Error::io(op, path, e.into()))
    }
}
