//! Every harness's payloads through `ckpt hook`, as `ckpt init --agent`
//! wires them: each fixture folder of `tests/fixtures/hooks/` (payloads
//! recorded from the real CLI, `<harness>-<version>`, or taken from the
//! documented schema, `<harness>-documented`; see its README) is replayed
//! event by event, and only the events ckpt's configuration for that harness
//! hooks are replayed, with the command line it writes (`--agent`, and
//! `--event` where the payload does not name the event).
//!
//! Before each event a file changes, so each must record exactly one
//! checkpoint, tagged with the harness, the event as the harness spells it,
//! the session the payload names and, for tool events, the tool; its message
//! must say what kind of event it was and carry its detail (the prompt text,
//! or the command or path). Nothing may appear on stdout, which several
//! harnesses read. Also: `init --agent` for every harness, merged, idempotent
//! and removed again; detection without `--agent`; Codex's trust gates in
//! `doctor` and `status`; `ckpt undo` stepping back through a recorded session.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{json, Value};

const HARNESSES: [&str; 6] = ["claude", "codex", "gemini", "copilot", "cursor", "opencode"];

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hooks")
}

fn hook(ws: &Ws, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Run {
    let mut a = vec!["-C", ws.root.to_str().unwrap(), "hook"];
    a.extend_from_slice(args);
    run_stdin(ws.tmp.path(), &a, stdin, env)
}

fn newest(ws: &Ws) -> (usize, Value) {
    let cps = ws.checkpoints();
    (cps.len(), cps.last().cloned().unwrap_or(Value::Null))
}

/// The events ckpt's configuration for `harness` hooks, and the command
/// words after `hook` for each, read from what `init --agent` would write.
fn hooked(ws: &Ws, harness: &str) -> Vec<(String, Vec<String>)> {
    let rep = ws.run(&["init", "--agent", harness, "--json"]).ok().json();
    let text = rep["harnesses"][0]["text"].as_str().unwrap().to_string();
    if harness == "opencode" {
        return ["chat.message", "tool.execute.before", "tool.execute.after"]
            .iter()
            .map(|e| (e.to_string(), vec!["--agent".into(), "opencode".into()]))
            .collect();
    }
    let v: Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for (event, entries) in v["hooks"].as_object().unwrap() {
        let e = &entries[0];
        let cmd = e["command"]
            .as_str()
            .or(e["bash"].as_str())
            .or(e["hooks"][0]["command"].as_str())
            .unwrap();
        let words: Vec<String> = cmd
            .split(" || ")
            .next()
            .unwrap()
            .split_whitespace()
            .skip_while(|w| *w != "hook")
            .skip(1)
            .map(String::from)
            .collect();
        out.push((event.clone(), words));
    }
    out
}

/// opencode's plugin hands ckpt a Claude-shaped payload made from its
/// callbacks' arguments (recorded as `{input, output}`); the same mapping as
/// `crates/ckpt-harness/src/harness/opencode-plugin.js`.
fn opencode_payload(event: &str, v: &Value, cwd: &Path) -> Value {
    let (i, o) = (&v["input"], &v["output"]);
    match event {
        "chat.message" => json!({
            "hook_event_name": event, "session_id": i["sessionID"], "cwd": cwd,
            "prompt": o["parts"].as_array().unwrap().iter()
                .filter(|p| p["type"] == "text").map(|p| p["text"].as_str().unwrap())
                .collect::<Vec<_>>().join("\n"),
        }),
        _ => json!({
            "hook_event_name": event, "session_id": i["sessionID"], "cwd": cwd,
            "tool_name": i["tool"],
            "tool_input": if o["args"].is_null() { i["args"].clone() } else { o["args"].clone() },
        }),
    }
}

#[test]
fn every_recorded_payload_of_every_harness_records_one_tagged_checkpoint() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut seen = std::collections::BTreeSet::new();
    let mut replayed = 0;
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_str().unwrap();
        let harness = name.split('-').next().unwrap();
        assert!(HARNESSES.contains(&harness), "{name}: unknown harness");
        seen.insert(harness.to_string());
        let ws = Ws::new();
        ws.init();
        let hooked = hooked(&ws, harness);
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for (n, file) in files.iter().enumerate() {
            let stem = file.file_stem().unwrap().to_str().unwrap();
            let event = stem.split_once('_').unwrap().1;
            let Some((_, words)) = hooked.iter().find(|(e, _)| e == event) else {
                continue;
            };
            let text = std::fs::read_to_string(file)
                .unwrap()
                .replace("@WORKSPACE@", ws.root.to_str().unwrap());
            let mut payload: Value = serde_json::from_str(&text).unwrap();
            if harness == "opencode" {
                payload = opencode_payload(event, &payload, &ws.root);
            }
            std::fs::write(ws.root.join(format!("change-{n}.txt")), format!("{n}")).unwrap();
            let (before, _) = newest(&ws);
            let args: Vec<&str> = words.iter().map(String::as_str).collect();
            let r = hook(&ws, &args, payload.to_string().as_bytes(), &[]);
            let what = format!("{name}/{stem}: {}", r.dump());
            assert_eq!(r.code, Some(0), "{what}");
            assert!(r.stdout.is_empty() && r.stderr.is_empty(), "{what}");
            let (after, cp) = newest(&ws);
            assert_eq!(after, before + 1, "one checkpoint per event: {what}");
            let tags = &cp["tags"];
            assert_eq!(tags["harness"], harness, "{what}\n{cp}");
            assert_eq!(tags["event"], event, "{what}\n{cp}");
            let kind_word = match ckpt_harness::Kind::of(event) {
                ckpt_harness::Kind::Prompt => "prompt: ",
                ckpt_harness::Kind::BeforeTool => "before ",
                ckpt_harness::Kind::AfterTool => "after ",
                ckpt_harness::Kind::TurnEnd => "end of turn",
                ckpt_harness::Kind::Other => panic!("{event} is hooked but means nothing"),
            };
            let msg = cp["message"].as_str().unwrap();
            assert!(msg.starts_with(kind_word), "{what}\n{cp}");
            if !name.ends_with("-documented") {
                assert!(
                    tags["session"].as_str().is_some_and(|s| !s.is_empty()),
                    "a recorded payload names its session: {what}\n{cp}"
                );
            }
            let tool_event = kind_word == "before " || kind_word == "after ";
            if tool_event {
                assert!(
                    tags["tool"].as_str().is_some_and(|t| !t.is_empty()),
                    "{what}\n{cp}"
                );
            }
            if tool_event || kind_word == "prompt: " {
                assert!(
                    msg.contains(": ") && msg.len() > kind_word.len() + 2,
                    "the detail: {what}\n{cp}"
                );
            }
            replayed += 1;
        }
    }
    for h in HARNESSES {
        assert!(seen.contains(h), "no payload fixture for {h}");
    }
    assert!(replayed >= 40, "only {replayed} payloads replayed");
}

