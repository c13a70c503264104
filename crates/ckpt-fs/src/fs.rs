//! File access relative to directory file descriptors.
//!
//! Invariants kept here:
//! - Every path component is opened with `O_NOFOLLOW`; a symlink where a
//!   directory is expected is an error (`ELOOP`/`ENOTDIR`), so nothing ckpt
//!   does can be redirected outside the workspace by a planted symlink.
//! - Every descriptor is `O_CLOEXEC`.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The stat fields the index compares to decide whether an entry changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Meta {
    /// Device id.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Full `st_mode` (type and permission bits).
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status-change time, ns since the epoch.
    pub ctime_ns: i64,
}

impl Meta {
    /// Converts a raw `stat` result. (The casts are no-ops on x86_64 but not
    /// on every architecture's `struct stat`.)
    #[allow(clippy::unnecessary_cast)]
    #[inline]
    pub fn from_stat(st: &rustix::fs::Stat) -> Meta {
        Meta {
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode,
            size: st.st_size as u64,
            mtime_ns: st.st_mtime as i64 * 1_000_000_000 + st.st_mtime_nsec as i64,
            ctime_ns: st.st_ctime as i64 * 1_000_000_000 + st.st_ctime_nsec as i64,
        }
    }

    /// The file type encoded in `mode`.
    #[inline]
    pub fn file_type(&self) -> FileType {
        FileType::from_raw_mode(self.mode)
    }

    /// Permission bits only.
    #[inline]
    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
#[inline]
pub fn stat_at(dir: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<Meta> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|st| Meta::from_stat(&st))
}

/// [`stat_at`], with the entry's link count (`st_nlink`), which [`Meta`]
/// leaves out: of a directory, [`no_subdirs`] reads it. (`st_nlink` is a
/// `u64` on x86_64 but not on every architecture.)
#[allow(clippy::unnecessary_cast)]
#[inline]
pub fn stat_at_links(dir: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<(Meta, u64)> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map(|st| (Meta::from_stat(&st), st.st_nlink as u64))
}

/// Whether a directory's link count says it has no subdirectories: 2 (its
/// name and its own `.`) on filesystems that count each subdirectory's
/// `..` (ext4, xfs, tmpfs). btrfs always gives 1, and ext4 gives 1 to a
/// directory with more than 65,000 subdirectories, so "false" says
/// nothing. A hint: a caller must still cope with a subdirectory (an
/// unusual filesystem may count otherwise).
#[inline]
pub fn no_subdirs(nlink: u64) -> bool {
    nlink == 2
}

/// `fstat(fd)`.
#[inline]
pub fn stat_fd(fd: BorrowedFd<'_>) -> rustix::io::Result<Meta> {
    rustix::fs::fstat(fd).map(|st| Meta::from_stat(&st))
}

/// Opens a directory by absolute or relative path (following symlinks only
/// for this top-level path, which the user named).
pub fn open_dir_path(path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the subdirectory `name` of `dir` without following symlinks.
#[inline]
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the subdirectory `name` of `dir` like [`open_dir_at`], or only as
/// a handle for `*at` calls (`O_PATH`: cheaper, cannot be listed) when
/// `path_only`.
#[inline]
pub fn open_dir_for(
    dir: BorrowedFd<'_>,
    name: &[u8],
    path_only: bool,
) -> rustix::io::Result<OwnedFd> {
    if !path_only {
        return open_dir_at(dir, name);
    }
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the directory a (possibly `O_PATH`) descriptor refers to again,
/// for reading (listing).
#[inline]
pub fn reopen_dir(dir: BorrowedFd<'_>) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the regular file `name` of `dir` for reading without following
/// symlinks and without blocking on FIFOs.
pub fn open_file_at(dir: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )
}

/// Creates a new file exclusively (fails if `name` exists).
pub fn create_excl_at(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )
}

/// Opens a relative path (components separated by `/`) below `root`, one
/// component at a time with `O_NOFOLLOW`. An empty path yields a duplicate of
/// `root`.
pub fn open_dir_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> rustix::io::Result<OwnedFd> {
    let mut cur = rustix::io::fcntl_dupfd_cloexec(root, 0)?;
    for comp in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        cur = open_dir_at(cur.as_fd(), comp)?;
    }
    Ok(cur)
}

