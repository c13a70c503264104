//! Errors a user can act on.
//!
//! Every error names the path or object it concerns and what went wrong.
//! [`Error::exit_code`] maps each kind to the stable exit codes documented in
//! docs/CLI.md, so scripts can tell "no such checkpoint" from "store corrupt".

use std::path::PathBuf;

use ckpt_fs::IoError;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ckpt.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call on a path failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// No workspace found walking up from a directory.
    #[error("not a ckpt workspace (or any parent up to /): {0}\n  run `ckpt init` to make it one")]
    NotAWorkspace(PathBuf),
    /// `ckpt init` on a directory that already is one.
    #[error("{0} is already a ckpt workspace")]
    AlreadyAWorkspace(PathBuf),
    /// `ckpt init` (or `fork`) on a directory inside an existing workspace:
    /// the outer one would capture the inner one's marker and files.
    #[error("{} is inside the ckpt workspace {}; a workspace inside another is refused (nothing was created)\n  the outer workspace's checkpoints already cover this directory: use it (`ckpt -C {}`), or choose a directory outside it", .dir.display(), .outer.display(), .outer.display())]
    InsideAWorkspace {
        /// The directory asked for.
        dir: PathBuf,
        /// The root of the workspace it is inside.
        outer: PathBuf,
    },
    /// A checkpoint id that names nothing, or more than one thing.
    #[error("{0}")]
    BadRevision(String),
    /// The store lock could not be taken in time.
    #[error("another ckpt process holds the lock on {path} (waited {waited_secs} s); nothing was changed\n  retry, or raise --lock-timeout")]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited_secs: u64,
    },
    /// Stored data failed its integrity check.
    #[error("store corrupt: {0}")]
    Corrupt(String),
    /// A file kept changing while we tried to capture it.
    #[error("{0}: kept changing while it was being captured; nothing was saved\n  retry when writers are quiet")]
    Unstable(PathBuf),
    /// A directory nested deeper than the limit (the store's `MAX_DEPTH`).
    #[error("{}: nested more than {max} directories deep, which ckpt does not capture; nothing was changed\n  add it (or a directory above it) to .ckptignore, or nest it less deeply", .path.display())]
    TooDeep {
        /// The first directory too deep.
        path: PathBuf,
        /// The limit.
        max: usize,
    },
    /// Invalid user input (bad flag combination, bad tag, ...).
    #[error("{0}")]
    Usage(String),
    /// A restore's pre-restore save (its undo point) did not fit where the
    /// store is; nothing was changed.
    #[error("{0}")]
    NoSpaceForUndo(Box<NoSpaceForUndo>),
    /// The agent-state store reported an error (conflict after retries,
    /// compare-and-swap mismatch, lock timeout, ...).
    #[error("agent state: {0}")]
    State(#[from] ckpt_state::Error),
    /// An operation that makes several independent things (`fork --count`)
    /// failed after making some, which stay: the message names them; the
    /// exit code is the cause's.
    #[error("{message}")]
    Partly {
        /// What failed, why, and what was made and stays.
        message: String,
        /// The error that stopped it.
        cause: Box<Error>,
    },
    /// The embedded database reported an error.
    #[error("catalog {path}: {message}")]
    Catalog {
        /// The catalog file.
        path: PathBuf,
        /// redb's description.
        message: String,
    },
}

impl Error {
    /// Wraps an OS error with the operation and path it concerns.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IoError::new(op, path, source).into()
    }

    /// Whether a system call failed for want of space (`ENOSPC`, or
    /// `EDQUOT`: a quota is full).
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, Error::Io(e) if no_space(&e.source))
    }

    /// The process exit code for this error (documented in docs/CLI.md).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::BadRevision(_) => 2,
            Error::NotAWorkspace(_)
            | Error::AlreadyAWorkspace(_)
            | Error::InsideAWorkspace { .. } => 3,
            Error::LockTimeout { .. } => 4,
            Error::NoSpaceForUndo(_) => EXIT_NO_SPACE_FOR_UNDO,
            Error::Corrupt(_) => 5,
            Error::Partly { cause, .. } => cause.exit_code(),
            Error::Io(_) | Error::Unstable(_) | Error::TooDeep { .. } | Error::Catalog { .. } => 1,
            Error::State(e) => match e {
                ckpt_state::Error::CasMismatch { .. } => EXIT_CAS_MISMATCH,
                ckpt_state::Error::Locked { .. } => 4,
                ckpt_state::Error::InvalidArgument(_)
                | ckpt_state::Error::VersionUnavailable { .. } => 2,
                ckpt_state::Error::Corrupt(_) | ckpt_state::Error::Format { .. } => 5,
                _ => 1,
            },
        }
    }
}

/// Whether an OS error means "no space left" (`ENOSPC`, or `EDQUOT`: a
/// quota is full).
pub fn no_space(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(e.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded)
}

/// Exit code of a restore refused because its pre-restore save does not
/// fit ([`Error::NoSpaceForUndo`]); nothing was changed.
pub const EXIT_NO_SPACE_FOR_UNDO: i32 = 9;

/// Why a restore was refused for want of space for its undo point, and
/// what `--no-save` would lose instead.
#[derive(Debug)]
pub struct NoSpaceForUndo {
    /// The checkpoint to restore (`v3`).
    pub target: String,
    /// The store directory.
    pub store: PathBuf,
    /// The error the save ran into.
    pub cause: IoError,
    /// The unsaved changes the restore would overwrite or delete, as
    /// name-status lines (`A big2.bin`), in path order.
    pub lost: Vec<String>,
}

/// How many of [`NoSpaceForUndo::lost`] the message lists.
const LOST_SHOWN: usize = 20;

impl std::fmt::Display for NoSpaceForUndo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "no space to save the current state before restoring {} (the save that makes the \
             restore undoable): {}; nothing was changed",
            self.target, self.cause
        )?;
        write!(
            f,
            "  `--no-save` skips that save and writes nothing to the store, so `ckpt restore \
             --no-save {}` (with the same paths, if any) would work, but ",
            self.target
        )?;
        if self.lost.is_empty() {
            writeln!(
                f,
                "it loses nothing unsaved: the restore touches no path changed since the last checkpoint"
            )?;
        } else {
            writeln!(
                f,
                "the unsaved changes to these paths (in no checkpoint) would be lost:"
            )?;
            for l in self.lost.iter().take(LOST_SHOWN) {
                writeln!(f, "    {l}")?;
            }
            if self.lost.len() > LOST_SHOWN {
                writeln!(f, "    … and {} more", self.lost.len() - LOST_SHOWN)?;
            }
        }
        write!(
            f,
            "  or free space on the filesystem of {} (`ckpt du`, `ckpt gc`) and restore again",
            self.store.display()
        )
    }
}

/// Exit code of a failed compare-and-swap (`ckpt state cas`): the key's
/// version was not the expected one; nothing was written.
pub const EXIT_CAS_MISMATCH: i32 = 7;

/// Adds path context to `std::io::Result`s and `rustix::io::Result`s.
/// (Crate `ckpt-fs` has the same trait for its own error type, which
/// converts into [`Error`] with `?`.)
pub trait IoContext<T> {
    /// Attaches the operation and path to an OS error.
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T, E: Into<std::io::Error>> IoContext<T> for std::result::Result<T, E> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| Error::io(op, path, e.into()))
    }
}

impl From<ckpt_fs::Error> for Error {
    fn from(e: ckpt_fs::Error) -> Self {
        match e {
            ckpt_fs::Error::Io(e) => Error::Io(e),
            ckpt_fs::Error::Usage(m) => Error::Usage(m),
        }
    }
}
