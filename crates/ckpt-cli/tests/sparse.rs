//! Sparse files stay sparse: a file with holes (`truncate -s 2G`, a VM
//! image, a database with free pages) comes back from `restore` (in place),
//! `restore --to` and `fork` with the same bytes and without its holes
//! filled in, whether the store keeps it as one plain object or as 8 MiB
//! bands (`ckpt_lib::store::bands`; banded when the store cannot reflink and
//! the file is at least the band threshold).
//!
//! "Without its holes filled in" is checked with `st_blocks`: the restored
//! file may allocate its data blocks (each data extent rounded out to whole
//! 4 KiB blocks) plus a little filesystem metadata, never the holes.

mod common;

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::*;

/// Room for the filesystem's own blocks (extent tree, indirect blocks).
const SLACK: u64 = 64 << 10;

/// A sparse file: its length and its data extents (offset, bytes).
struct Sparse {
    len: u64,
    extents: Vec<(u64, Vec<u8>)>,
}

impl Sparse {
    fn random(rng: &mut Rng, len: u64) -> Sparse {
        let n = 1 + rng.below(5) as usize;
        let mut extents: Vec<(u64, Vec<u8>)> = (0..n)
            .map(|_| {
                let size = 1 + rng.below(200 << 10) as usize;
                let at = rng.below(len - size as u64);
                (at, rng.bytes(size))
            })
            .collect();
        // One extent that crosses a band boundary (8 MiB).
        extents.push(((8 << 20) - 1000, rng.bytes(3000)));
        Sparse { len, extents }
    }

    fn write(&self, path: &Path) {
        let f = std::fs::File::create(path).unwrap();
        f.set_len(self.len).unwrap();
        for (at, data) in &self.extents {
            f.write_all_at(data, *at).unwrap();
        }
    }

    /// The most a faithful copy may allocate: every extent rounded out to
    /// whole blocks, plus [`SLACK`].
    fn allowed_bytes(&self) -> u64 {
        let blocks: u64 = self
            .extents
            .iter()
            .map(|(at, d)| (at + d.len() as u64).div_ceil(4096) - at / 4096)
            .sum();
        blocks * 4096 + SLACK
    }
}

fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// Runs ckpt with `CKPT_BAND_MIN` set (banded) or unset (plain objects).
fn run(ws: &Ws, band_min: Option<&str>, args: &[&str]) -> Run {
    let os: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    let mut c = command(&ws.root, &os);
    if let Some(b) = band_min {
        c.env("CKPT_BAND_MIN", b);
    }
    run_command(
        c,
        format!("ckpt {} (CKPT_BAND_MIN={band_min:?})", args.join(" ")),
    )
}

/// Whether the test directory's filesystem keeps holes at all (tmpfs and
/// ext4 do); if not, there is nothing to check.
fn holes_supported(dir: &Path) -> bool {
    let p = dir.join("probe-sparse");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(16 << 20).unwrap();
    let sparse = allocated(&p) < 1 << 20;
    std::fs::remove_file(&p).unwrap();
    sparse
}

/// Saves `files`, then checks that every way back keeps their holes and
/// their bytes.
fn check_round_trips(ws: &Ws, band_min: Option<&str>, files: &[(&str, Sparse)]) {
    for (name, s) in files {
        s.write(&ws.root.join(name));
    }
    run(ws, band_min, &["save", "-m", "sparse"]).ok();
    let want: Vec<Vec<u8>> = files
        .iter()
        .map(|(name, _)| std::fs::read(ws.root.join(name)).unwrap())
        .collect();
    let check = |dir: &Path, how: &str| {
        for ((name, s), want) in files.iter().zip(&want) {
            let p = dir.join(name);
            let got = std::fs::read(&p).unwrap();
            assert!(got == *want, "{how}: {name} differs from what was saved");
            let (used, allowed) = (allocated(&p), s.allowed_bytes());
            assert!(
                used <= allowed,
                "{how} (CKPT_BAND_MIN={band_min:?}): {name} ({} bytes long, {} extents) \
                 allocates {used} bytes, more than its data needs ({allowed}): holes were filled",
                s.len,
                s.extents.len()
            );
        }
    };
    for (name, _) in files {
        std::fs::remove_file(ws.root.join(name)).unwrap();
    }
    run(ws, band_min, &["restore", "--no-save", "HEAD"]).ok();
    check(&ws.root, "restore in place");
    let to = ws.fresh_dir();
    run(
        ws,
        band_min,
        &["restore", "HEAD", "--to", to.to_str().unwrap()],
    )
    .ok();
    check(&to, "restore --to");
    let fork = ws.fresh_dir();
    let fork_store = ws.tmp.path().join("fork-store");
    let args = [
        "fork",
        "HEAD",
        fork.to_str().unwrap(),
        "--store",
        fork_store.to_str().unwrap(),
    ];
    run(ws, band_min, &args).ok();
    check(&fork, "fork");
    run(ws, band_min, &["verify"]).ok();
}

#[test]
fn random_sparse_files_keep_their_holes_plain_and_banded() {
    for (mode, band_min) in [("plain", None), ("banded", Some("1"))] {
        let ws = Ws::new();
        if !holes_supported(ws.tmp.path()) {
            skip_env("the test directory's filesystem does not keep holes");
            return;
        }
        ws.init();
        let mut rng = Rng::new(&format!("sparse_{mode}"), 0x5a75e);
        let b_len = (20 << 20) + rng.below(1 << 20);
        let files = [
            ("a.img", Sparse::random(&mut rng, 40 << 20)),
            ("b.img", Sparse::random(&mut rng, b_len)),
        ];
        check_round_trips(&ws, band_min, &files);
    }
}

/// The case from the report: `truncate -s 2G` (no data at all) was stored
/// compactly but restored as 2 GiB of real blocks.
#[test]
fn a_truncated_2g_file_restores_without_data_blocks() {
    let ws = Ws::new();
    if !holes_supported(ws.tmp.path()) {
        skip_env("the test directory's filesystem does not keep holes");
        return;
    }
    ws.init();
    let empty = Sparse {
        len: 2 << 30,
        extents: Vec::new(),
    };
    check_round_trips(&ws, None, &[("disk.img", empty)]);
    // The store keeps no 8 MiB band of zeros either.
    let store_bytes: u64 = walk_files(&ws.store).iter().map(|p| allocated(p)).sum();
    assert!(
        store_bytes < 8 << 20,
        "the store allocates {store_bytes} bytes for a file with no data"
    );
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(walk_files(&e.path()));
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    out
}
