//! `ckpt state …` and agent state in save/restore/diff/show/log/gc, driving
//! the real binary: put from an argument and from stdin (exact bytes),
//! `--json-value` validation (exit 2), get/ls/history/del JSON fields
//! (`key_hex`/`value_hex` for non-UTF-8), get of a missing key (exit 8),
//! cas success and mismatch (exit 7, JSON `ok: false`), `state_version` in
//! save/show/log JSON, restore bringing back files and state together and
//! its undo id, `--files-only`/`--state-only`, `state_changes` in diff JSON,
//! and gc keeping the versions checkpoints pin.

mod common;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;

use common::*;
use serde_json::Value;

fn ws_with_file() -> Ws {
    let ws = Ws::new();
    write(&ws.root, "notes.md", b"plan A\n");
    ws.init();
    ws
}

/// `ckpt state put KEY` with `stdin` as the value.
fn put_stdin(ws: &Ws, args: &[&str], stdin: &[u8]) -> Run {
    let a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let mut child = command(&ws.root, &a)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    finish(child, &format!("ckpt {} < stdin", args.join(" ")))
}

fn read(root: &std::path::Path, rel: &str) -> Vec<u8> {
    std::fs::read(root.join(rel)).unwrap()
}

fn get(ws: &Ws, key: &str) -> Option<String> {
    let r = ws.run(&["state", "get", key]);
    match r.code {
        Some(0) => Some(r.stdout),
        Some(8) => None,
        _ => panic!("state get {key}: {}", r.dump()),
    }
}

fn state_json(ws: &Ws, args: &[&str]) -> Value {
    let mut a = vec!["state"];
    a.extend_from_slice(args);
    a.push("--json");
    ws.run(&a).ok().json()
}

#[test]
fn put_get_del_ls_history_json() {
    let ws = ws_with_file();
    // No state yet: reads work and create nothing.
    assert_eq!(get(&ws, "plan"), None);
    assert!(!ws.store.join("state.redb").exists());
    let v = state_json(&ws, &["ls"]);
    assert_eq!(v["entries"], Value::Array(vec![]));

    let v = state_json(&ws, &["put", "plan", "step 1"]);
    assert_eq!(v["key"], "plan");
    let v1 = v["version"].as_u64().unwrap();
    assert!(v1 >= 1);
    assert_eq!(get(&ws, "plan").as_deref(), Some("step 1"));

    // From stdin, byte for byte (trailing newline kept, not UTF-8 allowed).
    put_stdin(&ws, &["state", "put", "blob"], b"line\n\xff\x00end").ok();
    let r = ws.run(&["state", "get", "blob"]).ok();
    let raw = command(
        &ws.root,
        &[OsStr::new("state"), OsStr::new("get"), OsStr::new("blob")],
    )
    .output()
    .unwrap();
    assert_eq!(raw.stdout, b"line\n\xff\x00end", "{}", r.dump());
    let v = state_json(&ws, &["get", "blob"]);
    assert_eq!(v["found"], true);
    assert_eq!(v["value_hex"], "6c696e650aff00656e64");
    assert!(v["value"].is_string());

    // A non-UTF-8 key.
    ws.run_os(&[
        OsStr::new("state"),
        OsStr::new("put"),
        OsStr::from_bytes(b"k\xfe"),
        OsStr::new("v"),
    ])
    .ok();

    // --json-value must parse.
    put_stdin(
        &ws,
        &["state", "put", "cfg", "--json-value"],
        b"{\"a\": [1, 2]}",
    )
    .ok();
    let r = ws
        .run(&["state", "put", "cfg", "{not json", "--json-value"])
        .code(2);
    assert!(r.stderr.contains("not valid JSON"), "{}", r.dump());
    assert_eq!(get(&ws, "cfg").as_deref(), Some("{\"a\": [1, 2]}"));

    let v = state_json(&ws, &["ls"]);
    let entries = v["entries"].as_array().unwrap();
    let keys: Vec<&str> = entries.iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["blob", "cfg", "k\u{fffd}", "plan"]);
    assert_eq!(entries[2]["key_hex"], "6bfe");
    assert!(entries[3].get("key_hex").is_none());
    assert_eq!(entries[3]["value"], "step 1");
    assert_eq!(entries[3]["version"], v1);
    assert_eq!(entries[3]["size"], 6);
    let v = state_json(&ws, &["ls", "p"]);
    assert_eq!(v["entries"].as_array().unwrap().len(), 1);

    ws.run(&["state", "put", "plan", "step 2"]).ok();
    let v = state_json(&ws, &["del", "plan"]);
    assert_eq!(v["deleted"], true);
    let v_del = v["version"].as_u64().unwrap();
    assert_eq!(get(&ws, "plan"), None);
    let r = ws.run(&["state", "get", "plan"]).code(8);
    assert!(r.stderr.contains("no key"), "{}", r.dump());
    // Deleting again succeeds and commits nothing.
    let v = state_json(&ws, &["del", "plan"]);
    assert_eq!(v["deleted"], false);
    assert_eq!(v["version"], v_del);

    let v = state_json(&ws, &["history", "plan"]);
    let h = v["history"].as_array().unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!(h[0]["value"], "step 1");
    assert_eq!(h[0]["deleted"], false);
    assert_eq!(h[1]["value"], "step 2");
    assert_eq!(h[2]["deleted"], true);
    assert_eq!(h[2]["version"], v_del);

    // --at reads an old version.
    let v = state_json(&ws, &["get", "plan", "--at", &v1.to_string()]);
    assert_eq!(v["value"], "step 1");
    assert_eq!(v["at"], v1);
}

