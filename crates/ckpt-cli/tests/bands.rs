//! Large files stored as 8 MiB content-addressed bands (see
//! `ckpt_lib::store::bands`), through the real binary with `CKPT_BAND_MIN=1` so every
//! file above the small-file limit is banded (the test store is on a
//! filesystem without reflink, where banding applies):
//! - random in-place edits, appends and truncations round-trip exactly
//!   through save and restore (proptest), `verify --store` passes, and the
//!   state digest of a restored directory equals `ckpt hash` of the model;
//! - an in-place edit inside one band stores exactly one new band;
//! - gc keeps the bands of live files and frees the others.

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;

use common::Rng;
use common::*;
use proptest::prelude::*;

const BAND: usize = 8 << 20;

fn run(cwd: &Path, args: &[&str]) -> Run {
    let mut c = command(cwd, &args.iter().map(|a| a.as_ref()).collect::<Vec<_>>());
    c.env("CKPT_BAND_MIN", "1");
    run_command(c, format!("ckpt {}", args.join(" ")))
}

/// (plain objects, band manifests) in a store.
fn count_objects(store: &Path) -> (usize, usize) {
    let mut plain = 0;
    let mut manifests = 0;
    for shard in std::fs::read_dir(store.join("objects")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            if f.unwrap().file_name().to_string_lossy().ends_with(".bands") {
                manifests += 1;
            } else {
                plain += 1;
            }
        }
    }
    (plain, manifests)
}

fn save(ws: &Ws) -> (String, u64) {
    let v = run(&ws.root, &["save", "--json", "--allow-empty"])
        .ok()
        .json();
    let id = v["id"].as_str().unwrap().to_string();
    let new_bytes = v["stats"]["new_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no stats.new_bytes in {v}"));
    (id, new_bytes)
}

