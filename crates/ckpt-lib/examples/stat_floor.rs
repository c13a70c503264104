//! The floor under a scan-mode save or status: how long this machine takes
//! to `lstat` every entry of a tree and nothing else.
//!
//! The tree is listed once, untimed (every directory's path and names). Each
//! timed round then opens every directory `O_PATH` and `fstatat`s its names
//! (`AT_SYMLINK_NOFOLLOW`), directories handed out to N threads from a shared
//! counter — the same system calls a scan makes for an unchanged tree, with no
//! index, no comparison, no allocation. It prints the median and range of 7
//! rounds for 1 and 2 threads (or the counts given), after a first round
//! that warms the caches, whose time it prints too (on a fresh btrfs
//! snapshot, the floor under the first scan of a subvolume fork).
//!
//! With `--scan` (DIR a workspace with a store), each 2-thread round is
//! followed by a full hash-only scan of the workspace against its index, in
//! this process, and it prints the scan's median and the median of the
//! scan ÷ round ratios: the scan's own cost against the floor, without what
//! a command adds (process start, loading the index, committing).
//!
//! Run: `cargo run --release -p ckpt-lib --example stat_floor -- DIR [--scan] [THREADS...]`

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rustix::fs::{open, statat, AtFlags, Mode, OFlags};

struct Dir {
    path: PathBuf,
    names: Vec<CString>,
}

fn list(path: &Path, out: &mut Vec<Dir>) -> std::io::Result<()> {
    let mut names = Vec::new();
    let mut subdirs = Vec::new();
    for e in std::fs::read_dir(path)? {
        let e = e?;
        names.push(CString::new(e.file_name().as_bytes()).expect("no NUL in a name"));
        if e.file_type()?.is_dir() {
            subdirs.push(e.path());
        }
    }
    out.push(Dir {
        path: path.to_owned(),
        names,
    });
    for s in subdirs {
        list(&s, out)?;
    }
    Ok(())
}

/// One round: every entry `lstat`ed once by `threads` threads; (ms, stats).
fn round(dirs: &[Dir], threads: usize) -> (f64, usize) {
    let next = AtomicUsize::new(0);
    let stats = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut n = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(d) = dirs.get(i) else { break };
                    let fd = open(
                        &d.path,
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .expect("open directory");
                    for name in &d.names {
                        if statat(&fd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                            n += 1;
                        }
                    }
                }
                stats.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    (
        start.elapsed().as_secs_f64() * 1e3,
        stats.load(Ordering::Relaxed),
    )
}

/// Median of `v`, which is left sorted.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// 7 rounds of 2 threads, each followed by a hash-only full scan of the
/// workspace at `root`; prints the scan's median and the median ratio.
fn scan_against_floor(root: &Path, dirs: &[Dir]) -> ckpt_lib::Result<()> {
    use ckpt_lib::engine::scanner::{scan_against, ScanKind};
    let ws = ckpt_lib::workspace::Workspace::discover(root)?;
    let config = ckpt_lib::Config::locking(std::time::Duration::from_secs(10));
    let store = ws.open_store_read_only(&config)?;
    let mut index = store.load_index()?;
    let (mut scans, mut ratios) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        let (floor, _) = round(dirs, 2);
        let start = Instant::now();
        let scan = scan_against(&ws, &store, index, ScanKind::HashOnly, None)?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        index = scan.index;
        scans.push(ms);
        ratios.push(ms / floor);
    }
    println!(
        "scan (in process, hash-only, full, 2 threads): {:.1} ms median, {:.3}x the round before it (median of 7)",
        median(&mut scans),
        median(&mut ratios)
    );
    Ok(())
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let Some(root) = args.next() else {
        eprintln!("usage: stat_floor DIR [--scan] [THREADS...]");
        std::process::exit(2);
    };
    let scan = args.next_if(|a| a == "--scan").is_some();
    let threads: Vec<usize> = match args.map(|a| a.parse()).collect::<Result<Vec<_>, _>>() {
        Ok(t) if !t.is_empty() => t,
        Ok(_) => vec![1, 2],
        Err(e) => {
            eprintln!("stat_floor: bad thread count: {e}");
            std::process::exit(2);
        }
    };
    let mut dirs = Vec::new();
    if let Err(e) = list(Path::new(&root), &mut dirs) {
        eprintln!("stat_floor: cannot list {root}: {e}");
        std::process::exit(1);
    }
    // Warms the dentry and inode caches; on a fresh btrfs snapshot this
    // round is the floor of a first scan (every inode read from disk
    // structures once).
    let (first, n) = round(&dirs, 2);
    println!("first round (2 threads, caches as found): {n} lstats in {first:.1} ms");
    for t in threads {
        let mut ms: Vec<f64> = Vec::new();
        let mut n = 0;
        for _ in 0..7 {
            let (m, s) = round(&dirs, t);
            ms.push(m);
            n = s;
        }
        let median = median(&mut ms);
        println!(
            "{t} thread(s): {n} lstats in {median:.1} ms median ({:.1}–{:.1}) over {} directories",
            ms[0],
            ms[6],
            dirs.len()
        );
    }
    if scan {
        if let Err(e) = scan_against_floor(Path::new(&root), &dirs) {
            eprintln!("stat_floor: cannot scan {root}: {e}");
            std::process::exit(1);
        }
    }
}
