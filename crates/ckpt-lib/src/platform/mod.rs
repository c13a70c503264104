//! Platform code: the few Linux system calls ckpt depends on, behind small
//! safe wrappers. Nothing outside this module issues an ioctl or touches
//! `statx`/`getdents` layouts directly.
//!
//! - [`fs`]: `*at()`-style file access relative to directory descriptors,
//!   never following symlinks, and the [`Meta`](fs::Meta) stat snapshot the
//!   index compares.
//! - [`copy`]: the copy engine (reflink → `copy_file_range` → userspace) and
//!   capability probing.
//! - [`inotify`]: directory watches for `ckpt watch`, and the peer
//!   credentials of its socket.

pub mod copy;
pub mod fs;
pub mod inotify;
