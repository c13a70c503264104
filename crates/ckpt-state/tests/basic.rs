//! Deterministic unit-level tests of the public API: semantics of get/put/delete/scan/cas,
//! isolation anomalies (lost update, write skew, phantoms), group validation order, GC,
//! restore, diff, history, reopen and the process lock.

use std::collections::BTreeSet;
use std::time::Duration;

use ckpt_state::{ChangeKind, ConflictKind, Durability, Error, Options, RetryPolicy, StateStore};

fn open(dir: &tempfile::TempDir, d: Durability) -> StateStore {
    StateStore::open(&dir.path().join("state.redb"), Options::with_durability(d)).unwrap()
}

fn conflict_kind(e: &Error) -> ConflictKind {
    match e {
        Error::Conflict { kind, .. } => *kind,
        other => panic!("expected conflict, got {other}"),
    }
}

#[test]
fn put_get_delete_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::Strict);
    assert_eq!(s.latest_version(), 0);
    assert_eq!(s.get(b"a"), None);
    let v1 = s.put(b"a", b"1").unwrap();
    assert_eq!(v1, 1);
    let v2 = s.put(b"b", b"2").unwrap();
    assert_eq!(v2, 2);
    assert_eq!(s.get_versioned(b"a").unwrap().version, 1);
    let v3 = s.delete(b"a").unwrap();
    assert_eq!(v3, 3);
    assert_eq!(s.get(b"a"), None);
    assert_eq!(s.snapshot(2).unwrap().get(b"a"), Some(b"1".to_vec()));
    assert_eq!(s.snapshot(0).unwrap().get(b"b"), None);
    assert!(matches!(
        s.snapshot(4),
        Err(Error::VersionUnavailable { .. })
    ));
    assert_eq!(s.history(b"a"), vec![(1, Some(b"1".to_vec())), (3, None)]);
}

#[test]
fn txn_read_your_writes_and_scan_merge() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    s.put(b"p/1", b"x").unwrap();
    s.put(b"p/2", b"y").unwrap();
    s.put(b"q", b"z").unwrap();
    let mut t = s.begin();
    t.put(b"p/3", b"w");
    t.delete(b"p/1");
    assert_eq!(t.get(b"p/3"), Some(b"w".to_vec()));
    assert_eq!(t.get(b"p/1"), None);
    let keys: Vec<_> = t.scan(b"p/").into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![b"p/2".to_vec(), b"p/3".to_vec()]);
    // Not visible outside before commit.
    assert_eq!(s.get(b"p/3"), None);
    let v = t.commit().unwrap();
    assert_eq!(v, 4);
    assert_eq!(s.get(b"p/3"), Some(b"w".to_vec()));
    assert_eq!(s.scan(b"p/").len(), 2);
}

#[test]
fn read_only_txn_commits_at_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    s.put(b"a", b"1").unwrap();
    let mut t = s.begin();
    assert_eq!(t.get(b"a"), Some(b"1".to_vec()));
    s.put(b"a", b"2").unwrap();
    // Still reads its snapshot.
    assert_eq!(t.get(b"a"), Some(b"1".to_vec()));
    assert_eq!(t.commit().unwrap(), 1);
}

#[test]
fn lost_update_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    s.put(b"n", b"0").unwrap();
    let mut t1 = s.begin();
    let mut t2 = s.begin();
    t1.get(b"n");
    t2.get(b"n");
    t1.put(b"n", b"1");
    t2.put(b"n", b"1");
    t1.commit().unwrap();
    let e = t2.commit().unwrap_err();
    assert!(e.is_conflict());
}

#[test]
fn blind_write_write_conflict_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    let mut t1 = s.begin();
    let mut t2 = s.begin();
    t1.put(b"k", b"1");
    t2.put(b"k", b"2");
    t1.commit().unwrap();
    assert_eq!(
        conflict_kind(&t2.commit().unwrap_err()),
        ConflictKind::Write
    );
    assert_eq!(s.get(b"k"), Some(b"1".to_vec()));
}

#[test]
fn write_skew_rejected() {
    // Two doctors on call; each transaction checks that the other is on call and goes off.
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::Strict);
    let mut t = s.begin();
    t.put(b"oncall/alice", b"1");
    t.put(b"oncall/bob", b"1");
    t.commit().unwrap();
    let mut t1 = s.begin();
    let mut t2 = s.begin();
    assert_eq!(t1.get(b"oncall/bob"), Some(b"1".to_vec()));
    assert_eq!(t2.get(b"oncall/alice"), Some(b"1".to_vec()));
    t1.put(b"oncall/alice", b"0");
    t2.put(b"oncall/bob", b"0");
    t1.commit().unwrap();
    let e = t2.commit().unwrap_err();
    assert_eq!(conflict_kind(&e), ConflictKind::Read);
    // Invariant: at least one on call.
    assert_eq!(s.get(b"oncall/bob"), Some(b"1".to_vec()));
}