/// Without `--agent` and `--event`, `ckpt hook` tells each payload's
/// harness from the payload alone, and Copilot CLI's event too, for every
/// event of every fixture (opencode's are left out: its payload is the one
/// ckpt's plugin builds, and names the harness).
#[test]
fn every_payload_is_recognised_without_agent_or_event() {
    let mut checked = 0;
    for dir in std::fs::read_dir(fixtures()).unwrap() {
        let dir = dir.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let harness = name.split('-').next().unwrap();
        if !dir.is_dir() || harness == "opencode" {
            continue;
        }
        let ws = Ws::new();
        ws.init();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for (n, file) in files.iter().enumerate() {
            let stem = file.file_stem().unwrap().to_str().unwrap();
            let event = stem.split_once('_').unwrap().1;
            let text = std::fs::read_to_string(file)
                .unwrap()
                .replace("@WORKSPACE@", ws.root.to_str().unwrap());
            std::fs::write(ws.root.join(format!("change-{n}.txt")), format!("{n}")).unwrap();
            let r = hook(&ws, &[], text.as_bytes(), &[]);
            let what = format!("{name}/{stem}: {}", r.dump());
            assert_eq!(r.code, Some(0), "{what}");
            let (_, cp) = newest(&ws);
            assert_eq!(cp["tags"]["harness"], harness, "{what}\n{cp}");
            assert_eq!(cp["tags"]["event"], event, "{what}\n{cp}");
            checked += 1;
        }
    }
    assert!(checked >= 80, "only {checked} payloads checked");
}

