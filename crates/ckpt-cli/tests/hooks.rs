//! `ckpt hook` and `ckpt init --agent claude`, end to end with the real
//! binary: Claude Code hook events replayed from fixture JSON files
//! (`tests/fixtures/hooks/`, shapes as documented for PreToolUse,
//! PostToolUse, UserPromptSubmit and Stop) each produce one tagged
//! checkpoint, an event after which nothing changed produces none and
//! prints nothing; the environment-variable interface for other harnesses;
//! failures exit 1, never 2 (which would block Claude Code's tool call);
//! settings are merged without clobbering; and a new user's walkthrough:
//! init → an "agent" makes a mess via hooks → log → diff → restore → verify.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

fn fixture(name: &str, ws: &Path) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(name);
    std::fs::read_to_string(&p)
        .unwrap()
        .replace("@WORKSPACE@", ws.to_str().unwrap())
        .into_bytes()
}

/// Replays a fixture from outside the workspace: the event's `cwd` must
/// find it.
fn replay(ws: &Ws, name: &str) -> Run {
    run_stdin(ws.tmp.path(), &["hook"], &fixture(name, &ws.root), &[])
}

fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn project(ws: &Ws) {
    ws.init();
    write(&ws.root, "README.md", "# demo\n");
    write(&ws.root, "old/a.txt", "old a\n");
    write(&ws.root, "old/b.txt", "old b\n");
    write(
        &ws.root,
        "src/greeting.js",
        "export const hi = () => 'hi';\n",
    );
}

fn assert_silent(r: &Run) {
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert!(
        r.stdout.is_empty() && r.stderr.is_empty(),
        "not silent: {}",
        r.dump()
    );
}

#[test]
fn fixture_events_make_tagged_checkpoints_and_no_change_makes_none() {
    let ws = Ws::new();
    project(&ws);
    assert_silent(&replay(&ws, "1_user_prompt_submit.json"));
    assert_eq!(ws.checkpoints().len(), 1);
    // Nothing changed since: no checkpoint, no output.
    assert_silent(&replay(&ws, "2_pre_tool_use_bash.json"));
    assert_eq!(ws.checkpoints().len(), 1);
    std::fs::remove_dir_all(ws.root.join("old")).unwrap();
    write(&ws.root, "gen/out1.txt", "1\n");
    write(&ws.root, "gen/out2.txt", "2\n");
    assert_silent(&replay(&ws, "3_post_tool_use_bash.json"));
    write(
        &ws.root,
        "src/greeting.js",
        "export const hi = () => 'hello';\n",
    );
    assert_silent(&replay(&ws, "4_post_tool_use_write.json"));
    assert_silent(&replay(&ws, "5_stop.json"));

    let cps = ws.checkpoints();
    assert_eq!(cps.len(), 3, "{cps:#?}");
    let session = "6f1c2b7e-session-a";
    let expect = [
        (
            "UserPromptSubmit",
            None,
            "prompt: Replace the greeting module and clean up old files",
        ),
        (
            "PostToolUse",
            Some("Bash"),
            "after Bash: rm -rf old && npm run gen",
        ),
        ("PostToolUse", Some("Write"), "after Write: src/greeting.js"),
    ];
    for (cp, (event, tool, message)) in cps.iter().zip(expect) {
        assert_eq!(cp["tags"]["session"], session, "{cp}");
        assert_eq!(cp["tags"]["event"], event, "{cp}");
        assert_eq!(cp["tags"].get("tool").and_then(Value::as_str), tool, "{cp}");
        assert_eq!(cp["message"], message, "{cp}");
    }
    assert_eq!(cps[1]["stats"]["files_deleted"], 2);
    assert_eq!(cps[1]["stats"]["files_added"], 2);
    assert_eq!(cps[2]["stats"]["files_modified"], 1);
}

#[test]
fn environment_variables_serve_other_harnesses() {
    let ws = Ws::new();
    project(&ws);
    let env = [
        ("CKPT_EVENT", "after-turn"),
        ("CKPT_SESSION", "codex-42"),
        ("CKPT_TOOL", "shell"),
        ("CKPT_MESSAGE", "make test"),
    ];
    let r = run_stdin(&ws.root, &["hook", "--json"], b"", &env).ok();
    let v = r.json();
    assert_eq!(v["saved"], true, "{v}");
    let cp = &ws.checkpoints()[0];
    assert_eq!(cp["tags"]["session"], "codex-42");
    assert_eq!(cp["tags"]["tool"], "shell");
    assert_eq!(cp["tags"]["event"], "after-turn");
    assert_eq!(cp["message"], "after-turn shell: make test");
    // Unchanged: --json says so, nothing recorded.
    let v = run_stdin(&ws.root, &["hook", "--json"], b"", &env)
        .ok()
        .json();
    assert_eq!(v["saved"], false);
    assert_eq!(ws.checkpoints().len(), 1);
}

#[test]
fn failures_exit_1_never_2_and_change_nothing() {
    let ws = Ws::new();
    project(&ws);
    let r = run_stdin(&ws.root, &["hook"], b"{not json", &[]);
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(
        r.stderr.contains("not a hook event") && r.stderr.contains("nothing was saved"),
        "{}",
        r.dump()
    );
    assert!(ws.checkpoints().is_empty());
    // The store is gone: an error (exit 1), not a blocked tool call.
    std::fs::rename(&ws.store, ws.tmp.path().join("moved")).unwrap();
    let r = run_stdin(&ws.root, &["hook"], b"{}", &[]);
    assert_eq!(r.code, Some(1), "{}", r.dump());
    // Outside any workspace: nothing to do, exit 0 with a note.
    let elsewhere = tempfile::tempdir_in(test_base()).unwrap();
    let r = run_stdin(elsewhere.path(), &["hook"], b"{}", &[]);
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert!(r.stderr.contains("not in a ckpt workspace"), "{}", r.dump());
}

