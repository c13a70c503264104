//! Platform code outside the copy engine: the few Linux interfaces only
//! workspaces need, behind small safe wrappers. (File access, copies and
//! content hashing are crate `ckpt-fs`.)
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
//! - [`drop_later`]: frees a large value off the caller's path.

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

/// Frees `value` on a thread of its own: a command that is about to exit
/// (a scan-mode save or status, whose index of a million entries takes tens
/// of milliseconds to free) does not wait for it, and a long-lived caller
/// frees it all the same. If no thread can be started, the failed spawn
/// drops the value here.
pub fn drop_later<T: Send + 'static>(value: T) {
    let _ = std::thread::Builder::new()
        .name("ckpt-drop".into())
        .spawn(move || drop(value));
}
