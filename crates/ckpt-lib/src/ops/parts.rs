//! The parts the front door's options and reports are made of, named here.
//!
//! They are defined in the layers below [`crate::ops`] (a checkpoint
//! record in the catalog, a change in the diff engine, ...), which are
//! `pub(crate)` (see `src/lib.rs`). Whatever a caller of an operation must
//! name to fill its options or to read its report is re-exported here, and
//! nothing else: `tests/layers.rs` holds the crates above `ckpt-lib` to the
//! front door.

/// One difference between two trees, its kind, a file's content diff, and
/// the counts of a list of them.
pub use crate::engine::diff::{stats as change_stats, Change, ChangeKind, ContentDiff};
/// How a fork is made, and an overlay fork's mount.
pub use crate::engine::fork::backend::Backend;
pub use crate::engine::fork::overlay::Mounted;
/// What an in-place restore brings back: files, agent state, or both.
pub use crate::engine::restore::Scope;
/// What a save did: a new checkpoint, or none since nothing changed.
pub use crate::engine::save::SaveOutcome;
/// The platform diagnosis inside `ckpt doctor`'s report.
pub use crate::platform::doctor::Report as PlatformReport;
/// inotify, for a front end that follows the catalog live (`ckpt ui`).
pub use crate::platform::inotify::Inotify;
/// A checkpoint record, its annotation, and an entry a save skipped.
pub use crate::store::catalog::{Annotation, ChangeStats, Checkpoint, Skipped};
/// A retention policy, what applying one did, and what a sweep of the
/// store freed.
pub use crate::store::gc::SweepReport;
pub use crate::store::retention::{Policy, RetentionReport};
/// One change to an agent-state key, and its kind.
pub use crate::store::state::{ChangeKind as StateChangeKind, StateChange};
/// What a tree entry is: a file, a directory or a symlink.
pub use crate::store::tree::Node;
/// The stack a thread that walks trees needs (the walks recurse; every
/// front end that runs operations on threads of its own sizes them so).
pub use crate::store::tree::WALK_STACK;
/// The watcher's description of itself, and its log file
/// (`<store>/watch.log`), which `ckpt watch --daemon` and the watcher a
/// hook starts write to.
pub use crate::watch::{log_path as watch_log_path, WatchStatus, WatcherFacts};
/// An entry the scan was not allowed to read, and the sentence that
/// explains what that means for it.
pub use crate::workspace::scan::{Unreadable, UNREADABLE};
/// A directory under ckpt: its root and where its store is
/// ([`super::Context::workspace`]).
pub use crate::workspace::Workspace;