#[test]
fn write_skew_rejected_within_one_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::Strict);
    s.put(b"x", b"1").unwrap();
    s.put(b"y", b"1").unwrap();
    let mut t1 = s.begin();
    let mut t2 = s.begin();
    t1.get(b"y");
    t1.put(b"x", b"0");
    t2.get(b"x");
    t2.put(b"y", b"0");
    let r = s.commit_group(vec![t1, t2]);
    assert_eq!(r[0].as_ref().unwrap(), &3);
    assert_eq!(
        conflict_kind(r[1].as_ref().unwrap_err()),
        ConflictKind::Read
    );
    assert_eq!(s.latest_version(), 3);
}

#[test]
fn group_disjoint_all_commit_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::Strict);
    let txns: Vec<_> = (0..5u8)
        .map(|i| {
            let mut t = s.begin();
            t.put(&[b'k', i], &[i]);
            t
        })
        .collect();
    let r = s.commit_group(txns);
    let versions: Vec<u64> = r.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(versions, vec![1, 2, 3, 4, 5]);
    drop(s);
    let s = open(&dir, Durability::Strict);
    assert_eq!(s.latest_version(), 5);
    for i in 0..5u8 {
        assert_eq!(s.get_versioned(&[b'k', i]).unwrap().version, i as u64 + 1);
    }
}

#[test]
fn phantom_insert_via_scan_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    s.put(b"task/1", b"open").unwrap();
    let mut t1 = s.begin();
    let n = t1.scan(b"task/").len();
    t1.put(b"count", n.to_string().as_bytes());
    // Concurrent insert of a new key under the scanned prefix.
    s.put(b"task/2", b"open").unwrap();
    let e = t1.commit().unwrap_err();
    assert_eq!(conflict_kind(&e), ConflictKind::Scan);
}

#[test]
fn phantom_delete_via_scan_rejected_and_unrelated_prefix_ok() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    s.put(b"task/1", b"open").unwrap();
    let mut t1 = s.begin();
    t1.scan(b"task/");
    t1.put(b"count", b"1");
    s.delete(b"task/1").unwrap();
    assert_eq!(conflict_kind(&t1.commit().unwrap_err()), ConflictKind::Scan);

    let mut t2 = s.begin();
    t2.scan(b"task/");
    t2.put(b"count", b"0");
    s.put(b"tasks", b"not under the prefix task/").unwrap();
    s.put(b"other", b"x").unwrap();
    t2.commit().unwrap();
}

#[test]
fn cas_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    let v1 = s.cas(b"lock", 0, b"me").unwrap();
    match s.cas(b"lock", 0, b"you") {
        Err(Error::CasMismatch {
            expected: 0,
            actual,
            ..
        }) => assert_eq!(actual, v1),
        other => panic!("{other:?}"),
    }
    let v2 = s.cas(b"lock", v1, b"me2").unwrap();
    assert!(v2 > v1);
    s.delete(b"lock").unwrap();
    // Deleted key has version 0 again: insert-if-absent works.
    s.cas(b"lock", 0, b"again").unwrap();
    // cas after own write is refused.
    let mut t = s.begin();
    t.put(b"z", b"1");
    assert!(matches!(
        t.cas(b"z", 0, b"2"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn cas_in_txn_conflicts_if_changed_before_commit() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    let v = s.put(b"k", b"a").unwrap();
    let mut t = s.begin();
    t.cas(b"k", v, b"b").unwrap();
    s.put(b"k", b"c").unwrap();
    assert!(t.commit().unwrap_err().is_conflict());
    assert_eq!(s.get(b"k"), Some(b"c".to_vec()));
}

#[test]
fn retry_runs_again_and_gives_up() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    s.put(b"n", b"0").unwrap();
    let mut runs = 0;
    let (_, v) = s
        .transaction_with_retry(RetryPolicy::default(), |t| {
            runs += 1;
            let n: u64 = String::from_utf8(t.get(b"n").unwrap())
                .unwrap()
                .parse()
                .unwrap();
            if runs == 1 {
                // Interfere once: the first attempt must conflict.
                s.put(b"n", b"100").unwrap();
            }
            t.put(b"n", (n + 1).to_string().as_bytes());
            Ok(())
        })
        .unwrap();
    assert_eq!(runs, 2);
    assert_eq!(s.get(b"n"), Some(b"101".to_vec()));
    assert_eq!(v, s.latest_version());

    let policy = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
    };
    let mut runs = 0;
    let e = s
        .transaction_with_retry(policy, |t| {
            runs += 1;
            t.get(b"n");
            s.put(b"n", b"x").unwrap();
            t.put(b"n", b"y");
            Ok(())
        })
        .unwrap_err();
    assert_eq!(runs, 3);
    assert!(matches!(e, Error::RetriesExhausted { attempts: 3, .. }));
    assert!(e.is_conflict());
}