#[test]
fn init_agent_writes_merges_and_removes_every_harness() {
    let ws = Ws::new();
    ws.init();
    // Detection: nothing configured, nothing planned.
    let r = ws.run(&["init", "--agent", "--json"]).ok().json();
    assert_eq!(r["detected"], true);
    assert!(r["harnesses"].as_array().unwrap().is_empty(), "{r}");
    std::fs::create_dir_all(ws.root.join(".gemini")).unwrap();
    std::fs::create_dir_all(ws.root.join(".cursor")).unwrap();
    let r = ws.run(&["init", "--agent", "--json"]).ok().json();
    let names: Vec<&str> = r["harnesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["harness"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gemini", "cursor"]);
    assert!(
        !ws.root.join(".gemini/settings.json").exists(),
        "without --write nothing is written"
    );
    for h in HARNESSES {
        let r = ws
            .run(&["init", "--agent", h, "--write", "--json"])
            .ok()
            .json();
        let path = PathBuf::from(r["harnesses"][0]["path"].as_str().unwrap());
        assert_eq!(r["harnesses"][0]["written"], true, "{r}");
        let written = std::fs::read(&path).unwrap();
        // Idempotent.
        let again = ws
            .run(&["init", "--agent", h, "--write", "--json"])
            .ok()
            .json();
        assert_eq!(again["harnesses"][0]["change"], "unchanged", "{again}");
        assert_eq!(std::fs::read(&path).unwrap(), written);
        // doctor names it.
        let d = ws.run(&["doctor", "--json"]).ok().json();
        assert!(
            d["harnesses"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["harness"] == h),
            "{h}: {}",
            d["harnesses"]
        );
        // Removed again: the file held only ckpt's hooks.
        ws.run(&["init", "--agent", h, "--remove", "--write"]).ok();
        assert!(!path.exists(), "{h}: {} left", path.display());
    }
    // Approval: Codex's gate is said, and a Codex config the user has not
    // trusted is warned about by status and doctor.
    let home = ws.tmp.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    let r = ws.run(&["init", "--agent", "codex", "--write"]).ok();
    assert!(r.stderr.contains("approve the hooks"), "{}", r.dump());
    let status = |home: &Path| {
        let mut c = command(&ws.root, &["status".as_ref(), "--json".as_ref()]);
        c.env("CODEX_HOME", home);
        run_command(c, "status".into()).ok().json()
    };
    let w = status(&home);
    assert!(
        w["warnings"][0].as_str().unwrap().contains("not trusted"),
        "{w}"
    );
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            ws.root.display()
        ),
    )
    .unwrap();
    // The project trusted, the hooks themselves wait for approval (which
    // tests/harnesses.rs gives as Codex's TUI records it).
    let w = status(&home);
    assert!(
        w["warnings"][0]
            .as_str()
            .unwrap()
            .contains("not approved yet: UserPromptSubmit, PreToolUse, PostToolUse, Stop"),
        "{w}"
    );
}

