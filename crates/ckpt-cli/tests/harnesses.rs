//! The real agent harnesses, end to end: Claude Code, Codex, Gemini CLI,
//! Copilot CLI and opencode (pinned in `tests/harness/package.json`,
//! installed by `tests/harness/install.sh` into `target/harness-clis`) run a
//! scripted turn against a scripted stand-in for their model API
//! (`tests/harness/model_standin.py`, driven by `tests/harness/drive.py`,
//! which owns how each CLI is pointed at it and run without a person). ckpt
//! is set up the way a user sets it up, `ckpt init --agent NAME --write`.
//!
//! The turn: (1) the agent writes a file with its edit tool, (2) a shell
//! command creates a directory of 1,000 files, (3) it removes a directory it
//! did not create, (4) a shell command changes nothing. Checked: one
//! checkpoint per file-changing tool call, after the call, tagged with
//! session, event and tool (and harness), none for the call that changed
//! nothing; the checkpoint before the removal restores the directory byte
//! for byte; the harness exits 0 and prints nothing from ckpt. Faults (store
//! locked, store's disk full, `ckpt` missing from PATH) must leave the
//! harness working: every tool call still runs.
//!
//! A CLI that is not installed is a skip (a failure under `CI=true`, where
//! `.ci/run` installs them). Cursor's CLI is not on npm: it is covered by
//! the documented payloads in `tests/fixtures/hooks/cursor-documented`.
//! Nothing here measures time; each harness run has a generous bound so a
//! hung harness fails instead of stalling the suite.

mod common;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::harness::*;
use common::*;
use serde_json::{json, Value};

/// Harness runs are heavy (a Node or Bun process each); one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The test's PATH without any directory that holds a `ckpt`.
fn path_without_ckpt() -> String {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty() && !Path::new(d).join("ckpt").exists())
        .collect::<Vec<_>>()
        .join(":")
}

/// What one harness run did.
struct Turn {
    exit: Option<i64>,
    stdout: String,
    stderr: String,
}

impl Turn {
    fn dump(&self) -> String {
        format!(
            "exit: {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.exit, self.stdout, self.stderr
        )
    }
}

/// Runs one scripted turn of `name` in the workspace (HOME is a private
/// directory beside it, so nothing of the user's is read or written).
fn run_turn(name: &str, ws: &Ws, script: &Value, path: &str, extra: &[&str], watch: Watch) -> Turn {
    let script_file = ws.tmp.path().join(format!("script-{name}.json"));
    std::fs::write(&script_file, script.to_string()).unwrap();
    let home = ws.tmp.path().join("home");
    let mut c = Command::new("python3");
    c.arg(harness_dir().join("drive.py"))
        .args(["run", name, "--timeout", "300", "--bin-dir"])
        .arg(clis())
        .arg("--ws")
        .arg(&ws.root)
        .arg("--home")
        .arg(&home)
        .arg("--script")
        .arg(&script_file)
        .arg("--log")
        .arg(ws.tmp.path().join(format!("requests-{name}")))
        .args(["--path", path])
        .args(extra);
    if watch == Watch::Off {
        // Like every other test's ckpt: no watcher outliving the test.
        c.args(["--env", "CKPT_HOOK_WATCH=off"]);
    }
    let out = c.output().expect("run python3 drive.py");
    assert!(
        out.status.success(),
        "drive.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("drive.py prints JSON");
    Turn {
        exit: v["exit"].as_i64(),
        stdout: v["stdout"].as_str().unwrap_or_default().to_string(),
        stderr: v["stderr"].as_str().unwrap_or_default().to_string(),
    }
}

/// Whether the hooks may start the workspace's watcher (ckpt's default).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Watch {
    /// As a user gets it: the first hook starts a watcher; stopped when the
    /// test ends ([`StopWatcher`]).
    Default,
    /// `CKPT_HOOK_WATCH=off`: every save scans.
    Off,
}

/// Stops the workspace's watcher (if a hook started one) when dropped.
struct StopWatcher<'a>(&'a Ws);
impl Drop for StopWatcher<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["watch", "--stop"]);
    }
}

