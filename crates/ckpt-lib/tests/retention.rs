//! Retention: the keep rules select exactly the expected survivors (a known
//! synthetic history, plus properties over random histories), and applying
//! a policy to a real store frees exactly the objects that only the dropped
//! checkpoints referenced.
//!
//! Ages are controlled honestly: [`ckpt_lib::store::retention::select`] and
//! [`ckpt_lib::store::retention::apply`] take `now` as an argument, so the tests pick
//! a `now` relative to the recorded checkpoint times instead of faking the
//! clock.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ckpt_lib::engine::save::{self, SaveJob, SaveOutcome};
use ckpt_lib::store::catalog::Checkpoint;
use ckpt_lib::store::retention::{self, Policy};
use ckpt_lib::workspace::Workspace;
use ckpt_lib::Config;
use ckpt_lib::Hash;
use proptest::prelude::*;

const T: Duration = Duration::from_secs(10);
const HOUR: i64 = 3_600_000_000_000;

fn cp(seq: u64, time_ns: i64, tags: &[(&str, &str)]) -> Checkpoint {
    common::record(seq, time_ns, "", tags)
}

#[test]
fn known_history_gives_exactly_the_expected_survivors() {
    let now = 1_000 * HOUR;
    // v1..v8, ages 72h, 48h, 30h, 25h, 23h, 5h, 1h, 0h.
    let ages = [72, 48, 30, 25, 23, 5, 1, 0];
    let tags: [&[(&str, &str)]; 8] = [
        &[("pin", "yes")],
        &[],
        &[("session", "a")],
        &[],
        &[],
        &[("session", "b")],
        &[],
        &[],
    ];
    let history: Vec<Checkpoint> = ages
        .iter()
        .zip(tags)
        .enumerate()
        .map(|(i, (age, t))| cp(i as u64 + 1, now - age * HOUR, t))
        .collect();
    let policy = Policy {
        keep_last: Some(2),
        keep_within_secs: Some(24 * 3600),
        keep_tagged: vec!["pin".into(), "session=a".into()],
    };
    // head is v4 (a restore moved it back): protected.
    let sel = retention::select(&history, &[4], &policy, now);
    assert_eq!(sel.keep, vec![1, 3, 4, 5, 6, 7, 8]);
    assert_eq!(sel.drop, vec![2]);

    let only_last = Policy {
        keep_last: Some(3),
        ..Default::default()
    };
    let sel = retention::select(&history, &[8], &only_last, now);
    assert_eq!(sel.keep, vec![6, 7, 8]);
    assert_eq!(sel.drop, vec![1, 2, 3, 4, 5]);

    // A tag value that differs does not keep; a bare key does.
    let tag_value = Policy {
        keep_tagged: vec!["session=b".into()],
        ..Default::default()
    };
    assert_eq!(
        retention::select(&history, &[], &tag_value, now).keep,
        vec![6]
    );
    let tag_key = Policy {
        keep_tagged: vec!["session".into()],
        ..Default::default()
    };
    assert_eq!(
        retention::select(&history, &[], &tag_key, now).keep,
        vec![3, 6]
    );
    // Exactly 25 h old (v4) is not within 25 h.
    let within = Policy {
        keep_within_secs: Some(25 * 3600),
        ..Default::default()
    };
    assert_eq!(
        retention::select(&history, &[], &within, now).keep,
        vec![5, 6, 7, 8]
    );
    // No rule: keep everything.
    assert_eq!(
        retention::select(&history, &[], &Policy::default(), now).keep,
        (1..=8).collect::<Vec<_>>()
    );
}

fn arb_history() -> impl Strategy<Value = Vec<Checkpoint>> {
    prop::collection::vec((0i64..100, prop::option::of(0usize..3)), 0..20).prop_map(|v| {
        let keys = ["a", "b", "c"];
        v.into_iter()
            .enumerate()
            .map(|(i, (age_h, tag))| {
                let t: Vec<(&str, &str)> = tag.map(|k| (keys[k], "x")).into_iter().collect();
                cp(i as u64 + 1, 200 * HOUR - age_h * HOUR, &t)
            })
            .collect()
    })
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    (
        prop::option::of(0usize..6),
        prop::option::of(0u64..120),
        prop::collection::vec(prop::sample::select(vec!["a", "b=x", "c=y"]), 0..2),
    )
        .prop_map(|(last, within_h, tags)| Policy {
            keep_last: last,
            keep_within_secs: within_h.map(|h| h * 3600),
            keep_tagged: tags.into_iter().map(String::from).collect(),
        })
}

