//! Every decoder of on-disk data, on hostile bytes: the tree (`CKT1`), the
//! stat index (`CKIX`) and its delta (`CKID`), a checkpoint record (JSON + hash), a stored digest
//! (base64url LtHash16) and an agent-state value record. Properties:
//! - random bytes, and real encodings with bytes flipped, cut or inserted,
//!   never panic: each decoder returns `Ok` or a corruption error;
//! - whatever a decoder accepts is canonical: a decoded tree re-encodes to
//!   the same bytes (so a hash check over the bytes covers its meaning), a
//!   decoded record's hash matches, a decoded index re-encodes and decodes
//!   to the same directories, a delta either applies (and the result
//!   re-encodes to the same directories) or leaves the index unchanged;
//! - real encodings decode.
//!
//! The same decoders are the cargo-fuzz targets in `fuzz/`; setting
//! `CKPT_WRITE_CORPUS=DIR` writes the real samples used here as seeds
//! (`fuzz/corpus/<target>/`).

use std::sync::OnceLock;
use std::time::Duration;

use ckpt_lib::engine::save::{self, SaveJob, SaveOutcome};
use ckpt_lib::store::catalog::decode_checkpoint;
use ckpt_lib::store::index::Index;
use ckpt_lib::store::tree::{Entry, Node, Tree};
use ckpt_lib::workspace::Workspace;
use ckpt_lib::Config;
use ckpt_lib::Hash;
use proptest::prelude::*;

/// Real encodings from a real store.
struct Samples {
    trees: Vec<Vec<u8>>,
    index: Vec<u8>,
    /// A delta against `index` (one record changed, one removed).
    delta: Vec<u8>,
    records: Vec<(u64, Vec<u8>)>,
    digests: Vec<String>,
}

fn samples() -> &'static Samples {
    static S: OnceLock<Samples> = OnceLock::new();
    S.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("README"), b"hello\n").unwrap();
        std::fs::write(root.join("src/main.rs"), b"fn main() {}\n").unwrap();
        std::fs::write(root.join("src/deep/x.bin"), vec![7u8; 70_000]).unwrap();
        std::os::unix::fs::symlink("src/main.rs", root.join("link")).unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        let ws = Workspace::init(&root, Some(&tmp.path().join("store")), None).unwrap();
        let t = Duration::from_secs(10);
        let mut records = Vec::new();
        for round in 0..2 {
            if round == 1 {
                std::fs::write(root.join("src/new.txt"), b"new\n").unwrap();
            }
            let store = ws.open_store(&Config::locking(t)).unwrap();
            if let SaveOutcome::Saved(cp) = save::save(&ws, &store, &SaveJob::default()).unwrap() {
                records.push((cp.seq, serde_json::to_vec(&cp).unwrap()));
            }
        }
        let store = ws.open_store(&Config::locking(t)).unwrap();
        let reader = store.catalog.reader().unwrap();
        let trees = reader
            .tree_hashes()
            .unwrap()
            .iter()
            .map(|h| reader.tree(h).unwrap().encode())
            .collect();
        let digests = reader
            .checkpoints()
            .unwrap()
            .iter()
            .filter_map(|c| c.digest.clone())
            .collect();
        let index = std::fs::read(store.index_path()).unwrap();
        let delta = real_delta(&index);
        let s = Samples {
            trees,
            index,
            delta,
            records,
            digests,
        };
        if let Some(dir) = std::env::var_os("CKPT_WRITE_CORPUS") {
            write_corpus(std::path::Path::new(&dir), &s);
        }
        s
    })
}

fn write_corpus(dir: &std::path::Path, s: &Samples) {
    let put = |target: &str, name: String, bytes: &[u8]| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    for (i, t) in s.trees.iter().enumerate() {
        put("tree", format!("real-{i}"), t);
    }
    put("index", "real-0".into(), &s.index);
    put("index_delta", "real-0".into(), &s.delta);
    for (seq, r) in &s.records {
        let mut b = seq.to_le_bytes().to_vec();
        b.extend_from_slice(r);
        put("checkpoint", format!("real-{seq}"), &b);
    }
    for (i, d) in s.digests.iter().enumerate() {
        put("digest", format!("real-{i}"), d.as_bytes());
    }
    put("state_value", "tombstone".into(), &[0]);
    put("state_value", "value".into(), b"\x01plan: step 1");
}

