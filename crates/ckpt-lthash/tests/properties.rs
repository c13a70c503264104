//! Property tests (proptest): group laws of LtHash16, order independence of
//! `Digest`, incremental maintenance against a model map, injectivity of the
//! entry encoding (via a decoder that must recover every field), and byte /
//! base64url round-trips.

use std::collections::BTreeMap;

use ckpt_lthash::{
    encode_entry, encoded_mode, par_digest, Digest, Entry, EntryKind, LtHash, ENTRY_TAG, LANES,
};
use proptest::prelude::*;
use rayon::prelude::*;

fn kind() -> impl Strategy<Value = EntryKind> {
    prop_oneof![
        Just(EntryKind::File),
        Just(EntryKind::Dir),
        Just(EntryKind::Symlink)
    ]
}

/// Paths from a small alphabet (so collisions of paths, renames etc. happen)
/// including NUL, newline and a non-UTF-8 byte.
fn path() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(vec![b'a', b'b', b'/', 0u8, b'\n', 0xff]),
        0..6,
    )
}

type Val = (EntryKind, u32, Vec<u8>);

fn val() -> impl Strategy<Value = Val> {
    (
        kind(),
        prop::sample::select(vec![0o644u32, 0o755, 0o600, 0o4755, 0o100_644]),
        prop::collection::vec(any::<u8>(), 0..40),
    )
}

fn from_scratch(model: &BTreeMap<Vec<u8>, Val>) -> Digest {
    model
        .iter()
        .map(|(p, (k, m, c))| Entry {
            path: p,
            kind: *k,
            mode: *m,
            content: c,
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>, Val),
    Remove(usize),
    Modify(usize, Val),
    Rename(usize, Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (path(), val()).prop_map(|(p, v)| Op::Insert(p, v)),
        1 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), val()).prop_map(|(i, v)| Op::Modify(i, v)),
        1 => (any::<usize>(), path()).prop_map(|(i, p)| Op::Rename(i, p)),
    ]
}

fn nth_key(model: &BTreeMap<Vec<u8>, Val>, i: usize) -> Option<Vec<u8>> {
    if model.is_empty() {
        None
    } else {
        model.keys().nth(i % model.len()).cloned()
    }
}

fn ent<'a>(p: &'a [u8], v: &'a Val) -> Entry<'a> {
    Entry {
        path: p,
        kind: v.0,
        mode: v.1,
        content: &v.2,
    }
}