#[derive(Clone, Debug)]
enum Op {
    Edit { at: usize, len: usize, byte: u8 },
    Append { len: usize, byte: u8 },
    Truncate { to: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..40 << 20, 1usize..70_000, any::<u8>())
            .prop_map(|(at, len, byte)| Op::Edit { at, len, byte }),
        1 => (1usize..10 << 20, any::<u8>()).prop_map(|(len, byte)| Op::Append { len, byte }),
        1 => (0usize..40 << 20).prop_map(|to| Op::Truncate { to }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    #[test]
    fn banded_files_round_trip(ops in proptest::collection::vec(op(), 1..5), seed in any::<u64>()) {
        let ws = Ws::new();
        let mut rng = Rng::new("banded_files_round_trip", seed);
        let mut model = rng.bytes(20 << 20 | 4321);
        write(&ws.root, "db.bin", &model);
        write(&ws.root, "small.txt", b"small files are never banded");
        ws.init();
        let mut versions = vec![(save(&ws).0, model.clone())];
        for op in &ops {
            let path = ws.root.join("db.bin");
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            match *op {
                Op::Edit { at, len, byte } => {
                    let at = at % model.len().max(1);
                    let len = len.min(model.len() - at);
                    let data = vec![byte; len];
                    f.write_all_at(&data, at as u64).unwrap();
                    model[at..at + len].copy_from_slice(&data);
                }
                Op::Append { len, byte } => {
                    let data = vec![byte; len];
                    f.write_all_at(&data, model.len() as u64).unwrap();
                    model.extend_from_slice(&data);
                }
                Op::Truncate { to } => {
                    let to = to.min(model.len());
                    f.set_len(to as u64).unwrap();
                    model.truncate(to);
                }
            }
            drop(f);
            versions.push((save(&ws).0, model.clone()));
        }
        run(&ws.root, &["verify", "--store"]).ok();
        for (id, want) in &versions {
            let dest = ws.fresh_dir();
            run(&ws.root, &["restore", id, "--to", dest.to_str().unwrap()]).ok();
            let got = std::fs::read(dest.join("db.bin")).unwrap();
            prop_assert!(got.len() == want.len() && got == *want, "{}: db.bin differs", id);
            // The digest does not depend on banding: a plain directory with
            // the model's bytes hashes the same as the restored one.
            let plain = ws.fresh_dir();
            write(&plain, "db.bin", want);
            write(&plain, "small.txt", b"small files are never banded");
            std::fs::File::open(dest.join("db.bin")).unwrap();
            let hash = |d: &Path| run(&ws.root, &["hash", d.to_str().unwrap()]).ok().stdout;
            let (a, b) = (hash(&plain), hash(&dest));
            prop_assert_eq!(a, b);
            remove_tree(&dest);
            remove_tree(&plain);
        }
        // In place, back to the first version, exactly.
        run(&ws.root, &["restore", &versions[0].0, "--no-save"]).ok();
        prop_assert!(std::fs::read(ws.root.join("db.bin")).unwrap() == versions[0].1);
        run(&ws.root, &["verify", &versions[0].0]).ok();
    }
}

#[test]
fn one_band_edit_stores_one_band_and_gc_keeps_live_bands() {
    let ws = Ws::new();
    let mut rng = Rng::new("one_band_edit", Rng::time_seed());
    let data = rng.bytes(5 * BAND + 777);
    write(&ws.root, "vm.img", &data);
    ws.init();
    let (v1, stored1) = save(&ws);
    assert_eq!(stored1, data.len() as u64, "first save stores every band");
    assert_eq!(count_objects(&ws.store), (6, 1), "6 bands and one manifest");
    // Same content elsewhere: nothing new.
    write(&ws.root, "copy.img", &data);
    let (_, stored) = save(&ws);
    assert_eq!(stored, 0, "identical content stored again");
    // 4 KiB in place inside band 2.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(ws.root.join("vm.img"))
        .unwrap();
    f.write_all_at(&rng.bytes(4096), (2 * BAND + 100) as u64)
        .unwrap();
    drop(f);
    let (v3, stored3) = save(&ws);
    assert_eq!(
        stored3, BAND as u64,
        "a one-band edit must store exactly one band"
    );
    assert_eq!(
        count_objects(&ws.store),
        (7, 2),
        "one new band and one manifest"
    );
    let want_v3 = snapshot(&ws.root);
    // The digest of a banded file equals that of the plain file.
    let digest = |dir: &Path| ckpt(&ws.root, &["hash", dir.to_str().unwrap()]).ok().stdout;
    let plain = ws.fresh_dir();
    std::fs::create_dir(&plain).unwrap();
    std::fs::copy(ws.root.join("vm.img"), plain.join("vm.img")).unwrap();
    std::fs::copy(ws.root.join("copy.img"), plain.join("copy.img")).unwrap();
    assert_eq!(digest(&plain), digest(&ws.root));
    run(&ws.root, &["verify"]).ok();
    // Drop v1 and v2 and gc: the replaced band goes only if nothing needs it
    // (copy.img still holds the original content, so all bands stay).
    run(&ws.root, &["delete", &v1]).ok();
    run(&ws.root, &["gc"]).ok();
    assert_eq!(count_objects(&ws.store), (7, 2));
    std::fs::remove_file(ws.root.join("copy.img")).unwrap();
    let (v4, _) = save(&ws);
    for id in ws.log_ids() {
        if id != v4 {
            run(&ws.root, &["delete", &id]).ok();
        }
    }
    run(&ws.root, &["gc"]).ok();
    assert_eq!(count_objects(&ws.store), (6, 1), "gc kept only v4's bands");
    run(&ws.root, &["verify", "--store"]).ok();
    let got = ws.materialise(&v4);
    let mut want = want_v3;
    want.remove(&b"copy.img"[..]);
    assert_same(&want, &got, "v4 after gc");
    let _ = v3;
    // A damaged band is found by verify --store and refused by restore.
    let band = std::fs::read_dir(ws.store.join("objects"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .find(|p| {
            !p.to_string_lossy().ends_with(".bands")
                && std::fs::metadata(p).unwrap().len() == BAND as u64
        })
        .unwrap();
    let mut perms = std::fs::metadata(&band).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
    std::fs::set_permissions(&band, perms).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&band).unwrap();
    f.write_all_at(b"rot", 5).unwrap();
    drop(f);
    assert_eq!(run(&ws.root, &["verify", "--store"]).code, Some(5));
    let dest = ws.fresh_dir();
    let r = run(&ws.root, &["restore", &v4, "--to", dest.to_str().unwrap()]);
    assert_eq!(r.code, Some(5), "{}", r.dump());
    assert!(!dest.exists(), "a refused restore created its destination");
}
