//! End-to-end behaviour of the `ckpt` command line, driving the real binary:
//! exit codes (2 usage/unknown id, 3 workspace, 5 corruption), "nothing
//! changed" and `--allow-empty`, the `--json` schema of save/log/show/
//! status/diff, unified and binary diffs, names with a newline or non-UTF-8
//! bytes (round-trip and quoting), id forms (hash prefix, `HEAD~1`),
//! `restore --dry-run`, the undo id of a restore, `restore --to` refusing a
//! non-empty directory, `delete` + `gc` freeing objects, and a corrupted
//! object being detected on restore without touching the workspace.

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use common::*;
use serde_json::Value;

/// A workspace with a few files, initialised, with one checkpoint.
fn small_ws() -> (Ws, String) {
    let ws = Ws::new();
    write(&ws.root, "README.md", b"# hello\nline two\nline three\n");
    write(
        &ws.root,
        "src/main.rs",
        b"fn main() {\n    println!(\"hi\");\n}\n",
    );
    write(
        &ws.root,
        "data/blob.bin",
        &[0u8, 1, 2, 3, 0, 255, 254, 0, 7],
    );
    std::fs::create_dir_all(ws.root.join("empty")).unwrap();
    std::os::unix::fs::symlink("src/main.rs", ws.root.join("main-link")).unwrap();
    ws.init();
    let (id, saved) = ws.save();
    assert!(saved);
    (ws, id)
}

fn changes(v: &Value) -> Vec<(String, String)> {
    v["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes array in {v}"))
        .iter()
        .map(|c| {
            (
                c["path"].as_str().expect("change.path").to_string(),
                c["status"].as_str().expect("change.status").to_string(),
            )
        })
        .collect()
}

#[test]
fn init_twice_fails_with_exit_3() {
    let ws = Ws::new();
    ws.init();
    let r = ckpt(
        ws.tmp.path(),
        &[
            "init",
            ws.root.to_str().unwrap(),
            "--store",
            ws.tmp.path().join("store2").to_str().unwrap(),
        ],
    )
    .code(3);
    assert!(
        r.stderr.contains("already a ckpt workspace"),
        "{}",
        r.dump()
    );
    // Also from inside, with no argument.
    ws.run(&[
        "init",
        "--store",
        ws.tmp.path().join("store3").to_str().unwrap(),
    ])
    .code(3);
}

#[test]
fn init_with_relative_dir() {
    let ws = Ws::new();
    let parent = ws.tmp.path();
    ckpt(
        parent,
        &[
            "init",
            "rel",
            "--create",
            "--store",
            parent.join("s").to_str().unwrap(),
        ],
    )
    .ok();
    assert!(
        parent.join("rel/.ckpt").is_file(),
        "marker not at rel/.ckpt"
    );
    assert!(!parent.join("rel/rel").exists(), "init created rel/rel");
}

#[test]
fn commands_outside_a_workspace_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["save"][..],
        &["log"],
        &["status"],
        &["diff"],
        &["show", "v1"],
        &["restore", "v1"],
        &["delete", "v1"],
        &["gc"],
    ] {
        let r = ckpt(dir.path(), args).code(3);
        assert!(r.stderr.contains("not a ckpt workspace"), "{}", r.dump());
    }
    // -C DIR is honoured the same way.
    let r = ckpt(
        std::path::Path::new("/"),
        &["-C", dir.path().to_str().unwrap(), "status"],
    )
    .code(3);
    assert!(r.stderr.contains("not a ckpt workspace"), "{}", r.dump());
}

#[test]
fn unknown_checkpoint_id_exits_2() {
    let (ws, _) = small_ws();
    let before = snapshot(&ws.root);
    for args in [
        &["show", "v99"][..],
        &["restore", "v99"],
        &["diff", "v99"],
        &["diff", "v1", "v42"],
        &["delete", "v99"],
        &["show", "deadbeefdead"],
        &["show", "HEAD~5"],
        &["show", "nonsense"],
    ] {
        ws.run(args).code(2);
    }
    assert_same(&before, &snapshot(&ws.root), "after failed commands");
    assert_eq!(ws.log_ids().len(), 1);
}

