//! Platform code outside the copy engine: the few Linux interfaces only
//! workspaces need, behind small safe wrappers. (File access, copies and
//! content hashing are crate `ckpt-copy`.)
//!
//! - [`inotify`]: directory watches for `ckpt watch`, and the peer
//!   credentials of its socket.
//! - [`btrfs`]: subvolume snapshot, create and delete ioctls (fork backend).
//! - [`overlay`]: overlayfs mounts, in this mount namespace or a child's
//!   new one (overlay fork backend).
//! - [`doctor`]: filesystem identification, copy-capability probes and
//!   inotify limits, for `ckpt doctor`.
//! - [`release_free_memory`]: hands the allocator's free pages back to the
//!   kernel (the long-running watcher, when idle).

pub mod btrfs;
pub mod doctor;
pub mod inotify;
pub mod overlay;

/// Hands the allocator's free pages back to the kernel (`malloc_trim`).
pub fn release_free_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists; it may
    // be called at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
