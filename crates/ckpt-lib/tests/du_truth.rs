//! `ckpt du` tells the truth about what gc will do (issue 60): its "gc
//! would free" is the on-disk bytes `gc` then frees, and each checkpoint's
//! "unique" is what deleting that checkpoint alone and then running gc
//! frees on top of that — for stores holding banded files (the band
//! threshold is lowered through [`Config::band_min`]), sparse files,
//! duplicate contents, forks and adopted checkpoints.
//!
//! The oracle is the real thing: each claim is checked by doing it on a
//! copy of the store and summing the allocated blocks of the files that
//! left `objects/`. Retention's dry run is held to the same standard: it
//! reports what the real run then frees.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ckpt_lib::engine::save::SaveOutcome;
use ckpt_lib::ops::save::SaveOptions;
use ckpt_lib::ops::{self, Context};
use ckpt_lib::store::retention::{self, Policy};
use ckpt_lib::store::{gc, usage, Store};
use ckpt_lib::workspace::Workspace;
use ckpt_lib::{Config, Hash};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;
/// The band size (fixed by the format).
const BAND: u64 = 8 * MIB;
/// Files at least this large are banded in these tests.
const BAND_MIN: u64 = MIB;

fn config() -> Config {
    Config {
        band_min: Some(BAND_MIN),
        ..Config::locking(Duration::from_secs(30))
    }
}

/// Sum of the allocated bytes of every file below `dir`, by path.
fn files_on_disk(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), m.blocks() * 512);
            }
        }
    }
    out
}

/// On-disk bytes of the files that were in `before` and are gone from
/// `dir` now.
fn freed_since(before: &BTreeMap<PathBuf, u64>, dir: &Path) -> u64 {
    let after = files_on_disk(dir);
    before
        .iter()
        .filter(|(p, _)| !after.contains_key(*p))
        .map(|(_, b)| b)
        .sum()
}