#[test]
fn init_in_a_git_repository_keeps_ckpt_out_of_git_status() {
    let Ok(git) = std::process::Command::new("git").arg("--version").output() else {
        skip("git is not installed");
        return;
    };
    assert!(git.status.success());
    let tmp = tempfile::tempdir_in(test_base()).unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a").unwrap();
    let r = ckpt(&repo, &["init"]).ok();
    assert!(r.stderr.contains("git status"), "{}", r.dump());
    let st = git(&["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(
        st.trim(),
        "?? a.txt",
        "only the project's own file is untracked"
    );
}

#[test]
fn undo_steps_back_one_tool_call_at_a_time_and_turn_goes_to_the_prompt() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("keep.txt"), "keep").unwrap();
    ws.save();
    let ev = |event: &str, tool: &str, input: Value| {
        json!({"session_id": "s1", "hook_event_name": event, "tool_name": tool,
               "tool_input": input, "prompt": "tidy up"})
        .to_string()
    };
    let send = |payload: String| {
        let r = hook(&ws, &["--agent", "claude"], payload.as_bytes(), &[]);
        assert_eq!(r.code, Some(0), "{}", r.dump());
    };
    send(ev("UserPromptSubmit", "", Value::Null));
    // Step 1: write a file.
    send(ev("PreToolUse", "Write", json!({"file_path": "new.txt"})));
    std::fs::write(ws.root.join("new.txt"), "new").unwrap();
    send(ev("PostToolUse", "Write", json!({"file_path": "new.txt"})));
    // A tool call that changes nothing: no checkpoint.
    let (n, _) = newest(&ws);
    send(ev("PreToolUse", "Bash", json!({"command": "ls"})));
    send(ev("PostToolUse", "Bash", json!({"command": "ls"})));
    assert_eq!(newest(&ws).0, n);
    // Step 2: remove a directory it did not create.
    send(ev("PreToolUse", "Bash", json!({"command": "rm keep.txt"})));
    std::fs::remove_file(ws.root.join("keep.txt")).unwrap();
    send(ev("PostToolUse", "Bash", json!({"command": "rm keep.txt"})));
    let exists = |p: &str| ws.root.join(p).exists();
    // Undo step 2: keep.txt back, new.txt stays.
    let r = ws.run(&["undo"]).ok();
    assert!(
        r.stdout.contains("rm keep.txt") && r.stdout.contains("keep.txt"),
        "{}",
        r.dump()
    );
    assert!(exists("keep.txt") && exists("new.txt"));
    assert_eq!(std::fs::read(ws.root.join("keep.txt")).unwrap(), b"keep");
    // Undo again: step 1 too.
    ws.run(&["undo"]).ok();
    assert!(exists("keep.txt") && !exists("new.txt"));
    // Nothing older in the session: an error that changes nothing.
    let r = ws.run(&["undo"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    assert!(r.stderr.contains("nothing was changed"), "{}", r.dump());
    // The undo is undoable: back to where the agent left it.
    let log = ws.run(&["log", "--json"]).ok().json();
    let latest_tool = log["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tags"]["event"] == "PostToolUse")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    ws.run(&["restore", &latest_tool]).ok();
    assert!(!exists("keep.txt") && exists("new.txt"));
    // --turn: back to the prompt, both steps gone at once.
    ws.run(&["undo", "--turn"]).ok();
    assert!(exists("keep.txt") && !exists("new.txt"));
    // --session names a session that does not exist: an error.
    let r = ws.run(&["undo", "--session", "nope"]);
    assert_eq!(r.code, Some(2), "{}", r.dump());
    // log --session lists the session's checkpoints only.
    let s = ws.run(&["log", "--session", "s1", "--json"]).ok().json();
    assert!(s["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["tags"]["session"] == "s1"));
}

#[test]
fn a_locked_store_costs_the_hook_a_second_and_a_warning_never_a_block() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("a.txt"), "a").unwrap();
    ws.save();
    std::fs::write(ws.root.join("a.txt"), "b").unwrap();
    // The lock is taken directly with flock on the store's lock file, as a
    // long command holds it.
    let lock = ws.store.join("lock");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .unwrap();
    use std::os::fd::AsRawFd;
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    for (agent, code) in [("claude", 1), ("copilot", 0)] {
        let payload = json!({"session_id": "s", "hook_event_name": "PostToolUse",
                             "tool_name": "Bash", "tool_input": {"command": "x"}});
        let mut args = vec!["--agent", agent];
        if agent == "copilot" {
            args.extend(["--event", "postToolUse"]);
        }
        let r = hook(&ws, &args, payload.to_string().as_bytes(), &[]);
        assert_eq!(r.code, Some(code), "{}", r.dump());
        assert_ne!(r.code, Some(2));
        assert!(
            r.stderr.contains("busy") && r.stderr.contains("next event"),
            "{}",
            r.dump()
        );
        assert!(r.stdout.is_empty());
    }
    drop(f);
    // The change is in the next event's checkpoint.
    let r = hook(
        &ws,
        &["--agent", "claude"],
        json!({"hook_event_name": "PostToolUse", "tool_name": "Bash"})
            .to_string()
            .as_bytes(),
        &[],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert_eq!(newest(&ws).1["stats"]["files_modified"], 1);
}

#[test]
fn the_first_hook_starts_a_watcher_that_stops_itself_when_idle() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("a.txt"), "a").unwrap();
    let payload = json!({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash"});
    let r = hook(
        &ws,
        &["--agent", "claude"],
        payload.to_string().as_bytes(),
        &[("CKPT_HOOK_WATCH", "2")],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    // The watcher comes up (it was not waited for), says its idle stop,
    // then goes away by itself without any request.
    let status = || ws.run(&["watch", "--status", "--json"]).ok().json();
    let t0 = std::time::Instant::now();
    let mut seen = None;
    while t0.elapsed() < std::time::Duration::from_secs(60) {
        let s = status();
        if s["running"] == true {
            seen = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let s = seen.expect("the hook started no watcher");
    assert_eq!(s["idle_stop_secs"], 2, "{s}");
    while t0.elapsed() < std::time::Duration::from_secs(120) && status()["running"] == true {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        status()["running"],
        false,
        "the watcher did not stop itself"
    );
    let log = std::fs::read_to_string(ws.store.join("watch.log")).unwrap();
    assert!(log.contains("idle stop"), "{log}");
}

/// A fork made by `ckpt fork` whose store path is too long for a Unix
/// socket's address (as a fork's store in the data directory under a long
/// home can be) gets its watcher from its first hook, like any workspace:
/// no manual step, so its hook-driven saves go through a watcher.
#[test]
fn the_first_hook_in_a_fork_with_a_long_store_path_starts_its_watcher() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("a.txt"), "a").unwrap();
    ws.save();
    let parent = ws
        .tmp
        .path()
        .join("a-store-directory-whose-name-is-long-".repeat(3));
    std::fs::create_dir_all(&parent).unwrap();
    let store = parent.join("store");
    assert!(store.join("watch.sock").as_os_str().len() > 108);
    let fork = ws.tmp.path().join("fork");
    ws.run(&[
        "fork",
        "--store",
        store.to_str().unwrap(),
        "HEAD",
        fork.to_str().unwrap(),
    ])
    .ok();
    std::fs::write(fork.join("b.txt"), "b").unwrap();
    let payload = json!({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash"});
    let r = run_stdin(
        ws.tmp.path(),
        &["-C", fork.to_str().unwrap(), "hook", "--agent", "claude"],
        payload.to_string().as_bytes(),
        &[("CKPT_HOOK_WATCH", "60")],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let status = || ckpt(&fork, &["watch", "--status", "--json"]).ok().json();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(60) && status()["running"] != true {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let running = status()["running"] == true;
    ckpt(&fork, &["watch", "--stop"]);
    let log = std::fs::read_to_string(store.join("watch.log")).unwrap_or_default();
    assert!(running, "the fork's first hook started no watcher:\n{log}");
}