#[test]
fn save_with_nothing_changed_records_nothing() {
    let (ws, id) = small_ws();
    let catalog = ws.store.join("catalog.redb");
    let before = std::fs::read(&catalog).unwrap();
    let r = ws.run(&["save"]).ok();
    assert!(r.stdout.contains("nothing changed"), "{}", r.dump());
    // Not even redb's open and close wrote to the catalog.
    assert!(
        std::fs::read(&catalog).unwrap() == before,
        "a save that recorded nothing wrote to the catalog"
    );
    assert_eq!(ws.log_ids(), vec![id.clone()]);
    let v = ws.run(&["save", "--json"]).ok().json();
    assert_eq!(v["saved"], false);
    assert_eq!(v["id"], id.as_str());
    assert_eq!(ws.log_ids().len(), 1);
    let v = ws
        .run(&["save", "--allow-empty", "--json", "-m", "empty"])
        .ok()
        .json();
    assert_eq!(v["saved"], true);
    let ids = ws.log_ids();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], v["id"].as_str().unwrap());
    assert_ne!(ids[0], id);
}

#[test]
fn json_outputs_have_schema_and_documented_fields() {
    let (ws, v1) = small_ws();
    write(&ws.root, "README.md", b"# hello\nline 2\nline three\n");
    write(&ws.root, "src/new.rs", b"pub fn x() {}\n");
    std::fs::remove_file(ws.root.join("data/blob.bin")).unwrap();

    // status
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], false);
    assert_eq!(st["head"], v1.as_str());
    let mut ch = changes(&st);
    ch.sort();
    assert_eq!(
        ch,
        vec![
            ("README.md".into(), "modified".into()),
            ("data/blob.bin".into(), "deleted".into()),
            ("src/new.rs".into(), "added".into()),
        ],
        "{st}"
    );

    // diff (working directory)
    let d = ws.run(&["diff", "--json"]).ok().json();
    let readme = d["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "README.md")
        .unwrap();
    let text = readme["diff"]
        .as_str()
        .unwrap_or_else(|| panic!("no diff text: {readme}"));
    assert!(text.contains("-line two\n+line 2\n"), "{text}");

    // save
    let s = ws
        .run(&[
            "save",
            "--json",
            "-m",
            "second",
            "--tag",
            "agent=test",
            "--tag",
            "turn=2",
        ])
        .ok()
        .json();
    let v2 = s["id"].as_str().unwrap().to_string();
    assert_eq!(s["saved"], true);
    assert_eq!(s["message"], "second");
    assert_eq!(s["tags"]["agent"], "test");
    assert_eq!(s["tags"]["turn"], "2");
    let stats = &s["stats"];
    assert_eq!(stats["files_added"], 1, "{s}");
    assert_eq!(stats["files_modified"], 1, "{s}");
    assert_eq!(stats["files_deleted"], 1, "{s}");
    assert_eq!(s["parent"], v1.as_str());

    // log
    let log = ws.run(&["log", "--json"]).ok().json();
    assert_eq!(log["head"], v2.as_str());
    let cps = log["checkpoints"].as_array().unwrap();
    assert_eq!(cps.len(), 2);
    assert_eq!(cps[0]["id"], v2.as_str());
    assert_eq!(cps[1]["id"], v1.as_str());
    for c in cps {
        assert_eq!(c["hash"].as_str().unwrap().len(), 64, "{c}");
        assert!(
            c["stats"].is_object() && c["time"].is_string() && c["tags"].is_object(),
            "{c}"
        );
    }
    assert_eq!(cps[0]["head"], true);

    // show
    let sh = ws.run(&["show", &v2, "--json"]).ok().json();
    assert_eq!(sh["id"], v2.as_str());
    assert_eq!(sh["stats"], s["stats"]);
    let mut ch2 = changes(&sh);
    ch2.sort();
    assert_eq!(ch2, ch, "show lists what the save changed: {sh}");

    // diff between checkpoints
    let d = ws.run(&["diff", &v1, &v2, "--json"]).ok().json();
    assert_eq!(d["from"], v1.as_str());
    assert_eq!(d["to"], v2.as_str());
    let mut ch3 = changes(&d);
    ch3.sort();
    assert_eq!(ch3, ch, "{d}");

    // status now clean
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(st["clean"], true, "{st}");
    assert_eq!(changes(&st), vec![]);
}

