//! Small things seen by a new user (issue 19, item 10), each checked the
//! way it was seen: `log -n 0`, state versions that look like checkpoint
//! ids, the watcher's epoch in JSON, `elapsed_ms` digits, "1 files", a
//! doubled error prefix, `--help` and the docs about `--json`. Also the
//! skip helper's CI rule (item 9).

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::*;

/// The repository root (for the docs).
fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn read_doc(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn log_n_0_prints_nothing_when_checkpoints_exist() {
    let ws = Ws::new();
    // No checkpoint yet: the hint.
    ws.init();
    let r = ws.run(&["log", "-n", "0"]).ok();
    assert!(r.stdout.contains("no checkpoints yet"), "{}", r.dump());
    write(&ws.root, "a.txt", b"one\n");
    ws.save();
    write(&ws.root, "a.txt", b"two\n");
    ws.save();
    let r = ws.run(&["log", "-n", "0"]).ok();
    assert!(
        !r.stdout.contains("no checkpoints yet"),
        "log -n 0 says there are none while 2 exist:\n{}",
        r.dump()
    );
    assert_eq!(r.stdout.trim(), "", "{}", r.dump());
    let r = ws.run(&["log", "-n", "1"]).ok();
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.dump());
    let v = ws.run(&["log", "-n", "0", "--json"]).ok().json();
    assert_eq!(v["checkpoints"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["total"], 2, "{v}");
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

/// The number after `"elapsed_ms":` in raw JSON text.
fn elapsed_ms_text(json: &str) -> String {
    let at = json
        .find("\"elapsed_ms\"")
        .unwrap_or_else(|| panic!("no elapsed_ms in {json}"));
    json[at + "\"elapsed_ms\"".len()..]
        .trim_start_matches([':', ' '])
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '-')
        .collect()
}

#[test]
fn elapsed_ms_has_at_most_three_decimals() {
    let ws = Ws::new();
    ws.init();
    let mut rng = Rng::new("elapsed_ms", 1);
    build_tree(&ws.root, 2, 10, &mut rng);
    let mut outputs = vec![ws.run(&["save", "--json"]).ok().stdout];
    write(&ws.root, "d00/new.txt", b"new\n");
    outputs.push(ws.run(&["save", "--json"]).ok().stdout);
    outputs.push(ws.run(&["restore", "--json", "v1"]).ok().stdout);
    let to = ws.fresh_dir();
    outputs.push(
        ws.run(&["restore", "--json", "--to", to.to_str().unwrap(), "v1"])
            .ok()
            .stdout,
    );
    write(&ws.root, "d00/hooked.txt", b"hook\n");
    let hook = command(&ws.root, &[OsStr::new("hook"), OsStr::new("--json")])
        .env("CKPT_EVENT", "after-turn")
        .output()
        .unwrap();
    assert!(hook.status.success(), "{hook:?}");
    outputs.push(String::from_utf8(hook.stdout).unwrap());
    for out in &outputs {
        let n = elapsed_ms_text(out);
        assert!(!n.contains('e'), "elapsed_ms {n} in exponent form: {out}");
        let decimals = n.split('.').nth(1).map_or(0, str::len);
        assert!(
            decimals <= 3,
            "elapsed_ms {n} has {decimals} decimals: {out}"
        );
        let v: f64 = n.parse().unwrap();
        assert!(v >= 0.0, "{out}");
    }
}

#[test]
fn one_file_written_is_singular() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", b"one\n");
    ws.init();
    ws.save();
    write(&ws.root, "a.txt", b"two\n");
    let r = ws.run(&["restore", "--no-save", "HEAD"]).ok();
    assert!(r.stdout.contains("1 file written"), "{}", r.dump());
    assert!(!r.stdout.contains("1 files"), "{}", r.dump());
    write(&ws.root, "a.txt", b"three\n");
    write(&ws.root, "c.txt", b"c\n");
    ws.save();
    write(&ws.root, "a.txt", b"four\n");
    write(&ws.root, "c.txt", b"cc\n");
    let r = ws.run(&["restore", "--no-save", "HEAD"]).ok();
    assert!(r.stdout.contains("2 files written"), "{}", r.dump());
}

