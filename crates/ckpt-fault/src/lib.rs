//! Crash points between durable steps, for crash tests.
//!
//! Owns [`POINTS`], the one list of every named point in save, restore, gc,
//! delete and agent-state commits, and [`point`], the call placed in the
//! code between two durable steps. Invariants:
//! - without the `enabled` feature [`point`] is an empty inline function:
//!   release builds contain no fault code at all;
//! - with it, a point does nothing unless `CKPT_FAULT=NAME[:N]` names it; the
//!   N-th time (default 1st) the process reaches NAME it SIGKILLs itself —
//!   no unwinding, no destructors, no buffered output flushed, exactly like a
//!   crash or `kill -9`; with `CKPT_FAULT_ACTION=stop` it SIGSTOPs itself
//!   instead and carries on when the test sends SIGCONT, so a test can put
//!   another process's steps exactly there (no sleeps, no timing);
//!   `CKPT_FAULT` may name several points, comma-separated;
//! - every name passed to [`point`] is in [`POINTS`] (a debug assertion
//!   checks it when armed, and `crates/ckpt-cli/tests/faults.rs` checks the
//!   list is exercised), so a test can iterate over all of them.

/// Every crash point, in the order an operation reaches them (except that
/// a save's first objects reach `objects.before_rename` to
/// `objects.after_dir_fsync` on the store's syncing thread while the scan
/// runs, so before `save.after_scan`; see `store/objects.rs`; and a save
/// that stores new content reaches `catalog.before_writable_open` on a
/// thread of the catalog's while the scan runs, and a save with nothing
/// more to commit reaches `catalog.before_durable_close` on another while
/// it writes its index; see `store/catalog.rs`).
pub const POINTS: &[&str] = &[
    // save (crate ckpt-lib: objects, checkpoint, catalog, index)
    "save.after_scan",
    "objects.after_tmp_fsync",
    "objects.before_shard_rename",
    "objects.after_shard_rename",
    "objects.before_rename",
    "objects.after_rename",
    "objects.after_dir_fsync",
    "catalog.before_writable_open",
    "catalog.before_commit",
    "catalog.after_commit",
    "catalog.before_durable_close",
    "index.after_tmp_write",
    "index.after_rename",
    // restore (the pre-restore save passes through the points above)
    "restore.after_pre_save",
    "restore.after_journal",
    "restore.after_state",
    "restore.phase_a",
    "restore.after_tmp_write",
    "restore.after_rename",
    "restore.phase_c",
    "restore.before_journal_end",
    "restore.after_journal_end",
    // delete
    "delete.before_commit",
    "delete.after_commit",
    // gc
    "gc.after_state_gc",
    "gc.after_index",
    "gc.after_generation",
    "gc.after_delete",
    // agent state (crate ckpt-state)
    "state.before_commit",
    "state.after_commit",
    "state.gc_before_commit",
    "state.gc_after_commit",
];

/// Crash points of `ckpt push` and `ckpt gc --remote` (crate ckpt-remote),
/// kept apart from [`POINTS`] because they need a remote: exercised by
/// `crates/ckpt-cli/tests/remote.rs` (a push killed or stopped after its
/// N-th pack, killed after its records before the ref; a gc stopped after
/// it decided what to condemn and delete, before it writes anything).
pub const REMOTE_POINTS: &[&str] = &[
    "remote.push.after_pack",
    "remote.push.before_ref",
    "remote.gc.after_mark",
];

/// Crash points of an overlay fork (crate ckpt-lib, engine/fork/overlay.rs),
/// kept apart from [`POINTS`] because they need overlay mounts: exercised
/// by `crates/ckpt-cli/tests/fork_overlay.rs` (after the lower is written,
/// before it is renamed in; before the fork's layers are published; before
/// the mount).
pub const OVERLAY_POINTS: &[&str] = &[
    "overlay.before_lower_rename",
    "overlay.before_publish",
    "overlay.before_mount",
];

/// The environment variable that arms points: `NAME` or `NAME:N`,
/// comma-separated.
pub const ENV: &str = "CKPT_FAULT";

/// What the armed point does: `kill` (SIGKILL, the default) or `stop`
/// (SIGSTOP, until the test sends SIGCONT).
pub const ACTION_ENV: &str = "CKPT_FAULT_ACTION";

/// A crash point: with the `enabled` feature and `CKPT_FAULT` naming it,
/// the process kills itself here (on the N-th hit).
#[inline(always)]
pub fn point(name: &'static str) {
    #[cfg(feature = "enabled")]
    imp::hit(name);
    #[cfg(not(feature = "enabled"))]
    let _ = name;
}

/// Whether fault points are compiled in.
pub const ENABLED: bool = cfg!(feature = "enabled");

#[cfg(feature = "enabled")]
mod imp {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    struct Armed {
        name: String,
        nth: u64,
        hits: AtomicU64,
        stop: bool,
    }

    fn armed() -> &'static [Armed] {
        static ARMED: OnceLock<Vec<Armed>> = OnceLock::new();
        ARMED.get_or_init(|| {
            let Ok(v) = std::env::var(super::ENV) else {
                return Vec::new();
            };
            let stop = std::env::var(super::ACTION_ENV).is_ok_and(|a| a == "stop");
            let one = |p: &str| {
                let (name, nth) = match p.rsplit_once(':') {
                    Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1).max(1)),
                    None => (p.to_string(), 1),
                };
                Armed {
                    name,
                    nth,
                    hits: AtomicU64::new(0),
                    stop,
                }
            };
            v.split(',').map(one).collect()
        })
    }

    pub(super) fn hit(name: &'static str) {
        let armed = armed();
        if armed.is_empty() {
            return;
        }
        debug_assert!(
            super::POINTS.contains(&name)
                || super::REMOTE_POINTS.contains(&name)
                || super::OVERLAY_POINTS.contains(&name),
            "fault point {name} missing from ckpt_fault::POINTS"
        );
        let Some(a) = armed.iter().find(|a| a.name == name) else {
            return;
        };
        if a.hits.fetch_add(1, Ordering::SeqCst) + 1 == a.nth {
            if a.stop {
                // SAFETY: plain syscall on our own pid; every thread stops
                // until SIGCONT, then this returns and the process goes on.
                unsafe {
                    libc::kill(libc::getpid(), libc::SIGSTOP);
                }
                return;
            }
            // SAFETY: plain syscalls on our own pid; SIGKILL cannot be caught.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            // SIGKILL to self is delivered before kill() returns; never
            // continue past a fault point even if it were not.
            std::process::abort();
        }
    }
}