#[test]
fn restore_diff_gc() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::Strict);
    s.put(b"plan", b"v1").unwrap(); // 1
    s.put(b"task/a", b"todo").unwrap(); // 2
    let checkpoint = s.latest_version();
    s.put(b"plan", b"v2").unwrap(); // 3
    s.delete(b"task/a").unwrap(); // 4
    s.put(b"task/b", b"new").unwrap(); // 5

    let d = s.diff(checkpoint, s.latest_version()).unwrap();
    let kinds: Vec<_> = d.iter().map(|c| (c.key.clone(), c.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (b"plan".to_vec(), ChangeKind::Changed),
            (b"task/a".to_vec(), ChangeKind::Removed),
            (b"task/b".to_vec(), ChangeKind::Added),
        ]
    );
    assert_eq!(d[0].old.as_ref().unwrap().version, 1);
    assert_eq!(d[0].new.as_ref().unwrap().version, 3);

    let v = s.restore_to(checkpoint).unwrap();
    assert_eq!(v, 6);
    assert!(s.diff(checkpoint, v).unwrap().is_empty());
    assert_eq!(s.get(b"plan"), Some(b"v1".to_vec()));
    assert_eq!(s.get(b"task/b"), None);
    // Restoring again to an equal state makes no empty commit.
    assert_eq!(s.restore_to(checkpoint).unwrap(), 6);
    // History kept.
    assert_eq!(s.snapshot(5).unwrap().get(b"task/b"), Some(b"new".to_vec()));

    // GC keeping only the checkpoint: versions 0,1,3,4,5 collected.
    let held = s.snapshot(4).unwrap();
    let stats = s.gc(&BTreeSet::from([checkpoint])).unwrap();
    assert_eq!(stats.versions_collected, 4); // 0, 1, 3, 5 (4 is held by a snapshot)
    assert!(s.snapshot(3).is_err());
    assert!(s.snapshot(5).is_err());
    assert_eq!(held.get(b"plan"), Some(b"v2".to_vec()));
    assert_eq!(
        s.snapshot(2).unwrap().get(b"task/a"),
        Some(b"todo".to_vec())
    );
    drop(held);
    let stats = s.gc(&BTreeSet::from([checkpoint])).unwrap();
    assert_eq!(stats.versions_collected, 1);
    assert!(s.snapshot(4).is_err());
    // task/b: written at 5, deleted at 6 -> no retained version sees it -> key gone.
    assert!(s.history(b"task/b").is_empty());
    drop(s);
    let s = open(&dir, Durability::Strict);
    assert!(s.snapshot(4).is_err());
    assert!(s.snapshot(5).is_err());
    assert_eq!(
        s.snapshot(2).unwrap().get(b"task/a"),
        Some(b"todo".to_vec())
    );
    assert_eq!(s.get(b"plan"), Some(b"v1".to_vec()));
    assert_eq!(s.latest_version(), 6);
    assert!(s.history(b"task/b").is_empty());
    // Restoring to a collected version is a clear error.
    assert!(matches!(
        s.restore_to(3),
        Err(Error::VersionUnavailable { .. })
    ));
}

#[test]
fn gc_keeps_tombstone_needed_by_live_txn() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    let mut t = s.begin(); // snapshot 0: k absent
    assert_eq!(t.get(b"k"), None);
    t.put(b"other", b"1");
    s.put(b"k", b"1").unwrap();
    s.delete(b"k").unwrap();
    s.gc(&BTreeSet::new()).unwrap();
    // k was created and deleted after t's snapshot: t must still conflict.
    assert!(t.commit().unwrap_err().is_conflict());
    s.gc(&BTreeSet::new()).unwrap();
    assert!(s.history(b"k").is_empty());
}

#[test]
fn batched_and_none_survive_clean_close() {
    for d in [Durability::Batched { window_ms: 5 }, Durability::None] {
        let dir = tempfile::tempdir().unwrap();
        let s = open(&dir, d);
        for i in 0..100u32 {
            s.put(&i.to_be_bytes(), b"v").unwrap();
        }
        s.close().unwrap();
        let s = open(&dir, Durability::Strict);
        assert_eq!(s.latest_version(), 100);
        assert_eq!(s.scan(b"").len(), 100);
    }
}

#[test]
fn second_open_waits_then_times_out_with_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let s = StateStore::open(&path, Options::default()).unwrap();
    let opts = Options {
        lock_timeout: Duration::from_millis(50),
        ..Options::default()
    };
    let e = StateStore::open(&path, opts.clone()).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    assert!(e.to_string().contains("in use by another process"));
    drop(s);
    StateStore::open(&path, opts).unwrap();
}

#[test]
fn error_messages_are_actionable() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(&dir, Durability::None);
    let mut t = s.begin();
    t.get(b"k\xff");
    t.put(b"x", b"1");
    s.put(b"k\xff", b"2").unwrap();
    let msg = t.commit().unwrap_err().to_string();
    assert!(msg.contains("\"k\\xff\""), "{msg}");
    assert!(msg.contains("retry"), "{msg}");
}
