//! ckpt's packages for harnesses that have a plugin format (`plugins/`):
//! the Claude Code plugin `ckpt@ckpt` (a local marketplace in
//! `plugins/.claude-plugin/marketplace.json`, the plugin in `plugins/ckpt/`)
//! and the Gemini CLI extension `ckpt` (`plugins/gemini/`).
//!
//! The packages' hooks are a copy of what `ckpt init --agent NAME` writes
//! (the harness's contract is owned by `ckpt_harness`), so the first test
//! compares them with `init`'s output: a change to a harness's events,
//! matchers or command fails here until the package follows.
//!
//! The others install the packages with the real CLIs (pinned in
//! `tests/harness/package.json`, installed by `tests/harness/install.sh`
//! into `target/harness-clis`), each with HOME in a temporary directory, and
//! check what the CLI itself reports: installed, enabled, the hooks it
//! parsed (the same as `init`'s), the MCP server and the slash commands.
//! One scripted turn of each (`tests/harness/drive.py` against the model
//! stand-in, offline) runs with only the package installed, and must leave
//! one checkpoint per file-changing tool call; then `/ckpt:undo` (on Claude
//! Code typed in the same session) must take the last one back. A CLI or the driver that
//! is not there is a skip (a failure under `CI=true`, where `.ci/run`
//! installs them). Nothing here measures time.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use common::harness::*;
use common::*;
use serde_json::{json, Value};

/// The harness CLIs are Node or Bun processes of a few hundred MB; one at a
/// time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The repository's `plugins/` directory.
fn plugins() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../plugins")
}

