//! The engines that move data between a workspace and its store. Each
//! works on an already opened [`Store`](crate::store::Store) under its lock;
//! choosing between the watcher and this process, opening the store and
//! taking the lock are the front door's job ([`crate::ops`]).
//!
//! - [`scanner`]: the scan interface: where the engines get a workspace's
//!   current state ([`scanner::Scanner`]: in this process against the index
//!   file, or the watcher's in-memory index) and where its index goes.
//! - [`save`]: capture: scan, store changed contents, commit a checkpoint.
//! - [`status`]: what changed since the head, from a hash-only scan.
//! - [`restore`]: bring a workspace (or some paths) back to a checkpoint,
//!   journalled so an interruption resumes.
//! - [`materialize`]: write a checkpoint's tree into a new directory
//!   (`restore --to`, fork).
//! - [`diff`]: tree comparison and content diffs.
//! - [`digest`]: the LtHash state digest of a tree, kept incrementally.
//! - [`verify`]: re-read a workspace or the store and check digests.
//! - [`fork`]: a checkpoint as a new, independent workspace, and in its
//!   folder what forks need: [`fork::backend`] (which way its files are
//!   made), [`fork::subvolume`] (a workspace as a btrfs subvolume so forks
//!   are snapshots), [`fork::overlay`] (a fork as an overlayfs mount) and
//!   [`fork::inherit`] (a checkpoint brought from one store into another).

pub mod diff;
pub mod digest;
pub mod fork;
pub mod materialize;
pub mod restore;
pub mod save;
pub mod scanner;
pub mod status;
pub mod verify;
