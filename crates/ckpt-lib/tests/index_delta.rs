//! The stat index's base file + delta (`index`, `index.delta`), on real
//! files. Properties:
//! - save → load is the identity on the directories, through any sequence
//!   of loads, random edits (records changed, added, removed, kept) and
//!   saves, whether a save wrote a delta or a whole base, and whether the
//!   index was loaded before the edits or kept in memory since the last
//!   save (as the watcher keeps it); a loaded record's undecoded bytes read
//!   back as the same entries as the model's;
//! - small edits really are written as a delta (the base file is left as
//!   it was), and a delta that grows past its bound is compacted into a
//!   new base, removing the delta;
//! - crash states: any base file that existed in the history, paired with
//!   any delta file that existed (or none), loads as one of the states the
//!   history saved (or as empty) — never a mixture of two states;
//! - a delta is applied only to the base it names: after the base is
//!   replaced in any other way, the in-memory index writes a whole base;
//!   the whole base an in-memory index writes is the base of its next
//!   delta;
//! - a base large enough for its trailer to be hashed on two threads is
//!   refused whole when any byte of it is damaged;
//! - end to end (real saves and a restore): small changes write only the
//!   delta, and the index loaded from base + delta keeps every unchanged
//!   file from being read again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use ckpt_fs::fs::Meta;
use ckpt_lib::store::index::{delta_path, DirRecord, Index, IndexEntry};
use ckpt_lib::store::tree::{Entry, Node};
use ckpt_lib::Config;
use ckpt_lib::Hash;
use proptest::prelude::*;

/// Directory → (tree, entries, exact names).
type Model = BTreeMap<Vec<u8>, (Hash, Vec<IndexEntry>, bool)>;

fn entry(name: &str, seed: u64, kind: u8) -> IndexEntry {
    let node = match kind % 3 {
        0 => Node::File {
            size: seed,
            hash: Hash::of(&seed.to_le_bytes()),
        },
        1 => Node::Dir {
            tree: Hash::of(name.as_bytes()),
        },
        _ => Node::Symlink {
            target: format!("t{seed}").into_bytes(),
        },
    };
    IndexEntry {
        entry: Entry {
            name: name.as_bytes().to_vec(),
            mode: (seed as u32) & 0o777,
            mtime_ns: (seed as i64).wrapping_mul(7),
            node,
        },
        meta: Meta {
            dev: 1,
            ino: seed,
            mode: 0o100000 | ((seed as u32) & 0o777),
            size: seed,
            mtime_ns: (seed as i64).wrapping_mul(7),
            ctime_ns: (seed as i64).wrapping_mul(3),
        },
        racy: seed.is_multiple_of(5),
    }
}

fn record(seed: u64, n: usize) -> (Hash, Vec<IndexEntry>) {
    let entries = (0..n)
        .map(|i| {
            entry(
                &format!("e{i:03}"),
                seed.wrapping_mul(31).wrapping_add(i as u64),
                i as u8,
            )
        })
        .collect();
    (Hash::of(&seed.to_le_bytes()), entries)
}

fn dir_path(i: u8) -> Vec<u8> {
    if i == 0 {
        Vec::new()
    } else {
        format!("d{}/s{i}", i % 7).into_bytes()
    }
}

/// What one save changes: for each op, a directory and what happens to it.
#[derive(Clone, Debug)]
enum Op {
    /// Replace (or add) the record with a fresh one.
    Put(u8, u64, usize),
    /// Remove the record.
    Remove(u8),
    /// Same entries, new tree hash.
    Retree(u8, u64),
    /// Same entries and tree, the other `exact_names`.
    Flip(u8),
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (any::<u8>(), any::<u64>(), 0usize..6).prop_map(|(d, s, n)| Op::Put(d % 60, s, n)),
        1 => any::<u8>().prop_map(|d| Op::Remove(d % 60)),
        1 => (any::<u8>(), any::<u64>()).prop_map(|(d, s)| Op::Retree(d % 60, s)),
        1 => any::<u8>().prop_map(|d| Op::Flip(d % 60)),
    ];
    proptest::collection::vec(op, 0..8)
}

