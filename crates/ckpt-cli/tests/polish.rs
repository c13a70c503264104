//! Output polish through the real binary: colour only when asked for or on
//! a terminal and never with NO_COLOR; completions and the man page are
//! generated from the CLI definition (so they name every subcommand);
//! `--quiet` save prints only the id; log shows local time with an age.

mod common;

use common::*;

#[test]
fn colour_follows_no_color_and_clicolor_force() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("f"), "x").unwrap();
    ws.save();
    // Not a terminal (tests capture stdout): plain.
    let plain = ws.run(&["log"]).ok().stdout;
    assert!(!plain.contains('\x1b'), "{plain:?}");
    let mut c = command(&ws.root, &["log".as_ref()]);
    let forced = c.env("CLICOLOR_FORCE", "1").output().unwrap();
    assert!(String::from_utf8_lossy(&forced.stdout).contains("\x1b[33m"));
    let mut c = command(&ws.root, &["log".as_ref()]);
    let off = c
        .env("CLICOLOR_FORCE", "1")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&off.stdout).contains('\x1b'));
    // Local time and a relative age.
    assert!(
        plain.contains("(just now)") || plain.contains(" s ago)"),
        "{plain}"
    );
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

#[test]
fn quiet_save_prints_only_the_id() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("f"), "x").unwrap();
    let out = ws.run(&["-q", "save"]).ok().stdout;
    assert_eq!(out, "v1\n");
    let out = ws.run(&["-q", "save"]).ok().stdout;
    assert_eq!(out, "", "unchanged quiet save printed something");
}