/// Parses element bytes back into their fields; `None` unless the whole input
/// is consumed exactly. A successful round trip for every input proves the
/// encoding injective.
fn decode(bytes: &[u8]) -> Option<(Vec<u8>, EntryKind, u32, Vec<u8>)> {
    let rest = bytes.strip_prefix(&ENTRY_TAG[..])?;
    let (&k, rest) = rest.split_first()?;
    let kind = EntryKind::from_code(k)?;
    let mode = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?);
    let rest = &rest[4..];
    let plen = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?) as usize;
    let rest = &rest[8..];
    let path = rest.get(..plen)?.to_vec();
    let rest = &rest[plen..];
    let clen = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?) as usize;
    let rest = &rest[8..];
    if rest.len() != clen {
        return None;
    }
    Some((path, kind, mode, rest.to_vec()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn add_then_sub_is_identity(a in prop::collection::vec(any::<u8>(), 0..200),
                                b in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut s = LtHash::of_element(&b);
        let before = s.clone();
        s.add_element(&a);
        s.remove_element(&a);
        prop_assert_eq!(&s, &before);
        let mut z = LtHash::identity();
        z.add(&LtHash::of_element(&a));
        z.sub(&LtHash::of_element(&a));
        prop_assert!(z.is_identity());
    }

    #[test]
    fn commutative_and_associative(a in any::<[u8; 8]>(), b in any::<[u8; 8]>(), c in any::<[u8; 8]>()) {
        let (ha, hb, hc) = (LtHash::of_element(&a), LtHash::of_element(&b), LtHash::of_element(&c));
        let mut ab = ha.clone(); ab.add(&hb);
        let mut ba = hb.clone(); ba.add(&ha);
        prop_assert_eq!(&ab, &ba);
        let mut ab_c = ab.clone(); ab_c.add(&hc);
        let mut bc = hb.clone(); bc.add(&hc);
        let mut a_bc = ha.clone(); a_bc.add(&bc);
        prop_assert_eq!(ab_c, a_bc);
    }

    #[test]
    fn order_independent(entries in prop::collection::btree_map(path(), val(), 0..30)
                            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
                            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))) {
        let (orig, shuffled) = entries;
        let d1: Digest = orig.iter().map(|(p, v)| ent(p, v)).collect();
        let d2: Digest = shuffled.iter().map(|(p, v)| ent(p, v)).collect();
        prop_assert_eq!(&d1, &d2);
        let d3 = par_digest(shuffled.par_iter().map(|(p, v)| ent(p, v)));
        prop_assert_eq!(&d1, &d3);
        prop_assert_eq!(d1.checksum(), d3.checksum());
    }

    #[test]
    fn incremental_equals_recompute(ops in prop::collection::vec(op(), 1..120)) {
        let mut model: BTreeMap<Vec<u8>, Val> = BTreeMap::new();
        let mut d = Digest::new();
        for op in ops {
            match op {
                Op::Insert(p, v) => {
                    if let Some(old) = model.get(&p) {
                        d.replace(&ent(&p, old), &ent(&p, &v));
                    } else {
                        d.insert(&p, v.0, v.1, &v.2);
                    }
                    model.insert(p, v);
                }
                Op::Remove(i) => if let Some(k) = nth_key(&model, i) {
                    let v = model.remove(&k).unwrap();
                    d.remove(&k, v.0, v.1, &v.2);
                },
                Op::Modify(i, v) => if let Some(k) = nth_key(&model, i) {
                    let old = model.insert(k.clone(), v.clone()).unwrap();
                    d.replace(&ent(&k, &old), &ent(&k, &v));
                },
                Op::Rename(i, to) => if let Some(k) = nth_key(&model, i) {
                    if !model.contains_key(&to) {
                        let v = model.remove(&k).unwrap();
                        d.remove_entry(&ent(&k, &v));
                        d.insert_entry(&ent(&to, &v));
                        model.insert(to, v);
                    }
                },
            }
            prop_assert_eq!(&d, &from_scratch(&model));
        }
        if model.is_empty() {
            prop_assert_eq!(d, Digest::new());
        }
    }

    #[test]
    fn encoding_is_injective(p in prop::collection::vec(any::<u8>(), 0..300),
                             k in kind(), m in any::<u32>(),
                             c in prop::collection::vec(any::<u8>(), 0..300)) {
        let bytes = encode_entry(&p, k, m, &c);
        prop_assert_eq!(decode(&bytes), Some((p, k, encoded_mode(k, m), c)));
    }

    #[test]
    fn distinct_entries_distinct_elements(a in (path(), val()), b in (path(), val())) {
        let norm = |(p, (k, m, c)): &(Vec<u8>, Val)| (p.clone(), *k, encoded_mode(*k, *m), c.clone());
        let (ea, eb) = (ent(&a.0, &a.1).element(), ent(&b.0, &b.1).element());
        prop_assert_eq!(norm(&a) == norm(&b), ea == eb);
    }

    #[test]
    fn bytes_and_base64_roundtrip(lanes in prop::collection::vec(any::<u16>(), LANES)) {
        let s = LtHash::from_lanes(lanes.try_into().unwrap());
        prop_assert_eq!(LtHash::from_bytes(&s.to_bytes()), s.clone());
        prop_assert_eq!(LtHash::from_base64url(&s.to_base64url()).unwrap(), s);
    }
}