fn apply(ix: &mut Index, model: &mut Model, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Put(d, seed, n) => {
                let (tree, entries) = record(seed, n);
                let exact = seed.is_multiple_of(2);
                let p = dir_path(d);
                ix.dirs.insert(
                    p.clone(),
                    Arc::new(DirRecord {
                        tree,
                        entries: entries.clone().into(),
                        exact_names: exact,
                    }),
                );
                model.insert(p, (tree, entries, exact));
            }
            Op::Remove(d) => {
                ix.dirs.remove(&dir_path(d));
                model.remove(&dir_path(d));
            }
            Op::Retree(d, seed) => {
                let p = dir_path(d);
                if let Some(old) = ix.dirs.get(&p).cloned() {
                    let tree = Hash::of(&seed.to_be_bytes());
                    ix.dirs.insert(
                        p.clone(),
                        Arc::new(DirRecord {
                            tree,
                            entries: old.entries.clone(),
                            exact_names: old.exact_names,
                        }),
                    );
                    model.get_mut(&p).unwrap().0 = tree;
                }
            }
            Op::Flip(d) => {
                let p = dir_path(d);
                if let Some(old) = ix.dirs.get(&p).cloned() {
                    ix.dirs.insert(
                        p.clone(),
                        Arc::new(DirRecord {
                            tree: old.tree,
                            entries: old.entries.clone(),
                            exact_names: !old.exact_names,
                        }),
                    );
                    let m = model.get_mut(&p).unwrap();
                    m.2 = !m.2;
                }
            }
        }
    }
}

fn assert_matches(ix: &Index, model: &Model, ctx: &str) {
    let got: Vec<&Vec<u8>> = {
        let mut k: Vec<_> = ix.dirs.keys().collect();
        k.sort();
        k
    };
    let want: Vec<&Vec<u8>> = model.keys().collect();
    assert_eq!(got, want, "{ctx}: directories differ");
    for (p, (tree, entries, exact)) in model {
        let rec = &ix.dirs[p];
        assert_eq!(rec.tree, *tree, "{ctx}: tree of {p:?}");
        assert_eq!(rec.exact_names, *exact, "{ctx}: exact names of {p:?}");
        assert_eq!(rec.entries.len(), entries.len(), "{ctx}: count of {p:?}");
        // Compare through the undecoded views first (PartialEq), then the
        // decoded entries.
        let m: ckpt_lib::store::index::Entries = entries.clone().into();
        assert!(rec.entries == m, "{ctx}: entries (views) of {p:?}");
        assert_eq!(&rec.entries[..], &entries[..], "{ctx}: entries of {p:?}");
    }
}

fn initial(seed: u64) -> (Index, Model) {
    let mut ix = Index {
        generation: 4,
        scan_start_ns: 1,
        ..Default::default()
    };
    let mut model = Model::new();
    let ops: Vec<Op> = (0..60u8)
        .map(|d| Op::Put(d, seed.wrapping_add(d as u64), 1 + d as usize % 5))
        .collect();
    apply(&mut ix, &mut model, &ops);
    (ix, model)
}

