//! Concurrency tests: every outcome checked here must hold for every interleaving, so
//! none depends on timing. Bank transfers (total conserved at every snapshot and every
//! retained version), a replay check that the committed history is serializable in commit
//! order, exactly one CAS winner, concurrent write skew, and phantoms via scan.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier, Mutex};

use ckpt_state::{Durability, Error, Options, RetryPolicy, StateStore};

fn open(dir: &tempfile::TempDir, d: Durability) -> Arc<StateStore> {
    Arc::new(StateStore::open(&dir.path().join("state.redb"), Options::with_durability(d)).unwrap())
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn num(v: &[u8]) -> i64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

/// What one committed transaction observed and wrote.
#[derive(Debug, Clone)]
struct Logged {
    version: u64,
    reads: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

/// Serializability in commit order: replaying the committed transactions one at a time in
/// version order, each must read exactly what it observed, and the store's state at each
/// version must be the previous state plus exactly that transaction's writes.
fn check_serial(store: &StateStore, mut log: Vec<Logged>, base: u64) {
    log.sort_by_key(|l| l.version);
    let versions: Vec<u64> = log.iter().map(|l| l.version).collect();
    let expect: Vec<u64> = (base + 1..=base + log.len() as u64).collect();
    assert_eq!(
        versions, expect,
        "committed versions must be dense and unique"
    );
    let snap = store.snapshot(base).unwrap();
    let mut state: BTreeMap<Vec<u8>, Vec<u8>> = snap
        .scan(b"")
        .into_iter()
        .map(|e| (e.key, e.value))
        .collect();
    for l in &log {
        for (k, observed) in &l.reads {
            assert_eq!(
                state.get(k),
                observed.as_ref(),
                "txn committed at {} read a value the serial order does not give",
                l.version
            );
        }
        for (k, w) in &l.writes {
            match w {
                Some(v) => state.insert(k.clone(), v.clone()),
                None => state.remove(k),
            };
        }
        let at: BTreeMap<Vec<u8>, Vec<u8>> = store
            .snapshot(l.version)
            .unwrap()
            .scan(b"")
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect();
        assert_eq!(at, state, "state at version {}", l.version);
    }
}

fn bank(durability: Durability, threads: usize, per_thread: usize) {
    const ACCOUNTS: u64 = 16;
    const START: i64 = 100;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, durability);
    let mut t = store.begin();
    for a in 0..ACCOUNTS {
        t.put(
            format!("acct/{a:02}").as_bytes(),
            START.to_string().as_bytes(),
        );
    }
    let base = t.commit().unwrap();
    let total = START * ACCOUNTS as i64;
    let log = Arc::new(Mutex::new(Vec::new()));
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let store = store.clone();
            let log = log.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9 ^ (id as u64 + 1).wrapping_mul(0x1234_5678_9ABC));
                barrier.wait();
                for i in 0..per_thread {
                    let from = rng.below(ACCOUNTS);
                    let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = 1 + rng.below(30) as i64;
                    let (entry, _) = store
                        .transaction_with_retry(
                            RetryPolicy {
                                max_attempts: 10_000,
                                ..RetryPolicy::default()
                            },
                            |t| {
                                let fk = format!("acct/{from:02}").into_bytes();
                                let tk = format!("acct/{to:02}").into_bytes();
                                let fv = t.get(&fk);
                                let tv = t.get(&tk);
                                let (f, to_bal) =
                                    (num(fv.as_ref().unwrap()), num(tv.as_ref().unwrap()));
                                let mut writes = BTreeMap::new();
                                if f >= amount {
                                    let nf = (f - amount).to_string().into_bytes();
                                    let nt = (to_bal + amount).to_string().into_bytes();
                                    t.put(&fk, &nf);
                                    t.put(&tk, &nt);
                                    writes.insert(fk.clone(), Some(nf));
                                    writes.insert(tk.clone(), Some(nt));
                                }
                                Ok(Logged {
                                    version: 0,
                                    reads: vec![(fk, fv), (tk, tv)],
                                    writes,
                                })
                            },
                        )
                        .map(|(mut l, v)| {
                            l.version = v;
                            (l, v)
                        })
                        .unwrap();
                    if !entry.writes.is_empty() {
                        log.lock().unwrap().push(entry);
                    }
                    if i % 8 == 0 {
                        // Any snapshot, through a transaction scan or a Snapshot: total conserved.
                        let mut t = store.begin();
                        let sum: i64 = t.scan(b"acct/").iter().map(|(_, v)| num(v)).sum();
                        assert_eq!(sum, total);
                        let s = store.snapshot(store.latest_version()).unwrap();
                        let sum: i64 = s.scan(b"acct/").iter().map(|e| num(&e.value)).sum();
                        assert_eq!(sum, total);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // Every retained version conserves the total.
    for v in base..=store.latest_version() {
        let s = store.snapshot(v).unwrap();
        let sum: i64 = s.scan(b"acct/").iter().map(|e| num(&e.value)).sum();
        assert_eq!(sum, total, "version {v}");
    }
    let log = Arc::try_unwrap(log).unwrap().into_inner().unwrap();
    check_serial(&store, log, base);
}

#[test]
fn bank_transfer_8_threads_batched() {
    bank(Durability::Batched { window_ms: 2 }, 8, 250);
}

#[test]
fn bank_transfer_8_threads_none() {
    bank(Durability::None, 8, 250);
}

#[test]
fn bank_transfer_8_threads_strict_group_commit() {
    bank(Durability::Strict, 8, 12);
}

#[test]
fn random_transactions_are_serializable() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Durability::None);
    let log = Arc::new(Mutex::new(Vec::new()));
    let threads = 6;
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let store = store.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                let mut rng =
                    Rng(0xDEAD_BEEF ^ (id as u64 + 7).wrapping_mul(0x5851_F42D_4C95_7F2D));
                for n in 0..300u64 {
                    let mut t = store.begin();
                    let mut reads = Vec::new();
                    let mut writes = BTreeMap::new();
                    for _ in 0..1 + rng.below(4) {
                        let k = format!("k{}", rng.below(8)).into_bytes();
                        match rng.below(4) {
                            0 | 1 => {
                                if !writes.contains_key(&k) {
                                    let v = t.get(&k);
                                    reads.push((k, v));
                                }
                            }
                            2 => {
                                let v = format!("{id}-{n}").into_bytes();
                                t.put(&k, &v);
                                writes.insert(k, Some(v));
                            }
                            _ => {
                                t.delete(&k);
                                writes.insert(k, None);
                            }
                        }
                    }
                    let empty = writes.is_empty();
                    match t.commit() {
                        Ok(v) if !empty => log.lock().unwrap().push(Logged {
                            version: v,
                            reads,
                            writes,
                        }),
                        Ok(_) => {}
                        Err(e) => assert!(e.is_conflict(), "{e}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let log = Arc::try_unwrap(log).unwrap().into_inner().unwrap();
    assert!(!log.is_empty());
    check_serial(&store, log, 0);
}

#[test]
fn exactly_one_cas_winner() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Durability::Batched { window_ms: 1 });
    let n = 8;
    for round in 0..40 {
        let expected = store.put(b"leader", b"nobody").unwrap();
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|id| {
                let store = store.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    store.cas(b"leader", expected, format!("{id}").as_bytes())
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<_> = results.iter().filter(|r| r.is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for r in &results {
            if let Err(e) = r {
                assert!(matches!(e, Error::CasMismatch { .. }), "{e}");
            }
        }
    }
}

#[test]
fn exactly_one_cas_txn_commits_when_all_began_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Durability::Strict);
    let n = 8;
    for _ in 0..5 {
        let expected = store.put(b"slot", b"free").unwrap();
        let began = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|id| {
                let store = store.clone();
                let began = began.clone();
                std::thread::spawn(move || {
                    let mut t = store.begin();
                    t.cas(b"slot", expected, format!("taken by {id}").as_bytes())
                        .unwrap();
                    began.wait(); // every snapshot is taken before anyone commits
                    t.commit()
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        assert!(results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(Error::is_conflict));
    }
}

#[test]
fn concurrent_write_skew_never_breaks_invariant() {
    // Invariant: at least one of x, y is "on". Each thread turns its own off only if it
    // sees the other on. Under snapshot isolation both could go off; serializable forbids it.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Durability::None);
    for _ in 0..100 {
        let mut t = store.begin();
        t.put(b"x", b"on");
        t.put(b"y", b"on");
        t.commit().unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = [(&b"x"[..], &b"y"[..]), (&b"y"[..], &b"x"[..])]
            .into_iter()
            .map(|(me, other)| {
                let store = store.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let mut t = store.begin();
                    let seen = t.get(other);
                    barrier.wait(); // both have read before either commits
                    if seen.as_deref() == Some(b"on") {
                        t.put(me, b"off");
                    }
                    t.commit().is_ok()
                })
            })
            .collect();
        let ok: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            ok.iter().filter(|&&b| b).count(),
            1,
            "exactly one may go off"
        );
        let on = [store.get(b"x"), store.get(b"y")]
            .iter()
            .filter(|v| v.as_deref() == Some(b"on"))
            .count();
        assert!(on >= 1);
    }
}

#[test]
fn phantom_insert_limit_respected_under_concurrency() {
    // Each thread inserts task/<id>-<n> only if fewer than LIMIT tasks exist (checked by scan).
    const LIMIT: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Durability::None);
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|id| {
            let store = store.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for n in 0..4 {
                    store
                        .transaction_with_retry(
                            RetryPolicy {
                                max_attempts: 10_000,
                                ..RetryPolicy::default()
                            },
                            |t| {
                                if t.scan(b"task/").len() < LIMIT {
                                    t.put(format!("task/{id}-{n}").as_bytes(), b"open");
                                }
                                Ok(())
                            },
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(store.scan(b"task/").len(), LIMIT);
}

#[test]
fn gc_concurrent_with_commits_keeps_live_snapshots_valid() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Durability::None);
    store.put(b"a", b"0").unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            for i in 1..=2000u64 {
                let mut t = store.begin();
                t.put(b"a", i.to_string().as_bytes());
                t.put(b"b", i.to_string().as_bytes());
                t.commit().unwrap();
            }
        })
    };
    let reader = {
        let store = store.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // A commit and a gc may come between reading the latest
                // version and registering the snapshot: that version is then
                // gone, as documented, and the reader takes the next one.
                let t = match store.snapshot(store.latest_version()) {
                    Ok(t) => t,
                    Err(Error::VersionUnavailable { .. }) => continue,
                    Err(e) => panic!("snapshot: {e}"),
                };
                let a = t.get(b"a");
                for _ in 0..10 {
                    assert_eq!(t.get(b"a"), a, "a snapshot never changes under GC");
                    assert_eq!(t.get(b"b").is_some(), t.version() > 1);
                    if t.version() > 1 {
                        assert_eq!(t.get(b"a"), t.get(b"b"));
                    }
                }
            }
        })
    };
    for _ in 0..50 {
        store.gc(&std::collections::BTreeSet::new()).unwrap();
    }
    writer.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    store.gc(&std::collections::BTreeSet::new()).unwrap();
    assert_eq!(store.history(b"a").len(), 1);
}

