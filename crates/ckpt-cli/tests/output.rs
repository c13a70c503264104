//! What commands print, through the real binary: colour only when asked for
//! or on a terminal and never with NO_COLOR, log's local time with an age,
//! `--quiet` save printing only the id, `log -n 0` printing nothing when
//! checkpoints exist, "1 file written" (not "1 files"), and `elapsed_ms` in
//! `--json` output with at most three decimals.

mod common;

use std::ffi::OsStr;

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
fn quiet_save_prints_only_the_id() {
    let ws = Ws::new();
    ws.init();
    std::fs::write(ws.root.join("f"), "x").unwrap();
    let out = ws.run(&["-q", "save"]).ok().stdout;
    assert_eq!(out, "v1\n");
    let out = ws.run(&["-q", "save"]).ok().stdout;
    assert_eq!(out, "", "unchanged quiet save printed something");
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