/// A real sample damaged by up to 8 edits (flip, cut, insert, overwrite).
fn damaged(sample: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = sample.len().max(1);
    prop::collection::vec((0u8..4, 0..len, any::<u8>()), 1..8).prop_map(move |edits| {
        let mut b = sample.clone();
        for (op, at, byte) in edits {
            let at = at.min(b.len());
            match op {
                0 if at < b.len() => b[at] ^= byte | 1,
                1 => b.truncate(at),
                2 => b.insert(at, byte),
                _ if at < b.len() => b[at] = byte,
                _ => b.push(byte),
            }
        }
        b
    })
}

fn check_tree(bytes: &[u8]) {
    if let Ok(t) = Tree::decode(bytes) {
        assert_eq!(t.encode(), bytes, "a decoded tree is not canonical");
    }
}

fn check_index(bytes: &[u8]) {
    if let Ok(ix) = Index::decode(bytes) {
        let again = Index::decode(&ix.encode()).expect("re-encoded index decodes");
        assert_eq!(again.generation, ix.generation);
        let mut a: Vec<_> = ix.dirs.keys().collect();
        let mut b: Vec<_> = again.dirs.keys().collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}

/// A delta as `Index::save` writes it: the sample index with its `empty`
/// directory's record given another tree and its `src/deep` record gone.
fn real_delta(index: &[u8]) -> Vec<u8> {
    let mut ix = Index::decode(index).unwrap();
    let base = ix.base.clone().unwrap();
    let empty = ix.dirs[&b"empty".to_vec()].clone();
    ix.dirs.insert(
        b"empty".to_vec(),
        std::sync::Arc::new(ckpt_lib::store::index::DirRecord {
            tree: Hash::of(b"other"),
            entries: empty.entries.clone(),
            exact_names: !empty.exact_names,
        }),
    );
    ix.dirs.remove(b"src/deep".as_slice()).unwrap();
    ix.encode_delta(&base)
        .expect("a one-record change fits a delta")
}

/// A delta applied to the sample index: either it applies and the result
/// re-encodes and decodes to the same directories, or it is refused and the
/// index is left exactly as it was.
fn check_index_delta(delta: &[u8]) {
    let mut ix = Index::decode(&samples().index).unwrap();
    let before = ix.dirs.clone();
    match ix.apply_delta(delta.to_vec()) {
        Ok(()) => {
            let again = Index::decode(&ix.encode()).expect("re-encoded index decodes");
            assert_eq!(again.dirs, ix.dirs);
        }
        Err(_) => assert_eq!(ix.dirs, before, "a refused delta changed the index"),
    }
}

fn check_record(seq: u64, bytes: &[u8]) {
    if let Ok(cp) = decode_checkpoint(seq, bytes) {
        assert_eq!(cp.seq, seq);
        let _ = ckpt_lib::engine::digest::stored_digest(&cp);
    }
}

fn check_digest(s: &[u8]) {
    let s = String::from_utf8_lossy(s);
    if let Ok(l) = ckpt_lthash::LtHash::from_base64url(&s) {
        assert_eq!(l.to_base64url(), s, "a decoded digest is not canonical");
    }
}

fn check_state_value(b: &[u8]) {
    match ckpt_state::decode_value_record(b) {
        Ok(None) => assert_eq!(b, [0]),
        Ok(Some(v)) => assert_eq!([&[1u8][..], &v].concat(), b),
        Err(_) => assert!(b.is_empty() || b[0] > 1 || (b[0] == 0 && b.len() > 1)),
    }
}

#[test]
fn real_encodings_decode() {
    let s = samples();
    assert!(s.trees.len() >= 4, "expected several trees");
    for t in &s.trees {
        Tree::decode(t).unwrap();
    }
    Index::decode(&s.index).unwrap();
    let mut ix = Index::decode(&s.index).unwrap();
    ix.apply_delta(s.delta.clone()).unwrap();
    assert!(ix.dirs.contains_key(b"src".as_slice()));
    assert!(!ix.dirs.contains_key(b"src/deep".as_slice()));
    assert_eq!(ix.dirs[&b"empty".to_vec()].tree, Hash::of(b"other"));
    for (seq, r) in &s.records {
        decode_checkpoint(*seq, r).unwrap();
    }
    assert!(!s.digests.is_empty());
    for d in &s.digests {
        ckpt_lthash::LtHash::from_base64url(d).unwrap();
    }
}

fn tree_sample() -> impl Strategy<Value = Vec<u8>> {
    (0..samples().trees.len()).prop_map(|i| samples().trees[i].clone())
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..20).prop_filter("valid name", |n| {
        !n.contains(&b'/') && !n.contains(&0) && n != b"." && n != b".."
    })
}

