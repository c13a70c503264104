//! Making a directory on btrfs a subvolume, once (`ckpt init --subvolume`),
//! so that forks of it are snapshots ([`crate::engine::fork::backend`]).
//!
//! A directory cannot become a subvolume in place; it is replaced by one
//! holding the same files, in steps each of which leaves the directory
//! whole (docs/FORK.md, "Making a workspace a subvolume"):
//! 1. remove what an interrupted earlier conversion of the same directory
//!    left (`.<name>.ckpt-subvol.<pid>` of a process that is gone: before
//!    step 4 a partial copy, after it the old directory, redundant either
//!    way because the swap only happens after the copy was verified);
//! 2. create an empty subvolume `.<name>.ckpt-subvol.<pid>` beside it;
//! 3. copy every entry into it with `cp -a` semantics, reflinked (no data
//!    is copied on btrfs), then give its root the directory's mode, owner
//!    and times;
//! 4. verify: both trees have the same names, types, permission bits,
//!    sizes, mtimes and symlink targets, and no entry of the directory
//!    changed since the copy began (each entry's ctime equals the one
//!    listed before the copy); else the subvolume is deleted and the
//!    directory left as it was;
//! 5. `syncfs`, then swap the two names in one `renameat2(RENAME_EXCHANGE)`
//!    and fsync the parent: the directory's path now names the subvolume;
//! 6. remove the old directory (now under the hidden name).
//!
//! Interrupted before 5, the directory is untouched; after 5, it is the
//! verified subvolume. Either way step 1 of the next run removes the
//! leftover. Processes whose current directory is inside the directory
//! keep the old one (stop agents, editors and `ckpt watch` first).

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::engine::fork::{hidden_sibling, remove_dead_siblings};
use crate::error::IoContext;
use crate::platform::btrfs;
use crate::{Error, Result};
use ckpt_fs::copytree::{copy_path, CpOptions, Progress};
use ckpt_fs::fs;

/// The tag of the conversion's hidden sibling (`.<name>.ckpt-subvol.<pid>`).
const TAG: &str = "ckpt-subvol";

/// What [`make_subvolume`] did.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct Converted {
    /// The directory.
    pub dir: PathBuf,
    /// It already was a subvolume: nothing was done.
    pub already: bool,
    /// Entries copied into the subvolume.
    pub entries: u64,
}