fn files(dir: &Path) -> (Vec<u8>, Option<Vec<u8>>) {
    let p = dir.join("index");
    (
        std::fs::read(&p).unwrap(),
        std::fs::read(delta_path(&p)).ok(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn save_load_is_identity_and_crash_states_are_consistent(
        seed in any::<u64>(),
        rounds in proptest::collection::vec((arb_ops(), any::<bool>()), 1..10),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("index");
        let (mut ix, mut model) = initial(seed);
        ix.save(&path).unwrap();
        let mut kept = Some(ix);
        // History: (files on disk, the state they hold) after each save.
        let mut states: Vec<Model> = vec![model.clone()];
        let mut bases = vec![std::fs::read(&path).unwrap()];
        let mut deltas: Vec<Vec<u8>> = Vec::new();
        for (i, (ops, in_memory)) in rounds.iter().enumerate() {
            let mut ix = match kept.take().filter(|_| *in_memory) {
                Some(ix) => ix,
                None => Index::load(&path, 4),
            };
            assert_matches(&ix, &model, &format!("round {i} load"));
            ix.scan_start_ns = i as i64 + 2;
            apply(&mut ix, &mut model, ops);
            let base_before = std::fs::read(&path).unwrap();
            ix.save(&path).unwrap();
            let (base, delta) = files(tmp.path());
            // A save either wrote a delta beside the untouched base, or a
            // new base and no delta.
            match &delta {
                Some(d) => {
                    prop_assert_eq!(&base, &base_before);
                    prop_assert!(d.len() <= base.len() / 4 + 64);
                    deltas.push(d.clone());
                }
                None => bases.push(base.clone()),
            }
            states.push(model.clone());
            let back = Index::load(&path, 4);
            assert_matches(&back, &model, &format!("round {i} reload"));
            prop_assert_eq!(back.scan_start_ns, i as i64 + 2);
            // Another generation's index is never used.
            prop_assert!(Index::load(&path, 5).dirs.is_empty());
            kept = Some(ix);
        }
        // Every pairing of a past base with a past delta (a crash or a lost
        // write can leave any of them) loads as a saved state.
        let crash = tempfile::tempdir().unwrap();
        let cpath = crash.path().join("index");
        for b in &bases {
            for d in deltas.iter().map(Some).chain([None]) {
                std::fs::write(&cpath, b).unwrap();
                match d {
                    Some(d) => std::fs::write(delta_path(&cpath), d).unwrap(),
                    None => { let _ = std::fs::remove_file(delta_path(&cpath)); }
                }
                let ix = Index::load(&cpath, 4);
                let got: Model = ix
                    .dirs
                    .iter()
                    .map(|(p, r)| (p.clone(), (r.tree, r.entries.to_vec(), r.exact_names)))
                    .collect();
                prop_assert!(
                    states.contains(&got),
                    "base + delta loaded as a state never saved"
                );
            }
        }
    }
}

#[test]
fn small_edits_write_a_delta_and_a_large_one_compacts() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("index");
    let (mut ix, mut model) = initial(9);
    ix.save(&path).unwrap();
    assert!(!delta_path(&path).exists(), "first save writes a base");
    let base = std::fs::read(&path).unwrap();

    // One changed directory, one removed: a delta; the base untouched.
    let mut ix = Index::load(&path, 4);
    apply(&mut ix, &mut model, &[Op::Put(3, 77, 2), Op::Remove(5)]);
    ix.save(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), base);
    let d = std::fs::read(delta_path(&path)).unwrap();
    assert!(
        d.len() * 8 < base.len(),
        "delta {} vs base {}",
        d.len(),
        base.len()
    );
    assert_matches(&Index::load(&path, 4), &model, "after delta");

    // Nearly everything changed: a new base, no delta.
    let mut ix = Index::load(&path, 4);
    let ops: Vec<Op> = (0..60u8).map(|d| Op::Put(d, 1000 + d as u64, 5)).collect();
    apply(&mut ix, &mut model, &ops);
    ix.save(&path).unwrap();
    assert!(!delta_path(&path).exists(), "a large change compacts");
    assert_ne!(std::fs::read(&path).unwrap(), base);
    assert_matches(&Index::load(&path, 4), &model, "after compaction");
}

