//! `ckpt doctor`: what the machine and filesystems under a workspace can do,
//! and what ckpt will therefore use.
//!
//! Capabilities are probed live by really trying each operation on
//! temporary files ([`probe_pair`]), never guessed from filesystem names;
//! the filesystem type is reported only so a person can read the answer.
//! The store's cached probe (taken at `ckpt init`, used by every save and
//! restore) is shown beside the live one, so a stale cache is visible.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Serialize;

use crate::error::IoContext;
use crate::Result;
use ckpt_fs::copy::{probe, probe_pair, Caps, Strategy};
use ckpt_fs::fs;

/// One filesystem as seen from a path.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FsInfo {
    /// The path asked about.
    pub path: PathBuf,
    /// Filesystem type name (from `statfs`'s magic number), for people.
    pub fs_type: String,
    /// Bytes available to unprivileged users.
    pub free_bytes: u64,
    /// Total bytes.
    pub total_bytes: u64,
}

/// The inotify limits (`/proc/sys/fs/inotify/*`), if readable.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InotifyLimits {
    /// `max_user_watches`: directories one user can watch.
    pub max_user_watches: Option<u64>,
    /// `max_user_instances`: inotify instances per user.
    pub max_user_instances: Option<u64>,
    /// `max_queued_events`: events queued before overflow.
    pub max_queued_events: Option<u64>,
}

/// What to tell a user whose workspace has `dirs` directories when one
/// user may hold `limit` inotify watches (one per directory, shared with
/// every other inotify user of the account): `None` when they fit with a
/// quarter to spare.
pub fn watch_limit_advice(limit: Option<u64>, dirs: u64) -> Option<String> {
    let limit = limit?;
    if dirs.saturating_add(dirs / 4) <= limit {
        return None;
    }
    // Room for this workspace twice over and for what else watches, in
    // round thousands.
    let suggest = (limit + 2 * dirs).div_ceil(1024) * 1024;
    Some(format!(
        "the inotify watch limit fs.inotify.max_user_watches={limit} is too small for the \
         {dirs} directories of this workspace, so the watcher cannot vouch for every change \
         and commands fall back to full scans (still correct, not faster). Raise it: \
         `sudo sysctl fs.inotify.max_user_watches={suggest}` (to keep it, put \
         `fs.inotify.max_user_watches={suggest}` in /etc/sysctl.d/90-ckpt.conf), then restart \
         the watcher: `ckpt watch --stop; ckpt watch --daemon`"
    ))
}

/// Everything `ckpt doctor` prints.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    /// The workspace filesystem.
    pub workspace: FsInfo,
    /// The store filesystem.
    pub store: FsInfo,
    /// Probed now: copies from the workspace into the store (save).
    pub save_caps: Caps,
    /// Probed now: copies within the store's filesystem.
    pub store_caps: Caps,
    /// Cached in the store at `ckpt init` (what saves and restores start from).
    pub cached_caps: Option<Caps>,
    /// `CKPT_COPY_STRATEGY`, if set (or the error for a bad value).
    pub forced: Option<String>,
    /// What a save will try first.
    pub strategy: Strategy,
    /// Why, in a sentence.
    pub why: String,
    /// inotify limits.
    pub inotify: InotifyLimits,
    /// Directories of the workspace at its last save (from the stat index;
    /// `None` before the first save): what a watcher needs watches for.
    pub workspace_dirs: Option<u64>,
    /// What to do when they do not fit the watch limit
    /// ([`watch_limit_advice`]).
    pub watch_advice: Option<String>,
}

/// Describes the filesystem holding `path`.
pub fn fs_info(path: &Path) -> Result<FsInfo> {
    let st = rustix::fs::statfs(path).ctx("statfs", path)?;
    let vfs = rustix::fs::statvfs(path).ctx("statvfs", path)?;
    Ok(FsInfo {
        path: path.to_path_buf(),
        #[allow(clippy::unnecessary_cast)]
        fs_type: fs_type_name(st.f_type as i64),
        free_bytes: vfs.f_bavail * vfs.f_frsize,
        total_bytes: vfs.f_blocks * vfs.f_frsize,
    })
}