fn entry() -> impl Strategy<Value = Entry> {
    let node = prop_oneof![
        (any::<u64>(), any::<[u8; 32]>()).prop_map(|(size, h)| Node::File {
            size,
            hash: Hash(h)
        }),
        any::<[u8; 32]>().prop_map(|h| Node::Dir { tree: Hash(h) }),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|target| Node::Symlink { target }),
    ];
    (name(), 0u32..0o7777, any::<i64>(), node).prop_map(|(name, mode, mtime_ns, node)| Entry {
        name,
        mode,
        mtime_ns,
        node,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..600), seq in 0u64..4) {
        check_tree(&b);
        let mut t = b"CKT1".to_vec();
        t.extend_from_slice(&b);
        check_tree(&t);
        check_index(&b);
        let mut ix = b"CKIX".to_vec();
        ix.extend_from_slice(&b);
        check_index(&ix);
        check_index_delta(&b);
        let mut d = b"CKID".to_vec();
        d.extend_from_slice(&b);
        check_index_delta(&d);
        check_record(seq, &b);
        check_digest(&b);
        check_state_value(&b);
    }

    #[test]
    fn damaged_trees_are_rejected_or_canonical(b in tree_sample().prop_flat_map(damaged)) {
        check_tree(&b);
    }

    #[test]
    fn damaged_index_never_panics(b in damaged(samples().index.clone())) {
        check_index(&b);
    }

    /// Damage below a recomputed trailer hash, so the parser itself (not
    /// just the checksum) meets the bad lengths.
    #[test]
    fn damaged_index_body_with_valid_trailer_never_panics(
        b in damaged(samples().index[..samples().index.len() - 32].to_vec())
    ) {
        let mut b = b;
        let h = *blake3::hash(&b).as_bytes();
        b.extend_from_slice(&h);
        check_index(&b);
    }

    #[test]
    fn damaged_index_delta_never_panics(b in damaged(samples().delta.clone())) {
        check_index_delta(&b);
    }

    /// The same for the delta, below a recomputed trailer.
    #[test]
    fn damaged_index_delta_body_with_valid_trailer_never_panics(
        b in damaged(samples().delta[..samples().delta.len() - 32].to_vec())
    ) {
        let mut b = b;
        let h = *blake3::hash(&b).as_bytes();
        b.extend_from_slice(&h);
        check_index_delta(&b);
    }

    #[test]
    fn damaged_records_never_panic(
        (i, b) in (0..samples().records.len())
            .prop_flat_map(|i| (Just(i), damaged(samples().records[i].1.clone())))
    ) {
        check_record(samples().records[i].0, &b);
    }

    #[test]
    fn damaged_digests_never_panic(b in damaged(samples().digests[0].clone().into_bytes())) {
        check_digest(&b);
    }

    #[test]
    fn valid_trees_round_trip(mut entries in prop::collection::vec(entry(), 0..12)) {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries.dedup_by(|a, b| a.name == b.name);
        for e in &mut entries {
            if matches!(e.node, Node::Symlink { .. }) {
                e.mode = 0;
            }
        }
        let t = Tree { entries };
        let bytes = t.encode();
        let back = Tree::decode(&bytes).expect("a valid tree decodes");
        prop_assert_eq!(back.encode(), bytes);
    }
}
