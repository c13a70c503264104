//! # ckpt-lib — the ckpt model
//!
//! This crate owns the model; the `ckpt` binary (crate `ckpt-cli`) maps
//! arguments to one call of [`ops`] and prints the report it gets back.
//!
//! The folders are the layers, each using only the ones listed before it
//! (`docs/ARCHITECTURE.md` has the picture; `tests/layers.rs` refuses an
//! import circle):
//!
//! - [`platform`]: the Linux pieces outside the copy engine: inotify, and the
//!   probes `ckpt doctor` shows. Files, copies and content hashes are crate
//!   `ckpt-fs`.
//! - [`store`]: the store on disk: the content-addressed [`objects`](store::objects)
//!   and their [`bands`](store::bands), the [`catalog`](store::catalog)
//!   (redb: trees, checkpoint records, refs, meta keys), the stat
//!   [`index`](store::index), [`tree`](store::tree) encoding, the store
//!   [`lock`](store::lock), the link
//!   to the agent-state store ([`state`](store::state)), and what frees
//!   space: [`gc`](store::gc), [`retention`](store::retention),
//!   [`usage`](store::usage).
//! - [`workspace`]: a directory under ckpt: its marker, its
//!   [`ignore`](workspace::ignore) rules, and the parallel
//!   [`scan`](workspace::scan) that compares it with the index.
//! - [`engine`]: what moves data between a workspace and its store: the
//!   [`scanner`](engine::scanner) interface, [`save`](engine::save),
//!   [`status`](engine::status), [`restore`](engine::restore),
//!   [`materialize`](engine::materialize), [`diff`](engine::diff), the
//!   state [`digest`](engine::digest), [`verify`](engine::verify),
//!   [`fork`](engine::fork).
//! - [`watch`]: the watcher's wire protocol and its client: asks a live
//!   watcher what changed, or hands it a save or restore.
//! - [`ops`]: **the front door**. One function per user operation, each
//!   taking a typed options struct and returning a typed, `Serialize`
//!   report. It alone opens the store, takes the lock and decides between
//!   "through the live watcher" and "here". The CLI, `ckpt mcp`, `ckpt
//!   hook` and the watcher's request handler call only this layer.
//! - [`daemon`]: the watcher process itself (`ckpt watch`): dirty-directory
//!   tracking, the in-memory index, the socket server and auto-save. It
//!   serves requests by calling [`ops`].
//!
//! Configuration is explicit: the caller builds one [`Config`] (the CLI
//! from its flags and the environment) and passes it in. The library reads
//! no environment variable and keeps no global mutable state, with one
//! documented exception: [`trace::enable`], a diagnostics switch the CLI
//! sets once at start-up.

/// Declares a layer under the front door: `pub(crate)`, and `pub` with the
/// feature `internals`, which only this crate's tests, benches and
/// examples, ckpt-cli's tests and the fuzz targets turn on (they check the
/// layers against reference models). `tests/layers.rs` checks that the
/// crates above use the front door alone.
macro_rules! internal {
    ($($(#[$attr:meta])* mod $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

internal! {
    mod engine;
    mod platform;
    mod store;
    mod watch;
    mod workspace;
}

// The public surface: the front door (the operations, their options and
// reports), and what every caller needs besides it: the configuration
// every operation takes, the one error type and its exit codes, the
// diagnostics switch, and the watcher process that `ckpt watch` runs
// (whose requests go through `ops`).
pub mod config;
pub mod daemon;
pub mod error;
pub mod ops;
pub mod trace;

pub use ckpt_fs::Hash;
pub use config::Config;
pub use error::{Error, Result};
