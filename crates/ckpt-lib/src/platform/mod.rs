//! Platform code outside the copy engine: the few Linux interfaces only
//! workspaces need, behind small safe wrappers. (File access, copies and
//! content hashing are crate `ckpt-copy`.)
//!
//! - [`inotify`]: directory watches for `ckpt watch`, and the peer
//!   credentials of its socket.
//! - [`btrfs`]: subvolume snapshot, create and delete ioctls (fork backend).
//! - [`doctor`]: filesystem identification, copy-capability probes and
//!   inotify limits, for `ckpt doctor`.

pub mod btrfs;
pub mod doctor;
pub mod inotify;