/// A readable name for a `statfs` magic number (display only).
fn fs_type_name(magic: i64) -> String {
    match magic {
        0xEF53 => "ext2/3/4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x6969 => "nfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        0xF2F5_2010 => "f2fs".into(),
        0x6573_5546 => "fuse".into(),
        0xCA45_1A4E => "bcachefs".into(),
        m => format!("unknown (magic {m:#x})"),
    }
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

fn read_limit(name: &str) -> Option<u64> {
    read_number(&format!("/proc/sys/fs/inotify/{name}"))
}

/// Reads the inotify limits. The watch limit is the smaller of
/// `fs.inotify.max_user_watches` (the machine's) and
/// `user.max_inotify_watches` (this user namespace's, which is what a
/// container or `unshare -U` sees lowered).
pub fn inotify_limits() -> InotifyLimits {
    let watches = [
        read_limit("max_user_watches"),
        read_number("/proc/sys/user/max_inotify_watches"),
    ];
    InotifyLimits {
        max_user_watches: watches.into_iter().flatten().min(),
        max_user_instances: read_limit("max_user_instances"),
        max_queued_events: read_limit("max_queued_events"),
    }
}

/// Probes and describes a workspace root and its store directory.
/// `forced` is the strategy the caller's configuration forces
/// (`CKPT_COPY_STRATEGY`), or why its value was not understood;
/// `workspace_dirs` is how many directories the workspace had at its last
/// save, if known.
pub fn diagnose(
    workspace: &Path,
    store: &Path,
    cached_caps: Option<Caps>,
    forced: std::result::Result<Option<Strategy>, String>,
    workspace_dirs: Option<u64>,
) -> Result<Report> {
    let wfd = fs::open_dir_path(workspace).ctx("open", workspace)?;
    let sfd = fs::open_dir_path(store).ctx("open", store)?;
    let inotify = inotify_limits();
    let save_caps = probe_pair(wfd.as_fd(), sfd.as_fd()).ctx("probe", workspace)?;
    let store_caps = probe(sfd.as_fd()).ctx("probe", store)?;
    let base = cached_caps.unwrap_or(save_caps);
    let (forced, effective) = match forced {
        Ok(Some(s)) => (Some(s.name().to_string()), base.forced(s)),
        Ok(None) => (None, base),
        Err(e) => (Some(e), base),
    };
    let strategy = effective.preferred();
    let why = match (&forced, strategy) {
        (Some(f), _) => format!("CKPT_COPY_STRATEGY forces {f}; a refused strategy still falls back"),
        (None, Strategy::Reflink) => {
            "FICLONE worked from the workspace into the store: saves, restores and forks share extents and copy no data".into()
        }
        (None, Strategy::CopyFileRange) => {
            "reflink failed but copy_file_range worked: bytes are copied in the kernel, never through user memory".into()
        }
        (None, Strategy::Userspace) => {
            "neither reflink nor copy_file_range worked between these filesystems: bytes go through 1 MiB user buffers".into()
        }
    };
    Ok(Report {
        workspace: fs_info(workspace)?,
        store: fs_info(store)?,
        save_caps,
        store_caps,
        cached_caps,
        forced,
        strategy,
        why,
        watch_advice: workspace_dirs.and_then(|d| watch_limit_advice(inotify.max_user_watches, d)),
        inotify,
        workspace_dirs,
    })
}

#[cfg(test)]
mod tests {
    use super::watch_limit_advice;

    #[test]
    fn advice_only_when_the_directories_do_not_fit_with_room_to_spare() {
        assert_eq!(watch_limit_advice(None, 1_000_000), None);
        assert_eq!(watch_limit_advice(Some(8192), 100), None);
        assert_eq!(watch_limit_advice(Some(1250), 1000), None);
        for (limit, dirs) in [(1249, 1000), (8192, 35_821), (8, 30)] {
            let a = watch_limit_advice(Some(limit), dirs).expect("advice");
            let v: u64 = a
                .split("sudo sysctl fs.inotify.max_user_watches=")
                .nth(1)
                .and_then(|t| t.split('`').next())
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no value in {a}"));
            assert!(
                v >= limit + 2 * dirs && v.is_multiple_of(1024),
                "{limit} {dirs}: {v}"
            );
            assert!(
                a.contains(&format!("={limit} ")) && a.contains(&dirs.to_string()),
                "{a}"
            );
        }
    }
}
