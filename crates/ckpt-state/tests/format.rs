//! On-disk format compatibility: a store written in format 1 (rows keyed (user key,
//! version) in table `versions`) opens with the same contents at every version after the
//! one-transaction migration to format 2 (rows keyed (version, user key) in table `log`),
//! keeps working and reopens; a file of an unknown future format is refused and left as it was.
//! The format-1 files are written here with redb directly, as format 1 laid them out.

use std::collections::BTreeMap;
use std::path::Path;

use ckpt_state::{Durability, Error, Options, StateStore};
use proptest::prelude::*;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const V1_VERSIONS: TableDefinition<(&[u8], u64), &[u8]> = TableDefinition::new("versions");
const LOG: TableDefinition<(u64, &[u8]), &[u8]> = TableDefinition::new("log");
const COLLECTED: TableDefinition<u64, u64> = TableDefinition::new("collected");

const KEYS: &[&[u8]] = &[b"a", b"ab", b"b", b"key/1", b"key/2", b""];

/// One commit: writes of (key index, Some(value) | None = delete).
type Commit = Vec<(usize, Option<Vec<u8>>)>;

/// Write `commits` (versions 1..=n) as a format-1 file.
fn write_v1(path: &Path, commits: &[Commit]) {
    let db = Database::create(path).unwrap();
    let tx = db.begin_write().unwrap();
    {
        let mut meta = tx.open_table(META).unwrap();
        meta.insert("format", 1).unwrap();
        meta.insert("latest", commits.len() as u64).unwrap();
        let mut rows = tx.open_table(V1_VERSIONS).unwrap();
        for (i, c) in commits.iter().enumerate() {
            for (k, v) in c {
                let mut raw = Vec::new();
                match v {
                    None => raw.push(0u8),
                    Some(b) => {
                        raw.push(1u8);
                        raw.extend_from_slice(b);
                    }
                }
                rows.insert((KEYS[*k], i as u64 + 1), raw.as_slice())
                    .unwrap();
            }
        }
        tx.open_table(COLLECTED).unwrap();
    }
    tx.commit().unwrap();
}

/// The model: state (key → value) after each version 0..=n.
fn states(commits: &[Commit]) -> Vec<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut out = vec![BTreeMap::new()];
    for c in commits {
        let mut s = out.last().unwrap().clone();
        for (k, v) in c {
            match v {
                Some(b) => s.insert(KEYS[*k].to_vec(), b.clone()),
                None => s.remove(KEYS[*k]),
            };
        }
        out.push(s);
    }
    out
}

fn check_all_versions(s: &StateStore, model: &[BTreeMap<Vec<u8>, Vec<u8>>]) {
    assert_eq!(s.latest_version(), model.len() as u64 - 1);
    for (v, m) in model.iter().enumerate() {
        let snap = s.snapshot(v as u64).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = snap
            .scan(b"")
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect();
        assert_eq!(&got, m, "state at version {v}");
    }
}

fn commit_strategy() -> impl Strategy<Value = Commit> {
    // Distinct keys within one commit (a commit writes a key once).
    proptest::collection::btree_map(
        0..KEYS.len(),
        proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..6)),
        1..4,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn format1_file_migrates_with_every_version_intact(
        commits in proptest::collection::vec(commit_strategy(), 0..12),
        extra in proptest::collection::vec(any::<u8>(), 0..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        write_v1(&path, &commits);
        let mut model = states(&commits);
        {
            let s = StateStore::open(&path, Options::with_durability(Durability::Strict)).unwrap();
            check_all_versions(&s, &model);
            // Still works after the migration: a new commit, then a reopen.
            let v = s.put(b"key/1", &extra).unwrap();
            prop_assert_eq!(v, commits.len() as u64 + 1);
            let mut next = model.last().unwrap().clone();
            next.insert(b"key/1".to_vec(), extra.clone());
            model.push(next);
            check_all_versions(&s, &model);
        }
        let s = StateStore::open(&path, Options::with_durability(Durability::Strict)).unwrap();
        check_all_versions(&s, &model);
        drop(s);
        // The file is format 2 now: rows in `log`, `versions` gone.
        let db = Database::open(&path).unwrap();
        let tx = db.begin_read().unwrap();
        let format = tx.open_table(META).unwrap().get("format").unwrap().unwrap().value();
        prop_assert_eq!(format, 2);
        prop_assert!(tx.open_table(V1_VERSIONS).is_err());
        let rows = tx.open_table(LOG).unwrap().iter().unwrap().count();
        let written: usize = commits.iter().map(Vec::len).sum::<usize>() + 1;
        prop_assert_eq!(rows, written);
    }
}

#[test]
fn unknown_future_format_is_refused_and_the_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    {
        let db = Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(META).unwrap().insert("format", 3).unwrap();
        tx.commit().unwrap();
    }
    let err = StateStore::open(&path, Options::default()).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    assert!(err.to_string().contains("format 3"), "{err}");
    // Nothing changed (logically: redb may rewrite its own bookkeeping on open/close).
    let db = Database::open(&path).unwrap();
    let tx = db.begin_read().unwrap();
    let format = tx
        .open_table(META)
        .unwrap()
        .get("format")
        .unwrap()
        .unwrap()
        .value();
    assert_eq!(format, 3);
    assert!(tx.open_table(LOG).is_err(), "no table was created");
}
