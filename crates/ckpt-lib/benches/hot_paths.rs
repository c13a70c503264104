//! Criterion benches for the hot paths of save and restore on a synthetic
//! tree (2,000 files in 100 directories): the scan with a warm index (the
//! cost of a save when nothing changed), index encode/decode, tree
//! encode/decode, and capturing small files into the object store.
//!
//! Run: `cargo bench -p ckpt-lib --bench hot_paths`

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use ckpt_lib::engine::save::{self, SaveJob};
use ckpt_lib::engine::scanner::{self, Scanner};
use ckpt_lib::store::index::Index;
use ckpt_lib::store::tree::{Entry, Node, Tree};
use ckpt_lib::workspace::Workspace;
use ckpt_lib::Config;
use ckpt_lib::Hash;
use criterion::{criterion_group, criterion_main, Criterion};

fn make_tree(root: &Path, dirs: usize, files: usize) {
    for d in 0..dirs {
        let dir = root.join(format!("pkg{d}/lib"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..files {
            std::fs::write(
                dir.join(format!("f{f}.js")),
                format!("module.exports = {d} * {f};\n").repeat(20),
            )
            .unwrap();
        }
    }
}

/// Every directory below `root` (open) with its names.
fn walk_names(root: &Path) -> Vec<(std::os::fd::OwnedFd, Vec<Vec<u8>>)> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        let mut names = Vec::new();
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            }
            names.push(e.file_name().as_bytes().to_vec());
        }
        out.push((ckpt_fs::fs::open_dir_path(&d).unwrap(), names));
    }
    out
}

fn bench_scan(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    make_tree(&root, 100, 20);
    let ws = Workspace::init(&root, Some(&tmp.path().join("store")), None).unwrap();
    {
        let store = ws
            .open_store(&Config::locking(Duration::from_secs(5)))
            .unwrap();
        save::save(&ws, &store, &SaveJob::default()).unwrap();
        // A second save clears the racy marks of the first.
        std::thread::sleep(Duration::from_millis(100));
        save::save(
            &ws,
            &store,
            &SaveJob {
                allow_empty: true,
                journal: None,
                ..Default::default()
            },
        )
        .unwrap();
    }
    let store = ws
        .open_store(&Config::locking(Duration::from_secs(5)))
        .unwrap();
    let mut g = c.benchmark_group("scan");
    g.sample_size(30);
    g.bench_function("unchanged_2000_files", |b| {
        b.iter(|| {
            black_box(
                scanner::OnDisk::default()
                    .scan(&ws, &store, scanner::ScanKind::HashOnly)
                    .unwrap()
                    .root,
            )
        })
    });
    // The floor under that scan: `lstat` of every entry, names known, each
    // directory's entries on one rayon task (what a scan of unchanged,
    // unlisted directories cannot go below).
    let dirs: Vec<(std::os::fd::OwnedFd, Vec<Vec<u8>>)> = walk_names(&root);
    g.bench_function("lstat_floor_2000_files", |b| {
        use rayon::prelude::*;
        use std::os::fd::AsFd;
        b.iter(|| {
            let n: u64 = dirs
                .par_iter()
                .map(|(fd, names)| {
                    names
                        .iter()
                        .map(|n| ckpt_fs::fs::stat_at(fd.as_fd(), n).unwrap().size)
                        .sum::<u64>()
                })
                .sum();
            black_box(n)
        })
    });
    let index = store.load_index().unwrap();
    let bytes = index.encode();
    g.bench_function("index_encode_2000", |b| {
        b.iter(|| black_box(index.encode().len()))
    });
    let path = tmp.path().join("index-copy");
    std::fs::write(&path, &bytes).unwrap();
    g.bench_function("index_load_2000", |b| {
        b.iter(|| black_box(Index::load(&path, index.generation).dirs.len()))
    });
    g.finish();
}

fn bench_tree(c: &mut Criterion) {
    let tree = Tree {
        entries: (0..200)
            .map(|i| Entry {
                name: format!("file-{i:04}.js").into_bytes(),
                mode: 0o644,
                mtime_ns: 1_700_000_000_000_000_000 + i,
                node: Node::File {
                    size: 1000 + i as u64,
                    hash: Hash::of(&i.to_le_bytes()),
                },
            })
            .collect(),
    };
    let bytes = tree.encode();
    let mut g = c.benchmark_group("tree");
    g.bench_function("encode_and_hash_200", |b| {
        b.iter(|| black_box(tree.encode_and_hash().0))
    });
    g.bench_function("decode_200", |b| {
        b.iter(|| black_box(Tree::decode(&bytes).unwrap().entries.len()))
    });
    g.finish();
}

fn bench_capture(c: &mut Criterion) {
    let mut g = c.benchmark_group("capture");
    g.sample_size(10);
    g.bench_function("first_save_2000_small_files", |b| {
        b.iter_with_setup(
            || {
                let tmp = tempfile::tempdir().unwrap();
                let root = tmp.path().join("ws");
                make_tree(&root, 100, 20);
                let ws = Workspace::init(&root, Some(&tmp.path().join("store")), None).unwrap();
                (tmp, ws)
            },
            |(tmp, ws)| {
                let store = ws
                    .open_store(&Config::locking(Duration::from_secs(5)))
                    .unwrap();
                save::save(&ws, &store, &SaveJob::default()).unwrap();
                drop(store);
                drop(tmp);
            },
        )
    });
    g.finish();
}

criterion_group!(benches, bench_scan, bench_tree, bench_capture);
criterion_main!(benches);
