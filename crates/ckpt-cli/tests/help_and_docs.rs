//! The CLI's self-description agrees with the CLI and its docs: shell
//! completions and the man page are generated from the CLI definition (so
//! they name every subcommand), `ckpt --help` says which commands take
//! `--json` and each command's own `--help` agrees, and docs/CLI.md lists
//! the JSON commands, the usage lines and the environment once each.

mod common;

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
fn completions_and_man_page_cover_every_command() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let out = ckpt(dir.path(), &["completions", shell]).ok().stdout;
        for sub in ["save", "restore", "hook", "mcp", "du", "gc"] {
            assert!(out.contains(sub), "{shell} completion lacks {sub}");
        }
        assert!(
            out.contains("keep-last"),
            "{shell} completion lacks gc flags"
        );
    }
    let man = ckpt(dir.path(), &["man"]).ok().stdout;
    assert!(
        man.starts_with(".ie") || man.contains(".TH ckpt 1"),
        "{man}"
    );
    for sub in ["save", "restore", "hook", "mcp", "du"] {
        assert!(man.contains(sub), "man page lacks {sub}");
    }
    let bad = ckpt(dir.path(), &["completions", "tcsh"]);
    assert_eq!(bad.code, Some(2), "{}", bad.dump());
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
