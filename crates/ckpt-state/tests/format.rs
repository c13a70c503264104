//! On-disk format compatibility: a store written in format 1 (rows keyed (user key,
//! version) in table `versions`) opens with the same contents at every version after the
//! one-transaction migration to format 2 (rows keyed (version, user key) in table `log`),
//! keeps working and reopens; a migration killed (SIGKILL, the test binary re-executed as a
//! child) at random moments leaves a store that opens with every version intact; a file of
//! an unknown future format is refused and left as it was. The format-1 files are written
//! here with redb directly, as format 1 laid them out.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

const CHILD_ENV: &str = "CKPT_STATE_FORMAT_CHILD";

/// Child side of the SIGKILL test (inert unless `CHILD_ENV` is set): open (= migrate) the
/// store at the given path, announcing the moment just before.
#[test]
fn child_migrate_entry() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // normal test run: nothing to do
    };
    println!("OPENING");
    let s = StateStore::open(&PathBuf::from(path), Options::default()).unwrap();
    println!("OPENED {}", s.latest_version());
}

/// A deterministic format-1 history big enough that migrating it takes a while:
/// `n` commits, each writing 16 of 256 keys (every 7th a delete).
fn big_history(n: usize) -> Vec<Commit> {
    (0..n)
        .map(|v| {
            (0..16)
                .map(|j| {
                    let k = (v * 16 + j * 17) % 256;
                    let val = (v % 7 != 0 || j != 0).then(|| format!("{v}:{k}").into_bytes());
                    (k, val)
                })
                .collect()
        })
        .collect()
}

#[test]
fn sigkill_during_migration_leaves_every_version_intact() {
    const N: usize = 1500;
    let big_keys: Vec<Vec<u8>> = (0..256).map(|k| format!("k{k:03}").into_bytes()).collect();
    let commits = big_history(N);
    // Model and writer for the big key space (KEYS above has only 6 keys).
    let write = |path: &Path| {
        let db = Database::create(path).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let mut meta = tx.open_table(META).unwrap();
            meta.insert("format", 1).unwrap();
            meta.insert("latest", N as u64).unwrap();
            let mut rows = tx.open_table(V1_VERSIONS).unwrap();
            for (i, c) in commits.iter().enumerate() {
                for (k, v) in c {
                    let mut raw = vec![u8::from(v.is_some())];
                    raw.extend_from_slice(v.as_deref().unwrap_or_default());
                    rows.insert((big_keys[*k].as_slice(), i as u64 + 1), raw.as_slice())
                        .unwrap();
                }
            }
            tx.open_table(COLLECTED).unwrap();
        }
        tx.commit().unwrap();
    };
    let check = |path: &Path| {
        let s = StateStore::open(path, Options::default()).unwrap();
        assert_eq!(s.latest_version(), N as u64);
        let mut state: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (i, c) in commits.iter().enumerate() {
            for (k, v) in c {
                match v {
                    Some(b) => state.insert(big_keys[*k].clone(), b.clone()),
                    None => state.remove(&big_keys[*k]),
                };
            }
            let v = i + 1;
            if v % 250 == 0 || v == 1 {
                let got: BTreeMap<Vec<u8>, Vec<u8>> = s
                    .snapshot(v as u64)
                    .unwrap()
                    .scan(b"")
                    .into_iter()
                    .map(|e| (e.key, e.value))
                    .collect();
                assert_eq!(got, state, "state at version {v}");
            }
        }
    };
    let dir = tempfile::tempdir().unwrap();
    // Calibrate: how long does opening (migrating) take here?
    let path = dir.path().join("calibrate.redb");
    write(&path);
    let t = Instant::now();
    drop(StateStore::open(&path, Options::default()).unwrap());
    let migrate = t.elapsed();
    check(&path);
    let mut killed_early = 0;
    for round in 0..8u32 {
        let path = dir.path().join(format!("s{round}.redb"));
        write(&path);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "child_migrate_entry",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("OPENING") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "child exited early");
        }
        // Kill somewhere in [0, 1.5 × the calibrated migration time) after the announcement.
        let nanos = (migrate.as_nanos() as u64).max(1_000_000) * 3 / 2;
        let delay = Duration::from_nanos(u64::from(round) * nanos / 8);
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut rest);
        if !rest.contains("OPENED") {
            killed_early += 1;
        }
        // Whatever the moment: the store opens (migrating again if needed), all intact.
        check(&path);
    }
    println!("migration ≈ {migrate:?}; {killed_early} of 8 children killed before opening");
}