#[test]
fn cas_success_and_mismatch_exit_7() {
    let ws = ws_with_file();
    let v = state_json(&ws, &["cas", "lock", "0", "me"]);
    assert_eq!(v["ok"], true);
    let v1 = v["version"].as_u64().unwrap();
    // Insert-if-absent again: mismatch.
    let r = ws.run(&["state", "cas", "lock", "0", "you"]).code(7);
    assert!(r.stderr.contains("compare-and-swap"), "{}", r.dump());
    let r = ws
        .run(&["state", "cas", "lock", "0", "you", "--json"])
        .code(7);
    let v = r.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["expected"], 0);
    assert_eq!(v["actual"], v1);
    assert_eq!(get(&ws, "lock").as_deref(), Some("me"));
    // With the right version it succeeds; value from stdin.
    put_stdin(&ws, &["state", "cas", "lock", &v1.to_string()], b"you").ok();
    assert_eq!(get(&ws, "lock").as_deref(), Some("you"));
}

#[test]
fn save_restore_undo_brings_files_and_state_back() {
    let ws = ws_with_file();
    ws.run(&["state", "put", "plan", "A"]).ok();
    ws.run(&["state", "put", "step", "1"]).ok();
    let saved = ws.run(&["save", "--json"]).ok().json();
    let id = saved["id"].as_str().unwrap().to_string();
    let sv = saved["state_version"]
        .as_u64()
        .expect("state_version in save JSON");
    let show = ws.run(&["show", &id, "--json"]).ok().json();
    assert_eq!(show["state_version"], sv);
    let log = ws.run(&["log", "--json"]).ok().json();
    assert_eq!(log["checkpoints"][0]["state_version"], sv);
    assert!(ws
        .run(&["show", &id])
        .ok()
        .stdout
        .contains(&format!("state:    version {sv}")));

    write(&ws.root, "notes.md", b"plan B\n");
    ws.run(&["state", "put", "plan", "B"]).ok();
    ws.run(&["state", "del", "step"]).ok();
    ws.run(&["state", "put", "extra", "x"]).ok();

    // diff: files and state keys.
    let d = ws.run(&["diff", &id, "--json"]).ok().json();
    assert_eq!(d["state_from"], sv);
    let mut sc: Vec<(String, String)> = d["state_changes"]
        .as_array()
        .expect("state_changes")
        .iter()
        .map(|c| {
            (
                c["key"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    sc.sort();
    assert_eq!(
        sc,
        [
            ("extra".to_string(), "added".to_string()),
            ("plan".into(), "changed".into()),
            ("step".into(), "removed".into()),
        ]
    );
    let plan = d["state_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "plan")
        .unwrap();
    assert_eq!(plan["old"]["value"], "A");
    assert_eq!(plan["new"]["value"], "B");
    let text = ws.run(&["diff", &id, "--name-status"]).ok().stdout;
    assert!(text.contains("state M plan"), "{text}");

    let r = ws.run(&["restore", &id, "--json"]).ok().json();
    assert_eq!(read(&ws.root, "notes.md"), b"plan A\n");
    assert_eq!(get(&ws, "plan").as_deref(), Some("A"));
    assert_eq!(get(&ws, "step").as_deref(), Some("1"));
    assert_eq!(get(&ws, "extra"), None);
    assert_eq!(r["state"]["target"], sv);
    assert_eq!(r["state"]["changes"].as_array().unwrap().len(), 3);
    let after = r["state"]["after"].as_u64().unwrap();
    assert!(after > r["state"]["before"].as_u64().unwrap());

    // Nothing changed since the restored checkpoint, state included.
    let s = ws.run(&["save", "--json"]).ok().json();
    assert_eq!(s["saved"], false, "{s}");

    let undo = r["undo"].as_str().unwrap().to_string();
    ws.run(&["restore", &undo]).ok();
    assert_eq!(read(&ws.root, "notes.md"), b"plan B\n");
    assert_eq!(get(&ws, "plan").as_deref(), Some("B"));
    assert_eq!(get(&ws, "step"), None);
    assert_eq!(get(&ws, "extra").as_deref(), Some("x"));
}

#[test]
fn restore_files_only_and_state_only() {
    let ws = ws_with_file();
    ws.run(&["state", "put", "k", "old"]).ok();
    let (id, _) = ws.save();
    write(&ws.root, "notes.md", b"new\n");
    ws.run(&["state", "put", "k", "new"]).ok();

    let r = ws
        .run(&["restore", &id, "--files-only", "--json"])
        .ok()
        .json();
    assert_eq!(r["state"], Value::Null);
    assert_eq!(read(&ws.root, "notes.md"), b"plan A\n");
    assert_eq!(get(&ws, "k").as_deref(), Some("new"));

    write(&ws.root, "notes.md", b"newer\n");
    let r = ws.run(&["restore", &id, "--state-only"]).ok();
    assert!(
        r.stdout.contains("restored the agent state of"),
        "{}",
        r.dump()
    );
    assert_eq!(get(&ws, "k").as_deref(), Some("old"));
    assert_eq!(read(&ws.root, "notes.md"), b"newer\n");

    ws.run(&["restore", &id, "--files-only", "--state-only"])
        .code(2);
    let to = ws.fresh_dir();
    ws.run(&["restore", &id, "--state-only", "--to", to.to_str().unwrap()])
        .code(2);
}

#[test]
fn gc_keeps_pinned_state_versions() {
    let ws = ws_with_file();
    ws.run(&["state", "put", "k", "pinned"]).ok();
    let saved = ws.run(&["save", "--json"]).ok().json();
    let sv = saved["state_version"].as_u64().unwrap();
    let unpinned = state_json(&ws, &["put", "k", "unpinned"])["version"]
        .as_u64()
        .unwrap();
    ws.run(&["state", "put", "k", "latest"]).ok();

    let g = ws.run(&["gc", "--json"]).ok().json();
    assert!(
        g["state"]["versions_collected"].as_u64().unwrap() >= 1,
        "{g}"
    );
    assert_eq!(g["state"]["pinned"], 2, "{g}"); // v0 and the checkpoint's

    let v = state_json(&ws, &["get", "k", "--at", &sv.to_string()]);
    assert_eq!(v["value"], "pinned");
    ws.run(&["state", "get", "k", "--at", &unpinned.to_string()])
        .code(2);
    let h = state_json(&ws, &["history", "k"]);
    let values: Vec<&str> = h["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["pinned", "latest"]);
    ws.run(&["restore", saved["id"].as_str().unwrap()]).ok();
    assert_eq!(get(&ws, "k").as_deref(), Some("pinned"));
}

#[test]
fn status_reports_state_changes_since_head() {
    let ws = ws_with_file();
    ws.run(&["state", "put", "plan", "A"]).ok();
    ws.run(&["save"]).ok();
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");
    assert_eq!(st["state_changes"].as_array().unwrap().len(), 0);

    // Only the state changes: status is no longer clean and names the key.
    ws.run(&["state", "put", "plan", "B"]).ok();
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], false, "{st}");
    assert_eq!(st["changes"].as_array().unwrap().len(), 0);
    let sc = st["state_changes"].as_array().unwrap();
    assert_eq!(sc.len(), 1, "{st}");
    assert_eq!(sc[0]["key"], "plan");
    let text = ws.run(&["status"]).ok().stdout;
    assert!(text.contains("state ") && text.contains("plan"), "{text}");
    assert!(!text.contains("nothing changed"), "{text}");

    // Saving records it; status is clean again.
    ws.run(&["save"]).ok();
    assert_eq!(ws.run(&["status", "--json"]).ok().json()["clean"], true);
}

#[test]
fn state_versions_do_not_look_like_checkpoint_ids() {
    let ws = Ws::new();
    ws.init();
    ws.run(&["state", "put", "plan", "one"]).ok();
    ws.run(&["state", "put", "plan", "two"]).ok();
    let h = ws.run(&["state", "history", "plan"]).ok();
    let ls = ws.run(&["state", "ls"]).ok();
    for (what, r) in [("history", &h), ("ls", &ls)] {
        for word in r.stdout.split_whitespace() {
            let looks_like_id = word.len() > 1
                && word.starts_with('v')
                && word[1..].bytes().all(|b| b.is_ascii_digit());
            assert!(
                !looks_like_id,
                "state {what} prints a version as {word}, like a checkpoint id:\n{}",
                r.dump()
            );
        }
    }
    assert_eq!(h.stdout.lines().count(), 2, "{}", h.dump());
    for l in h.stdout.lines() {
        assert!(l.starts_with("state@"), "{}", h.dump());
    }
    assert!(ls.stdout.contains("  state@"), "{}", ls.dump());
}
