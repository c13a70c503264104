//! The watcher process (`ckpt watch`): one inotify watch per directory,
//! events folded into dirty directory paths stamped with a sequence number,
//! a Unix socket `<store>/watch.sock` (mode 0600, peer uid checked), an
//! in-memory index, and optional auto-save; and [`warm`], the background
//! walk of forks that were made without a scan. The protocol and the
//! argument that no change can be missed are in [`crate::watch`].

pub mod server;
pub mod warm;
