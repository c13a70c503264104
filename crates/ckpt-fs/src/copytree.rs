//! `ckpt cp`: a standalone parallel copy of a file or a directory tree with
//! `cp -a` semantics, built on the [copy engine](crate::copy).
//!
//! What is preserved: file contents (holes included, reflinked where the
//! filesystems allow), permission bits (including setuid/setgid/sticky),
//! access and modification times to the nanosecond, symlinks as symlinks,
//! hard links between copied files, FIFOs and device nodes, extended
//! attributes (including POSIX ACLs) where both filesystems support them,
//! and owner and group when running as root. Sockets are skipped and
//! counted (they cannot be copied).
//!
//! How it is fast:
//! - every directory is a rayon task; it is opened relative to the root
//!   descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (one
//!   syscall, and no descriptor is held while a task waits in the queue);
//! - entries are opened relative to their directory's descriptor, typed
//!   from `getdents` (`d_type`), and stat-ed once through the open file;
//! - the files of a directory are copied in parallel;
//! - directory modes and times are set last, deepest first, once nothing
//!   more will be created inside them.
//!
//! Invariants: nothing outside the destination is written (the destination
//! must not exist yet, and every path below it is reached without following
//! symlinks); the source is only read. An error names the path; the partial
//! destination is left for the user to inspect or remove.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::copy::{Caps, Copier, CopyConfig};
use crate::error::IoContext;
use crate::fs::{self, display_path, join};
use crate::{Error, Result};

/// Options of a tree copy: a forced strategy (else reflink and
/// `copy_file_range` are tried and dropped as the kernel refuses them) and
/// the split threshold of large files.
pub type CpOptions = CopyConfig;

/// Live counters, readable from another thread (progress bars).
#[derive(Debug, Default)]
pub struct Progress {
    /// Entries copied so far.
    pub entries: AtomicU64,
    /// Bytes of file content copied so far.
    pub bytes: AtomicU64,
}

/// What a copy did.
#[derive(Debug, Default, Clone)]
pub struct CpReport {
    /// The path created.
    pub target: PathBuf,
    /// Regular files copied (hard links not counted).
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// Extra names of hard-linked files, linked rather than copied.
    pub hard_links: u64,
    /// FIFOs and device nodes created.
    pub specials: u64,
    /// Sockets skipped.
    pub skipped_sockets: u64,
    /// Extended attributes the destination refused (unsupported there).
    pub skipped_xattrs: u64,
    /// Bytes of file content.
    pub bytes: u64,
    /// Files cloned / kernel-copied / copied through user memory.
    pub reflinked: u64,
    /// Files copied with `copy_file_range`.
    pub kernel_copied: u64,
    /// Files copied through user memory.
    pub user_copied: u64,
}

/// One stat result with the fields a copy needs.
#[derive(Clone, Copy)]
struct St {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    nlink: u64,
    dev: u64,
    ino: u64,
    rdev: u64,
    atime: rustix::fs::Timespec,
    mtime: rustix::fs::Timespec,
}

impl St {
    #[allow(clippy::unnecessary_cast)]
    fn from(st: &rustix::fs::Stat) -> St {
        St {
            mode: st.st_mode as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size as u64,
            nlink: st.st_nlink as u64,
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            rdev: st.st_rdev as u64,
            atime: rustix::fs::Timespec {
                tv_sec: st.st_atime as _,
                tv_nsec: st.st_atime_nsec as _,
            },
            mtime: rustix::fs::Timespec {
                tv_sec: st.st_mtime as _,
                tv_nsec: st.st_mtime_nsec as _,
            },
        }
    }

    fn times(&self) -> rustix::fs::Timestamps {
        rustix::fs::Timestamps {
            last_access: self.atime,
            last_modification: self.mtime,
        }
    }

