//! The kernel floor of a reflink fork (bench/fork.sh): for every regular
//! file below SRC, create the same path below DST (a new directory) and
//! `FICLONE` the file into it, nothing else (no hashing, no modes, no
//! mtimes unless `--times`, no store). The tree is listed before the clock starts;
//! directories are created first, then files are cloned in parallel on
//! every core (rayon), as the fork does.
//!
//! With `--own-store OBJECTS` (a store's `objects/` directory) it also
//! times the kernel work a fork whose store holds its own names for the
//! checkpoint's objects cannot skip: while the files are cloned, one
//! thread (as the fork's store import) hard-links every object below
//! OBJECTS into `DST.objects/` (same shard layout), and at the end one
//! `syncfs` makes the files and links durable, as the fork does before it
//! is published. Every object of the store is linked, which is what a fork
//! of a store holding one checkpoint links.
//!
//! With `--times` each cloned file also gets its source's mtime
//! (`futimens` through the descriptor already open), and each directory
//! its own once every file is cloned (`utimensat`): what a fork must add
//! for its files to be exact (a restore compares mtimes, and a fork's
//! first save trusts them). The mtimes are read before the clock starts.
//!
//! Usage: cargo run --release -p ckpt-fs --example clone_floor SRC DST [--own-store OBJECTS] [--times]
//! Prints: `files N dirs M clone_ms T` (with `--own-store`, then
//! `objects K own_store_ms U`: the whole timed work, links and `syncfs`
//! included).

use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps, CWD};

/// A path below the root, and its mtime.
type Listed = (PathBuf, Timespec);

fn list(root: &Path, rel: &Path, dirs: &mut Vec<Listed>, files: &mut Vec<Listed>) {
    for e in std::fs::read_dir(root.join(rel)).expect("list") {
        let e = e.expect("entry");
        // (`DirEntry::metadata` does not follow a symlink.)
        let m = e.metadata().expect("lstat");
        let t = m.file_type();
        let r = rel.join(e.file_name());
        let mtime = Timespec {
            tv_sec: m.mtime(),
            tv_nsec: m.mtime_nsec() as _,
        };
        if t.is_dir() {
            dirs.push((r.clone(), mtime));
            list(root, &r, dirs, files);
        } else if t.is_file() {
            files.push((r, mtime));
        }
    }
}

fn times(mtime: Timespec) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        last_modification: mtime,
    }
}

fn clone_all(src: &Path, dst: &Path, dirs: &[Listed], files: &[Listed], set_times: bool) {
    std::fs::create_dir(dst).expect("create DST");
    for (d, _) in dirs {
        std::fs::create_dir(dst.join(d)).expect("mkdir");
    }
    files.par_iter().for_each(|(f, mtime)| {
        let s = rustix::fs::open(src.join(f), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .expect("open source");
        let d = rustix::fs::open(
            dst.join(f),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .expect("create");
        rustix::fs::ioctl_ficlone(d.as_fd(), s.as_fd()).expect("FICLONE");
        if set_times {
            rustix::fs::futimens(&d, &times(*mtime)).expect("futimens");
        }
    });
    if set_times {
        // Deepest first, as a fork sets a directory's once its subtree is written.
        for (d, mtime) in dirs.iter().rev() {
            rustix::fs::utimensat(CWD, dst.join(d), &times(*mtime), AtFlags::SYMLINK_NOFOLLOW)
                .expect("utimensat");
        }
    }
}

/// Hard-links every object (`shard/name`) of `objects` into `to`, one
/// after the other.
fn link_all(objects: &Path, to: &Path, shards: &[Listed], names: &[Listed]) {
    std::fs::create_dir(to).expect("create the objects directory");
    for (s, _) in shards {
        std::fs::create_dir(to.join(s)).expect("mkdir shard");
    }
    let (from, into) = (
        rustix::fs::open(objects, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).expect("open"),
        rustix::fs::open(to, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).expect("open"),
    );
    for (n, _) in names {
        rustix::fs::linkat(&from, n, &into, n, AtFlags::empty()).expect("link");
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let set_times = args.iter().any(|a| a == "--times");
    args.retain(|a| a != "--times");
    let (src, dst, objects) = match args.as_slice() {
        [src, dst] => (src, dst, None),
        [src, dst, flag, objects] if flag == "--own-store" => (src, dst, Some(objects)),
        _ => {
            eprintln!("usage: clone_floor SRC DST [--own-store OBJECTS] [--times]");
            std::process::exit(2);
        }
    };
    let (src, dst) = (Path::new(src), Path::new(dst));
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    list(src, Path::new(""), &mut dirs, &mut files);
    let Some(objects) = objects.map(Path::new) else {
        let t0 = Instant::now();
        clone_all(src, dst, &dirs, &files, set_times);
        println!(
            "files {} dirs {} clone_ms {:.1}",
            files.len(),
            dirs.len(),
            t0.elapsed().as_secs_f64() * 1e3
        );
        return;
    };
    let (mut shards, mut names) = (Vec::new(), Vec::new());
    list(objects, Path::new(""), &mut shards, &mut names);
    let mut to = dst.as_os_str().to_owned();
    to.push(".objects");
    let to = PathBuf::from(to);
    let t0 = Instant::now();
    // The links on a thread of their own, beside the pool that clones.
    let clone_ms = std::thread::scope(|s| {
        s.spawn(|| link_all(objects, &to, &shards, &names));
        clone_all(src, dst, &dirs, &files, set_times);
        t0.elapsed().as_secs_f64() * 1e3
    });
    let d = rustix::fs::open(
        dst,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .expect("open");
    rustix::fs::syncfs(&d).expect("syncfs");
    println!(
        "files {} dirs {} clone_ms {:.1} objects {} own_store_ms {:.1}",
        files.len(),
        dirs.len(),
        clone_ms,
        names.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
}
