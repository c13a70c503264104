//! State digests: across long random edit sequences, the digest a save
//! computes incrementally (parent digest − removed elements + added ones)
//! always equals a from-scratch recompute over the tree, and equals the
//! digest of the directory read from disk (`ckpt hash`), including after a
//! restore into another directory.

mod common;

use std::time::Duration;

use ckpt_lib::engine::diff::TreeSource;
use ckpt_lib::engine::materialize;
use ckpt_lib::engine::save::{self, SaveJob, SaveOutcome};
use ckpt_lib::engine::{digest, verify};
use ckpt_lib::workspace::Workspace;
use ckpt_lib::Config;
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
        let ws = Workspace::init(&root, Some(&dir.path().join("store")), None).unwrap();
        let mut last = None;
        for (i, ops) in rounds.iter().enumerate() {
            if i > 0 {
                apply(&ws.root, ops);
            }
            let store = ws.open_store(&Config::locking(T)).unwrap();
            let out = save::save(&ws, &store, &SaveJob::default()).unwrap();
            let SaveOutcome::Saved(cp) = out else { continue };
            let reader = store.catalog.reader().unwrap();
            let src = TreeSource { fresh: None, catalog: &reader };
            let stored = digest::stored_digest(&cp).unwrap().expect("every save stores a digest");
            let recomputed = digest::tree_digest(&src, cp.root).unwrap();
            prop_assert_eq!(&stored, &recomputed, "incremental digest drifted at {}", cp.id());
            let (on_disk, _) = verify::hash_dir(&ws.root).unwrap();
            prop_assert_eq!(&stored, &on_disk, "hash of the directory differs from {}", cp.id());
            last = Some(cp);
        }
        if let Some(cp) = last {
            let store = ws.open_store(&Config::locking(T)).unwrap();
            let fork = dir.path().join("fork");
            materialize::restore_to(&store, &cp.id(), &fork, &[]).unwrap();
            let (forked, _) = verify::hash_dir(&fork).unwrap();
            prop_assert_eq!(digest::stored_digest(&cp).unwrap().unwrap(), forked);
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
    let ws = Workspace::init(&root, Some(&dir.path().join("store")), None).unwrap();
    let store = ws.open_store(&Config::locking(T)).unwrap();
    let SaveOutcome::Saved(cp) = save::save(&ws, &store, &SaveJob::default()).unwrap() else {
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
    let h = ckpt_lib::Hash::of(b"beta");
    let p = store.objects.object_path(&h);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&p, b"bet!").unwrap();
    let rep = verify::verify_store(&store).unwrap();
    assert_eq!(rep.problems.len(), 1, "{:?}", rep.problems);
    assert_eq!(rep.problems[0].id, h.to_hex());
    assert_eq!(rep.problems[0].checkpoints, vec![cp.id()]);
}

/// Known-answer vector: a fixed small tree and its `ckpt hash` checksum.
/// Another implementation following docs/FORMAT.md must produce the same
/// value; any change to the element encoding changes it.
#[test]
fn known_answer_vector_for_a_fixed_tree() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(root.join("README"), b"hello\n").unwrap();
    std::fs::write(root.join("src/main.rs"), b"fn main() {}\n").unwrap();
    std::fs::write(root.join("run.sh"), b"#!/bin/sh\necho hi\n").unwrap();
    std::os::unix::fs::symlink("src/main.rs", root.join("link")).unwrap();
    for (p, m) in [
        ("README", 0o644),
        ("src/main.rs", 0o644),
        ("run.sh", 0o755),
        ("src", 0o755),
        ("empty", 0o700),
    ] {
        std::fs::set_permissions(root.join(p), std::fs::Permissions::from_mode(m)).unwrap();
    }
    let (d, _) = verify::hash_dir(&root).unwrap();
    let hex: String = d.checksum().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, KNOWN_FIXED_TREE, "the digest encoding changed");
}

const KNOWN_FIXED_TREE: &str = "68b40d2af4ff0b6aa724a2831e2c9f86f4c2c6a08632ccc9813e998e30be3b79";

#[test]
fn a_deleted_object_names_the_checkpoints_that_need_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("keep"), b"kept in both").unwrap();
    std::fs::write(root.join("gone"), b"only in v1 and v2").unwrap();
    let ws = Workspace::init(&root, Some(&dir.path().join("store")), None).unwrap();
    let store = ws.open_store(&Config::locking(T)).unwrap();
    save::save(&ws, &store, &SaveJob::default()).unwrap();
    std::fs::write(root.join("keep2"), b"v2").unwrap();
    save::save(&ws, &store, &SaveJob::default()).unwrap();
    std::fs::remove_file(root.join("gone")).unwrap();
    save::save(&ws, &store, &SaveJob::default()).unwrap();
    let h = ckpt_lib::Hash::of(b"only in v1 and v2");
    std::fs::remove_file(store.objects.object_path(&h)).unwrap();
    let rep = verify::verify_store(&store).unwrap();
    assert_eq!(rep.problems.len(), 1, "{:?}", rep.problems);
    assert_eq!(rep.problems[0].id, h.to_hex());
    assert_eq!(
        rep.problems[0].checkpoints,
        vec!["v1".to_string(), "v2".to_string()]
    );
}