/// A copy of a store (holes kept), in `scratch`.
fn copy_store(store: &Path, scratch: &Path, name: &str) -> PathBuf {
    let to = scratch.join(name);
    if to.exists() {
        std::fs::remove_dir_all(&to).unwrap();
    }
    let st = std::process::Command::new("cp")
        .args(["-a", "--sparse=auto"])
        .arg(store)
        .arg(&to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", store.display(), to.display());
    to
}

/// Checks the claims of `du` on copies of the store at `store`:
/// - "gc would free" (bytes and objects) is what gc's dry run reports and
///   exactly what gc frees, and afterwards nothing is unreferenced;
/// - for each checkpoint, "unique" is what deleting it alone, then gc,
///   frees (the first gc having run).
fn check_store(store: &Path, scratch: &Path, what: &str) -> Result<(), TestCaseError> {
    let cfg = config();
    let copy = copy_store(store, scratch, "whole");
    let s = Store::open(&copy, &cfg).unwrap();
    let u = usage::usage(&s).unwrap();
    let dry = gc::gc(&s, true).unwrap();
    let before = files_on_disk(&copy.join("objects"));
    let g = gc::gc(&s, false).unwrap();
    let freed = freed_since(&before, &copy.join("objects"));
    prop_assert_eq!(u.unreferenced_bytes, freed, "{}: du's gc would free", what);
    prop_assert_eq!(dry.bytes_freed, freed, "{}: gc --dry-run", what);
    prop_assert_eq!(g.bytes_freed, freed, "{}: gc's report", what);
    prop_assert_eq!(u.unreferenced_objects, g.objects_removed, "{}", what);
    let u = usage::usage(&s).unwrap();
    prop_assert_eq!(u.unreferenced_bytes, 0, "{}: du after gc", what);
    prop_assert_eq!(
        u.object_bytes,
        files_on_disk(&copy.join("objects")).values().sum::<u64>(),
        "{}: object bytes",
        what
    );
    let cps = s.catalog.reader().unwrap().checkpoints().unwrap();
    drop(s);
    for cp in &cps {
        let one = copy_store(&copy, scratch, "one");
        let s = Store::open(&one, &cfg).unwrap();
        let unique = usage::usage(&s)
            .unwrap()
            .checkpoints
            .iter()
            .find(|c| c.seq == cp.seq)
            .unwrap()
            .unique_bytes;
        let before = files_on_disk(&one.join("objects"));
        s.catalog.delete_checkpoint(cp).unwrap();
        gc::gc(&s, false).unwrap();
        let freed = freed_since(&before, &one.join("objects"));
        prop_assert_eq!(unique, freed, "{}: unique to v{}", what, cp.seq);
    }
    Ok(())
}

/// A file of `bands` bands (the last one `tail` bytes longer than a
/// multiple of the band size would be cut at), zeros but for a 4 KiB mark
/// at the start of band i when bit i of `marks` is set, whose bytes depend
/// on `seed` and i: different seeds share the bands whose marks agree, and
/// unmarked bands are holes.
fn write_banded(path: &Path, bands: u64, marks: u8, seed: u8, tail: u64) {
    let _ = std::fs::remove_file(path);
    let f = std::fs::File::create(path).unwrap();
    let size = (bands - 1) * BAND + tail;
    f.set_len(size).unwrap();
    for i in 0..bands {
        if marks & (1 << i) != 0 {
            let off = i * BAND;
            let len = 4096.min(size - off) as usize;
            let byte = seed.wrapping_mul(31).wrapping_add(i as u8) | 1;
            f.write_all_at(&vec![byte; len], off).unwrap();
        }
    }
}

fn save(ctx: &Context) -> Option<u64> {
    match ops::save::save(ctx, &SaveOptions::default())
        .unwrap()
        .outcome
    {
        SaveOutcome::Saved(cp) => Some(cp.seq),
        SaveOutcome::Unchanged(_) => None,
    }
}

fn seqs(ctx: &Context) -> Vec<u64> {
    let ws = ctx.workspace().unwrap();
    let s = ws.open_store(&config()).unwrap();
    let v = s.catalog.reader().unwrap().checkpoints().unwrap();
    v.iter().map(|c| c.seq).collect()
}

const NAMES: [&str; 5] = ["s0", "s1", "dir/s2", "b0", "dir/b1"];

#[derive(Clone, Debug)]
enum Op {
    /// A small file (contents from a small set, so they repeat).
    Small {
        file: usize,
        content: u8,
    },
    /// A banded file (1..=3 bands; some bands holes).
    Banded {
        file: usize,
        bands: u64,
        marks: u8,
        seed: u8,
    },
    /// A sparse file below the band threshold.
    Sparse {
        file: usize,
        seed: u8,
    },
    /// One file's content under another name.
    Dup {
        from: usize,
        to: usize,
    },
    Remove {
        file: usize,
    },
    Save,
    Delete {
        nth: usize,
    },
    Gc,
    KeepLast {
        n: usize,
    },
    /// Keeps what is younger than the nth checkpoint (and the head).
    KeepWithin {
        nth: usize,
    },
    /// Forks the nth checkpoint (at most two forks).
    Fork {
        nth: usize,
    },
    /// Edits the last fork and saves there.
    ForkSave {
        file: usize,
        seed: u8,
    },
    /// Adopts the last fork's head.
    Adopt,
}

fn arb_op() -> impl Strategy<Value = Op> {
    let file = 0..NAMES.len();
    prop_oneof![
        3 => (file.clone(), 0u8..4).prop_map(|(file, content)| Op::Small { file, content }),
        3 => (file.clone(), 1u64..=3, 0u8..8, 0u8..3)
            .prop_map(|(file, bands, marks, seed)| Op::Banded { file, bands, marks, seed }),
        1 => (file.clone(), 0u8..2).prop_map(|(file, seed)| Op::Sparse { file, seed }),
        1 => (file.clone(), file.clone()).prop_map(|(from, to)| Op::Dup { from, to }),
        1 => file.clone().prop_map(|file| Op::Remove { file }),
        5 => Just(Op::Save),
        2 => (0usize..8).prop_map(|nth| Op::Delete { nth }),
        1 => Just(Op::Gc),
        1 => (1usize..4).prop_map(|n| Op::KeepLast { n }),
        1 => (0usize..8).prop_map(|nth| Op::KeepWithin { nth }),
        1 => (0usize..8).prop_map(|nth| Op::Fork { nth }),
        1 => (file, 0u8..3).prop_map(|(file, seed)| Op::ForkSave { file, seed }),
        1 => Just(Op::Adopt),
    ]
}

struct World {
    tmp: tempfile::TempDir,
    ctx: Context,
    store: PathBuf,
    /// (workspace root, store) of each fork.
    forks: Vec<(PathBuf, PathBuf)>,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let store = tmp.path().join("store");
        std::fs::create_dir_all(root.join("dir")).unwrap();
        Workspace::init(&root, Some(&store), None).unwrap();
        std::fs::create_dir_all(tmp.path().join("scratch")).unwrap();
        World {
            ctx: Context::new(root, config()),
            tmp,
            store,
            forks: Vec::new(),
        }
    }

    fn scratch(&self) -> PathBuf {
        self.tmp.path().join("scratch")
    }

    fn write(root: &Path, op: &Op) {
        let p = |i: usize| root.join(NAMES[i]);
        match *op {
            Op::Small { file, content } => {
                let body = format!("content {content} ").repeat(50 * (content as usize + 1));
                std::fs::write(p(file), body).unwrap();
            }
            Op::Banded {
                file,
                bands,
                marks,
                seed,
            } => write_banded(&p(file), bands, marks, seed, BAND / 2 + seed as u64),
            Op::Sparse { file, seed } => {
                // 512 KiB: data, a hole, data.
                let _ = std::fs::remove_file(p(file));
                let f = std::fs::File::create(p(file)).unwrap();
                f.set_len(512 * 1024).unwrap();
                f.write_all_at(&[seed + 1; 4096], 0).unwrap();
                f.write_all_at(&[seed + 7; 4096], 500 * 1024).unwrap();
            }
            Op::Dup { from, to } => {
                if from != to && p(from).exists() {
                    std::fs::copy(p(from), p(to)).unwrap();
                }
            }
            Op::Remove { file } => {
                let _ = std::fs::remove_file(p(file));
            }
            _ => unreachable!(),
        }
    }

    fn apply(&mut self, op: &Op) {
        let cps = seqs(&self.ctx);
        let nth = |n: usize| cps[n % cps.len()];
        match *op {
            Op::Small { .. }
            | Op::Banded { .. }
            | Op::Sparse { .. }
            | Op::Dup { .. }
            | Op::Remove { .. } => World::write(&self.ctx.cwd, op),
            Op::Save => {
                save(&self.ctx);
            }
            Op::Delete { nth: n } if !cps.is_empty() => {
                let rev = format!("v{}", nth(n));
                ops::delete::delete(&self.ctx, &ops::delete::DeleteOptions { rev }).unwrap();
            }
            Op::Gc => {
                ops::gc::gc(&self.ctx, &ops::gc::GcOptions::default()).unwrap();
            }
            Op::KeepLast { n } => {
                let keep = Policy {
                    keep_last: Some(n),
                    ..Default::default()
                };
                self.retain(&keep, i64::MAX / 2);
            }
            Op::KeepWithin { nth: n } if !cps.is_empty() => {
                // Younger than the nth checkpoint at a `now` one hour after
                // it: the checkpoints after it (and the head).
                let ws = self.ctx.workspace().unwrap();
                let time = {
                    let s = ws.open_store(&config()).unwrap();
                    let r = s.catalog.reader().unwrap();
                    r.resolve(&format!("v{}", nth(n))).unwrap().time_ns
                };
                let keep = Policy {
                    keep_within_secs: Some(3600),
                    ..Default::default()
                };
                self.retain(&keep, time + 3_600_000_000_000);
            }
            Op::Fork { nth: n } if !cps.is_empty() && self.forks.len() < 2 => {
                let i = self.forks.len();
                let dir = self.tmp.path().join(format!("fork{i}"));
                let store = self.tmp.path().join(format!("fork{i}-store"));
                let rev = format!("v{}", nth(n));
                ops::fork::fork(
                    &self.ctx,
                    &ops::fork::ForkOptions {
                        rev: &rev,
                        dir: &dir,
                        store: Some(&store),
                        link: false,
                        progress: None,
                        backend: None,
                        command: None,
                    },
                )
                .unwrap();
                self.forks.push((dir, store));
            }
            Op::ForkSave { file, seed } if !self.forks.is_empty() => {
                let (dir, _) = self.forks.last().unwrap();
                std::fs::create_dir_all(dir.join("dir")).unwrap();
                let edit = if file % 2 == 0 {
                    Op::Small {
                        file,
                        content: seed + 4,
                    }
                } else {
                    Op::Banded {
                        file,
                        bands: 2,
                        marks: 3,
                        seed: seed + 10,
                    }
                };
                World::write(dir, &edit);
                save(&Context::new(dir.clone(), config()));
            }
            Op::Adopt if !self.forks.is_empty() => {
                let (dir, _) = self.forks.last().unwrap();
                let fork = dir.display().to_string();
                ops::adopt::adopt(
                    &self.ctx,
                    &ops::adopt::AdoptOptions {
                        fork,
                        dry_run: false,
                    },
                )
                .unwrap();
                std::fs::create_dir_all(self.ctx.cwd.join("dir")).unwrap();
            }
            _ => {}
        }
    }

    /// Applies a policy at `now`, after checking on a copy that its dry run
    /// reports exactly what the real run frees.
    fn retain(&self, policy: &Policy, now: i64) {
        let copy = copy_store(&self.store, &self.scratch(), "retain");
        {
            let s = Store::open(&copy, &config()).unwrap();
            let dry = retention::apply(&s, policy, now, true).unwrap();
            let before = files_on_disk(&copy.join("objects"));
            let real = retention::apply(&s, policy, now, false).unwrap();
            let freed = freed_since(&before, &copy.join("objects"));
            assert_eq!(dry.selection, real.selection);
            assert_eq!(dry.gc.unwrap().bytes_freed, freed, "retention dry run");
            assert_eq!(real.gc.unwrap().bytes_freed, freed, "retention run");
        }
        let ws = self.ctx.workspace().unwrap();
        let s = ws.open_store(&config()).unwrap();
        retention::apply(&s, policy, now, false).unwrap();
    }

    fn check(&self) -> Result<(), TestCaseError> {
        check_store(&self.store, &self.scratch(), "workspace")?;
        for (i, (_, store)) in self.forks.iter().enumerate() {
            check_store(store, &self.scratch(), &format!("fork {i}"))?;
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// After every step of a random history, du's figures are what gc and
    /// delete-then-gc really free, on every store involved.
    #[test]
    fn du_is_what_gc_frees(ops in prop::collection::vec(arb_op(), 1..14)) {
        let mut w = World::new();
        for (i, op) in ops.iter().enumerate() {
            w.apply(op);
            // Only after steps that change a store (the edits change none).
            if !matches!(op, Op::Small { .. } | Op::Banded { .. } | Op::Sparse { .. } | Op::Dup { .. } | Op::Remove { .. }) {
                w.check().map_err(|e| TestCaseError::fail(format!("after step {i} {op:?}: {e}")))?;
            }
        }
    }
}

/// On-disk bytes of the stored object of `content`'s hash, or of a band
/// of it, or of its manifest.
fn object_bytes(store: &Path, h: &Hash, suffix: &str) -> u64 {
    let hex = h.to_hex();
    let p = store
        .join("objects")
        .join(&hex[..2])
        .join(format!("{}{suffix}", &hex[2..]));
    std::fs::metadata(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .blocks()
        * 512
}

fn du(ctx: &Context) -> usage::Usage {
    ops::du::du(ctx).unwrap().usage
}

/// The two cases measured in issue 60, scaled down (band threshold 1 MiB
/// instead of 64 MiB): every band counted as garbage, none as unique.
#[test]
fn issue_60_cases() {
    // 1. A first save holding a banded file: nothing is garbage, before or
    //    after a gc.
    let w = World::new();
    let big = w.ctx.cwd.join("big");
    let mut rnd = vec![0u8; (2 * BAND + 1000) as usize];
    let mut x = 0x9e3779b97f4a7c15u64;
    for b in rnd.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&big, &rnd).unwrap();
    let small = w.ctx.cwd.join("small");
    std::fs::write(&small, "a".repeat(300_000)).unwrap();
    save(&w.ctx).unwrap();
    let bands: Vec<Hash> = (0..3)
        .map(|i| {
            let end = ((i + 1) * BAND as usize).min(rnd.len());
            Hash::of(&rnd[i * BAND as usize..end])
        })
        .collect();
    let big1 = Hash::of(&rnd);
    // Stored in bands, not whole.
    object_bytes(&w.store, &big1, ".bands");
    let u = du(&w.ctx);
    assert_eq!(u.unreferenced_bytes, 0);
    assert_eq!(u.unreferenced_objects, 0);
    let g = ops::gc::gc(&w.ctx, &ops::gc::GcOptions::default()).unwrap();
    match g.run {
        ops::gc::GcRun::Sweep(r) => assert_eq!((r.objects_removed, r.bytes_freed), (0, 0)),
        ops::gc::GcRun::Retention(_) => panic!("no policy was set"),
    }
    assert_eq!(du(&w.ctx).unreferenced_bytes, 0);

    // 2. v2 changes 4 bytes in the big file (in its second band) and
    //    rewrites the small one.
    let small1 = Hash::of("a".repeat(300_000).as_bytes());
    rnd[BAND as usize + 10..BAND as usize + 14].copy_from_slice(b"edit");
    std::fs::write(&big, &rnd).unwrap();
    std::fs::write(&small, "b".repeat(300_000)).unwrap();
    save(&w.ctx).unwrap();
    let big2 = Hash::of(&rnd);
    let band1_v2 = Hash::of(&rnd[BAND as usize..2 * BAND as usize]);
    let small2 = Hash::of("b".repeat(300_000).as_bytes());
    let at = |h: &Hash, s: &str| object_bytes(&w.store, h, s);
    let only_v1 = at(&small1, "") + at(&bands[1], "") + at(&big1, ".bands");
    let only_v2 = at(&small2, "") + at(&band1_v2, "") + at(&big2, ".bands");
    let u = du(&w.ctx);
    assert_eq!(u.unreferenced_bytes, 0);
    assert_eq!(u.checkpoints[0].unique_bytes, only_v1);
    assert_eq!(u.checkpoints[0].unique_objects, 2);
    assert_eq!(u.checkpoints[1].unique_bytes, only_v2);
    assert_eq!(u.checkpoints[1].unique_objects, 2);
    // Deleting v1 and collecting frees exactly what du said.
    ops::delete::delete(&w.ctx, &ops::delete::DeleteOptions { rev: "v1".into() }).unwrap();
    assert_eq!(du(&w.ctx).unreferenced_bytes, only_v1);
    let before = files_on_disk(&w.store.join("objects"));
    let g = ops::gc::gc(&w.ctx, &ops::gc::GcOptions::default()).unwrap();
    let ops::gc::GcRun::Sweep(r) = g.run else {
        panic!("no policy was set")
    };
    assert_eq!(r.bytes_freed, only_v1);
    assert_eq!(freed_since(&before, &w.store.join("objects")), only_v1);
    let u = du(&w.ctx);
    assert_eq!(u.unreferenced_bytes, 0);
    // The one survivor now holds everything.
    assert_eq!(u.checkpoints[0].unique_bytes, u.object_bytes);
}