/// Sets up ckpt's hooks in the workspace as a user would.
fn install_hooks(ws: &Ws, name: &str) {
    let r = ws.run(&["init", "--agent", name, "--write"]);
    assert_eq!(
        r.code,
        Some(0),
        "`ckpt init --agent {name} --write`:\n{}",
        r.dump()
    );
}

/// The edit and shell tool names each harness reports.
fn tools(name: &str) -> (&'static str, &'static str) {
    match name {
        "claude" => ("Write", "Bash"),
        "codex" => ("apply_patch", "Bash"),
        "gemini" => ("write_file", "run_shell_command"),
        "copilot" => ("create", "bash"),
        "opencode" => ("write", "bash"),
        other => panic!("unknown harness {other}"),
    }
}

/// The command that removes `keep`: Codex refuses `rm -f` forms itself.
fn rm_keep(name: &str) -> &'static str {
    if name == "codex" {
        "rm -r keep"
    } else {
        "rm -rf keep"
    }
}

/// The four steps. (`split`, not a `$(seq …)` loop: Gemini CLI refuses
/// command substitution.)
fn scenario(name: &str, root: &Path) -> Value {
    json!({
        "steps": [
            { "edit": { "path": root.join("notes.txt"), "content": format!("hello from {name}\n") } },
            { "shell": "mkdir gen && seq 1 1000 | split -l 1 -a 4 - gen/f" },
            { "shell": rm_keep(name) },
            { "shell": "ls" },
        ],
        "final": "All done."
    })
}

/// A directory the agent did not create: varied sizes, a subdirectory, an
/// executable, an empty file.
fn seed_keep(root: &Path, rng: &mut Rng) -> usize {
    fill_dir(root, "keep", 40, rng);
    fill_dir(root, "keep/sub", 5, rng);
    write(root, "keep/run.sh", b"#!/bin/sh\necho kept\n");
    chmod(&root.join("keep/run.sh"), 0o755);
    write(root, "keep/empty", b"");
    write(root, "keep/big.bin", &rng.bytes(300_000));
    40 + 5 + 3
}

/// Every tool call of the turn ran: the edit, 1,000 files, the removal.
#[track_caller]
fn assert_turn_effects(name: &str, root: &Path, turn: &Turn) {
    let ctx = || format!("{name}:\n{}", turn.dump());
    assert_eq!(turn.exit, Some(0), "{}", ctx());
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).ok(),
        Some(format!("hello from {name}\n")),
        "the edit did not happen: {}",
        ctx()
    );
    let n = std::fs::read_dir(root.join("gen")).map_or(0, |d| d.count());
    assert_eq!(n, 1000, "gen/ has {n} files: {}", ctx());
    assert!(!root.join("keep").exists(), "keep/ survived: {}", ctx());
}

/// Lines ckpt itself writes start like this (`ckpt hook: …`, `ckpt: …`).
fn ckpt_lines(s: &str) -> Vec<&str> {
    s.lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("ckpt:") || l.contains("ckpt hook:") || l.contains("ckpt: error")
        })
        .collect()
}

fn tag<'a>(cp: &'a Value, k: &str) -> &'a str {
    cp["tags"][k].as_str().unwrap_or("")
}

/// Names harnesses give the event after a tool call (and the temporary
/// adapters' Claude Code names).
const AFTER_TOOL: &[&str] = &[
    "PostToolUse",
    "AfterTool",
    "postToolUse",
    "tool.execute.after",
];

