//! # ckpt — instant checkpoints for a working directory
//!
//! This crate owns the model; the `ckpt` binary (crate `ckpt-cli`) is a thin
//! layer of argument parsing and printing on top of it.
//!
//! How the pieces fit (see `docs/ARCHITECTURE.md` for the picture):
//!
//! - [`workspace`] finds a workspace (the `.ckpt` marker, walking up like git)
//!   and its [`store`](store::Store): where checkpoints live, outside the
//!   workspace so they survive its deletion.
//! - [`scan`] walks the workspace in parallel and compares every entry with
//!   the stat [`index`]; only entries whose stat changed are read. It produces
//!   the directory [`tree`]s of the current state, reusing unchanged subtrees
//!   by hash.
//! - [`objects`] holds file contents as plain, read-only files named by their
//!   BLAKE3 hash, written with the [`copy`](platform::copy) engine (reflink →
//!   `copy_file_range` → userspace).
//! - [`catalog`] is the embedded ACID database (redb) holding trees,
//!   checkpoint records and refs.
//! - [`checkpoint`] (save), [`restore`], [`diff`], [`gc`] and [`verify`] are
//!   the operations users run.
//! - [`state`] connects the agent-state store (crate `ckpt-state`,
//!   `<store>/state.redb`) to checkpoints: a save records the state version,
//!   restore brings it back, diff compares it, gc keeps the pinned versions.
//!
//! - [`watch`] is watch mode: a watcher process folds inotify events into
//!   dirty directories so scans cost what changed (`ckpt watch`).
//!
//! Every public operation takes the store [`lock`] first, so two `ckpt`
//! processes on one workspace serialise instead of corrupting each other.

pub mod bands;
pub mod catalog;
pub mod checkpoint;
pub mod content_hash;
pub mod copytree;
pub mod diff;
pub mod doctor;
pub mod error;
pub mod fork;
pub mod gc;
pub mod hash;
pub mod ignore;
pub mod index;
pub mod lock;
pub mod materialize;
pub mod objects;
pub mod platform;
pub mod restore;
pub mod retention;
pub mod scan;
pub mod state;
pub mod store;
pub mod trace;
pub mod tree;
pub mod usage;
pub mod verify;
pub mod watch;
pub mod workspace;

pub use error::{Error, Result};
pub use hash::Hash;