proptest! {
    /// Survivors are exactly those some rule keeps (an independent oracle:
    /// rank counted, not sorted), keep and drop partition the history, and
    /// protected checkpoints always survive.
    #[test]
    fn selection_matches_the_rules(history in arb_history(), policy in arb_policy(), head in 0u64..25) {
        let now = 200 * HOUR;
        let protected = [head];
        let sel = retention::select(&history, &protected, &policy, now);
        let all: BTreeSet<u64> = history.iter().map(|c| c.seq).collect();
        let keep: BTreeSet<u64> = sel.keep.iter().copied().collect();
        let drop: BTreeSet<u64> = sel.drop.iter().copied().collect();
        prop_assert!(keep.is_disjoint(&drop));
        prop_assert_eq!(keep.union(&drop).copied().collect::<BTreeSet<_>>(), all);
        for c in &history {
            let rank = history.iter().filter(|o| o.seq > c.seq).count();
            let by_rule = policy.is_empty()
                || c.seq == head
                || policy.keep_last.is_some_and(|n| rank < n)
                || policy.keep_within_secs.is_some_and(|s| now - c.time_ns < s as i64 * 1_000_000_000)
                || policy.keep_tagged.iter().any(|r| match r.split_once('=') {
                    Some((k, v)) => c.tags.get(k).map(String::as_str) == Some(v),
                    None => c.tags.contains_key(r.as_str()),
                });
            prop_assert_eq!(keep.contains(&c.seq), by_rule, "v{}", c.seq);
        }
        // Widening a rule never drops more (an empty policy is "no policy",
        // which keeps everything, so it is not a rule to widen).
        prop_assume!(!policy.is_empty());
        let mut wider = policy.clone();
        wider.keep_last = Some(wider.keep_last.unwrap_or(0) + 1);
        let wider_keep: BTreeSet<u64> =
            retention::select(&history, &protected, &wider, now).keep.into_iter().collect();
        prop_assert!(keep.is_subset(&wider_keep));
    }
}

fn save(ws: &Workspace, tags: &[(&str, &str)]) -> Checkpoint {
    let store = ws.open_store(&Config::locking(T)).unwrap();
    let opts = SaveJob {
        tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..Default::default()
    };
    match save::save(ws, &store, &opts).unwrap() {
        SaveOutcome::Saved(cp) => cp,
        SaveOutcome::Unchanged(_) => panic!("expected a checkpoint"),
    }
}

