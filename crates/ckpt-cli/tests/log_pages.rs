//! `ckpt log` pages and filters, and `ckpt cat`, against a model: a random
//! history of edits to a few paths (seeded, `CKPT_TEST_SEED` to replay) where
//! the test knows which checkpoint changed which path, what each message
//! and tag is, and every file's bytes at every checkpoint.
//!
//! - Pages (`-n K --before SEQ`, following `more`) concatenate to the full
//!   log, in order, with no gap or repeat.
//! - `--path P` lists exactly the checkpoints whose edit touched P (or
//!   something below it, for a directory).
//! - `--search T` lists exactly those whose id, message or a tag contains T
//!   (ignoring case).
//! - `ckpt cat ID P` prints P's bytes at ID; a directory or a missing path
//!   is refused with exit 2.

mod common;

use std::collections::BTreeMap;

use common::*;

const PATHS: [&str; 4] = ["a.txt", "src/x.rs", "src/y.rs", "docs/readme.md"];

#[test]
fn pages_filters_and_cat_match_a_model() {
    let mut rng = Rng::new("log_pages", 7);
    let ws = Ws::new();
    ws.init();
    // Model: per checkpoint (oldest first) the paths it changed, message,
    // tag, and the contents of every path after it.
    let mut changed: Vec<Vec<&str>> = Vec::new();
    let mut messages = Vec::new();
    let mut contents: Vec<BTreeMap<&str, Vec<u8>>> = Vec::new();
    let mut now: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    for i in 0..24 {
        let mut touched = Vec::new();
        for p in PATHS {
            if rng.below(3) == 0 || (i == 0 && p == "a.txt") {
                // The step number first: a touched file always changes.
                let mut body = format!("{i}\n").into_bytes();
                let len = 1 + rng.below(40) as usize;
                body.extend(rng.text(len));
                write(&ws.root, p, &body);
                now.insert(p, body);
                touched.push(p);
            }
        }
        if touched.is_empty() {
            let body = format!("edit {i}\n").into_bytes();
            write(&ws.root, "a.txt", &body);
            now.insert("a.txt", body);
            touched.push("a.txt");
        }
        let msg = format!("Step {i} {}", ["Fix", "refactor", "TEST"][i % 3]);
        let tag = format!("session=s{}", i / 5);
        ws.run(&["save", "-m", &msg, "--tag", &tag]).ok();
        changed.push(touched);
        messages.push((msg, tag));
        contents.push(now.clone());
    }
    let n = changed.len();
    let all = ws.run(&["log", "--json"]).ok().json();
    let want_all: Vec<String> = (1..=n).rev().map(|s| format!("v{s}")).collect();
    assert_eq!(ids(&all), want_all);
    assert_eq!(all["more"], false);

    // Pages of every size concatenate to the whole log.
    for k in [1usize, 5, 7, 24, 30] {
        let mut got = Vec::new();
        let mut before: Option<String> = None;
        loop {
            let ks = k.to_string();
            let mut args = vec!["log", "--json", "-n", &ks];
            if let Some(b) = &before {
                args.extend(["--before", b.as_str()]);
            }
            let page = ws.run(&args).ok().json();
            let page_ids = ids(&page);
            assert!(page_ids.len() <= k);
            assert_eq!(page["total"], n);
            got.extend(page_ids.iter().cloned());
            if page["more"] != true {
                break;
            }
            before = Some(page_ids.last().unwrap().clone());
        }
        assert_eq!(got, want_all, "pages of {k}");
    }

    // --path: exactly the checkpoints that touched the path (or below).
    for p in PATHS.iter().copied().chain(["src"]) {
        let got = ids(&ws.run(&["log", "--json", "--path", p]).ok().json());
        let want: Vec<String> = (0..n)
            .rev()
            .filter(|&i| {
                changed[i]
                    .iter()
                    .any(|c| *c == p || c.starts_with(&format!("{p}/")))
            })
            .map(|i| format!("v{}", i + 1))
            .collect();
        assert_eq!(got, want, "--path {p}");
    }

    // --search: id, message or tag, ignoring case.
    for t in ["fix", "REFACTOR", "session=s2", "v1", "nothing-matches"] {
        let got = ids(&ws.run(&["log", "--json", "--search", t]).ok().json());
        let lt = t.to_lowercase();
        let want: Vec<String> = (0..n)
            .rev()
            .filter(|&i| {
                let (m, tag) = &messages[i];
                format!("v{}", i + 1).contains(&lt)
                    || m.to_lowercase().contains(&lt)
                    || tag.to_lowercase().contains(&lt)
            })
            .map(|i| format!("v{}", i + 1))
            .collect();
        assert_eq!(got, want, "--search {t}");
    }

    // cat: every path at a few checkpoints, byte for byte.
    for i in [0, n / 2, n - 1] {
        let id = format!("v{}", i + 1);
        for (p, body) in &contents[i] {
            let r = ws.run(&["cat", &id, p]).ok();
            assert_eq!(r.stdout.as_bytes(), &body[..], "cat {id} {p}");
        }
    }
    ws.run(&["cat", "v1", "src"]).code(2);
    ws.run(&["cat", "v1", "no/such"]).code(2);
    ws.run(&["log", "--path", "."]).code(2);
}
