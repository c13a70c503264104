//! `ckpt gc --keep-*`, the saved policy and `ckpt du` through the real
//! binary: flags reach the library rules, `--dry-run` changes nothing,
//! `--save-policy` is applied after later saves and by plain `gc`, and `du`
//! reports exactly the bytes only one checkpoint holds and exactly what gc
//! would free (on-disk bytes, as `du` and `gc` report them).

mod common;

use std::os::unix::fs::MetadataExt;

use common::*;
use serde_json::Value;

/// On-disk (allocated) bytes of the stored object of `content`.
fn on_disk(ws: &Ws, content: &[u8]) -> u64 {
    let hex = ckpt_lib::Hash::of(content).to_hex();
    let p = ws.store.join("objects").join(&hex[..2]).join(&hex[2..]);
    std::fs::metadata(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .blocks()
        * 512
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn log_len(ws: &Ws) -> usize {
    ws.run(&["log", "--json"]).ok().json()["checkpoints"]
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn keep_flags_dry_run_and_saved_policy() {
    let ws = Ws::new();
    ws.init();
    for i in 1..=4 {
        std::fs::write(ws.root.join("f"), format!("version {i}")).unwrap();
        let tag = format!("n={i}");
        let args: Vec<&str> = if i == 1 {
            vec!["save", "--tag", "pin=1"]
        } else {
            vec!["save", "--tag", &tag]
        };
        ws.run(&args).ok();
    }
    let dry = ws
        .run(&[
            "gc",
            "--keep-last",
            "1",
            "--keep-tagged",
            "pin",
            "--dry-run",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(ids(&dry["selection"]["keep"]), vec![1, 4]);
    assert_eq!(ids(&dry["selection"]["drop"]), vec![2, 3]);
    assert_eq!(dry["gc"]["objects_removed"], 2);
    assert_eq!(
        dry["gc"]["bytes_freed"],
        on_disk(&ws, b"version 2") + on_disk(&ws, b"version 3")
    );
    assert_eq!(log_len(&ws), 4, "dry run deleted something");

    // --keep-within: everything is younger than an hour, so nothing goes.
    let v = ws.run(&["gc", "--keep-within", "1h", "--json"]).ok().json();
    assert!(ids(&v["selection"]["drop"]).is_empty());
    let r = ws.run(&["gc", "--keep-within", "soon"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    let r = ws.run(&["gc", "--keep-last", "0"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());

    // Saved policy: applied after each save.
    ws.run(&["gc", "--keep-last", "2", "--save-policy"]).ok();
    assert_eq!(log_len(&ws), 2);
    for i in 5..=6 {
        std::fs::write(ws.root.join("f"), format!("version {i}")).unwrap();
        ws.run(&["save"]).ok();
        assert_eq!(log_len(&ws), 2);
    }
    let log = ws.run(&["log", "--json"]).ok().json();
    let kept: Vec<&str> = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(kept, vec!["v6", "v5"]);
    // Removing it: later saves keep everything.
    ws.run(&["gc", "--save-policy"]).ok();
    std::fs::write(ws.root.join("f"), "version 7").unwrap();
    ws.run(&["save"]).ok();
    assert_eq!(log_len(&ws), 3);
}

#[test]
fn du_reports_unique_and_unreferenced_bytes_exactly() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("shared"), "in every checkpoint").unwrap();
    std::fs::write(ws.root.join("one"), "x".repeat(1000)).unwrap();
    ws.save();
    std::fs::remove_file(ws.root.join("one")).unwrap();
    std::fs::write(ws.root.join("two"), "y".repeat(300)).unwrap();
    ws.save();
    let one = on_disk(&ws, "x".repeat(1000).as_bytes());
    let two = on_disk(&ws, "y".repeat(300).as_bytes());
    let du = ws.run(&["du", "--json"]).ok().json();
    let cps = du["checkpoints"].as_array().unwrap();
    assert_eq!(cps[0]["id"], "v1");
    assert_eq!(cps[0]["unique_bytes"], one);
    assert_eq!(cps[0]["unique_objects"], 1);
    assert_eq!(cps[1]["unique_bytes"], two);
    assert_eq!(du["unreferenced_bytes"], 0);
    assert_eq!(du["objects"], 3);
    // Deleting v1 makes its unique bytes unreferenced; gc frees exactly that.
    ws.run(&["delete", "v1"]).ok();
    let du = ws.run(&["du", "--json"]).ok().json();
    assert_eq!(du["unreferenced_bytes"], one);
    assert_eq!(du["unreferenced_objects"], 1);
    let gc = ws.run(&["gc", "--json"]).ok().json();
    assert_eq!(gc["bytes_freed"], one);
    let du = ws.run(&["du", "--json"]).ok().json();
    assert_eq!(du["unreferenced_bytes"], 0);
    assert_eq!(du["objects"], 2);
    let text = ws.run(&["du"]).ok().stdout;
    assert!(text.contains("gc would free: 0 B"), "{text}");
    assert!(
        text.contains(" on disk ("),
        "du says its sizes are on disk: {text}"
    );
}