/// The whole scenario on one harness.
fn scenario_on(name: &str, watch: Watch) {
    if !have(name) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new(name, 58);
    let keep_files = seed_keep(&ws.root, &mut rng);
    let keep_before = snapshot(&ws.root.join("keep"));
    install_hooks(&ws, name);
    let _stop = StopWatcher(&ws);
    let turn = run_turn(
        name,
        &ws,
        &scenario(name, &ws.root),
        &path_with_ckpt(),
        &[],
        watch,
    );
    assert_turn_effects(name, &ws.root, &turn);
    let noise: Vec<&str> = ckpt_lines(&turn.stdout)
        .into_iter()
        .chain(ckpt_lines(&turn.stderr))
        .collect();
    assert!(noise.is_empty(), "{name}: output from ckpt: {noise:?}");
    let said = doctor_and_status(&ws);
    assert!(
        !said.contains("ran a session here"),
        "{name}: a warning after a session the hooks recorded:\n{said}"
    );

    // One checkpoint per file-changing tool call, after it; none for `ls`.
    let cps = ws.checkpoints();
    let tool_cps: Vec<&Value> = cps.iter().filter(|c| !tag(c, "tool").is_empty()).collect();
    let (edit, shell) = tools(name);
    let got: Vec<(&str, &str)> = tool_cps
        .iter()
        .map(|c| (tag(c, "tool"), c["message"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        tool_cps.iter().map(|c| tag(c, "tool")).collect::<Vec<_>>(),
        vec![edit, shell, shell],
        "{name}: tool-call checkpoints (tool, message): {got:?}\n{}",
        turn.dump()
    );
    let session = tag(tool_cps[0], "session");
    assert!(
        !session.is_empty(),
        "{name}: no session tag: {:#}",
        tool_cps[0]
    );
    for c in &tool_cps {
        assert_eq!(tag(c, "session"), session, "{name}: {c:#}");
        assert!(
            AFTER_TOOL.contains(&tag(c, "event")),
            "{name}: a tool-call checkpoint not made after the call: {c:#}"
        );
        assert_eq!(tag(c, "harness"), name, "{name}: no harness tag: {c:#}");
    }
    assert_eq!(
        tool_cps[1]["stats"]["files_added"], 1000,
        "{:#}",
        tool_cps[1]
    );
    assert_eq!(
        tool_cps[2]["stats"]["files_deleted"], keep_files,
        "{:#}",
        tool_cps[2]
    );

    // The checkpoint before the removal brings keep/ back exactly.
    let before_rm = cps
        .iter()
        .position(|c| c["id"] == tool_cps[2]["id"])
        .unwrap()
        .checked_sub(1)
        .expect("a checkpoint before the removal");
    let r = ws.run(&["undo"]);
    assert!(
        r.stdout.contains(&format!(
            "back to {}",
            cps[before_rm]["id"].as_str().unwrap()
        )),
        "{name}: {}",
        r.dump()
    );
    assert_eq!(r.code, Some(0), "{name}: {}", r.dump());
    assert_same(
        &keep_before,
        &snapshot(&ws.root.join("keep")),
        &format!("{name}: keep/ after {}", r.what),
    );
    assert_eq!(
        std::fs::read_dir(ws.root.join("gen")).unwrap().count(),
        1000,
        "{name}: undoing the removal must keep gen/"
    );
    assert_store_verifies(&ws, name);
}

#[test]
fn claude_code_scenario() {
    scenario_on("claude", Watch::Default);
}

#[test]
fn codex_scenario() {
    scenario_on("codex", Watch::Off);
}

#[test]
fn gemini_cli_scenario() {
    scenario_on("gemini", Watch::Default);
}

#[test]
fn copilot_cli_scenario() {
    scenario_on("copilot", Watch::Off);
}

#[test]
fn opencode_scenario() {
    scenario_on("opencode", Watch::Off);
}

#[test]
fn cursor_is_covered_by_documented_payloads_only() {
    skip_env(
        "Cursor's CLI is not published on npm (it installs from Cursor's own site), so it cannot run \
         here; its hook payloads are the documented ones in tests/fixtures/hooks/cursor-documented",
    );
}

/// What `ckpt doctor` and `ckpt status` say (both streams), run with the
/// HOME the harness ran with (so they read its sessions and approvals as
/// the user's own).
fn doctor_and_status(ws: &Ws) -> String {
    let home = ws.tmp.path().join("home");
    let codex_home = home.join(".codex");
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("CODEX_HOME", codex_home.to_str().unwrap()),
    ];
    let d = run_stdin(&ws.root, &["doctor"], b"", &env);
    assert_eq!(d.code, Some(0), "{}", d.dump());
    let s = run_stdin(&ws.root, &["status"], b"", &env);
    assert_eq!(s.code, Some(0), "{}", s.dump());
    format!("{}{}{}{}", d.stdout, d.stderr, s.stdout, s.stderr)
}

/// Codex runs no hook the user has not approved: without the bypass flag
/// nothing is recorded, and `doctor` and `status` say which hooks wait for
/// approval and how to give it. Once the user approves them as Codex's TUI
/// records it (`[hooks.state."KEY"] trusted_hash`, the hash Codex itself
/// reports), the warning goes and Codex runs them without the bypass; a
/// hook changed after approval is reported again.
#[test]
fn codex_runs_ckpt_hooks_only_once_approved_and_doctor_says_which() {
    let name = "codex";
    if !have(name) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new(name, 58);
    seed_keep(&ws.root, &mut rng);
    install_hooks(&ws, name);
    let turn = run_turn(
        name,
        &ws,
        &scenario(name, &ws.root),
        &path_with_ckpt(),
        &["--no-hook-trust-bypass"],
        Watch::Off,
    );
    assert_turn_effects(name, &ws.root, &turn);
    assert!(
        ws.checkpoints().is_empty(),
        "untrusted Codex hooks ran: {:#?}",
        ws.checkpoints()
    );
    let codex_home = ws.tmp.path().join("home/.codex");
    let said = doctor_and_status(&ws);
    assert!(
        said.matches("not approved yet: UserPromptSubmit, PreToolUse, PostToolUse, Stop")
            .count()
            == 2
            && said.contains("/hooks"),
        "doctor and status do not both say the Codex hooks wait for approval:\n{said}"
    );

    // The user approves every hook Codex lists (what /hooks writes).
    let out = Command::new("python3")
        .arg(harness_dir().join("drive.py"))
        .args(["codex-hooks", "--bin-dir"])
        .arg(clis())
        .arg("--ws")
        .arg(&ws.root)
        .arg("--home")
        .arg(ws.tmp.path().join("home"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), 4, "{listed:#?}");
    let config = codex_home.join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    let mut approved = before.clone();
    for h in &listed {
        assert_eq!(h["trustStatus"], "untrusted", "{h:#}");
        approved.push_str(&format!(
            "\n[hooks.state.{}]\ntrusted_hash = {}\n",
            h["key"], h["currentHash"]
        ));
    }
    std::fs::write(&config, &approved).unwrap();
    let said = doctor_and_status(&ws);
    assert!(
        !said.contains("not approved") && !said.contains("not trusted"),
        "a Codex trust warning with every hook approved:\n{said}"
    );
    let script = json!({"steps": [{ "shell": "echo approved > approved.txt" }], "final": "Done."});
    let turn = run_turn(
        name,
        &ws,
        &script,
        &path_with_ckpt(),
        &["--no-hook-trust-bypass"],
        Watch::Off,
    );
    assert_eq!(turn.exit, Some(0), "{}", turn.dump());
    let cps = ws.checkpoints();
    assert!(
        cps.iter()
            .any(|c| tag(c, "harness") == "codex" && tag(c, "tool") == "Bash"),
        "approved Codex hooks recorded no tool call: {cps:#?}\n{}",
        turn.dump()
    );
    // Its latest session recorded, Codex is warned about no more.
    let said = doctor_and_status(&ws);
    assert!(!said.contains("Codex"), "a Codex warning:\n{said}");

    // A hook changed after approval is not run by Codex, and ckpt says so.
    let hooks = ws.root.join(".codex/hooks.json");
    let text = std::fs::read_to_string(&hooks).unwrap();
    let changed = text.replacen(
        "\"command\": \"ckpt hook --agent codex\"",
        "\"command\": \"ckpt hook --agent codex\", \"timeout\": 30",
        1,
    );
    assert_ne!(changed, text);
    std::fs::write(&hooks, changed).unwrap();
    let said = doctor_and_status(&ws);
    assert!(
        said.contains("changed since you approved them: UserPromptSubmit"),
        "{said}"
    );
}

// --- Faults: the harness keeps working --------------------------------------

/// Runs the scenario with ckpt broken in some way (`hold` breaks it after
/// the hooks are installed and returns what keeps it broken until dropped);
/// every tool call must still run and the harness exit 0.
fn fault_on(
    name: &str,
    what: &str,
    ws: Ws,
    path: String,
    hold: impl FnOnce(&Ws) -> Box<dyn std::any::Any>,
) -> Ws {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut rng = Rng::new(name, 58);
    seed_keep(&ws.root, &mut rng);
    install_hooks(&ws, name);
    let guard = hold(&ws);
    let turn = run_turn(name, &ws, &scenario(name, &ws.root), &path, &[], Watch::Off);
    drop(guard);
    assert_turn_effects(name, &ws.root, &turn);
    // Gemini CLI shows hook stderr: the user is told.
    // (Its start-up warning lists the hook commands, so look for what the
    // failing hook itself wrote: ckpt's message or the shell's.)
    if name == "gemini" {
        let told = turn.stderr.contains("ckpt hook:")
            || turn.stderr.contains("ckpt: not found")
            || turn.stderr.contains("ckpt: command not found");
        assert!(
            told,
            "{name} with {what}: no warning on stderr:\n{}",
            turn.dump()
        );
    }
    ws
}

/// Holds the store lock (an exclusive `flock`, as another ckpt command
/// does) until dropped.
struct Locked(std::fs::File);
impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: a valid open fd.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// With `ckpt` missing from the harness's PATH the harness keeps working,
/// and afterwards `ckpt doctor` and `ckpt status` say that it ran a session
/// here that no hook recorded.
fn missing_from_path(name: &str) {
    if !have(name) {
        return;
    }
    let ws = Ws::new();
    ws.init();
    let ws = fault_on(
        name,
        "ckpt missing from PATH",
        ws,
        path_without_ckpt(),
        |_| Box::new(()),
    );
    let said = doctor_and_status(&ws);
    let title = match name {
        "claude" => "Claude Code",
        "gemini" => "Gemini CLI",
        "copilot" => "GitHub Copilot CLI",
        other => other,
    };
    let warning = format!("{title} ran a session here");
    assert_eq!(
        said.matches(&warning).count(),
        2,
        "{name}: doctor and status do not both say no hook recorded the session:\n{said}"
    );
    assert!(said.contains("is on the PATH"), "{said}");
}

fn store_locked(name: &str) {
    if !have(name) {
        return;
    }
    let ws = Ws::new();
    ws.init();
    let store = ws.store.clone();
    fault_on(name, "the store locked", ws, path_with_ckpt(), move |_| {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(store.join("lock"))
            .unwrap();
        // SAFETY: a valid open fd.
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        Box::new(Locked(f))
    });
}

/// Fills a filesystem to the last byte until dropped.
struct Filled(PathBuf);
impl Drop for Filled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn disk_full(name: &str) {
    if !have(name) {
        return;
    }
    let Some(fs) = Tmpfs::mount_or_skip("8m") else {
        return;
    };
    // The store on the small filesystem, the workspace elsewhere: the
    // agent's own writes succeed, ckpt's cannot.
    let mut ws = Ws::new();
    ws.store = fs.path().join("store");
    ws.init();
    let filler = fs.path().join("filler");
    fault_on(
        name,
        "the store's disk full",
        ws,
        path_with_ckpt(),
        move |_| {
            use std::io::Write;
            let mut f = std::fs::File::create(&filler).unwrap();
            let block = vec![0x5au8; 64 * 1024];
            while f.write_all(&block).is_ok() {}
            let _ = f.write_all(&block[..1]);
            Box::new(Filled(filler))
        },
    );
    drop(fs);
}

#[test]
fn claude_code_without_ckpt_on_path() {
    missing_from_path("claude");
}

#[test]
fn gemini_cli_without_ckpt_on_path() {
    missing_from_path("gemini");
}

#[test]
fn copilot_cli_without_ckpt_on_path() {
    missing_from_path("copilot");
}

#[test]
fn claude_code_with_the_store_locked() {
    store_locked("claude");
}

#[test]
fn gemini_cli_with_the_store_locked() {
    store_locked("gemini");
}

#[test]
fn claude_code_with_the_store_disk_full() {
    disk_full("claude");
}

#[test]
fn gemini_cli_with_the_store_disk_full() {
    disk_full("gemini");
}