fn read_json(p: &Path) -> Value {
    let t = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_slice(&t).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The `hooks` object `ckpt init --agent NAME` would write into a project
/// (its `--json` output; nothing is written).
fn init_hooks(agent: &str) -> Value {
    let ws = Ws::new();
    ws.init();
    let v = ws.run(&["init", "--agent", agent, "--json"]).ok().json();
    let h = &v["harnesses"][0];
    assert_eq!(h["harness"], agent, "{v}");
    assert_eq!(h["written"], false, "{v}");
    let text: Value = serde_json::from_str(h["text"].as_str().unwrap()).unwrap();
    let hooks = text["hooks"].clone();
    assert!(hooks.is_object(), "init --agent {agent} --json: {v}");
    hooks
}

/// `{EVENT: [{matcher, hooks: [{command}]}]}` as (event, matcher, command)
/// triples, in order: the form Claude Code's validator reports.
fn flatten(hooks: &Value) -> Vec<(String, Option<String>, String)> {
    let mut out = Vec::new();
    for (event, groups) in hooks.as_object().unwrap() {
        for g in groups.as_array().unwrap() {
            for h in g["hooks"].as_array().unwrap() {
                out.push((
                    event.clone(),
                    g["matcher"].as_str().map(str::to_string),
                    h["command"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    out
}

/// A harness CLI run with HOME in `home` (and nothing of the user's).
fn cli(name: &str, home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(clis().join(name))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("PATH", path_with_ckpt())
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"))
}

fn ok(what: &str, o: Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{what}: {:?}\n--- stdout\n{out}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn json_of(what: &str, o: Output) -> Value {
    let out = ok(what, o);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{what}: not JSON ({e}):\n{out}"))
}

/// The manifests' versions, the MCP server and the commands, read as the
/// harnesses read them.
#[test]
fn packages_carry_inits_hooks_and_the_crates_version() {
    let claude = plugins().join("ckpt");
    assert_eq!(
        read_json(&claude.join("hooks/hooks.json")),
        json!({ "hooks": init_hooks("claude") }),
        "plugins/ckpt/hooks/hooks.json must be exactly what `ckpt init --agent claude` writes"
    );
    let gemini = plugins().join("gemini");
    assert_eq!(
        read_json(&gemini.join("hooks/hooks.json")),
        json!({ "hooks": init_hooks("gemini") }),
        "plugins/gemini/hooks/hooks.json must be exactly what `ckpt init --agent gemini` writes"
    );
    let version = env!("CARGO_PKG_VERSION");
    let plugin = read_json(&claude.join(".claude-plugin/plugin.json"));
    assert_eq!(plugin["name"], "ckpt");
    assert_eq!(plugin["version"], version);
    let ext = read_json(&gemini.join("gemini-extension.json"));
    assert_eq!(ext["name"], "ckpt");
    assert_eq!(ext["version"], version);
    // Both start the MCP server the same way: `ckpt mcp`, a real command.
    let mcp = read_json(&claude.join(".mcp.json"));
    for server in [&mcp["mcpServers"]["ckpt"], &ext["mcpServers"]["ckpt"]] {
        assert_eq!(server["command"], "ckpt", "{server}");
        assert_eq!(server["args"], json!(["mcp"]), "{server}");
    }
    let help = ckpt(&plugins(), &["mcp", "--help"]).ok();
    assert!(
        help.stdout.contains("Model Context Protocol"),
        "{}",
        help.dump()
    );
    // Every command a slash command runs is one ckpt accepts: its
    // subcommand and flags parse (`--help` after them runs nothing).
    let mut commands = Vec::new();
    for f in std::fs::read_dir(claude.join("commands")).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        for line in text.lines() {
            if let Some(c) = line.strip_prefix("!`").and_then(|l| l.strip_suffix('`')) {
                commands.push(c.replace("${CLAUDE_SESSION_ID}", "some-session"));
            }
        }
    }
    for f in std::fs::read_dir(gemini.join("commands/ckpt")).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        for line in text.lines() {
            if let Some(c) = line.strip_prefix("!{").and_then(|l| l.strip_suffix('}')) {
                commands.push(c.to_string());
            }
        }
    }
    assert_eq!(commands.len(), 6, "{commands:?}");
    for c in &commands {
        let mut words: Vec<&str> = c.split_whitespace().collect();
        assert_eq!(words.remove(0), "ckpt", "{c}");
        words.push("--help");
        let r = ckpt(&plugins(), &words);
        assert_eq!(r.code, Some(0), "`{c}` does not parse: {}", r.dump());
    }
}

/// `claude plugin marketplace add plugins/`, `claude plugin install
/// ckpt@ckpt`: listed and enabled, and Claude Code's own validator reads
/// init's hooks, the MCP server and the three commands out of it.
#[test]
fn claude_code_installs_the_plugin() {
    if !have("claude") {
        return;
    }
    let _g = serial();
    let ws = Ws::new();
    let home = ws.tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let dir = plugins();
    let p = dir.to_str().unwrap();
    let here = ws.tmp.path();

    let v = json_of(
        "claude plugin validate --strict (marketplace)",
        cli(
            "claude",
            &home,
            here,
            &["plugin", "validate", "--strict", "--json", p],
        ),
    );
    assert_eq!(v["success"], true, "{v}");
    let plugin_dir = dir.join("ckpt");
    let v = json_of(
        "claude plugin validate --strict (plugin)",
        cli(
            "claude",
            &home,
            here,
            &[
                "plugin",
                "validate",
                "--strict",
                "--json",
                plugin_dir.to_str().unwrap(),
            ],
        ),
    );
    assert_eq!(v["success"], true, "{v}");
    let provided: Vec<(String, Option<String>, String)> = v["provides"]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            assert_eq!(h["type"], "command", "{h}");
            (
                h["event"].as_str().unwrap().to_string(),
                h["matcher"].as_str().map(str::to_string),
                h["command"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(provided, flatten(&init_hooks("claude")), "{v}");
    assert_eq!(
        v["provides"]["commands"],
        json!(["ckpt:log", "ckpt:undo", "ckpt:undo-turn"]),
        "{v}"
    );
    let mcp = &v["provides"]["mcpServers"];
    assert_eq!(mcp.as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(mcp[0]["name"], "ckpt");
    assert_eq!(mcp[0]["type"], "stdio");
    assert_eq!(mcp[0]["target"], "ckpt");
    assert_eq!(mcp[0]["args"], json!(["mcp"]));

    ok(
        "claude plugin marketplace add",
        cli("claude", &home, here, &["plugin", "marketplace", "add", p]),
    );
    ok(
        "claude plugin install ckpt@ckpt",
        cli("claude", &home, here, &["plugin", "install", "ckpt@ckpt"]),
    );
    let list = json_of(
        "claude plugin list --json",
        cli("claude", &home, here, &["plugin", "list", "--json"]),
    );
    let ours: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["id"] == "ckpt@ckpt")
        .collect();
    assert_eq!(ours.len(), 1, "{list}");
    let ours = ours[0];
    assert_eq!(ours["enabled"], true, "{ours}");
    assert_eq!(ours["version"], env!("CARGO_PKG_VERSION"), "{ours}");
    assert_eq!(ours["mcpServers"]["ckpt"]["command"], "ckpt", "{ours}");
    // The copy Claude Code installed carries the same hooks.
    let installed = PathBuf::from(ours["installPath"].as_str().unwrap());
    assert_eq!(
        read_json(&installed.join("hooks/hooks.json")),
        json!({ "hooks": init_hooks("claude") })
    );
    let text = ok(
        "claude plugin list",
        cli("claude", &home, here, &["plugin", "list"]),
    );
    assert!(text.contains("ckpt@ckpt"), "{text}");

    // The MCP server it declares starts and answers, in a workspace.
    ws.init();
    let text = ok(
        "claude mcp list",
        cli("claude", &home, &ws.root, &["mcp", "list"]),
    );
    let line = text
        .lines()
        .find(|l| l.contains("ckpt mcp"))
        .unwrap_or_else(|| panic!("no ckpt server in `claude mcp list`:\n{text}"));
    assert!(line.contains("Connected"), "{text}");
}

/// `gemini extensions install plugins/gemini` (and `link`): listed, active,
/// with init's hooks and the MCP server, as Gemini CLI reads them.
#[test]
fn gemini_cli_installs_the_extension() {
    if !have("gemini") {
        return;
    }
    let _g = serial();
    let ws = Ws::new();
    let here = ws.tmp.path();
    let ext = plugins().join("gemini");
    let e = ext.to_str().unwrap();
    let want_hooks = init_hooks("gemini");
    for how in ["install", "link"] {
        let home = here.join(format!("home-{how}"));
        // Installing from a local folder asks whether to trust it, even
        // with --consent, unless folder trust is off (as in a headless
        // setup; the person's answer is not the test's to give).
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::write(
            home.join(".gemini/settings.json"),
            json!({
                "security": {"folderTrust": {"enabled": false}},
                "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                "privacy": {"usageStatisticsEnabled": false},
            })
            .to_string(),
        )
        .unwrap();
        ok(
            "gemini extensions validate",
            cli("gemini", &home, here, &["extensions", "validate", e]),
        );
        ok(
            &format!("gemini extensions {how}"),
            cli("gemini", &home, here, &["extensions", how, e, "--consent"]),
        );
        // Gemini CLI 0.61 prints the list on stderr.
        let o = cli(
            "gemini",
            &home,
            &ws.root,
            &["extensions", "list", "-o", "json"],
        );
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        ok("gemini extensions list -o json", o);
        let list: Value = serde_json::from_str(err.trim())
            .unwrap_or_else(|e| panic!("gemini extensions list -o json: not JSON ({e}):\n{err}"));
        let all = list.as_array().unwrap();
        assert_eq!(all.len(), 1, "{list}");
        let x = &all[0];
        assert_eq!(x["name"], "ckpt", "{x}");
        assert_eq!(x["version"], env!("CARGO_PKG_VERSION"), "{x}");
        assert_eq!(x["isActive"], true, "{how}: {x}");
        assert_eq!(x["hooks"], want_hooks, "{how}: the hooks Gemini CLI loaded");
        let server = &x["mcpServers"]["ckpt"];
        assert_eq!(server["command"], "ckpt", "{x}");
        assert_eq!(server["args"], json!(["mcp"]), "{x}");
        // ${workspacePath}: the server runs in the project Gemini runs in.
        assert_eq!(
            Path::new(server["cwd"].as_str().unwrap())
                .canonicalize()
                .unwrap(),
            ws.root.canonicalize().unwrap(),
            "{x}"
        );
        let installed = PathBuf::from(x["path"].as_str().unwrap());
        for c in ["log", "undo", "undo-turn"] {
            assert!(
                installed.join(format!("commands/ckpt/{c}.toml")).is_file(),
                "{how}: /ckpt:{c} missing in {}",
                installed.display()
            );
        }
        // The MCP server it declares starts and answers, in a workspace.
        if how == "install" {
            ws.init();
        }
        let o = cli("gemini", &home, &ws.root, &["mcp", "list"]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let line = text
            .lines()
            .find(|l| l.contains("ckpt mcp"))
            .unwrap_or_else(|| panic!("{how}: no ckpt server in `gemini mcp list`:\n{text}"));
        assert!(line.contains("Connected"), "{how}: {text}");
    }
}

/// drive.py's `run` for Claude Code (it owns pointing the CLI at the model
/// stand-in), with `extra` appended to the CLI's command line (the second
/// turn must `--resume` the first one's session). Returns drive.py's
/// report.
fn claude_turn(ws: &Ws, home: &Path, script: &Value, prompt: &str, extra: &[&str]) -> Value {
    let n = std::fs::read_dir(ws.tmp.path()).unwrap().count();
    let script_file = ws.tmp.path().join(format!("script-{n}.json"));
    std::fs::write(&script_file, script.to_string()).unwrap();
    let log_dir = ws.tmp.path().join(format!("requests-{n}"));
    let mut c = Command::new("python3");
    c.arg(harness_dir().join("drive.py"))
        .args(["run", "claude", "--timeout", "300", "--bin-dir"])
        .arg(clis())
        .arg("--ws")
        .arg(&ws.root)
        .arg("--home")
        .arg(home)
        .arg("--script")
        .arg(&script_file)
        .arg("--log")
        .arg(&log_dir)
        .args(["--path", &path_with_ckpt(), "--prompt", prompt])
        // Like every other test's ckpt: no watcher outliving the test.
        .args(["--env", "CKPT_HOOK_WATCH=off"]);
    for a in extra {
        // `=`: an argument that starts with `-` is still a value.
        c.arg(format!("--extra-arg={a}"));
    }
    let out = c.output().expect("run python3 drive.py");
    assert!(
        out.status.success(),
        "drive.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Value = serde_json::from_slice(&out.stdout).expect("drive.py prints JSON");
    // What the model was sent, for the checks on slash commands.
    let mut sent = String::new();
    if let Ok(rd) = std::fs::read_dir(&log_dir) {
        let mut files: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            sent.push_str(&std::fs::read_to_string(f).unwrap());
        }
    }
    v["sent"] = json!(sent);
    v
}

fn dump_turn(v: &Value) -> String {
    format!(
        "exit: {}\n--- stdout\n{}\n--- stderr\n{}",
        v["exit"],
        v["stdout"].as_str().unwrap_or_default(),
        v["stderr"].as_str().unwrap_or_default()
    )
}

/// The checkpoints Claude Code's hooks recorded, oldest first.
fn claude_checkpoints(ws: &Ws) -> Vec<Value> {
    let log = ws.run(&["log", "--json"]).ok().json();
    let mut cps: Vec<Value> = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["tags"]["harness"] == "claude")
        .cloned()
        .collect();
    cps.reverse();
    cps
}

/// A real Claude Code turn with only the plugin installed (no project
/// hooks: the workspace has only `ckpt init`): one checkpoint per
/// file-changing tool call, none for the call that changed nothing; then
/// `/ckpt:undo`, typed in the same session, takes the last call back and
/// leaves the one before it.
#[test]
fn claude_code_turn_with_the_plugin_records_and_undoes() {
    if !have("claude") {
        return;
    }
    if !harness_dir().join("drive.py").is_file() {
        skip(&format!(
            "the harness driver is not at {} (tests/harness/drive.py; set CKPT_HARNESS_DIR)",
            harness_dir().display()
        ));
        return;
    }
    let _g = serial();
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "README.md", b"# project\n");
    assert!(!ws.root.join(".claude").exists());
    let home = ws.tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let p = plugins();
    let here = ws.tmp.path();
    ok(
        "claude plugin marketplace add",
        cli(
            "claude",
            &home,
            here,
            &["plugin", "marketplace", "add", p.to_str().unwrap()],
        ),
    );
    ok(
        "claude plugin install ckpt@ckpt",
        cli("claude", &home, here, &["plugin", "install", "ckpt@ckpt"]),
    );

    let notes = ws.root.join("notes.txt");
    let script = json!({"steps": [
        {"edit": {"path": notes, "content": "hello from the agent\n"}},
        {"shell": "mkdir gen && seq 1 100 | split -l 1 -a 3 - gen/f"},
        {"shell": "ls"},
    ], "final": "All done."});
    let t = claude_turn(&ws, &home, &script, "Do the scripted task.", &[]);
    assert_eq!(t["exit"], 0, "{}", dump_turn(&t));
    assert!(
        !t["stdout"].as_str().unwrap().contains("ckpt"),
        "ckpt's output reached the user: {}",
        dump_turn(&t)
    );
    assert_eq!(std::fs::read_dir(ws.root.join("gen")).unwrap().count(), 100);

    let cps = claude_checkpoints(&ws);
    let after: Vec<&Value> = cps
        .iter()
        .filter(|c| c["tags"]["event"] == "PostToolUse")
        .collect();
    let tools: Vec<&str> = after
        .iter()
        .map(|c| c["tags"]["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["Write", "Bash"],
        "one per file-changing call: {cps:#?}"
    );
    assert!(
        after[1]["message"].as_str().unwrap().contains("mkdir gen"),
        "{cps:#?}"
    );
    let session = cps[0]["tags"]["session"].as_str().unwrap().to_string();
    assert!(!session.is_empty());
    for c in &cps {
        assert_eq!(c["tags"]["session"], session.as_str(), "{cps:#?}");
    }
    assert!(
        cps.iter().any(|c| c["tags"]["event"] == "UserPromptSubmit"),
        "{cps:#?}"
    );

    // `/ckpt:undo` in the same session: ckpt runs before the model answers
    // (the stand-in offers no tool call), and puts back the state before
    // the last file-changing call, the `mkdir`.
    let undo = json!({"steps": [], "final": "Undone."});
    let t = claude_turn(&ws, &home, &undo, "/ckpt:undo", &["--resume", &session]);
    assert_eq!(t["exit"], 0, "{}", dump_turn(&t));
    assert!(
        t["sent"].as_str().unwrap().contains("undoing"),
        "the model was not shown ckpt undo's output: {}",
        dump_turn(&t)
    );
    assert!(!ws.root.join("gen").exists(), "{}", dump_turn(&t));
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "hello from the agent\n",
        "the step before stays"
    );
}

/// A real Gemini CLI turn with only the extension installed: one
/// checkpoint per file-changing tool call (none for `ls`), tagged
/// `harness=gemini`; then `/ckpt:undo` (headless, `--yolo`, so its `!{…}`
/// runs without a confirmation) takes the last call back.
#[test]
fn gemini_cli_turn_with_the_extension_records_and_undoes() {
    if !have("gemini") {
        return;
    }
    let drive = harness_dir().join("drive.py");
    if !drive.is_file() {
        skip(&format!(
            "the harness driver is not at {} (set CKPT_HARNESS_DIR)",
            drive.display()
        ));
        return;
    }
    let _g = serial();
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "README.md", b"# project\n");
    let home = ws.tmp.path().join("home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({"security": {"folderTrust": {"enabled": false}}}).to_string(),
    )
    .unwrap();
    let ext = plugins().join("gemini");
    ok(
        "gemini extensions install",
        cli(
            "gemini",
            &home,
            ws.tmp.path(),
            &["extensions", "install", ext.to_str().unwrap(), "--consent"],
        ),
    );
    let turn = |n: &str, script: Value, prompt: &str| -> Value {
        let f = ws.tmp.path().join(format!("script-{n}.json"));
        std::fs::write(&f, script.to_string()).unwrap();
        let out = Command::new("python3")
            .arg(&drive)
            .args(["run", "gemini", "--timeout", "300", "--bin-dir"])
            .arg(clis())
            .arg("--ws")
            .arg(&ws.root)
            .arg("--home")
            .arg(&home)
            .arg("--script")
            .arg(&f)
            .args(["--path", &path_with_ckpt(), "--prompt", prompt])
            // Like every other test's ckpt: no watcher outliving the test.
            .args(["--env", "CKPT_HOOK_WATCH=off"])
            .output()
            .expect("run python3 drive.py");
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).expect("drive.py prints JSON")
    };
    let t = turn(
        "1",
        json!({"steps": [
            {"shell": "mkdir gen && touch gen/a gen/b"},
            {"shell": "ls"},
        ], "final": "All done."}),
        "Do the scripted task.",
    );
    assert_eq!(t["exit"], 0, "{}", dump_turn(&t));
    let log = ws.run(&["log", "--json"]).ok().json();
    let after: Vec<&Value> = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["tags"]["harness"] == "gemini" && c["tags"]["event"] == "AfterTool")
        .collect();
    assert_eq!(after.len(), 1, "one per file-changing call: {log:#}");
    assert!(after[0]["message"].as_str().unwrap().contains("mkdir gen"));
    assert!(ws.root.join("gen/a").exists());

    let t = turn("2", json!({"steps": [], "final": "Undone."}), "/ckpt:undo");
    assert_eq!(t["exit"], 0, "{}", dump_turn(&t));
    assert!(!ws.root.join("gen").exists(), "{}", dump_turn(&t));
    assert!(ws.root.join("README.md").exists());
}
