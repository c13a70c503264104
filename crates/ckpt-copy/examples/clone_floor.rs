//! The kernel floor of a reflink fork (bench/fork.sh): for every regular
//! file below SRC, create the same path below DST (a new directory) and
//! `FICLONE` the file into it, nothing else (no hashing, no modes or
//! mtimes, no store). The tree is listed before the clock starts;
//! directories are created first, then files are cloned in parallel on
//! every core (rayon), as the fork does.
//!
//! Usage: cargo run --release -p ckpt-copy --example clone_floor SRC DST
//! Prints: `files N dirs M clone_ms T`.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use rustix::fs::{Mode, OFlags};

fn list(root: &Path, rel: &Path, dirs: &mut Vec<PathBuf>, files: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(root.join(rel)).expect("list") {
        let e = e.expect("entry");
        let t = e.file_type().expect("type");
        let r = rel.join(e.file_name());
        if t.is_dir() {
            dirs.push(r.clone());
            list(root, &r, dirs, files);
        } else if t.is_file() {
            files.push(r);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, src, dst] = args.as_slice() else {
        eprintln!("usage: clone_floor SRC DST");
        std::process::exit(2);
    };
    let (src, dst) = (Path::new(src), Path::new(dst));
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    list(src, Path::new(""), &mut dirs, &mut files);
    let t0 = Instant::now();
    std::fs::create_dir(dst).expect("create DST");
    for d in &dirs {
        std::fs::create_dir(dst.join(d)).expect("mkdir");
    }
    files.par_iter().for_each(|f| {
        let s = rustix::fs::open(src.join(f), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .expect("open source");
        let d = rustix::fs::open(
            dst.join(f),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .expect("create");
        rustix::fs::ioctl_ficlone(d.as_fd(), s.as_fd()).expect("FICLONE");
    });
    println!(
        "files {} dirs {} clone_ms {:.1}",
        files.len(),
        dirs.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
}
