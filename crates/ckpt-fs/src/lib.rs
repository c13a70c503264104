//! # ckpt-fs — the file-system layer: file access, copies and content hashes
//!
//! Every crate of ckpt touches files through this one: the store's objects,
//! the scan, restore and `ckpt cp` all stand on it. Everything here works on
//! plain paths and directory descriptors; nothing knows about workspaces,
//! stores or checkpoints. `ckpt cp` is this crate alone.
//!
//! - [`fs`]: `*at()`-style file access relative to directory descriptors,
//!   never following symlinks, and the [`Meta`](fs::Meta) stat snapshot the
//!   index compares. Nothing outside this module touches `statx` or
//!   `getdents` layouts directly.
//! - [`copy`]: the per-file copy engine (reflink → `copy_file_range` →
//!   userspace), sparse-aware, with capability probing.
//! - [`copytree`]: `cp -a` semantics for whole trees, in parallel.
//! - [`content_hash`]: BLAKE3 of a file's content, whole-file or exact,
//!   with the per-thread read buffer they share; [`struct@Hash`] names the result.
//!
//! The small file-system helpers the scan calls per entry are `#[inline]`:
//! they are called once per entry of every scan, across a crate boundary,
//! and without the hint the scan measurably slowed when they moved here.
//!
//! Configuration is explicit: a forced strategy or split threshold is passed
//! in by the caller ([`copy::CopyConfig`]); this crate reads no environment.

pub mod content_hash;
pub mod copy;
pub mod copytree;
pub mod error;
pub mod fs;
pub mod hash;

pub use error::{Error, IoContext, IoError, Result};
pub use hash::Hash;