/// An open directory whose entries have been read.
pub struct Listing {
    dir: rustix::fs::Dir,
    /// Names (without `.` and `..`) with the kernel's `d_type` hint (may be
    /// `Unknown`).
    pub names: Vec<(Vec<u8>, FileType)>,
}

impl Listing {
    /// The directory's descriptor, for `*at()` calls on its entries.
    #[inline]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.dir.fd().expect("a Dir always has its descriptor")
    }
}

/// Reads the names in the directory `fd` (taking ownership of it, so no
/// descriptor is duplicated).
pub fn list_dir(fd: OwnedFd) -> rustix::io::Result<Listing> {
    let mut dir = rustix::fs::Dir::new(fd)?;
    let mut names = Vec::new();
    while let Some(ent) = dir.read() {
        let ent = ent?;
        let name = ent.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        names.push((name.to_vec(), ent.file_type()));
    }
    Ok(Listing { dir, names })
}

/// Reads a symlink's target bytes.
#[inline]
pub fn read_link_at(dir: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<Vec<u8>> {
    rustix::fs::readlinkat(dir, name, Vec::new()).map(|c| c.into_bytes())
}

/// Sets mtime (and atime to the same value) on `name` without following a
/// symlink.
pub fn set_mtime_at(dir: BorrowedFd<'_>, name: &[u8], mtime_ns: i64) -> rustix::io::Result<()> {
    let ts = timespec(mtime_ns);
    let times = rustix::fs::Timestamps {
        last_access: ts,
        last_modification: ts,
    };
    rustix::fs::utimensat(dir, name, &times, AtFlags::SYMLINK_NOFOLLOW)
}

/// Sets mtime on an open file.
pub fn set_mtime_fd(fd: BorrowedFd<'_>, mtime_ns: i64) -> rustix::io::Result<()> {
    let ts = timespec(mtime_ns);
    rustix::fs::futimens(
        fd,
        &rustix::fs::Timestamps {
            last_access: ts,
            last_modification: ts,
        },
    )
}

fn timespec(ns: i64) -> rustix::fs::Timespec {
    rustix::fs::Timespec {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000) as _,
    }
}

/// `renameat2(..., RENAME_NOREPLACE)`; `Ok(false)` if the target exists.
/// Falls back to link+unlink semantics via plain rename on filesystems that
/// do not support the flag.
pub fn rename_noreplace(
    from_dir: BorrowedFd<'_>,
    from: &[u8],
    to_dir: BorrowedFd<'_>,
    to: &[u8],
) -> rustix::io::Result<bool> {
    match rustix::fs::renameat_with(
        from_dir,
        from,
        to_dir,
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    ) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        Err(Errno::INVAL) | Err(Errno::NOSYS) => {
            if stat_at(to_dir, to).is_ok() {
                return Ok(false);
            }
            rustix::fs::renameat(from_dir, from, to_dir, to).map(|()| true)
        }
        Err(e) => Err(e),
    }
}

/// The current wall-clock time in ns since the epoch.
#[inline]
pub fn now_ns() -> i64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec as i64
}

/// The parent of a workspace-relative byte path (`""` for a top-level name
/// and for the root).
#[inline]
pub fn parent_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => b"",
    }
}

/// Joins a workspace-relative byte path and a name with `/`.
#[inline]
pub fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        p.extend_from_slice(rel);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A relative byte path as a `Path` (for messages and `std::fs`).
#[inline]
pub fn as_path(rel: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(rel))
}

/// `root/rel` as a `PathBuf`, for error messages.
pub fn display_path(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(as_path(rel))
    }
}

/// Removes `name` from `dir` recursively without following symlinks.
pub fn remove_all_at(dir: BorrowedFd<'_>, name: &[u8]) -> rustix::io::Result<()> {
    let meta = match stat_at(dir, name) {
        Ok(m) => m,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.file_type() == FileType::Directory {
        let sub = list_dir(open_dir_at(dir, name)?)?;
        for (child, _) in &sub.names {
            remove_all_at(sub.fd(), child)?;
        }
        rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
    } else {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())
    }
}

