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
//! Sparse files keep their holes: before copying a file of at least
//! [`SPARSE_MIN`] bytes the engine asks the kernel where its data is
//! (`SEEK_DATA`/`SEEK_HOLE`, one `lseek` for a dense file) and copies only the
//! data segments, then sets the length. (A reflink shares holes as they are.)
//! Where the bytes come from a buffer instead of a sparse-aware source (the
//! store's fixed-size bands), [`Copier::write_sparse_at`] writes only the
//! [`BLOCK`]-sized blocks that are not all zero into a file whose length is
//! already set, so a hole stays a hole on the way back (`ckpt restore` of a
//! `truncate -s 2G` file writes no data blocks).
//!
//! Large files (at least [`Copier::split_at`] bytes, [`DEFAULT_SPLIT_AT`] by
//! default, `CKPT_SPLIT_BYTES` to tune) are cut into [`CHUNK`]-sized ranges
//! copied in parallel on the rayon pool, each with positional I/O
//! (`copy_file_range` with explicit offsets, or `pread`/`pwrite`).
//!
//! The strategy can be forced for tests and benchmarks with
//! `CKPT_COPY_STRATEGY=reflink|copy_file_range|userspace` or a command's
//! `--strategy` flag (a forced strategy still falls back if the kernel
//! refuses it).

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::fs;

/// How one file was copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// `FICLONE` ioctl.
    Reflink,
    /// `copy_file_range(2)`.
    CopyFileRange,
    /// `read(2)`/`write(2)`.
    Userspace,
}

impl Strategy {
    /// Every strategy, best first.
    pub const ALL: [Strategy; 3] = [
        Strategy::Reflink,
        Strategy::CopyFileRange,
        Strategy::Userspace,
    ];

    /// The name used by `CKPT_COPY_STRATEGY` and `--strategy`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Reflink => "reflink",
            Strategy::CopyFileRange => "copy_file_range",
            Strategy::Userspace => "userspace",
        }
    }

    /// Parses a [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|st| st.name() == s)
    }
}

/// What a filesystem (or a pair of them) was found to support. Fields added
/// after the first release default to `false` when an old store's cached
/// probe lacks them.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Caps {
    /// `FICLONE` works from a source file to a destination file.
    pub reflink: bool,
    /// `copy_file_range` works from a source file to a destination file.
    pub copy_file_range: bool,
    /// A hard link from the source directory into the destination works.
    #[serde(default)]
    pub hard_link: bool,
    /// `fallocate` works on a destination file.
    #[serde(default)]
    pub fallocate: bool,
    /// `SEEK_HOLE` reports the hole of a sparse source file.
    #[serde(default)]
    pub seek_hole: bool,
}

impl Caps {
    /// Nothing but userspace copies.
    pub const NONE: Caps = Caps {
        reflink: false,
        copy_file_range: false,
        hard_link: false,
        fallocate: false,
        seek_hole: false,
    };

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

    /// These capabilities with the copy strategy forced to `s` (and the
    /// better ones turned off). Forcing `reflink` turns it on even where the
    /// probe said no: the copier then falls back as the kernel answers.
    pub fn forced(self, s: Strategy) -> Caps {
        Caps {
            reflink: s == Strategy::Reflink,
            copy_file_range: s != Strategy::Userspace,
            ..self
        }
    }

    /// These capabilities with `config`'s forced strategy, if any, applied.
    pub fn configured(self, config: &CopyConfig) -> Caps {
        match config.strategy {
            Some(s) => self.forced(s),
            None => self,
        }
    }
}

/// What the caller forces on the copy engine; by default nothing: the
/// probed strategy and [`DEFAULT_SPLIT_AT`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyConfig {
    /// Use this strategy first, whatever the probe said (a refused strategy
    /// still falls back as the kernel answers).
    pub strategy: Option<Strategy>,
    /// Copy files at least this large in parallel ranges ([`Copier::split_at`]).
    pub split_at: Option<u64>,
}

/// Probes which strategies work for copies within directory `dir` by
/// creating temporary files there and really trying each one.
pub fn probe(dir: BorrowedFd<'_>) -> io::Result<Caps> {
    probe_pair(dir, dir)
}