/// Makes the directory `dir` (absolute) a btrfs subvolume holding the same
/// files (see the module doc); nothing is done when it already is one.
pub fn make_subvolume(dir: &Path) -> Result<Converted> {
    remove_dead_siblings(dir, TAG);
    let fd = fs::open_dir_path(dir).ctx("open", dir)?;
    if btrfs::is_subvolume(fd.as_fd()) {
        return Ok(Converted {
            dir: dir.to_path_buf(),
            already: true,
            entries: 0,
        });
    }
    if !btrfs::is_btrfs(fd.as_fd()) {
        return Err(Error::Usage(format!(
            "{} is not on btrfs, so it cannot be a subvolume (nothing was changed); forks of it use reflinks or copies (`ckpt doctor`)",
            dir.display()
        )));
    }
    drop(fd);
    let tmp = hidden_sibling(dir, TAG, std::process::id())?;
    let (Some(parent), Some(tmp_name), Some(name)) =
        (dir.parent(), tmp.file_name(), dir.file_name())
    else {
        unreachable!("hidden_sibling checked that {} has a parent", dir.display())
    };
    let pfd = fs::open_dir_path(parent).ctx("open", parent)?;
    btrfs::create_subvolume(pfd.as_fd(), tmp_name.as_bytes()).map_err(|e| {
        Error::io(
            "create btrfs subvolume (nothing was changed)",
            &tmp,
            std::io::Error::from(e),
        )
    })?;
    let copied = ctimes(dir).and_then(|before| {
        let entries = copy_into(dir, &tmp)?;
        verify_same(dir, &tmp, &before)?;
        // The copy is durable before its name can be DIR's.
        rustix::fs::syncfs(&pfd).ctx("syncfs", &tmp)?;
        rustix::fs::renameat_with(
            pfd.as_fd(),
            tmp_name.as_bytes(),
            pfd.as_fd(),
            name.as_bytes(),
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .ctx("swap with its subvolume copy", dir)?;
        Ok(entries)
    });
    let entries = match copied {
        Ok(n) => n,
        Err(e) => {
            crate::engine::fork::remove_tree(&tmp);
            return Err(e);
        }
    };
    rustix::fs::fsync(&pfd).ctx("fsync", parent)?;
    // The old directory, now under the hidden name.
    crate::engine::materialize::remove_partial(&tmp, true);
    Ok(Converted {
        dir: dir.to_path_buf(),
        already: false,
        entries,
    })
}

/// Copies every entry of `src` into the empty directory `dst` (step 3).
fn copy_into(src: &Path, dst: &Path) -> Result<u64> {
    let progress = Progress::default();
    let mut entries = 0;
    for e in std::fs::read_dir(src).ctx("list", src)? {
        let e = e.ctx("list", src)?;
        let r = copy_path(
            &e.path(),
            &dst.join(e.file_name()),
            &CpOptions::default(),
            &progress,
        )
        .map_err(|err| Error::Usage(format!("{err} (nothing was changed)")))?;
        entries += r.files + r.dirs + r.symlinks;
    }
    let m = std::fs::symlink_metadata(src).ctx("stat", src)?;
    let dfd = fs::open_dir_path(dst).ctx("open", dst)?;
    let (uid, gid) = (m.uid(), m.gid());
    if rustix::process::geteuid().is_root() {
        rustix::fs::fchown(
            &dfd,
            Some(rustix::process::Uid::from_raw(uid)),
            Some(rustix::process::Gid::from_raw(gid)),
        )
        .ctx("chown", dst)?;
    }
    rustix::fs::fchmod(&dfd, rustix::fs::Mode::from_raw_mode(m.mode() & 0o7777))
        .ctx("chmod", dst)?;
    fs::set_mtime_fd(dfd.as_fd(), m.mtime() * 1_000_000_000 + m.mtime_nsec())
        .ctx("set mtime", dst)?;
    Ok(entries)
}

/// The ctime of every entry below `dir`, by relative path.
fn ctimes(dir: &Path) -> Result<HashMap<PathBuf, i64>> {
    let mut out = HashMap::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let d = dir.join(&rel);
        for e in std::fs::read_dir(&d).ctx("list", &d)? {
            let e = e.ctx("list", &d)?;
            let m = e.metadata().ctx("stat", e.path())?;
            let r = rel.join(e.file_name());
            out.insert(r.clone(), m.ctime() * 1_000_000_000 + m.ctime_nsec());
            if m.is_dir() {
                todo.push(r);
            }
        }
    }
    Ok(out)
}

/// Checks that `copy` holds what `orig` holds, and that no entry of `orig`
/// changed since `before` (its ctimes, taken before the copy began: any
/// change to an inode moves its ctime).
fn verify_same(orig: &Path, copy: &Path, before: &HashMap<PathBuf, i64>) -> Result<()> {
    let mismatch = |p: &Path, what: &str| {
        Error::Usage(format!(
            "{}: {what}; the directory was left as it was (nothing was changed), run again when nothing writes to it",
            p.display()
        ))
    };
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let (a, b) = (orig.join(&rel), copy.join(&rel));
        let names = |d: &Path| -> Result<Vec<std::ffi::OsString>> {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .ctx("list", d)?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<std::io::Result<_>>()
                .ctx("list", d)?;
            v.sort();
            Ok(v)
        };
        let na = names(&a)?;
        if na != names(&b)? {
            return Err(mismatch(&a, "the copy's names differ"));
        }
        for n in na {
            let (pa, pb) = (a.join(&n), b.join(&n));
            let ma = std::fs::symlink_metadata(&pa).ctx("stat", &pa)?;
            let mb = std::fs::symlink_metadata(&pb).ctx("stat", &pb)?;
            let ctime = ma.ctime() * 1_000_000_000 + ma.ctime_nsec();
            if before.get(&rel.join(&n)) != Some(&ctime) {
                return Err(mismatch(&pa, "changed while it was being copied"));
            }
            let link = ma.file_type().is_symlink();
            let same = ma.mode() == mb.mode()
                && (ma.is_dir() || ma.size() == mb.size())
                && (link || (ma.mtime(), ma.mtime_nsec()) == (mb.mtime(), mb.mtime_nsec()));
            if !same {
                return Err(mismatch(
                    &pa,
                    "the copy's type, mode, size or mtime differs",
                ));
            }
            if link
                && std::fs::read_link(&pa).ctx("readlink", &pa)?
                    != std::fs::read_link(&pb).ctx("readlink", &pb)?
            {
                return Err(mismatch(&pa, "the copy's symlink target differs"));
            }
            if ma.is_dir() {
                todo.push(rel.join(&n));
            }
        }
    }
    Ok(())
}