#[test]
fn a_large_base_with_any_byte_damaged_is_refused_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("index");
    let mut ix = Index {
        generation: 4,
        ..Default::default()
    };
    let mut model = Model::new();
    let ops: Vec<Op> = (0..80u8).map(|d| Op::Put(d, d as u64, 120)).collect();
    apply(&mut ix, &mut model, &ops);
    ix.save(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    // Past the size above which the trailer is hashed on two threads
    // (256 KiB).
    assert!(good.len() > 300 << 10, "{} bytes", good.len());
    assert_matches(&Index::load(&path, 4), &model, "undamaged");
    for at in [20, good.len() / 3, good.len() / 2, good.len() - 40] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        assert!(Index::decode(&bad).is_err(), "byte {at} damaged, decoded");
        std::fs::write(&path, &bad).unwrap();
        assert!(
            Index::load(&path, 4).dirs.is_empty(),
            "byte {at} damaged, loaded"
        );
    }
}

#[test]
fn a_delta_is_written_only_against_the_base_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("index");
    let (mut ix, mut model) = initial(3);
    ix.save(&path).unwrap();
    let mut stale = Index::load(&path, 4);
    let mut stale_model = model.clone();

    // Another writer replaces the base (e.g. a full save) meanwhile.
    let mut other = Index::load(&path, 4);
    let ops: Vec<Op> = (0..60u8).map(|d| Op::Put(d, 500 + d as u64, 4)).collect();
    apply(&mut other, &mut model, &ops);
    other.save(&path).unwrap();
    assert!(!delta_path(&path).exists());

    // The stale in-memory index, saved now, must not write a delta against
    // a base that is no longer on disk (it would be ignored on load): it
    // writes its whole state.
    apply(&mut stale, &mut stale_model, &[Op::Put(1, 42, 3)]);
    stale.save(&path).unwrap();
    assert!(!delta_path(&path).exists());
    assert_matches(&Index::load(&path, 4), &stale_model, "stale writer");

    // A delta made for one base is refused by another, leaving it as is.
    let mut a = Index::load(&path, 4);
    apply(&mut a, &mut stale_model, &[Op::Remove(2)]);
    a.save(&path).unwrap();
    let d = std::fs::read(delta_path(&path)).unwrap();
    let (mut b, bm) = initial(8);
    let enc = b.encode();
    b = Index::decode(&enc).unwrap();
    assert!(b.apply_delta(d).is_err());
    assert_matches(&b, &bm, "refused delta");
}

/// An index kept in memory (the watcher's) whose save had to write a whole
/// base, even one that never had a base, writes its next small change as a
/// delta against that base.
#[test]
fn a_whole_base_written_is_the_base_of_the_next_delta() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("index");
    let (mut ix, mut model) = initial(11);
    ix.save(&path).unwrap();
    let base = std::fs::read(&path).unwrap();
    for (round, ops) in [
        vec![Op::Put(4, 5, 3)],
        (0..60u8).map(|d| Op::Put(d, 900 + d as u64, 3)).collect(),
        vec![Op::Remove(9), Op::Flip(10)],
    ]
    .iter()
    .enumerate()
    {
        apply(&mut ix, &mut model, ops);
        let before = std::fs::read(&path).unwrap();
        ix.save(&path).unwrap();
        let delta = delta_path(&path).exists();
        match round {
            1 => assert!(!delta, "a large change compacts"),
            _ => {
                assert!(delta, "round {round}: a small change writes a delta");
                assert_eq!(std::fs::read(&path).unwrap(), before);
            }
        }
        assert_matches(&Index::load(&path, 4), &model, &format!("round {round}"));
    }
    assert_ne!(std::fs::read(&path).unwrap(), base);
}

#[test]
fn gc_durable_save_removes_the_delta() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("index");
    let (mut ix, mut model) = initial(5);
    ix.save(&path).unwrap();
    let mut ix = Index::load(&path, 4);
    apply(&mut ix, &mut model, &[Op::Put(7, 1, 1)]);
    ix.save(&path).unwrap();
    assert!(delta_path(&path).exists());
    let mut ix = Index::load(&path, 4);
    ix.generation = 5;
    ix.save_durable(&path).unwrap();
    assert!(!delta_path(&path).exists());
    assert_matches(&Index::load(&path, 5), &model, "after gc");
}