/// Probes what works for copies from files in `src_dir` to files in
/// `dst_dir` (possibly on another filesystem) by creating temporary files in
/// both and really trying each operation. Nothing is guessed from
/// filesystem names.
pub fn probe_pair(src_dir: BorrowedFd<'_>, dst_dir: BorrowedFd<'_>) -> io::Result<Caps> {
    let pid = std::process::id();
    let src_name = format!(".ckpt-probe-src-{pid}");
    let dst_name = format!(".ckpt-probe-dst-{pid}");
    let link_name = format!(".ckpt-probe-lnk-{pid}");
    let unlink = |d: BorrowedFd<'_>, n: &str| {
        let _ = rustix::fs::unlinkat(d, n, rustix::fs::AtFlags::empty());
    };
    let cleanup = || {
        unlink(src_dir, &src_name);
        unlink(dst_dir, &dst_name);
        unlink(dst_dir, &link_name);
    };
    cleanup();
    let result = (|| -> io::Result<Caps> {
        const DATA: usize = 64 * 1024;
        // Data, then a hole: 64 KiB of bytes in a 4 MiB file.
        let src = fs::create_excl_at(src_dir, src_name.as_bytes(), 0o600)?;
        write_all(src.as_fd(), &[0x5au8; DATA])?;
        rustix::fs::ftruncate(&src, 4 << 20)?;
        rustix::fs::fsync(&src)?;
        let src = fs::open_file_at(src_dir, src_name.as_bytes())?;
        let seek_hole = matches!(
            rustix::fs::seek(&src, SeekFrom::Hole(0)),
            Ok(h) if h < 4 << 20
        );
        let fresh_dst = || -> io::Result<_> {
            unlink(dst_dir, &dst_name);
            Ok(fs::create_excl_at(dst_dir, dst_name.as_bytes(), 0o600)?)
        };
        let dst = fresh_dst()?;
        let reflink = rustix::fs::ioctl_ficlone(&dst, &src).is_ok();
        let dst = fresh_dst()?;
        let mut off_in = 0u64;
        let mut off_out = 0u64;
        let copy_file_range = matches!(
            rustix::fs::copy_file_range(&src, Some(&mut off_in), &dst, Some(&mut off_out), DATA),
            Ok(n) if n > 0
        );
        let fallocate =
            rustix::fs::fallocate(&dst, rustix::fs::FallocateFlags::empty(), 0, 4096).is_ok();
        let hard_link = rustix::fs::linkat(
            src_dir,
            src_name.as_str(),
            dst_dir,
            link_name.as_str(),
            rustix::fs::AtFlags::empty(),
        )
        .is_ok();
        Ok(Caps {
            reflink,
            copy_file_range,
            hard_link,
            fallocate,
            seek_hole,
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
    /// Files whose holes were skipped.
    pub sparse: AtomicU64,
    /// Files split into ranges copied in parallel.
    pub split: AtomicU64,
}

/// Copies file contents with the best strategy that keeps working.
#[derive(Debug)]
pub struct Copier {
    reflink: AtomicBool,
    cfr: AtomicBool,
    seek_hole: AtomicBool,
    /// Files of at least this many bytes are copied as parallel ranges.
    pub split_at: u64,
    /// What was done so far.
    pub stats: CopyStats,
}

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The userspace copy buffer size.
const BUF_SIZE: usize = 1 << 20;
/// Files below this size are copied without looking for holes.
pub const SPARSE_MIN: u64 = 1 << 20;
/// Default of [`Copier::split_at`].
pub const DEFAULT_SPLIT_AT: u64 = 64 << 20;
/// The size of the ranges a large file is cut into.
pub const CHUNK: u64 = 16 << 20;

impl Copier {
    /// A copier that starts from the given capabilities, splitting files
    /// at [`DEFAULT_SPLIT_AT`].
    pub fn new(caps: Caps) -> Copier {
        Copier::configured(caps, &CopyConfig::default())
    }

    /// A copier that starts from the given capabilities with `config`
    /// applied (forced strategy, split threshold).
    pub fn configured(caps: Caps, config: &CopyConfig) -> Copier {
        let caps = caps.configured(config);
        let split_at = config.split_at.map_or(DEFAULT_SPLIT_AT, |v| v.max(1));
        Copier {
            reflink: AtomicBool::new(caps.reflink),
            cfr: AtomicBool::new(caps.copy_file_range),
            // Asking costs one lseek and is harmless where holes are not
            // reported (the answer is then "no hole").
            seek_hole: AtomicBool::new(true),
            split_at,
            stats: CopyStats::default(),
        }
    }

    /// Copies the whole of `src` (which has `len` bytes) into the empty file
    /// `dst`, returning the strategy that did it. Holes are preserved where
    /// the source filesystem reports them. If `src` shrinks while being
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
        let segments = self.data_segments(src, len)?;
        let sparse = !(segments.len() == 1 && segments[0] == (0, len));
        if sparse {
            self.stats.sparse.fetch_add(1, Ordering::Relaxed);
            // The length first: trailing holes stay holes, and ranges
            // written in parallel never race on the file size.
            rustix::fs::ftruncate(dst, len)?;
        }
        let kernel = if len >= self.split_at {
            self.stats.split.fetch_add(1, Ordering::Relaxed);
            let chunks: Vec<(u64, u64)> = segments
                .iter()
                .flat_map(|&(off, n)| {
                    (0..n.div_ceil(CHUNK))
                        .map(move |i| (off + i * CHUNK, (n - i * CHUNK).min(CHUNK)))
                })
                .collect();
            chunks
                .par_iter()
                .map(|&(off, n)| self.copy_chunk(src, dst, off, n))
                .try_reduce(|| true, |a, b| Ok(a && b))?
        } else {
            let mut all_kernel = true;
            for &(off, n) in &segments {
                all_kernel &= self.copy_chunk(src, dst, off, n)?;
            }
            all_kernel
        };
        if kernel {
            self.stats.kernel_copied.fetch_add(1, Ordering::Relaxed);
            Ok(Strategy::CopyFileRange)
        } else {
            self.stats.user_copied.fetch_add(1, Ordering::Relaxed);
            Ok(Strategy::Userspace)
        }
    }

    /// The `(offset, length)` ranges of `src` that hold data, in order:
    /// `[(0, len)]` for a dense or small file.
    fn data_segments(&self, src: BorrowedFd<'_>, len: u64) -> io::Result<Vec<(u64, u64)>> {
        let whole = vec![(0, len)];
        if len < SPARSE_MIN || !self.seek_hole.load(Ordering::Relaxed) {
            return Ok(whole);
        }
        match rustix::fs::seek(src, SeekFrom::Hole(0)) {
            Ok(h) if h >= len => return Ok(whole),
            Ok(_) => {}
            Err(e) if unsupported(e) => {
                self.seek_hole.store(false, Ordering::Relaxed);
                return Ok(whole);
            }
            Err(e) => return Err(e.into()),
        }
        let mut out = Vec::new();
        let mut pos = 0u64;
        while pos < len {
            let start = match rustix::fs::seek(src, SeekFrom::Data(pos)) {
                Ok(d) => d,
                Err(Errno::NXIO) => break,
                Err(e) => return Err(e.into()),
            };
            if start >= len {
                break;
            }
            let end = match rustix::fs::seek(src, SeekFrom::Hole(start)) {
                Ok(h) => h.min(len),
                Err(Errno::NXIO) => len,
                Err(e) => return Err(e.into()),
            };
            if end <= start {
                break;
            }
            out.push((start, end - start));
            pos = end;
        }
        Ok(out)
    }

    /// Copies bytes `off..off+n` of `src` to the same offsets of `dst`.
    /// Returns whether the kernel copied them (`copy_file_range`) rather
    /// than user memory. Stops early if the source ends early.
    fn copy_chunk(
        &self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        off: u64,
        n: u64,
    ) -> io::Result<bool> {
        self.copy_at(src, off, dst, off, n)
    }

    /// Copies bytes `off..off+n` of `src` to `dst_off..` of `dst` with
    /// `copy_file_range` where it works, else through user memory. Returns
    /// whether the kernel did it. (Used to reassemble banded files.)
    pub fn copy_at(
        &self,
        src: BorrowedFd<'_>,
        off: u64,
        dst: BorrowedFd<'_>,
        dst_off: u64,
        n: u64,
    ) -> io::Result<bool> {
        if self.cfr.load(Ordering::Relaxed) {
            match copy_range(src, dst, off, dst_off, n) {
                Ok(()) => return Ok(true),
                Err((done, e)) if done == 0 && unsupported(e) => {
                    self.cfr.store(false, Ordering::Relaxed)
                }
                Err((_, e)) => return Err(e.into()),
            }
        }
        copy_user(src, dst, off, dst_off, n)?;
        Ok(false)
    }

    /// Whether reflinks are still being tried (they worked in the probe and
    /// the kernel has not refused one).
    pub fn reflinks(&self) -> bool {
        self.reflink.load(Ordering::Relaxed)
    }

    /// Copies `off..off+n` of `src` to `dst_off..` of `dst` through user
    /// memory, writing only the [`BLOCK`]s that hold a non-zero byte (see
    /// [`Copier::write_sparse_at`]). `dst` must already read as zeros over
    /// the whole range: a fresh file whose length was set with `ftruncate`.
    pub fn copy_sparse_at(
        &self,
        src: BorrowedFd<'_>,
        off: u64,
        dst: BorrowedFd<'_>,
        dst_off: u64,
        n: u64,
    ) -> io::Result<()> {
        copy_user_with(src, dst, off, dst_off, n, write_nonzero_at)?;
        self.stats.sparse.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes `data` at `off` in `dst`, skipping every [`BLOCK`]-aligned
    /// block that is all zeros, so those stay holes. `dst` must already read
    /// as zeros there (its length set with `ftruncate` past `off +
    /// data.len()`, nothing written yet), which is what makes skipping
    /// a block the same as writing it.
    pub fn write_sparse_at(&self, dst: BorrowedFd<'_>, data: &[u8], off: u64) -> io::Result<()> {
        write_nonzero_at(dst, data, off)?;
        self.stats.sparse.fetch_add(1, Ordering::Relaxed);
        Ok(())
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
        Errno::OPNOTSUPP
            | Errno::XDEV
            | Errno::INVAL
            | Errno::NOSYS
            | Errno::BADF
            | Errno::PERM
            | Errno::NOTTY
    )
}

/// `copy_file_range` of `off..off+n` until done or the source ends. On error
/// returns how many bytes had been copied, so "unsupported" at the start can
/// fall back cleanly.
fn copy_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    off: u64,
    dst_off: u64,
    n: u64,
) -> Result<(), (u64, Errno)> {
    let mut off_in = off;
    let mut off_out = dst_off;
    let end = off + n;
    while off_in < end {
        let want = (end - off_in).min(1 << 30) as usize;
        match rustix::fs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want) {
            Ok(0) => break,
            Ok(_) => {}
            Err(Errno::INTR) => {}
            Err(e) => return Err((off_in - off, e)),
        }
    }
    Ok(())
}

/// `pread`/`pwrite` of `off..off+n` through a thread-local buffer.
fn copy_user(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    off: u64,
    dst_off: u64,
    n: u64,
) -> io::Result<()> {
    copy_user_with(src, dst, off, dst_off, n, pwrite_all)
}

/// `pread` of `off..off+n` through a thread-local buffer, each piece
/// handed to `write(dst, bytes, at)`.
fn copy_user_with(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    off: u64,
    dst_off: u64,
    n: u64,
    write: fn(BorrowedFd<'_>, &[u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.resize(BUF_SIZE, 0);
        let end = off + n;
        let mut pos = off;
        while pos < end {
            let want = ((end - pos) as usize).min(BUF_SIZE);
            let got = match rustix::io::pread(src, &mut buf[..want], pos) {
                Ok(0) => return Ok(()),
                Ok(got) => got,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            write(dst, &buf[..got], pos - off + dst_off)?;
            pos += got as u64;
        }
        Ok(())
    })
}

/// The unit of hole detection in [`Copier::write_sparse_at`]: the page and
/// filesystem block size almost everywhere, so a skipped block is a block
/// the filesystem does not allocate.
pub const BLOCK: usize = 4096;

/// Writes the runs of `data` made of blocks (aligned to `off`) that are not
/// all zero.
fn write_nonzero_at(dst: BorrowedFd<'_>, data: &[u8], off: u64) -> io::Result<()> {
    static ZERO: [u8; BLOCK] = [0; BLOCK];
    let is_zero = |b: &[u8]| b == &ZERO[..b.len()];
    let mut at = 0usize;
    while at < data.len() {
        // Skip a run of zero blocks, then write the run of data blocks after it.
        while at < data.len() && is_zero(&data[at..(at + BLOCK).min(data.len())]) {
            at += BLOCK;
        }
        let start = at;
        while at < data.len() && !is_zero(&data[at..(at + BLOCK).min(data.len())]) {
            at += BLOCK;
        }
        let end = at.min(data.len());
        if start < end {
            pwrite_all(dst, &data[start..end], off + start as u64)?;
        }
    }
    Ok(())
}

fn pwrite_all(dst: BorrowedFd<'_>, mut data: &[u8], mut at: u64) -> io::Result<()> {
    while !data.is_empty() {
        match rustix::io::pwrite(dst, data, at) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(w) => {
                data = &data[w..];
                at += w as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
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
            probed.forced(Strategy::CopyFileRange),
            probed.forced(Strategy::Userspace),
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

    /// Random layouts of data and holes, random split thresholds: every
    /// strategy yields the same bytes and length, and where the filesystem
    /// reports holes the copy allocates no more than the source.
    mod layouts {
        use super::*;
        use crate::copy::Strategy;
        use proptest::prelude::*;
        use std::os::unix::fs::{FileExt, MetadataExt};

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(24))]
            #[test]
            fn holes_and_ranges_copy_exactly(
                pieces in proptest::collection::vec((0u64..3 << 20, 1usize..300_000, any::<u8>()), 0..6),
                tail in 0u64..4 << 20,
                split_at in prop_oneof![Just(1u64), Just(1 << 20), Just(DEFAULT_SPLIT_AT)],
            ) {
                let dir = tempfile::tempdir().unwrap();
                let dfd = fs::open_dir_path(dir.path()).unwrap();
                let src_path = dir.path().join("src");
                let f = std::fs::File::create(&src_path).unwrap();
                let mut off = 0u64;
                for (gap, len, byte) in &pieces {
                    off += gap;
                    f.write_all_at(&vec![*byte | 1; *len], off).unwrap();
                    off += *len as u64;
                }
                f.set_len(off + tail).unwrap();
                drop(f);
                let want = std::fs::read(&src_path).unwrap();
                let src_blocks = std::fs::metadata(&src_path).unwrap().blocks();
                let probed = probe(dfd.as_fd()).unwrap();
                for s in Strategy::ALL {
                    let mut copier = Copier::new(probed.forced(s));
                    copier.split_at = split_at;
                    let src = fs::open_file_at(dfd.as_fd(), b"src").unwrap();
                    let _ = rustix::fs::unlinkat(dfd.as_fd(), &b"dst"[..], rustix::fs::AtFlags::empty());
                    let dst = fs::create_excl_at(dfd.as_fd(), b"dst", 0o644).unwrap();
                    copier.copy(src.as_fd(), dst.as_fd(), want.len() as u64).unwrap();
                    drop(dst);
                    let got = std::fs::read(dir.path().join("dst")).unwrap();
                    prop_assert!(got == want, "{:?}: content differs", s);
                    if probed.seek_hole && want.len() as u64 >= SPARSE_MIN {
                        let blocks = std::fs::metadata(dir.path().join("dst")).unwrap().blocks();
                        // Allow a little rounding at segment edges.
                        prop_assert!(blocks <= src_blocks + 64, "{:?}: {} blocks vs {}", s, blocks, src_blocks);
                    }
                }
            }
        }
    }
}
