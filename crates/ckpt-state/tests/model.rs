//! Model-based property test: random sequential histories (transactions with puts, deletes,
//! gets, scans and cas; interleaved transaction pairs that must or must not conflict; reads
//! and scans at old versions; diff; restore; GC; reopen) are run against the store and
//! against a plain in-memory reference model (one full map per version), and every
//! observable result is compared.

use std::collections::{BTreeMap, BTreeSet};

use ckpt_state::{ChangeKind, Durability, Error, Options, StateStore};
use proptest::prelude::*;

const KEYS: &[&[u8]] = &[b"a", b"ab", b"b", b"ba", b"bb", b"c"];
const PREFIXES: &[&[u8]] = &[b"", b"a", b"b", b"ba", b"c", b"d"];

type State = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

#[derive(Debug, Clone)]
enum TxOp {
    Put(usize, u8),
    Delete(usize),
    Get(usize),
    Scan(usize),
    /// cas with the right version if the bool is true, else with a (probably) wrong one.
    Cas(usize, bool, u64, u8),
}

#[derive(Debug, Clone)]
enum Op {
    Txn(Vec<TxOp>),
    /// t1 reads `reads`, scans `scan`, writes `writes`; meanwhile another commit writes
    /// `other`; t1 must conflict iff `other` touches anything t1 depended on.
    Race {
        reads: Vec<usize>,
        scan: Option<usize>,
        writes: Vec<usize>,
        other: Vec<usize>,
    },
    ReadAt(u64, usize),
    ScanAt(u64, usize),
    Diff(u64, u64),
    Restore(u64),
    Gc(Vec<u64>),
    History(usize),
    Reopen(u8),
}

