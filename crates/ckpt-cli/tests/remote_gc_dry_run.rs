//! `ckpt gc --remote --dry-run` reports exactly what `ckpt gc --remote`
//! then deletes (issue 60), outside the grace period: the same number of
//! packs and the same bytes, and those are the packs that leave the
//! remote. Against a `file://` remote, whose packs are plain files that the
//! test lists itself.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;

fn run_env(cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut c = command(
        cwd,
        &args.iter().map(std::ffi::OsStr::new).collect::<Vec<_>>(),
    );
    for (k, v) in env {
        c.env(k, v);
    }
    run_command(c, format!("ckpt {}", args.join(" ")))
}

/// The remote's packs and their lengths.
fn packs(remote: &Path) -> BTreeMap<String, u64> {
    match std::fs::read_dir(remote.join("packs")) {
        Ok(d) => d
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, e.metadata().unwrap().len())
            })
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

#[test]
fn remote_gc_dry_run_is_what_gc_deletes() {
    let dir = tempfile::tempdir_in(test_base()).unwrap();
    let remote = dir.path().join("r");
    let url = format!("file://{}", remote.display());
    let env = [("CKPT_REMOTE_PACK_BYTES", "65536")];
    let mut rng = Rng::new("remote_gc_dry_run", 3);
    let a = Ws::new();
    a.init();
    fill_dir(&a.root, "keep", 20, &mut rng);
    a.save();
    run_env(&a.root, &env, &["push", &url, "--workspace", "a"]).ok();
    // A killed push leaves packs no ref reaches.
    for i in 0..10 {
        write(&a.root, &format!("lost/{i}.bin"), &rng.bytes(40_000));
    }
    a.save();
    let killed = [env[0], ("CKPT_FAULT", "remote.push.after_pack:4")];
    assert_eq!(
        run_env(&a.root, &killed, &["push", &url, "--workspace", "a"]).code,
        None,
        "the push was not killed"
    );
    let gc = ["gc", "--remote", &url, "--grace", "0s", "--json"];
    // Within the grace (here: before the first gc condemned them) nothing
    // is deleted, and the dry run says so.
    let dry = run_env(&a.root, &env, &[&gc[..], &["--dry-run"]].concat())
        .ok()
        .json();
    assert_eq!(dry["deleted_packs"], 0, "{dry}");
    let g1 = run_env(&a.root, &env, &gc).ok().json();
    assert_eq!(g1["deleted_packs"], 0, "{g1}");
    assert!(g1["condemned_packs"].as_u64().unwrap() >= 4, "{g1}");

    // Condemned a grace ago: the dry run's figures are the real run's, and
    // they are the packs that left the remote.
    let before = packs(&remote);
    let dry = run_env(&a.root, &env, &[&gc[..], &["--dry-run"]].concat())
        .ok()
        .json();
    assert_eq!(packs(&remote), before, "a dry run deleted packs");
    let real = run_env(&a.root, &env, &gc).ok().json();
    let after = packs(&remote);
    let gone: Vec<(&String, &u64)> = before
        .iter()
        .filter(|(p, _)| !after.contains_key(*p))
        .collect();
    assert!(!gone.is_empty(), "nothing was deleted: {real}");
    assert_eq!(dry["deleted_packs"], real["deleted_packs"], "{dry}\n{real}");
    assert_eq!(dry["deleted_bytes"], real["deleted_bytes"], "{dry}\n{real}");
    assert_eq!(real["deleted_packs"], gone.len() as u64, "{real}");
    assert_eq!(
        real["deleted_bytes"],
        gone.iter().map(|(_, n)| **n).sum::<u64>(),
        "{real}"
    );
    // Nothing is left to delete, and the dry run says that too.
    let dry = run_env(&a.root, &env, &[&gc[..], &["--dry-run"]].concat())
        .ok()
        .json();
    assert_eq!(dry["deleted_packs"], 0, "{dry}");
    assert_eq!(dry["live_packs"], dry["stored_packs"], "{dry}");
}
