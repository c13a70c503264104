//! The copy engine: moves file contents between the workspace and the store.
//!
//! For each file it tries, in order:
//! 1. `FICLONE` (reflink): the destination shares the source's extents,
//!    costing no data I/O and no space (btrfs, xfs with `reflink=1`);
//! 2. `copy_file_range`: an in-kernel copy, no round trip through user
//!    memory;
//! 3. a userspace `read`/`write` loop with a large buffer.
//!
//! Which of these work on a filesystem is [`probe`]d once per store by really
//! trying them on temporary files, and the answer is cached in the store
//! config. A [`Copier`] starts from those capabilities and turns a strategy off
//! for the rest of the operation the first time the kernel answers "not
//! supported" (e.g. `EXDEV` when restoring onto another filesystem), so a
//! failed strategy costs one syscall per operation, not one per file.
//!
//! The strategy can be forced for tests and benchmarks with
//! `CKPT_COPY_STRATEGY=reflink|copy_file_range|userspace` (a forced strategy
//! still falls back if the kernel refuses it).

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::fs;

/// How one file was copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// `FICLONE` ioctl.
    Reflink,
    /// `copy_file_range(2)`.
    CopyFileRange,
    /// `read(2)`/`write(2)`.
    Userspace,
}

/// What a filesystem was found to support.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    /// `FICLONE` works between two files in the probed directory.
    pub reflink: bool,
    /// `copy_file_range` works between two files in the probed directory.
    pub copy_file_range: bool,
}

impl Caps {
    /// The strategy a copy will try first.
    pub fn preferred(&self) -> Strategy {
        if self.reflink {
            Strategy::Reflink
        } else if self.copy_file_range {
            Strategy::CopyFileRange
        } else {
            Strategy::Userspace
        }
    }

    /// Applies `CKPT_COPY_STRATEGY`, if set, on top of probed capabilities.
    pub fn with_env_override(self) -> Caps {
        match std::env::var("CKPT_COPY_STRATEGY").as_deref() {
            Ok("reflink") => Caps {
                reflink: true,
                copy_file_range: false,
            },
            Ok("copy_file_range") => Caps {
                reflink: false,
                copy_file_range: true,
            },
            Ok("userspace") => Caps {
                reflink: false,
                copy_file_range: false,
            },
            _ => self,
        }
    }
}