#[test]
fn diff_shows_unified_text_and_binary_lines() {
    let (ws, v1) = small_ws();
    write(
        &ws.root,
        "src/main.rs",
        b"fn main() {\n    println!(\"bye\");\n}\n",
    );
    write(&ws.root, "data/blob.bin", &[0u8, 9, 9, 9, 0, 1]);
    let r = ws.run(&["diff"]).ok();
    assert!(r.stdout.contains("M src/main.rs"), "{}", r.dump());
    assert!(r.stdout.contains("M data/blob.bin"), "{}", r.dump());
    assert!(r.stdout.contains("@@"), "no hunk header:\n{}", r.stdout);
    assert!(
        r.stdout
            .contains("-    println!(\"hi\");\n+    println!(\"bye\");"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("binary file data/blob.bin differs"),
        "{}",
        r.stdout
    );
    // --name-status: no content.
    let r = ws.run(&["diff", "--name-status"]).ok();
    assert!(
        !r.stdout.contains("@@") && !r.stdout.contains("binary file"),
        "{}",
        r.stdout
    );
    // Path limits.
    let r = ws.run(&["diff", "--", "src"]).ok();
    assert!(
        r.stdout.contains("src/main.rs") && !r.stdout.contains("blob.bin"),
        "{}",
        r.stdout
    );
    // Between checkpoints, the same content diff.
    let (v2, _) = ws.save();
    let r = ws.run(&["diff", &v1, &v2]).ok();
    assert!(r.stdout.contains("+    println!(\"bye\");"), "{}", r.stdout);
    assert!(
        r.stdout.contains("binary file data/blob.bin differs"),
        "{}",
        r.stdout
    );
    let j = ws.run(&["diff", &v1, &v2, "--json"]).ok().json();
    let bin = j["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "data/blob.bin")
        .unwrap();
    assert_eq!(bin["binary"], true, "{bin}");
    assert_eq!(bin["old_size"], 9);
    assert_eq!(bin["new_size"], 6);
}

#[test]
fn odd_names_round_trip_and_are_quoted() {
    let (ws, _) = small_ws();
    let nl = ws.root.join(OsStr::from_bytes(b"two\nlines.txt"));
    let bad = ws.root.join(OsStr::from_bytes(b"caf\xe9-\xff.bin"));
    let dir = ws.root.join(OsStr::from_bytes(b"dir\nwith\xfe"));
    std::fs::write(&nl, b"newline in name\n").unwrap();
    std::fs::write(&bad, b"latin-1 name\n").unwrap();
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(OsStr::from_bytes(b"in\xffside")), b"inner\n").unwrap();

    let r = ws.run(&["status"]).ok();
    assert!(r.stdout.contains("A \"two\\nlines.txt\""), "{}", r.stdout);
    assert!(
        r.stdout.contains("A \"caf\\xe9-\\xff.bin\""),
        "{}",
        r.stdout
    );
    for line in r.stdout.lines() {
        assert!(
            !line.is_empty() || r.stdout.ends_with('\n'),
            "raw newline leaked: {:?}",
            r.stdout
        );
    }
    let j = ws.run(&["status", "--json"]).ok().json();
    let hex: String = b"caf\xe9-\xff.bin"
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        j["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["path_hex"] == hex.as_str()),
        "no path_hex {hex} in {j}"
    );

    let (v2, _) = ws.save();
    let s2 = snapshot(&ws.root);
    assert!(s2.contains_key(b"dir\nwith\xfe/in\xffside".as_slice()));
    std::fs::remove_file(&nl).unwrap();
    std::fs::remove_file(&bad).unwrap();
    remove_tree(&dir);
    std::fs::write(ws.root.join("README.md"), b"changed").unwrap();
    ws.run(&["restore", &v2]).ok();
    assert_same(&s2, &snapshot(&ws.root), "restore with odd names");
    ws.assert_restores(&v2, &s2);
    // Restoring only one odd path works too.
    std::fs::remove_file(&nl).unwrap();
    ws.run_os(&[
        OsStr::new("restore"),
        OsStr::new(&v2),
        OsStr::new("--"),
        nl.as_os_str(),
    ])
    .ok();
    assert_same(&s2, &snapshot(&ws.root), "restore -- <newline name>");
}

#[test]
fn ids_hash_prefix_and_head_relative() {
    let (ws, v1) = small_ws();
    write(&ws.root, "x", b"x");
    let (v2, _) = ws.save();
    write(&ws.root, "y", b"y");
    let (v3, _) = ws.save();
    let log = ws.run(&["log", "--json"]).ok().json();
    let cps = log["checkpoints"].as_array().unwrap();
    let hashes: Vec<&str> = cps.iter().map(|c| c["hash"].as_str().unwrap()).collect();
    for (c, h) in cps.iter().zip(&hashes) {
        // Shortest unique prefix of at least 4 hex digits.
        let n = (4..=64)
            .find(|&n| hashes.iter().filter(|o| o.starts_with(&h[..n])).count() == 1)
            .unwrap();
        for prefix in [&h[..n], &h[..n + 4], &h[..]] {
            let sh = ws.run(&["show", prefix, "--json"]).ok().json();
            assert_eq!(sh["id"], c["id"], "prefix {prefix}");
        }
        // Upper case works too.
        let sh = ws
            .run(&["show", &h[..n + 4].to_uppercase(), "--json"])
            .ok()
            .json();
        assert_eq!(sh["id"], c["id"]);
    }
    let id = |rev: &str| {
        ws.run(&["show", rev, "--json"]).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(id("HEAD"), v3);
    assert_eq!(id("HEAD~1"), v2);
    assert_eq!(id("HEAD~2"), v1);
    assert_eq!(id("HEAD~"), v2);
    assert_eq!(id(&format!("{v3}~1")), v2);
    assert_eq!(id("latest"), v3);
    // Restore by prefix and by HEAD~2.
    let s_now = snapshot(&ws.root);
    ws.run(&["restore", "HEAD~2"]).ok();
    assert!(!ws.root.join("x").exists() && !ws.root.join("y").exists());
    ws.run(&["restore", &hashes[0][..12]]).ok();
    assert_same(&s_now, &snapshot(&ws.root), "restore by hash prefix");
}

#[test]
fn restore_dry_run_changes_nothing() {
    let (ws, v1) = small_ws();
    write(&ws.root, "README.md", b"edited\n");
    write(&ws.root, "added.txt", b"added\n");
    std::fs::remove_file(ws.root.join("src/main.rs")).unwrap();
    let before = snapshot(&ws.root);
    let ids = ws.log_ids();
    let r = ws.run(&["restore", &v1, "--dry-run"]).ok();
    assert!(
        r.stdout.contains("README.md") && r.stdout.contains("added.txt"),
        "{}",
        r.dump()
    );
    assert!(r.stdout.contains("dry run"), "{}", r.dump());
    let j = ws.run(&["restore", &v1, "--dry-run", "--json"]).ok().json();
    assert_eq!(j["dry_run"], true);
    assert_eq!(changes(&j).len(), 3, "{j}");
    assert_same(&before, &snapshot(&ws.root), "after restore --dry-run");
    assert_eq!(ws.log_ids(), ids, "dry run recorded a checkpoint");
    let st = ws.run(&["status", "--json"]).ok().json();
    assert_eq!(changes(&st).len(), 3, "{st}");
}

#[test]
fn restore_prints_an_undo_id_that_undoes_it() {
    let (ws, v1) = small_ws();
    let s1 = snapshot(&ws.root);
    // Unsaved edits of every kind.
    write(&ws.root, "README.md", b"unsaved edit\n");
    write(&ws.root, "new/dir/file.txt", b"new\n");
    std::fs::remove_file(ws.root.join("src/main.rs")).unwrap();
    remove_tree(&ws.root.join("empty"));
    chmod(&ws.root.join("data/blob.bin"), 0o600);
    std::fs::remove_file(ws.root.join("main-link")).unwrap();
    std::fs::create_dir(ws.root.join("main-link")).unwrap();
    let s_edit = snapshot(&ws.root);

    let r = ws.run(&["restore", &v1]).ok();
    assert_same(&s1, &snapshot(&ws.root), "restore");
    let undo = r
        .stdout
        .split("undo with `ckpt restore ")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .unwrap_or_else(|| panic!("no undo id printed:\n{}", r.dump()))
        .to_string();
    let r2 = ws.run(&["restore", &undo]).ok();
    assert_same(&s_edit, &snapshot(&ws.root), "restore of the undo id");
    // And the undo of the undo.
    let undo2 = r2
        .stdout
        .split("undo with `ckpt restore ")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .unwrap();
    ws.run(&["restore", undo2]).ok();
    assert_same(&s1, &snapshot(&ws.root), "undo of the undo");
    // --json reports it too.
    let j = ws.run(&["restore", &undo, "--json"]).ok().json();
    assert!(j["undo"].is_string(), "{j}");
    assert_same(&s_edit, &snapshot(&ws.root), "restore --json");
}

#[test]
fn restore_to_non_empty_dir_fails_and_changes_nothing() {
    let (ws, v1) = small_ws();
    write(&ws.root, "README.md", b"edited\n");
    let before = snapshot(&ws.root);
    let ids = ws.log_ids();
    let dest = ws.fresh_dir();
    write(&dest, "keep.txt", b"precious\n");
    let dest_before = snapshot(&dest);
    let r = ws
        .run(&["restore", &v1, "--to", dest.to_str().unwrap()])
        .code(2);
    assert!(
        r.stderr
            .contains("is not empty; `ckpt restore --to` needs a new or empty directory"),
        "{}",
        r.dump()
    );
    assert_same(&dest_before, &snapshot(&dest), "--to target");
    // `ckpt clone` into it: refused before any remote is asked, in its
    // own words.
    let r = ws
        .run(&["clone", "s3://bucket/team", dest.to_str().unwrap()])
        .code(2);
    assert!(
        r.stderr
            .contains("is not empty; `ckpt clone` needs a new or empty directory"),
        "{}",
        r.dump()
    );
    assert_same(&dest_before, &snapshot(&dest), "clone target");
    assert_same(&before, &snapshot(&ws.root), "workspace");
    assert_eq!(ws.log_ids(), ids);
    // Into the workspace itself: refused too.
    let inside = ws.root.join("sub");
    ws.run(&["restore", &v1, "--to", inside.to_str().unwrap()])
        .code(2);
    assert!(!inside.exists());
    // An empty directory is fine.
    let empty = ws.fresh_dir();
    std::fs::create_dir(&empty).unwrap();
    ws.run(&["restore", &v1, "--to", empty.to_str().unwrap()])
        .ok();
    let mut s1 = before.clone();
    s1.remove(b"README.md".as_slice());
    let got = snapshot(&empty);
    assert_eq!(
        got[b"README.md".as_slice()].what,
        What::File(b"# hello\nline two\nline three\n".to_vec())
    );
    let mut got2 = got.clone();
    got2.remove(b"README.md".as_slice());
    assert_same(&s1, &got2, "restore --to an empty dir");
}

#[test]
fn delete_and_gc_free_objects() {
    let (ws, v1) = small_ws();
    let s1 = snapshot(&ws.root);
    let mut rng = Rng::new("delete_and_gc_free_objects", 7);
    fill_dir(&ws.root, "bulk", 50, &mut rng);
    let (v2, _) = ws.save();
    remove_tree(&ws.root.join("bulk"));
    write(&ws.root, "last.txt", b"last\n");
    let (v3, _) = ws.save();
    let s3 = snapshot(&ws.root);
    let before = ws.object_count();
    let g = ws.run(&["gc", "--json"]).ok().json();
    assert_eq!(g["objects_removed"], 0, "gc removed live objects: {g}");
    assert_eq!(ws.object_count(), before);

    let r = ws.run(&["delete", &v2]).ok();
    assert!(r.stdout.contains("deleted"), "{}", r.dump());
    assert_eq!(ws.log_ids(), vec![v3.clone(), v1.clone()]);
    ws.run(&["show", &v2]).code(2);
    let dry = ws.run(&["gc", "--dry-run", "--json"]).ok().json();
    assert_eq!(dry["objects_removed"], 50, "{dry}");
    assert_eq!(ws.object_count(), before, "gc --dry-run removed objects");
    let g = ws.run(&["gc", "--json"]).ok().json();
    assert_eq!(g["objects_removed"], 50, "{g}");
    assert!(g["bytes_freed"].as_u64().unwrap() > 0, "{g}");
    assert_eq!(ws.object_count(), before - 50);
    assert_eq!(g["objects_live"].as_u64().unwrap() as usize, before - 50);
    ws.assert_restores(&v1, &s1);
    ws.assert_restores(&v3, &s3);
    ws.run(&["restore", &v1]).ok();
    assert_same(&s1, &snapshot(&ws.root), "in-place restore after gc");
}

/// Overwrites an object file of `ws` holding `content` with `new` bytes.
fn corrupt_object(ws: &Ws, content: &[u8], new: &[u8]) -> String {
    // Find the object by content (its name is the BLAKE3 hash).
    for shard in std::fs::read_dir(ws.store.join("objects")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if std::fs::read(&p).unwrap() == content {
                chmod(&p, 0o644);
                std::fs::write(&p, new).unwrap();
                chmod(&p, 0o444);
                let shard = p
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                return format!("{shard}{}", p.file_name().unwrap().to_string_lossy());
            }
        }
    }
    panic!("object not found");
}

/// Directory mtimes set to 0 (to compare only files, links and modes).
fn without_dir_mtimes(mut s: Snapshot) -> Snapshot {
    for v in s.values_mut() {
        if v.what == What::Dir {
            v.mtime_ns = 0;
        }
    }
    s
}

/// Corrupts the object of `src/main.rs` as saved in v1, then restores v1:
/// it must fail with exit 5 naming the object and leave the workspace (and
/// a `--to` target) untouched. With `others`, v1 also differs from the
/// workspace in files whose objects are fine. With `strict`, directory
/// mtimes must be untouched too.
fn corrupted_restore_is_refused(new_bytes: &[u8], others: bool, strict: bool) {
    let (ws, v1) = small_ws();
    let original = b"fn main() {\n    println!(\"hi\");\n}\n";
    write(&ws.root, "src/main.rs", b"fn main() {}\n");
    if others {
        write(&ws.root, "added.txt", b"added since v1\n");
        std::fs::remove_file(ws.root.join("README.md")).unwrap();
    }
    let before = snapshot(&ws.root);
    let hash = corrupt_object(&ws, original, new_bytes);
    let r = ws.run(&["restore", &v1]);
    assert_eq!(
        r.code,
        Some(5),
        "restore of a corrupted object:\n{}",
        r.dump()
    );
    assert!(
        r.stderr.contains(&hash[..16]),
        "the error does not name object {hash}:\n{}",
        r.dump()
    );
    let after = snapshot(&ws.root);
    if strict {
        assert_same(&before, &after, "workspace after a refused restore");
    } else {
        assert_same(
            &without_dir_mtimes(before),
            &without_dir_mtimes(after),
            "workspace after a refused restore",
        );
    }
    let dest = ws.fresh_dir().join("fork");
    let r = ws.run(&["restore", &v1, "--to", dest.to_str().unwrap()]);
    assert_eq!(
        r.code,
        Some(5),
        "restore --to of a corrupted object:\n{}",
        r.dump()
    );
    assert!(
        !dest.exists(),
        "a refused restore --to must not leave {} behind",
        dest.display()
    );
}

#[test]
fn corrupted_object_truncated_is_detected_on_restore() {
    corrupted_restore_is_refused(b"fn main", false, false);
}

#[test]
fn corrupted_object_truncated_restore_changes_nothing() {
    corrupted_restore_is_refused(b"fn main", true, false);
}

#[test]
fn corrupted_object_truncated_restore_keeps_dir_mtimes() {
    corrupted_restore_is_refused(b"fn main", false, true);
}

#[test]
fn corrupted_object_same_size_is_detected_on_restore() {
    corrupted_restore_is_refused(b"fn main() {\n    println!(\"HI\");\n}\n", false, false);
}

/// `ckpt annotate`: the text forms of `log` and `show`, `--search`, and
/// refusals (exit 2) that change nothing; the record's hash never moves.
#[test]
fn annotate_shows_in_log_and_show_and_refuses_save_time_keys() {
    let ws = Ws::new();
    ws.init();
    write(&ws.root, "a.txt", b"a\n");
    ws.run(&["save", "-m", "first", "--tag", "session=s1"]).ok();
    let hash = ws.run(&["show", "v1", "--json"]).ok().json()["hash"].clone();
    let out = ws
        .run(&["annotate", "v1", "verdict=good", "--note", "looked at it"])
        .ok();
    assert!(
        out.stdout
            .contains("annotated v1: verdict=good; note: looked at it"),
        "{}",
        out.dump()
    );
    let log = ws.run(&["log"]).ok().stdout;
    assert!(
        log.contains("[session=s1]  (annotated: verdict=good; note: looked at it)"),
        "{log}"
    );
    let show = ws.run(&["show", "v1"]).ok().stdout;
    assert!(
        show.contains("tag:      verdict=good (annotated "),
        "{show}"
    );
    assert!(
        show.contains("note:     looked at it (annotated "),
        "{show}"
    );
    let found = ws.run(&["log", "--search", "VERDICT=GOOD", "--json"]).ok();
    assert_eq!(ids(&found.json()), ["v1"]);
    for (args, says) in [
        (&["annotate", "v1", "session=s2"][..], "part of its record"),
        (
            &["annotate", "v1", "--remove", "session"],
            "part of its record",
        ),
        (&["annotate", "v1"], "nothing to annotate"),
        (&["annotate", "v1", "novalue"], "expected KEY=VALUE"),
        (
            &["annotate", "v1", "a=1", "--remove", "a"],
            "both set and removed",
        ),
        (&["annotate", "v9", "a=1"], "v9"),
    ] {
        let r = ws.run(args).code(2);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.dump());
    }
    let j = ws.run(&["show", "v1", "--json"]).ok().json();
    assert_eq!(j["hash"], hash, "annotating changed the record");
    assert_eq!(j["tags"]["session"], "s1");
    assert_eq!(j["annotations"]["tags"]["verdict"], "good");
    assert_eq!(j["annotations"]["note"], "looked at it");
    let j = ws
        .run(&[
            "annotate", "v1", "--remove", "verdict", "--note", "", "--json",
        ])
        .ok()
        .json();
    assert!(j["annotations"].is_null(), "{j}");
    ws.run(&["delete", "v1"]).ok();
    ws.run(&["annotate", "v1", "a=1"]).code(2);
}