#[test]
fn init_agent_claude_merges_settings_without_clobbering() {
    let ws = Ws::new();
    ws.init();
    // Printing changes nothing.
    let printed = ws.run(&["init", "--agent", "claude", "--json"]).ok().json();
    let claude = &printed["harnesses"][0];
    assert_eq!(claude["written"], false);
    assert_eq!(claude["change"], "create");
    let text: Value = serde_json::from_str(claude["text"].as_str().unwrap()).unwrap();
    assert!(text["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .contains("ckpt hook"));
    assert!(!ws.root.join(".claude").exists());

    let settings = ws.root.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let existing = r#"{
  "permissions": {"allow": ["Bash(npm test)"]},
  "hooks": {
    "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}]
  },
  "zzz_last": 1
}"#;
    std::fs::write(&settings, existing).unwrap();
    ws.run(&["init", "--agent", "claude", "--write"]).ok();
    let v: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(v["permissions"]["allow"][0], "Bash(npm test)");
    assert_eq!(v["zzz_last"], 1);
    let post = v["hooks"]["PostToolUse"].as_array().unwrap();
    assert_eq!(post.len(), 2);
    assert_eq!(post[0]["hooks"][0]["command"], "prettier --write");
    for ev in ["PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop"] {
        let n = v["hooks"][ev]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g.to_string().contains("ckpt hook"))
            .count();
        assert_eq!(n, 1, "{ev}: {v}");
    }
    // Idempotent: a second run changes nothing.
    let before = std::fs::read(&settings).unwrap();
    let r = ws.run(&["init", "--agent", "claude", "--write"]).ok();
    assert!(r.stdout.contains("nothing changed"), "{}", r.dump());
    assert_eq!(std::fs::read(&settings).unwrap(), before);
    // Broken settings: an error naming the file, and the file untouched.
    std::fs::write(&settings, "{ broken").unwrap();
    let r = ws.run(&["init", "--agent", "claude", "--write"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    assert!(r.stderr.contains("settings.json") && r.stderr.contains("nothing was changed"));
    assert_eq!(std::fs::read(&settings).unwrap(), b"{ broken");
}

/// A new user's walkthrough, with the text output a person reads.
#[test]
fn walkthrough_init_mess_log_diff_restore_verify() {
    let ws = Ws::new();
    write(&ws.root, "README.md", "# demo\n");
    write(&ws.root, "old/a.txt", "old a\n");
    write(&ws.root, "old/b.txt", "old b\n");
    write(
        &ws.root,
        "src/greeting.js",
        "export const hi = () => 'hi';\n",
    );
    let original = snapshot(&ws.root);
    let root = ws.root.to_str().unwrap();
    let store = ws.store.to_str().unwrap();
    let r = ckpt(
        ws.tmp.path(),
        &[
            "init", root, "--store", store, "--agent", "claude", "--write",
        ],
    )
    .ok();
    assert!(r.stdout.contains(".claude/settings.json"), "{}", r.dump());
    // The settings file is part of the project from now on.
    let original_with_settings = {
        let mut s = original.clone();
        let now = snapshot(&ws.root);
        for (k, v) in now.iter().filter(|(k, _)| k.starts_with(b".claude")) {
            s.insert(k.clone(), v.clone());
        }
        s
    };

    // The agent's turn: prompt, a destructive command, an edit, stop.
    replay(&ws, "1_user_prompt_submit.json").ok();
    replay(&ws, "2_pre_tool_use_bash.json").ok();
    std::fs::remove_dir_all(ws.root.join("old")).unwrap();
    write(&ws.root, "gen/out1.txt", "1\n");
    replay(&ws, "3_post_tool_use_bash.json").ok();
    write(
        &ws.root,
        "src/greeting.js",
        "export const hi = () => 'hello';\n",
    );
    replay(&ws, "4_post_tool_use_write.json").ok();
    replay(&ws, "5_stop.json").ok();

    let log = ws.run(&["log"]).ok().stdout;
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(
        lines[0].contains("after Write: src/greeting.js") && lines[0].starts_with('*'),
        "{log}"
    );
    assert!(
        lines[2].contains("prompt: Replace the greeting module"),
        "{log}"
    );

    let diff = ws.run(&["diff", "v1", "v3"]).ok().stdout;
    for want in [
        "D old/a.txt",
        "D old/b.txt",
        "A gen/out1.txt",
        "M src/greeting.js",
        "+export const hi = () => 'hello';",
    ] {
        assert!(diff.contains(want), "diff lacks {want:?}:\n{diff}");
    }

    let r = ws.run(&["restore", "v1"]).ok();
    assert!(r.stdout.contains("restored v1"), "{}", r.dump());
    assert_same(
        &original_with_settings,
        &snapshot(&ws.root),
        "after restore v1",
    );
    ws.run(&["verify", "v1"]).ok();
    // And the mess is one restore away too (the restore saved it first).
    ws.run(&["restore", "v3"]).ok();
    assert!(ws.root.join("gen/out1.txt").exists());
    assert!(!ws.root.join("old").exists());
}