    fn perm(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// Copies `src` to `dst` like `cp -a src dst`: if `dst` is an existing
/// directory the copy goes to `dst/<name of src>`, else to `dst` itself,
/// whose parent must exist. The target path must not exist yet.
pub fn copy_path(
    src: &Path,
    dst: &Path,
    opts: &CpOptions,
    progress: &Progress,
) -> Result<CpReport> {
    let src_st = rustix::fs::lstat(src)
        .map(|s| St::from(&s))
        .ctx("stat", src)?;
    let target = match std::fs::metadata(dst) {
        Ok(m) if m.is_dir() => {
            let name = src.file_name().ok_or_else(|| {
                Error::Usage(format!(
                    "{}: cannot tell the name to copy to; name the destination (nothing was changed)",
                    src.display()
                ))
            })?;
            dst.join(name)
        }
        _ => dst.to_path_buf(),
    };
    match rustix::fs::lstat(&target) {
        Ok(_) => {
            return Err(Error::Usage(format!(
                "{} already exists; ckpt cp only creates new paths (nothing was changed)",
                target.display()
            )))
        }
        Err(Errno::NOENT) => {}
        Err(e) => return Err(Error::io("stat", &target, e.into())),
    }
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .ok_or_else(|| {
            Error::Usage(format!(
                "{}: not a valid destination (nothing was changed)",
                target.display()
            ))
        })?
        .as_encoded_bytes()
        .to_vec();
    let dparent = fs::open_dir_path(&parent).ctx("open destination directory", &parent)?;
    let is_dir = FileType::from_raw_mode(src_st.mode) == FileType::Directory;
    if is_dir {
        let (sc, pc) = (std::fs::canonicalize(src), std::fs::canonicalize(&parent));
        if let (Ok(sc), Ok(pc)) = (sc, pc) {
            if pc.starts_with(&sc) {
                return Err(Error::Usage(format!(
                    "cannot copy {} into itself ({}); nothing was changed",
                    src.display(),
                    target.display()
                )));
            }
        }
    }
    let (sparent, sname) = match (src.parent(), src.file_name()) {
        (Some(p), Some(n)) => (
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            },
            n.as_encoded_bytes().to_vec(),
        ),
        _ => (src, Vec::new()),
    };
    let sparent_fd = fs::open_dir_path(sparent).ctx("open", sparent)?;
    let copier = Copier::configured(copy_caps(), opts);
    let job = Job {
        src_root: src.to_path_buf(),
        dst_root: target.clone(),
        copier,
        progress,
        is_root: rustix::process::geteuid().is_root(),
        umask: current_umask(),
        report: Mutex::new(CpReport::default()),
        inodes: Mutex::new(HashMap::new()),
        links: Mutex::new(Vec::new()),
        dirs: Mutex::new(Vec::new()),
        error: Mutex::new(None),
    };
    if is_dir {
        rustix::fs::mkdirat(&dparent, name.as_slice(), Mode::from_raw_mode(0o700))
            .ctx("create directory", &target)?;
        let sroot = fs::open_dir_path(src).ctx("open", src)?;
        let droot = fs::open_dir_at(dparent.as_fd(), &name).ctx("open", &target)?;
        job.report.lock().unwrap().dirs += 1;
        job.dirs.lock().unwrap().push((Vec::new(), src_st));
        rayon::scope(|scope| job.walk(scope, &sroot, &droot, Vec::new()))?;
        job.finish(&droot)?;
    } else {
        job.copy_entry(
            sparent_fd.as_fd(),
            dparent.as_fd(),
            &sname,
            &name,
            &[],
            None,
            Some(src_st),
        )?;
        job.finish(&dparent)?;
    }
    let mut report = job.report.into_inner().unwrap();
    let stats = &job.copier.stats;
    report.target = target;
    report.reflinked = stats.reflinked.load(Ordering::Relaxed);
    report.kernel_copied = stats.kernel_copied.load(Ordering::Relaxed);
    report.user_copied = stats.user_copied.load(Ordering::Relaxed);
    Ok(report)
}

/// The capabilities to start from: everything, turned off by the copier the
/// first time the kernel refuses a strategy (one failed syscall per copy,
/// and no probe file written next to the source), then forced by the options.
fn copy_caps() -> Caps {
    Caps {
        reflink: true,
        copy_file_range: true,
        ..Caps::NONE
    }
}

fn current_umask() -> u32 {
    let old = rustix::process::umask(Mode::from_raw_mode(0o022));
    rustix::process::umask(old);
    old.bits()
}

struct Job<'p> {
    src_root: PathBuf,
    dst_root: PathBuf,
    copier: Copier,
    progress: &'p Progress,
    is_root: bool,
    umask: u32,
    report: Mutex<CpReport>,
    /// (dev, ino) of multiply-linked files → the relative path of their copy.
    inodes: Mutex<HashMap<(u64, u64), Vec<u8>>>,
    /// Hard links to make after the walk: (new path, path of the copy).
    links: Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
    /// Directories to finalise: relative path and source stat.
    dirs: Mutex<Vec<(Vec<u8>, St)>>,
    /// The first error of a spawned directory task.
    error: Mutex<Option<Error>>,
}

