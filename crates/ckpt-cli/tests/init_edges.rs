//! `ckpt init` edge cases (issue 19, items 7 and 8): no workspace inside
//! another, and an outer workspace never captures or removes an inner one's
//! marker; a missing directory needs `--create`; with no usable home the
//! store goes beside the workspace.

mod common;

use std::path::Path;

use common::*;

/// Every path below `dir` (relative), for "nothing was created" checks.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.symlink_metadata().unwrap().is_dir() {
                todo.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn init_inside_a_workspace_is_refused() {
    let ws = Ws::new();
    write(&ws.root, "scripts/run.sh", b"echo hi\n");
    ws.init();
    ws.save();
    let before = listing(ws.tmp.path());
    let scripts = ws.root.join("scripts");
    let inner_store = ws.tmp.path().join("inner-store");

    // From inside, with no argument, and with the default store place.
    for args in [
        vec!["init"],
        vec!["init", "--store", inner_store.to_str().unwrap()],
        vec!["init", ".", "--json"],
    ] {
        let r = ckpt(&scripts, &args).code(3);
        assert!(
            r.stderr.contains("inside the ckpt workspace")
                && r.stderr.contains(ws.root.to_str().unwrap()),
            "the error names the outer workspace: {}",
            r.dump()
        );
        assert!(
            r.stderr.contains("outside"),
            "says what to do: {}",
            r.dump()
        );
    }
    // From outside, naming a subdirectory, even one to be created.
    let deeper = scripts.join("a/b");
    let r = ckpt(
        ws.tmp.path(),
        &["init", deeper.to_str().unwrap(), "--create"],
    )
    .code(3);
    assert!(
        r.stderr.contains("inside the ckpt workspace"),
        "{}",
        r.dump()
    );
    assert_eq!(
        listing(ws.tmp.path()),
        before,
        "a refused init created something"
    );
    assert!(!scripts.join(".ckpt").exists());
    // The outer workspace saw nothing new.
    let st = ws.run(&["status"]).ok();
    assert!(!st.stdout.contains(".ckpt"), "{}", st.dump());
    assert!(!ws.save().1, "the refused init changed the workspace");
}

