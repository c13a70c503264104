//! The floor under a btrfs-subvolume fork: the kernel work every such fork
//! does and nothing else. One round, timed as a whole:
//!
//! 1. snapshot the workspace subvolume WS into a hidden directory beside
//!    DEST and, at the same time (on another thread), the store subvolume
//!    STORE into another (in different directories, so that neither
//!    waits for the other's): their transaction commits share or overlap,
//!    as a fork's do;
//! 2. rewrite the workspace snapshot's `.ckpt` marker in place, as a fork
//!    makes it its own (`Workspace::write_marker_in_place`);
//! 3. `rename` the snapshot to DEST and `fsync` DEST's parent, which makes
//!    the rename durable (on btrfs, a full transaction commit, since the
//!    renamed inode is a subvolume).
//!
//! A fork does all of that plus its own work: a catalog transaction in its
//! store, the stat index's device map, asking the watcher, process start.
//!
//! With `--own-store`, each fork also makes its store snapshot its own, as
//! every fork must (whatever the catalog transaction holds): it removes
//! the watcher's files from it and rewrites one 4 KiB page of its
//! `catalog.redb` in place (the same bytes) with one `fdatasync`. The first
//! write into a fresh snapshot copies the tree blocks it shares with its
//! source, and the publishing commit writes them: this is the floor of a
//! fork whose store is a snapshot, beside the bare one.
//! With N > 1, N such forks run at once, into DEST-1 … DEST-N (the floor
//! under `fork --count N`, which also makes and removes a template).
//! Each round's subvolumes are deleted after it, and the cleaner waited
//! for, untimed. Prints every round, then the median.
//!
//! Run (as root, WS and STORE subvolumes on one btrfs, DEST's parent on it):
//! `cargo run --release -p ckpt-lib --example subvol_floor -- WS STORE DEST [ROUNDS [N]] [--own-store]`

use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ckpt_lib::platform::btrfs;

fn open_dir(p: &Path) -> std::fs::File {
    std::fs::File::open(p).unwrap_or_else(|e| panic!("open {}: {e}", p.display()))
}

fn snap(src: &Path, at: &Path) {
    let (parent, name) = (
        at.parent().expect("a parent"),
        at.file_name().expect("a name"),
    );
    btrfs::snapshot(
        open_dir(src).as_fd(),
        open_dir(parent).as_fd(),
        name.as_bytes(),
    )
    .unwrap_or_else(|e| panic!("snapshot {} at {}: {e}", src.display(), at.display()));
}

fn delete(at: &Path) {
    let (parent, name) = (
        at.parent().expect("a parent"),
        at.file_name().expect("a name"),
    );
    let _ = btrfs::delete_subvolume(open_dir(parent).as_fd(), name.as_bytes());
}

/// DEST's sibling `prefix` + DEST's name + `suffix`.
fn beside(dest: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let mut n = std::ffi::OsString::from(prefix);
    n.push(dest.file_name().expect("DEST has a name"));
    n.push(suffix);
    dest.with_file_name(n)
}

/// `--own-store`: what every fork does to its store snapshot at least.
fn make_own(store: &Path) {
    use std::os::unix::fs::FileExt;
    for f in ckpt_lib::store::WATCH_FILES {
        let _ = std::fs::remove_file(store.join(f));
    }
    let catalog = store.join("catalog.redb");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&catalog)
        .unwrap_or_else(|e| panic!("open {}: {e}", catalog.display()));
    let mut page = [0u8; 4096];
    f.read_exact_at(&mut page, 4096).expect("read a page");
    f.write_all_at(&page, 4096).expect("write it back");
    f.sync_data().expect("fdatasync");
}

/// One fork's kernel work into `dest`. Each snapshot is made in a
/// directory of its own, as `fork --count`'s copies do: btrfs holds a
/// directory's lock while it commits a snapshot made in it.
fn one(ws: &Path, store: &Path, dest: &Path, own_store: bool) {
    let (tree_dir, store_dir) = (
        beside(dest, ".", ".floor"),
        beside(dest, ".", ".floor-store"),
    );
    for d in [&tree_dir, &store_dir] {
        std::fs::create_dir(d).expect("create a staging directory");
    }
    let (staging, store_at) = (tree_dir.join("tree"), store_dir.join("store"));
    std::thread::scope(|s| {
        s.spawn(|| snap(store, &store_at));
        snap(ws, &staging);
    });
    if own_store {
        make_own(&store_at);
    }
    std::fs::write(staging.join(ckpt_lib::workspace::MARKER_NAME), b"{}\n")
        .expect("write the marker");
    std::fs::rename(&staging, dest).expect("rename");
    open_dir(dest.parent().expect("DEST has a parent"))
        .sync_all()
        .expect("fsync the parent");
}

/// `n` forks at once (DEST-1 … DEST-n when `n` > 1).
fn round(ws: &Path, store: &Path, dest: &Path, n: usize, own_store: bool) -> Duration {
    let parent = dest.parent().expect("DEST has a parent");
    let dests: Vec<PathBuf> = if n == 1 {
        vec![dest.to_path_buf()]
    } else {
        (1..=n)
            .map(|k| beside(dest, "", &format!("-{k}")))
            .collect()
    };
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for d in &dests {
            s.spawn(|| one(ws, store, d, own_store));
        }
    });
    let took = t0.elapsed();
    for d in &dests {
        delete(d);
        let store_dir = beside(d, ".", ".floor-store");
        delete(&store_dir.join("store"));
        for dir in [store_dir, beside(d, ".", ".floor")] {
            let _ = std::fs::remove_dir(dir);
        }
    }
    let _ = std::process::Command::new("btrfs")
        .args(["subvolume", "sync"])
        .arg(parent)
        .output();
    rustix::fs::sync();
    std::thread::sleep(Duration::from_millis(500));
    took
}

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let own_store = args.iter().any(|a| a == "--own-store");
    args.retain(|a| a != "--own-store");
    if args.len() < 4 {
        eprintln!("usage: subvol_floor WS STORE DEST [ROUNDS [N]] [--own-store]");
        std::process::exit(2);
    }
    let (ws, store, dest) = (
        Path::new(&args[1]),
        Path::new(&args[2]),
        Path::new(&args[3]),
    );
    let rounds: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(5);
    let n: usize = args.get(5).and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    let mut ms: Vec<f64> = (0..rounds)
        .map(|_| round(ws, store, dest, n, own_store).as_secs_f64() * 1e3)
        .collect();
    for m in &ms {
        println!("round {m:.2} ms");
    }
    ms.sort_by(f64::total_cmp);
    println!("median {:.2} ms", ms[ms.len() / 2]);
}