fn tx_op() -> impl Strategy<Value = TxOp> {
    let k = 0..KEYS.len();
    prop_oneof![
        4 => (k.clone(), any::<u8>()).prop_map(|(k, v)| TxOp::Put(k, v)),
        2 => k.clone().prop_map(TxOp::Delete),
        2 => k.clone().prop_map(TxOp::Get),
        1 => (0..PREFIXES.len()).prop_map(TxOp::Scan),
        2 => (k, any::<bool>(), 0..6u64, any::<u8>()).prop_map(|(k, r, e, v)| TxOp::Cas(k, r, e, v)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    let ks = proptest::collection::vec(k.clone(), 0..3);
    prop_oneof![
        8 => proptest::collection::vec(tx_op(), 1..5).prop_map(Op::Txn),
        3 => (ks.clone(), proptest::option::of(0..PREFIXES.len()), proptest::collection::vec(k.clone(), 1..3), proptest::collection::vec(k.clone(), 1..3))
            .prop_map(|(reads, scan, writes, other)| Op::Race { reads, scan, writes, other }),
        3 => (any::<u64>(), k.clone()).prop_map(|(v, k)| Op::ReadAt(v, k)),
        2 => (any::<u64>(), 0..PREFIXES.len()).prop_map(|(v, p)| Op::ScanAt(v, p)),
        2 => (any::<u64>(), any::<u64>()).prop_map(|(a, b)| Op::Diff(a, b)),
        1 => any::<u64>().prop_map(Op::Restore),
        1 => proptest::collection::vec(any::<u64>(), 0..4).prop_map(Op::Gc),
        1 => k.prop_map(Op::History),
        1 => any::<u8>().prop_map(Op::Reopen),
    ]
}

struct Model {
    states: Vec<State>,
    collected: BTreeSet<u64>,
    /// Every write (version, key, value-or-tombstone), for history before any GC.
    writes: Vec<(u64, Vec<u8>, Option<Vec<u8>>)>,
    gc_done: bool,
}

impl Model {
    fn latest(&self) -> u64 {
        self.states.len() as u64 - 1
    }
    fn cur(&self) -> &State {
        self.states.last().unwrap()
    }
    fn readable(&self, v: u64) -> bool {
        v <= self.latest() && !self.collected.contains(&v)
    }
    /// Apply a write set as a new version.
    fn commit(&mut self, w: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> u64 {
        let v = self.latest() + 1;
        let mut s = self.cur().clone();
        for (k, val) in w {
            match val {
                Some(x) => {
                    s.insert(k.clone(), (x.clone(), v));
                }
                None => {
                    s.remove(k);
                }
            }
            self.writes.push((v, k.clone(), val.clone()));
        }
        self.states.push(s);
        v
    }
}

fn pick_version(m: &Model, raw: u64) -> u64 {
    // Mostly existing versions, sometimes one past the end.
    raw % (m.latest() + 2)
}

fn open(path: &std::path::Path, d: u8) -> StateStore {
    let durability = match d % 3 {
        0 => Durability::Strict,
        1 => Durability::Batched { window_ms: 1000 },
        _ => Durability::None,
    };
    StateStore::open(path, Options::with_durability(durability)).unwrap()
}

fn run(ops: Vec<Op>, first_durability: u8) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let mut store = open(&path, first_durability);
    let mut m = Model {
        states: vec![State::new()],
        collected: BTreeSet::new(),
        writes: Vec::new(),
        gc_done: false,
    };
    for op in ops {
        match op {
            Op::Txn(tops) => {
                let mut t = store.begin();
                prop_assert_eq!(t.snapshot_version(), m.latest());
                let mut w: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                for top in tops {
                    match top {
                        TxOp::Put(k, v) => {
                            t.put(KEYS[k], &[v]);
                            w.insert(KEYS[k].to_vec(), Some(vec![v]));
                        }
                        TxOp::Delete(k) => {
                            t.delete(KEYS[k]);
                            w.insert(KEYS[k].to_vec(), None);
                        }
                        TxOp::Get(k) => {
                            let expect = match w.get(KEYS[k]) {
                                Some(x) => x.clone(),
                                None => m.cur().get(KEYS[k]).map(|e| e.0.clone()),
                            };
                            prop_assert_eq!(t.get(KEYS[k]), expect);
                        }
                        TxOp::Scan(p) => {
                            let mut expect: BTreeMap<Vec<u8>, Vec<u8>> = m
                                .cur()
                                .iter()
                                .filter(|(k, _)| k.starts_with(PREFIXES[p]))
                                .map(|(k, e)| (k.clone(), e.0.clone()))
                                .collect();
                            for (k, v) in w.iter().filter(|(k, _)| k.starts_with(PREFIXES[p])) {
                                match v {
                                    Some(v) => {
                                        expect.insert(k.clone(), v.clone());
                                    }
                                    None => {
                                        expect.remove(k);
                                    }
                                }
                            }
                            let got: BTreeMap<_, _> = t.scan(PREFIXES[p]).into_iter().collect();
                            prop_assert_eq!(got, expect);
                        }
                        TxOp::Cas(k, right, wrong, v) => {
                            let actual = m.cur().get(KEYS[k]).map_or(0, |e| e.1);
                            let expected = if right { actual } else { wrong };
                            let r = t.cas(KEYS[k], expected, &[v]);
                            if w.contains_key(KEYS[k]) {
                                prop_assert!(matches!(r, Err(Error::InvalidArgument(_))));
                            } else if expected == actual {
                                prop_assert!(r.is_ok());
                                w.insert(KEYS[k].to_vec(), Some(vec![v]));
                            } else {
                                match r {
                                    Err(Error::CasMismatch {
                                        actual: a,
                                        expected: e,
                                        ..
                                    }) => {
                                        prop_assert_eq!(a, actual);
                                        prop_assert_eq!(e, expected);
                                    }
                                    other => prop_assert!(false, "cas: {:?}", other),
                                }
                            }
                        }
                    }
                }
                let got = t.commit().unwrap();
                if w.is_empty() {
                    prop_assert_eq!(got, m.latest());
                } else {
                    prop_assert_eq!(got, m.commit(&w));
                }
            }
            Op::Race {
                reads,
                scan,
                writes,
                other,
            } => {
                let mut t1 = store.begin();
                for &k in &reads {
                    prop_assert_eq!(t1.get(KEYS[k]), m.cur().get(KEYS[k]).map(|e| e.0.clone()));
                }
                if let Some(p) = scan {
                    t1.scan(PREFIXES[p]);
                }
                let mut w1 = BTreeMap::new();
                for &k in &writes {
                    t1.put(KEYS[k], b"t1");
                    w1.insert(KEYS[k].to_vec(), Some(b"t1".to_vec()));
                }
                let mut t2 = store.begin();
                let mut w2 = BTreeMap::new();
                for &k in &other {
                    t2.put(KEYS[k], b"t2");
                    w2.insert(KEYS[k].to_vec(), Some(b"t2".to_vec()));
                }
                prop_assert_eq!(t2.commit().unwrap(), m.commit(&w2));
                let touched = |k: &Vec<u8>| {
                    reads.iter().any(|&r| KEYS[r] == k.as_slice())
                        || w1.contains_key(k)
                        || scan.is_some_and(|p| k.starts_with(PREFIXES[p]))
                };
                let must_conflict = w2.keys().any(touched);
                let r = t1.commit();
                if must_conflict {
                    prop_assert!(matches!(r, Err(Error::Conflict { .. })), "{:?}", r);
                } else {
                    prop_assert_eq!(r.unwrap(), m.commit(&w1));
                }
            }
            Op::ReadAt(raw, k) => {
                let v = pick_version(&m, raw);
                match store.snapshot(v) {
                    Ok(s) => {
                        prop_assert!(m.readable(v));
                        let expect = m.states[v as usize].get(KEYS[k]);
                        let got = s.get_versioned(KEYS[k]);
                        prop_assert_eq!(got.as_ref().map(|g| &g.value), expect.map(|e| &e.0));
                        prop_assert_eq!(got.map(|g| g.version), expect.map(|e| e.1));
                    }
                    Err(Error::VersionUnavailable { .. }) => prop_assert!(!m.readable(v)),
                    Err(e) => prop_assert!(false, "{}", e),
                }
            }
            Op::ScanAt(raw, p) => {
                let v = pick_version(&m, raw);
                match store.snapshot(v) {
                    Ok(s) => {
                        prop_assert!(m.readable(v));
                        let got: Vec<_> = s
                            .scan(PREFIXES[p])
                            .into_iter()
                            .map(|e| (e.key, (e.value, e.version)))
                            .collect();
                        let expect: Vec<_> = m.states[v as usize]
                            .iter()
                            .filter(|(k, _)| k.starts_with(PREFIXES[p]))
                            .map(|(k, e)| (k.clone(), e.clone()))
                            .collect();
                        prop_assert_eq!(got, expect);
                    }
                    Err(_) => prop_assert!(!m.readable(v)),
                }
            }
            Op::Diff(a, b) => {
                let (a, b) = (pick_version(&m, a), pick_version(&m, b));
                match store.diff(a, b) {
                    Ok(d) => {
                        prop_assert!(m.readable(a) && m.readable(b));
                        let (sa, sb) = (&m.states[a as usize], &m.states[b as usize]);
                        let keys: BTreeSet<_> = sa.keys().chain(sb.keys()).collect();
                        let mut expect = Vec::new();
                        for k in keys {
                            let kind = match (sa.get(k), sb.get(k)) {
                                (None, Some(_)) => ChangeKind::Added,
                                (Some(_), None) => ChangeKind::Removed,
                                (Some(x), Some(y)) if x.0 != y.0 => ChangeKind::Changed,
                                _ => continue,
                            };
                            expect.push((
                                k.clone(),
                                kind,
                                sa.get(k).map(|e| e.1),
                                sb.get(k).map(|e| e.1),
                            ));
                        }
                        let got: Vec<_> = d
                            .into_iter()
                            .map(|c| {
                                (
                                    c.key,
                                    c.kind,
                                    c.old.map(|o| o.version),
                                    c.new.map(|n| n.version),
                                )
                            })
                            .collect();
                        prop_assert_eq!(got, expect);
                    }
                    Err(_) => prop_assert!(!(m.readable(a) && m.readable(b))),
                }
            }
            Op::Restore(raw) => {
                let v = pick_version(&m, raw);
                match store.restore_to(v) {
                    Ok(nv) => {
                        prop_assert!(m.readable(v));
                        let target = m.states[v as usize].clone();
                        let cur = m.cur().clone();
                        let mut w = BTreeMap::new();
                        for (k, e) in &cur {
                            match target.get(k) {
                                None => {
                                    w.insert(k.clone(), None);
                                }
                                Some(t) if t.0 != e.0 => {
                                    w.insert(k.clone(), Some(t.0.clone()));
                                }
                                _ => {}
                            }
                        }
                        for (k, t) in &target {
                            if !cur.contains_key(k) {
                                w.insert(k.clone(), Some(t.0.clone()));
                            }
                        }
                        if w.is_empty() {
                            prop_assert_eq!(nv, m.latest());
                        } else {
                            prop_assert_eq!(nv, m.commit(&w));
                        }
                    }
                    Err(Error::VersionUnavailable { .. }) => prop_assert!(!m.readable(v)),
                    Err(e) => prop_assert!(false, "{}", e),
                }
            }
            Op::Gc(raws) => {
                let keep: BTreeSet<u64> = raws.iter().map(|&r| pick_version(&m, r)).collect();
                store.gc(&keep).unwrap();
                for v in 0..=m.latest() {
                    if v != m.latest() && !keep.contains(&v) {
                        m.collected.insert(v);
                    }
                }
                m.gc_done = true;
            }
            Op::History(k) => {
                let h = store.history(KEYS[k]);
                if !m.gc_done {
                    let expect: Vec<_> = m
                        .writes
                        .iter()
                        .filter(|w| w.1 == KEYS[k])
                        .map(|w| (w.0, w.2.clone()))
                        .collect();
                    prop_assert_eq!(h, expect);
                } else {
                    // Every retained entry agrees with the model where it is readable.
                    for (v, val) in h {
                        if m.readable(v) {
                            let e = m.states[v as usize].get(KEYS[k]);
                            prop_assert_eq!(e.map(|e| (e.0.clone(), e.1)), val.map(|x| (x, v)));
                        }
                    }
                }
            }
            Op::Reopen(d) => {
                drop(store);
                store = open(&path, d);
                prop_assert_eq!(store.latest_version(), m.latest());
                let got: State = store
                    .scan(b"")
                    .into_iter()
                    .map(|e| (e.key, (e.value, e.version)))
                    .collect();
                prop_assert_eq!(&got, m.cur());
            }
        }
    }
    // Final full check of every version.
    for v in 0..=m.latest() {
        if let Ok(s) = store.snapshot(v) {
            prop_assert!(m.readable(v));
            let got: State = s
                .scan(b"")
                .into_iter()
                .map(|e| (e.key, (e.value, e.version)))
                .collect();
            prop_assert_eq!(&got, &m.states[v as usize]);
        } else {
            prop_assert!(!m.readable(v));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op(), 1..40), d in any::<u8>()) {
        run(ops, d)?;
    }
}