/// A workspace that gets inside another (moved there: `ckpt init` refuses
/// to make one) is skipped by the outer one's scans and survives its
/// restores: marker, files and all.
#[test]
fn nested_workspace_is_never_captured_nor_removed() {
    let ws = Ws::new();
    write(&ws.root, "a.txt", b"outer\n");
    write(&ws.root, "inner/x.txt", b"outer's x\n");
    ws.init();
    let (v1, _) = ws.save();
    // Without `inner`, and without `sub`.
    remove_tree(&ws.root.join("inner"));
    let (v2, _) = ws.save();

    // A workspace made elsewhere, then moved inside at `inner`.
    let elsewhere = ws.tmp.path().join("elsewhere");
    write(&elsewhere, "x.txt", b"inner's x\n");
    write(&elsewhere, "lib/y.txt", b"inner's y\n");
    let inner_store = ws.tmp.path().join("inner-store");
    ckpt(
        ws.tmp.path(),
        &[
            "init",
            elsewhere.to_str().unwrap(),
            "--store",
            inner_store.to_str().unwrap(),
        ],
    )
    .ok();
    ckpt(&elsewhere, &["save"]).ok();
    let inner = ws.root.join("inner");
    std::fs::rename(&elsewhere, &inner).unwrap();
    // And one a level further down, below a directory that v2 lacks.
    write(&ws.root, "sub/other.txt", b"other\n");
    let deep = ws.root.join("sub/deep");
    write(&deep, "z.txt", b"deep z\n");
    let deep_marker = br#"{"version":1,"store":"/nonexistent-ckpt-test-store"}"#;
    std::fs::write(deep.join(".ckpt"), deep_marker).unwrap();

    let marker = std::fs::read(inner.join(".ckpt")).unwrap();
    let inner_snap = snapshot(&inner);
    let deep_snap = snapshot(&deep);

    // Status and save leave both out and report them as skipped.
    let st = ws.run(&["status"]).ok();
    assert!(!st.stdout.contains(".ckpt"), "{}", st.dump());
    assert!(!st.stdout.contains("x.txt"), "{}", st.dump());
    assert!(
        st.stdout.contains("skipped inner (workspace)")
            && st.stdout.contains("skipped sub/deep (workspace)"),
        "{}",
        st.dump()
    );
    let (v3, saved) = ws.save();
    assert!(saved);
    let show = ws.run(&["show", &v3, "--json"]).ok().json();
    let text = show.to_string();
    assert!(!text.contains(".ckpt"), "captured a marker: {text}");
    assert!(!text.contains("inner's"), "{text}");
    let skipped = show["skipped"].to_string();
    assert!(
        skipped.contains("\"inner\"") && skipped.contains("workspace"),
        "{skipped}"
    );
    let got = ws.materialise(&v3);
    assert!(
        got.keys()
            .all(|k| !k.starts_with(b"inner") && !k.starts_with(b"sub/deep")),
        "captured the nested workspace: {:?}",
        got.keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect::<Vec<_>>()
    );

    // Restoring checkpoints that have `inner` as a plain directory, or no
    // `sub`, leaves both workspaces exactly as they were.
    for id in [&v1, &v2, &v1] {
        ws.run(&["restore", id]).ok();
        assert_eq!(std::fs::read(inner.join(".ckpt")).unwrap(), marker);
        assert_same(&inner_snap, &snapshot(&inner), "inner workspace");
        assert_eq!(std::fs::read(deep.join(".ckpt")).unwrap(), deep_marker);
        assert_same(&deep_snap, &snapshot(&deep), "deep workspace");
        assert_eq!(std::fs::read(ws.root.join("a.txt")).unwrap(), b"outer\n");
    }
    assert!(!ws.root.join("sub/other.txt").exists(), "v1 has no sub/");
    // `--no-save` too, and the inner workspace still works.
    ws.run(&["restore", "--no-save", &v3]).ok();
    assert_eq!(std::fs::read(inner.join(".ckpt")).unwrap(), marker);
    assert_same(&inner_snap, &snapshot(&inner), "inner workspace");
    let st = ckpt(&inner, &["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");
}

#[test]
fn init_of_a_missing_directory_needs_create() {
    let ws = Ws::new();
    let parent = ws.tmp.path();
    let store = parent.join("s");
    let before = listing(parent);
    let r = ckpt(
        parent,
        &["init", "new/dir", "--store", store.to_str().unwrap()],
    )
    .code(2);
    assert!(
        r.stderr.contains("does not exist") && r.stderr.contains("--create"),
        "{}",
        r.dump()
    );
    let abs = parent.join("abs/dir");
    ckpt(parent, &["init", abs.to_str().unwrap()]).code(2);
    assert_eq!(listing(parent), before, "a refused init created something");

    ckpt(
        parent,
        &[
            "init",
            "new/dir",
            "--create",
            "--store",
            store.to_str().unwrap(),
        ],
    )
    .ok();
    assert!(parent.join("new/dir/.ckpt").is_file());
    ckpt(&parent.join("new/dir"), &["save"]).ok();
}

/// With `HOME` missing (`/nonexistent` style) or unset, and no
/// `XDG_DATA_HOME`, the store goes beside the workspace and no home is made.
#[test]
fn init_without_a_usable_home_puts_the_store_beside() {
    let ws = Ws::new();
    let parent = ws.tmp.path();
    let no_home = parent.join("no-such-home");
    let slash_nonexistent = Path::new("/nonexistent");
    let had_nonexistent = slash_nonexistent.exists();
    let homes: [Option<&Path>; 3] = [Some(&no_home), Some(slash_nonexistent), None];
    for (i, home) in homes.into_iter().enumerate() {
        let dir = parent.join(format!("proj{i}"));
        std::fs::create_dir(&dir).unwrap();
        let mut c = command(
            parent,
            &["init".as_ref(), dir.as_os_str(), "--json".as_ref()],
        );
        c.env_remove("XDG_DATA_HOME");
        match home {
            Some(h) => c.env("HOME", h),
            None => c.env_remove("HOME"),
        };
        let o = c.output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "HOME={home:?}: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let store = Path::new(v["store"].as_str().unwrap());
        assert!(
            store.starts_with(parent.join(".ckpt-stores")),
            "HOME={home:?}: store {} is not beside the workspace",
            store.display()
        );
        assert!(store.is_dir());
        ckpt(&dir, &["save"]).ok();
    }
    assert!(!no_home.exists(), "init made the missing home");
    if !had_nonexistent {
        assert!(!slash_nonexistent.exists(), "init made /nonexistent");
    }
}