/// Seven checkpoints; each writes a new version of `shared` and a file
/// `only-i` that exists in that checkpoint alone. Dropping v1, v3, v4 must
/// free exactly their `shared` and `only` objects, byte for byte, and no
/// other; the survivors still verify.
#[test]
fn apply_frees_exactly_the_unreferenced_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let ws = Workspace::init(&root, Some(&tmp.path().join("store")), None).unwrap();
    std::fs::write(root.join("base"), b"always here").unwrap();
    let mut cps = Vec::new();
    let mut contents: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for i in 1..=7u64 {
        let shared = format!("shared version {i} {}", "s".repeat(i as usize * 100)).into_bytes();
        let only = format!("only in v{i} {}", "o".repeat(i as usize * 37)).into_bytes();
        std::fs::write(root.join("shared"), &shared).unwrap();
        if i > 1 {
            std::fs::remove_file(root.join(format!("only-{}", i - 1))).unwrap();
        }
        std::fs::write(root.join(format!("only-{i}")), &only).unwrap();
        let tags: &[(&str, &str)] = if i == 2 { &[("keep", "yes")] } else { &[] };
        cps.push(save(&ws, tags));
        contents.push((shared, only));
    }
    let policy = Policy {
        keep_last: Some(1),
        keep_within_secs: Some(3600),
        keep_tagged: vec!["keep".into()],
    };
    // v5 is 1 ns younger than an hour, v4 older.
    let now = cps[4].time_ns + HOUR - 1;
    assert!(cps[3].time_ns < cps[4].time_ns);
    let dropped = [1usize, 3, 4];
    let freed: Vec<&Vec<u8>> = dropped
        .iter()
        .flat_map(|&v| [&contents[v - 1].0, &contents[v - 1].1])
        .collect();
    // On-disk bytes, as gc reports them.
    let freed_bytes: u64 = freed
        .iter()
        .map(|c| {
            let hex = Hash::of(c).to_hex();
            let p = tmp
                .path()
                .join("store/objects")
                .join(&hex[..2])
                .join(&hex[2..]);
            std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(p).unwrap()) * 512
        })
        .sum();
    assert!(freed_bytes > 0);

    let store = ws.open_store(&Config::locking(T)).unwrap();
    let dry = retention::apply(&store, &policy, now, true).unwrap();
    assert_eq!(dry.selection.keep, vec![2, 5, 6, 7]);
    assert_eq!(dry.selection.drop, vec![1, 3, 4]);
    let g = dry.gc.as_ref().unwrap();
    assert_eq!(g.objects_removed, freed.len() as u64);
    assert_eq!(g.bytes_freed, freed_bytes);
    assert_eq!(
        store.catalog.reader().unwrap().checkpoints().unwrap().len(),
        7
    );
    for c in &freed {
        assert!(store.objects.contains(&Hash::of(c)), "dry run removed data");
    }

    let rep = retention::apply(&store, &policy, now, false).unwrap();
    assert_eq!(rep.selection, dry.selection);
    let g = rep.gc.as_ref().unwrap();
    assert_eq!(g.objects_removed, freed.len() as u64);
    assert_eq!(g.bytes_freed, freed_bytes);
    let left: Vec<u64> = store
        .catalog
        .reader()
        .unwrap()
        .checkpoints()
        .unwrap()
        .iter()
        .map(|c| c.seq)
        .collect();
    assert_eq!(left, vec![2, 5, 6, 7]);
    for (i, (shared, only)) in contents.iter().enumerate() {
        let gone = dropped.contains(&(i + 1));
        assert_eq!(
            store.objects.contains(&Hash::of(shared)),
            !gone,
            "shared v{}",
            i + 1
        );
        assert_eq!(
            store.objects.contains(&Hash::of(only)),
            !gone,
            "only v{}",
            i + 1
        );
    }
    assert!(store.objects.contains(&Hash::of(b"always here")));
    // A second gc finds nothing more; every survivor's data is intact.
    let again = ckpt_lib::store::gc::gc(&store, false).unwrap();
    assert_eq!(again.objects_removed, 0);
    let vs = ckpt_lib::engine::verify::verify_store(&store).unwrap();
    assert!(vs.problems.is_empty(), "{:?}", vs.problems);
}

/// The persistent policy is stored, applied after a save only when it drops
/// something, and an empty policy removes it.
#[test]
fn configured_policy_round_trips_and_applies() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let ws = Workspace::init(&root, Some(&tmp.path().join("store")), None).unwrap();
    {
        let store = ws.open_store(&Config::locking(T)).unwrap();
        assert!(retention::configured(&store).unwrap().is_empty());
        let p = Policy {
            keep_last: Some(2),
            ..Default::default()
        };
        retention::set_configured(&store, &p).unwrap();
        assert_eq!(retention::configured(&store).unwrap(), p);
    }
    for i in 0..4 {
        std::fs::write(root.join("f"), format!("v{i}")).unwrap();
        save(&ws, &[]);
        let store = ws.open_store(&Config::locking(T)).unwrap();
        let policy = retention::configured(&store).unwrap();
        let rep = retention::apply_due(&store, &policy, i64::MAX).unwrap();
        assert_eq!(rep.is_some(), i >= 2, "save {i}");
        let n = store.catalog.reader().unwrap().checkpoints().unwrap().len();
        assert_eq!(n, (i + 1).min(2));
    }
    let store = ws.open_store(&Config::locking(T)).unwrap();
    retention::set_configured(&store, &Policy::default()).unwrap();
    assert!(retention::configured(&store).unwrap().is_empty());
}
