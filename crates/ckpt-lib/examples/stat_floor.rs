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
//! Run: `cargo run --release -p ckpt-lib --example stat_floor -- DIR [THREADS...]`

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

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(root) = args.next() else {
        eprintln!("usage: stat_floor DIR [THREADS...]");
        std::process::exit(2);
    };
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
        ms.sort_by(f64::total_cmp);
        println!(
            "{t} thread(s): {n} lstats in {:.1} ms median ({:.1}–{:.1}) over {} directories",
            ms[3],
            ms[0],
            ms[6],
            dirs.len()
        );
    }
}