/// Sets a file's mtime to a fixed past instant, so no entry is racy and
/// the test does not depend on timing.
fn set_past_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .unwrap();
}

/// End to end through real saves and a restore: after a 1-file edit the
/// save reads one file and writes only `index.delta` (the base file's
/// bytes untouched); the next save, from base + delta, again reads only the
/// one file edited since (so the delta carried the first file's new stat);
/// a restore then writes a delta too, and the saves after it read nothing
/// that did not change.
#[test]
fn saves_and_restores_write_deltas_that_keep_the_cache_warm() {
    use ckpt_lib::engine::restore::{self, RestoreJob};
    use ckpt_lib::engine::save::{self, SaveJob, SaveOutcome};
    use ckpt_lib::engine::scanner::OnDisk;
    use ckpt_lib::workspace::Workspace;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    for d in 0..30 {
        std::fs::create_dir_all(root.join(format!("d{d:02}"))).unwrap();
        for f in 0..10 {
            let p = root.join(format!("d{d:02}/f{f}"));
            std::fs::write(&p, format!("{d} {f}\n")).unwrap();
            set_past_mtime(&p, 1_600_000_000);
        }
    }
    let ws = Workspace::init(&root, Some(&tmp.path().join("store")), None).unwrap();
    let t = std::time::Duration::from_secs(10);
    let index_path = tmp.path().join("store/index");
    let save = |expect_read: u64, what: &str| {
        let store = ws.open_store(&Config::locking(t)).unwrap();
        let c = save::capture(&ws, &store, &SaveJob::default(), &mut OnDisk::default()).unwrap();
        assert_eq!(c.files_read, expect_read, "{what}: files read");
        match c.outcome {
            SaveOutcome::Saved(cp) => Some(cp.seq),
            SaveOutcome::Unchanged(_) => None,
        }
    };
    let edit = |rel: &str, body: &str, secs: u64| {
        let p = root.join(rel);
        std::fs::write(&p, body).unwrap();
        set_past_mtime(&p, secs);
    };
    // Past the racy window of the directories' creation, so the first save
    // already records their names as exact and later saves keep them so.
    std::thread::sleep(std::time::Duration::from_nanos(
        ckpt_lib::store::index::RACY_WINDOW_NS as u64 + 20_000_000,
    ));
    let v1 = save(300, "first save").unwrap();
    assert!(!delta_path(&index_path).exists());
    let base = std::fs::read(&index_path).unwrap();

    edit("d05/f3", "edited once\n", 1_600_000_100);
    save(1, "after one edit").unwrap();
    assert_eq!(std::fs::read(&index_path).unwrap(), base, "base rewritten");
    assert!(delta_path(&index_path).exists(), "no delta written");

    edit("d07/f1", "edited twice\n", 1_600_000_200);
    save(1, "second edit, index from base + delta").unwrap();
    assert_eq!(std::fs::read(&index_path).unwrap(), base);
    assert_eq!(save(0, "nothing changed"), None);

    // Restore v1 (its pre-save finds nothing new), then nothing to read.
    let store = ws.open_store(&Config::locking(t)).unwrap();
    restore::restore(
        &ws,
        &store,
        &format!("v{v1}"),
        &RestoreJob::default(),
        &mut OnDisk::default(),
    )
    .unwrap();
    drop(store);
    assert_eq!(std::fs::read(root.join("d05/f3")).unwrap(), b"5 3\n");
    assert_eq!(std::fs::read(&index_path).unwrap(), base);
    assert!(delta_path(&index_path).exists());
    // The restored files have v1's mtime and a new ctime: their index
    // entries came from the restore, so a save reads nothing.
    assert_eq!(save(0, "after restore"), None);
}
