//! State digests: across long random edit sequences, the digest a save
//! computes incrementally (parent digest − removed elements + added ones)
//! always equals a from-scratch recompute over the tree, and equals the
//! digest of the directory read from disk (`ckpt hash`), including after a
//! restore into another directory.

mod common;

use std::time::Duration;

use ckpt::checkpoint::{self, SaveOptions, SaveOutcome};
use ckpt::diff::TreeSource;
use ckpt::restore;
use ckpt::verify;
use ckpt::workspace::Workspace;
use common::*;
use proptest::prelude::*;

const T: Duration = Duration::from_secs(10);

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    #[test]
    fn incremental_digest_equals_recompute(start in arb_ops(5..30), rounds in proptest::collection::vec(arb_ops(1..12), 1..8)) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        populate(&root, &start);
        let ws = Workspace::init(&root, Some(&dir.path().join("store"))).unwrap();
        let mut last = None;
        for (i, ops) in rounds.iter().enumerate() {
            if i > 0 {
                apply(&ws.root, ops);
            }
            let store = ws.open_store(T).unwrap();
            let out = checkpoint::save(&ws, &store, &SaveOptions::default()).unwrap();
            let SaveOutcome::Saved(cp) = out else { continue };
            let reader = store.catalog.reader().unwrap();
            let src = TreeSource { fresh: None, catalog: &reader };
            let stored = verify::stored_digest(&cp).unwrap().expect("every save stores a digest");
            let recomputed = verify::tree_digest(&src, cp.root).unwrap();
            prop_assert_eq!(&stored, &recomputed, "incremental digest drifted at {}", cp.id());
            let (on_disk, _) = verify::hash_dir(&ws.root).unwrap();
            prop_assert_eq!(&stored, &on_disk, "hash of the directory differs from {}", cp.id());
            last = Some(cp);
        }
        if let Some(cp) = last {
            let store = ws.open_store(T).unwrap();
            let fork = dir.path().join("fork");
            restore::restore_to(&store, &cp.id(), &fork, &[]).unwrap();
            let (forked, _) = verify::hash_dir(&fork).unwrap();
            prop_assert_eq!(verify::stored_digest(&cp).unwrap().unwrap(), forked);
            let rep = verify::verify_workspace(&ws, &store, &cp.id()).unwrap();
            prop_assert!(rep.matches());
        }
    }
}

#[test]
fn verify_names_what_differs_and_store_check_finds_damage() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/a.txt"), b"alpha").unwrap();
    std::fs::write(root.join("b.txt"), b"beta").unwrap();
    let ws = Workspace::init(&root, Some(&dir.path().join("store"))).unwrap();
    let store = ws.open_store(T).unwrap();
    let SaveOutcome::Saved(cp) = checkpoint::save(&ws, &store, &SaveOptions::default()).unwrap()
    else {
        panic!()
    };
    assert!(verify::verify_workspace(&ws, &store, "HEAD")
        .unwrap()
        .matches());
    // Same size, same mtime: only a content re-read can see this.
    let mtime = std::fs::metadata(root.join("d/a.txt"))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::write(root.join("d/a.txt"), b"ALPHA").unwrap();
    std::fs::File::options()
        .write(true)
        .open(root.join("d/a.txt"))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let rep = verify::verify_workspace(&ws, &store, "HEAD").unwrap();
    assert!(!rep.matches());
    let paths: Vec<_> = rep.differences.iter().map(|c| c.path.clone()).collect();
    assert_eq!(paths, vec![b"d/a.txt".to_vec()]);
    // Damage an object: verify --store names it and the checkpoint.
    assert!(verify::verify_store(&store).unwrap().problems.is_empty());
    let h = ckpt::Hash::of(b"beta");
    let p = store.objects.object_path(&h);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&p, b"bet!").unwrap();
    let rep = verify::verify_store(&store).unwrap();
    assert_eq!(rep.problems.len(), 1, "{:?}", rep.problems);
    assert_eq!(rep.problems[0].id, h.to_hex());
    assert_eq!(rep.problems[0].checkpoints, vec![cp.id()]);
}
