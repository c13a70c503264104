//! The stores made on this machine, so `ckpt stores` can find a store that
//! is not in the default place (`--store DIR`, or beside its workspace).
//!
//! `<data home>/ckpt/known-stores` is a plain text file: one absolute store
//! path per line, appended (`O_APPEND`, one `write` per line) when `init`
//! or `fork` makes a store or `init --attach` re-attaches one. It is only a
//! hint: a line whose directory no longer holds a store is skipped when
//! read, duplicates are dropped, and a store missing from it is still found
//! in `<data home>/ckpt/stores/` or in a directory the user names. Nothing
//! depends on it for correctness, so failing to write it never fails the
//! command. It is never written inside a workspace.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::enclosing_workspace;

/// The file below a data home (`$XDG_DATA_HOME` or `~/.local/share`).
pub fn list_path(data_home: &Path) -> PathBuf {
    data_home.join("ckpt").join("known-stores")
}

/// The directory default stores go in below a data home.
pub fn default_dir(data_home: &Path) -> PathBuf {
    data_home.join("ckpt").join("stores")
}

/// Adds `store` (absolute) to the list; best effort. Nothing is written
/// when the list would be inside a workspace (a data home below one), where
/// it would show up as a change.
pub fn record(data_home: Option<&Path>, store: &Path) {
    let Some(home) = data_home else { return };
    let list = list_path(home);
    if enclosing_workspace(&list).is_some() {
        return;
    }
    if let Some(dir) = list.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut line = store.as_os_str().as_bytes().to_vec();
    if line.contains(&b'\n') {
        return; // not representable in a line-based list
    }
    line.push(b'\n');
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&list)
    {
        let _ = f.write_all(&line);
    }
}

/// The paths in the list, in the order they were added (possibly stale,
/// possibly repeated).
pub fn listed(data_home: &Path) -> Vec<PathBuf> {
    let Ok(bytes) = std::fs::read(list_path(data_home)) else {
        return Vec::new();
    };
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| l.first() == Some(&b'/'))
        .map(|l| PathBuf::from(std::ffi::OsStr::from_bytes(l)))
        .collect()
}