/// Opens the directory `rel` below `root` in one `openat2` call that refuses
/// to leave `root` or follow a symlink; falls back to a component-wise walk
/// on kernels without `openat2`.
fn open_beneath(root: BorrowedFd<'_>, rel: &[u8]) -> rustix::io::Result<OwnedFd> {
    if rel.is_empty() {
        return rustix::io::fcntl_dupfd_cloexec(root, 0);
    }
    match rustix::fs::openat2(
        root,
        rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_SYMLINKS,
    ) {
        Err(Errno::NOSYS) => fs::open_dir_beneath(root, rel),
        r => r,
    }
}

impl Job<'_> {
    fn src_shown(&self, rel: &[u8]) -> PathBuf {
        display_path(&self.src_root, rel)
    }

    fn dst_shown(&self, rel: &[u8]) -> PathBuf {
        display_path(&self.dst_root, rel)
    }

    /// Copies the contents of directory `rel` (already created in the
    /// destination) and spawns a task per subdirectory.
    fn walk<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        sroot: &'s OwnedFd,
        droot: &'s OwnedFd,
        rel: Vec<u8>,
    ) -> Result<()> {
        let sdir = open_beneath(sroot.as_fd(), &rel).ctx("open", self.src_shown(&rel))?;
        let ddir = open_beneath(droot.as_fd(), &rel).ctx("open", self.dst_shown(&rel))?;
        let listing = fs::list_dir(sdir).ctx("read directory", self.src_shown(&rel))?;
        let mut files = Vec::with_capacity(listing.names.len());
        for (name, ft) in &listing.names {
            let mut ft = *ft;
            let mut st = None;
            if ft == FileType::Unknown {
                let s =
                    rustix::fs::statat(listing.fd(), name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                        .map(|s| St::from(&s))
                        .ctx("stat", self.src_shown(&join(&rel, name)))?;
                ft = FileType::from_raw_mode(s.mode);
                st = Some(s);
            }
            if ft == FileType::Directory {
                let child = join(&rel, name);
                let dstat = match st {
                    Some(s) => s,
                    None => {
                        rustix::fs::statat(listing.fd(), name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                            .map(|s| St::from(&s))
                            .ctx("stat", self.src_shown(&child))?
                    }
                };
                rustix::fs::mkdirat(&ddir, name.as_slice(), Mode::from_raw_mode(0o700))
                    .ctx("create directory", self.dst_shown(&child))?;
                self.report.lock().unwrap().dirs += 1;
                self.dirs.lock().unwrap().push((child.clone(), dstat));
                self.progress.entries.fetch_add(1, Ordering::Relaxed);
                scope.spawn(move |scope| {
                    if let Err(e) = self.walk(scope, sroot, droot, child) {
                        self.fail(e);
                    }
                });
            } else {
                files.push((name.as_slice(), ft, st));
            }
        }
        let one = |(name, ft, st): &(&[u8], FileType, Option<St>)| -> Result<()> {
            self.copy_entry(listing.fd(), ddir.as_fd(), name, name, &rel, Some(*ft), *st)
        };
        if files.len() >= 8 {
            files.par_iter().try_for_each(one)?;
        } else {
            files.iter().try_for_each(one)?;
        }
        // Directory xattrs now; owner, mode and times once it is full.
        self.copy_xattrs(listing.fd(), ddir.as_fd(), &rel)?;
        Ok(())
    }

    /// Records the first error of a spawned task (scope tasks cannot return
    /// one); [`finish`](Self::finish) reports it.
    fn fail(&self, e: Error) {
        let mut slot = self.error.lock().unwrap();
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    /// Copies one non-directory entry `sname` of `sdir` to `dname` in
    /// `ddir`. `rel` is the directory's path below the roots, for messages.
    #[allow(clippy::too_many_arguments)]
    fn copy_entry(
        &self,
        sdir: BorrowedFd<'_>,
        ddir: BorrowedFd<'_>,
        sname: &[u8],
        dname: &[u8],
        rel: &[u8],
        ft: Option<FileType>,
        st: Option<St>,
    ) -> Result<()> {
        let rel_path = join(rel, dname);
        let src_shown = || {
            if rel.is_empty() && ft.is_none() {
                self.src_root.clone()
            } else {
                self.src_shown(&join(rel, sname))
            }
        };
        let dst_shown = || {
            if rel.is_empty() && ft.is_none() {
                self.dst_root.clone()
            } else {
                self.dst_shown(&rel_path)
            }
        };
        let ft = match (ft, &st) {
            (Some(ft), _) => ft,
            (None, Some(s)) => FileType::from_raw_mode(s.mode),
            (None, None) => unreachable!("callers pass a type or a stat"),
        };
        // Symlinks and special files: the caller's stat, else an lstat.
        let lstat = |st: Option<St>| -> Result<St> {
            match st {
                Some(s) => Ok(s),
                None => Ok(St::from(
                    &rustix::fs::statat(sdir, sname, AtFlags::SYMLINK_NOFOLLOW)
                        .ctx("stat", src_shown())?,
                )),
            }
        };
        match ft {
            FileType::RegularFile => {
                let src = match fs::open_file_at(sdir, sname) {
                    Ok(fd) => fd,
                    Err(e) => return Err(Error::io("open", src_shown(), e.into())),
                };
                let st = St::from(&rustix::fs::fstat(&src).ctx("stat", src_shown())?);
                if st.nlink > 1 {
                    let mut inodes = self.inodes.lock().unwrap();
                    if let Some(first) = inodes.get(&(st.dev, st.ino)) {
                        self.links.lock().unwrap().push((rel_path, first.clone()));
                        return Ok(());
                    }
                    inodes.insert((st.dev, st.ino), rel_path.clone());
                }
                let dst = rustix::fs::openat(
                    ddir,
                    dname,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(st.perm() & 0o777),
                )
                .ctx("create", dst_shown())?;
                self.copier
                    .copy(src.as_fd(), dst.as_fd(), st.size)
                    .ctx("copy", dst_shown())?;
                self.set_owner_mode(&dst, &st, &dst_shown)?;
                self.copy_xattrs(src.as_fd(), dst.as_fd(), &rel_path)?;
                rustix::fs::futimens(&dst, &st.times()).ctx("set times", dst_shown())?;
                self.progress.bytes.fetch_add(st.size, Ordering::Relaxed);
                let mut r = self.report.lock().unwrap();
                r.files += 1;
                r.bytes += st.size;
            }
            FileType::Symlink => {
                let st = lstat(st)?;
                let target = fs::read_link_at(sdir, sname).ctx("read symlink", src_shown())?;
                rustix::fs::symlinkat(target.as_slice(), ddir, dname)
                    .ctx("create symlink", dst_shown())?;
                self.chown_at(ddir, dname, &st, &dst_shown)?;
                rustix::fs::utimensat(ddir, dname, &st.times(), AtFlags::SYMLINK_NOFOLLOW)
                    .ctx("set times", dst_shown())?;
                self.report.lock().unwrap().symlinks += 1;
            }
            FileType::Socket => {
                self.report.lock().unwrap().skipped_sockets += 1;
            }
            _ => {
                // FIFOs and device nodes.
                let st = lstat(st)?;
                rustix::fs::mknodat(
                    ddir,
                    dname,
                    ft,
                    Mode::from_raw_mode(st.perm()),
                    st.rdev as _,
                )
                .ctx("create special file", dst_shown())?;
                self.chown_at(ddir, dname, &st, &dst_shown)?;
                rustix::fs::chmodat(
                    ddir,
                    dname,
                    Mode::from_raw_mode(st.perm()),
                    AtFlags::empty(),
                )
                .ctx("chmod", dst_shown())?;
                rustix::fs::utimensat(ddir, dname, &st.times(), AtFlags::SYMLINK_NOFOLLOW)
                    .ctx("set times", dst_shown())?;
                self.report.lock().unwrap().specials += 1;
            }
        }
        self.progress.entries.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Gives `dname` (not followed) the owner of `st`, when run as root.
    fn chown_at(
        &self,
        ddir: BorrowedFd<'_>,
        dname: &[u8],
        st: &St,
        shown: &dyn Fn() -> PathBuf,
    ) -> Result<()> {
        if self.is_root {
            rustix::fs::chownat(
                ddir,
                dname,
                Some(rustix::fs::Uid::from_raw(st.uid)),
                Some(rustix::fs::Gid::from_raw(st.gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .ctx("chown", shown())?;
        }
        Ok(())
    }

    /// Owner (as root) then mode: `chown` clears setuid/setgid, and the
    /// creation mode was filtered by the umask.
    fn set_owner_mode(&self, fd: &OwnedFd, st: &St, shown: &dyn Fn() -> PathBuf) -> Result<()> {
        let mut need_chmod = st.perm() & !0o777 != 0 || st.perm() & self.umask != 0;
        if self.is_root && (st.uid != 0 || st.gid != 0) {
            rustix::fs::fchown(
                fd,
                Some(rustix::fs::Uid::from_raw(st.uid)),
                Some(rustix::fs::Gid::from_raw(st.gid)),
            )
            .ctx("chown", shown())?;
            need_chmod = true;
        }
        if need_chmod {
            rustix::fs::fchmod(fd, Mode::from_raw_mode(st.perm())).ctx("chmod", shown())?;
        }
        Ok(())
    }

    /// Copies every extended attribute of `src` to `dst`. Attributes the
    /// destination cannot hold are counted in the report, not errors.
    fn copy_xattrs(&self, src: BorrowedFd<'_>, dst: BorrowedFd<'_>, rel: &[u8]) -> Result<()> {
        let mut names = vec![0u8; 1024];
        let n = loop {
            match rustix::fs::flistxattr(src, &mut names[..]) {
                Ok(n) => break n,
                Err(Errno::RANGE) => {
                    let want = rustix::fs::flistxattr_query(src).unwrap_or(names.len() * 2);
                    names.resize(want.max(names.len() * 2), 0);
                }
                Err(Errno::OPNOTSUPP) => return Ok(()),
                Err(e) => return Err(Error::io("list xattrs", self.src_shown(rel), e.into())),
            }
        };
        if n == 0 {
            return Ok(());
        }
        let mut value = vec![0u8; 4096];
        for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let cname = std::ffi::CString::new(name).expect("xattr names have no NUL");
            let len = loop {
                match rustix::fs::fgetxattr(src, cname.as_c_str(), &mut value[..]) {
                    Ok(len) => break Some(len),
                    Err(Errno::RANGE) => value.resize(value.len() * 4, 0),
                    Err(Errno::NODATA) => break None,
                    Err(e) => return Err(Error::io("read xattr", self.src_shown(rel), e.into())),
                }
            };
            let Some(len) = len else { continue };
            match rustix::fs::fsetxattr(
                dst,
                cname.as_c_str(),
                &value[..len],
                rustix::fs::XattrFlags::empty(),
            ) {
                Ok(()) => {}
                Err(Errno::OPNOTSUPP) | Err(Errno::PERM) | Err(Errno::ACCESS) => {
                    self.report.lock().unwrap().skipped_xattrs += 1;
                }
                Err(e) => return Err(Error::io("write xattr", self.dst_shown(rel), e.into())),
            }
        }
        Ok(())
    }

    /// After the walk: the first task error, if any; then hard links; then
    /// directory owners, modes and times, deepest first.
    fn finish(&self, droot: &OwnedFd) -> Result<()> {
        if let Some(e) = self.error.lock().unwrap().take() {
            return Err(e);
        }
        let links = std::mem::take(&mut *self.links.lock().unwrap());
        for (new, first) in links {
            rustix::fs::linkat(
                droot,
                first.as_slice(),
                droot,
                new.as_slice(),
                AtFlags::empty(),
            )
            .ctx("link", self.dst_shown(&new))?;
            self.report.lock().unwrap().hard_links += 1;
            self.progress.entries.fetch_add(1, Ordering::Relaxed);
        }
        let mut dirs = std::mem::take(&mut *self.dirs.lock().unwrap());
        dirs.sort_by_key(|(rel, _)| {
            std::cmp::Reverse(
                rel.iter().filter(|&&b| b == b'/').count() + usize::from(!rel.is_empty()),
            )
        });
        for (rel, st) in dirs {
            let fd = open_beneath(droot.as_fd(), &rel).ctx("open", self.dst_shown(&rel))?;
            if self.is_root && (st.uid != 0 || st.gid != 0) {
                rustix::fs::fchown(
                    &fd,
                    Some(rustix::fs::Uid::from_raw(st.uid)),
                    Some(rustix::fs::Gid::from_raw(st.gid)),
                )
                .ctx("chown", self.dst_shown(&rel))?;
            }
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(st.perm()))
                .ctx("chmod", self.dst_shown(&rel))?;
            rustix::fs::futimens(&fd, &st.times()).ctx("set times", self.dst_shown(&rel))?;
        }
        Ok(())
    }
}