/// Group commit hands every waiting committer its own result and wakes all of them: with
/// 2, 3 and 8 strict writers committing in a loop, every commit returns (a lost wake-up
/// shows as the watchdog firing, not as a hung test run), versions are dense, and each
/// returned version is the one that wrote that committer's key.
#[test]
fn group_commit_wakes_every_committer_with_its_own_result() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, Durability::Strict);
    for writers in [2usize, 3, 8] {
        let base = store.latest_version();
        let per = 40;
        let (tx, rx) = std::sync::mpsc::channel();
        for id in 0..writers {
            let (store, tx) = (store.clone(), tx.clone());
            std::thread::spawn(move || {
                for i in 0..per {
                    let key = format!("w{writers}/{id}/{i}").into_bytes();
                    let mut t = store.begin();
                    t.put(&key, b"x");
                    tx.send((key, t.commit().unwrap())).unwrap();
                }
            });
        }
        let mut versions = Vec::new();
        for n in 0..writers * per {
            let (key, v) = rx
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("{writers} writers: only {n} commits returned"));
            assert_eq!(store.get_versioned(&key).unwrap().version, v, "{key:?}");
            versions.push(v);
        }
        versions.sort();
        let expected: Vec<u64> = (base + 1..=base + (writers * per) as u64).collect();
        assert_eq!(versions, expected, "{writers} writers");
    }
}