/// Probes which strategies work for copies within directory `dir` by
/// creating two temporary files there and really trying each one.
pub fn probe(dir: BorrowedFd<'_>) -> io::Result<Caps> {
    let pid = std::process::id();
    let src_name = format!(".ckpt-probe-src-{pid}");
    let dst_name = format!(".ckpt-probe-dst-{pid}");
    let cleanup = || {
        let _ = rustix::fs::unlinkat(dir, src_name.as_bytes(), rustix::fs::AtFlags::empty());
        let _ = rustix::fs::unlinkat(dir, dst_name.as_bytes(), rustix::fs::AtFlags::empty());
    };
    cleanup();
    let result = (|| -> io::Result<Caps> {
        let src = fs::create_excl_at(dir, src_name.as_bytes(), 0o600)?;
        let block = vec![0x5au8; 64 * 1024];
        rustix::io::write(&src, &block)?;
        rustix::fs::fsync(&src)?;
        let src = rustix::fs::openat(
            dir,
            src_name.as_bytes(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let dst = fs::create_excl_at(dir, dst_name.as_bytes(), 0o600)?;
        let reflink = rustix::fs::ioctl_ficlone(&dst, &src).is_ok();
        let dst2 = {
            let _ = rustix::fs::unlinkat(dir, dst_name.as_bytes(), rustix::fs::AtFlags::empty());
            fs::create_excl_at(dir, dst_name.as_bytes(), 0o600)?
        };
        let mut off_in = 0u64;
        let mut off_out = 0u64;
        let cfr = matches!(
            rustix::fs::copy_file_range(&src, Some(&mut off_in), &dst2, Some(&mut off_out), block.len()),
            Ok(n) if n > 0
        );
        Ok(Caps {
            reflink,
            copy_file_range: cfr,
        })
    })();
    cleanup();
    result
}

/// Counters of what a [`Copier`] did, for `--verbose` and benchmarks.
#[derive(Debug, Default)]
pub struct CopyStats {
    /// Files cloned with `FICLONE`.
    pub reflinked: AtomicU64,
    /// Files copied with `copy_file_range`.
    pub kernel_copied: AtomicU64,
    /// Files copied through user memory.
    pub user_copied: AtomicU64,
}

/// Copies file contents with the best strategy that keeps working.
#[derive(Debug)]
pub struct Copier {
    reflink: AtomicBool,
    cfr: AtomicBool,
    /// What was done so far.
    pub stats: CopyStats,
}

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The userspace copy buffer size.
const BUF_SIZE: usize = 1 << 20;

impl Copier {
    /// A copier that starts from the given capabilities.
    pub fn new(caps: Caps) -> Copier {
        Copier {
            reflink: AtomicBool::new(caps.reflink),
            cfr: AtomicBool::new(caps.copy_file_range),
            stats: CopyStats::default(),
        }
    }

    /// Copies the whole of `src` (which has `len` bytes) into the empty file
    /// `dst`, returning the strategy that did it. If `src` shrinks while being
    /// copied the copy is short; callers detect that by comparing stat before
    /// and after.
    pub fn copy(&self, src: BorrowedFd<'_>, dst: BorrowedFd<'_>, len: u64) -> io::Result<Strategy> {
        if len == 0 {
            return Ok(Strategy::Userspace);
        }
        if self.reflink.load(Ordering::Relaxed) {
            match rustix::fs::ioctl_ficlone(dst, src) {
                Ok(()) => {
                    self.stats.reflinked.fetch_add(1, Ordering::Relaxed);
                    return Ok(Strategy::Reflink);
                }
                Err(e) if unsupported(e) => self.reflink.store(false, Ordering::Relaxed),
                Err(e) => return Err(e.into()),
            }
        }
        if self.cfr.load(Ordering::Relaxed) {
            match copy_range(src, dst, len) {
                Ok(()) => {
                    self.stats.kernel_copied.fetch_add(1, Ordering::Relaxed);
                    return Ok(Strategy::CopyFileRange);
                }
                Err((0, e)) if unsupported(e) => self.cfr.store(false, Ordering::Relaxed),
                Err((_, e)) => return Err(e.into()),
            }
        }
        copy_user(src, dst)?;
        self.stats.user_copied.fetch_add(1, Ordering::Relaxed);
        Ok(Strategy::Userspace)
    }

    /// Writes `data` to `dst` (used when the content is already in memory).
    pub fn write_all(&self, dst: BorrowedFd<'_>, data: &[u8]) -> io::Result<()> {
        write_all(dst, data)?;
        self.stats.user_copied.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn unsupported(e: Errno) -> bool {
    matches!(
        e,
        Errno::OPNOTSUPP | Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::BADF | Errno::PERM
    )
}

/// `copy_file_range` until `len` bytes are copied or the source ends. On
/// error returns how many bytes had been copied, so "unsupported" at offset 0
/// can fall back cleanly.
fn copy_range(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, len: u64) -> Result<(), (u64, Errno)> {
    let mut off_in = 0u64;
    let mut off_out = 0u64;
    while off_in < len {
        let want = (len - off_in).min(1 << 30) as usize;
        match rustix::fs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want) {
            Ok(0) => break,
            Ok(_) => {}
            Err(Errno::INTR) => {}
            Err(e) => return Err((off_in, e)),
        }
    }
    Ok(())
}

fn copy_user(src: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> io::Result<()> {
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.resize(BUF_SIZE, 0);
        let mut off = 0u64;
        loop {
            let n = match rustix::io::pread(src, &mut buf[..], off) {
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                return Ok(());
            }
            write_all(dst, &buf[..n])?;
            off += n as u64;
        }
    })
}

fn write_all(dst: BorrowedFd<'_>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match rustix::io::write(dst, data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads `fd` from its current offset into `buf` (cleared first) until
/// `expect` bytes are in or the file ends early. It does not issue the extra
/// `read` that would confirm end-of-file: callers compare the file's stat
/// before and after, which catches a file that grew.
pub fn read_expected(fd: impl AsFd, buf: &mut Vec<u8>, expect: u64) -> io::Result<()> {
    buf.clear();
    buf.reserve(expect as usize);
    let fd = fd.as_fd();
    while (buf.len() as u64) < expect {
        let spare = buf.spare_capacity_mut();
        match rustix::io::read(fd, spare) {
            Ok(([], _)) => return Ok(()),
            Ok((init, _)) => {
                let n = init.len();
                // SAFETY: `read` initialised `n` bytes of the spare capacity.
                unsafe { buf.set_len(buf.len() + n) };
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn every_strategy_copies_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let dfd = fs::open_dir_path(dir.path()).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.path().join("src"), &data).unwrap();
        let probed = probe(dfd.as_fd()).unwrap();
        for caps in [
            probed,
            Caps {
                reflink: false,
                copy_file_range: true,
            },
            Caps {
                reflink: false,
                copy_file_range: false,
            },
        ] {
            let copier = Copier::new(caps);
            let src = fs::open_file_at(dfd.as_fd(), b"src").unwrap();
            let _ = rustix::fs::unlinkat(dfd.as_fd(), &b"dst"[..], rustix::fs::AtFlags::empty());
            let dst = fs::create_excl_at(dfd.as_fd(), b"dst", 0o644).unwrap();
            copier
                .copy(src.as_fd(), dst.as_fd(), data.len() as u64)
                .unwrap();
            assert_eq!(
                std::fs::read(dir.path().join("dst")).unwrap(),
                data,
                "{caps:?}"
            );
        }
    }
}