/// Stops the watcher this test started (kills it if `--stop` fails).
struct Stopper<'a> {
    ws: &'a Ws,
    pid: i32,
}

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        if self.ws.run(&["watch", "--stop"]).code != Some(0) {
            // SAFETY: kill(2) on the watcher this test started.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn watch_status_epoch_is_a_string_and_a_second_daemon_has_one_prefix() {
    let ws = Ws::new();
    ws.init();
    ws.save();
    let v = ws.run(&["watch", "--daemon", "--json"]).ok().json();
    let w = Stopper {
        ws: &ws,
        pid: v["pid"].as_i64().unwrap() as i32,
    };
    let sv = ws.run(&["watch", "--status", "--json"]).ok().json();
    let second = ws.run(&["watch", "--daemon"]);
    drop(w);
    for (what, v) in [("--daemon --json", &v), ("--status --json", &sv)] {
        let e = v["epoch"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: epoch is not a string: {v}"));
        e.parse::<u64>()
            .unwrap_or_else(|err| panic!("{what}: epoch {e:?} is not a decimal u64: {err}"));
    }
    assert_ne!(second.code, Some(0), "{}", second.dump());
    assert!(
        second.stderr.contains("already running"),
        "{}",
        second.dump()
    );
    assert_eq!(
        second.stderr.matches("ckpt: error:").count(),
        1,
        "the error prefix appears more than once:\n{}",
        second.dump()
    );
}

/// The commands `ckpt --help` lists.
fn commands() -> Vec<String> {
    let r = ckpt(Path::new("/"), &["--help"]).ok();
    let mut out = Vec::new();
    let mut in_cmds = false;
    for l in r.stdout.lines() {
        if l.starts_with("Commands:") {
            in_cmds = true;
            continue;
        }
        if in_cmds {
            if !l.starts_with("  ") {
                break;
            }
            if l.starts_with("   ") {
                continue; // a wrapped description
            }
            let name = l.split_whitespace().next().unwrap().to_string();
            if name != "help" {
                out.push(name);
            }
        }
    }
    assert!(out.len() > 10, "no command list in:\n{}", r.dump());
    out
}

#[test]
fn help_says_which_commands_take_json() {
    let help = ckpt(Path::new("/"), &["--help"]).ok().stdout;
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = flat
        .find("takes --json")
        .unwrap_or_else(|| panic!("--help does not say which commands take --json:\n{help}"));
    let sentence = &flat[flat[..at].rfind(". ").map_or(0, |i| i + 2)..at];
    let exceptions: Vec<&str> = sentence
        .split_once("except")
        .map(|(_, rest)| {
            rest.split([',', ' '])
                .filter(|w| !w.is_empty() && *w != "and")
                .collect()
        })
        .unwrap_or_default();
    for cmd in commands() {
        let sub = ckpt(Path::new("/"), &[cmd.as_str(), "--help"]).ok().stdout;
        // `state` takes --json on each of its subcommands.
        let sub = if cmd == "state" {
            ckpt(Path::new("/"), &["state", "get", "--help"])
                .ok()
                .stdout
        } else {
            sub
        };
        let takes = sub.contains("--json");
        let excepted = exceptions.contains(&cmd.as_str());
        assert!(
            takes != excepted,
            "`ckpt {cmd}`: takes --json: {takes}, but --help says \"{sentence}takes --json\""
        );
    }
}

#[test]
fn docs_list_json_commands_once_and_without_duplicates() {
    let cli = read_doc("docs/CLI.md");
    let readme = read_doc("README.md");
    assert!(
        !readme.contains("Every command takes `--json`"),
        "README says every command takes --json"
    );
    // The JSON section names doctor, fork, cp and watch.
    let json = cli
        .split("## JSON output")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a JSON output section");
    for c in ["doctor", "fork", "cp", "watch"] {
        assert!(
            json.contains(&format!("- `{c}")),
            "docs/CLI.md's JSON section leaves out {c}"
        );
    }
    // `ckpt gc` once in the usage block.
    let usage = cli
        .split("## Usage")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("a usage block");
    let gc = usage.lines().filter(|l| l.starts_with("ckpt gc")).count();
    assert_eq!(gc, 1, "`ckpt gc` appears {gc} times in the usage block");
    // No line twice in the Environment section.
    let env = cli
        .split("## Environment")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("an Environment section");
    let mut seen = std::collections::BTreeSet::new();
    for l in env.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(seen.insert(l), "docs/CLI.md Environment repeats: {l}");
    }
}

#[test]
fn a_skip_fails_only_under_ci_true() {
    assert!(skip_fails(Some("true")));
    assert!(!skip_fails(None));
    assert!(!skip_fails(Some("")));
    assert!(!skip_fails(Some("false")));
}