/// Size of the `getdents64` buffer of [`list_dir_packed`]: most directories
/// fit in one call (rustix's `Dir` starts at 768 bytes and grows slowly, so
/// a directory of a few dozen names took several calls, and each call on an
/// ext4 htree directory rebuilds its hash-ordered batch).
const GETDENTS_BUF: usize = 32 * 1024;

/// An open directory whose names have been read into one buffer, each name
/// followed by a NUL (one allocation per directory, not one per name).
pub struct PackedListing {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// `(start, len)` of each name in `buf` (without its NUL).
    names: Vec<(u32, u32)>,
    /// The kernel's `d_type` hint of each name (may be `Unknown`).
    types: Vec<FileType>,
}

impl PackedListing {
    /// The directory's descriptor, for `*at()` calls on its entries.
    #[inline]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The directory's descriptor, kept after the names are dropped.
    #[inline]
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// Number of names (without `.` and `..`).
    #[inline]
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether the directory is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The `i`-th name, in `getdents` order.
    #[inline]
    pub fn name(&self, i: usize) -> &[u8] {
        let (s, l) = self.names[i];
        &self.buf[s as usize..(s + l) as usize]
    }

    /// The kernel's `d_type` hint for the `i`-th name (may be `Unknown`).
    #[inline]
    pub fn file_type(&self, i: usize) -> FileType {
        self.types[i]
    }

    /// The `i`-th name with its NUL, for syscalls.
    #[inline]
    pub fn c_name(&self, i: usize) -> &std::ffi::CStr {
        let (s, l) = self.names[i];
        std::ffi::CStr::from_bytes_until_nul(&self.buf[s as usize..=(s + l) as usize])
            .unwrap_or_default()
    }
}

/// Reads the names in the directory `fd` (taking ownership of it) with a
/// [`GETDENTS_BUF`]-byte buffer reused by the calling thread.
pub fn list_dir_packed(fd: OwnedFd) -> rustix::io::Result<PackedListing> {
    use std::mem::MaybeUninit;
    thread_local! {
        static BUF: std::cell::RefCell<Vec<MaybeUninit<u8>>> =
            std::cell::RefCell::new(vec![MaybeUninit::uninit(); GETDENTS_BUF]);
    }
    let mut buf = Vec::new();
    let mut names = Vec::new();
    let mut types = Vec::new();
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        let mut dir = rustix::fs::RawDir::new(fd.as_fd(), &mut b[..]);
        while let Some(ent) = dir.next() {
            let ent = match ent {
                Ok(e) => e,
                Err(Errno::INTR) => continue,
                // Removed while being listed (as rustix's `Dir` treats it).
                Err(Errno::NOENT) => break,
                Err(e) => return Err(e),
            };
            let name = ent.file_name().to_bytes_with_nul();
            if name == b".\0" || name == b"..\0" {
                continue;
            }
            names.push((buf.len() as u32, (name.len() - 1) as u32));
            types.push(ent.file_type());
            buf.extend_from_slice(name);
        }
        Ok::<(), Errno>(())
    })?;
    Ok(PackedListing {
        fd,
        buf,
        names,
        types,
    })
}

/// [`stat_at`] for a name that is already NUL-terminated.
#[inline]
pub fn stat_at_c(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> rustix::io::Result<Meta> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|st| Meta::from_stat(&st))
}

/// `path` equals `base` or lies below it (workspace-relative byte paths;
/// the empty path is the root, which contains everything).
#[inline]
pub fn is_within(path: &[u8], base: &[u8]) -> bool {
    base.is_empty()
        || (path.starts_with(base) && (path.len() == base.len() || path[base.len()] == b'/'))
}

/// Whether the directory `fd` holds no entry but `.` and `..`. Reads one
/// small batch of entries, so it costs the same for a directory of millions.
pub fn dir_is_empty(fd: BorrowedFd<'_>) -> rustix::io::Result<bool> {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 512];
    let mut dir = rustix::fs::RawDir::new(fd, &mut buf[..]);
    while let Some(ent) = dir.next() {
        let ent = match ent {
            Ok(e) => e,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        };
        let name = ent.file_name().to_bytes();
        if name != b"." && name != b".." {
            return Ok(false);
        }
    }
    Ok(true)
}
