//! Where stored objects end up, checked against a model: after any mix of
//! operations, every content stored is under `objects/ab/cdef…` with
//! exactly its bytes and mode 0444, the store lists exactly the model's
//! contents and nothing else, every shard directory has the permissions of
//! `objects/`, and nothing is left below `tmp/`.
//!
//! The operations are sized to cross the store's placement paths: objects
//! fsynced one by one (the first 32), lane files renamed one by one, and
//! fresh shards staged and renamed whole — into a missing shard (stores
//! made now), an empty one (stores made when `init` made all 256) and, for
//! a shard filled since it was staged or holding a stray file, one by one.
//! Several operations share one open store, as a restore's pre-save and
//! its import do, so a decision of one operation cannot leak into the next.
//! Some operations are aborted instead of committed: their contents may
//! stay (the first ones are placed as soon as they are durable), and then
//! with exactly their bytes, but an aborted operation leaves nothing else.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use ckpt_lib::store::Store;
use ckpt_lib::{Config, Hash};
use proptest::prelude::*;
use rayon::prelude::*;

fn config() -> Config {
    Config::locking(Duration::from_secs(10))
}

/// One operation's contents: small random byte strings, some repeated.
fn arb_op() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        1 => proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20),
        3 => proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 30..400),
    ]
}

/// Stores `contents` (in parallel, so threads race on shard decisions and
/// on repeated contents) and commits, or with `abort` aborts.
fn store_all(store: &Store, contents: &[Vec<u8>], abort: bool) {
    contents.par_iter().for_each(|c| {
        store.objects.put_verified(Hash::of(c), c).unwrap();
    });
    match abort {
        true => store.objects.abort(),
        false => drop(store.objects.commit().unwrap()),
    }
}

/// The store holds every content of `model` and may hold those of `maybe`
/// (stored by aborted operations), each in place with exactly its bytes,
/// and nothing else.
fn check(
    root: &Path,
    store: &Store,
    model: &BTreeMap<Hash, Vec<u8>>,
    maybe: &BTreeMap<Hash, Vec<u8>>,
) {
    let (listed, strays) = store.objects.list().unwrap();
    assert!(strays.is_empty(), "stray names under objects/: {strays:?}");
    let mut listed = listed;
    listed.sort();
    let held: BTreeMap<Hash, &Vec<u8>> = listed
        .iter()
        .map(|h| {
            let bytes = model.get(h).or_else(|| maybe.get(h));
            (
                *h,
                bytes.expect("the store lists a content that was never stored"),
            )
        })
        .collect();
    for h in model.keys() {
        assert!(held.contains_key(h), "committed content {h} is missing");
    }
    for (h, bytes) in held {
        let path = store.objects.object_path(&h);
        let got = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(&got, bytes, "{} holds other bytes", path.display());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o444, "{}", path.display());
    }
    let objects = root.join("objects");
    let want_mode = std::fs::metadata(&objects).unwrap().permissions().mode() & 0o7777;
    for shard in std::fs::read_dir(&objects).unwrap() {
        let shard = shard.unwrap();
        let mode = shard.metadata().unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, want_mode, "{}", shard.path().display());
    }
}

/// What is below `tmp/` apart from the open store's own (empty) directory.
fn tmp_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for op in std::fs::read_dir(root.join("tmp")).unwrap() {
        let op = op.unwrap().path();
        for e in walk(&op) {
            out.push(e);
        }
    }
    out
}

/// Every file (not directory) below `dir`.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path().display().to_string());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn objects_land_under_their_names(
        ops in proptest::collection::vec((arb_op(), proptest::bool::weighted(0.25)), 1..5),
        premade_shards in any::<bool>(),
        reopen_after in any::<usize>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        Store::create(&root).unwrap();
        if premade_shards {
            for i in 0..256 {
                std::fs::create_dir(root.join("objects").join(format!("{i:02x}"))).unwrap();
            }
        }
        let (mut model, mut maybe) = (BTreeMap::new(), BTreeMap::new());
        let mut store = Store::open(&root, &config()).unwrap();
        for (i, (op, abort)) in ops.iter().enumerate() {
            store_all(&store, op, *abort);
            for c in op {
                match abort {
                    true => maybe.insert(Hash::of(c), c.clone()),
                    false => model.insert(Hash::of(c), c.clone()),
                };
            }
            check(&root, &store, &model, &maybe);
            prop_assert!(tmp_files(&root).is_empty(), "left in tmp/: {:?}", tmp_files(&root));
            if i == reopen_after % ops.len() {
                drop(store);
                store = Store::open(&root, &config()).unwrap();
            }
        }
        prop_assert!(tmp_files(&root).is_empty(), "left in tmp/: {:?}", tmp_files(&root));
        drop(store);
        let store = Store::open(&root, &config()).unwrap();
        check(&root, &store, &model, &maybe);
    }
}

/// A file in a staged shard that no pending object names (what an error
/// could leave) must never get a name under `objects/`: that shard's
/// objects are renamed one by one, and the stray stays in `tmp/`.
#[test]
fn a_stray_file_in_a_staged_shard_is_never_placed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    Store::create(&root).unwrap();
    let store = Store::open(&root, &config()).unwrap();
    let contents: Vec<Vec<u8>> = (0..2000u32).map(|i| i.to_le_bytes().to_vec()).collect();
    for c in &contents {
        store.objects.put_verified(Hash::of(c), c).unwrap();
    }
    // Every staged shard gets a stray.
    let mut strays = 0;
    for op in std::fs::read_dir(root.join("tmp")).unwrap() {
        let shards = op.unwrap().path().join("shards");
        for shard in std::fs::read_dir(&shards).unwrap() {
            let shard = shard.unwrap().path();
            std::fs::write(shard.join("00stray"), b"not what its name promises").unwrap();
            strays += 1;
        }
    }
    assert!(strays > 200, "the operation staged only {strays} shards");
    store.objects.commit().unwrap();
    let model: BTreeMap<Hash, Vec<u8>> =
        contents.iter().map(|c| (Hash::of(c), c.clone())).collect();
    check(&root, &store, &model, &BTreeMap::new());
    assert_eq!(tmp_files(&root).len(), strays, "the strays stay in tmp/");
    drop(store);
    assert!(
        tmp_files(&root).is_empty(),
        "closing the store removes its tmp/"
    );
}
